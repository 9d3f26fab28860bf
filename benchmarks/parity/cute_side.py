"""CuTe DSL 4.8.1 side of the PTX parity table (runs in .bench-venv, no GPU).

    .bench-venv/bin/python benchmarks/parity/cute_side.py OUTDIR [KIND]

(re-executes itself once per kind: CuTe DSL reads CUTE_DSL_ARCH/KEEP/DUMP_DIR
at import.)

For each (kind, verb) builds a minimal kernel: create the pipeline, pick the
role's warp, build a PipelineState from kernel parameters (index, phase, so
nothing folds to constants) and call the verb once ("none" = no verb: the
baseline). Writes OUTDIR/<kind>.<verb>.ptx.
"""
import os
import shutil
import sys

import cutlass
import cutlass.cute as cute
from cutlass import pipeline
from cutlass.pipeline import Agent, CooperativeGroup, PipelineUserType

S = 4
VERBS = ("none", "producer_acquire", "producer_commit", "consumer_wait",
         "consumer_release", "producer_tail")
KINDS = {"async": "sm_90a", "tma_async": "sm_90a", "tma_umma": "sm_100a"}


def make_pipe(kind, storage):
    if kind == "async":
        return pipeline.PipelineAsync.create(
            num_stages=S, producer_group=CooperativeGroup(Agent.Thread, 32),
            consumer_group=CooperativeGroup(Agent.Thread, 32), barrier_storage=storage)
    if kind == "tma_async":
        return pipeline.PipelineTmaAsync.create(
            num_stages=S, producer_group=CooperativeGroup(Agent.Thread, 1),
            consumer_group=CooperativeGroup(Agent.Thread, 4), tx_count=4096,
            barrier_storage=storage)
    return pipeline.PipelineTmaUmma.create(
        num_stages=S, producer_group=CooperativeGroup(Agent.Thread, 1),
        consumer_group=CooperativeGroup(Agent.Thread, 1), tx_count=4096,
        barrier_storage=storage, cta_layout_vmnk=cute.make_layout((1, 1, 1, 1)))


def build(kind, verb):
    @cute.kernel
    def kern(index: cutlass.Int32, phase: cutlass.Int32):
        smem = cutlass.memory.SmemAllocator()
        storage = smem.allocate_array(cutlass.Int64, 2 * S)
        pipe = make_pipe(kind, storage)
        warp = cute.arch.make_warp_uniform(cute.arch.warp_idx())
        if warp == 0:
            st = pipeline.PipelineState(S, cutlass.Int32(0), index, phase)
            if cutlass.const_expr(verb == "producer_acquire"):
                pipe.producer_acquire(st)
            if cutlass.const_expr(verb == "producer_commit"):
                pipe.producer_commit(st)
            if cutlass.const_expr(verb == "producer_tail"):
                pipe.producer_tail(st)
        if warp == 1:
            st = pipeline.PipelineState(S, cutlass.Int32(0), index, phase)
            if cutlass.const_expr(verb == "consumer_wait"):
                pipe.consumer_wait(st)
            if cutlass.const_expr(verb == "consumer_release"):
                pipe.consumer_release(st)

    @cute.jit
    def host(index: cutlass.Int32, phase: cutlass.Int32):
        kern(index, phase).launch(grid=[1, 1, 1], block=[64, 1, 1], smem=1024)

    return host


def main(out, kind=None):
    out = os.path.abspath(out)
    os.makedirs(out, exist_ok=True)
    if kind is None:
        import subprocess
        for k, arch in KINDS.items():
            env = dict(os.environ, CUTE_DSL_ARCH=arch, CUTE_DSL_KEEP="ptx",
                       CUTE_DSL_DUMP_DIR=os.path.join(out, "_dump_" + k))
            subprocess.run([sys.executable, __file__, out, k], env=env, check=True)
        return
    tmp = os.environ["CUTE_DSL_DUMP_DIR"]
    for verb in VERBS:
        shutil.rmtree(tmp, ignore_errors=True)
        os.makedirs(tmp)
        cute.compile(build(kind, verb), cutlass.Int32(1), cutlass.Int32(0))
        ptx = [os.path.join(d, f) for d, _, fs in os.walk(tmp) for f in fs if f.endswith(".ptx")]
        assert len(ptx) == 1, (kind, verb, ptx)
        shutil.move(ptx[0], os.path.join(out, f"{kind}.{verb}.ptx"))
        print("wrote", kind, verb, flush=True)
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "parity-out/cute",
         sys.argv[2] if len(sys.argv) > 2 else None)
