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

from . import asyncread as AR
from .engine import Agent, Event, Step, World
from .model import Mbarrier, SimError, source_location
# The pipelines the verbs act on, re-exported: callers import them from here.
from .pipeline_types import (ASYNC, CLC, CPASYNC, STORE, TMA, UMMA, Group,  # noqa: F401
                             PipelineSpec, PipeRef, State, init_counts)
# The barrier verbs, the stage accesses and the asynchronous units, the same:
# interp and the tests call every verb through this module.
from .async_verbs import (bulk_commit, bulk_wait, clc_response, clc_try_cancel,  # noqa: F401
                          copy_load, tma_store)
from .stage_access import _buf, _key, _tie_state, plain_load, plain_store  # noqa: F401
from .sync_verbs import (_barrier, _slot_name, _try_wait, cluster_arrive,  # noqa: F401
                         cluster_wait, init_arrive, init_wait, named_arrive, named_sync, wait)


def _lanes_arrivals(lanes: list[int], elect_one: bool) -> int:
    return 1 if elect_one else len(lanes)


# -- creation and init sync ---------------------------------------------------

def create(w: World, a: Agent, p: PipeRef, defer_sync: bool, lanes: list[int],
           storage: int | None = None):
    """``pipeline.create``: warp 0 initializes the stage barriers; then the
    CTA (or cluster) syncs unless deferred. ``storage``: the byte offset of
    the barrier storage in shared memory, when known: a pipeline created on
    bytes another pipeline's barriers occupy (a copied create line) uses
    those mbarriers, so the two rings' arrivals and waits meet on them as
    on the GPU."""
    spec = p.spec

    def fire():
        if a.warp != 0:
            return
        cta = w.ctas[a.cta]
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
            shared = (None if storage is None
                      else w.barrier_at.get((a.cta, storage + 8 * slot)))
            if shared is not None and (p.pid, slot) not in cta.barriers:
                cta.barriers[(p.pid, slot)] = shared  # the other ring's mbarrier
                note = (f"pipeline '{spec.name}' (created at "
                        f"{source_location(w.created_at.get(spec.name)) or '?'}) is created "
                        f"on the barrier storage of pipeline '{shared.name.pipeline}': both "
                        f"rings arrive on and wait for the same mbarriers (give each "
                        f"pipeline its own barrier storage)")
                if note not in w.notes:
                    w.notes.append(note)
                continue
            b = cta.barriers.setdefault((p.pid, slot),
                                        Mbarrier(count, _slot_name(spec, slot, a.cta)))
            if storage is not None:
                w.barrier_at[(a.cta, storage + 8 * slot)] = b
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
                _barrier(w, a, p, idx, w.cta_of(a, r)).arrive(1, who, expect_tx=nbytes)
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
    mask = [w.cta_of(a, r) for r in spec.umma_mask(a.rank)]
    src = f"tcgen05.commit of {who}"

    def land():
        AR.tcgen05_landed(a)  # the MMAs it covers are done (asyncread.py)
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
        # A read of the stage the holder issued must be retired before the
        # release (asyncread.py).
        AR.check_ended_hold(h, p, idx, clock)
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
               w.cta_of(a, 0) if target == "cluster_cta0" else a.cta)
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
            w.ctas[a.cta].exit_checks.append(unreleased)
            continue
        unreleased()
    for (pid, idx), n in a.acquired.items():
        p = pipes[pid]
        if n and _arrive_kind(p):
            raise SimError(
                "unbalanced",
                f"{a.label(p.spec.name)} finished with {_buf(p, a.cta, idx)} acquired but never "
                f"committed (producer.acquire without producer.commit)")
