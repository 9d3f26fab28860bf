"""Happens-before between warps: vector clocks over the barriers the
simulator models, for the race detector of plain shared memory
(:mod:`.smemrace`).

Each agent (warp) keeps a vector clock ``vc`` (one entry per agent of the
world; its own entry starts at 1, so 0 means "nothing of that warp is
known"). Program order within a warp is the agent's own entry; the edges
between warps are the synchronizations the simulator already runs:

- an mbarrier arrival (``arrive``, ``expect_tx``, a copy's ``complete_tx``,
  a ``tcgen05.commit`` landing) releases the arriving warp's clock into
  the phase in progress; a wait that passes on phase ``n`` acquires what
  phase ``n`` collected (:meth:`Clocks.mbarrier_release`,
  :meth:`Clocks.acquire`);
- a named barrier (``bar.arrive`` / ``bar.sync``): every arrival releases
  into its generation; a ``bar.sync`` that returns acquires it
  (``named_arrived`` / ``named_passed``);
- an asynchronous event (a TMA copy landing, a commit arriving) releases
  the clock its issuer had when it issued it (``World.post`` keeps it).

A release ticks the releasing warp's own entry, so what it does after the
release is not ordered before whoever acquires that release. Proxy fences
(``fence.proxy.async``) tick too and are remembered per warp
(:meth:`Clocks.fence`), so a reader can ask whether a fence lies between a
write and the release it acquired.
"""

from __future__ import annotations

from bisect import bisect_left


def join(x: list | None, y: list | None) -> list | None:
    """The elementwise maximum of two clocks (either may be None)."""
    if x is None:
        return None if y is None else list(y)
    if y is None:
        return list(x)
    return [p if p >= q else q for p, q in zip(x, y)]


class Clocks:
    """The vector clocks of one world's agents and the releases of its
    barriers."""

    def __init__(self, world):
        self.w = world
        self.n = 0
        # agent id -> the clock values of its proxy fences, ascending.
        self.fences: dict[int, list[int]] = {}

    def start(self, agents: list) -> None:
        self.n = len(agents)
        for a in agents:
            a.vc = [0] * self.n
            a.vc[a.id] = 1

    def now(self) -> list | None:
        """The clock of what runs now: the running agent's, or the issuer's
        clock of the event that lands now."""
        w = self.w
        a = w.current
        if a is not None:
            return a.vc
        e = w.firing
        return e.vc if e is not None else None

    def release(self, into: list | None) -> list | None:
        """``into`` joined with the running side's clock; the running agent's
        own entry ticks (its later steps are not part of this release)."""
        a = self.w.current
        out = join(into, self.now())
        if a is not None:
            a.vc[a.id] += 1
        return out

    @staticmethod
    def acquire(a, clock: list | None) -> None:
        if clock is None:
            return
        vc = a.vc
        for i, c in enumerate(clock):
            if c > vc[i]:
                vc[i] = c

    def fence(self, a) -> None:
        """A proxy fence by ``a``: its writes before it are visible to the
        async proxy of whoever acquires a later release of ``a``."""
        self.fences.setdefault(a.id, []).append(a.vc[a.id])
        a.vc[a.id] += 1

    def fenced(self, writer: int, epoch: int, seen: int) -> bool:
        """Whether ``writer`` ran a proxy fence after its write at ``epoch``
        and before the release at ``seen`` the reader acquired (fence
        values lie in ``[epoch, seen)``)."""
        fs = self.fences.get(writer)
        if not fs:
            return False
        i = bisect_left(fs, epoch)
        return i < len(fs) and fs[i] < seen

    # -- named barriers ----------------------------------------------------
    def named_arrived(self, nb, gen: int) -> None:
        """An arrival on generation ``gen`` of named barrier ``nb``."""
        nb.clocks[gen] = self.release(nb.clocks.get(gen))

    def named_passed(self, a, nb, gen: int) -> None:
        """``a``'s ``bar.sync`` on generation ``gen`` returned."""
        self.acquire(a, nb.clocks.get(gen))
