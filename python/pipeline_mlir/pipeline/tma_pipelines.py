"""TMA pipelines: ``PipelineTmaAsync``, ``PipelineTmaMultiConsumersAsync``,
``PipelineTmaStore``, and the stage-bound copies (``tma_load``, ``bulk_copy``,
``tma_store``).

``tx_count`` may be left out of ``create``: it is then the bytes one stage
receives from the copies the kernel builds, counted when the kernel is
compiled by the ``pipeline-derive-tx-count`` pass (the checker counts them
with the same code; docs/VerifyProtocol.md)."""

from ..dialects import pipeline as pl
from ..kernel.scope import current_block
from ..kernel.values import Scalar, to_value
from .agent import (Agent, CooperativeGroup, PipelineOp, PipelineUserType,
                    require_group)
from .base import PipelineBase, at_site, multicast_mode, set_fields
from .emit import (cluster_layout, i32_value, optional_name, positive_int,
                   smem_pointer, stage_count)
from .errors import PipelineError
from .state import make_pipeline_state

Producer = PipelineUserType.Producer
Consumer = PipelineUserType.Consumer


def _desc(desc, what):
    v = to_value(desc, what=what)
    if not str(v.type).startswith("!llvm.ptr"):
        raise TypeError(f"{what}: a TMA descriptor is an !llvm.ptr, got {v.type}")
    return v


def _coords(coords, what):
    coords = list(coords) if isinstance(coords, (list, tuple)) else [coords]
    if not 1 <= len(coords) <= 5:
        raise PipelineError(f"{what}: TMA copies take 1 to 5 coordinates, "
                            f"got {len(coords)}")
    return [i32_value(c, f"{what}: coordinate") for c in coords]


class _TmaLoads:
    """Copies that complete on a stage's full barrier (TMA producer side)."""

    def tma_load(self, state, desc, coords, dst, bytes, mcast_mask=None):
        """``cp.async.bulk.tensor`` of a ``bytes``-byte box at ``coords`` of
        ``desc`` into ``dst``, completing on the state's full barrier (what
        CuTe DSL's ``cute.copy(tma_atom, ..., tma_bar_ptr=
        pipeline.producer_get_barrier(state))`` does)."""
        what = f"{type(self).__name__}.tma_load"
        p, s = self._operands(state, Producer, "tma_load")
        positive_int(bytes, f"{what}: bytes")
        mask = None
        if mcast_mask is not None:
            import mlir.ir as ir
            mask = to_value(mcast_mask, ir.IntegerType.get_signless(16),
                            what=f"{what}: mcast_mask")
        pl.copy_tma_load(p, s, _desc(desc, what), _coords(coords, what),
                         smem_pointer(dst, f"{what}: dst"), bytes,
                         multicast_mask=mask)

    def bulk_copy(self, state, src, dst, size):
        """Non-tensor ``cp.async.bulk`` of ``size`` bytes (a multiple of 16)."""
        what = f"{type(self).__name__}.bulk_copy"
        p, s = self._operands(state, Producer, "bulk_copy")
        src_v = to_value(src, what=f"{what}: src")
        pl.copy_bulk(p, s, src_v, smem_pointer(dst, f"{what}: dst"),
                     i32_value(size, f"{what}: size"))


class PipelineTmaAsync(PipelineBase, _TmaLoads):
    """TMA producer (``arrive.expect_tx`` + the copy's complete_tx) ->
    AsyncThread consumers. With a cluster, consumers release to every CTA
    that multicasts into them (``mcast_mode_mn`` selects M and/or N)."""

    kind = pl.PipelineKind.TmaAsync

    @classmethod
    def create(cls, *, num_stages, producer_group, consumer_group, tx_count=None,
               barrier_storage=None, cta_layout_vmnk=None, tidx=None,
               mcast_mode_mn=(1, 1), defer_sync=False,
               elect_one_release=False, syncwarp_before_release=True,
               name=None):
        # `tidx` picks the signalling lanes in CuTe DSL; the lowering reads
        # the lane id itself, so it is accepted and unused.
        shape = cluster_layout(cta_layout_vmnk, f"{cls.__name__}.create")
        return cls._build(num_stages=num_stages, producer_group=producer_group,
                          consumer_group=consumer_group, tx_count=tx_count,
                          barrier_storage=barrier_storage,
                          cta_layout_vmnk=shape,
                          multicast=multicast_mode(shape, mcast_mode_mn,
                                                   f"{cls.__name__}.create"),
                          defer_sync=defer_sync,
                          elect_one_release=elect_one_release,
                          syncwarp_before_release=syncwarp_before_release,
                          name=name)


class PipelineTmaMultiConsumersAsync(PipelineBase, _TmaLoads):
    """TMA producer -> an MMA consumer and AsyncThread consumers sharing each
    stage. The empty barrier counts both (``consumer_group_umma`` +
    ``consumer_group_async``, in threads); ``consumer_release(state,
    op_type)`` says which consumer is releasing."""

    kind = pl.PipelineKind.TmaMultiConsumersAsync

    @classmethod
    def create(cls, *, num_stages, producer_group, consumer_group_umma,
               consumer_group_async, tx_count=None, barrier_storage=None,
               cta_layout_vmnk=None, defer_sync=False, name=None):
        what = f"{cls.__name__}.create"
        umma = require_group(consumer_group_umma, f"{what}: consumer_group_umma")
        asyn = require_group(consumer_group_async, f"{what}: consumer_group_async")
        counts = (umma.thread_count(), asyn.thread_count())
        if None in counts:
            raise PipelineError(
                f"{what}: both consumer groups must be Agent.Thread or "
                "Agent.Warp groups (their arrive counts are added)")
        combined = CooperativeGroup(Agent.Thread, sum(counts))
        shape = cluster_layout(cta_layout_vmnk, what)
        obj = cls._build(num_stages=num_stages, producer_group=producer_group,
                         consumer_group=None, tx_count=tx_count,
                         barrier_storage=barrier_storage, cta_layout_vmnk=shape,
                         defer_sync=defer_sync, name=name,
                         consumer_attr=combined.attr())
        set_fields(obj, consumer_group=combined, consumer_group_umma=umma,
                   consumer_group_async=asyn)
        return obj

    def consumer_release(self, state, op_type=None, *, loc=None, ip=None):
        what = f"{type(self).__name__}.consumer_release"
        if op_type not in (PipelineOp.TCGen05Mma, PipelineOp.AsyncThread):
            raise PipelineError(
                f"{what}: op_type must be PipelineOp.TCGen05Mma (the MMA "
                f"consumer) or PipelineOp.AsyncThread, got {op_type!r}")
        with at_site(ip):
            p, s = self._operands(state, Consumer, "consumer_release")
            self._release(p, s, op_type.value, loc)


class PipelineTmaStore(PipelineBase):
    """TMA store epilogue: no mbarriers, completion by bulk async-groups.

    ``producer_acquire()`` waits until at most ``num_stages - 1`` groups still
    read shared memory, ``producer_commit()`` closes the group of stores
    issued since the last commit, ``producer_tail()`` waits for all of them.
    As in CuTe DSL these take no state; an internal one satisfies the ops.
    """

    kind = pl.PipelineKind.TmaStore

    @classmethod
    def create(cls, *, num_stages, producer_group, name=None):
        what = f"{cls.__name__}.create"
        current_block(what)
        require_group(producer_group, f"{what}: producer_group")
        stage_count(num_stages, f"{what}: num_stages")
        name = optional_name(name, what)
        try:
            ptype = pl.PipelineType.get(cls.kind, num_stages)
        except ValueError as e:
            raise PipelineError(f"{what}: {e}") from None
        obj = cls.__new__(cls)
        obj._init(pl.create_(ptype, name=name), producer_group, None, None)
        set_fields(obj, _state=make_pipeline_state(Producer, num_stages))
        return obj

    def _st(self, state):
        return self._state if state is None else state

    def producer_acquire(self, state=None, *, loc=None, ip=None):
        super().producer_acquire(self._st(state), loc=loc, ip=ip)

    def producer_commit(self, state=None, *, loc=None, ip=None):
        super().producer_commit(self._st(state), loc=loc, ip=ip)

    def producer_tail(self, state=None, *, loc=None, ip=None):
        super().producer_tail(self._st(state), loc=loc, ip=ip)

    def tma_store(self, desc, coords, src):
        """``cp.async.bulk.tensor`` store of the box at ``coords`` from
        ``src``; it joins the open bulk group."""
        tma_store(desc, coords, src)

    def _no_consumer(self, verb):
        raise PipelineError(
            f"PipelineTmaStore.{verb}: PipelineTmaStore has no consumer side "
            "(completion is tracked by bulk async-groups)")

    def consumer_wait(self, *a, **k): self._no_consumer("consumer_wait")
    def consumer_try_wait(self, *a, **k): self._no_consumer("consumer_try_wait")
    def consumer_release(self, *a, **k): self._no_consumer("consumer_release")
    def make_consumer(self): self._no_consumer("make_consumer")

    def producer_try_acquire(self, *a, **k):
        raise PipelineError("PipelineTmaStore has no producer_try_acquire "
                            "(bulk groups cannot be polled)")

    def producer_get_barrier(self, *a, **k):
        raise PipelineError("PipelineTmaStore owns no mbarriers")

    def make_participants(self):
        self._no_consumer("make_participants")


def tma_store(desc, coords, src):
    """``pipeline.copy.tma_store``: TMA tensor store from shared memory."""
    what = "tma_store"
    pl.copy_tma_store(_desc(desc, what), _coords(coords, what),
                      smem_pointer(src, f"{what}: src"))
