"""The pipeline verbs as steps on the model: what each CuTe DSL pipeline
method does to the barriers.

Each verb is a generator function ``verb(world, agent, pipe, state, lanes,
...)`` that yields the :class:`~.engine.Step` objects of one warp executing
the op with active ``lanes`` (a list of lane ids; ``lanes[0]`` is the lane
``elect.sync`` picks). What each pipeline kind means -- which mechanism
signals each side, init counts with the 2-CTA doubling, who arms expect_tx,
where commits and releases land, signalling lanes -- is read from the
dialect's table (KindTraits.h, through ``pipeline.kind_traits`` and
``pipeline.barrier_plan``), the one the lowering and the checker use; the
starting phases, complete_tx and the multicast geometry follow the reference
tables.

Besides the barriers themselves the verbs keep the bookkeeping the checker
needs: which stages a consumer holds (wait .. release, or until its
tcgen05.commit lands), which stages a producer or a copy writes, and which
agent acts on which side of which pipeline.
"""

from __future__ import annotations

from collections import Counter

from .engine import Agent, Event, Step, World
from .model import BarrierName, Mbarrier, SimError, source_location
# The pipelines the verbs act on, re-exported: callers import them from here.
from .pipeline_types import (ASYNC, CLC, CPASYNC, STORE, TMA, UMMA, Group,  # noqa: F401
                             PipelineSpec, PipeRef, State, init_counts)


# -- helpers ------------------------------------------------------------------

def _slot_name(spec: PipelineSpec, slot: int, cta: int) -> BarrierName:
    if spec.kind == "order":
        return BarrierName(spec.name, "order", slot, cta)
    if slot < spec.stages:
        return BarrierName(spec.name, "full", slot, cta)
    return BarrierName(spec.name, "empty", slot - spec.stages, cta)


def _barrier(w: World, a: Agent, p: PipeRef, slot: int, cta: int) -> Mbarrier:
    if cta >= w.cluster.size:
        raise SimError("unsupported", f"pipeline '{p.spec.name}' signals CTA {cta}, outside the "
                                      f"launched cluster of {w.cluster.size} CTA(s)")
    bar = w.cluster.ctas[cta].barriers.get((p.pid, slot))
    if bar is None:
        name = _slot_name(p.spec, slot, cta)
        raise SimError(
            "uninitialized",
            f"{a.label(p.spec.name)} uses {name} before warp 0 of CTA {cta} initialized it "
            f"(missing sync after pipeline.create, or init_wait)")
    return bar


def _where(name: BarrierName, a: Agent) -> str:
    s = f"pipeline '{name.pipeline}' {name.side} barrier stage {name.stage}"
    return s if name.cta == a.cta else f"{s} of CTA {name.cta}"


def _key(p: PipeRef, cta: int, stage: int) -> tuple:
    return (cta, p.pid, stage)


def _buf(p: PipeRef, cta: int, stage: int) -> str:
    return f"pipeline '{p.spec.name}' stage {stage} of CTA {cta}"


def wait(w: World, a: Agent, p: PipeRef, slot: int, cta: int, parity: int, verb: str, after=None,
         exact: int | None = None):
    """A blocking try_wait.parity loop, as one step enabled when it passes.

    ``exact``: the phase number the waiter's state means (State.phase_number),
    when known. The wait then passes as the hardware's does, whenever the
    barrier's current parity differs from ``parity``, and passing on an
    earlier phase of that parity (phase #n-1 not yet complete: the state
    jumped over phases another agent waits on, and nothing ordered this
    wait after them) is a finding: the stage still holds what it held two
    phases ago."""
    name = _slot_name(p.spec, slot, cta)

    def bar():
        return w.cluster.ctas[cta].barriers.get((p.pid, slot))

    def enabled():
        b = bar()
        if b is None:
            return True
        n = b.target_phase(a.id, parity, exact)
        return b.phase_done(n) or (n == exact and b.parity != parity)

    def located(who):
        loc = source_location(a.where)
        return [f"{who} at {loc}"] if loc else []

    def fire():
        b = _barrier(w, a, p, slot, cta)
        n = b.target_phase(a.id, parity, exact)
        who = a.label(p.spec.name)
        if n == -1 and name.side == "full":
            raise SimError(
                "initial-phase",
                f"{who} passes {verb} on {_where(name, a)} phase {parity} before any phase of it "
                f"completed: a consumer state must start at phase 0 (wrong initial phase)",
                located(who))
        if not b.phase_done(n):
            kind = "early-read" if name.side == "full" else "overwrite"
            raise SimError(
                kind,
                f"{who} passes {verb} on {_where(name, a)} for phase {parity} (#{n}) while "
                f"phase #{b.completed} is in progress: parity {parity} also names phase "
                f"#{b.completed - 1}, which completed, so the wait returns on the stage's old "
                f"{'contents' if name.side == 'full' else 'reader'}. Its state jumped over "
                f"phase #{n - 1} of this barrier (state.advance(n) over stages another agent "
                f"consumes) and nothing orders this wait after that phase: make the agents "
                f"take turns (PipelineOrder.wait before the loop, arrive after it, as "
                f"CUTLASS's ping-pong consumers do) or give each its own stages",
                located(who))
        try:
            b.observe(a.id, n, who)
        except SimError as e:
            e.where = e.where or located(who)
            raise
        w.clocks.acquire(a, b.phase_clocks.get(n))
        if after:
            after()

    def what():
        b = bar()
        detail = f" ({b.describe()})" if b else " (not initialized)"
        return f"{a.label(p.spec.name)} waits on {_where(name, a)} phase {parity} in {verb}{detail}"

    def cause():
        b = bar()
        return b.root_cause() if b else None

    yield Step(fire, enabled, what, p.spec.name, cause)


def _try_wait(w: World, a: Agent, p: PipeRef, slot: int, parity: int, exact: int | None = None):
    def fire():
        b = _barrier(w, a, p, slot, a.cta)
        n = b.target_phase(a.id, parity, exact)
        if not b.phase_done(n):
            return 0
        b.observe(a.id, n, a.label(p.spec.name))
        w.clocks.acquire(a, b.phase_clocks.get(n))
        return 1
    return (yield Step(fire, None, lambda: f"{a.label(p.spec.name)} try_wait", p.spec.name))


def _lanes_arrivals(lanes: list[int], elect_one: bool) -> int:
    return 1 if elect_one else len(lanes)


# -- creation and init sync ---------------------------------------------------

def create(w: World, a: Agent, p: PipeRef, defer_sync: bool, lanes: list[int]):
    spec = p.spec

    def fire():
        if a.warp != 0:
            return
        cta = w.cluster.ctas[a.cta]
        csize = w.cluster.size
        plan = spec.plan
        if not plan["num_barriers"]:
            return
        # Full barriers first, then empty ones (an order pipeline's barriers
        # all count the producer group).
        full, empty = init_counts(spec, w.block_threads, csize)
        nfull = plan["num_full"]
        slots = [(s, full) for s in range(nfull)]
        slots += [(nfull + s, empty) for s in range(plan["num_empty"])]
        for slot, count in slots:
            b = cta.barriers.setdefault((p.pid, slot),
                                        Mbarrier(count, _slot_name(spec, slot, a.cta)))
            b.hb = w.clocks
            if slot >= nfull and spec.kind != "order":
                b.on_complete = (lambda clock, idx=slot - nfull, c=a.cta:
                                 _end_covered_holds(w, p, c, idx, clock))

    yield Step(fire, None, lambda: f"{a.label()} creates pipeline '{spec.name}'", spec.name)
    # PipelineTmaStore owns no barriers, so its create synchronizes nothing
    # (as the lowering: BarrierLowering.cpp); a CTA-wide sync here would
    # deadlock kernels that create it inside one warp role.
    if not defer_sync and spec.traits["has_barriers"]:
        if spec.cluster_size > 1:
            yield from init_arrive(w, a, spec.cluster_size, lanes)
            yield from init_wait(w, a, spec.cluster_size, lanes)
        else:
            yield from named_sync(w, a, 0, w.block_threads, False, lanes)


def init_arrive(w: World, a: Agent, cluster_size: int, lanes: list[int]):
    if cluster_size <= 1:
        return
    yield from cluster_arrive(w, a, lanes)


def init_wait(w: World, a: Agent, cluster_size: int, lanes: list[int]):
    if cluster_size <= 1:
        yield from named_sync(w, a, 0, w.block_threads, False, lanes)
        return
    yield from cluster_wait(w, a, lanes, "pipeline.init_wait", "init_arrive")


def _live(w: World):
    return [x for x in w.agents if not x.done]


def cluster_arrive(w: World, a: Agent, lanes: list[int], relaxed: bool = False):
    """``barrier.cluster.arrive`` by the active lanes (model.ClusterBarrier);
    ``.relaxed`` orders no memory (it releases no clock)."""
    cb = w.cluster.barrier

    def fire():
        gen = cb.arrive(a, len(lanes), a.label(), _live(w))
        if not relaxed:
            w.clocks.named_arrived(cb, gen)
        a.cluster_gen = gen
    yield Step(fire, None, lambda: f"{a.label()} arrives on {cb.name}")


def cluster_wait(w: World, a: Agent, lanes: list[int], verb: str = "barrier.cluster.wait",
                 arrive: str = "barrier.cluster.arrive"):
    """``barrier.cluster.wait``: until the phase of this warp's last arrive
    completes (every thread of the cluster not exited arrived)."""
    cb = w.cluster.barrier
    if a.cluster_gen is None:
        raise SimError("unbalanced", f"{a.label()} runs {verb} without {arrive} before it")
    gen = a.cluster_gen

    def fire():
        w.clocks.named_passed(a, cb, gen)
        a.cluster_gen = None
    yield Step(fire, lambda: cb.generation > gen,
               lambda: f"{a.label()} waits on {cb.name} ({cb.progress(_live(w))})")


def named_arrive(w: World, a: Agent, bar_id: int, threads: int, unaligned: bool, lanes: list[int],
                 start_signal: bool = False):
    """``bar.arrive``; ``start_signal``: the op lies outside every loop (a
    first turn handed over once, whose arrivals may be left pending at the
    CTA's exit: see ``World.agent_finished``)."""
    nb = w.cluster.ctas[a.cta].named_barrier(bar_id)
    k = len(lanes) if unaligned else a.threads
    where = a.where

    def fire():
        if start_signal:
            nb.credit += k
        gen = nb.arrive(k, threads, a.label(), None if unaligned else a.warp)
        nb.last_arrive = (a.label(), where)
        w.clocks.named_arrived(nb, gen)
        return gen
    yield Step(fire, None, lambda: f"{a.label()} arrives on {nb.name}")


def named_sync(w: World, a: Agent, bar_id: int, threads: int, unaligned: bool, lanes: list[int]):
    nb = w.cluster.ctas[a.cta].named_barrier(bar_id)
    k = len(lanes) if unaligned else a.threads
    def arrive():
        gen = nb.arrive(k, threads, a.label(), None if unaligned else a.warp)
        w.clocks.named_arrived(nb, gen)
        return gen
    gen = yield Step(arrive, None, lambda: f"{a.label()} arrives on {nb.name}")
    yield Step(lambda: w.clocks.named_passed(a, nb, gen), lambda: nb.generation > gen,
               lambda: f"{a.label()} waits on {nb.name} ({nb.count} of {threads} threads arrived)")


# -- producer side ------------------------------------------------------------

def _arrive_kind(p: PipeRef) -> bool:
    return p.spec.producer_op in (ASYNC, CPASYNC, UMMA)


def producer_acquire(w: World, a: Agent, p: PipeRef, st: State, lanes: list[int],
                     token: int | None = None, extra_tx: int = 0):
    spec = p.spec
    a.use(spec.name, "producer", "producer.acquire", st.role == "producer_consumer")
    if spec.kind == "tma_store":
        yield from bulk_wait(w, a, spec.stages - 1)
        return
    idx = st.index
    who = a.label(spec.name)
    key = (p.pid, idx)
    _tie_state(a, p, st)

    def opened():
        a.committed.pop(key, None)
        if _arrive_kind(p):
            if a.acquired[key]:
                raise SimError(
                    "unbalanced",
                    f"{who} acquires {_buf(p, a.cta, idx)} again before committing it "
                    f"(unbalanced producer.acquire / producer.commit)")
            w.start_write(_key(p, a.cta, idx), _window(who), _buf(p, a.cta, idx))
        a.acquired[key] += 1

    if not token:
        yield from wait(w, a, p, spec.stages + idx, a.cta, st.phase, "producer.acquire", opened,
                        st.phase_number())
    else:
        yield Step(opened, None, lambda: f"{who} acquires stage {idx} (token)", spec.name)
    arm = spec.plan["arm"]
    if arm == "every_cluster_cta":
        # The response is multicast to the whole cluster: lane r arms CTA r.
        nbytes = spec.tx_count + extra_tx
        ctas = [r for r in range(w.cluster.size) if r in lanes]

        def arm_all():
            for r in ctas:
                _barrier(w, a, p, idx, r).arrive(1, who, expect_tx=nbytes)
        yield Step(arm_all, None, lambda: f"{who} arrive.expect_tx({nbytes}) on stage {idx} "
                                          f"of CTA(s) {ctas}", spec.name)
        return
    if arm == "local" or (arm == "pair_leader" and spec.leader(a.cta) == a.cta):
        nbytes = spec.tx_count + extra_tx

        def arm():
            _barrier(w, a, p, idx, a.cta).arrive(1, who, expect_tx=nbytes)
        yield Step(arm, None, lambda: f"{who} arrive.expect_tx({nbytes}) on stage {idx}", spec.name)


def producer_try_acquire(w: World, a: Agent, p: PipeRef, st: State, lanes: list[int]):
    a.use(p.spec.name, "producer", "producer.try_acquire", st.role == "producer_consumer")
    return (yield from _try_wait(w, a, p, p.spec.stages + st.index, st.phase, st.phase_number()))


def _window(who: str) -> str:
    return f"{who} (between its acquire and its commit)"


def _close_window(a: Agent, p: PipeRef, idx: int, verb: str) -> None:
    key = (p.pid, idx)
    if a.acquired[key] == 0:
        raise SimError(
            "unbalanced",
            f"{a.label(p.spec.name)} runs {verb} on {_buf(p, a.cta, idx)} without acquiring it "
            f"(unbalanced producer.acquire / producer.commit)")
    a.acquired[key] -= 1


def producer_commit(w: World, a: Agent, p: PipeRef, st: State, lanes: list[int],
                    elect_one: bool = False):
    spec = p.spec
    a.use(spec.name, "producer", "producer.commit", st.role == "producer_consumer")
    idx, who, op = st.index, a.label(spec.name), spec.producer_op
    if spec.kind == "tma_store":
        yield from bulk_commit(w, a)
        return
    _close_window(a, p, idx, "producer.commit")
    _tie_state(a, p, st)
    a.committed[(p.pid, idx)] = a.where
    own = _key(p, a.cta, idx)
    if op == TMA:
        return  # the copies' complete_tx signal the full barrier
    if op == ASYNC:
        n = _lanes_arrivals(lanes, elect_one)
        dst = spec.leader(a.cta) if spec.plan["commit"] == "pair_leader" else a.cta

        def fire():
            w.end_write(own, _window(who))
            _barrier(w, a, p, idx, dst).arrive(n, who)
        yield Step(fire, None, lambda: f"{who} commits stage {idx} ({n} arrive(s))", spec.name)
    elif op == CPASYNC:
        n = len(lanes)

        def land():
            w.end_write(own, _window(who))
            _barrier(w, a, p, idx, a.cta).arrive(n, who + " (cp.async.mbarrier.arrive.noinc)")

        def fire():
            w.post(Event(land, f"cp.async arrive of {who} on stage {idx}", ("cpasync", a.id), a.cta))
        yield Step(fire, None, lambda: f"{who} cp.async.mbarrier.arrive.noinc stage {idx}", spec.name)
    elif op == UMMA:
        yield from _umma_commit(w, a, p, idx, [own], "producer.commit", slot=idx)


def raw_arrive(w: World, a: Agent, p: PipeRef, idx: int, lanes: list[int], op: str, loc):
    """An arrive of the kernel's own (``op``, at ``loc``) on stage ``idx``'s
    full barrier through a ``producer_get_barrier`` handle: one arrival per
    executing thread, on top of what the pipeline's verbs arrive: a second
    arrive per phase (cutlass#2364) completes phases early, an arrive-count,
    overrun or early-read finding depending on the schedule."""
    at = source_location(loc)
    who = f"{a.label(p.spec.name)} ({op} by hand{f' at {at}' if at else ''})"
    n = len(lanes)

    def fire():
        _barrier(w, a, p, idx, a.cta).arrive(n, who)
    yield Step(fire, None, lambda: f"{who} arrives on stage {idx} ({n} arrive(s))", p.spec.name)


def _umma_commit(w: World, a: Agent, p: PipeRef, idx: int, keys: list, verb: str, slot: int):
    """Elected tcgen05.commit: one arrive on ``slot`` of every CTA of the
    mask once the MMAs issued so far are done (an in-order event)."""
    spec, who = p.spec, a.label(p.spec.name)
    mask = spec.umma_mask(a.cta)
    src = f"tcgen05.commit of {who}"

    def land():
        for k in keys:
            if verb == "producer.commit":
                w.end_write(k, _window(who))
            else:
                w.end_read(k, who)
        for r in mask:
            _barrier(w, a, p, slot, r).arrive(1, src)

    def fire():
        w.post(Event(land, f"{src} on stage {idx} (CTAs {mask})", ("umma", a.id), a.cta))
    yield Step(fire, None, lambda: f"{who} tcgen05.commit stage {idx} ({verb})", spec.name)


def producer_tail(w: World, a: Agent, p: PipeRef, st: State, lanes: list[int]):
    spec = p.spec
    a.use(spec.name, "producer", "producer.tail", st.role == "producer_consumer")
    if spec.kind == "tma_store":
        yield from bulk_wait(w, a, 0)
        return
    if spec.traits["tail_leader_only"]:
        if spec.leader(a.cta) != a.cta:
            return
        st = st.advance(spec.stages - 1)
        yield from wait(w, a, p, spec.stages + st.index, a.cta, st.phase, "producer.tail",
                        exact=st.phase_number())
        return
    for _ in range(spec.stages):
        yield from wait(w, a, p, spec.stages + st.index, a.cta, st.phase, "producer.tail",
                        exact=st.phase_number())
        st = st.advance()


# -- consumer side ------------------------------------------------------------

def _hold_keys(p: PipeRef, cta: int, idx: int, op: str) -> list:
    # A 2-CTA MMA reads the stage in both CTAs of its pair.
    if op == UMMA and p.spec.cta_group == 2:
        lead = p.spec.leader(cta)
        return [_key(p, lead + v, idx) for v in range(p.spec.v)]
    return [_key(p, cta, idx)]


def consumer_wait(w: World, a: Agent, p: PipeRef, st: State, lanes: list[int],
                  token: int | None = None):
    spec = p.spec
    a.use(spec.name, "consumer", "consumer.wait", st.role == "producer_consumer")
    idx, who = st.index, a.label(spec.name)
    op = spec.consumer_op
    if st.origin is not None:
        a.wait_pipes.setdefault(st.origin, {})[p.pid] = p

    def hold():
        key = (p.pid, idx)
        if a.holding[key]:
            raise SimError(
                "unbalanced",
                f"{who} waits on {_buf(p, a.cta, idx)} again before releasing it "
                f"(unbalanced consumer.wait / consumer.release)")
        a.holding[key] += 1
        a.hold_epoch[key] = a.vc[a.id]
        for k in _hold_keys(p, a.cta, idx, op):
            w.start_read(k, who, _buf(p, k[0], idx))

    if not token:
        yield from wait(w, a, p, idx, a.cta, st.phase, "consumer.wait", hold, st.phase_number())
    else:
        yield Step(hold, None, lambda: f"{who} consumer.wait stage {idx} (token)", spec.name)


def _end_covered_holds(w: World, p: PipeRef, cta: int, idx: int, clock) -> None:
    """Stage ``idx``'s consumer phase completed (its empty barrier in CTA
    ``cta``) with the arrivals' joined ``clock``: the stage goes back to
    the producer for every warp of the CTA still holding it whose hold
    those arrivals have seen, i.e. that synchronised with a releasing
    thread after its wait (a role that waits, meets on a named barrier,
    then one thread releases for all with a group count of 1). A warp
    whose hold no arrival saw (no barrier after its wait) keeps holding:
    the producer's refill overwrites it. A warp whose hold ended so reads
    the stage afterwards: read-after-release."""
    if clock is None:
        return
    key = (p.pid, idx)
    for h in w.agents:
        if h.cta != cta or not h.holding[key] or clock[h.id] < h.hold_epoch.get(key, 1 << 62):
            continue
        h.holding[key] -= 1
        who = h.label(p.spec.name)
        for k in _hold_keys(p, cta, idx, p.spec.consumer_op):
            w.end_read(k, who)


def consumer_try_wait(w: World, a: Agent, p: PipeRef, st: State, lanes: list[int]):
    a.use(p.spec.name, "consumer", "consumer.try_wait", st.role == "producer_consumer")
    return (yield from _try_wait(w, a, p, st.index, st.phase, st.phase_number()))


def consumer_release(w: World, a: Agent, p: PipeRef, st: State, lanes: list[int],
                     elect_one: bool = False, op_type: str | None = None):
    spec = p.spec
    a.use(spec.name, "consumer", "consumer.release", st.role == "producer_consumer")
    idx, who = st.index, a.label(spec.name)
    op = op_type or spec.consumer_op
    key = (p.pid, idx)
    if a.holding[key] == 0:
        raise SimError(
            "unbalanced",
            f"{who} releases {_buf(p, a.cta, idx)} without waiting on it first "
            f"(unbalanced consumer.wait / consumer.release)")
    keys = _hold_keys(p, a.cta, idx, op)
    slot = spec.stages + idx
    if op == UMMA:
        a.holding[key] -= 1
        yield from _umma_commit(w, a, p, idx, keys, "consumer.release", slot=slot)
        return
    target = spec.plan["release"]
    if target == "signalling_lanes":
        # Signalling lanes: lane < cluster_size arrives on CTA lane % size
        # when that CTA shares this CTA's multicast tile.
        cs = spec.plan["signalling_lanes"]
        signal = [lanes[0]] if elect_one else lanes
        dsts = [l % cs for l in signal if l < cs and spec.shares_tile(a.cta % cs, l % cs, False)]
        if cs > 1:
            base = a.cta - a.cta % cs
            dsts = [base + d for d in dsts]
        else:
            dsts = [a.cta for _ in dsts]
        arrivals = [(d, 1) for d in dsts]
    else:
        # umma_async: the MMA waits in the pair leader; clc_fetch_async: the
        # scheduler (and its empty barrier) lives in the cluster's CTA 0.
        dst = (spec.leader(a.cta) if target == "pair_leader" else
               0 if target == "cluster_cta0" else a.cta)
        arrivals = [(dst, _lanes_arrivals(lanes, elect_one))]

    def fire():
        # The hold ends when the arrive runs (until then another warp's
        # finish_checks sees this warp still holding the stage).
        a.holding[key] -= 1
        for k in keys:
            w.end_read(k, who)
        for d, n in arrivals:
            _barrier(w, a, p, slot, d).arrive(n, who)
    yield Step(fire, None, lambda: f"{who} releases stage {idx}", spec.name)


# -- copies -------------------------------------------------------------------

def copy_load(w: World, a: Agent, p: PipeRef, st: State, lanes: list[int], nbytes: int,
              mask: int | None, verb: str):
    """TMA tensor load / bulk copy into stage ``st.index`` of the CTAs in
    ``mask`` (this CTA without one), completing tx on their full barriers
    (the pair leader's for cta_group 2). Every active lane issues one copy."""
    spec = p.spec
    a.use(spec.name, "producer", verb, st.role == "producer_consumer")
    idx, who = st.index, a.label(spec.name)
    if mask is None:
        dests = [a.cta]
    else:
        dests = [r for r in range(16) if mask >> r & 1]
        if not dests:
            raise SimError("tx-count", f"{who} issues {verb} with an empty multicast mask")
    parity = st.phase ^ 1  # the full-barrier phase this production fills
    for d in dests:
        if d >= w.cluster.size:
            raise SimError("unsupported", f"{who}: {verb} multicast mask {mask:#x} names CTA {d}, "
                                          f"outside the cluster of {w.cluster.size}")
    targets = [spec.leader(d) if spec.cta_group == 2 else d for d in dests]
    src = f"{verb} of {who} into stage {idx}"

    def issue():
        for _ in lanes:
            for d in dests:
                w.start_write(_key(p, d, idx), src, _buf(p, d, idx))

            def land():
                for d, t in zip(dests, targets):
                    w.end_write(_key(p, d, idx), src)
                    _barrier(w, a, p, idx, t).complete_tx(nbytes, src, parity)
            w.post(Event(land, src + f" ({nbytes} bytes)", None, a.cta))
    yield Step(issue, None, lambda: f"{who} issues {verb} ({len(lanes)} lane(s), {nbytes} bytes)",
               spec.name)


# -- plain stores ---------------------------------------------------------------

def _tie_state(a: Agent, p: PipeRef, st: State) -> None:
    """Remember that this agent's producer verbs walk ``p`` with states made
    by ``st.origin`` (plain_store finds the pipelines of a store's state)."""
    if st.origin is not None:
        a.state_pipes.setdefault(st.origin, {})[p.pid] = p


def plain_store(a: Agent, st: State, op: str, loc: str | None, gs=None) -> None:
    """A store (``llvm.store``, ``memref.store``, ...) whose address is
    computed from ``st.index`` (the frontend ties it statically), into that
    stage of every pipeline whose producer verbs this agent runs with states
    of the same origin. Only producers whose commit publishes stores
    (AsyncThread, cp.async) are checked: after this agent committed the
    stage and before it acquires it again, the store is a commit before
    write (error kind ``commit-before-write``), whatever the schedule: the
    consumers may read the stage before the store lands. Inside an acquire
    .. commit window it is the write the commit publishes. It is not a
    scheduling point (it touches no barrier). ``gs``: the 4-byte granules
    it writes, when its addresses are known (see _store_into_held)."""
    _store_into_held(a, st, op, loc, gs)
    pipes = [p for p in a.state_pipes.get(st.origin, {}).values()
             if p.spec.producer_op in (ASYNC, CPASYNC)]
    idx = st.index
    if any(a.acquired[(p.pid, idx)] for p in pipes):
        return
    for p in pipes:
        if (p.pid, idx) not in a.committed:
            continue
        who = a.label(p.spec.name)
        store_at, commit_at = source_location(loc), source_location(a.committed[(p.pid, idx)])
        raise SimError(
            "commit-before-write",
            f"{who} writes {_buf(p, a.cta, idx)} with {op}"
            f"{f' at {store_at}' if store_at else ''} after its producer.commit of that stage"
            f"{f' (committed at {commit_at})' if commit_at else ''} and before acquiring it "
            f"again: the consumers may read the stage before the write lands (move the write "
            f"before producer.commit)",
            where=[f"{who} at {store_at}"] if store_at else [])


def _store_into_held(a: Agent, st: State, op: str, loc: str | None, gs=None) -> None:
    """A store into a stage of a pipeline this warp consumes. Written in
    place by a warp that holds the stage (each thread over its own values
    of a row, which the producer then bulk-copies out) with known
    addresses (``gs``, granules): a race only on the bytes another warp
    reads or writes with nothing ordering the two (the plain-shared-memory
    shadow, smemrace.py, which the holders' stage loads feed too:
    plain_load). Otherwise the stage is one buffer: a write while another
    warp holds it is an overwrite."""
    w, idx = a.world, st.index
    shadowed = False
    for p in a.wait_pipes.get(st.origin, {}).values():
        if p.spec.stages != st.stages:
            continue
        if gs and a.holding[(p.pid, idx)]:
            if not shadowed:
                from . import smemrace  # (it imports frontend, which imports this module)
                smemrace.write(w, a, gs, op, loc)
                shadowed = True
            continue
        key = _key(p, a.cta, idx)
        me = a.label(p.spec.name)
        others = {k: v for k, v in (w.readers.get(key) or {}).items() if v > 0 and k != me}
        if others:
            at = source_location(loc)
            raise SimError(
                "overwrite",
                f"{me} writes {_buf(p, a.cta, idx)} with {op}{f' at {at}' if at else ''} "
                f"while {', '.join(others)} still holds it (between its wait and its "
                f"release): the other warps may still read the stage (order the write after "
                f"their consumer.release, e.g. with a named barrier)",
                w._race_notes(key, me, Counter(others)))


def plain_load(a: Agent, st: State, op: str, loc: str | None, gs=None) -> None:
    """A load (``llvm.load``, ...) whose address is computed from
    ``st.index``, from that stage of a pipeline this agent waits on with
    states of the same origin (and the same stage count): the agent must
    hold the stage (between its consumer.wait and its consumer.release).
    After the release the producer may refill the stage under the read:
    error kind ``read-after-release``, whatever the schedule. A stage the
    agent has acquired as a producer may be read too. Not a scheduling
    point. ``gs``: the granules it reads, when known: a held stage's read
    goes into the plain-shared-memory shadow, against which warps writing
    the stage in place are checked (_store_into_held)."""
    idx = st.index
    shadowed = False
    for p in a.wait_pipes.get(st.origin, {}).values():
        key = (p.pid, idx)
        if p.spec.stages != st.stages:
            continue
        if a.holding[key] and gs and not shadowed:
            from . import smemrace
            smemrace.read(a.world, a, gs, op, loc)
            shadowed = True
        if a.holding[key] or a.acquired[key]:
            continue
        who, at = a.label(p.spec.name), source_location(loc)
        raise SimError(
            "read-after-release",
            f"{who} reads {_buf(p, a.cta, idx)} with {op}{f' at {at}' if at else ''} while it "
            f"does not hold the stage (after its consumer.release, or before its "
            f"consumer.wait): the producer may refill it under the read (read the stage "
            f"between consumer.wait and consumer.release)",
            where=[f"{who} at {at}"] if at else [])


# -- cluster launch control ---------------------------------------------------

def clc_try_cancel(w: World, a: Agent, p: PipeRef, idx: int, phase: int, lanes: list[int],
                   multicast: bool):
    """``clusterlaunchcontrol.try_cancel`` into stage ``idx``: the response
    (cancelled the next pending cluster, while ``w.clc_left`` > 0; else
    failed) lands in this CTA (every CTA with ``multicast``) and completes
    the stage's tx bytes there. Every active lane issues one request."""
    spec = p.spec
    who = a.label(spec.name)
    dests = list(range(w.cluster.size)) if multicast else [a.cta]

    def issue():
        for _ in lanes:
            if w.clc_left > 0:
                w.clc_left -= 1
                w.clc_next += 1
                response = (1, w.clc_next * w.cluster.size)
            else:
                response = (0, 0)

            def land(response=response):
                for d in dests:
                    w.clc_responses[(p.pid, d, idx)] = response
                    _barrier(w, a, p, idx, d).complete_tx(spec.tx_count, who + " (CLC response)",
                                                          phase)
            w.post(Event(land, f"CLC response to {who} in stage {idx}", None, a.cta))
    yield Step(issue, None, lambda: f"{who} clusterlaunchcontrol.try_cancel into stage {idx}",
               spec.name)


def clc_response(w: World, a: Agent, p: PipeRef, idx: int, query: str):
    """What ``clusterlaunchcontrol.query_cancel`` reads from stage ``idx``
    of this CTA (after a consumer.wait on it)."""
    response = w.clc_responses.get((p.pid, a.cta, idx))
    if response is None:
        raise SimError("unbalanced", f"{a.label(p.spec.name)} reads the CLC response of stage "
                                     f"{idx} before one arrived")
    return response[0] if query == "is_canceled" else response[1]


# -- TMA stores: bulk async-groups -------------------------------------------

def tma_store(w: World, a: Agent, lanes: list[int]):
    def fire():
        a.bulk_open += len(lanes)
    yield Step(fire, None, lambda: f"{a.label()} issues a TMA store")


def bulk_commit(w: World, a: Agent):
    def fire():
        n, a.bulk_open = a.bulk_open, 0
        a.bulk_pending.append(n)

        def land():
            a.bulk_pending.pop(0)
        w.post(Event(land, f"bulk async-group of {a.label()} ({n} store(s))", ("bulk", a.id), a.cta))
    yield Step(fire, None, lambda: f"{a.label()} cp.async.bulk.commit_group")


def bulk_wait(w: World, a: Agent, pending: int):
    yield Step(lambda: None, lambda: len(a.bulk_pending) <= pending,
               lambda: f"{a.label()} waits until at most {pending} bulk async-group(s) are "
                       f"pending ({len(a.bulk_pending)} are)")


# -- PipelineOrder ------------------------------------------------------------

def order_state(p: PipeRef, gid: int) -> State:
    return State(p.spec.stages, 0, 1 if gid == 0 else 0, 0, "producer_consumer")


def _check_group(a: Agent, p: PipeRef, gid: int) -> None:
    if not 0 <= gid < p.spec.length:
        raise SimError("role", f"{a.label()} acts as group {gid} of pipeline '{p.spec.name}', "
                               f"which orders only {p.spec.length} groups")


def order_wait(w: World, a: Agent, p: PipeRef, st: State, gid: int, lanes: list[int]):
    _check_group(a, p, gid)
    a.use(p.spec.name, "group", "order.wait", True)
    yield from wait(w, a, p, st.index * p.spec.length + gid, a.cta, st.phase, "order.wait")


def order_arrive(w: World, a: Agent, p: PipeRef, st: State, gid: int, lanes: list[int]):
    _check_group(a, p, gid)
    a.use(p.spec.name, "group", "order.arrive", True)
    slot = st.index * p.spec.length + (gid + 1) % p.spec.length
    n = len(lanes)
    yield Step(lambda: _barrier(w, a, p, slot, a.cta).arrive(n, a.label(p.spec.name)), None,
               lambda: f"{a.label(p.spec.name)} order.arrive slot {slot}", p.spec.name)
    return st.advance()


def finish_checks(w: World, a: Agent, pipes: dict) -> None:
    """At agent exit: stages still acquired (arrive kinds) or held."""
    for (pid, idx), n in a.holding.items():
        if not n:
            continue
        p = pipes[pid]

        def unreleased(p=p, idx=idx, key=(pid, idx)):
            if a.holding[key]:
                raise SimError(
                    "unbalanced",
                    f"{a.label(p.spec.name)} finished while holding {_buf(p, a.cta, idx)} "
                    f"(consumer.wait without consumer.release)")
        # Another warp of the CTA still holds the stage: its release may
        # end this hold too (_end_covered_holds); decided at the CTA's exit.
        if any(x is not a and not x.done and x.cta == a.cta and x.holding[(pid, idx)]
               for x in w.agents):
            w.cluster.ctas[a.cta].exit_checks.append(unreleased)
            continue
        unreleased()
    for (pid, idx), n in a.acquired.items():
        p = pipes[pid]
        if n and _arrive_kind(p):
            raise SimError(
                "unbalanced",
                f"{a.label(p.spec.name)} finished with {_buf(p, a.cta, idx)} acquired but never "
                f"committed (producer.acquire without producer.commit)")
