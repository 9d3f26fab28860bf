"""Asynchronous readers of stage buffers: wgmma, tcgen05.mma, bulk stores.

A stage may be released (``consumer.release``) or re-acquired
(``producer.acquire``) only once every asynchronous read of its buffer that
the same warp issued is done. The simulator keeps, per warp and in program
order, what is in flight:

- wgmma: committed groups (``wgmma.commit_group``), oldest first; a
  ``wgmma.wait_group N`` keeps the N newest; an uncommitted wgmma is in
  flight until its group is committed and waited for;
- tcgen05.mma: in flight until a ``tcgen05.commit`` (an MMA-consumer
  release is one) covers it;
- bulk / TMA stores: committed bulk groups, retired by
  ``cp.async.bulk.wait_group[.read] N`` (a tma_store pipeline's
  producer.acquire waits for ``stages - 1``, its tail for 0).

The check follows program order, not the landing of events: a release
reached while such a read is not retired is reported in every schedule.

Another warp's release: a warp that holds a stage with one of its reads of
it in flight may meet the warp that releases (a named barrier, a group
count of 1: one thread releases for the role), and that release ends its
hold too (``verbs._end_covered_holds``). The read is then safe only if the
wait that retired it is ordered before the release (happens-before,
:mod:`.clocks`): a retired read keeps its issuer's clock at the retiring
wait (``Read.epoch``), and the release's joined clock must have seen it
(:func:`check_ended_hold`). A read not yet retired, or retired after the
point the releaser synchronised with, is an ``async-read`` finding at the
release, naming the read and the warp that must retire it, in every
schedule. A tcgen05.mma is retired when the tcgen05.commit covering it
lands (its completion, an in-order event), at the issuer's clock of the
commit: a release that races the landing is found in the schedules where
it comes first.

Plain shared memory (:mod:`.smemrace`): the same groups carry the reads of
buffers no stage names (a reduce-add's source, a wgmma operand written by
another warpgroup), as reads without stages whose ``token`` the retiring
wait stamps with the warp's clock.

Tie to a stage: when the IR is compiled (:func:`stage_state_operands`), the
shared-memory operands of the op are followed back through pure arithmetic
to ``pipeline.state.index %s``; at run time the op reads stage
``%s.index`` of the pipelines whose stage ``%s.index`` (same stage count)
this warp holds (waited and not released) or has acquired and not
committed. Indices computed any other way tie to no stage.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import mlir.ir as ir

from .model import SimError, source_location

WGMMA = "nvvm.wgmma.mma_async"
WGMMA_COMMIT = "nvvm.wgmma.commit.group.sync.aligned"
WGMMA_WAIT = "nvvm.wgmma.wait.group.sync.aligned"
TCGEN05_MMA = "nvvm.tcgen05.mma"
TCGEN05_COMMIT = "nvvm.tcgen05.commit"
NVVM_BULK_STORES = ("nvvm.cp.async.bulk.tensor.global.shared.cta",
                    "nvvm.cp.async.bulk.global.shared.cta")
# A TMA reduce-add reads its shared-memory source like a bulk store (only
# plain-shared-memory races are checked on it: smemrace.py).
NVVM_BULK_REDUCE = "nvvm.cp.async.bulk.tensor.reduce"
NVVM_BULK_COMMIT = "nvvm.cp.async.bulk.commit.group"
NVVM_BULK_WAIT = "nvvm.cp.async.bulk.wait_group"
NVVM_OPS = (WGMMA, WGMMA_COMMIT, WGMMA_WAIT, TCGEN05_MMA, TCGEN05_COMMIT,
            NVVM_BULK_COMMIT, NVVM_BULK_WAIT, NVVM_BULK_REDUCE) + NVVM_BULK_STORES

# A wgmma with A in registers has no NVVM op: kernels issue it as a small
# llvm.inline_asm block, read here as a WGMMA whose shared-memory operands
# are its 64-bit descriptors (the registers are 32-bit).
WGMMA_ASM = "wgmma.mma_async"


def is_wgmma_asm(op) -> bool:
    return (op.name == "llvm.inline_asm"
            and WGMMA_ASM in ir.StringAttr(op.attributes["asm_string"]).value)


# Operands that carry the shared-memory address (descriptors / source).
_SMEM_OPERANDS = {WGMMA: ("descriptorA", "descriptorB"),
                  TCGEN05_MMA: ("matrixA", "matrixB"),
                  "pipeline.copy.tma_store": ("src",)}


def _pure(name: str) -> bool:
    """Ops an address computation goes through (no memory, no regions)."""
    if name.startswith("arith."):
        return True
    if name.startswith("llvm."):
        return name not in ("llvm.load", "llvm.call", "llvm.inline_asm")
    return name in ("builtin.unrealized_conversion_cast", "nvvm.tcgen05.mma_smem_desc")


def stage_state_operands(op) -> list:
    """The state values whose ``pipeline.state.index`` feeds the shared-memory
    operands of ``op`` (an ``ir.Operation``)."""
    names = _SMEM_OPERANDS.get(op.name)
    if is_wgmma_asm(op):
        i64 = ir.IntegerType.get_signless(64)
        roots = [v for v in op.operands if v.type == i64]
    else:
        view = op.opview
        roots = [getattr(view, n) for n in names] if names else list(op.operands)
    states, seen, work = [], set(), list(roots)
    while work and len(seen) < 256:
        v = work.pop()
        owner = v.owner
        if isinstance(owner, ir.Block):  # a block argument
            continue
        d = owner.operation
        if d in seen:  # ir.Operation hashes by the op, not the Python object
            continue
        seen.add(d)
        if d.name == "pipeline.state.index":
            states.append(d.operands[0])
        elif _pure(d.name) and not len(d.regions):
            work.extend(d.operands)
    return states


@dataclass
class Read:
    what: str        # the op and its location
    loc: str | None  # file:line:col, when known
    kind: str        # wgmma, tcgen05, bulk
    stages: set      # {(pipe id, stage index)}
    token: object = None  # a plain-shared-memory read (smemrace.AsyncRead)
    # The issuer's clock entry at the wait that retired it (None: in flight).
    epoch: int | None = None


@dataclass
class InFlight:
    wgmma: list = field(default_factory=list)       # committed groups
    wgmma_open: list = field(default_factory=list)
    tcgen05: list = field(default_factory=list)
    bulk: list = field(default_factory=list)
    bulk_open: list = field(default_factory=list)
    # tcgen05 reads a commit covers, per commit not landed yet (oldest first).
    tcgen05_landing: list = field(default_factory=list)
    # Retired reads of stages, until a release of the stage has seen the
    # retirement (check_ended_hold) or the warp hands the stage back itself.
    retired: list = field(default_factory=list)


def _state(a) -> InFlight:
    f = getattr(a, "async_reads", None)
    if f is None:
        f = a.async_reads = InFlight()
    return f


def _retire(a, f: InFlight, reads: list, epoch: int) -> None:
    for r in reads:
        if r.token is not None:
            r.token.retire(a)
        if r.stages:
            r.epoch = epoch
            f.retired.append(r)


def _keep_newest(a, groups: list, n: int) -> None:
    """Retire all but the ``n`` newest groups at the warp's clock now (the
    plain-shared-memory reads among them end there too)."""
    k = max(0, len(groups) - n)
    f = _state(a)
    for group in groups[:k]:
        _retire(a, f, group, a.vc[a.id])
    del groups[:k]


def held_stages(a, pipes: dict, states: list) -> set:
    """The (pipe, stage) this warp holds or has acquired that ``states``
    (run-time State values) name."""
    out = set()
    for st in states:
        if not hasattr(st, "index"):
            continue
        for pid, p in pipes.items():
            key = (pid, st.index)
            if p.spec.stages == st.stages and (a.holding[key] or a.acquired[key]):
                out.add(key)
    return out


def issue(a, kind: str, op: str, loc: str, stages: set) -> None:
    """Record that this warp issued ``op`` reading ``stages``."""
    if not stages:
        return
    f = _state(a)
    where = source_location(loc)
    r = Read(f"{op} at {where}" if where else op, where, kind, stages)
    {"wgmma": f.wgmma_open, "tcgen05": f.tcgen05, "bulk": f.bulk_open}[kind].append(r)


_NO_STAGES = frozenset()


def issue_token(a, kind: str, token) -> None:
    """Record a plain-shared-memory read (``kind``: wgmma or bulk) that
    this warp's next retiring wait of that kind ends."""
    f = _state(a)
    (f.wgmma_open if kind == "wgmma" else f.bulk_open).append(
        Read(token.op, token.loc, kind, _NO_STAGES, token))


def wgmma_commit(a) -> None:
    f = _state(a)
    f.wgmma.append(f.wgmma_open)
    f.wgmma_open = []


def wgmma_wait(a, n: int) -> None:
    _keep_newest(a, _state(a).wgmma, n)


def tcgen05_commit(a, landed: bool = True) -> None:
    """A tcgen05.commit covering this warp's MMAs so far. ``landed``: the
    commit's completion is not modelled as an event (a raw
    ``nvvm.tcgen05.commit``), so its MMAs count as done now; otherwise
    (a pipeline verb's commit, ``verbs._umma_commit``) they are done when
    :func:`tcgen05_landed` runs at its landing."""
    f = _state(a)
    batch, f.tcgen05 = f.tcgen05, []
    if landed:
        _retire(a, f, batch, a.vc[a.id])
    else:
        f.tcgen05_landing.append((batch, a.vc[a.id]))


def tcgen05_landed(a) -> None:
    """The oldest of this warp's pipeline tcgen05.commits landed (their
    events land in issue order): its MMAs are done."""
    f = getattr(a, "async_reads", None)
    if f is not None and f.tcgen05_landing:
        batch, epoch = f.tcgen05_landing.pop(0)
        _retire(a, f, batch, epoch)


def bulk_commit(a) -> None:
    f = _state(a)
    f.bulk.append(f.bulk_open)
    f.bulk_open = []


def bulk_wait(a, n: int) -> None:
    _keep_newest(a, _state(a).bulk, n)


def check_hand_back(a, p, idx: int, verb: str, where: str, tcgen05_commit_: bool) -> None:
    """Raise if an asynchronous read of stage ``idx`` of ``p`` is in flight
    when ``verb`` hands it back."""
    f = _state(a)  # (a tcgen05.commit below needs its entry, even when nothing was read)
    key = (p.pid, idx)
    found = []
    for g, group in enumerate(f.wgmma):
        newer = len(f.wgmma) - 1 - g
        found += [(r, f"its wgmma group is committed but not retired (needs "
                      f"wgmma.wait_group N with N <= {newer})") for r in group]
    found += [(r, "the wgmma is not committed yet") for r in f.wgmma_open]
    if not tcgen05_commit_:
        found += [(r, "no tcgen05.commit covers the tcgen05.mma, and this release "
                      "is a plain mbarrier arrive") for r in f.tcgen05]
    for g, group in enumerate(f.bulk):
        newer = len(f.bulk) - 1 - g
        found += [(r, f"its bulk group may still read shared memory (needs "
                      f"cp.async.bulk.wait_group.read N with N <= {newer})") for r in group]
    found += [(r, "the bulk store's group is not committed yet") for r in f.bulk_open]
    for r, why in found:
        if key in r.stages:
            loc = source_location(where)
            at = f" at {loc}" if loc else ""
            raise SimError(
                "async-read",
                f"{a.label(p.spec.name)} runs {verb} on stage {idx} of pipeline "
                f"'{p.spec.name}'{at} while {r.what} may still read that stage "
                f"asynchronously: {why}",
                [w for w in (loc and f"{verb}{at}", r.loc and f"{r.what}") if w])
    # The warp's own retired reads of the stage are ordered before this
    # hand back (program order): no later release needs to look at them.
    _forget(f, key, None)
    if tcgen05_commit_:
        tcgen05_commit(a, landed=False)


def _forget(f: InFlight, key: tuple, seen: int | None) -> None:
    """Drop ``key`` from the retired reads whose retirement a release has
    seen (``seen``: the issuer's clock entry the release carries; None:
    the issuer hands the stage back itself, after them in program order)."""
    keep = []
    for r in f.retired:
        if key in r.stages and (seen is None or r.epoch <= seen):
            r.stages = r.stages - {key}
        if r.stages:
            keep.append(r)
    f.retired = keep


def _advice(kind: str, reader: str) -> str:
    """What to do about a read of ``reader`` in flight at another warp's release."""
    if kind == "tcgen05":
        return (f"Order the release after the MMA is done: wait on the barrier a "
                f"tcgen05.commit of {reader}'s MMAs arrives on before releasing, or let "
                f"{reader} release the stage itself (a tma_umma pipeline's consumer.release "
                f"is a tcgen05.commit)")
    wait = "wgmma.wait_group" if kind == "wgmma" else "cp.async.bulk.wait_group.read"
    return (f"Retire the read in {reader} ({wait}) before the barrier that orders this "
            f"release after it, or let that warp release the stage itself")


def _in_flight(f: InFlight, key: tuple) -> list:
    """(read, why) for the reads of stage ``key`` not retired yet."""
    out = [(r, "its wgmma group is not retired (no wgmma.wait_group after its "
               "commit_group has run)") for g in f.wgmma for r in g]
    out += [(r, "the wgmma is not committed yet") for r in f.wgmma_open]
    out += [(r, "no tcgen05.commit covers the tcgen05.mma yet") for r in f.tcgen05]
    out += [(r, "the tcgen05.commit covering it has not landed (its MMAs may still run)")
            for batch, _ in f.tcgen05_landing for r in batch]
    out += [(r, "its bulk group is not retired (no cp.async.bulk.wait_group.read after "
               "its commit_group has run)") for g in f.bulk for r in g]
    out += [(r, "the bulk store's group is not committed yet") for r in f.bulk_open]
    return [(r, why) for r, why in out if key in r.stages]


def check_ended_hold(h, p, idx: int, clock: list) -> None:
    """Another warp's release of stage ``idx`` of ``p`` (its arrivals'
    joined ``clock``) ends ``h``'s hold of it (``verbs._end_covered_holds``):
    raise if a read of the stage ``h`` issued is not retired, or its
    retiring wait is not ordered before the release."""
    f = getattr(h, "async_reads", None)
    if f is None:
        return
    key, seen = (p.pid, idx), clock[h.id]
    found = _in_flight(f, key)
    found += [(r, f"{h.label()} retires it only after the point the release is ordered "
                  f"after (its wait runs after the barrier or handshake the releasing "
                  f"thread met it on)")
              for r in f.retired if key in r.stages and r.epoch > seen]
    if not found:
        _forget(f, key, seen)
        return
    r, why = found[0]
    w, name = h.world, p.spec.name
    if w.current is not None:
        who, loc = w.current.label(name), source_location(w.current.where)
    else:
        e = w.firing
        who, loc = (e.what, source_location(e.where)) if e is not None else ("a release", None)
    at = f" at {loc}" if loc else ""
    reader = h.label(name)
    raise SimError(
        "async-read",
        f"{who} releases stage {idx} of pipeline '{name}'{at}, which ends the hold of "
        f"{reader} too, while {reader}'s {r.what} may still read that stage "
        f"asynchronously: {why}. {_advice(r.kind, reader)}",
        [x for x in (loc and f"{who} at {loc}", r.loc and f"{reader}'s {r.what}") if x])
