"""Cluster launch control (sm_100): a persistent kernel that takes its next
tile from a cluster the hardware has not launched yet.

The grid is launched with one cluster per work unit, as if nothing were
persistent. A running cluster asks the hardware to *cancel* a pending
cluster (``clusterlaunchcontrol.try_cancel``) and, if that succeeds, does
that cluster's work itself; when every cluster has been launched or taken,
the request fails and the cluster exits. Unlike a static persistent
schedule (``tile_scheduler.PersistentTileScheduler``), SMs that another
kernel occupies simply never launch the cancelled clusters: the work goes
where the hardware has room.

The request completes asynchronously like a TMA load: a 16-byte response is
written to shared memory (to every CTA of the cluster with ``multicast``)
and completes ``tx`` bytes on an mbarrier. ``PipelineClcFetchAsync`` owns
those barriers; :class:`ClcTileScheduler` is the loop on top of it:

- the scheduler warp (``fetch``): acquire a response stage (which arms each
  CTA's full barrier with 16 bytes), one elected lane issues
  ``try_cancel`` on that stage's buffer and barrier;
- every warp that needs the tile (``next_unit``): wait for the stage, read
  the response (``query_cancel``: ``is_canceled`` and the first CTA id of the
  cancelled cluster), ``fence.proxy.async.shared::cta`` (the next
  ``try_cancel`` into this buffer is an async-proxy write after our
  generic-proxy read), release it.
"""

import mlir.ir as ir
from mlir.dialects import llvm, nvvm

from .memory import fence_view_async_shared
from .smem import SmemPtr
from .values import Scalar, i1, i32

RESPONSE_BYTES = 16


def _smem(ptr, what):
    if not isinstance(ptr, SmemPtr):
        raise TypeError(f"{what}: a shared-memory pointer (SmemPtr) is needed, "
                        f"got {type(ptr).__name__}")
    return ptr.ir_value


def try_cancel(response, barrier, multicast=False):
    """``clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::
    complete_tx::bytes[.multicast::cluster::all].b128 [response], [barrier]``
    (one thread). ``response``: 16-byte aligned, 16 bytes."""
    nvvm.clusterlaunchcontrol_try_cancel(_smem(response, "clc.try_cancel: response"),
                                         _smem(barrier, "clc.try_cancel: barrier"),
                                         multicast=bool(multicast))


def query(response):
    """``(is_canceled, first_cta_id_x)`` of the response at ``response`` (i1
    and i32 Scalars; the id is defined only when ``is_canceled``)."""
    raw = llvm.load(ir.IntegerType.get_signless(128),
                    _smem(response, "clc.query: response"), alignment=16)
    ok = nvvm.clusterlaunchcontrol_query_cancel(
        i1(), nvvm.ClusterLaunchControlQueryType.IS_CANCELED, raw)
    x = nvvm.clusterlaunchcontrol_query_cancel(
        i32(), nvvm.ClusterLaunchControlQueryType.GET_FIRST_CTA_ID_X, raw)
    return Scalar(ok), Scalar(x)


class ClcTileScheduler:
    """Work units from cluster launch control, one per cluster of
    ``cluster_size`` CTAs along x: the first is this cluster's own
    (``ctaid.x / cluster_size``), the next ones those of cancelled clusters.

    Args:
      pipeline: a ``PipelineClcFetchAsync`` (``tx_count`` = 16).
      responses: ``pipeline.num_stages * 16`` bytes of shared memory.
      cluster_size: CTAs per cluster (the response is multicast to all).
    """

    def __init__(self, pipeline, responses, cluster_size=1):
        _smem(responses, "ClcTileScheduler: responses")
        if getattr(pipeline.type, "tx_count", RESPONSE_BYTES) != RESPONSE_BYTES:
            raise ValueError("ClcTileScheduler: the pipeline's tx_count must be "
                             f"{RESPONSE_BYTES} (one response), got {pipeline.type.tx_count}")
        self.pipeline, self.responses = pipeline, responses
        self.cluster_size = cluster_size

    def first_unit(self):
        """This cluster's own unit (before any cancellation)."""
        x = Scalar(nvvm.read_ptx_sreg_ctaid_x(i32()))
        return x // self.cluster_size if self.cluster_size > 1 else x

    def _response(self, state):
        return self.responses.stage(state.index, RESPONSE_BYTES)

    def fetch(self, state):
        """Producer (the whole scheduler warp of the cluster's first CTA):
        request the next unit into ``state``'s stage. Advance ``state``
        afterwards."""
        p = self.pipeline
        p.producer_acquire(state)
        from .control import elect_one
        with elect_one():
            # The simulator models this barrier (a CLC request): no warning.
            try_cancel(self._response(state), p._producer_barrier(state),
                       multicast=self.cluster_size > 1)
        p.producer_commit(state)

    def next_unit(self, state):
        """Consumer: ``(valid, unit)`` of the response in ``state``'s stage,
        which is then released. Advance ``state`` afterwards."""
        p = self.pipeline
        p.consumer_wait(state)
        ok, first_cta = query(self._response(state))
        unit = first_cta // self.cluster_size if self.cluster_size > 1 else first_cta
        fence_view_async_shared()
        p.consumer_release(state)
        return ok, unit


__all__ = ["try_cancel", "query", "ClcTileScheduler", "RESPONSE_BYTES"]
