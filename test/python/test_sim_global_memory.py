"""The simulator follows the global memory a kernel writes and reads back
(sim/gmem.py): a partial stored by one CTA, a fence and a counter bumped
by an atomic; another CTA polls the counter, fences and reads the partial.

The hand-over is built here from the authoring layer's ops (each step at a
line of this file, so every finding names its line); the correct twin
simulates clean, and each planted mistake is found: the flag set before the
partial is fenced, the poll without acquire, a wrong expected count (the
poll never ends: a deadlock naming the loop), a fix-up reading a slot
nobody writes. The project's stream-K kernels: test_sim_streamk_fixup.py."""

import inspect

import mlir.ir as ir
import pytest
from mlir.dialects import arith, llvm, nvvm, scf

from pipeline_mlir.kernel import GlobalPtr, Kernel, load, store
from pipeline_mlir.kernel.values import i32, to_value
from pipeline_mlir.pipeline import Agent, CooperativeGroup, PipelineAsync
from pipeline_mlir.user_location import UserLine


def _line():
    """The line after the caller's."""
    return inspect.currentframe().f_back.f_lineno + 1


def _ptr(base, index):
    return llvm.getelementptr(base.type, base, [to_value(index, i32())], [-2147483648], i32(), 0)


SCOPE = {"kind": nvvm.MemScopeKind.GPU}


def _fence():
    nvvm.MembarOp(SCOPE["kind"])


def _poll(flag, count, lines, fence_after=True):
    """Every lane loads the flag (relaxed, gpu scope) until none sees a
    value other than ``count`` (vote.sync.any), then a gpu fence."""
    lines["poll"] = _line()
    with UserLine():
        loop = scf.WhileOp([], [])
        before, after = loop.before.blocks.append(), loop.after.blocks.append()
        with ir.InsertionPoint(before):
            seen = llvm.load(i32(), _ptr(to_value(flag), 0), alignment=4,
                             ordering=llvm.AtomicOrdering.monotonic, syncscope="device")
            waiting = arith.cmpi(arith.CmpIPredicate.ne, seen, to_value(count, i32()))
            scf.ConditionOp(nvvm.vote_sync(ir.IntegerType.get_signless(1),
                                           to_value(-1, i32()), waiting,
                                           nvvm.VoteSyncKind.any), [])
        with ir.InsertionPoint(after):
            scf.YieldOp([])
    if fence_after:
        with UserLine():
            _fence()


def handoff(plant=None, contributors=1):
    """CTAs 0 .. contributors - 1 each store a partial (32 words, one per
    lane) into slot ``cta`` of ``ws``, fence, and bump ``flag`` (lane 0,
    relaxed atomic add); the last CTA polls until the flag holds every
    contribution, fences, and sums the slots into ``out``. ``plant``: the
    mistake to make. Returns (kernel, lines)."""
    k = Kernel(f"handoff_{plant or 'twin'}", block_dim=32,
               params={"ws": GlobalPtr(), "flag": GlobalPtr(align=4), "out": GlobalPtr()})
    lines = {}
    with k:
        ws, flag, out = k.args
        PipelineAsync.create(num_stages=1, producer_group=CooperativeGroup(Agent.Thread, 32),
                             consumer_group=CooperativeGroup(Agent.Thread, 32),
                             barrier_storage=k.alloc_barriers(2), name="unused")
        cta, lane = k.block_idx(), k.lane_idx()
        with k.if_(cta < contributors):
            lines["store"] = _line()
            store(lane + 1, ws, cta * 32 + lane)
            nvvm.bar_warp_sync(to_value(-1, i32()))
            if plant != "flag before fence":
                with UserLine():
                    _fence()
            with k.if_(lane == 0):
                lines["flag"] = _line()
                with UserLine():
                    llvm.atomicrmw(llvm.AtomicBinOp.add, _ptr(to_value(flag), 0),
                                   arith.constant(i32(), 1), llvm.AtomicOrdering.monotonic,
                                   syncscope="device")
            if plant == "flag before fence":
                with UserLine():
                    _fence()
        with k.if_(cta == contributors):
            expected = contributors + (1 if plant == "wrong count" else 0)
            _poll(flag, expected, lines, fence_after=plant != "poll without acquire")
            total = to_value(0, i32())
            for c in range(contributors):
                slot = c + (contributors if plant == "wrong slot" else 0)
                if c == 0:
                    lines["load"] = _line()
                total = arith.addi(total, to_value(load(ws, i32(), slot * 32 + lane)))
            store(total, out, lane)
    return k, lines


def _finding(k, kind, cluster, schedules=30):
    res = k.simulate(cluster=(cluster, 1, 1), schedules=schedules, check=False)
    found = [f for f in res.findings if f.kind == kind]
    assert found, str(res)
    return found[0]


def _at(line):
    return f"test_sim_global_memory.py:{line}:"


@pytest.mark.parametrize("contributors", [1, 3])
def test_the_hand_over_simulates_clean(contributors):
    k, _ = handoff(contributors=contributors)
    res = k.simulate(cluster=(contributors + 1, 1, 1), schedules=40, check=False)
    assert res.ok, str(res)


def test_the_flag_set_before_the_partial_is_fenced_is_a_race_naming_both_lines():
    k, lines = handoff("flag before fence")
    f = _finding(k, "gmem-race", 2)
    assert "reads `ws` (argument 0) byte 0" in f.message
    assert "the flag is set before the write is fenced" in f.message
    assert _at(lines["flag"]) in f.message                  # the flag's atomic
    assert any(_at(lines["load"]) in w for w in f.where), f.where   # the reader
    assert any(_at(lines["store"]) in w for w in f.where), f.where  # the writer


def test_the_poll_without_acquire_is_a_race_naming_both_lines():
    k, lines = handoff("poll without acquire")
    f = _finding(k, "gmem-race", 2)
    assert "the poll has no acquire" in f.message
    assert any(_at(lines["load"]) in w for w in f.where), f.where
    assert any(_at(lines["store"]) in w for w in f.where), f.where


def test_a_wrong_expected_count_is_a_deadlock_naming_the_poll_loop():
    k, lines = handoff("wrong count", contributors=2)
    f = _finding(k, "deadlock", 3, schedules=5)
    assert "the poll loop at" in f.message and _at(lines["poll"]) in f.message
    assert "reads `flag` (argument 1) byte 0" in f.message
    assert any(w.startswith("warp 0 of CTA 2 at") and _at(lines["poll"]) in w
               for w in f.where), f.where


def test_a_fix_up_reading_a_slot_nobody_writes_is_found():
    k, lines = handoff("wrong slot", contributors=2)
    f = _finding(k, "gmem-unwritten", 3, schedules=5)
    assert "reads `ws` (argument 0) byte 256" in f.message    # slot 2: nobody's
    assert "no warp of the launch writes that word" in f.message
    assert _at(lines["load"]) in f.message


@pytest.mark.parametrize("order", ["monotonic", "release"])
def test_a_relaxed_store_of_the_flag_releases_nothing(order):
    """A flag set by a relaxed atomic store (no fence before it): the poll
    sees it, and the read of the partial is not ordered after its store;
    the same store with release order is the correct twin."""
    k = Kernel(f"flag_{order}", block_dim=32,
               params={"ws": GlobalPtr(), "flag": GlobalPtr(align=4)})
    with k:
        ws, flag = k.args
        PipelineAsync.create(num_stages=1, producer_group=CooperativeGroup(Agent.Thread, 32),
                             consumer_group=CooperativeGroup(Agent.Thread, 32),
                             barrier_storage=k.alloc_barriers(2), name="unused")
        cta, lane = k.block_idx(), k.lane_idx()
        with k.if_(cta == 0):
            store(lane, ws, lane)
            with UserLine():
                llvm.store(arith.constant(i32(), 1), _ptr(to_value(flag), 0),
                           ordering=getattr(llvm.AtomicOrdering, order), syncscope="device",
                           alignment=4)
        with k.if_(cta == 1):
            _poll(flag, 1, {})
            load(ws, i32(), lane)
    if order == "release":
        res = k.simulate(cluster=(2, 1, 1), schedules=30, check=False)
        assert res.ok, str(res)
        return
    f = _finding(k, "gmem-race", 2)
    assert "reads `ws` (argument 0)" in f.message


def test_a_second_wait_on_a_flag_already_set_does_not_hang():
    """The fix-up polls the same flag twice (the second wait finds it set
    at once): each poll waits only on what its own loop read."""
    k2 = Kernel("twice", block_dim=32, params={"ws": GlobalPtr(), "flag": GlobalPtr(align=4)})
    with k2:
        ws, flag = k2.args
        PipelineAsync.create(num_stages=1, producer_group=CooperativeGroup(Agent.Thread, 32),
                             consumer_group=CooperativeGroup(Agent.Thread, 32),
                             barrier_storage=k2.alloc_barriers(2), name="unused")
        cta, lane = k2.block_idx(), k2.lane_idx()
        with k2.if_(cta == 0):
            store(lane, ws, lane)
            _fence()
            llvm.atomicrmw(llvm.AtomicBinOp.add, _ptr(to_value(flag), 0),
                           arith.constant(i32(), 1), llvm.AtomicOrdering.monotonic,
                           syncscope="device")
        with k2.if_(cta == 1):
            _poll(flag, 1, {})
            _poll(flag, 1, {})
            load(ws, i32(), lane)
    res = k2.simulate(cluster=(2, 1, 1), schedules=30, check=False)
    assert res.ok, str(res)


def _take_flag(k, flag, order, lines):
    """Spin on ``cmpxchg flag 1 -> 0`` (``order``) until it succeeds."""
    lines["cas"] = _line()
    with UserLine():
        loop = scf.WhileOp([], [])
        before, after = loop.before.blocks.append(), loop.after.blocks.append()
        with ir.InsertionPoint(before):
            pair = llvm.cmpxchg(_ptr(to_value(flag), 0), arith.constant(i32(), 1),
                                arith.constant(i32(), 0), order, llvm.AtomicOrdering.monotonic,
                                syncscope="device")
            ok = llvm.extractvalue(ir.IntegerType.get_signless(1), pair, [1])
            scf.ConditionOp(arith.xori(ok, arith.constant(ir.IntegerType.get_signless(1), 1)),
                            [])
        with ir.InsertionPoint(after):
            scf.YieldOp([])


@pytest.mark.parametrize("plant", [None, "relaxed cas", "flag never set"])
def test_a_flag_handed_over_by_exchange_and_compare_and_swap(plant):
    """The writer sets the flag with ``atomicrmw xchg`` in release order (no
    fence); the reader takes it with a ``cmpxchg`` loop in acquire order.
    Planted: the cmpxchg relaxed (nothing acquires: a race), and the flag
    exchanged to 2, which the cmpxchg never matches (a deadlock naming the
    loop: a failed compare-and-swap is a poll)."""
    k = Kernel(f"xchg_{plant or 'twin'}".replace(" ", "_"), block_dim=32,
               params={"ws": GlobalPtr(), "flag": GlobalPtr(align=4)})
    lines = {}
    with k:
        ws, flag = k.args
        PipelineAsync.create(num_stages=1, producer_group=CooperativeGroup(Agent.Thread, 32),
                             consumer_group=CooperativeGroup(Agent.Thread, 32),
                             barrier_storage=k.alloc_barriers(2), name="unused")
        cta, lane = k.block_idx(), k.lane_idx()
        with k.if_(cta == 0):
            store(lane, ws, lane)
            with k.if_(lane == 0):
                llvm.atomicrmw(llvm.AtomicBinOp.xchg, _ptr(to_value(flag), 0),
                               arith.constant(i32(), 2 if plant == "flag never set" else 1),
                               llvm.AtomicOrdering.release, syncscope="device")
        with k.if_(cta == 1):
            with k.if_(lane == 0):
                _take_flag(k, flag, llvm.AtomicOrdering.monotonic if plant == "relaxed cas"
                           else llvm.AtomicOrdering.acquire, lines)
            nvvm.bar_warp_sync(to_value(-1, i32()))
            lines["load"] = _line()
            load(ws, i32(), lane)
    res = k.simulate(cluster=(2, 1, 1), schedules=30, check=False)
    if plant is None:
        assert res.ok, str(res)
    elif plant == "relaxed cas":
        f = next(f for f in res.findings if f.kind == "gmem-race")
        assert "the poll has no acquire" in f.message and _at(lines["load"]) in f.message
    else:
        f = next(f for f in res.findings if f.kind == "deadlock")
        assert "the poll loop at" in f.message and _at(lines["cas"]) in f.message


def test_cta_scoped_fences_order_nothing_between_ctas(monkeypatch):
    """membar.cta on both sides of the hand-over: the partial's read in
    another CTA is not ordered after its store."""
    monkeypatch.setitem(SCOPE, "kind", nvvm.MemScopeKind.CTA)
    k, lines = handoff()
    f = _finding(k, "gmem-race", 2)
    assert any(_at(lines["load"]) in w for w in f.where), f.where
