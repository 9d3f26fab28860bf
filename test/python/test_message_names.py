"""Checker messages in the Python API's terms: kernel
parameters by their Python names (``k_tiles - 1``, not ``%arg2 - 1``). The
Kernel records each parameter's name in the gpu.func's arg_attrs
(``{pipeline.name = "k_tiles"}``); the lowering drops them, so the PTX is
the same with and without."""

import inspect

import mlir.ir as ir
import pytest

from pipeline_mlir.compiler import CompileError
from pipeline_mlir.kernel import GlobalPtr, Int32, Kernel
from pipeline_mlir.pipeline import (Agent, CooperativeGroup, PipelineAsync,
                                    PipelineUserType, make_pipeline_state)

T32 = CooperativeGroup(Agent.Thread, 32)


def gemm_like(consumer_trips):
    """Warp 0 commits ``k_tiles`` stages, warp 1 releases
    ``consumer_trips(k_tiles, flag)``; the third parameter (a pointer)
    comes first, so ``k_tiles`` is %arg1. Returns (kernel, release line)."""
    k = Kernel("names", block_dim=64,
               params={"out": GlobalPtr(), "k_tiles": Int32(), "flag": Int32()})
    with k:
        _, k_tiles, flag = k.args
        pipe = PipelineAsync.create(num_stages=2, producer_group=T32, consumer_group=T32,
                                    barrier_storage=k.alloc_barriers(4), name="ab")
        with k.if_(k.warp_idx() == 0):
            s = make_pipeline_state(PipelineUserType.Producer, 2)
            for _, (s,) in k.range(k_tiles, carry=[s]):
                pipe.producer_acquire(s)
                pipe.producer_commit(s)
                s.advance()
            pipe.producer_tail(s)
        with k.if_(k.warp_idx() == 1):
            c = make_pipeline_state(PipelineUserType.Consumer, 2)
            for _, (c,) in k.range(consumer_trips(k_tiles, flag), carry=[c]):
                pipe.consumer_wait(c)
                pipe.consumer_release(c); line = inspect.currentframe().f_lineno
                c.advance()
    return k, line


def test_the_kernel_records_its_parameter_names():
    k, _ = gemm_like(lambda n, f: n)
    attrs = ir.ArrayAttr(k.func.attributes["arg_attrs"])
    assert [str(ir.DictAttr(a)["pipeline.name"]) for a in attrs] == \
        ['"out"', '"k_tiles"', '"flag"']


@pytest.mark.parametrize("trips,counts", [
    (lambda n, f: n - 1,
     "commits k_tiles stages, the consumer role (one warp) releases k_tiles - 1 "
     "(for k_tiles = 1: 1 against 0)"),
    (lambda n, f: n * f,
     "releases flag * k_tiles (for "),
])
def test_stage_balance_names_the_parameters(trips, counts):
    k, line = gemm_like(trips)
    with pytest.raises(CompileError) as info:
        k.compile()
    text = str(info.value)
    assert text.startswith(f"{__file__}:{line}:")
    assert counts in text, text
    assert "%arg" not in text.split("\n")[0], text


def test_names_change_nothing_in_the_ptx():
    k, _ = gemm_like(lambda n, f: n)
    named = k.to_ptx()
    with k.context:
        del k.func.attributes["arg_attrs"]
    assert "pipeline.name" not in str(k.func)
    assert k.to_ptx() == named


def test_loop_variables_take_the_for_targets_name():
    # The checker prints a loop's variable by this name where it appears in
    # a count (a sum over the tiles of a persistent loop: `sum(tile in
    # [0, tiles): ...)`); `_` and loops without a name keep `%iv`.
    from _ir_utils import ops_named
    k = Kernel("loops", block_dim=32, params={"tiles": Int32()})
    with k:
        for tile, _ in k.range(k.args.tiles, carry=[]):
            for _ in k.range(tile):
                pass
    outer, inner = ops_named(k.module, "scf.for")
    assert str(outer.attributes["pipeline.iv_name"]) == '"tile"'
    assert "pipeline.iv_name" not in inner.attributes
