"""Races on plain shared memory: buffers that roles hand over with named
barriers or mbarriers of their own, not through a pipeline's stages.

Addresses: the interpreter evaluates the dynamic shared memory's base
(``llvm.mlir.addressof`` of an address-space-3 global) as offset 0 and
pointer arithmetic (``getelementptr`` over scalars, ``ptrtoint``,
``inttoptr``) as integers, so every ``llvm.store`` / ``llvm.load`` through a
``!llvm.ptr<3>`` has a byte offset per lane. Memory is shadowed in
granules of 4 bytes per CTA (warps write neighbouring words: a reduction's
partial sums, one per warp); an access covers every granule it touches.

Per granule the shadow keeps the last write (warp, its clock, the op) and
the reads since (per warp: its clock, or a :class:`AsyncRead` while an
asynchronous read is in flight). Order is happens-before (:mod:`.clocks`):
program order within a warp, and the barriers the simulator runs between
warps. A finding (``smem-race``):

- a write not ordered after the last write of another warp, or after a
  read since then (another warp's plain read; any asynchronous read whose
  retiring wait -- ``cp.async.bulk.wait_group.read``, ``wgmma.wait_group``
  -- is not ordered before the write, or has not run);
- a read not ordered after the last write of another warp;
- an asynchronous read (TMA store or reduce-add source, wgmma operand)
  of a granule whose last write no ``fence.proxy.async`` of its writer
  separates from the release the reader acquired.

Asynchronous readers are known by their start address (a TMA box's
extent is in its tensor map, a wgmma's in its descriptor's layout): the
granule where the tile begins, which every writer of the whole tile
touches. A bulk or TMA store reads the tile that starts there as well, as
far as :func:`_tile` can tell it (the run of granules the same op wrote
before the store), so another warp's write of any word of it must follow
the wait that retires the read (a wait orders only the thread that runs
it: the other warps need a barrier after it). ``tcgen05.mma`` operands,
``cp.async`` and TMA writes are not shadowed (stage buffers filled by TMA
are the pipelines' own checks).

Distributed shared memory: ``mapa`` gives an address in another CTA's
window of the cluster (:func:`remote`); a plain ``st`` / ``ld`` through
it (``!llvm.ptr<7>``, ``st.shared::cluster``) is an access of that CTA's
shadow by the issuing warp, so the peer's reads of the bytes must be
ordered after the write as for its own warps': a cluster barrier
(``barrier.cluster.arrive`` -- not ``.relaxed`` -- then ``wait``), a
race otherwise. ``st.async`` writes the target's shadow the same way and
is ordered by the target's mbarrier (:mod:`.rawbar`). A pipeline's TMA
copies land at their destination offset in every CTA of their multicast
mask; two landing on the same bytes in one phase of a stage's full
barrier are a finding (``async_verbs._land_bytes``), but their bytes are
not written into the shadow. A copy is checked against the asynchronous
reads of the words it lands on (:func:`async_fill`): a read in flight, or
another warp's retiring wait not ordered before the copy, is a finding
at the copy naming the read (uccl-project/mKernel#18: a load refilling
the buffer the same thread's TMA store still reads).
"""

from __future__ import annotations

from .frontend import Lanes
from .model import SimError, source_location

GRANULE = 2  # log2 of the granule's bytes: 4-byte words
# A shared::cluster address (mapa): bit 31, the CTA's rank at bit 24 and
# the byte offset in its shared memory below (32 bits: st.async takes the
# address as an i32).
_REMOTE = 1 << 31


class AsyncRead:
    """A read issued by warp ``agent`` that ends when a wait retires it
    (:func:`asyncread._keep_newest` calls :meth:`retire`)."""

    __slots__ = ("agent", "epoch", "op", "loc")

    def __init__(self, agent: int, op: str, loc: str | None):
        self.agent, self.epoch, self.op, self.loc = agent, None, op, loc

    def retire(self, a) -> None:
        self.epoch = a.vc[a.id]

    @property
    def what(self) -> str:
        where = source_location(self.loc)
        return f"{self.op} at {where}" if where else self.op


class Shadow:
    __slots__ = ("w", "e", "op", "loc", "reads")

    def __init__(self, w: int = -1, e: int = 0, op: str | None = None, loc: str | None = None):
        self.w, self.e = w, e  # the last writer (agent id, -1: none) and its clock
        self.op, self.loc = op, loc
        self.reads: dict = {}  # agent id -> (clock or AsyncRead, op, loc)


def remote(addr: int, rank: int) -> int:
    """``mapa addr, rank``: shared-memory byte ``addr`` in CTA ``rank``'s
    window of the cluster."""
    return _REMOTE | (rank & 0x7F) << 24 | addr & 0xFFFFFF


def decode_remote(x) -> tuple[int, int] | None:
    """(rank, byte offset) of a shared::cluster address; None otherwise."""
    if type(x) is not int or not x & _REMOTE:
        return None
    return (x >> 24) & 0x7F, x & 0xFFFFFF


def _shadow(w, cta: int) -> dict:
    """Granule -> Shadow of one CTA's shared memory."""
    m = w.smem.get(cta)
    if m is None:
        m = w.smem[cta] = {}
    return m


def granules(v, mask: int, nbytes: int) -> set:
    """The granules a warp's access of ``nbytes`` per lane at ``v`` (an int
    or :class:`Lanes`) touches with the lanes of ``mask``."""
    if isinstance(v, Lanes):
        xs = v if mask == 0xFFFFFFFF else [v[i] for i in range(32) if mask >> i & 1]
    else:
        xs = (v,)
    if nbytes <= 4:  # aligned: one granule per lane
        return {x >> GRANULE for x in xs if type(x) is int}
    out = set()
    for x in xs:
        if type(x) is not int:
            continue
        lo, hi = x >> GRANULE, (x + nbytes - 1) >> GRANULE
        if lo == hi:
            out.add(lo)
        else:
            out.update(range(lo, hi + 1))
    return out


def _site(op: str, loc: str | None) -> str:
    where = source_location(loc)
    return f"{op} at {where}" if where else op


def _race(w, a, g: int, what: str, op: str, loc: str | None, other: int, oop: str,
          oloc: str | None, why: str, cta: int | None = None) -> SimError:
    agents = w.agents
    here, there = source_location(loc), source_location(oloc)
    notes = [x for x in (here and f"{a.label()} at {here}",
                         there and f"{agents[other].label()} at {there}") if x]
    return SimError(
        "smem-race",
        f"{a.label()} {what} shared memory at byte {g << GRANULE} of CTA "
        f"{a.cta if cta is None else cta} with "
        f"{_site(op, loc)} {why} {agents[other].label()}'s {_site(oop, oloc)}",
        notes)


def write(w, a, gs, op: str, loc: str | None, cta: int | None = None) -> None:
    """A plain store by ``a`` to granules ``gs`` (of CTA ``cta``'s shared
    memory: its own by default)."""
    if not gs:
        return
    shadow, vc, me = _shadow(w, a.cta if cta is None else cta), a.vc, a.id
    e = vc[me]
    get = shadow.get
    for g in gs:
        s = get(g)
        if s is None:
            shadow[g] = Shadow(me, e, op, loc)
            continue
        if s.w != me or s.reads:
            _check_write(w, a, g, s, op, loc, cta)
        s.w, s.e, s.op, s.loc = me, e, op, loc


def _check_write(w, a, g: int, s: Shadow, op: str, loc: str | None,
                 cta: int | None = None) -> None:
    vc, me, o = a.vc, a.id, s.w
    if o >= 0 and o != me and vc[o] < s.e:
        raise _race(w, a, g, "writes", op, loc, o, s.op, s.loc,
                    "while nothing orders it after the last write by", cta)
    for r, (c, rop, rloc) in s.reads.items():
        if type(c) is AsyncRead:
            if c.epoch is None:
                raise _race(w, a, g, "writes", op, loc, r, rop, rloc,
                            "while its asynchronous read is still in flight "
                            "(no wait retired it yet):")
            c = c.epoch
            if r == me:
                continue
        if r != me and vc[r] < c:
            raise _race(w, a, g, "writes", op, loc, r, rop, rloc,
                        "while nothing orders it after the read (its end) by", cta)
    s.reads = {}


def _check_read(w, a, g: int, s: Shadow, op: str, loc: str | None, proxy: bool,
                cta: int | None = None) -> None:
    o = s.w
    if o < 0:
        return
    vc = a.vc
    if o != a.id and vc[o] < s.e:
        raise _race(w, a, g, "reads", op, loc, o, s.op, s.loc,
                    "while nothing orders it after the write by", cta)
    if proxy and not w.clocks.fenced(o, s.e, vc[o]):
        raise _race(w, a, g, "reads", op, loc, o, s.op, s.loc,
                    "through the async proxy, and no fence.proxy.async orders it after "
                    "the generic write by")


def read(w, a, gs, op: str, loc: str | None, cta: int | None = None) -> None:
    """A plain load by ``a`` of granules ``gs`` (of CTA ``cta``'s shared
    memory: its own by default)."""
    if not gs:
        return
    shadow, me = _shadow(w, a.cta if cta is None else cta), a.id
    c = a.vc[me]
    for g in gs:
        s = shadow.get(g)
        if s is None:
            s = shadow[g] = Shadow()
        else:
            _check_read(w, a, g, s, op, loc, False, cta)
            prev = s.reads.get(me)
            if prev is not None and type(prev[0]) is AsyncRead and prev[0].epoch is None:
                continue  # the read in flight ends later
        s.reads[me] = (c, op, loc)


def async_read(w, a, addr, op: str, loc: str | None, tile: bool = False) -> AsyncRead | None:
    """An asynchronous read by ``a`` starting at byte ``addr`` (through the
    async proxy); returns its token (None when the address is unknown).

    ``tile`` (bulk and TMA stores): the read also covers the tile that
    starts there (:func:`_tile`), so another warp's write of any of its
    words must be ordered after the wait that retires the read."""
    if type(addr) is not int:
        return None
    g = addr >> GRANULE
    shadow = _shadow(w, a.cta)
    s = shadow.get(g)
    if s is None:
        s = shadow[g] = Shadow()
    else:
        _check_read(w, a, g, s, op, loc, True)
    t = AsyncRead(a.id, op, loc)
    s.reads[a.id] = (t, op, loc)
    read_at = _async_granules(w, a.cta)
    read_at.add(g)
    if tile and s.w >= 0:
        entry = (t, op, loc)
        for h, sh in _tile(shadow, a, g, s):
            _check_read(w, a, h, sh, op, loc, True)
            sh.reads[a.id] = entry
            read_at.add(h)
    return t


def _async_granules(w, cta: int) -> set:
    """The granules of CTA ``cta`` an asynchronous read has covered."""
    m = w.smem_async_reads
    got = m.get(cta)
    if got is None:
        got = m[cta] = set()
    return got


def async_fill(w, a, cta: int, dst: int, nbytes: int, op: str, loc: str | None) -> None:
    """A TMA load or bulk copy issued by ``a`` that lands ``nbytes`` at
    byte ``dst`` of CTA ``cta``: its async-proxy writes must follow the end
    of every asynchronous read of those words (a bulk or TMA store's
    source, a wgmma operand): the issuing thread's own read retired by a
    wait (``cp.async.bulk.wait_group.read``) before this copy, another
    warp's retiring wait ordered before it. A read in flight, or retired
    but not ordered before the copy, is an ``smem-race`` at the copy naming
    the read. Plain accesses and the copies' own writes are the pipelines'
    checks (not shadowed here)."""
    read_at = w.smem_async_reads.get(cta)
    if not read_at:
        return
    lo, hi = dst >> GRANULE, (dst + nbytes - 1) >> GRANULE
    hits = (sorted(g for g in read_at if lo <= g <= hi) if len(read_at) < hi - lo + 1
            else [g for g in range(lo, hi + 1) if g in read_at])
    shadow, vc, me = _shadow(w, cta), a.vc, a.id
    for g in hits:
        s = shadow.get(g)
        if s is None:
            continue
        for r, (c, rop, rloc) in s.reads.items():
            if type(c) is not AsyncRead:
                continue
            if c.epoch is None:
                wait = ("cp.async.bulk.wait_group.read before the copy" if r == me else
                        "its wait, ordered before the copy by a barrier")
                raise _race(w, a, g, "writes", op, loc, r, rop, rloc,
                            f"(through the async proxy, as the copy lands) while an "
                            f"asynchronous read is still in flight (no wait retired it "
                            f"yet; needs {wait}):", cta)
            if r != me and vc[r] < c.epoch:
                raise _race(w, a, g, "writes", op, loc, r, rop, rloc,
                            "(through the async proxy, as the copy lands) while nothing "
                            "orders it after the read (its end) by", cta)


TILE_CAP = 1 << 16  # granules: 256 KiB, more than a CTA's shared memory


def _tile(shadow: dict, a, g: int, s: Shadow):
    """The granules after ``g`` that a bulk or TMA store from ``g`` reads,
    as far as the simulator can tell without the box's extent: the run of
    granules whose last write is the same op as ``g``'s (the source line
    that wrote the tile), ordered before the store (that write happened
    before it), and not read asynchronously since (a tile stored before:
    the next stage of a staging ring). A tile written by several ops is
    followed only as far as its first op's words."""
    vc, op, loc = a.vc, s.op, s.loc
    for h in range(g + 1, g + TILE_CAP):
        sh = shadow.get(h)
        if sh is None or sh.w < 0 or sh.loc != loc or sh.op != op:
            return
        if sh.w != a.id and vc[sh.w] < sh.e:
            return
        if any(type(r[0]) is AsyncRead for r in sh.reads.values()):
            return
        yield h, sh


def uniform(v, mask: int):
    """``v`` as one int when every lane of ``mask`` holds the same int
    (an address or descriptor a warp computed from lane-varying values)."""
    if isinstance(v, Lanes):
        if mask == 0xFFFFFFFF:
            v = v[0] if v.count(v[0]) == 32 else None
        else:
            vals = {v[i] for i in range(32) if mask >> i & 1}
            v = vals.pop() if len(vals) == 1 else None
    return v if type(v) is int else None


def wgmma_operand(desc) -> int | None:
    """The byte address a wgmma shared-memory descriptor starts at (bits
    0-13: address >> 4)."""
    if desc is None:
        return None
    return (desc & 0x3FFF) << 4


def cluster_access(it, n, mask: int, store: bool) -> None:
    """The interpreter's (``it``) load or store through a shared::cluster
    address (``mapa``): each active lane's bytes in the shared memory of
    the CTA of its rank, in the warp's cluster."""
    size = it.w.cluster.size
    per_cta: dict = {}
    addr = it.env[n.ins[1 if store else 0]]
    for lane in range(32):
        if not mask >> lane & 1:
            continue
        r = decode_remote(addr[lane] if isinstance(addr, Lanes) else addr)
        if r is None:
            continue
        rank, off = r
        if rank >= size:
            it.fail(n, f"a shared::cluster address of CTA rank {rank}; the cluster has "
                       f"{size} CTAs")
        per_cta.setdefault(it.a.cluster * size + rank, []).append(off)
    for cta, offs in per_cta.items():
        gs = set()
        for off in offs:
            gs |= granules(off, 1, n.a["dsmem"])
        (write if store else read)(it.w, it.a, gs, n.name, n.loc, cta)
