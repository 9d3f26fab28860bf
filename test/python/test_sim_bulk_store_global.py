"""The simulator follows bulk copies from shared to global memory
(``cp.async.bulk.global.shared::cta``, sim/gmem.py): their words are
unordered until a ``cp.async.bulk.wait_group`` without ``.read`` retires
their group in the issuing warp, and a release after that wait hands them
over. A partial staged in shared memory, bulk-copied to the workspace and
handed to a CTA of another cluster by a flag: clean with the full wait
before the fence; a race naming the copy with only the ``.read`` wait, with
the wait after the flag, or with none."""

import inspect

import mlir.ir as ir
import pytest
from mlir.dialects import arith, llvm, nvvm, scf

from pipeline_mlir.dialects import pipeline as pl
from pipeline_mlir.kernel import GlobalPtr, Kernel, load, store
from pipeline_mlir.kernel.memory import fence_view_async_shared
from pipeline_mlir.kernel.values import i32, to_value
from pipeline_mlir.pipeline import Agent, CooperativeGroup, PipelineAsync
from pipeline_mlir.sim import simulate
from pipeline_mlir.user_location import UserLine


def _line():
    """The line after the caller's."""
    return inspect.currentframe().f_back.f_lineno + 1


def _ptr(base, index):
    return llvm.getelementptr(base.type, base, [to_value(index, i32())], [-2147483648], i32(), 0)


def _flag_add(flag):
    llvm.atomicrmw(llvm.AtomicBinOp.add, _ptr(to_value(flag), 0), arith.constant(i32(), 1),
                   llvm.AtomicOrdering.monotonic, syncscope="device")


def bulk_handover(plant=None):
    """CTA 0 writes a word per lane into shared memory, fences the proxy,
    bulk-copies the 128 bytes to ``ws`` (lane 0), commits, waits for the
    group (``plant``: "read" waits with .read only, "late" waits after the
    flag, "no wait" never; "groups" commits and waits with the pipeline
    dialect's bulk_group ops, "groups read" with their .read form), fences
    (membar.gl) and bumps the flag; CTA 1 polls the flag, fences and reads
    ``ws``."""
    k = Kernel(f"bulk_{(plant or 'twin').replace(' ', '_')}", block_dim=32,
               params={"ws": GlobalPtr(), "flag": GlobalPtr(align=4), "out": GlobalPtr()})
    lines = {}
    with k:
        ws, flag, out = k.args
        PipelineAsync.create(num_stages=1, producer_group=CooperativeGroup(Agent.Thread, 32),
                             consumer_group=CooperativeGroup(Agent.Thread, 32),
                             barrier_storage=k.alloc_barriers(2), name="unused")
        buf = k.smem_alloc(128)
        cta, lane = k.block_idx(), k.lane_idx()

        groups = plant in ("groups", "groups read")

        def wait(read):
            if groups:
                pl.bulk_group_wait(pending=0, read=read)
            else:
                nvvm.cp_async_bulk_wait_group(0, read=read)

        with k.if_(cta == 0):
            store(lane + 1, buf, lane)
            fence_view_async_shared()
            nvvm.bar_warp_sync(to_value(-1, i32()))
            with k.if_(lane == 0):
                lines["copy"] = _line()
                with UserLine():
                    nvvm.cp_async_bulk_global_shared_cta(to_value(ws), to_value(buf),
                                                         arith.constant(i32(), 128))
                if groups:
                    pl.bulk_group_commit()
                else:
                    nvvm.cp_async_bulk_commit_group()
                if plant in (None, "read", "groups", "groups read"):
                    wait(plant in ("read", "groups read"))
                nvvm.MembarOp(nvvm.MemScopeKind.GPU)
                lines["flag"] = _line()
                with UserLine():
                    _flag_add(flag)
                if plant == "late":
                    wait(False)
        with k.if_(cta == 1):
            loop = scf.WhileOp([], [])
            before, after = loop.before.blocks.append(), loop.after.blocks.append()
            with ir.InsertionPoint(before):
                seen = llvm.load(i32(), _ptr(to_value(flag), 0), alignment=4,
                                 ordering=llvm.AtomicOrdering.monotonic, syncscope="device")
                waiting = arith.cmpi(arith.CmpIPredicate.ne, seen, to_value(1, i32()))
                scf.ConditionOp(nvvm.vote_sync(ir.IntegerType.get_signless(1),
                                               to_value(-1, i32()), waiting,
                                               nvvm.VoteSyncKind.any), [])
            with ir.InsertionPoint(after):
                scf.YieldOp([])
            nvvm.MembarOp(nvvm.MemScopeKind.GPU)
            lines["load"] = _line()
            store(load(ws, i32(), lane), out, lane)
    return k, lines


def _sim(k, schedules=20):
    # two clusters of one CTA: the hand-over crosses clusters
    return simulate(k.module, kernel=k.name, block_dim=k.block_dim, cluster=(1, 1, 1),
                    grid=(2, 1, 1), schedules=schedules, check=False)


@pytest.mark.parametrize("form", [None, "groups"])
def test_a_bulk_copy_waited_before_the_release_is_handed_over_clean(form):
    k, _ = bulk_handover(form)
    res = _sim(k)
    assert res.ok, str(res)


@pytest.mark.parametrize("plant", ["read", "late", "no wait", "groups read"])
def test_a_bulk_copy_not_retired_before_the_release_is_a_race(plant):
    k, lines = bulk_handover(plant)
    res = _sim(k)
    assert set(res[0].counts) == {"gmem-race"}, str(res)
    assert res[0].counts["gmem-race"] == res[0].schedules      # in every schedule
    f = res.findings[0]
    assert f"warp 0 of CTA 1 reads `ws` (argument 0) byte 0" in f.message, f.message
    assert f"test_sim_bulk_store_global.py:{lines['load']}:" in f.message
    assert f"nvvm.cp.async.bulk.global.shared.cta at {__file__}:{lines['copy']}:" in f.message
    if plant == "late":   # retired after the flag: the flag comes first
        assert (f"warp 0 of CTA 0 set `flag` (argument 1) byte 0 (llvm.atomicrmw at "
                f"{__file__}:{lines['flag']}:") in f.message, f.message
        assert "the flag is set before the copy's bytes are retired and fenced" in f.message
    else:
        assert ("no cp.async.bulk.wait_group (without .read) of warp 0 of CTA 0 retired that "
                "bulk copy before the release") in f.message, f.message
