"""CuTe DSL 4.8.1 side of the PTX parity table (runs in .bench-venv, no GPU).

    .bench-venv/bin/python benchmarks/parity/cute_side.py OUTDIR [KIND ...]

(re-executes itself once per kind, all of cases.py's by default: CuTe DSL reads CUTE_DSL_ARCH/KEEP/DUMP_DIR
at import.)

For each (kind, verb) of cases.py builds the minimal kernel described there:
create the pipeline, pick the role's warp, build a PipelineState from kernel
parameters (index, phase, so nothing folds to constants) and call the verb
once ("none" = no verb: the baseline). Writes OUTDIR/<kind>.<verb>.ptx; a
verb CuTe DSL rejects is reported and skipped.
"""
import os
import shutil
import sys
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cases import CLC_TX, GROUPS, KINDS, ORDER_LENGTH, S, TX, consumer_side  # noqa: E402

import cutlass  # noqa: E402
import cutlass.cute as cute  # noqa: E402
from cutlass import pipeline  # noqa: E402
from cutlass.pipeline import Agent, CooperativeGroup, PipelineOp  # noqa: E402


def T(n):
    return CooperativeGroup(Agent.Thread, n)


def make_pipe(kind, storage):
    p, c = GROUPS[kind]
    one = dict(cta_layout_vmnk=cute.make_layout((1, 1, 1, 1)))
    if kind == "async":
        return pipeline.PipelineAsync.create(num_stages=S, producer_group=T(p),
                                             consumer_group=T(c), barrier_storage=storage)
    if kind == "cp_async":
        return pipeline.PipelineCpAsync.create(num_stages=S, producer_group=T(p),
                                               consumer_group=T(c), barrier_storage=storage)
    if kind == "tma_async":
        return pipeline.PipelineTmaAsync.create(num_stages=S, producer_group=T(p),
                                                consumer_group=T(c), tx_count=TX,
                                                barrier_storage=storage)
    if kind == "tma_store":
        return pipeline.PipelineTmaStore.create(num_stages=S, producer_group=T(p))
    if kind == "order":
        return pipeline.PipelineOrder.create(depth=S, length=ORDER_LENGTH, group_id=0,
                                             producer_group=T(p), barrier_storage=storage)
    if kind == "named_barrier":
        return pipeline.NamedBarrier(barrier_id=p, num_threads=c)
    if kind == "tma_umma":
        return pipeline.PipelineTmaUmma.create(num_stages=S, producer_group=T(p),
                                               consumer_group=T(c), tx_count=TX,
                                               barrier_storage=storage, **one)
    if kind == "async_umma":
        return pipeline.PipelineAsyncUmma.create(num_stages=S, producer_group=T(p),
                                                 consumer_group=T(c),
                                                 barrier_storage=storage, **one)
    if kind == "umma_async":
        return pipeline.PipelineUmmaAsync.create(num_stages=S, producer_group=T(p),
                                                 consumer_group=T(c),
                                                 barrier_storage=storage, **one)
    if kind == "tma_multi_consumers_async":
        return pipeline.PipelineTmaMultiConsumersAsync.create(
            num_stages=S, producer_group=T(p), consumer_group_umma=T(c[0]),
            consumer_group_async=T(c[1]), tx_count=TX, barrier_storage=storage, **one)
    if kind == "clc_fetch_async":
        return pipeline.PipelineClcFetchAsync.create(
            num_stages=S, producer_group=T(p), consumer_group=T(c), tx_count=CLC_TX,
            barrier_storage=storage, **one)
    raise ValueError(kind)


def call(kind, pipe, verb, st):
    if kind == "named_barrier" or kind == "order":
        getattr(pipe, verb)()
    elif kind == "tma_store":
        getattr(pipe, verb)()
    elif verb == "consumer_release_async":
        pipe.consumer_release(st, PipelineOp.AsyncThread)
    else:
        getattr(pipe, verb)(st)


def build(kind, verb):
    @cute.kernel
    def kern(index: cutlass.Int32, phase: cutlass.Int32):
        smem = cutlass.memory.SmemAllocator()
        storage = smem.allocate_array(cutlass.Int64, 2 * S)
        pipe = make_pipe(kind, storage)
        warp = cute.arch.make_warp_uniform(cute.arch.warp_idx())
        if warp == 0:
            st = pipeline.PipelineState(S, cutlass.Int32(0), index, phase)
            if cutlass.const_expr(verb != "none" and not consumer_side(verb)):
                call(kind, pipe, verb, st)
        if warp == 1:
            st = pipeline.PipelineState(S, cutlass.Int32(0), index, phase)
            if cutlass.const_expr(verb != "none" and consumer_side(verb)):
                call(kind, pipe, verb, st)

    @cute.jit
    def host(index: cutlass.Int32, phase: cutlass.Int32):
        kern(index, phase).launch(grid=[1, 1, 1], block=[64, 1, 1], smem=1024)

    return host


def main(out, kinds, child=False):
    out = os.path.abspath(out)
    os.makedirs(out, exist_ok=True)
    if not child:
        import subprocess
        for k in kinds or list(KINDS):
            env = dict(os.environ, CUTE_DSL_ARCH=KINDS[k][0], CUTE_DSL_KEEP="ptx",
                       CUTE_DSL_DUMP_DIR=os.path.join(out, "_dump_" + k),
                       PARITY_CUTE_CHILD="1")
            subprocess.run([sys.executable, __file__, out, k], env=env, check=True)
        return
    kind, = kinds
    tmp = os.environ["CUTE_DSL_DUMP_DIR"]
    for verb in ("none",) + KINDS[kind][1]:
        shutil.rmtree(tmp, ignore_errors=True)
        os.makedirs(tmp)
        try:
            cute.compile(build(kind, verb), cutlass.Int32(1), cutlass.Int32(0))
        except Exception:
            print(f"SKIP {kind} {verb}: CuTe DSL rejected it:\n"
                  + traceback.format_exc(limit=2), flush=True)
            continue
        ptx = [os.path.join(d, f) for d, _, fs in os.walk(tmp) for f in fs if f.endswith(".ptx")]
        assert len(ptx) == 1, (kind, verb, ptx)
        shutil.move(ptx[0], os.path.join(out, f"{kind}.{verb}.ptx"))
        print("wrote", kind, verb, flush=True)
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "parity-out/cute", sys.argv[2:],
         child=os.environ.get("PARITY_CUTE_CHILD") == "1")
