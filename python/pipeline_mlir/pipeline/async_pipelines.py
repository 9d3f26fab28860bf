"""``PipelineAsync`` (threads -> threads) and ``PipelineCpAsync`` (cp.async -> threads)."""

from ..dialects import pipeline as pl
from .base import PipelineBase, reject_masks


class PipelineAsync(PipelineBase):
    """Both sides arrive with ``mbarrier.arrive`` (AsyncThread).

    flash-attention options: ``elect_one_commit`` / ``elect_one_release``
    make one lane per warp arrive (then the group should count warps, e.g.
    ``CooperativeGroup(Agent.Thread, num_warps)``), after a ``__syncwarp``
    unless ``syncwarp_before_* = False``.
    """

    kind = pl.PipelineKind.Async

    @classmethod
    def create(cls, *, num_stages, producer_group, consumer_group,
               barrier_storage=None, producer_mask=None, consumer_mask=None,
               defer_sync=False, elect_one_commit=False,
               syncwarp_before_commit=True, elect_one_release=False,
               syncwarp_before_release=True, name=None):
        reject_masks(producer_mask, consumer_mask, f"{cls.__name__}.create")
        return cls._build(num_stages=num_stages, producer_group=producer_group,
                          consumer_group=consumer_group,
                          barrier_storage=barrier_storage,
                          defer_sync=defer_sync,
                          elect_one_commit=elect_one_commit,
                          syncwarp_before_commit=syncwarp_before_commit,
                          elect_one_release=elect_one_release,
                          syncwarp_before_release=syncwarp_before_release,
                          name=name)


class PipelineCpAsync(PipelineBase):
    """Producers fill stages with ``cp.async`` and commit with
    ``cp.async.mbarrier.arrive.noinc``; consumers arrive with mbarrier.arrive."""

    kind = pl.PipelineKind.CpAsync

    @classmethod
    def create(cls, *, num_stages, producer_group, consumer_group,
               barrier_storage=None, producer_mask=None, consumer_mask=None,
               defer_sync=False, elect_one_release=False,
               syncwarp_before_release=True, name=None):
        reject_masks(producer_mask, consumer_mask, f"{cls.__name__}.create")
        return cls._build(num_stages=num_stages, producer_group=producer_group,
                          consumer_group=consumer_group,
                          barrier_storage=barrier_storage,
                          defer_sync=defer_sync,
                          elect_one_release=elect_one_release,
                          syncwarp_before_release=syncwarp_before_release,
                          name=name)
