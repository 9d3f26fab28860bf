"""pipeline-mlir side of the PTX parity table: the kernels of cute_side.py,
built with pipeline_mlir.pipeline + pipeline_mlir.kernel.

    .venv/bin/python benchmarks/parity/ours_side.py OUTDIR

Same shape per (kind, verb): 64 threads, warp 0 = producer role, warp 1 =
consumer role, a PipelineState from the kernel parameters (index, phase),
one verb call; "none" is the baseline. The protocol checker is off (a single
acquire without its tail is the point here). Writes OUTDIR/<kind>.<verb>.ptx.
"""
import os
import sys

from pipeline_mlir import compiler
from pipeline_mlir.kernel import Int32, Kernel
from pipeline_mlir.pipeline import (Agent, CooperativeGroup, PipelineAsync,
                                    PipelineState, PipelineTmaAsync,
                                    PipelineTmaUmma, PipelineUserType)

S = 4
VERBS = ("none", "producer_acquire", "producer_commit", "consumer_wait",
         "consumer_release", "producer_tail")
KINDS = {"async": "sm_90a", "tma_async": "sm_90a", "tma_umma": "sm_100a"}


def make_pipe(kind, storage):
    if kind == "async":
        return PipelineAsync.create(
            num_stages=S, producer_group=CooperativeGroup(Agent.Thread, 32),
            consumer_group=CooperativeGroup(Agent.Thread, 32), barrier_storage=storage)
    if kind == "tma_async":
        return PipelineTmaAsync.create(
            num_stages=S, producer_group=CooperativeGroup(Agent.Thread, 1),
            consumer_group=CooperativeGroup(Agent.Thread, 4), tx_count=4096,
            barrier_storage=storage)
    return PipelineTmaUmma.create(
        num_stages=S, producer_group=CooperativeGroup(Agent.Thread, 1),
        consumer_group=CooperativeGroup(Agent.Thread, 1), tx_count=4096,
        barrier_storage=storage, cta_layout_vmnk=(1, 1, 1, 1))


def build(kind, verb):
    k = Kernel(f"parity_{kind}_{verb}", chip=KINDS[kind], block_dim=64,
               params={"index": Int32(), "phase": Int32()})
    with k:
        index, phase = k.args
        pipe = make_pipe(kind, k.alloc_barriers(2 * S))
        warp = k.warp_idx()
        with k.if_(warp == 0):
            st = PipelineState(S, 0, index, phase, user_type=PipelineUserType.Producer)
            if verb in ("producer_acquire", "producer_commit", "producer_tail"):
                getattr(pipe, verb)(st)
        with k.if_(warp == 1):
            st = PipelineState(S, 0, index, phase, user_type=PipelineUserType.Consumer)
            if verb in ("consumer_wait", "consumer_release"):
                getattr(pipe, verb)(st)
    return k


def main(out):
    os.makedirs(out, exist_ok=True)
    for kind in KINDS:
        for verb in VERBS:
            k = build(kind, verb)
            ptx = compiler.to_ptx(k.module, chip=KINDS[kind], verify_protocol=False,
                                  use_cache=False)
            with open(os.path.join(out, f"{kind}.{verb}.ptx"), "w") as f:
                f.write(ptx)
    print("wrote", out)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "parity-out/ours")
