"""Hand-driven mbarriers and ``st.async`` into another CTA's shared memory:
a cluster exchange (``kernel/row_ring.py``'s: each CTA's thread 0 arms its
barrier for the other CTAs' bytes and sends its value to every other
CTA's slot with ``st.async ... mbarrier::complete_tx::bytes``, completing
on that CTA's barrier; every thread waits and reads the slots).

A kernel with an ``st.async`` (an ``llvm.inline_asm`` line; MLIR has no op
for it) gets this model of the mbarriers it initializes itself
(``mbarrier.init``: pipelines' barriers are the pipeline model's):

- per CTA and byte offset, a barrier of ``count`` arrivals and a tx count;
  ``mbarrier.arrive`` and ``arrive.expect_tx`` (each active lane arrives;
  the address may be another CTA's, through ``mapa``), ``expect_tx`` and
  ``complete_tx`` move it; a phase completes when every arrival came and
  the tx count is back to 0. Every arrival and every byte releases the
  clock of its warp (:mod:`.clocks`) into the phase;
- ``mbarrier.try_wait.parity`` (the blocking form) waits until the phase of
  that parity completed and acquires what it collected;
- ``mbarrier.try_wait`` / ``mbarrier.test_wait`` with a phase parity (one
  try, an i1): true and the same acquire when the phase completed, false
  (acquiring nothing) otherwise. A loop around it is the wait: a try that
  failed in a loop blocks the warp's next try of that barrier and parity
  in the same loop until the barrier's phase moves (a loop that never sees
  it complete is a deadlock naming the loop, not a run of tries);
- ``st.async`` writes its bytes into the shadow of the target CTA's shared
  memory (:mod:`.smemrace`) as the issuing warp's write, then completes
  them on the target's barrier: a read by the target's warps is ordered
  after it through that barrier's wait only, and a read that is not (no
  wait, the wrong phase) is an ``smem-race`` naming both lines; so is a
  send into a slot whose previous value a warp of the target may still be
  reading.

Kernels without ``st.async`` are simulated as before (their raw mbarrier
ops are not modelled). The state form of the one-try waits (an i64 state
from an arrive) is not modelled.
"""

from __future__ import annotations

import re

from . import smemrace as SR
from .clocks import Clocks
from .engine import Step
from .evaluate import _lanes_of
from .frontend import UNKNOWN, Lanes
from .model import SimError, source_location

# The asm line of an st.async: its address and barrier operands ($N) and
# the bytes it stores.
_ST_ASYNC = re.compile(r"st\.async\S*mbarrier::complete_tx::bytes(\S*)\s+\[\$(\d+)\],\s*"
                       r"\S+,\s*\[\$(\d+)\]")
_BYTES = {"8": 1, "16": 2, "32": 4, "64": 8}
OPS = ("nvvm.mbarrier.init", "nvvm.mbarrier.arrive", "nvvm.mbarrier.arrive.expect_tx",
       "nvvm.mbarrier.expect_tx", "nvvm.mbarrier.complete_tx", "nvvm.mbarrier.try_wait.parity",
       "nvvm.mbarrier.try_wait", "nvvm.mbarrier.test.wait")
ONE_TRY = ("nvvm.mbarrier.try_wait", "nvvm.mbarrier.test.wait")


def st_async_facts(asm: str) -> tuple | None:
    """(address operand, barrier operand, bytes) of an ``st.async`` asm
    line; None for any other asm."""
    m = _ST_ASYNC.search(asm)
    if m is None:
        return None
    suffix = m.group(1)
    width = re.findall(r"(\d+)$", suffix)
    vec = re.search(r"\.v(\d)", suffix)
    size = _BYTES.get(width[0], 4) if width else 4
    return int(m.group(2)), int(m.group(3)), size * (int(vec.group(1)) if vec else 1)


class RawBarrier:
    """One hand-driven mbarrier."""

    __slots__ = ("count", "pending", "tx", "phase", "collect", "clocks", "where")

    def __init__(self, count: int, where: str):
        self.count, self.pending, self.tx, self.phase = count, count, 0, 0
        self.collect = None          # the clock the phase in progress collects
        self.clocks: dict = {}       # completed phase -> its clock
        self.where = where

    def release(self, w) -> None:
        self.collect = w.clocks.release(self.collect)

    def settle(self) -> None:
        if self.pending <= 0 and self.tx == 0:
            self.clocks[self.phase] = self.collect
            self.phase += 1
            self.pending, self.collect = self.count, None


def _target(it, n, x):
    """(CTA, byte offset) of a shared-memory address: this CTA's, or (from
    ``mapa``) another CTA's of the cluster."""
    r = SR.decode_remote(x)
    if r is None:
        return (it.a.cta, x) if type(x) is int else None
    rank, off = r
    size = it.w.cluster.size
    if rank >= size:
        it.fail(n, f"a shared::cluster address of CTA rank {rank}; the cluster has {size} CTAs")
    return it.a.cluster * size + rank, off


def _bar(it, n, mask):
    t = _target(it, n, SR.uniform(it.env[n.ins[0]], mask))
    return None if t is None else it.w.rawbars.get(t), t


def run_op(it, n, mask: int):
    """A raw mbarrier op of warp ``it`` (interp.py) in a kernel with st.async."""
    w, a, name = it.w, it.a, n.name
    lanes = len(_lanes_of(mask))
    if name == "nvvm.mbarrier.init":
        t = _target(it, n, SR.uniform(it.env[n.ins[0]], mask))
        count = SR.uniform(it.env[n.ins[1]], mask)
        if t is not None and isinstance(count, int):
            w.rawbars[t] = RawBarrier(count, source_location(n.loc) or name)
        return None
    bar, t = _bar(it, n, mask)
    if bar is None:
        return UNKNOWN      # a barrier the kernel did not initialize by hand
    if name == "nvvm.mbarrier.try_wait.parity":
        parity = SR.uniform(it.env[n.ins[1]], mask)
        if not isinstance(parity, int):
            it.fail(n, "cannot evaluate the phase parity")

        def done() -> bool:
            return (bar.phase & 1) != (parity & 1)

        def fire():
            last = bar.phase - 1 if (bar.phase - 1) & 1 == parity & 1 else bar.phase - 2
            Clocks.acquire(a, bar.clocks.get(last))
        yield Step(fire, done, lambda: f"{a.label()} waits on the mbarrier at byte {t[1]} of "
                                       f"CTA {t[0]} (initialized at {bar.where}) for phase "
                                       f"parity {parity & 1} (phase {bar.phase} still expects "
                                       f"{max(bar.pending, 0)} arrival(s) and {bar.tx} tx "
                                       f"byte(s))")
        return None
    if name in ONE_TRY:
        return (yield from _one_try(it, n, mask, bar, t))
    tx = SR.uniform(it.env[n.ins[1]], mask) if name.endswith("_tx") else None
    if name.endswith("_tx") and not isinstance(tx, int):
        it.fail(n, "cannot evaluate the tx count")

    def fire():
        if name in ("nvvm.mbarrier.arrive.expect_tx", "nvvm.mbarrier.expect_tx"):
            bar.tx += tx * lanes
        elif name == "nvvm.mbarrier.complete_tx":
            bar.tx -= tx * lanes
        if name in ("nvvm.mbarrier.arrive", "nvvm.mbarrier.arrive.expect_tx"):
            bar.pending -= lanes
        bar.release(w)
        bar.settle()
    yield Step(fire, None, lambda: f"{a.label()}: {name} at byte {t[1]} of CTA {t[0]}")
    return UNKNOWN


def _one_try(it, n, mask: int, bar: RawBarrier, t: tuple):
    """One ``mbarrier.try_wait`` / ``test_wait`` with a phase parity: 1 and
    the phase's acquire when the phase of that parity completed, else 0.
    A try that failed in a loop (``a.rawbar_polls``, cleared when a loop
    starts and ends: interp.new_poll) blocks the next one of the same
    barrier and parity until the barrier's phase moves."""
    a = it.a
    parity = SR.uniform(it.env[n.ins[1]], mask)
    if not n.a.get("parity") or not isinstance(parity, int):
        it.fail(n, "a one-try mbarrier wait is modelled with a phase parity (i32) only")
    parity &= 1
    polls = getattr(a, "rawbar_polls", None)
    if polls is None:
        polls = a.rawbar_polls = {}
    key = (t, parity)
    if it.loops:
        a.where = it.loops[-1].loc   # a poll: its loop is what waits

    def done() -> bool:
        return (bar.phase & 1) != parity

    def enabled() -> bool:
        return polls.get(key) != bar.phase

    def fire():
        if not done():
            if it.loops:
                polls[key] = bar.phase
            return 0
        polls.pop(key, None)
        last = bar.phase - 1 if (bar.phase - 1) & 1 == parity else bar.phase - 2
        Clocks.acquire(a, bar.clocks.get(last))
        return 1
    return (yield Step(fire, enabled,
                       lambda: f"{a.label()} polls the mbarrier at byte {t[1]} of CTA {t[0]} "
                               f"(initialized at {bar.where}) with a one-try wait for phase "
                               f"parity {parity} in the loop at "
                               f"{source_location(a.where) or 'an unknown line'} (phase "
                               f"{bar.phase} still expects {max(bar.pending, 0)} arrival(s) "
                               f"and {bar.tx} tx byte(s))"))


def st_async(it, n, mask: int):
    """``st.async``: each active lane's bytes into the target CTA's shared
    memory (a write of this warp), completed on the target's barrier."""
    w, a = it.w, it.a
    addr_i, bar_i, size = n.a["st_async"]

    def value(i, lane):
        v = it.env[n.ins[i]]
        return v[lane] if isinstance(v, Lanes) else v

    sends = []
    for lane in _lanes_of(mask):
        dst = _target(it, n, value(addr_i, lane))
        bt = _target(it, n, value(bar_i, lane))
        if dst is None or bt is None:
            continue
        bar = w.rawbars.get(bt)
        if bar is None:
            raise SimError("uninitialized", f"{a.label()}'s st.async at "
                           f"{source_location(n.loc) or '?'} completes on the mbarrier at "
                           f"byte {bt[1]} of CTA {bt[0]}, which no mbarrier.init initialized")
        sends.append((dst, bar))

    def fire():
        for (cta, off), bar in sends:
            SR.write(w, a, SR.granules(off, 1, size), "st.async", n.loc, cta)
            bar.tx -= size
            bar.release(w)
            bar.settle()
    if sends:
        yield Step(fire, None, lambda: f"{a.label()}: st.async to {len(sends)} lane(s)")
