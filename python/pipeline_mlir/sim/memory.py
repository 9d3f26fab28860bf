"""Global memory as the simulator reads it: the values a kernel loads from
its pointer arguments, and the branches and loop bounds computed from them.

A kernel whose schedule depends on loaded data (a block-sparse mask that
skips tiles, a tile scheduler's decoded work item, per-batch sequence
lengths) branches on values no kernel argument gives. The simulator reads
them from a model of the launch's inputs:

- every pointer argument (``!llvm.ptr<1>`` or a generic ``!llvm.ptr``) is a
  buffer of its own: the interpreter gives it a base address
  (:func:`base`), so ``getelementptr`` over it computes the byte offset of
  each lane's element (as for shared memory, smemrace.py);
- a load from such an address (``llvm.load``, integer results) reads the
  buffer's contents: the user's (``args={"mask": [1, 0, 0, 1]}``, element
  ``i`` at byte offset ``i * size`` of the load) or, for a buffer the user
  does not give, a seeded random fill of 0s and 1s, drawn afresh for every
  random schedule (the fill is a function of the seed, the schedule index
  and the address: every warp of a schedule reads the same value at the
  same address, and ``--trace`` replays it). Exhaustive exploration keeps
  one fill (schedule 0's) for all its schedules;
- the kernel's own global stores are read back only in a kernel that
  synchronizes through global memory (gmem.py); otherwise loads read its
  inputs. A load whose address cannot be evaluated stays unknown (a
  branch on it is then "cannot evaluate", as before).

The frontend marks the branches, loop bounds and ``scf.while`` conditions
computed from loaded values (:func:`mark_memory_branches`: a data-flow pass
over the compiled tree). When a schedule shows a finding, its report adds
the values that led there: for every such branch, the user's line, the
loads it depends on and what each warp took on each visit, and the
elements the schedule read (:func:`notes`).
"""

from __future__ import annotations

import zlib

from .frontend import UNKNOWN, Lanes, Node
from .model import SimError, source_location

# A pointer argument's base: argument position + 1 in the bits above any
# offset a simulated kernel computes (40 bits: a terabyte).
_SHIFT = 40
_OFFSET = (1 << _SHIFT) - 1
FILL = (0, 1)          # the random fill's values
_MAX_NOTES = 6         # memory-dependent branches named per finding
_MAX_VISITS = 12       # outcomes listed per branch and warp


def base(pos: int) -> int:
    return (pos + 1) << _SHIFT


def _decode(addr) -> tuple[int, int] | None:
    if type(addr) is not int or addr >> _SHIFT == 0:
        return None
    return (addr >> _SHIFT) - 1, addr & _OFFSET


class Memory:
    """The launch's input buffers for one schedule, and what the schedule
    read from them and branched on."""

    def __init__(self, given: dict, names: dict, seed: int, schedule: int):
        self.given = given        # position -> sequence of ints or an int
        self.names = names        # position -> the argument's name
        self.seed, self.schedule = seed, schedule
        self.reads: dict = {}     # (position, offset) -> value (in read order)
        # branch loc -> {"op", "loads", "visits": {warp label: [outcome]}}
        self.branches: dict = {}

    def _value(self, pos: int, off: int, size: int, width: int) -> int:
        given = self.given.get(pos)
        if isinstance(given, int):
            v = given
        elif given is not None:
            i = off // size
            if off % size or not 0 <= i < len(given):
                raise SimError("unsupported", f"a load reads byte offset {off} of "
                               f"{self.arg(pos)}, beyond the {len(given)} values given "
                               f"(elements of {size} bytes)")
            v = given[i]
        else:
            h = zlib.crc32(f"{self.seed}:{self.schedule}:{pos}:{off}".encode())
            v = FILL[h % len(FILL)]
        return v & ((1 << width) - 1)

    def load(self, addr, size: int, width: int):
        """The value (or per-lane values) a load of ``size`` bytes and
        ``width`` bits reads at ``addr``; UNKNOWN where an address is."""
        def one(x):
            d = _decode(x)
            if d is None:
                return UNKNOWN
            v = self._value(d[0], d[1], size, width)
            self.reads.setdefault(d, v)
            return v
        if isinstance(addr, Lanes):
            r = Lanes(one(x) for x in addr)
            return r[0] if r.count(r[0]) == 32 else r
        return one(addr)

    def arg(self, pos: int) -> str:
        name = self.names.get(pos)
        return f"`{name}` (argument {pos})" if name else f"argument {pos}"

    def branch(self, n: Node, who: str, outcome: str) -> None:
        b = self.branches.get(n.loc)
        if b is None:
            b = self.branches[n.loc] = {"op": n.name, "loads": n.a["mem"], "visits": {}}
        b["visits"].setdefault(who, []).append(outcome)

    def notes(self) -> list[str]:
        """The report's notes: the memory-dependent branches this schedule
        took and the elements it read."""
        out = []
        for loc, b in list(self.branches.items())[:_MAX_NOTES]:
            at = source_location(loc) or b["op"]
            loads = ", ".join(sorted({source_location(x) or "?" for x in b["loads"]}))
            visits = "; ".join(
                f"{who}: {', '.join(v[:_MAX_VISITS])}{', ...' if len(v) > _MAX_VISITS else ''}"
                for who, v in b["visits"].items())
            out.append(f"{b['op']} at {at} branches on memory (loaded at {loads}): {visits}")
        if out:
            by_arg: dict = {}
            for (pos, off), v in sorted(self.reads.items()):
                by_arg.setdefault(pos, []).append(f"+{off}={v}")
            for pos, vals in by_arg.items():
                src = ("given" if pos in self.given else
                       f"random fill, seed {self.seed}, schedule {self.schedule}")
                shown = " ".join(vals[:24]) + (" ..." if len(vals) > 24 else "")
                out.append(f"memory read from {self.arg(pos)} ({src}; byte offset=value): "
                           f"{shown}")
        return out


def annotate(err: SimError, world) -> None:
    """Add the world's notes (``World.notes``) and the memory-dependent
    branches of the schedule to a finding (once)."""
    if getattr(err, "_noted", False):
        return
    err._noted = True
    err.where = list(err.where) + world.notes + (
        world.memory.notes() if world.memory is not None else [])


# -- the frontend's marks ----------------------------------------------------

def mark_memory_branches(body: list[Node]) -> bool:
    """Mark (``node.a["mem"]``: the locations of the loads it depends on)
    every ``scf.if`` whose condition, ``scf.for`` whose bounds and
    ``scf.while`` whose condition is computed from a global load
    (``node.a["gload"]``), through any op, region result and loop-carried
    value (a fixpoint over the tree). True when it marked any: the
    interpreter then reads memory (pointer arguments get their bases);
    otherwise loads stay unknown, as in a kernel without such branches."""
    loads = []

    def walk(nodes):
        for n in nodes:
            if "gload" in n.a:
                loads.append(n)
            for r in n.regions:
                for _, blk in r:
                    walk(blk)
    walk(body)
    if not loads:
        return False
    taint: dict[int, frozenset] = {}

    def add(slot, t) -> bool:
        if not t:
            return False
        old = taint.get(slot, frozenset())
        new = old | t
        if new != old:
            taint[slot] = new
            return True
        return False

    def of(slots) -> frozenset:
        out = frozenset()
        for s in slots:
            out |= taint.get(s, frozenset())
        return out

    def yields(blk) -> list:
        last = blk[-1] if blk else None
        if last is not None and last.name in ("scf.yield", "scf.condition"):
            return last.ins
        return []

    def flow(nodes) -> bool:
        changed = False
        for n in nodes:
            if "gload" in n.a:
                for o in n.outs:
                    changed |= add(o, frozenset([n.loc]))
            if n.name == "scf.if":
                for r in n.regions:
                    for _, blk in r:
                        changed |= flow(blk)
                        for o, y in zip(n.outs, yields(blk)):
                            changed |= add(o, of([y]) | of(n.ins[:1]))
                t = of(n.ins[:1])
            elif n.name == "scf.for":
                (args, blk), = n.regions[0]
                t = of(n.ins[:3])
                changed |= add(args[0], t)
                for s, init in zip(args[1:], n.ins[3:]):
                    changed |= add(s, of([init]))
                changed |= flow(blk)
                for s, o, y in zip(args[1:], n.outs, yields(blk)):
                    changed |= add(s, of([y]))
                    changed |= add(o, of([y, s]) | t)
            elif n.name == "scf.while":
                (bargs, before), = n.regions[0]
                (aargs, after), = n.regions[1]
                for s, init in zip(bargs, n.ins):
                    changed |= add(s, of([init]))
                changed |= flow(before)
                cond = yields(before)
                t = of(cond[:1])
                for s, o, c in zip(aargs, n.outs, cond[1:]):
                    changed |= add(s, of([c]) | t)
                    changed |= add(o, of([c]) | t)
                changed |= flow(after)
                for s, y in zip(bargs, yields(after)):
                    changed |= add(s, of([y]))
            else:
                t = frozenset()
                for r in n.regions:
                    for _, blk in r:
                        changed |= flow(blk)
                if n.ins and not n.name.startswith("pipeline."):
                    t_in = of(n.ins)
                    for o in n.outs:
                        changed |= add(o, t_in)
            if n.name in ("scf.if", "scf.for", "scf.while") and t:
                if n.a.get("mem") != tuple(sorted(t)):
                    n.a["mem"] = tuple(sorted(t))
                    changed = True
        return changed

    while flow(body):
        pass
    marked = []

    def any_marked(nodes):
        for n in nodes:
            if "mem" in n.a:
                marked.append(n)
            for r in n.regions:
                for _, blk in r:
                    any_marked(blk)
    any_marked(body)
    return bool(marked)
