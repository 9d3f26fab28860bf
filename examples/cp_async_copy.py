"""PipelineCpAsync: a producer warp copies with cp.async, a consumer warp reads.

Each stage is 32 x 16 bytes; every producer lane copies its 16 bytes with
``cp.async.cg.shared.global`` and commits with
``cp.async.mbarrier.arrive.noinc`` (the barrier completes when the copies
land). The consumer warp waits, copies the stage to the output and releases.

Usage: python examples/cp_async_copy.py [--print-ir]
"""

import sys

from mlir.dialects import nvvm

from pipeline_mlir.kernel import GlobalPtr, Int32, Kernel, element_ptr, load, store
from pipeline_mlir.kernel.values import i32
from pipeline_mlir.pipeline import (Agent, CooperativeGroup, PipelineCpAsync,
                                    PipelineUserType, make_pipeline_state)

CHUNK = 16                 # bytes per lane and cp.async
STAGE_BYTES = 32 * CHUNK


def build(num_stages=3, chip="sm_90a"):
    """The kernel (``.module`` is the built module)."""
    k = Kernel("cp_async_copy", chip=chip, block_dim=64,
               params={"src": GlobalPtr(), "dst": GlobalPtr(),
                       "num_chunks": Int32()})
    with k:
        src, dst, num_chunks = k.args
        barriers = k.alloc_barriers(2 * num_stages)
        ring = k.smem_alloc(num_stages * STAGE_BYTES, align=128, name="ring")
        pipeline = PipelineCpAsync.create(
            num_stages=num_stages,
            producer_group=CooperativeGroup(Agent.Thread, 32),
            consumer_group=CooperativeGroup(Agent.Thread, 32),
            barrier_storage=barriers)

        warp_idx, lane = k.warp_idx(), k.lane_idx()
        words = CHUNK // 4
        with k.if_(warp_idx == 0):
            state = make_pipeline_state(PipelineUserType.Producer, num_stages)
            for c, _ in k.range(num_chunks, carry=[state]):
                pipeline.producer_acquire(state)
                to = ring.stage(state.index, STAGE_BYTES) + lane * CHUNK
                frm = element_ptr(src, i32(), (c * 32 + lane) * words)
                nvvm.cp_async_shared_global(to.ir_value, frm, CHUNK,
                                            nvvm.LoadCacheModifierKind.CG)
                pipeline.producer_commit(state)
                state.advance()
            pipeline.producer_tail(state)

        with k.if_(warp_idx == 1):
            state = make_pipeline_state(PipelineUserType.Consumer, num_stages)
            for c, _ in k.range(num_chunks, carry=[state]):
                pipeline.consumer_wait(state)
                stage = ring.stage(state.index, STAGE_BYTES)
                for w in range(words):
                    x = load(stage, i32(), lane * words + w)
                    store(x, dst, (c * 32 + lane) * words + w)
                pipeline.consumer_release(state)
                state.advance()
    return k


if __name__ == "__main__":
    from _common import main
    sys.exit(main(build(), "cp_async_copy"))
