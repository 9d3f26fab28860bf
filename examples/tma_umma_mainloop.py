"""A Blackwell GEMM mainloop's operand ring: TMA producer -> tcgen05 MMA consumer.

The central use case of pipeline-mlir. Warp 0 loads A and B tiles with TMA
into a 3-stage ring; warp 1 waits for each stage, would issue the
``tcgen05.mma`` instructions on it, and releases it with ``consumer_release``
(an elected ``tcgen05.commit`` that arrives on the empty barrier once the MMAs
reading the stage are done). The MMA itself is left as a comment: the point
is the synchronization, which is exactly CuTe DSL's::

    pipeline = PipelineTmaUmma.create(num_stages=3, producer_group=...,
                                      consumer_group=..., tx_count=...,
                                      barrier_storage=...)

Usage: python examples/tma_umma_mainloop.py [--print-ir] [--out DIR]

``--out DIR``: where the cubin and its launch metadata go (by default a
folder in the system's temporary directory, not the source tree:
examples/_common.py).
"""

import sys

from pipeline_mlir.kernel import Int32, Kernel, TmaDescriptor
from pipeline_mlir.pipeline import (Agent, CooperativeGroup, PipelineTmaUmma,
                                    PipelineUserType, make_pipeline_state)

TILE_M, TILE_N, TILE_K = 128, 128, 64
A_BYTES = TILE_M * TILE_K * 2  # bf16
B_BYTES = TILE_N * TILE_K * 2


def build(num_stages=3, chip="sm_100a"):
    """The kernel (``.module`` is the built module)."""
    k = Kernel("tma_umma_mainloop", chip=chip, block_dim=128,
               params={"a_desc": TmaDescriptor(), "b_desc": TmaDescriptor(),
                       "k_tiles": Int32()})
    with k:
        a_desc, b_desc, k_tiles = k.args
        barriers = k.alloc_barriers(2 * num_stages)
        smem_a = k.smem_alloc(num_stages * A_BYTES, align=1024, name="A")
        smem_b = k.smem_alloc(num_stages * B_BYTES, align=1024, name="B")

        # One TMA thread fills a stage (tx_count = bytes of A + B per stage);
        # one tcgen05.commit empties it.
        pipeline = PipelineTmaUmma.create(
            num_stages=num_stages,
            producer_group=CooperativeGroup(Agent.Thread, 1),
            consumer_group=CooperativeGroup(Agent.Thread, 1),
            tx_count=A_BYTES + B_BYTES,
            barrier_storage=barriers)

        warp_idx = k.warp_idx()
        with k.if_(warp_idx == 0):  # TMA producer warp
            producer_state = make_pipeline_state(PipelineUserType.Producer,
                                                 num_stages)
            for kt, _ in k.range(k_tiles, carry=[producer_state]):
                pipeline.producer_acquire(producer_state)
                with k.elect_one():
                    stage = producer_state.index
                    pipeline.tma_load(producer_state, a_desc, [kt * TILE_K, 0],
                                      smem_a.stage(stage, A_BYTES), A_BYTES)
                    pipeline.tma_load(producer_state, b_desc, [kt * TILE_K, 0],
                                      smem_b.stage(stage, B_BYTES), B_BYTES)
                pipeline.producer_commit(producer_state)
                producer_state.advance()
            pipeline.producer_tail(producer_state)

        with k.if_(warp_idx == 1):  # MMA warp
            consumer_state = make_pipeline_state(PipelineUserType.Consumer,
                                                 num_stages)
            for kt, _ in k.range(k_tiles, carry=[consumer_state]):
                pipeline.consumer_wait(consumer_state)
                # tcgen05.mma on smem_a/smem_b stage consumer_state.index,
                # accumulating in tensor memory, goes here.
                pipeline.consumer_release(consumer_state)
                consumer_state.advance()
    return k


if __name__ == "__main__":
    from _common import main
    sys.exit(main(build(), "tma_umma_mainloop"))
