"""Global memory the kernel writes and reads back: stores, atomics, flags
and fences between CTAs (a stream-K fix-up: one CTA stores its partial
tile, fences and bumps a counter; another polls the counter, fences and
reads the partial).

A kernel that synchronizes through global memory (an ``atomicrmw``, a
``cmpxchg``, an atomic or volatile load or store, a ``membar`` /
``fence.sc`` / ``llvm.fence``: :func:`synchronizes`) gets this model; the
words it writes are kept per 4-byte word of each pointer argument's buffer
(addresses as memory.py gives them):

- a load reads the latest value written to the word (a value the same
  access size stored); a word nobody wrote reads the buffer's input
  (``--arg``, else the random 0/1 fill of memory.py), and an atomic or
  volatile access of one reads 0 (a counter or flag the host zeroes) unless
  ``--arg`` gives it;
- ``atomicrmw`` (add, sub, xchg, and, or, xor, min, max, inc/dec) and
  ``cmpxchg`` read and write the latest value, lane after lane;
- order is happens-before over the vector clocks of clocks.py, with the
  edges the PTX memory model gives global memory: a *release* is an
  atomic or store with release (acq_rel, seq_cst) order, or a strong
  (atomic or volatile) write after a fence of the same warp (the fence's
  clock is what it releases: a store after the fence is not covered);
  an *acquire* is an atomic or load with acquire order, or a strong read
  followed by a fence of the reading warp (what it read is acquired at
  the fence). A strong read of a word acquires every release of its
  release sequence (the RMWs since the last plain or strong store), so
  the last contributor to a counter acquires every earlier one. A fence of
  ``cta`` scope orders nothing between CTAs, and a release or acquire of
  ``cluster`` scope nothing between clusters (a grid of several: the
  cluster barrier, too, orders the CTAs of its own cluster only);
- a finding (``gmem-race``) is a plain load of a word whose last write by
  another warp is not ordered before it (the reader may see the stale
  value), a plain store not ordered after another warp's last plain write
  or plain read of the word; it names both lines and, where it can, the
  missing half: the flag the writer set before the store was fenced, or the
  reader's poll with no fence (acquire) after it;
- a finding (``gmem-unwritten``) is a plain load, after the warp acquired
  through global memory, of a word of a buffer the kernel writes that no
  warp writes in the whole launch (a fix-up reading a contributor's partial
  from the wrong slot);
- every strong access is a step of the schedule; a warp that reads again
  (a strong load, or a compare-and-swap that failed), in a loop, words no
  warp wrote since its last read there waits until one is written (it
  would read the same values): a poll whose flag is never set is then a
  deadlock that names the loop and the word it reads.

Under ``--trace`` every read of global memory (a strong access, a plain
load) adds a line naming the words read and their values.

Bulk copies from shared to global memory (``cp.async.bulk.global.shared::cta``,
a pointer and a size) write their words unordered with anything until a
``cp.async.bulk.wait_group`` without ``.read`` retires their group in the
issuing warp; a release after that wait covers them, so a reader that
acquired it reads them clean, and one that acquired a release before the
wait (or after a ``.read`` wait only) races, the report naming the copy.

TMA tensor stores and reduce-adds (``cp.async.bulk.tensor`` shared to
global, ``pipeline.copy.tma_store``, ``cp.reduce.async.bulk.tensor``)
are followed through a tensor map the launch describes (``--tensor-map``,
``Launch.tensor_maps``: element size, dims, box, strides, and the pointer
argument the tensor lies in; the kernel only holds the map's address): the
box at the copy's coordinates, clipped at the tensor's bounds, writes its
words as a bulk copy does (unordered until a wait without ``.read``
retires its group). A reduce-add is an atomic add per element: reduce-adds
of the same words by several warps are not ordered with each other and
need not be (addition is order-independent), but a plain load or store of
them must be ordered after every one (retired, then released and
acquired), and a reduce-add after another warp's plain store or read of
the words is ordered after it. Words are 4 bytes: a tensor of 2-byte
elements whose box edge splits a word shows two writers of it. Without a
map for its descriptor a TMA store is not followed.
"""

from __future__ import annotations

import operator

from . import memory as M
from .clocks import Clocks, join
from .evaluate import _lanes_of, _signed
from .engine import Step
from .frontend import UNKNOWN, Lanes, Node
from .model import SimError, source_location

WORD = 4
# The epoch of a word a bulk copy (cp.async.bulk.global.shared::cta) writes
# until a wait on its bulk async-group (without .read) retires it: later
# than any clock, so nothing orders it before a reader.
PENDING = 1 << 62
BULK_TO_GLOBAL = "nvvm.cp.async.bulk.global.shared.cta"
# What a report calls the asynchronous writes of global memory (gmem.py
# follows): a bulk copy, a TMA store, a TMA reduce-add.
_ASYNC_WRITES = {BULK_TO_GLOBAL: "bulk copy",
                 "nvvm.cp.async.bulk.tensor.global.shared.cta": "TMA store",
                 "pipeline.copy.tma_store": "TMA store",
                 "nvvm.cp.async.bulk.tensor.reduce": "TMA reduce-add"}
_ACQUIRE = (4, 6, 7)    # acquire, acq_rel, seq_cst (LLVM's AtomicOrdering)
_RELEASE = (5, 6, 7)    # release, acq_rel, seq_cst
_WIDE = ("gpu", "sys", "cluster")   # scopes that order between CTAs


def synchronizes(body: list[Node]) -> bool:
    """Whether a kernel's tree has a strong global access or a fence."""
    for n in body:
        g = n.a.get("gmem")
        if "gfence" in n.a or (g is not None and (g[0] in ("rmw", "cas") or g[3] or g[5])):
            return True
        for r in n.regions:
            for _, blk in r:
                if synchronizes(blk):
                    return True
    return False


def _rmw(op: int, width: int | None):
    m = (1 << (width or 32)) - 1
    s = (lambda x: x - (1 << width) if width and x >> (width - 1) & 1 else x)
    return {0: lambda x, y: y, 1: lambda x, y: (x + y) & m, 2: lambda x, y: (x - y) & m,
            3: operator.and_, 4: lambda x, y: ~(x & y) & m, 5: operator.or_, 6: operator.xor,
            7: lambda x, y: x if s(x) >= s(y) else y, 8: lambda x, y: x if s(x) <= s(y) else y,
            9: max, 10: min, 15: lambda x, y: 0 if x >= y else x + 1,
            16: lambda x, y: y if x == 0 or x > y else x - 1}.get(op)


class Word:
    """One 4-byte word's history: the last write (agent id, its clock, the
    op), the value an access of ``size`` bytes left at it, the releases
    its reads acquire, its version (bumped by every write), the plain
    reads since the last write (agent id -> (clock, op, loc)) and the TMA
    reduce-adds since the last plain write (agent id -> (clock or
    PENDING, op, loc); None when there are none)."""

    __slots__ = ("w", "e", "op", "loc", "strong", "value", "size", "sync", "version", "reads",
                 "adds")

    def __init__(self):
        self.w, self.e, self.op, self.loc, self.strong = -1, 0, None, None, False
        self.value, self.size = UNKNOWN, 0
        self.sync: list = []     # releases: (clock, writer's CTA, reach: _reach)
        self.version = 0
        self.reads: dict = {}
        self.adds: dict | None = None

    @property
    def written(self) -> bool:
        return self.w >= 0 or bool(self.adds)


class _Warp:
    """What one warp's accesses of global memory left behind."""

    __slots__ = ("pending", "fence", "polls", "acquired", "flags", "bulk_open", "bulk_groups")

    def __init__(self):
        # Its bulk copies to global memory: the words of those not yet
        # committed, and per committed bulk async-group (oldest first).
        self.bulk_open: list = []
        self.bulk_groups: list = []
        self.pending: list = []   # releases its strong reads saw, acquired at its next fence
        self.fence = None         # the release of its last fence: (clock, CTA, reach)
        self.polls: dict = {}     # word -> version its strong reads saw since its last write
        self.acquired = False     # it acquired a release through global memory
        self.flags: list = []     # its strong writes: (its clock then, clock released, op, loc)


def _loc(loc) -> str | None:
    return source_location(loc)


def _at(op: str, loc) -> str:
    where = _loc(loc)
    return f"{op} at {where}" if where else op


class GlobalMemory:
    """The global memory of one schedule's world."""

    def __init__(self, world, mem: M.Memory):
        self.w, self.mem = world, mem
        self.words: dict = {}        # (argument position, byte offset) -> Word
        self.warps: dict = {}        # agent id -> _Warp
        self.written: set = set()    # argument positions some warp wrote
        self.unwritten: dict = {}    # word -> (warp label, op, loc) read after an acquire
        world.final_checks.append(self.check_unwritten)

    def warp(self, a) -> _Warp:
        st = self.warps.get(a.id)
        if st is None:
            st = self.warps[a.id] = _Warp()
        return st

    # -- naming --------------------------------------------------------------
    def name(self, key) -> str:
        pos, off = key
        return f"{self.mem.arg(pos)} byte {off}"

    # -- addresses -----------------------------------------------------------
    @staticmethod
    def lanes(addr, mask: int) -> list:
        """(lane, decoded address) of the active lanes; None where unknown."""
        if isinstance(addr, Lanes):
            return [(i, M._decode(addr[i])) for i in range(32) if mask >> i & 1]
        d = M._decode(addr)
        first = next((i for i in range(32) if mask >> i & 1), 0)
        return [(first, d)]   # one address: one access for the warp

    @staticmethod
    def keys(d, size: int) -> list:
        pos, off = d
        return [(pos, w) for w in range(off - off % WORD, off + size, WORD)]

    def initial(self, key, size: int, width: int | None, strong: bool):
        if width is None:
            return UNKNOWN
        pos, off = key
        if strong and pos not in self.mem.given:
            return 0
        return self.mem._value(pos, off, size, width)

    def value(self, key, size: int, width: int | None, strong: bool):
        wd = self.words.get(key)
        if wd is None or not wd.written:
            return self.initial(key, size, width, strong)
        if wd.adds:
            return UNKNOWN
        return wd.value if wd.size == size and width is not None else UNKNOWN

    # -- ordering ------------------------------------------------------------
    def release(self, a, order: int, scope: str) -> list:
        """What a strong write of ``a`` releases: its clock (release order;
        its own entry ticks), the clock of its last fence, or nothing."""
        if order in _RELEASE:
            return [(self.w.clocks.release(None), a.cta, _reach(scope))]
        st = self.warp(a)
        return [st.fence] if st.fence is not None else []

    def acquire(self, a, releases, scope: str) -> None:
        for clock, cta, reach in releases:
            if self.orders(cta, reach, a, scope):
                Clocks.acquire(a, clock)
                self.warp(a).acquired = True

    def orders(self, cta: int, reach: str, a, scope: str) -> bool:
        """Whether a release by CTA ``cta`` of ``reach`` synchronizes with an
        acquire of ``scope`` by warp ``a``: within a CTA always; ``cta``
        scope on either side nothing else; ``cluster`` scope on either side
        the CTAs of one cluster."""
        if cta == a.cta:
            return True
        if reach == "cta" or scope not in _WIDE:
            return False
        if reach == "cluster" or scope == "cluster":
            size = self.w.cluster.size
            return cta // size == a.cta // size
        return True

    def fence(self, a, scope: str, acquires: bool, releases: bool) -> None:
        st = self.warp(a)
        if acquires and st.pending:
            self.acquire(a, st.pending, scope)
            st.pending = []
        if releases:
            st.fence = (self.w.clocks.release(None), a.cta, _reach(scope))

    # -- plain accesses ------------------------------------------------------
    def plain_store(self, a, n: Node, d, value, size: int, pending: bool = False) -> list:
        """A plain store of ``a``, or (``pending``) the bytes of a bulk copy
        it issued, unordered until a wait retires its group
        (:meth:`bulk_wait`). Returns the words written."""
        self.written.add(d[0])
        st = self.warp(a)
        st.polls.clear()
        keys = self.keys(d, size)
        for i, key in enumerate(keys):
            wd = self.words.get(key)
            if wd is None:
                wd = self.words[key] = Word()
            if wd.w >= 0 and wd.w != a.id and not wd.strong and wd.e > a.vc[wd.w]:
                self.race(a, n, key, wd.w, wd.op, wd.loc, "writes", "written")
            for r, (e, op, loc) in wd.reads.items():
                if r != a.id and e > a.vc[r]:
                    self.race(a, n, key, r, op, loc, "writes", "read")
            self.check_adds(a, n, key, wd, "writes")
            wd.adds = None
            wd.w, wd.op, wd.loc, wd.strong = a.id, n.name, n.loc, False
            wd.e = PENDING if pending else a.vc[a.id]
            wd.value, wd.size = (value, size) if i == 0 else (UNKNOWN, 0)
            wd.sync, wd.reads = [], {}
            wd.version += 1
        return keys

    # -- bulk copies to global memory (the async proxy) -------------------------
    def bulk_store(self, a, n: Node, d, size: int) -> None:
        """``cp.async.bulk.global.shared::cta`` of ``size`` bytes to ``d``:
        its words are written now, unordered with anything (their contents
        unknown: the simulator does not follow shared memory's values) until
        a wait on its bulk async-group that is not ``.read`` retires it."""
        keys = self.plain_store(a, n, d, UNKNOWN, size, pending=True)
        self.warp(a).bulk_open.append(keys)

    def tma_store(self, a, n: Node, buf: int, runs: list, add: bool) -> None:
        """A TMA tensor store (``add``: reduce-add) of ``a`` whose box covers
        the byte ``runs`` ((offset, length), clipped at the tensor's bounds)
        of argument ``buf``'s buffer: written (added to) now, unordered
        until a wait on its bulk async-group that is not ``.read``."""
        keys = []
        for off, size in runs:
            if add:
                keys += self.reduce(a, n, (buf, off), size)
            else:
                keys += self.plain_store(a, n, (buf, off), UNKNOWN, size, pending=True)
        self.warp(a).bulk_open.append(keys)

    def reduce(self, a, n: Node, d, size: int) -> list:
        """A reduce-add's words: atomic per element, so unordered with other
        reduce-adds; ordered after another warp's plain store or read."""
        self.written.add(d[0])
        self.warp(a).polls.clear()
        keys = self.keys(d, size)
        for key in keys:
            wd = self.words.get(key)
            if wd is None:
                wd = self.words[key] = Word()
            if wd.w >= 0 and wd.w != a.id and not wd.strong and wd.e > a.vc[wd.w]:
                self.race(a, n, key, wd.w, wd.op, wd.loc, "adds to", "written")
            for r, (e, op, loc) in wd.reads.items():
                if r != a.id and e > a.vc[r]:
                    self.race(a, n, key, r, op, loc, "adds to", "read")
            if wd.adds is None:
                wd.adds = {}
            wd.adds[a.id] = (PENDING, n.name, n.loc)
            wd.version += 1
        return keys

    def check_adds(self, a, n: Node, key, wd: Word, verb: str) -> None:
        """A plain access of ``a`` after other warps' reduce-adds of the word:
        each must be ordered before it."""
        for r, (e, op, loc) in (wd.adds or {}).items():
            if r != a.id and e > a.vc[r]:
                self.race(a, n, key, r, op, loc, verb, "added to", epoch=e)

    def bulk_commit(self, a) -> None:
        """``cp.async.bulk.commit_group``: the open bulk copies form a group."""
        st = self.warp(a)
        if st.bulk_open or st.bulk_groups:
            st.bulk_groups.append(st.bulk_open)
            st.bulk_open = []

    def bulk_wait(self, a, pending: int, read: bool) -> None:
        """``cp.async.bulk.wait_group[.read] pending``: without ``.read``, the
        groups older than the newest ``pending`` are complete, so their
        writes are ordered here in the warp's program order (a release after
        it covers them); ``.read`` waits until they read their sources only."""
        st = self.warp(a)
        if read or len(st.bulk_groups) <= pending:
            return
        done = st.bulk_groups[:len(st.bulk_groups) - pending]
        st.bulk_groups = st.bulk_groups[len(st.bulk_groups) - pending:]
        now = a.vc[a.id]
        for copies in done:
            for keys in copies:
                for key in keys:
                    wd = self.words.get(key)
                    if wd is not None and wd.w == a.id and wd.e == PENDING:
                        wd.e = now
                    if wd is not None and wd.adds and a.id in wd.adds:
                        e, op, loc = wd.adds[a.id]
                        if e == PENDING:
                            wd.adds[a.id] = (now, op, loc)

    def plain_load(self, a, n: Node, d, size: int, width: int | None):
        st = self.warp(a)
        for key in self.keys(d, size):
            wd = self.words.get(key)
            if wd is None or not wd.written:
                if st.acquired and key not in self.unwritten:
                    self.unwritten[key] = (a.label(), n.name, n.loc)
                continue
            if wd.w >= 0 and wd.w != a.id and wd.e > a.vc[wd.w]:
                self.race(a, n, key, wd.w, wd.op, wd.loc, "reads", "written")
            self.check_adds(a, n, key, wd, "reads")
            wd.reads[a.id] = (a.vc[a.id], n.name, n.loc)
        return self.value((d[0], d[1]), size, width, False)

    # -- strong accesses (steps) ---------------------------------------------
    def strong(self, a, n: Node, accesses: list, operands: list):
        """A warp's atomic / volatile / ordered access (one step): reads and
        writes the words of ``accesses`` ((lane, decoded address)) lane by
        lane; returns the per-lane results."""
        kind, size, width, order, scope, _, bin_op = n.a["gmem"]
        st = self.warp(a)
        keys = [(lane, d, (d[0], d[1] - d[1] % WORD)) for lane, d in accesses if d is not None]
        reads = kind in ("load", "rmw", "cas")
        results = {}

        def polling() -> bool:
            # Reads again words nobody wrote since its last read: waits.
            return (kind in ("load", "cas") and bool(keys) and bool(st.polls)
                    and all(k in st.polls for _, _, k in keys)
                    and all(self.version_of(k) == v for k, v in st.polls.items()))

        def fire():
            wrote = False
            for lane, d, key in keys:
                wd = self.words.get(key)
                old = self.value(key, size, width, True) if reads else UNKNOWN
                if reads and wd is not None:
                    if order in _ACQUIRE:
                        self.acquire(a, wd.sync, scope)
                    else:
                        st.pending = _merge(st.pending + wd.sync)
                if kind == "load":
                    st.polls[key] = self.version_of(key)
                    results[lane] = old
                    continue
                args = [operands[j][lane] if isinstance(operands[j], Lanes) else operands[j]
                        for j in range(len(operands))]
                if kind == "cas":
                    ok = old is not UNKNOWN and args[0] is not UNKNOWN and old == args[0]
                    results[lane] = (old, int(ok)) if old is not UNKNOWN else UNKNOWN
                    if not ok:   # a failed compare-and-swap only read: a poll
                        st.polls[key] = self.version_of(key)
                        continue
                    new = args[1]
                elif kind == "rmw":
                    f = _rmw(bin_op, width)
                    new = (UNKNOWN if f is None or old is UNKNOWN or args[0] is UNKNOWN
                           or not isinstance(args[0], int) else f(old, args[0]))
                    results[lane] = old
                else:
                    new = args[0]
                self.strong_write(a, n, key, new, size, order, scope, kind != "store")
                wrote = True
            if wrote:
                st.polls.clear()
            if reads:
                self.trace_read(a, n, [(k, results.get(lane)) for lane, _, k in keys])
            return None

        def what() -> str:
            words = ", ".join(sorted({self.name(k) for _, _, k in keys})) or "an unknown word"
            if polling():
                vals = ", ".join(str(self.value(k, size, width, True))
                                 for k in sorted({k for _, _, k in keys}))
                return (f"{a.label()} polls {words} in the loop at "
                        f"{_loc(a.where) or 'an unknown line'} (reads {vals}; no warp "
                        f"writes it again)")
            return f"{a.label()}: {n.name} {words}"

        def cause() -> str | None:
            if not polling():
                return None
            return (f"the poll loop at {_loc(a.where) or 'an unknown line'} never sees the "
                    f"value it waits for: {a.label()} reads "
                    f"{', '.join(sorted({self.name(k) for _, _, k in keys}))}, which no "
                    f"warp still running writes again (a wrong expected count, or an "
                    f"arrival nobody makes)")

        yield Step(fire, lambda: not polling(), what, None, cause)
        if kind == "store":
            return None
        return self.per_lane(results, mask_lanes=[lane for lane, _, _ in keys])

    def trace_read(self, a, n: Node, pairs: list) -> None:
        """Under ``--trace`` (``World.trace``): a line naming the words an
        access of ``a`` read and their values (a compare-and-swap's: the
        old value and whether it swapped), the first four and a count of
        the rest."""
        if self.w.trace is None or not pairs:
            return
        seen: dict = {}
        for key, v in pairs:
            seen.setdefault(key, v)
        shown, last = [], None
        for k, v in list(seen.items())[:4]:   # "`ws` (argument 0) byte 0 = 1, byte 4 = 2"
            shown.append(f"{self.name(k) if k[0] != last else f'byte {k[1]}'} = {_show(v)}")
            last = k[0]
        more = f" (+{len(seen) - 4} more words)" if len(seen) > 4 else ""
        where = _loc(n.loc)
        self.w.trace.append(f"{a.label()} read {', '.join(shown)}{more} "
                            f"({n.name}{f' at {where}' if where else ''})")

    def version_of(self, key) -> int:
        wd = self.words.get(key)
        return 0 if wd is None else wd.version

    @staticmethod
    def per_lane(results: dict, mask_lanes: list):
        if not results:
            return UNKNOWN
        if len(results) == 1 and len(mask_lanes) == 1:
            return next(iter(results.values()))
        vals = Lanes(results.get(i, UNKNOWN) for i in range(32))
        return vals[mask_lanes[0]] if all(vals[i] == vals[mask_lanes[0]]
                                          for i in mask_lanes) else vals

    def strong_write(self, a, n: Node, key, value, size: int, order: int, scope: str,
                     rmw: bool) -> None:
        self.written.add(key[0])
        st = self.warp(a)
        wd = self.words.get(key)
        if wd is None:
            wd = self.words[key] = Word()
        before = a.vc[a.id]
        rel = self.release(a, order, scope)
        # A read-modify-write continues the word's release sequence; a
        # store starts a new one.
        wd.sync = _merge(wd.sync + rel) if rmw else rel
        wd.w, wd.e, wd.op, wd.loc, wd.strong = a.id, before, n.name, n.loc, True
        wd.value, wd.size = value, size
        wd.reads = {}
        wd.version += 1
        covered = next((c[a.id] for c, cta, _ in rel if cta == a.cta), 0)
        st.flags.append((before, covered, n.name, n.loc, key))

    # -- findings ------------------------------------------------------------
    def race(self, a, n: Node, key, other: int, op, loc, verb: str, done: str,
             epoch: int | None = None):
        here, there = _at(n.name, n.loc), _at(op or "an access", loc)
        o = self.w.agents[other]
        theirs = done in ("written", "added to")   # the other warp wrote
        writer, reader = (o, a) if theirs else (a, o)
        if epoch is None:
            epoch = self.words[key].e if theirs else a.vc[a.id]
        if verb == "writes" and done == "written" and op in _ASYNC_WRITES and (
                n.name in _ASYNC_WRITES):
            hint = ("both are asynchronous writes of these words and nothing orders one "
                    "after the other: whichever lands last wins (contributions to one sum "
                    "take a reduce-add, cp.reduce.async.bulk.tensor .add)")
        else:
            hint = self.hint(writer, reader, epoch, key, op if theirs else n.name)
        raise SimError(
            "gmem-race",
            f"{a.label()} {verb} {self.name(key)} ({here}) {done} by {o.label()} ({there}) "
            f"with nothing ordering the two: "
            + ("the read may see the stale value" if verb == "reads" else
               "the add may be lost under the other write" if done == "written" and
               verb == "adds to" else
               "the read may see the value before the add" if verb == "adds to" else
               "the other side may see either value")
            + (f"; {hint}" if hint else ""),
            [f"{a.label()} at {_loc(n.loc)}" if _loc(n.loc) else f"{a.label()}: {n.name}",
             f"{o.label()} at {_loc(loc)}" if _loc(loc) else f"{o.label()}: {op}"])

    def hint(self, writer, reader, epoch: int, key, op=None) -> str:
        """Which half of the hand-over is missing, where it shows (``op``:
        the write's)."""
        rst = self.warp(reader)
        what = _ASYNC_WRITES.get(op, "bulk copy")
        if epoch >= PENDING:
            return (f"no cp.async.bulk.wait_group (without .read) of {writer.label()} retired "
                    f"that {what} before the release: its bytes may not have landed "
                    f"(.read only waits until the copy has read shared memory)")
        if any(cta == writer.cta or reach != "cta" for c, cta, reach in rst.pending
               if c[writer.id] >= epoch):
            return (f"{reader.label()} read a flag that {writer.label()} released after "
                    f"this write, but no fence (or acquire load) of {reader.label()} follows "
                    f"that read: the poll has no acquire")
        late = [f for f in self.warp(writer).flags if f[0] >= epoch and f[1] < epoch]
        if late:
            _, _, op, loc, fkey = late[0]
            wd = self.words[key]
            wop = wd.op
            if wd.adds and writer.id in wd.adds:
                wop = wd.adds[writer.id][1]
            if wop in _ASYNC_WRITES:
                return (f"{writer.label()} set {self.name(fkey)} ({_at(op, loc)}) with no "
                        f"wait (cp.async.bulk.wait_group without .read) and fence between "
                        f"that {_ASYNC_WRITES[wop]} and the flag: the flag is set before "
                        f"the copy's bytes are retired and fenced")
            return (f"{writer.label()} set {self.name(fkey)} ({_at(op, loc)}) after this "
                    f"write with no fence between them (nor release order): the flag is "
                    f"set before the write is fenced")
        if writer.cluster != reader.cluster:
            return (f"CTA {writer.cta} runs in cluster {writer.cluster} and CTA {reader.cta} "
                    f"in cluster {reader.cluster}: a cluster barrier, or a release or acquire "
                    f"of cluster scope, orders the CTAs of its own cluster only (hand a "
                    f"partial to another cluster through a flag released and acquired at "
                    f"gpu scope)")
        return ""

    def check_unwritten(self) -> None:
        """At the end of the launch: a word read after an acquire, in a buffer
        the kernel writes, that no warp wrote."""
        for key, (who, op, loc) in self.unwritten.items():
            wd = self.words.get(key)
            if key[0] in self.written and (wd is None or not wd.written):
                raise SimError(
                    "gmem-unwritten",
                    f"{who} reads {self.name(key)} ({_at(op, loc)}) after its acquire, but no "
                    f"warp of the launch writes that word (the kernel writes other words "
                    f"of {self.mem.arg(key[0])}): it reads a partial nobody stores",
                    [f"{who} at {_loc(loc)}"] if _loc(loc) else [])


def _show(v) -> str:
    if isinstance(v, tuple) and len(v) == 2:   # cmpxchg: (old, swapped)
        return f"{v[0]!r} ({'swapped' if v[1] else 'no swap'})"
    return repr(v)


def _reach(scope: str) -> str:
    """Whom a release of ``scope`` may synchronize with: its CTA (``cta``),
    its cluster (``cluster``) or the grid (``gpu``, ``sys``)."""
    return "cta" if scope not in _WIDE else "cluster" if scope == "cluster" else "gpu"


def _merge(releases: list) -> list:
    """Releases with the same (CTA, reach) joined into one clock."""
    out: dict = {}
    for clock, cta, reach in releases:
        k = (cta, reach)
        out[k] = join(out.get(k), clock)
    return [(c, cta, reach) for (cta, reach), c in out.items()]


# -- the interpreter's steps (interp.py: ``it`` its _Interp) -------------------

def access(it, n: Node, mask: int):
    """A load, store or atomic of global memory the kernel synchronizes
    through; returns its result (per lane where it differs)."""
    env, gm = it.env, it.gm
    kind, size, width, order, _scope, volatile, _ = n.a["gmem"]
    acc = gm.lanes(env[n.ins[1 if kind == "store" else 0]], mask)
    if kind in ("rmw", "cas") or order or volatile:
        operands = [env[n.ins[0]]] if kind == "store" else [env[i] for i in n.ins[1:]]
        if kind == "load" and it.loops:
            it.a.where = it.loops[-1].loc   # a poll: its loop is what waits
        return (yield from gm.strong(it.a, n, acc, operands))
    if kind == "store":
        value = env[n.ins[0]]
        for lane, d in acc:
            if d is not None:
                gm.plain_store(it.a, n, d, value[lane] if isinstance(value, Lanes)
                               else value, size)
        return None
    vals = {lane: gm.plain_load(it.a, n, d, size, width) for lane, d in acc
            if d is not None}
    gm.trace_read(it.a, n, [((d[0], d[1] - d[1] % WORD), vals[lane]) for lane, d in acc
                            if d is not None])
    return gm.per_lane(vals, [lane for lane, _ in acc])


def bulk_to_global(it, n: Node, mask: int) -> None:
    """A bulk copy of shared memory to a global pointer: each active lane's
    copy (one for the warp where they agree), when its size is known."""
    size = it.env[n.ins[2]]
    if isinstance(size, Lanes):
        sizes = {size[i] for i in _lanes_of(mask)}
        size = sizes.pop() if len(sizes) == 1 else UNKNOWN
    if not isinstance(size, int) or size <= 0:
        return
    for _, d in it.gm.lanes(it.env[n.ins[0]], mask):
        if d is not None:
            it.gm.bulk_store(it.a, n, d, size)


def tma_to_global(it, n: Node, mask: int) -> None:
    """A TMA tensor store or reduce-add through a descriptor the launch
    gives a tensor map for: the box at each active lane's coordinates (one
    copy for the lanes that agree)."""
    tm, buf = tensor_map(it, n, mask)
    if tm is None:
        return
    coords, add = n.a["gtma"]
    seen = set()
    for lane in _lanes_of(mask):
        cs = []
        for i in coords:
            v = it.env[n.ins[i]]
            v = v[lane] if isinstance(v, Lanes) else v
            cs.append(_signed(v, 32) if isinstance(v, int) else None)
        key = tuple(cs)
        if len(key) != len(tm.dims):
            it.fail(n, f"{len(key)} coordinates through a tensor map of {len(tm.dims)} dims")
        if None in key or key in seen:
            continue
        seen.add(key)
        it.gm.tma_store(it.a, n, buf, tm.runs(key), add)


def tensor_map(it, n: Node, mask: int):
    """The launch's tensor map of ``n``'s descriptor (operand 0) and the
    buffer its tensor lies in; (None, None) when it gives none."""
    from .smemrace import uniform
    d = M._decode(uniform(it.env[n.ins[0]], mask))
    tm = None if d is None else it.launch.tensor_maps.get(d[0])
    if tm is None:
        return None, None
    return tm, d[0] if tm.buffer is None else tm.buffer
