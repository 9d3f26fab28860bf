"""The pipelines the simulator's verbs act on (verbs.py): the static facts
of a ``!pipeline.pipeline`` type (PipelineSpec: its groups, the kind's row of
the dialect's table, the barrier plan, the cluster geometry), the value of a
``pipeline.create`` (PipeRef), a PipelineState (State), and the
``mbarrier.init`` counts of a stage as the lowering computes them. What a
kind means is read from the dialect's table (KindTraits.h, through
``pipeline.kind_traits`` and ``pipeline.barrier_plan``), the one the
lowering and the checker use.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

# Mechanisms (PipelineOp) that signal a barrier.
ASYNC, TMA, UMMA, CPASYNC, CLC, STORE = "async_thread", "tma_load", "tcgen05_mma", "cp_async", "clc_load", "tma_store"


def _pl():
    # The dialect module loads the native extension, which holds the table of
    # pipeline kinds (KindTraits.h) that the lowering and the checker read.
    from ..dialects import pipeline as pl
    return pl


@dataclass(frozen=True)
class Group:
    agent: str  # thread | warp | threadblock | cluster
    size: int

    def arrive_count(self, block_threads: int, cluster_size: int) -> int:
        """The dialect's count (getArriveCount) for this launch."""
        pl = _pl()
        agent = {str(a): int(a) for a in pl.Agent}[self.agent]
        return pl.arrive_count(agent, self.size, block_threads, cluster_size)


@dataclass(frozen=True)
class PipelineSpec:
    """The static facts of a ``!pipeline.pipeline`` type, plus its name."""

    name: str
    kind: str
    stages: int
    producer: Group | None = None
    consumer: Group | None = None
    tx_count: int = 0
    cluster: tuple[int, int, int, int] | None = None  # (V, M, N, L)
    multicast: str = "none"  # none | m | n | mn
    cta_group: int = 1
    length: int = 0

    @property
    def cluster_size(self) -> int:
        if self.cluster is None:
            return 1
        v, m, n, l = self.cluster
        return v * m * n * l

    @cached_property
    def traits(self):
        """The kind's row of the dialect's table (KindTraits.h)."""
        return _pl().kind_traits(self.kind)

    @cached_property
    def plan(self) -> dict:
        """The barrier plan the lowering uses for this type (KindTraits.h):
        2-CTA scales, signalling lanes, arm / commit / release targets."""
        pl = _pl()
        p, c = self.producer, self.consumer
        agents = {str(a): int(a) for a in pl.Agent}
        return pl.barrier_plan(
            self.traits["kind"], self.stages,
            agents[p.agent] if p else 0, p.size if p else 0,
            agents[c.agent] if c else 0, c.size if c else 0,
            *(self.cluster or (1, 1, 1, 1)),
            multicast={str(m): int(m) for m in pl.Multicast}[self.multicast],
            cta_group=self.cta_group, length=self.length, tx_count=self.tx_count)

    @property
    def producer_op(self) -> str:
        return self.traits["producer_op_name"]

    @property
    def consumer_op(self) -> str | None:
        t = self.traits
        if not t["has_consumer_group"]:
            return None
        # MMA and async consumers share the barrier and each release names
        # its mechanism (op_type); a wait cannot tell them apart and holds
        # the stage as the MMA reads it (in both CTAs of a pair).
        return UMMA if t["consumer_op_per_release"] else t["consumer_op_name"]

    @property
    def v(self) -> int:
        return self.cluster[0] if self.cluster else 1

    def coord(self, rank: int) -> tuple[int, int, int, int]:
        v, m, n, _ = self.cluster or (1, 1, 1, 1)
        return rank % v, (rank // v) % m, (rank // (v * m)) % n, rank // (v * m * n)

    def shares_tile(self, a: int, b: int, ignore_v: bool) -> bool:
        """Do CTAs a and b share a multicast tile (ClusterMasks.cpp)?"""
        ca, cb = self.coord(a), self.coord(b)
        if ca[3] != cb[3] or (not ignore_v and ca[0] != cb[0]):
            return False
        same_m, same_n = ca[1] == cb[1], ca[2] == cb[2]
        mc = self.multicast
        if mc == "mn":
            return same_m or same_n
        if mc == "m":
            return same_n
        if mc == "n":
            return same_m
        return same_m and same_n

    def umma_mask(self, rank: int) -> list[int]:
        """CTAs a tcgen05.commit of CTA ``rank`` arrives on (ummaArrivalMask)."""
        if self.cluster is None or (self.v == 1 and self.multicast == "none"):
            return [rank]
        return [r for r in range(self.cluster_size) if self.shares_tile(rank, r, ignore_v=True)]

    def leader(self, rank: int) -> int:
        return rank - rank % self.v


class State:
    """A PipelineState (index, phase, count); simple states share the math."""

    __slots__ = ("stages", "index", "phase", "count", "role", "origin", "pos")

    def __init__(self, stages: int, index: int, phase: int, count: int, role: str,
                 origin=None, pos: int | None = None):
        self.stages, self.index, self.phase, self.count, self.role = stages, index, phase, count, role
        # The state.make this state advanced from: ties a store's address
        # (computed from state.index) to the pipelines this state walks.
        self.origin = origin
        # Stages walked since a side's start state (make_pipeline_state:
        # index 0, phase 1 / 0), None for states made from values (an
        # (index, phase) pair says nothing about how many laps were run).
        # It names the barrier phase a wait means exactly (phase_number),
        # which the parity alone does not for a state that jumps over
        # stages other agents consume (ping-pong's advance(k_tiles)).
        self.pos = pos

    @classmethod
    def start(cls, stages: int, role: str) -> "State":
        return cls(stages, 0, 1 if role == "producer" else 0, 0, role, pos=0)

    def advance(self, n: int = 1) -> "State":
        index = self.index + n
        phase = self.phase ^ ((index // self.stages) & 1)
        return State(self.stages, index % self.stages, phase, self.count + n, self.role,
                     self.origin, None if self.pos is None else self.pos + n)

    def phase_number(self) -> int | None:
        """The number (from the barrier's init, first phase #0) of the phase
        a wait with this state waits for, when the state walked from a start
        state: lap ``pos // stages`` less the start phase (a producer starts
        at phase 1 on a fresh empty barrier: its first lap means phase #-1,
        which counts as complete). None when unknown."""
        if self.pos is None:
            return None
        lap = self.pos // self.stages
        return lap - (self.phase ^ (lap & 1))

    def __repr__(self) -> str:
        return f"State(index={self.index}, phase={self.phase}, count={self.count})"


class PipeRef:
    """The value of a ``pipeline.create``: which pipeline, per CTA arrays."""

    __slots__ = ("spec", "pid")

    def __init__(self, spec: PipelineSpec, pid: int):
        self.spec, self.pid = spec, pid


def init_counts(spec: PipelineSpec, block_threads: int,
                cluster_size: int) -> tuple[int, int | None]:
    """The (full, empty) ``mbarrier.init`` counts of a stage, as the lowering
    computes them (BarrierLowering.cpp, docs/Rationale.md section 5): the
    groups' arrive counts times the barrier plan's 2-CTA scales (KindTraits.h:
    both CTAs' producers arrive on the leader's full barrier for async_umma,
    both CTAs' epilogue threads release the leader's stage for umma_async).
    The group counts use the launch's cluster size, as the lowering does for a
    type without a cluster layout. An order pipeline has no consumer: empty is
    None."""
    plan = spec.plan
    full = spec.producer.arrive_count(block_threads, cluster_size) * plan["full_scale"]
    if spec.consumer is None:
        return full, None
    empty = spec.consumer.arrive_count(block_threads, cluster_size) * plan["empty_scale"]
    return full, empty
