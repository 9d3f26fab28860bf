"""The asynchronous units a warp starts on a pipeline's stages: TMA and
bulk copies into a stage (their landing completes tx on the full barrier
and ends the write), cluster launch control requests, and the bulk
async-groups of TMA stores (committed, retired by their waits).
"""

from __future__ import annotations

from .engine import Agent, Event, Step, World
from .model import SimError, source_location
from .pipeline_types import PipeRef, State
from .smemrace import async_fill
from .stage_access import _buf, _key
from .sync_verbs import _barrier


# -- copies -------------------------------------------------------------------

def copy_load(w: World, a: Agent, p: PipeRef, st: State, lanes: list[int], nbytes: int,
              mask: int | None, verb: str, dst: int | None = None, loc: str | None = None):
    """TMA tensor load / bulk copy into stage ``st.index`` of the CTAs in
    ``mask`` (this CTA without one), completing tx on their full barriers
    (the pair leader's for cta_group 2). Every active lane issues one copy.

    ``dst`` (the destination's shared-memory byte offset, when known): the
    ``nbytes`` land at that offset in every CTA of the mask, and two copies
    landing on the same bytes of a CTA in one phase of its full barrier
    (a multicast mask or a destination offset that sends two halves to the
    same place) are an ``smem-race`` (:func:`_land_bytes`)."""
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
    if mask is not None:   # the mask's ranks: CTAs of this warp's cluster
        for d in dests:
            if d >= w.cluster.size:
                raise SimError("unsupported", f"{who}: {verb} multicast mask {mask:#x} names "
                                              f"CTA {d}, outside the cluster of {w.cluster.size}")
        dests = [w.cta_of(a, d) for d in dests]
    targets = [spec.leader(d) if spec.cta_group == 2 else d for d in dests]
    src = f"{verb} of {who} into stage {idx}"
    if dst is not None:  # after every asynchronous read of those bytes
        for d in dests:
            async_fill(w, a, d, dst, nbytes, f"pipeline.{verb}", loc)

    def issue():
        for _ in lanes:
            for d in dests:
                w.start_write(_key(p, d, idx), src, _buf(p, d, idx))

            def land():
                for d, t in zip(dests, targets):
                    w.end_write(_key(p, d, idx), src)
                    bar = _barrier(w, a, p, idx, t)
                    phase = bar.completed
                    bar.complete_tx(nbytes, src, parity)
                    if dst is not None:
                        _land_bytes(w, a, p, idx, d, phase, dst, nbytes, verb, loc)
            w.post(Event(land, src + f" ({nbytes} bytes)", None, a.cta))
    yield Step(issue, None, lambda: f"{who} issues {verb} ({len(lanes)} lane(s), {nbytes} bytes)",
               spec.name)


def _land_bytes(w: World, a: Agent, p: PipeRef, idx: int, cta: int, phase: int, dst: int,
                nbytes: int, verb: str, loc: str | None) -> None:
    """Bytes ``[dst, dst + nbytes)`` of CTA ``cta`` written by ``a``'s copy
    into stage ``idx`` in phase number ``phase`` of its full barrier: per
    CTA and stage, the byte ranges landed in that phase; a copy overlapping
    one of them is a finding naming both copies."""
    fills = w.stage_fills
    key = (cta, p.pid, idx)
    got, ranges = fills.get(key, (None, None))
    if got != phase:
        ranges = []
        fills[key] = (phase, ranges)
    lo, hi = dst, dst + nbytes
    who, where = a.label(p.spec.name), source_location(loc)
    for olo, ohi, other, oloc, overb in ranges:
        if lo < ohi and olo < hi:
            there = source_location(oloc)
            notes = [x for x in (where and f"{who} at {where}",
                                 there and f"{other} at {there}") if x]
            at = f" at {where}" if where else ""
            oat = f" at {there}" if there else ""
            raise SimError(
                "smem-race",
                f"{who}'s {verb}{at} writes bytes {max(lo, olo)}..{min(hi, ohi) - 1} of CTA "
                f"{cta}'s shared memory in stage {idx} of pipeline '{p.spec.name}', which "
                f"{other}'s {overb}{oat} wrote in the "
                f"same phase of that stage's full barrier: two copies land on the same bytes "
                f"(a multicast mask or destination offset that sends two tiles to one place, "
                f"or a box larger than its slot)", notes)
    ranges.append((lo, hi, who, loc, verb))


# -- cluster launch control ---------------------------------------------------

def clc_try_cancel(w: World, a: Agent, p: PipeRef, idx: int, phase: int, lanes: list[int],
                   multicast: bool):
    """``clusterlaunchcontrol.try_cancel`` into stage ``idx``: the response
    (cancelled the next pending cluster, while ``w.clc_left`` > 0; else
    failed) lands in this CTA (every CTA with ``multicast``) and completes
    the stage's tx bytes there. Every active lane issues one request."""
    spec = p.spec
    who = a.label(spec.name)
    dests = list(w.cluster_ctas(a)) if multicast else [a.cta]

    def issue():
        for _ in lanes:
            if w.clc_left > 0:
                w.clc_left -= 1
                w.clc_next += 1
                # The cancelled cluster's first CTA, past the launched grid.
                response = (1, (len(w.clusters) - 1 + w.clc_next) * w.cluster.size)
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

