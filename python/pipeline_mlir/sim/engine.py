"""Agents, asynchronous events and the schedulers that interleave them.

An *agent* is one warp of one CTA (see ``sim/__init__.py`` for why warps):
a Python generator that runs its local code and yields a :class:`Step`
before each operation other agents can observe (an mbarrier arrive or
wait, a copy issue, a named-barrier sync). A step is *enabled* when it can
run now (a wait whose phase has completed); running it may raise
:class:`SimError`.

An *event* is an asynchronous effect that the hardware completes later: a
TMA copy landing (complete_tx + the end of the write), a ``tcgen05.commit``
arriving once the MMAs it tracks are done, a ``cp.async`` noinc arrive, a
bulk async-group finishing. Events of one *channel* (the commits of one
thread) complete in issue order; others in any order. Letting the scheduler
delay events is what exposes "commit before the copy finished".

One *schedule* runs until every agent has finished (OK), nothing can run
while an agent has not finished (deadlock), or a step raises. The
schedulers choose among enabled steps and ready events:

- random: uniform choice from a seeded ``random.Random``;
- exhaustive (stateless DFS, replaying choice prefixes from scratch) with a
  preemption bound in the manner of CHESS's iterative context bounding:
  continuing the agent that ran last is free, switching away from it while
  it could still run (to another agent or to an event) costs one
  preemption.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Iterator

from .clocks import Clocks
from .model import Cluster, SimError, source_location


class Step:
    """One observable operation of an agent."""

    __slots__ = ("fire", "enabled", "what", "pipe", "cause")

    def __init__(self, fire: Callable[[], object], enabled: Callable[[], bool] | None = None,
                 what: Callable[[], str] | None = None, pipe: str | None = None,
                 cause: Callable[[], str | None] | None = None):
        self.fire = fire
        self.enabled = enabled
        self.what = what
        self.pipe = pipe
        # For a blocked wait: the root cause its barrier shows, if any.
        self.cause = cause


class Event:
    """An asynchronous completion the scheduler may fire at any later point."""

    __slots__ = ("fire", "what", "channel", "cta", "where", "vc")

    def __init__(self, fire: Callable[[], None], what: str, channel=None, cta: int | None = None):
        self.fire = fire
        self.what = what
        self.channel = channel
        self.cta = cta
        # The location of the op that issued it (World.post): a finding
        # raised when it lands names the user's line of the copy.
        self.where: str | None = None
        # The issuer's vector clock when it posted the event (clocks.py):
        # what the event releases when it lands.
        self.vc: list | None = None


class Agent:
    """One warp of one CTA running a program (a generator of steps)."""

    def __init__(self, world: "World", aid: int, cta: int, warp: int, threads: int,
                 rank: int | None = None, cluster: int = 0):
        self.world = world
        self.id = aid
        self.cta = cta   # the CTA's number in the grid (model.Cluster's numbering)
        # Its CTA's rank in its cluster (%cluster_ctarank) and its cluster's
        # number in the grid: the CTAs of one cluster are ``cta - rank`` ..
        self.rank = cta if rank is None else rank
        self.cluster = cluster
        self.warp = warp
        self.threads = threads  # threads in this warp (32 but for a partial last warp)
        self.gen: Iterator[Step] | None = None
        self.step: Step | None = None
        self.where: str | None = None  # location of the pipeline op it runs
        self.done = False
        self.roles: dict[str, set] = {}
        self.acquired: Counter = Counter()  # (pipe, stage) -> open producer windows
        self.holding: Counter = Counter()  # (pipe, stage) -> open consumer holds
        # (pipe, stage) -> this warp's clock entry when its hold began: a
        # release by another warp that has seen it ends the hold.
        self.hold_epoch: dict = {}
        self.committed: dict = {}  # (pipe, stage) -> where its last commit ran, until reacquired
        self.state_pipes: dict = {}  # state origin -> {pipe id: PipeRef} of producer verbs
        self.wait_pipes: dict = {}   # state origin -> {pipe id: PipeRef} of consumer waits
        self.bulk_open = 0  # TMA stores in the open bulk async-group
        self.bulk_pending: list[int] = []  # committed groups not yet complete
        self.cluster_gen: int | None = None
        self.cluster_waited = False  # passed a cluster barrier wait (tmem.py)
        self.exit_checks: list[Callable[[], None]] = []
        self.vc: list[int] = []  # vector clock (clocks.py), set by World.spawn
        self.registers: int | None = None  # per thread, after a setmaxnreg

    # -- naming --------------------------------------------------------------
    def role(self, pipe: str | None) -> str:
        if pipe is not None and pipe in self.roles:
            return "+".join(sorted(self.roles[pipe], reverse=True))
        return ""

    def label(self, pipe: str | None = None) -> str:
        r = self.role(pipe)
        return f"{r + ' ' if r else ''}warp {self.warp} of CTA {self.cta}"

    def use(self, pipe: str, side: str, verb: str, mixed_ok: bool = False) -> None:
        """Record that this agent acts as ``side`` of ``pipe``; one agent on
        both sides of the same pipeline is the "consumer verb from producer
        threads" bug (cutlass#2126) unless its state is producer_consumer."""
        sides = self.roles.setdefault(pipe, set())
        if not mixed_ok and sides and side not in sides:
            other = next(iter(sides))
            raise SimError(
                "role",
                f"{other} warp {self.warp} of CTA {self.cta} issues {verb} on pipeline '{pipe}': "
                f"a {side} verb from the {other} role (it used {other} verbs of that pipeline before)")
        sides.add(side)

    # -- running -------------------------------------------------------------
    def start(self, gen: Iterator[Step]) -> None:
        self.gen = gen
        self._advance(None)

    def run(self) -> None:
        step = self.step
        assert step is not None
        result = step.fire()
        self._advance(result)

    def _advance(self, value) -> None:
        try:
            self.step = self.gen.send(value)
        except StopIteration:
            self.step = None
            self.done = True
            self.world.agent_finished(self)


@dataclass
class World:
    """The state of one schedule: a grid of clusters, its agents, pending
    events. ``clusters_shape``: the grid's clusters along x, y, z (one by
    default); every cluster has its own CTAs and cluster barrier, the CTAs
    of the grid are numbered cluster by cluster (``ctas``)."""

    cluster_shape: tuple[int, int, int] = (1, 1, 1)
    block_threads: int = 128
    max_steps: int = 200000
    clusters_shape: tuple[int, int, int] = (1, 1, 1)

    def __post_init__(self):
        gx, gy, gz = self.clusters_shape
        n = gx * gy * gz
        self.clusters = [Cluster(self.cluster_shape, c, "the cluster barrier" if n == 1 else
                                 f"the cluster barrier of cluster {c}") for c in range(n)]
        self.ctas = [cta for c in self.clusters for cta in c.ctas]
        self.agents: list[Agent] = []
        self.events: list[Event] = []
        self.readers: dict[tuple, Counter] = {}
        self.writers: dict[tuple, Counter] = {}
        # (buffer key, who) -> location of the op that began the read or
        # write: a race names both sides' lines.
        self.began_at: dict[tuple, str | None] = {}
        self.steps = 0
        self.trace: list[str] | None = None
        # Cluster launch control: pending clusters a try_cancel may still
        # take (set from the launch), and the responses that landed.
        self.clc_left = 0
        # The input buffers memory-dependent branches read (memory.py).
        self.memory = None
        # CTA -> registers of its pool no warp holds (setmaxnreg, sync_verbs.py).
        self.register_pool: dict[int, int] = {}
        # CTA -> increases that wait for registers (sync_verbs.set_max_registers).
        self.register_debts: dict[int, list] = {}
        # (CTA, byte offset in shared memory) -> the mbarrier a pipeline.create
        # initialized there (verbs.create: storage two pipelines share).
        self.barrier_at: dict = {}
        # (CTA, barrier id, generation) -> the op and warp of its first
        # aligned sync (sync_verbs.named_sync: one site per generation).
        self.aligned_sites: dict = {}
        # Findings that do not stop the schedule (a divergent barrier: the
        # hang or race it leads to, if any, is reported too).
        self.deferred: list[SimError] = []
        # Facts of this schedule every finding's report carries (notes).
        self.notes: list[str] = []
        self.clc_next = 0
        self.clc_responses: dict[tuple, tuple[int, int]] = {}
        # The agent whose step runs now (events it posts record it), and
        # pipeline name -> location of its create (frontend.Kernel.created_at).
        self.current: Agent | None = None
        self.created_at: dict[str, str] = {}
        # The event landing now (its issuer's clock is what it releases),
        # the vector clocks, and the shadow of plain shared memory
        # (smemrace.py).
        self.firing: Event | None = None
        self.clocks = Clocks(self)
        self.smem: dict = {}
        # CTA -> the granules an asynchronous read covered (smemrace.async_fill).
        self.smem_async_reads: dict = {}
        # (CTA, pipeline, stage) -> (phase of its full barrier, the byte
        # ranges copies landed in it then): async_verbs._land_bytes.
        self.stage_fills: dict = {}
        # Global memory the kernel writes and reads back (gmem.py), and
        # checks that run once every agent has finished.
        self.gmem = None
        self.rawbars = None   # hand-driven mbarriers (rawbar.py), when modelled
        self.final_checks: list[Callable[[], None]] = []

    @property
    def warps_per_cta(self) -> int:
        return (self.block_threads + 31) // 32

    @property
    def cluster(self) -> Cluster:
        """The first cluster (the whole grid of a one-cluster launch); its
        ``size`` is every cluster's."""
        return self.clusters[0]

    def cta_of(self, a: "Agent", rank: int) -> int:
        """The grid's number of the CTA of rank ``rank`` in ``a``'s cluster."""
        return a.cta - a.rank + rank

    def cluster_ctas(self, a: "Agent") -> range:
        """The grid's numbers of the CTAs of ``a``'s cluster."""
        base = a.cta - a.rank
        return range(base, base + self.cluster.size)

    def spawn(self, body: Callable[[Agent], Iterator[Step]]) -> None:
        """One agent per warp of every CTA, each running ``body(agent)``."""
        size = self.cluster.size
        for cta in self.ctas:
            for w in range(self.warps_per_cta):
                threads = min(32, self.block_threads - 32 * w)
                a = Agent(self, len(self.agents), cta.index, w, threads,
                          cta.index % size, cta.index // size)
                self.agents.append(a)
                cta.live_agents += 1
        self.clocks.start(self.agents)
        for a in self.agents:
            self.current = a
            try:
                a.start(body(a))
            except SimError as err:
                self.locate(err, a)
                raise
        self.current = None

    def post(self, event: Event) -> None:
        if self.current is not None and event.where is None:
            event.where = self.current.where
        now = self.clocks.now()
        if now is not None:
            event.vc = list(now)
        self.events.append(event)

    # -- locating findings ---------------------------------------------------
    _PIPELINE = re.compile(r"pipeline '([^']*)'")
    # Findings about what pipeline.create declares: its barriers' init, the
    # groups' arrive counts, tx_count.
    _CREATE_KINDS = ("uninitialized", "arrive-count", "tx-count")

    def locate(self, err: SimError, pick) -> None:
        """Gives ``err`` the user's lines of the ops involved when the code
        that raised it named none: the op ``pick`` (an agent) runs, or the
        op that issued ``pick`` (an event), and for what create declares,
        the pipeline's create. Every finding then carries a file:line, the
        way deadlocks always did."""
        err.where = list(err.where)
        if not err.where:
            if isinstance(pick, Event):
                loc = source_location(pick.where)
                if loc:
                    err.where.append(f"{pick.what}, issued at {loc}")
            else:
                loc = source_location(pick.where)
                if loc:
                    pipe = pick.step.pipe if pick.step else None
                    err.where.append(f"{pick.label(pipe)} at {loc}")
        if err.kind in self._CREATE_KINDS:
            m = self._PIPELINE.search(err.message)
            loc = m and source_location(self.created_at.get(m.group(1)))
            if loc and not any(loc in w for w in err.where):
                err.where.append(f"pipeline '{m.group(1)}' created at {loc}")

    # -- buffer ownership (overwrite / early-read detection) -----------------
    def start_read(self, key: tuple, who: str, what: str) -> None:
        w = self.writers.get(key)
        if w and +w:
            writers = ", ".join(k for k, v in w.items() if v > 0)
            raise SimError(
                "early-read",
                f"{who} reads {what} while {writers} still writes it: the full barrier "
                f"completed before the data landed (commit before the copy finished)",
                self._race_notes(key, who, w))
        self.readers.setdefault(key, Counter())[who] += 1
        self._began(key, who)

    def end_read(self, key: tuple, who: str) -> None:
        r = self.readers.get(key)
        if r is not None and r[who] > 0:
            r[who] -= 1

    def start_write(self, key: tuple, who: str, what: str) -> None:
        r = self.readers.get(key)
        if r and +r:
            holders = ", ".join(k for k, v in r.items() if v > 0)
            raise SimError(
                "overwrite",
                f"{who} writes {what} while {holders} still holds it (between its wait and its "
                f"release): buffer overwritten before its release",
                self._race_notes(key, who, r))
        self.writers.setdefault(key, Counter())[who] += 1
        self._began(key, who)

    def _began(self, key: tuple, who: str) -> None:
        if self.current is not None:
            self.began_at[(key, who)] = self.current.where

    def _race_notes(self, key: tuple, who: str, others: Counter) -> list[str]:
        """"<who> at <file:line>" for the op racing now (the running agent's)
        and for each other side still on the buffer (where it began)."""
        out = []
        here = source_location(self.current.where) if self.current is not None else None
        if here:
            out.append(f"{who} at {here}")
        for other, n in others.items():
            loc = source_location(self.began_at.get((key, other))) if n > 0 else None
            if loc:
                out.append(f"{other} at {loc}")
        return out

    def end_write(self, key: tuple, who: str) -> None:
        w = self.writers.get(key)
        if w is not None and w[who] > 0:
            w[who] -= 1

    # -- lifecycle -----------------------------------------------------------
    def agent_finished(self, agent: Agent) -> None:
        for check in agent.exit_checks:
            check()
        if agent.bulk_open:
            raise SimError(
                "unbalanced",
                f"{agent.label()} finished with {agent.bulk_open} TMA store(s) never committed "
                f"to a bulk async-group")
        # Its cluster's barrier stops counting this warp's threads (exited).
        self.clusters[agent.cluster].barrier.maybe_complete(self.live_in_cluster(agent))
        cta = self.ctas[agent.cta]
        cta.live_agents -= 1
        if cta.live_agents == 0:
            for check in cta.exit_checks:
                check()
            pending = [e for e in self.events if e.cta == cta.index]
            if pending:
                raise SimError(
                    "exited-cta",
                    f"CTA {cta.index} exits while {pending[0].what} is still in flight "
                    f"(missing producer_tail / bulk_group.wait before exit)")
            self._check_named_drained(cta)
            cta.exit()

    def live_in_cluster(self, agent: Agent) -> list:
        """The warps of ``agent``'s cluster that have not finished."""
        return [a for a in self.agents if not a.done and a.cluster == agent.cluster]

    def _check_named_drained(self, cta) -> None:
        """At the CTA's exit no named barrier holds a partial phase beyond the
        arrivals of start signals (a ping-pong's first turn, handed over by a
        bar.arrive outside every loop, is left pending by the last turn): any
        other pending arrival is a handshake whose sync never came -- a
        drain dropped, so the arriving warps' last hand-over is never
        waited for."""
        for bar_id, nb in sorted(cta.named.items()):
            if bar_id == 0 or nb.count <= nb.credit:
                continue
            who, where = nb.last_arrive or ("a warp", None)
            loc = source_location(where)
            raise SimError(
                "named-barrier",
                f"CTA {cta.index} exits while {nb.name} holds {nb.count} of {nb.expected} "
                f"threads' arrivals of a phase no sync completes (the last by {who}): the "
                f"sync that should meet them never runs, so that hand-over is never waited "
                f"for (give each bar.arrive its bar.sync before the kernel ends, as the "
                f"producer's final syncs drain a named-barrier ring)",
                [f"{who} at {loc}"] if loc else [])

    def _ready_events(self) -> list[Event]:
        heads: dict = {}
        out = []
        for e in self.events:
            if e.channel is None:
                out.append(e)
            elif e.channel not in heads:
                heads[e.channel] = e
                out.append(e)
        return out

    def deadlock_message(self) -> str:
        blocked = [a for a in self.agents if not a.done]
        pipes = {a.step.pipe for a in blocked if a.step and a.step.pipe}
        parts = [a.step.what() if a.step and a.step.what else f"{a.label()} is blocked"
                 for a in blocked]
        finished = [a for a in self.agents if a.done and (not pipes or pipes & set(a.roles))]
        for a in finished:
            pipe = next((p for p in a.roles if p in pipes), None)
            parts.append(f"{a.label(pipe)} finished")
        # The root cause first: a reader should not have to find it in the
        # sixth clause of the list of who waits where.
        causes = []
        for a in blocked:
            cause = a.step.cause() if a.step and a.step.cause else None
            if cause and cause not in causes:
                causes.append(cause)
        lead = f"root cause: {'; '.join(causes)}. Blocked: " if causes else ""
        return lead + "; ".join(parts)

    def run(self, choose: Callable[[int, int | None], int]) -> None:
        """Run one schedule; ``choose(n, cont)`` picks one of n options, where
        ``cont`` is the index of the agent that ran last (if still enabled)."""
        last: Agent | None = None
        while True:
            options: list = [a for a in self.agents
                             if not a.done and (a.step.enabled is None or a.step.enabled())]
            options += self._ready_events()
            if not options:
                if all(a.done for a in self.agents):
                    for check in self.final_checks:
                        check()
                    return
                raise SimError("deadlock", self.deadlock_message(), [
                    f"{a.label(a.step.pipe if a.step else None)} at {loc}"
                    for a in self.agents
                    if not a.done and (loc := source_location(a.where))])
            self.steps += 1
            if self.steps > self.max_steps:
                raise SimError("step-limit", f"no end after {self.max_steps} steps (livelock?)")
            cont = options.index(last) if last in options else None
            pick = options[choose(len(options), cont)]
            try:
                if isinstance(pick, Event):
                    self.events.remove(pick)
                    if self.trace is not None:
                        self.trace.append(f"event: {pick.what}")
                    self.firing = pick
                    pick.fire()
                else:
                    if self.trace is not None:
                        self.trace.append(pick.step.what() if pick.step.what
                                          else f"{pick.label()}: step")
                    self.current = pick
                    pick.run()
                    last = pick
            except SimError as err:
                self.locate(err, pick)
                raise
            finally:
                self.current = None
                self.firing = None


class DfsChooser:
    """Replays ``prefix`` and then always takes the first option, recording
    how many options each choice point had (within the preemption bound)."""

    def __init__(self, prefix: list[int], bound: int):
        self.prefix = prefix
        self.bound = bound
        self.trace: list[tuple[int, int]] = []
        self.preemptions = 0

    def __call__(self, n: int, cont: int | None) -> int:
        if cont is None:
            order = list(range(n))
        elif self.preemptions >= self.bound:
            order = [cont]
        else:
            order = [cont] + [i for i in range(n) if i != cont]
        j = len(self.trace)
        k = self.prefix[j] if j < len(self.prefix) else 0
        self.trace.append((k, len(order)))
        pick = order[k]
        if cont is not None and pick != cont:
            self.preemptions += 1
        return pick

    def next_prefix(self) -> list[int] | None:
        for j in range(len(self.trace) - 1, -1, -1):
            k, n = self.trace[j]
            if k + 1 < n:
                return [t[0] for t in self.trace[:j]] + [k + 1]
        return None


@dataclass
class Report:
    """What exploring one program found."""

    schedules: int = 0
    complete: bool = False  # exhaustive mode explored every schedule in the bound
    counts: Counter = field(default_factory=Counter)  # error kind -> schedules
    first: dict = field(default_factory=dict)  # kind -> (schedule, SimError), first seen

    @property
    def ok(self) -> bool:
        return not self.counts

    def add(self, index: int, err: SimError) -> None:
        self.counts[err.kind] += 1
        self.first.setdefault(err.kind, (index, err))


def run_one(make_world: Callable[[], World], choose, schedule: int = 0) -> World:
    """Build a world (for schedule ``schedule``: a factory that takes it
    draws that schedule's fill of the input buffers, memory.py) and run it;
    a finding carries the memory-dependent branches it took."""
    world = (make_world(schedule) if getattr(make_world, "takes_schedule", False)
             else make_world())
    from .memory import annotate
    try:
        world.run(choose)
    except SimError as err:
        annotate(err, world)
        err.deferred = world.deferred
        raise
    finally:
        for d in world.deferred:
            annotate(d, world)
    return world


def _add(rep: "Report", index: int, world_or_err) -> None:
    """The schedule's deferred findings (World.deferred) into the report."""
    for d in getattr(world_or_err, "deferred", ()):
        rep.add(index, d)


def explore(make_world: Callable[[], World], *, seed: int = 0, schedules: int = 100,
            exhaustive_bound: int | None = None, stop_on_error: bool = False) -> Report:
    """Run ``schedules`` seeded random schedules, or with ``exhaustive_bound``
    every schedule with at most that many preemptions (at most ``schedules``
    of them). ``make_world()`` must build a fresh, deterministic world."""
    rep = Report()
    if exhaustive_bound is None:
        for i in range(schedules):
            rng = random.Random(seed * 1000003 + i)
            try:
                _add(rep, i, run_one(make_world, lambda n, cont: rng.randrange(n), i))
            except SimError as e:
                rep.add(i, e)
                _add(rep, i, e)
            rep.schedules += 1
            if (stop_on_error and not rep.ok) or rep.counts["unsupported"]:
                break
        return rep
    prefix: list[int] | None = []
    while prefix is not None and rep.schedules < schedules:
        chooser = DfsChooser(prefix, exhaustive_bound)
        try:
            _add(rep, rep.schedules, run_one(make_world, chooser))
        except SimError as e:
            rep.add(rep.schedules, e)
            _add(rep, rep.schedules, e)
        rep.schedules += 1
        prefix = chooser.next_prefix()
        if (stop_on_error and not rep.ok) or rep.counts["unsupported"]:
            break
    rep.complete = prefix is None
    return rep


def replay(make_world: Callable[[], World], *, seed: int, index: int) -> list[str]:
    """The step-by-step trace of random schedule ``index`` (for --trace)."""
    rng = random.Random(seed * 1000003 + index)
    world = (make_world(index) if getattr(make_world, "takes_schedule", False)
             else make_world())
    world.trace = []
    try:
        world.run(lambda n, cont: rng.randrange(n))
    except SimError as e:
        world.trace.append(f"error: {e.message}")
    return world.trace
