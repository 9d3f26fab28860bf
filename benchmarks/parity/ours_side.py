"""pipeline-mlir side of the PTX parity table: the kernels of cute_side.py,
built with pipeline_mlir.pipeline + pipeline_mlir.kernel.

    .venv/bin/python benchmarks/parity/ours_side.py OUTDIR [KIND ...]

Same shape per (kind, verb) of cases.py: 64 threads, warp 0 = producer role,
warp 1 = consumer role, a PipelineState from the kernel parameters (index,
phase), one verb call; "none" is the baseline. The protocol checker is off
(a single acquire without its tail is the point here). Writes
OUTDIR/<kind>.<verb>.ptx.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cases import CLC_TX, GROUPS, KINDS, ORDER_LENGTH, S, TX, consumer_side  # noqa: E402

from pipeline_mlir import compiler  # noqa: E402
from pipeline_mlir.kernel import Int32, Kernel  # noqa: E402
from pipeline_mlir.pipeline import (Agent, CooperativeGroup, NamedBarrier,  # noqa: E402
                                    PipelineAsync, PipelineCpAsync, PipelineOp,
                                    PipelineOrder, PipelineState, PipelineUserType)
from pipeline_mlir.pipeline.tma_pipelines import (PipelineTmaAsync,  # noqa: E402
                                                  PipelineTmaMultiConsumersAsync,
                                                  PipelineTmaStore)
from pipeline_mlir.pipeline.umma_pipelines import (PipelineAsyncUmma,  # noqa: E402
                                                   PipelineClcFetchAsync,
                                                   PipelineTmaUmma, PipelineUmmaAsync)


def T(n):
    return CooperativeGroup(Agent.Thread, n)


def make_pipe(kind, storage):
    p, c = GROUPS[kind]
    one = dict(cta_layout_vmnk=(1, 1, 1, 1))
    if kind == "async":
        return PipelineAsync.create(num_stages=S, producer_group=T(p), consumer_group=T(c),
                                    barrier_storage=storage)
    if kind == "cp_async":
        return PipelineCpAsync.create(num_stages=S, producer_group=T(p), consumer_group=T(c),
                                      barrier_storage=storage)
    if kind == "tma_async":
        return PipelineTmaAsync.create(num_stages=S, producer_group=T(p), consumer_group=T(c),
                                       tx_count=TX, barrier_storage=storage)
    if kind == "tma_store":
        return PipelineTmaStore.create(num_stages=S, producer_group=T(p))
    if kind == "order":
        return PipelineOrder.create(storage, depth=S, length=ORDER_LENGTH, group_id=0,
                                    producer_group=T(p))
    if kind == "named_barrier":
        return NamedBarrier(barrier_id=p, num_threads=c)
    if kind == "tma_umma":
        return PipelineTmaUmma.create(num_stages=S, producer_group=T(p), consumer_group=T(c),
                                      tx_count=TX, barrier_storage=storage, **one)
    if kind == "async_umma":
        return PipelineAsyncUmma.create(num_stages=S, producer_group=T(p), consumer_group=T(c),
                                        barrier_storage=storage, **one)
    if kind == "umma_async":
        return PipelineUmmaAsync.create(num_stages=S, producer_group=T(p), consumer_group=T(c),
                                        barrier_storage=storage, **one)
    if kind == "tma_multi_consumers_async":
        return PipelineTmaMultiConsumersAsync.create(
            num_stages=S, producer_group=T(p), consumer_group_umma=T(c[0]),
            consumer_group_async=T(c[1]), tx_count=TX, barrier_storage=storage, **one)
    if kind == "clc_fetch_async":
        return PipelineClcFetchAsync.create(
            num_stages=S, producer_group=T(p), consumer_group=T(c), tx_count=CLC_TX,
            barrier_storage=storage, **one)
    raise ValueError(kind)


def call(kind, pipe, verb, st):
    if kind in ("named_barrier", "order", "tma_store"):
        getattr(pipe, verb)()
    elif verb == "consumer_release_async":
        pipe.consumer_release(st, PipelineOp.AsyncThread)
    elif kind == "tma_multi_consumers_async" and verb == "consumer_release":
        pipe.consumer_release(st, PipelineOp.TCGen05Mma)
    else:
        getattr(pipe, verb)(st)


def build(kind, verb):
    chip = KINDS[kind][0]
    k = Kernel(f"parity_{kind}_{verb}", chip=chip, block_dim=64,
               params={"index": Int32(), "phase": Int32()})
    with k:
        index, phase = k.args
        pipe = make_pipe(kind, k.alloc_barriers(2 * S))
        warp = k.warp_idx()
        for w, role in ((0, PipelineUserType.Producer), (1, PipelineUserType.Consumer)):
            with k.if_(warp == w):
                st = PipelineState(S, 0, index, phase, user_type=role)
                if verb != "none" and consumer_side(verb) == (w == 1):
                    call(kind, pipe, verb, st)
    return k


def main(out, kinds):
    os.makedirs(out, exist_ok=True)
    for kind in kinds or KINDS:
        for verb in ("none",) + KINDS[kind][1]:
            k = build(kind, verb)
            ptx = compiler.to_ptx(k.module, chip=KINDS[kind][0], verify_protocol=False,
                                  use_cache=False)
            with open(os.path.join(out, f"{kind}.{verb}.ptx"), "w") as f:
                f.write(ptx)
    print("wrote", out)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "parity-out/ours", sys.argv[2:])
