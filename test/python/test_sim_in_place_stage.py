"""The simulator on a stage written in place by the warps that hold it
(a row's output over the row, which the producer then bulk-copies out, as
``RowRing(store="bulk")`` does): with known addresses the holders' stage
loads and stores go into the plain-shared-memory shadow (smemrace.py), so
each thread writing its own values passes, while a warp writing bytes
another holding warp reads (nothing ordering the two) is a ``smem-race``
at the user's lines. The stage is no longer one buffer for them."""

import pytest

from _held_out_bugs import _next_line

S, ELEMS = 2, 64                      # two stages of 64 int32


def _kernel(shared):
    """Warp 0 fills each stage (two stores per lane) and commits; warps 1-2
    (the consumer group of 64 threads) read a value of the stage, write
    it back doubled and release. Each thread its own value, or (``shared``)
    both warps the same 32 values."""
    import mlir.ir as ir
    from mlir.dialects import arith, llvm

    from pipeline_mlir.kernel import Int32, Kernel
    from pipeline_mlir.pipeline import (Agent, CooperativeGroup, make_pipeline_state,
                                        PipelineAsync, PipelineUserType)
    from pipeline_mlir.user_location import user_line

    @user_line
    def double(at):
        x = llvm.load(ir.IntegerType.get_signless(32), at)
        llvm.store(arith.addi(x, x), at)

    k = Kernel(f"in_place_{'shared' if shared else 'own'}", block_dim=96,
               params={"n": Int32()})
    lines = {}
    with k:
        i32 = ir.IntegerType.get_signless(32)
        (n,) = k.args
        pipe = PipelineAsync.create(
            num_stages=S, producer_group=CooperativeGroup(Agent.Thread, 32),
            consumer_group=CooperativeGroup(Agent.Thread, 64),
            barrier_storage=k.alloc_barriers(2 * S), name="rows")
        ring = k.smem_alloc(S * ELEMS * 4, align=128, name="ring")
        tid = k.thread_idx()
        with k.if_(k.warp_idx() == 0):
            s = make_pipeline_state(PipelineUserType.Producer, S)
            for _, (s,) in k.range(n, carry=[s]):
                pipe.producer_acquire(s)
                stage = ring.stage(s.index, ELEMS * 4)
                one = arith.constant(i32, 1)
                llvm.store(one, (stage + tid * 4).ir_value)
                llvm.store(one, (stage + (tid + 32) * 4).ir_value)
                pipe.producer_commit(s)
                s.advance()
            pipe.producer_tail(s)
        with k.if_(k.warp_idx() >= 1):
            c = make_pipeline_state(PipelineUserType.Consumer, S)
            for _, (c,) in k.range(n, carry=[c]):
                pipe.consumer_wait(c)
                stage = ring.stage(c.index, ELEMS * 4)
                at = (stage + ((tid % 32) if shared else (tid - 32)) * 4).ir_value
                lines["double"] = _next_line()
                double(at)
                pipe.consumer_release(c)
                c.advance()
    return k, lines


@pytest.mark.parametrize("shared", [False, True], ids=["own_values", "same_values"])
def test_in_place_writes_of_a_held_stage(shared):
    k, lines = _kernel(shared)
    r = k.simulate({"n": 2 * S + 1}, schedules=8, check=False)
    if not shared:
        assert r.ok, str(r)
        return
    assert {f.kind for f in r.findings} == {"smem-race"}, str(r)
    text = str(r)
    assert f"{__file__}:{lines['double']}:" in text, text
