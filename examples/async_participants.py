"""PipelineAsync with make_participants: a producer warp and a consumer warp.

The producer warp writes one i32 per lane into each stage of a 4-stage ring
in shared memory; the consumer warp sums what it reads and stores the sums.
It uses CuTe DSL's participant API::

    producer, consumer = pipeline.make_participants()
    handle = producer.acquire_and_advance(); ...; producer.commit(handle)
    handle = consumer.wait_and_advance(); ...; consumer.release(handle)

Usage: python examples/async_participants.py [--print-ir] [--out DIR]

``--out DIR``: where the cubin and its launch metadata go (by default a
folder in the system's temporary directory, not the source tree:
examples/_common.py).
"""

import sys

from pipeline_mlir.kernel import GlobalPtr, Int32, Kernel, Scalar, load, store
from pipeline_mlir.kernel.values import i32
from pipeline_mlir.pipeline import Agent, CooperativeGroup, PipelineAsync

STAGE_BYTES = 32 * 4  # one i32 per lane


def build(num_stages=4, chip="sm_90a"):
    """The kernel (``.module`` is the built module)."""
    k = Kernel("async_participants", chip=chip, block_dim=64,
               params={"out": GlobalPtr(), "n": Int32()})
    with k:
        out, n = k.args
        barriers = k.alloc_barriers(2 * num_stages)
        ring = k.smem_alloc(num_stages * STAGE_BYTES, align=128, name="ring")
        pipeline = PipelineAsync.create(
            num_stages=num_stages,
            producer_group=CooperativeGroup(Agent.Thread, 32),
            consumer_group=CooperativeGroup(Agent.Thread, 32),
            barrier_storage=barriers)
        producer, consumer = pipeline.make_participants()

        warp_idx, lane = k.warp_idx(), k.lane_idx()
        with k.if_(warp_idx == 0):
            for i, _ in k.range(n, carry=[producer]):
                handle = producer.acquire_and_advance()
                store(i * 32 + lane,
                      ring.stage(handle.index, STAGE_BYTES), lane)
                producer.commit(handle)
            producer.tail()

        with k.if_(warp_idx == 1):
            total = Scalar(0)
            for i, _ in k.range(n, carry=[consumer, total]):
                handle = consumer.wait_and_advance()
                value = load(ring.stage(handle.index, STAGE_BYTES), i32(), lane)
                total.set(total + value)
                consumer.release(handle)
            store(total, out, lane)
    return k


if __name__ == "__main__":
    from _common import main
    sys.exit(main(build(), "async_participants"))
