"""Tensor memory (``tcgen05``): its allocation per CTA (and per CTA pair for
``cta_group::2``) and the completion of ``tcgen05.ld``.

Allocation (finding kind ``tmem``):

- ``tcgen05.alloc`` writes the allocated address to shared memory: a plain
  write of the holder's word (:mod:`.smemrace`), so a warp that reads the
  address with nothing ordering its read after the alloc (no barrier after
  it) is an ``smem-race`` naming both lines;
- an alloc after the CTA's ``tcgen05.relinquish_alloc_permit``;
- a ``cta_group::2`` alloc by a warp that has not passed a cluster barrier
  wait (the peer CTA may not have launched: PTX ISA, tcgen05.alloc): kind
  ``pair-alloc``, which does not end the schedule (``World.deferred``), so
  what the pair does next is checked too;
- a dealloc with no live allocation of its ``cta_group`` and column count
  (never allocated, or freed twice);
- a dealloc that another warp's tensor-memory op (its alloc, a
  ``tcgen05.ld`` up to its ``wait::ld``, ``st``, ``cp``, ``mma`` issue) of
  the CTA does not happen before (:mod:`.clocks`); for ``cta_group::2``
  also the peer CTA's ops: a pair dealloc before the peer's alloc ran, or
  while the peer may still use the pair's columns (no cluster barrier);
- a tensor-memory op of a CTA whose allocations were all freed (for a
  pair's ``cta_group::2`` op, also the peer's);
- a CTA that exits with an allocation never freed.

Loads (finding kind ``tcgen05-ld``): a ``tcgen05.ld`` is in flight in the
lanes that issued it until a ``tcgen05.wait::ld`` runs in those lanes of
the issuing warp. A use of its registers by a lane still waiting
(``llvm.extractvalue`` and casts pass the pending registers on), a
``consumer_release`` of a pipeline whose producer is the MMA (the
accumulator stage it reads goes back to the MMA), or a dealloc by the warp
before that wait, is a finding naming the load's and the user's lines.

Stores (finding kind ``tcgen05-st``): a ``tcgen05.st`` is in flight in
the lanes that issued it until a ``tcgen05.wait::st`` runs in those lanes;
a ``tcgen05.ld`` of the warp, in those lanes, of columns the store covers
(the same address value, or known addresses whose lane and column ranges
overlap: a column per register of a thread for ``32x32b``, two for the
16-lane shapes) reads them before the store landed, a finding naming both
lines. Another warp's load is not checked against the store.

Addresses in tensor memory are not followed otherwise: a use is checked
against the CTA's allocations as a whole, not against the columns it names.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import smemrace as SR
from .model import SimError, source_location

KIND, PAIR_KIND, LD_KIND, ST_KIND = "tmem", "pair-alloc", "tcgen05-ld", "tcgen05-st"

# Ops that pass a tcgen05.ld's pending registers on (no use of their value).
PASS_ON = frozenset({"llvm.extractvalue", "builtin.unrealized_conversion_cast", "llvm.bitcast",
                     "arith.bitcast"})


def _at(op: str, loc: str | None) -> str:
    where = source_location(loc)
    return f"{op} at {where}" if where else op


@dataclass
class Alloc:
    cols: object      # an int, or UNKNOWN
    group: int        # cta_group: 1 or 2
    who: str          # the allocating warp's label
    loc: str | None
    freed: tuple | None = None   # (who, loc) of the dealloc that freed it


@dataclass
class CtaTmem:
    allocs: list = field(default_factory=list)
    relinquished: tuple | None = None   # (who, loc)
    # agent id -> (its clock entry, op, loc) at its latest tensor-memory op.
    uses: dict = field(default_factory=dict)

    def live(self) -> list:
        return [x for x in self.allocs if x.freed is None]


class TensorMemory:
    """The tensor memory of a world's CTAs."""

    def __init__(self, w):
        self.w = w
        self.ctas: dict[int, CtaTmem] = {}

    def cta(self, index: int) -> CtaTmem:
        c = self.ctas.get(index)
        if c is None:
            c = self.ctas[index] = CtaTmem()
            self.w.ctas[index].exit_checks.append(lambda: self._exit(index, c))
        return c

    def _exit(self, index: int, c: CtaTmem) -> None:
        for x in c.live():
            raise SimError(
                KIND, f"TMEM alloc: CTA {index} exits with the tensor memory {x.who}'s "
                      f"{_at('tcgen05.alloc', x.loc)} allocated never freed (a tcgen05.dealloc "
                      f"before the CTA exits)", [f"{x.who} at {w}" for w in
                                                [source_location(x.loc)] if w])

    def _peer(self, a) -> int:
        size = self.w.clusters[a.cluster].size
        rank = a.rank ^ 1
        if rank >= size:
            raise SimError(KIND, f"{a.label()} runs a cta_group::2 tensor-memory op in a cluster "
                                 f"of {size} CTA(s): CTA rank {a.rank} has no peer")
        return a.cta - a.rank + rank

    def _record(self, a, c: CtaTmem, op: str, loc: str | None) -> None:
        c.uses[a.id] = (a.vc[a.id], op, loc)

    def alloc(self, a, addr, mask: int, cols, group: int, loc: str | None) -> None:
        c = self.cta(a.cta)
        if c.relinquished is not None:
            who, rloc = c.relinquished
            raise SimError(
                KIND, f"TMEM alloc: {a.label()}'s tcgen05.alloc runs after {who}'s "
                      f"{_at('tcgen05.relinquish_alloc_permit', rloc)}: CTA {a.cta} gave up "
                      f"its right to allocate")
        if group == 2:
            peer = self._peer(a)
            if not a.cluster_waited and not any(e.kind == PAIR_KIND for e in self.w.deferred):
                # Not the end of the schedule (one per schedule): what the
                # pair does next (its dealloc) is checked too.
                here = source_location(loc)
                self.w.deferred.append(SimError(
                    PAIR_KIND, f"TMEM alloc: this tcgen05.alloc.cta_group::2 allocates for the "
                               f"CTA pair {min(a.cta, peer)},{max(a.cta, peer)} before "
                               f"{a.label()} passed a cluster barrier wait: the peer CTA may not "
                               f"have launched (barrier.cluster.arrive + wait before the alloc)",
                    [f"{a.label()} at {here}"] if here else []))
        SR.write(self.w, a, SR.granules(addr, mask, 4), "tcgen05.alloc", loc)
        c.allocs.append(Alloc(cols, group, a.label(), loc))
        self._record(a, c, "tcgen05.alloc", loc)

    def relinquish(self, a, loc: str | None) -> None:
        c = self.cta(a.cta)
        if c.relinquished is None:
            c.relinquished = (a.label(), loc)

    def use(self, a, op: str, loc: str | None, group: int = 1) -> None:
        """A tensor-memory op by ``a`` (ld, st, cp, an MMA's issue; a
        ``wait::ld`` that ends its loads)."""
        c = self.cta(a.cta)
        if not c.allocs:
            self._record(a, c, op, loc)
            return   # no allocation seen: nothing to check it against
        ctas = [(a.cta, c)]
        if group == 2:
            peer = self._peer(a)
            ctas.append((peer, self.cta(peer)))
        for index, x in ctas:
            if x.allocs and not x.live():
                who, floc = x.allocs[-1].freed
                raise SimError(
                    KIND, f"TMEM use after dealloc: {a.label()}'s {op} uses the tensor memory "
                          f"of CTA {index} after {who}'s {_at('tcgen05.dealloc', floc)} freed "
                          f"it")
        if any(x.group == 2 for x in c.live()):
            peer = self._peer(a)
            p = self.ctas.get(peer)
            if p is not None and p.allocs and not p.live():
                who, floc = p.allocs[-1].freed
                raise SimError(
                    KIND, f"TMEM use after dealloc: {a.label()}'s {op} uses the columns of "
                          f"CTA pair {min(a.cta, peer)},{max(a.cta, peer)} after the peer's "
                          f"{_at('tcgen05.dealloc.cta_group::2', floc)} ({who}) freed them")
        self._record(a, c, op, loc)

    def dealloc(self, a, cols, group: int, loc: str | None) -> None:
        c = self.cta(a.cta)
        match = [x for x in c.live() if x.group == group and (
            not isinstance(cols, int) or not isinstance(x.cols, int) or x.cols == cols)]
        if not match:
            freed = [x for x in c.allocs if x.group == group]
            if freed:
                who, floc = freed[-1].freed
                raise SimError(
                    KIND, f"TMEM dealloc: {a.label()}'s tcgen05.dealloc frees tensor memory of "
                          f"CTA {a.cta} that {who}'s {_at('tcgen05.dealloc', floc)} already "
                          f"freed (dealloc twice)")
            raise SimError(
                KIND, f"TMEM dealloc: {a.label()}'s tcgen05.dealloc"
                      f"{'.cta_group::2' if group == 2 else ''} frees tensor memory of CTA "
                      f"{a.cta} before any tcgen05.alloc of that cta_group and size ran there "
                      f"(nothing orders the dealloc after an alloc)")
        self._ordered(a, c, group, "in its CTA", "a CTA barrier, after "
                      "tcgen05.fence::before_thread_sync, between its last use and the dealloc")
        if group == 2:
            peer = self._peer(a)
            p = self.cta(peer)
            pair = f"CTA pair {min(a.cta, peer)},{max(a.cta, peer)}"
            if not any(x.group == 2 for x in p.allocs):
                raise SimError(
                    KIND, f"TMEM dealloc: this tcgen05.dealloc.cta_group::2 frees the columns "
                          f"of {pair} before CTA {peer}'s cta_group::2 tcgen05.alloc ran (no "
                          f"cluster barrier after the cta_group::2 tcgen05.alloc)")
            self._ordered(a, p, group, f"in the peer CTA {peer}", "a cluster barrier after "
                          "the pair's last tensor-memory op, before the dealloc")
        match[0].freed = (a.label(), loc)
        if not c.live():
            c.uses.clear()

    def _ordered(self, a, c: CtaTmem, group: int, whose: str, fix: str) -> None:
        vc, agents = a.vc, self.w.agents
        dealloc = "tcgen05.dealloc.cta_group::2" if group == 2 else "tcgen05.dealloc"
        for aid, (e, op, loc) in c.uses.items():
            if aid != a.id and vc[aid] < e:
                notes = [x for x in (source_location(a.where) and
                                     f"{a.label()} at {source_location(a.where)}",
                                     source_location(loc) and
                                     f"{agents[aid].label()} at {source_location(loc)}") if x]
                raise SimError(
                    KIND, f"TMEM dealloc: {a.label()}'s {dealloc} frees tensor memory while "
                          f"{agents[aid].label()}'s {_at(op, loc)} ({whose}) is not ordered "
                          f"before it, so it may still run ({fix})", notes)


def unwaited(a, what: str, entries: list, mask: int | None = None) -> SimError:
    """A finding: ``what`` runs while the tcgen05.ld ``entries`` ([lanes,
    loc]) are in flight (in the lanes of ``mask``, when given)."""
    e = entries[0]
    lanes = e[0] if mask is None else e[0] & mask
    span = _span(lanes)
    ld = source_location(e[1])
    notes = [x for x in (source_location(a.where) and f"{a.label()} at {source_location(a.where)}",
                         ld and f"tcgen05.ld at {ld}") if x]
    return SimError(
        LD_KIND, f"tcgen05 wait: {what} while the {_at('tcgen05.ld', e[1])} of {a.label()} may "
                 f"still be in flight in {span} (no tcgen05.wait::ld in those lanes before it)",
        notes)


def run_op(it, n, mask: int) -> None:
    """What the interpreter ``it`` (a warp) runs for an allocation op, a
    tcgen05.ld / st / cp or a tcgen05.wait (``n.a["tmem"]``)."""
    env, a, tm = it.env, it.a, it.w.tmem
    verb, group = n.a["tmem"]
    if verb == "alloc":
        tm.alloc(a, env[n.ins[0]], mask, env[n.ins[1]], group, n.loc)
    elif verb == "relinquish":
        tm.relinquish(a, n.loc)
    elif verb == "dealloc":
        if it.lds:
            raise unwaited(a, "this tcgen05.dealloc frees tensor memory", it.lds)
        tm.dealloc(a, env[n.ins[1]], group, n.loc)
    elif verb == "wait_ld":
        for e in it.lds:
            e[0] &= ~mask
        if it.lds:
            tm.use(a, "tcgen05.wait::ld", n.loc)
        it.lds = [e for e in it.lds if e[0]]
        it.ld_slots = {s: e for s, e in it.ld_slots.items() if e[0]}
    elif verb == "wait_st":
        for e in it.sts:
            e[0] &= ~mask
        it.sts = [e for e in it.sts if e[0]]
    else:
        tm.use(a, f"tcgen05.{verb}", n.loc, group)
        if verb == "ld":
            stored = _stored(it, n, mask)
            if stored is not None:
                raise _unwaited_store(a, n, stored, mask)
            it.lds.append([mask, n.loc])
        elif verb == "st":
            it.sts.append([mask, env[n.ins[0]], n.ins[0], n.a["tcols"], n.loc])


def _stored(it, n, mask: int):
    """The warp's tcgen05.st still in flight in a lane of ``mask`` whose
    columns the tcgen05.ld ``n`` reads; None if none."""
    addr, slot, cols = it.env[n.ins[0]], n.ins[0], n.a["tcols"]
    for e in it.sts:
        if not e[0] & mask:
            continue
        if e[2] == slot:
            return e
        x, y = e[1], addr
        if type(x) is int and type(y) is int and x >> 16 == y >> 16:
            lo, hi = x & 0xFFFF, (x & 0xFFFF) + e[3]
            if lo < (y & 0xFFFF) + cols and y & 0xFFFF < hi:
                return e
    return None


def _span(lanes: int) -> str:
    """``lane 3``, ``lanes 0-31`` or ``5 lanes`` of a lane mask."""
    lo = [i for i in range(32) if lanes >> i & 1]
    return f"lane {lo[0]}" if len(lo) == 1 else f"lanes {lo[0]}-{lo[-1]}" if (
        lo[-1] - lo[0] + 1 == len(lo)) else f"{len(lo)} lanes"


def _unwaited_store(a, n, e: list, mask: int) -> SimError:
    notes = [x for x in (source_location(n.loc) and f"{a.label()} at {source_location(n.loc)}",
                         source_location(e[4]) and f"tcgen05.st at {source_location(e[4])}")
             if x]
    return SimError(
        ST_KIND, f"tcgen05 wait: {a.label()}'s {_at('tcgen05.ld', n.loc)} reads tensor-memory "
                 f"columns that its {_at('tcgen05.st', e[4])} may still be writing in "
                 f"{_span(e[0] & mask)} (no tcgen05.wait::st in those lanes between them)",
        notes)


def registers(it, n, mask: int) -> None:
    """An op of warp ``it`` reading the registers of a tcgen05.ld still in
    flight in one of its lanes: a finding, unless it only passes them on."""
    hits = [e for e in (it.ld_slots.get(i) for i in n.ins) if e is not None and e[0] & mask]
    if not hits or n.name in ("scf.yield", "scf.condition"):
        return
    if n.name in PASS_ON:
        for o in n.outs:
            it.ld_slots[o] = hits[0]
        return
    raise unwaited(it.a, f"{n.name} uses the registers it loads", hits, mask)
