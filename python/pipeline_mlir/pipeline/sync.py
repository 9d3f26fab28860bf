"""Post-init synchronization: ``pipeline_init_arrive`` / ``pipeline_init_wait``
(after ``create(..., defer_sync=True)``) and ``agent_sync``."""

from mlir.dialects import nvvm

from ..dialects import pipeline as pl
from ..kernel.scope import current_block
from .agent import Agent
from .emit import cluster_size
from .errors import PipelineError


def pipeline_init_arrive(cta_layout_vmnk=None, is_relaxed=False):
    """After every deferred create: arrive on the cluster barrier (nothing
    for one CTA)."""
    current_block("pipeline_init_arrive")
    pl.init_arrive(cluster_size=cluster_size(cta_layout_vmnk,
                                             "pipeline_init_arrive"),
                   relaxed=bool(is_relaxed) or None)


def pipeline_init_wait(cta_layout_vmnk=None):
    """Before the first use: wait on the cluster barrier (``bar.sync 0`` for
    one CTA)."""
    current_block("pipeline_init_wait")
    pl.init_wait(cluster_size=cluster_size(cta_layout_vmnk,
                                           "pipeline_init_wait"))


def agent_sync(group, is_relaxed=False):
    """Synchronize a whole CTA (``bar.sync 0``) or cluster."""
    current_block("agent_sync")
    if group is Agent.ThreadBlock:
        nvvm.barrier0()
    elif group is Agent.ThreadBlockCluster:
        if is_relaxed:
            nvvm.cluster_arrive_relaxed()
        else:
            nvvm.cluster_arrive()
        nvvm.cluster_wait()
    else:
        raise PipelineError(f"agent_sync: group must be Agent.ThreadBlock or "
                            f"Agent.ThreadBlockCluster, got {group!r}")
