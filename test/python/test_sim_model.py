"""Unit tests of pipeline_mlir.sim's model, verbs and schedulers (no MLIR).

Agents are written directly as Python generators over the verbs, so these
tests pin the semantics (phases, counts, tx bytes, multicast, events) and
the checker independently of the front end.
"""

import pytest

from pipeline_mlir.sim import Group, Mbarrier, PipelineSpec, PipeRef, SimError, State, World, explore
from pipeline_mlir.sim import verbs as V
from pipeline_mlir.sim.model import BarrierName


def bar(count=1):
    return Mbarrier(count, BarrierName("ab", "full", 0, 0))


# -- Mbarrier -----------------------------------------------------------------

def test_fresh_barrier_passes_parity_1_only():
    b = bar()
    # a fresh barrier is in phase 0: parity 1 (the "previous" phase) passes.
    assert b.phase_done(b.target_phase("producer", 1))
    assert not b.phase_done(b.target_phase("consumer", 0))
    b.arrive(1, "p")
    assert b.completed == 1 and b.parity == 1
    assert b.phase_done(b.target_phase("consumer", 0))


def test_phase_completes_on_count_and_tx():
    b = bar(2)
    b.arrive(1, "p", expect_tx=100)
    b.arrive(1, "q")
    assert b.completed == 0 and b.tx == 100
    b.complete_tx(60, "copy", target_parity=0)
    assert b.completed == 0
    b.complete_tx(40, "copy", target_parity=0)
    assert b.completed == 1 and b.pending == 2 and b.tx == 0


def test_bytes_before_expect_tx_are_legal():
    # A peer's multicast copy may land before this CTA armed the barrier.
    b = bar(1)
    b.complete_tx(64, "peer copy", target_parity=0)
    assert b.tx == -64 and b.completed == 0
    b.arrive(1, "p", expect_tx=64)
    assert b.completed == 1


def test_too_many_arrivals():
    b = bar(1)
    b.arrive(1, "p", expect_tx=8)  # all arrivals in, tx still pending
    with pytest.raises(SimError) as e:
        b.arrive(1, "q")
    assert e.value.kind == "arrive-count"
    assert "expects only 0 more of its 1 arrivals" in e.value.message


def test_over_delivery():
    b = bar(1)
    b.arrive(1, "p", expect_tx=8)
    with pytest.raises(SimError) as e:
        b.complete_tx(16, "copy", target_parity=0)
    assert e.value.kind == "tx-count" and "received 16 tx bytes but expect_tx armed only 8" in e.value.message


def test_late_bytes_land_in_the_wrong_phase():
    b = bar(1)
    b.arrive(1, "p", expect_tx=8)
    b.complete_tx(8, "copy 1", target_parity=0)
    with pytest.raises(SimError) as e:
        b.complete_tx(8, "copy 2", target_parity=0)
    assert e.value.kind == "tx-count" and "after phase 0 (#0) had already completed" in e.value.message


def test_overrun_detected_at_the_wait():
    b = bar(1)
    n = b.target_phase("c", 0)
    assert n == 0
    b.arrive(1, "p")
    b.arrive(1, "p")  # phase #1 completes before the waiter saw #0
    with pytest.raises(SimError) as e:
        b.observe("c", n, "consumer")
    assert e.value.kind == "overrun" and "phases #0 and #1 have both completed" in e.value.message


def test_waiter_phase_numbers_alternate():
    b = bar(1)
    seen = []
    for parity in (1, 0, 1, 0):  # a producer's empty-barrier waits
        n = b.target_phase("p", parity)
        seen.append(n)
        if n >= 0:
            b.arrive(1, "c")
        b.observe("p", n, "producer")
    assert seen == [-1, 0, 1, 2]


def test_exited_cta_barrier():
    b = bar(1)
    b.exited = True
    with pytest.raises(SimError) as e:
        b.arrive(1, "peer")
    assert e.value.kind == "exited-cta"


# -- State --------------------------------------------------------------------

def test_state_start_and_advance():
    p = State.start(3, "producer")
    c = State.start(3, "consumer")
    assert (p.index, p.phase, c.index, c.phase) == (0, 1, 0, 0)
    s = p
    for _ in range(3):
        s = s.advance()
    assert (s.index, s.phase, s.count) == (0, 0, 3)
    s = p.advance(7)  # 7 = 2 wraps + 1: phase flips twice
    assert (s.index, s.phase, s.count) == (1, 1, 7)


# -- verbs and schedules ------------------------------------------------------

ASYNC = PipelineSpec("ab", "async", 2, Group("warp", 1), Group("warp", 1))


def async_world(spec=ASYNC, trips=3, producer_advance=1, block=64):
    """Warp 0 produces, warp 1 consumes, as generators over the verbs."""
    p = PipeRef(spec, 0)

    def make():
        w = World((1, 1, 1), block)

        def body(a):
            lanes = list(range(32))
            yield from V.create(w, a, p, False, lanes)
            if a.warp == 0:
                s = State.start(spec.stages, "producer")
                for _ in range(trips):
                    yield from V.producer_acquire(w, a, p, s, lanes)
                    yield from V.producer_commit(w, a, p, s, lanes)
                    s = s.advance(producer_advance)
                yield from V.producer_tail(w, a, p, s, lanes)
            elif a.warp == 1:
                s = State.start(spec.stages, "consumer")
                for _ in range(trips):
                    yield from V.consumer_wait(w, a, p, s, lanes)
                    yield from V.consumer_release(w, a, p, s, lanes)
                    s = s.advance()
        w.spawn(body)
        return w
    return make


def test_async_pipeline_ok_random_and_exhaustive():
    rep = explore(async_world(), seed=3, schedules=50)
    assert rep.ok and rep.schedules == 50
    rep = explore(async_world(), schedules=100000, exhaustive_bound=1)
    assert rep.ok and rep.complete and rep.schedules > 1


def test_state_not_advanced_deadlocks_with_a_precise_message():
    rep = explore(async_world(producer_advance=0), seed=1, schedules=20)
    assert rep.counts["deadlock"] == 20
    (_, err), = rep.first.values()
    assert ("producer warp 0 of CTA 0 waits on pipeline 'ab' empty barrier stage 0 phase 1 "
            "in producer.acquire") in err.message
    assert "consumer warp 1 of CTA 0 waits on pipeline 'ab' full barrier stage 1 phase 0" in err.message


def test_exhaustive_enumerates_every_interleaving():
    # Two agents with two independent always-enabled steps each, no bound on
    # preemptions: C(4, 2) = 6 interleavings (the init sync is skipped).
    order = []

    def make():
        w = World((1, 1, 1), 64)

        def body(a):
            from pipeline_mlir.sim import Step
            for i in range(2):
                yield Step(lambda i=i: order.append((a.warp, i)))
        w.spawn(body)
        return w
    rep = explore(make, schedules=1000, exhaustive_bound=10)
    assert rep.ok and rep.complete and rep.schedules == 6
    rep = explore(make, schedules=1000, exhaustive_bound=0)
    assert rep.schedules == 2  # without preemptions: only who goes first


def test_named_barrier_counts_threads():
    def make(threads):
        def build():
            w = World((1, 1, 1), 64)

            def body(a):
                yield from V.named_sync(w, a, 1, threads, False, list(range(32)))
            w.spawn(body)
            return w
        return build
    assert explore(make(64), schedules=10).ok
    rep = explore(make(96), schedules=10)
    assert rep.counts["deadlock"] == 10
    (_, err), = rep.first.values()
    assert "waits on named barrier 1 of CTA 0 (64 of 96 threads arrived)" in err.message


def test_order_pipeline_alternates_groups():
    # depth 1: group 0 goes first, then each group waits for its predecessor.
    spec = PipelineSpec("ord", "order", 1, Group("warp", 1), length=2)
    p = PipeRef(spec, 0)
    seen = []

    def make():
        w = World((1, 1, 1), 64)

        def body(a):
            lanes = list(range(32))
            yield from V.create(w, a, p, False, lanes)
            s = V.order_state(p, a.warp)
            for _ in range(3):
                yield from V.order_wait(w, a, p, s, a.warp, lanes)
                from pipeline_mlir.sim import Step
                yield Step(lambda: seen.append(a.warp))
                s = yield from V.order_arrive(w, a, p, s, a.warp, lanes)
        w.spawn(body)
        return w
    rep = explore(make, seed=2, schedules=20)
    assert rep.ok
    assert seen[:6] == [0, 1, 0, 1, 0, 1]


def tma_cluster_world(spec, release_everywhere=True, tail=True):
    """2 CTAs, warp 0 multicasts half a stage into both, warp 1 consumes."""
    p = PipeRef(spec, 0)
    half = spec.tx_count // 2

    def make():
        w = World((2, 1, 1), 64)

        def body(a):
            lanes = list(range(32))
            yield from V.create(w, a, p, False, lanes)
            if spec.cluster is None:  # create synced the CTA only
                yield from V.init_arrive(w, a, 2, lanes)
                yield from V.init_wait(w, a, 2, lanes)
            if a.warp == 0:
                s = State.start(2, "producer")
                for _ in range(4):
                    yield from V.producer_acquire(w, a, p, s, lanes)
                    yield from V.copy_load(w, a, p, s, [0], half, 0b11, "copy.tma_load")
                    yield from V.producer_commit(w, a, p, s, lanes)
                    s = s.advance()
                if tail:
                    yield from V.producer_tail(w, a, p, s, lanes)
            else:
                s = State.start(2, "consumer")
                for _ in range(4):
                    yield from V.consumer_wait(w, a, p, s, lanes)
                    yield from V.consumer_release(w, a, p, s, lanes)
                    s = s.advance()
        w.spawn(body)
        return w
    return make


TMA2 = PipelineSpec("ab", "tma_async", 2, Group("thread", 1), Group("thread", 2), tx_count=8192,
                    cluster=(1, 2, 1, 1), multicast="m")


def test_multicast_cluster_ok_and_signalling_lanes():
    assert [TMA2.shares_tile(0, r, False) for r in range(2)] == [True, True]
    assert explore(tma_cluster_world(TMA2), seed=5, schedules=60).ok


def test_missing_tail_flags_arrivals_on_an_exited_cta():
    rep = explore(tma_cluster_world(TMA2, tail=False), seed=5, schedules=60)
    assert rep.counts["exited-cta"] > 0
    assert "has already exited (missing producer_tail" in rep.first["exited-cta"][1].message


def test_cross_cta_release_without_cluster_scope_overwrites():
    # The pipeline type has no cluster, so releases stay in the CTA (CTA
    # scope), while the peer's multicast copies still write into this CTA's
    # stage: the dialect's verifier rejects this combination statically, the
    # simulator shows why (NVIDIA/cutlass#3643).
    local = PipelineSpec("ab", "tma_async", 2, Group("thread", 1), Group("thread", 1),
                         tx_count=8192)
    rep = explore(tma_cluster_world(local), seed=5, schedules=100)
    assert rep.counts["overwrite"] > 0
    msg = rep.first["overwrite"][1].message
    assert "copy.tma_load of producer warp 0 of CTA" in msg and "buffer overwritten before its release" in msg


def test_umma_mask_and_commit_is_an_event():
    spec = PipelineSpec("ab", "tma_umma", 1, Group("thread", 1), Group("thread", 2), tx_count=64,
                        cluster=(2, 1, 1, 1), cta_group=2)
    assert spec.umma_mask(1) == [0, 1] and spec.leader(1) == 0
    p = PipeRef(spec, 0)
    w = World((2, 1, 1), 32)
    seen = []

    def body(a):
        from pipeline_mlir.sim import Step
        lanes = list(range(32))
        yield from V.create(w, a, p, True, lanes)
        yield from V.init_arrive(w, a, 2, lanes)
        yield from V.init_wait(w, a, 2, lanes)
        if a.cta == 0:
            s = State.start(1, "consumer")
            a.holding[(0, 0)] = 1  # as if it had waited
            yield from V.consumer_release(w, a, p, s, lanes)
            # the arrive is still in flight: nothing arrived yet
            seen.append([e.what for e in w.events])
            seen.append([w.cluster.ctas[r].barriers[(0, 1)].pending for r in (0, 1)])
        yield Step(lambda: None, lambda: not w.events)  # both CTAs live until the MMAs are done
    w.spawn(body)
    w.run(lambda n, cont: 0)
    assert len(seen[0]) == 1 and "tcgen05.commit" in seen[0][0]
    assert seen[1] == [2, 2]
    for r in (0, 1):  # then one arrival on both CTAs' empty barrier
        assert w.cluster.ctas[r].barriers[(0, 1)].pending == 1


def test_tma_store_groups_must_finish_before_exit():
    spec = PipelineSpec("st", "tma_store", 2)
    p = PipeRef(spec, 0)

    def make(tail):
        def build():
            w = World((1, 1, 1), 32)

            def body(a):
                s = State.start(2, "producer")
                for _ in range(3):
                    yield from V.producer_acquire(w, a, p, s, [0])
                    yield from V.tma_store(w, a, [0])
                    yield from V.producer_commit(w, a, p, s, [0])
                    s = s.advance()
                if tail:
                    yield from V.producer_tail(w, a, p, s, [0])
            w.spawn(body)
            return w
        return build
    assert explore(make(True), seed=1, schedules=30).ok
    rep = explore(make(False), seed=1, schedules=30)
    assert rep.counts["exited-cta"] > 0
    assert "bulk async-group" in rep.first["exited-cta"][1].message


def test_cp_async_arrive_noinc_is_asynchronous():
    spec = PipelineSpec("cp", "cp_async", 2, Group("thread", 32), Group("warp", 1))
    rep = explore(async_world(spec), seed=4, schedules=40)
    assert rep.ok


def test_integer_division_by_zero_is_unknown_not_a_crash():
    """PTX leaves an integer division by zero unspecified (no trap): the
    simulator's value is unknown, so a branch on it asks for other argument
    values instead of the simulator crashing (the attention kernel divides
    by a head ratio the first argument guess made zero)."""
    from pipeline_mlir.sim.frontend import UNKNOWN
    from pipeline_mlir.sim.interp import _binop

    for op in ("arith.divsi", "arith.divui", "arith.remsi", "arith.remui", "arith.ceildivui"):
        assert _binop(op, 32, 32)(7, 0) is UNKNOWN
    assert _binop("arith.divsi", 32, 32)(7, 2) == 3
    assert _binop("arith.divsi", 32, 32)((-7) & 0xFFFFFFFF, 2) == (-3) & 0xFFFFFFFF
