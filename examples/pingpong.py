"""Ping-pong: the handoff latency of a pipeline with nothing to carry.

Warp 0 produces, warp 1 consumes, through a PipelineAsync with one arrive
per warp (``elect_one_commit`` / ``elect_one_release``, no ``__syncwarp``)
and no payload: each iteration is one acquire/commit and one wait/release.
The consumer reads ``clock64`` and ``%globaltimer`` around its loop and
stores (cycles, ns, iterations) to ``out``, so ``ns / n`` is the time of one
handoff (benchmarks/run_bench.py compares it with the hand-written
benchmarks/reference/pingpong.cu, which stores the same three fields).

Parameters of the kernel: ``(n, out)``.

Usage: python examples/pingpong.py [--print-ir] [--out DIR]

``--out DIR``: where the cubin and its launch metadata go (by default a
folder in the system's temporary directory, not the source tree:
examples/_common.py).
"""

import sys

from mlir.dialects import arith, nvvm

from pipeline_mlir.kernel import GlobalPtr, Int32, Kernel, Scalar, store
from pipeline_mlir.kernel.values import i64
from pipeline_mlir.pipeline import (Agent, CooperativeGroup, PipelineAsync,
                                    PipelineUserType, make_pipeline_state)


def build(stages=2, chip="sm_90a", name=None):
    """The kernel (``.module`` is the built module); 64 threads."""
    k = Kernel(name or f"pingpong_s{stages}", chip=chip, block_dim=64,
               params={"n": Int32(), "out": GlobalPtr()})
    with k:
        n, out = k.args
        barriers = k.alloc_barriers(2 * stages)
        one_warp = CooperativeGroup(Agent.Thread, 1)
        pipe = PipelineAsync.create(
            num_stages=stages, producer_group=one_warp, consumer_group=one_warp,
            barrier_storage=barriers, elect_one_commit=True,
            elect_one_release=True, syncwarp_before_commit=False,
            syncwarp_before_release=False)
        warp = k.warp_idx()
        with k.if_(warp == 0):
            state = make_pipeline_state(PipelineUserType.Producer, stages)
            for _, _ in k.range(n, carry=[state]):
                pipe.producer_acquire(state)
                pipe.producer_commit(state)
                state.advance()
            pipe.producer_tail(state)  # after the consumer's timed loop
        with k.if_(warp == 1):
            state = make_pipeline_state(PipelineUserType.Consumer, stages)
            c0 = Scalar(nvvm.read_ptx_sreg_clock64(i64()))
            g0 = Scalar(nvvm.read_ptx_sreg_globaltimer(i64()))
            count = Scalar(arith.constant(i64(), 0))
            for _, _ in k.range(n, carry=[state, count]):
                pipe.consumer_wait(state)
                pipe.consumer_release(state)
                state.advance()
                count.set(count + 1)
            c1 = Scalar(nvvm.read_ptx_sreg_clock64(i64()))
            g1 = Scalar(nvvm.read_ptx_sreg_globaltimer(i64()))
            with k.if_(k.lane_idx() == 0):
                store(c1 - c0, out, 0)
                store(g1 - g0, out, 1)
                store(count, out, 2)
    return k


if __name__ == "__main__":
    from _common import main
    sys.exit(main(build(), "pingpong"))
