"""Plain loads and stores of a stage's buffer (``llvm.load`` /
``llvm.store`` whose address comes from ``pipeline.state.index``): a write
after the producer's commit, a write into a stage another warp holds, a
read outside the agent's hold. None of them is a scheduling point (they
touch no barrier); held stages written in place by the warps that hold
them go through the plain-shared-memory shadow (:mod:`.smemrace`).
"""

from __future__ import annotations

from collections import Counter

from .engine import Agent
from .model import SimError, source_location
from .pipeline_types import ASYNC, CPASYNC, PipeRef, State


def _key(p: PipeRef, cta: int, stage: int) -> tuple:
    return (cta, p.pid, stage)


def _buf(p: PipeRef, cta: int, stage: int) -> str:
    return f"pipeline '{p.spec.name}' stage {stage} of CTA {cta}"



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
        if gs:
            # The write the commit publishes: into the plain-shared-memory
            # shadow, which the holders' loads are checked against (a warp
            # that reads these bytes through another ring's hold, ordered
            # by none of this ring's barriers, races it).
            from . import smemrace
            smemrace.write(a.world, a, gs, op, loc)
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
                # (smemrace imports frontend, which imports verbs, which imports this module)
                from . import smemrace
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

