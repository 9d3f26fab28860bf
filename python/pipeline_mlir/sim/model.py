"""Hardware objects of the simulator, independent of MLIR.

- :class:`Mbarrier`: an mbarrier as the PTX ISA describes it (expected
  arrival count, pending arrivals, signed tx-count, phase), plus what the
  checker needs: which phase each waiter observed last and, per phase, the
  bytes armed with expect_tx and delivered by complete_tx.
- :class:`NamedBarrier`: ``bar.sync`` / ``bar.arrive`` (hardware barriers
  0..15).
- :class:`ClusterBarrier`: ``barrier.cluster.arrive/wait`` (what
  ``pipeline.init_arrive/init_wait`` and ``k.cluster_sync()`` run).
- :class:`Cta` / :class:`Cluster`: one CTA's barrier arrays and whether it
  has exited; a cluster of CTAs with the (x, y, z) launch shape. A grid of
  several clusters (``World``) numbers its CTAs cluster by cluster: CTA
  ``i`` is rank ``i % size`` of cluster ``i // size``, so a one-cluster
  launch's CTA numbers are its ranks.

Every rule violation raises :class:`SimError` with a message that names
the barrier, its stage and phase; the engine turns it into a report.
"""

from __future__ import annotations

import re

from dataclasses import dataclass, field

from .launch import MAX_CLUSTER_CTAS


class SimError(Exception):
    """A protocol bug found while running one schedule.

    ``kind`` is one of: deadlock, overrun, overwrite, early-read, arrive-count,
    tx-count, exited-cta, unbalanced, role, initial-phase, uninitialized,
    unsupported, step-limit, commit-before-write, async-read (asyncread.py),
    read-after-release, named-barrier (a partial phase left at the CTA's exit),
    smem-race (plain shared memory, smemrace.py), divergent-barrier (an aligned
    barrier synced at distinct sites in one generation, sync_verbs.py),
    gmem-race and gmem-unwritten (global memory the kernel writes and reads
    back, gmem.py), tmem, pair-alloc and tcgen05-ld (tensor memory's allocation and
    tcgen05.ld completion, tmem.py).
    """

    def __init__(self, kind: str, message: str, where: list[str] | None = None):
        super().__init__(message)
        self.kind = kind
        self.message = message
        # "<agent> at <file>:<line>:<col>" for each agent involved whose op
        # has a source location (IR built from Python, or parsed from a file).
        self.where = where or []


def source_location(loc: str) -> str | None:
    """``file:line:col`` of a printed ``loc("file":line:col)``; None for
    unknown locations and text parsed from a string ("-")."""
    m = re.fullmatch(r'loc\("(.*)":(\d+):(\d+)\)', loc or "")
    if not m or m.group(1) in ("-", ""):
        return None
    return f"{m.group(1)}:{m.group(2)}:{m.group(3)}"


@dataclass
class BarrierName:
    """How reports name a barrier: pipeline 'ab' full barrier stage 2 of CTA 0."""

    pipeline: str
    side: str  # "full", "empty", "order"
    stage: int
    cta: int

    def __str__(self) -> str:
        return f"pipeline '{self.pipeline}' {self.side} barrier stage {self.stage} of CTA {self.cta}"


class Mbarrier:
    """An mbarrier object (PTX ISA "Contents of the mbarrier object").

    ``completed`` counts completed phases; the phase in progress is number
    ``completed`` and its parity is ``completed & 1``. ``try_wait.parity P``
    succeeds when the phase of parity P has completed, i.e. when the parity
    of the current phase differs from P, so a fresh barrier lets parity 1
    through (why producer states start at phase 1).
    """

    def __init__(self, count: int, name: BarrierName):
        if count <= 0:
            raise SimError("arrive-count", f"{name} initialized with arrive count {count}")
        self.expected = count
        self.pending = count
        self.tx = 0
        self.completed = 0
        self.name = name
        self.initialized = True
        self.armed = 0  # bytes armed with expect_tx in the current phase
        self.delivered = 0  # bytes delivered by complete_tx in the current phase
        self.arrivals_by: dict[str, int] = {}  # who arrived in the current phase
        # last[waiter] = number of the phase that waiter observed last;
        # -1 is the phase "before" a fresh barrier, which counts as complete.
        self.last: dict[object, int] = {}
        self.exited = False  # set when the owning CTA exits
        # Happens-before (clocks.py): the clock source, the releases of the
        # phase in progress, and per completed phase number what it released.
        self.hb = None
        self.acc: list | None = None
        self.phase_clocks: dict[int, list | None] = {}
        # Called with the clock a phase released when it completes (an empty
        # barrier ends the holds of the warps that phase's arrivals cover:
        # verbs._end_covered_holds).
        self.on_complete = None

    @property
    def parity(self) -> int:
        return self.completed & 1

    # -- arrivals and transactions -------------------------------------------
    def _check_alive(self, who: str) -> None:
        if self.exited:
            raise SimError(
                "exited-cta",
                f"{who} arrives on {self.name}, but CTA {self.name.cta} has already exited "
                f"(missing producer_tail: a CTA must not exit while peers still signal its barriers)")

    def arrive(self, n: int, who: str, expect_tx: int = 0) -> None:
        """``n`` arrivals (mbarrier.arrive[.expect_tx]); expect_tx is applied first."""
        self._check_alive(who)
        if expect_tx:
            self.tx += expect_tx
            self.armed += expect_tx
        if n > self.pending:
            raise SimError(
                "arrive-count",
                f"{who} arrives {n} time(s) on {self.name} in phase {self.parity} "
                f"(#{self.completed}), which expects only {self.pending} more of its "
                f"{self.expected} arrivals: the barrier's arrive count is smaller than the "
                f"number of arrivals per phase (arrived so far: {self._arrivals()})")
        self.pending -= n
        self.arrivals_by[who] = self.arrivals_by.get(who, 0) + n
        if self.hb is not None:
            self.acc = self.hb.release(self.acc)
        self._check_tx(who)
        self._maybe_complete()

    def complete_tx(self, nbytes: int, who: str, target_parity: int | None = None) -> None:
        """A copy's ``complete_tx::bytes`` landing on this barrier.

        ``target_parity`` is the parity of the phase the copy was issued for;
        bytes landing in another phase mean that earlier copies delivered more
        than expect_tx armed, so that phase completed without them.
        """
        self._check_alive(who)
        if target_parity is not None and target_parity != self.parity:
            raise SimError(
                "tx-count",
                f"{who} completes {nbytes} tx bytes on {self.name} after phase "
                f"{target_parity} (#{self.completed - 1}) had already completed: the copies deliver more "
                f"bytes than expect_tx armed for that phase")
        self.tx -= nbytes
        self.delivered += nbytes
        if self.hb is not None:
            self.acc = self.hb.release(self.acc)
        self._check_tx(who)
        self._maybe_complete()

    def _check_tx(self, who: str) -> None:
        if self.pending == 0 and self.tx < 0:
            raise SimError(
                "tx-count",
                f"{who}: {self.name} phase {self.parity} (#{self.completed}) received "
                f"{self.delivered} tx bytes but expect_tx armed only {self.armed}: "
                f"expect_tx bytes differ from what the copies deliver")

    def _maybe_complete(self) -> None:
        if self.pending == 0 and self.tx == 0:
            clock = self.acc
            if self.hb is not None:
                self.phase_clocks[self.completed] = self.acc
                self.acc = None
            self.completed += 1
            self.pending = self.expected
            self.armed = self.delivered = 0
            self.arrivals_by = {}
            if self.on_complete is not None:
                self.on_complete(clock)

    def _arrivals(self) -> str:
        if not self.arrivals_by:
            return "none"
        return ", ".join(f"{w} x{n}" for w, n in self.arrivals_by.items())

    # -- waiting -------------------------------------------------------------
    def target_phase(self, waiter: object, parity: int, exact: int | None = None) -> int:
        """Number of the phase that ``waiter``'s next wait with ``parity`` means:
        ``exact`` when the waiter's state knows it (a start state advanced
        n times: verbs.State.phase_number) and it lies ahead of what the
        waiter observed, else the first phase after the one it observed
        last with that parity. A state walking every stage gets the same
        number both ways; one that jumps over stages other agents consume
        (ping-pong consumers: advance(k_tiles)) may mean a phase several
        laps ahead, which the parity alone cannot tell. A state made again
        (its count back to 0 while the barrier ran on) falls back to the
        parity, as before."""
        last = self.last.get(waiter, -2)
        if exact is not None and exact > last and (exact & 1) == parity:
            return exact
        n = last + 1
        if (n & 1) != parity:
            n += 1
        return n

    def phase_done(self, n: int) -> bool:
        return self.completed >= n + 1

    def observe(self, waiter: object, n: int, who: str) -> None:
        """Record that ``waiter`` passed its wait for phase ``n``.

        If phase n+1 completed too, the waiter's parity now names a phase it
        has not seen: the other side ran a whole phase ahead (hardware would
        block until phase n+2; either way the protocol is broken).
        """
        if self.completed > n + 1:
            raise SimError(
                "overrun",
                f"{who} waits on {self.name} for phase {n & 1} (#{n}), but phases #{n} and "
                f"#{n + 1} have both completed: the barrier's phase advanced by 2 while this "
                f"waiter still expected the old parity (the other side overran it: too many "
                f"arrivals per phase, or a stage used twice without a wait)")
        self.last[waiter] = n

    def root_cause(self) -> str | None:
        """Why the phase in progress cannot complete, when the barrier alone
        tells: every arrival came but tx bytes are still outstanding (the
        copies deliver fewer bytes than expect_tx armed). None otherwise
        (missing arrivals point at the agents that did not arrive)."""
        if self.pending == 0 and self.tx > 0:
            return (f"{self.tx} tx bytes outstanding on {self.name} (armed {self.armed}, "
                    f"delivered {self.delivered}): the copies deliver fewer bytes than "
                    f"expect_tx armed, so phase {self.parity} never completes")
        return None

    def describe(self) -> str:
        s = (f"phase {self.parity} (#{self.completed}) has {self.expected - self.pending} of "
             f"{self.expected} arrivals")
        if self.tx or self.armed:
            s += f", {self.tx} tx bytes outstanding (armed {self.armed}, delivered {self.delivered})"
        return s


class NamedBarrier:
    """A CTA hardware barrier (``bar.sync id, n``).

    Arrivals count threads; when ``n`` have arrived the generation advances
    and everyone who synced on the previous generation is released.
    """

    def __init__(self, name: str):
        self.name = name
        self.expected: int | None = None
        self.count = 0
        self.generation = 0
        self.waiting: dict[str, int] = {}
        # Threads that arrived with a start signal (a bar.arrive outside
        # every loop), and (who, location) of the last bar.arrive: a phase
        # left partial at the CTA's exit beyond the start signals is a sync
        # that never came (World.agent_finished).
        self.credit = 0
        self.last_arrive: tuple[str, str | None] | None = None
        # Warps that arrived (whole, with bar.arrive or bar.sync) in this
        # phase: the barrier counts threads, so a warp arriving again before
        # the phase completes stands in for a warp that has not arrived.
        self.warps: set = set()
        # Happens-before (clocks.py): generation -> the clocks its arrivals released.
        self.clocks: dict[int, list | None] = {}

    def arrive(self, threads: int, expected: int, who: str, warp: object = None) -> int:
        if self.expected is not None and self.count and expected != self.expected:
            raise SimError(
                "arrive-count",
                f"{who} arrives on {self.name} expecting {expected} threads while the "
                f"barrier is in use with {self.expected}")
        if warp is not None and warp in self.warps:
            raise SimError(
                "arrive-count",
                f"{who} arrives on {self.name} twice in one phase: the barrier counts "
                f"threads, so its second arrival ({self.count + threads} of {expected} "
                f"threads) stands in for a warp that has not arrived, and the phase "
                f"completes early (a doubled arrive, or an arrive no sync of the other "
                f"role met)")
        self.expected = expected
        self.count += threads
        if warp is not None:
            self.warps.add(warp)
        gen = self.generation
        if self.count > expected:
            raise SimError(
                "arrive-count",
                f"{who}: {self.count} threads arrived on {self.name}, which expects {expected}")
        if self.count == expected:
            self.generation += 1
            self.count = 0
            self.expected = None
            self.warps = set()
        return gen


class ClusterBarrier:
    """The cluster barrier (``barrier.cluster.arrive`` / ``.wait``).

    It has no thread mask: a phase completes when every thread of every CTA
    of the cluster that has not exited has arrived (PTX ISA, barrier.cluster).
    Arrivals are counted per warp (``arrived``: agent id -> threads); a warp
    that finishes stops counting, so its exit may complete a phase the
    others wait in (:meth:`maybe_complete`, called by ``World.agent_finished``).
    """

    def __init__(self, name: str = "the cluster barrier"):
        self.name = name
        self.generation = 0
        self.arrived: dict[int, int] = {}
        # Happens-before (clocks.py): generation -> the clocks its arrivals released.
        self.clocks: dict[int, list | None] = {}

    def arrive(self, agent, threads: int, who: str, live) -> int:
        """``threads`` of ``agent`` arrive; ``live``: the warps not finished.
        Returns the generation the arrival belongs to."""
        got = self.arrived.get(agent.id, 0) + threads
        if got > agent.threads:
            raise SimError(
                "arrive-count",
                f"{who} arrives on {self.name} twice in one phase (barrier.cluster.arrive "
                f"again before the phase completed: every arrive needs its "
                f"barrier.cluster.wait before the next)")
        self.arrived[agent.id] = got
        gen = self.generation
        self.maybe_complete(live)
        return gen

    def maybe_complete(self, live) -> None:
        if self.arrived and all(self.arrived.get(a.id, 0) >= a.threads for a in live):
            self.generation += 1
            self.arrived = {}

    def progress(self, live) -> str:
        live = list(live)
        got = sum(self.arrived.get(a.id, 0) for a in live)
        return f"{got} of the {sum(a.threads for a in live)} threads not exited arrived"


@dataclass
class Cta:
    """One CTA: its number in the grid (cluster by cluster; its rank in a
    one-cluster launch), its pipelines' barriers, exit state."""

    index: int
    barriers: dict = field(default_factory=dict)  # (pipe id, slot) -> Mbarrier
    named: dict = field(default_factory=dict)  # bar id -> NamedBarrier
    exited: bool = False
    live_agents: int = 0
    # Run when its last warp finishes (a hold another warp's release may
    # still end: verbs.finish_checks).
    exit_checks: list = field(default_factory=list)

    def named_barrier(self, bar_id: int) -> NamedBarrier:
        if bar_id not in self.named:
            self.named[bar_id] = NamedBarrier(f"named barrier {bar_id} of CTA {self.index}")
        return self.named[bar_id]

    def exit(self) -> None:
        self.exited = True
        for bar in self.barriers.values():
            bar.exited = True


class Cluster:
    """The CTAs of one cluster; ranks are x fastest (``%cluster_ctarank``).
    ``cid``: its number in the grid; its CTAs are numbered from ``cid *
    size`` (the grid's numbering); ``name``: its cluster barrier's."""

    def __init__(self, shape: tuple[int, int, int], cid: int = 0,
                 name: str = "the cluster barrier"):
        self.shape = shape
        size = shape[0] * shape[1] * shape[2]
        if not 1 <= size <= MAX_CLUSTER_CTAS:
            raise SimError("unsupported",
                           f"cluster of {size} CTAs (must be 1..{MAX_CLUSTER_CTAS})")
        self.id = cid
        self.ctas = [Cta(cid * size + r) for r in range(size)]
        self.barrier = ClusterBarrier(name)

    @property
    def size(self) -> int:
        return len(self.ctas)

    def cta_id(self, rank: int) -> tuple[int, int, int]:
        x, y, _ = self.shape
        return rank % x, (rank // x) % y, rank // (x * y)
