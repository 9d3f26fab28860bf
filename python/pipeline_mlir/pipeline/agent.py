"""CuTe DSL's `Agent`, `CooperativeGroup`, `PipelineOp` and `PipelineUserType`."""

import enum

from ..dialects import pipeline as pl
from .errors import PipelineError


class Agent(enum.Enum):
    """Who arrives on a barrier (``#pipeline.agent``)."""

    Thread = pl.Agent.Thread
    Warp = pl.Agent.Warp
    ThreadBlock = pl.Agent.ThreadBlock
    ThreadBlockCluster = pl.Agent.ThreadBlockCluster


class PipelineOp(enum.Enum):
    """The mechanism that signals a barrier (``#pipeline.op_type``)."""

    AsyncThread = pl.OpType.AsyncThread
    TmaLoad = pl.OpType.TmaLoad
    TCGen05Mma = pl.OpType.TCGen05Mma
    AsyncLoad = pl.OpType.AsyncLoad
    ClcLoad = pl.OpType.ClcLoad
    TmaStore = pl.OpType.TmaStore
    # CuTe DSL has a Composite op type for its own bookkeeping; no barrier is
    # ever signalled by it, so it has no dialect counterpart.
    Composite = -1


class PipelineUserType(enum.Enum):
    """Which side a state is for (``!pipeline.state<S, role>``)."""

    Producer = pl.Role.Producer
    Consumer = pl.Role.Consumer
    ProducerConsumer = pl.Role.ProducerConsumer


# mbarrier arrival counts are 20 bits (PipelineDialect.h kMaxArriveCount).
_MAX_ARRIVE_COUNT = (1 << 20) - 1


class CooperativeGroup:
    """``CooperativeGroup(agent, size)``: an agent and how many of them.

    The arrive count it implies on a barrier is ``size`` for Thread, ``32 *
    size`` for Warp, ``size * blockDim`` for ThreadBlock and ``size *
    clusterSize * blockDim`` for ThreadBlockCluster.
    """

    def __init__(self, agent, size=1, alignment=None):
        if not isinstance(agent, Agent):
            raise TypeError(
                "CooperativeGroup: agent must be an Agent (Agent.Thread, "
                f"Agent.Warp, ...), got {agent!r}")
        if not isinstance(size, int) or isinstance(size, bool) or size <= 0:
            raise PipelineError(
                f"CooperativeGroup: size must be a positive int, got {size!r}")
        per_unit = 32 if agent is Agent.Warp else 1
        if size * per_unit > _MAX_ARRIVE_COUNT:
            raise PipelineError(
                f"CooperativeGroup: size {size} of {agent.name} implies more "
                f"than {_MAX_ARRIVE_COUNT} arrivals (the mbarrier limit)")
        if alignment is not None and (not isinstance(alignment, int)
                                      or alignment <= 0):
            raise PipelineError(
                f"CooperativeGroup: alignment must be a positive int, got "
                f"{alignment!r}")
        self.agent = agent
        self.size = size
        self.alignment = alignment

    def attr(self):
        """The ``#pipeline.group<agent, size>`` attribute."""
        return pl.CooperativeGroupAttr.get(self.agent.value, self.size)

    def thread_count(self):
        """Arrive count in threads when it is static (Thread/Warp), else None
        (the dialect's rule, ``pipeline.arrive_count``)."""
        return pl.arrive_count(int(self.agent.value), self.size)

    def __eq__(self, other):
        return (isinstance(other, CooperativeGroup)
                and (self.agent, self.size) == (other.agent, other.size))

    def __hash__(self):
        return hash((self.agent, self.size))

    def __repr__(self):
        return f"CooperativeGroup({self.agent}, {self.size})"


def require_group(group, what):
    if not isinstance(group, CooperativeGroup):
        raise TypeError(
            f"{what} must be a CooperativeGroup(Agent..., size), got "
            f"{type(group).__name__}")
    return group
