"""Blackwell (sm_100a) pipelines with a tcgen05 MMA side:
``PipelineTmaUmma``, ``PipelineAsyncUmma``, ``PipelineUmmaAsync`` and
``PipelineClcFetchAsync`` (cluster launch control).

``cta_layout_vmnk = (2, M, N, L)`` makes a 2-CTA (``cta_group::2``) pair:
the type gets ``cta_group = 2`` and the MMA side's ``tcgen05.commit``
multicasts to the peer CTA.
"""

from ..dialects import pipeline as pl
from .base import PipelineBase, multicast_mode
from .emit import cluster_layout
from .tma_pipelines import _TmaLoads


class PipelineTmaUmma(PipelineBase, _TmaLoads):
    """TMA producer -> tcgen05 MMA consumer (the operand ring of a
    Blackwell GEMM mainloop). The MMA warp releases a stage with an elected
    ``tcgen05.commit`` that arrives when the MMAs reading it are done."""

    kind = pl.PipelineKind.TmaUmma

    @classmethod
    def create(cls, *, num_stages, producer_group, consumer_group,
               tx_count=None, barrier_storage=None, cta_layout_vmnk=None,
               mcast_mode_mn=(1, 1), defer_sync=False, name=None):
        shape = cluster_layout(cta_layout_vmnk, f"{cls.__name__}.create")
        return cls._build(num_stages=num_stages, producer_group=producer_group,
                          consumer_group=consumer_group, tx_count=tx_count,
                          barrier_storage=barrier_storage,
                          cta_layout_vmnk=shape,
                          multicast=multicast_mode(shape, mcast_mode_mn,
                                                   f"{cls.__name__}.create"),
                          defer_sync=defer_sync, name=name)


class PipelineAsyncUmma(PipelineBase):
    """AsyncThread producers (e.g. warps writing operands to shared memory)
    -> tcgen05 MMA consumer."""

    kind = pl.PipelineKind.AsyncUmma

    @classmethod
    def create(cls, *, num_stages, producer_group, consumer_group,
               barrier_storage=None, cta_layout_vmnk=None, defer_sync=False,
               name=None):
        return cls._build(num_stages=num_stages, producer_group=producer_group,
                          consumer_group=consumer_group,
                          barrier_storage=barrier_storage,
                          cta_layout_vmnk=cta_layout_vmnk,
                          defer_sync=defer_sync, name=name)


class PipelineUmmaAsync(PipelineBase):
    """tcgen05 MMA producer (accumulator in tensor memory) -> AsyncThread
    consumers (the epilogue warps)."""

    kind = pl.PipelineKind.UmmaAsync

    @classmethod
    def create(cls, *, num_stages, producer_group, consumer_group,
               barrier_storage=None, cta_layout_vmnk=None, defer_sync=False,
               name=None):
        return cls._build(num_stages=num_stages, producer_group=producer_group,
                          consumer_group=consumer_group,
                          barrier_storage=barrier_storage,
                          cta_layout_vmnk=cta_layout_vmnk,
                          defer_sync=defer_sync, name=name)


class PipelineClcFetchAsync(PipelineBase):
    """Cluster launch control: the scheduler warp fetches the next tile
    (``clusterlaunchcontrol.try_cancel`` completing with tx bytes) and every
    consumer thread of the cluster releases it."""

    kind = pl.PipelineKind.ClcFetchAsync

    @classmethod
    def create(cls, *, barrier_storage, num_stages, producer_group,
               consumer_group, tx_count, cta_layout_vmnk=None,
               defer_sync=False, name=None):
        return cls._build(num_stages=num_stages, producer_group=producer_group,
                          consumer_group=consumer_group, tx_count=tx_count,
                          barrier_storage=barrier_storage,
                          cta_layout_vmnk=cta_layout_vmnk,
                          defer_sync=defer_sync, name=name)
