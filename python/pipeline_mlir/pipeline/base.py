"""What every barrier-based pipeline class shares: create and the verbs.

A pipeline object holds the ``!pipeline.pipeline`` SSA value returned by
``pipeline.create`` and emits one dialect op per CuTe DSL verb. Everything the
dialect verifiers would reject later is checked here first (state type,
stage count, side, scope), so misuse raises at the Python call.

flash-attention extends these classes the way CuTe DSL's are built: frozen
dataclass subclasses with mixins, whose ``create`` builds the base object
and re-classes it (``object.__setattr__(obj, "__class__", Sub)``), or an
inherited ``create`` that builds the subclass itself. A frozen dataclass
refuses every ``self.x = ...``, so the base classes keep their fields with
``object.__setattr__`` (:func:`set_fields`) and derive the rest from the IR.
Verbs take CuTe DSL's ``loc`` / ``ip`` keywords (the op's location, where it
is built), which flash-attention's overrides pass on to the base verbs.
"""

import contextlib

from ..dialects import pipeline as pl
from ..kernel.scope import current_block, require_visible
from ..kernel.smem import SmemPtr
from .agent import PipelineOp, PipelineUserType, require_group
from .emit import barrier_storage as barrier_storage_operand
from .emit import (MAX_TX_COUNT, cluster_layout, i32_value, optional_name,
                   stage_count, token_value)
from .errors import PipelineError
from .state import PipelineState, as_state, check_state_fields

Producer = PipelineUserType.Producer
Consumer = PipelineUserType.Consumer


def set_fields(obj, **fields):
    """Set instance fields past a frozen dataclass subclass's ``__setattr__``."""
    for name, value in fields.items():
        object.__setattr__(obj, name, value)


def at_site(ip):
    """The verb's insertion point: CuTe DSL's ``ip`` keyword, else the
    current one."""
    return contextlib.nullcontext() if ip is None else ip


def _sides(kind):
    """(producer, consumer) mechanisms of a kind, from the dialect's table of
    kinds; the consumer is None where no single mechanism releases (no
    consumer side, or MMA and async consumers that each name theirs)."""
    t = pl.kind_traits(kind)
    prod = PipelineOp(pl.OpType(t["producer_op"]))
    if not t["has_consumer_group"] or t["consumer_op_per_release"]:
        return prod, None
    return prod, PipelineOp(pl.OpType(t["consumer_op"]))


def _derives_tx_count(kind):
    """Whether a create may leave tx_count out: the full barrier counts tx
    bytes and copies fill the stages, so the type keeps tx_count 0 and the
    ``pipeline-derive-tx-count`` pass sets it from the copies when the kernel
    is compiled. A CLC response (16 bytes) has no copy to learn from."""
    t = pl.kind_traits(kind)
    return t["tx_bytes"] and t["stage_copies"]


def multicast_mode(shape, mcast_mode_mn, what):
    """The type's multicast mode from CuTe DSL's ``mcast_mode_mn`` flags:
    along M if requested and the cluster's M > 1, likewise N."""
    if shape is None:
        return pl.Multicast.None_
    try:
        along_m, along_n = (bool(x) for x in mcast_mode_mn)
    except (TypeError, ValueError):
        raise PipelineError(f"{what}: mcast_mode_mn must be a pair of 0/1 "
                            f"flags, got {mcast_mode_mn!r}") from None
    m = along_m and shape[1] > 1
    n = along_n and shape[2] > 1
    return {(False, False): pl.Multicast.None_, (True, False): pl.Multicast.M,
            (False, True): pl.Multicast.N, (True, True): pl.Multicast.MN}[(m, n)]


class PipelineBase:
    """Base of the barrier-based pipeline classes (not itself in CuTe DSL)."""

    kind = None

    @classmethod
    def _build(cls, *, num_stages, producer_group, consumer_group, tx_count=0,
               barrier_storage=None, cta_layout_vmnk=None,
               multicast=pl.Multicast.None_, defer_sync=False, name=None,
               elect_one_commit=False, syncwarp_before_commit=True,
               elect_one_release=False, syncwarp_before_release=True,
               consumer_attr=None):
        what = f"{cls.__name__}.create"
        current_block(what)
        stage_count(num_stages, f"{what}: num_stages")
        name = optional_name(name, what)
        if producer_group is not None:
            require_group(producer_group, f"{what}: producer_group")
        if consumer_group is not None:
            require_group(consumer_group, f"{what}: consumer_group")
        derive = tx_count is None and _derives_tx_count(cls.kind)
        if derive:
            tx_count = 0  # derived from the copies at compile time
        elif (not isinstance(tx_count, int) or isinstance(tx_count, bool)
                or tx_count < 0):
            raise PipelineError(f"{what}: tx_count must be a non-negative int "
                                f"(bytes per stage), got {tx_count!r}")
        elif tx_count == 0 and pl.kind_traits(cls.kind)["tx_bytes"]:
            raise PipelineError(
                f"{what}: tx_count must be positive (the bytes one stage "
                "receives), got 0" + (": leave it out to derive it from the "
                                      "copies" if _derives_tx_count(cls.kind) else ""))
        if tx_count > MAX_TX_COUNT:
            raise PipelineError(f"{what}: tx_count = {tx_count} exceeds the "
                                f"mbarrier limit of {MAX_TX_COUNT} bytes per "
                                f"phase")
        shape = cluster_layout(cta_layout_vmnk, what)
        try:
            cluster = pl.ClusterLayoutAttr.get(*shape) if shape else None
        except ValueError as e:
            raise PipelineError(f"{what}: cta_layout_vmnk {shape}: {e}") from None
        cta_group = 2 if shape and shape[0] == 2 else 1
        prod_side, cons_side = _sides(cls.kind)
        if elect_one_commit and prod_side is not PipelineOp.AsyncThread:
            raise PipelineError(
                f"{what}: elect_one_commit turns per-thread arrives into one "
                f"per warp, but this producer signals through {prod_side.name}")
        if elect_one_release and cons_side not in (PipelineOp.AsyncThread, None):
            raise PipelineError(
                f"{what}: elect_one_release turns per-thread arrives into one "
                f"per warp, but this consumer signals through {cons_side.name}")
        try:
            ptype = pl.PipelineType.get(
                cls.kind, num_stages,
                producer=producer_group.attr() if producer_group else None,
                consumer=consumer_attr if consumer_attr is not None else (
                    consumer_group.attr() if consumer_group else None),
                cluster=cluster, multicast=multicast, cta_group=cta_group,
                length=0, tx_count=tx_count)
        except ValueError as e:
            raise PipelineError(f"{what}: {e}") from None
        storage = None
        if barrier_storage is not None:
            storage = barrier_storage_operand(barrier_storage, ptype,
                                              f"{what}: barrier_storage")
        value = pl.create_(ptype, barrier_storage=storage,
                           defer_sync=bool(defer_sync) or None, name=name)
        obj = cls.__new__(cls)
        obj._init(value, producer_group, consumer_group, shape,
                  elect_one_commit, syncwarp_before_commit,
                  elect_one_release, syncwarp_before_release)
        return obj

    def _init(self, value, producer_group, consumer_group, shape,
              elect_one_commit=False, syncwarp_before_commit=True,
              elect_one_release=False, syncwarp_before_release=True):
        set_fields(self, _value=value, producer_group=producer_group,
                   consumer_group=consumer_group, cta_layout_vmnk=shape,
                   elect_one_commit=bool(elect_one_commit),
                   syncwarp_before_commit=bool(syncwarp_before_commit),
                   elect_one_release=bool(elect_one_release),
                   syncwarp_before_release=bool(syncwarp_before_release))

    @property
    def type(self):
        """The ``!pipeline.pipeline`` type."""
        return self._value.type

    @property
    def num_stages(self):
        return self.type.stages

    @property
    def ir_value(self):
        return self._value

    # CuTe DSL's pipelines hold their barriers as MbarrierArray objects that
    # subclasses may drive by hand; here they live behind pipeline.create.
    def _no_sync_object(self, name):
        raise PipelineError(
            f"{type(self).__name__}.{name}: the barriers of a pipeline live behind "
            "pipeline.create and are driven only by its verbs (the checker reasons "
            "about verbs); override a verb by calling the base class's verb, e.g. "
            "producer_acquire(state, try_acquire_token, extra_tx_count)")

    sync_object_full = property(lambda self: self._no_sync_object("sync_object_full"))
    sync_object_empty = property(lambda self: self._no_sync_object("sync_object_empty"))

    value = ir_value

    def __repr__(self):
        return f"{type(self).__name__}({self.type})"

    # -- checks -------------------------------------------------------------

    def _operands(self, state, side, verb):
        what = f"{type(self).__name__}.{verb}"
        require_visible(self._value, f"{what}: the pipeline")
        st = as_state(state, what, stages=self.num_stages)
        if st.stages != self.num_stages:
            raise PipelineError(
                f"{what}: the state has {st.stages} stages but the pipeline has "
                f"{self.num_stages} (a state walks its own pipeline's ring)")
        if st.user_type not in (side, PipelineUserType.ProducerConsumer):
            raise PipelineError(
                f"{what} is a {side.name.lower()} verb but the state was made "
                f"for the {st.user_type.name.lower()} (make it with "
                f"make_pipeline_state(PipelineUserType.{side.name}, stages))")
        return self._value, st._use(what)

    def _has_tx(self):
        return pl.kind_traits(self.kind)["tx_bytes"]

    def _extra_tx(self, extra_tx_count, what):
        if extra_tx_count is None or (isinstance(extra_tx_count, int)
                                      and extra_tx_count == 0):
            return None
        if not self._has_tx():
            raise PipelineError(
                f"{what}: extra_tx_count adds transaction bytes and needs a "
                f"TMA/CLC pipeline, not {type(self).__name__}")
        return i32_value(extra_tx_count, f"{what}: extra_tx_count")

    # -- producer verbs -----------------------------------------------------

    def producer_acquire(self, state, try_acquire_token=None,
                         extra_tx_count=None, *, loc=None, ip=None):
        """Wait until the stage's buffer is empty; TMA kinds then arm the
        full barrier with ``tx_count (+ extra_tx_count)`` bytes."""
        what = f"{type(self).__name__}.producer_acquire"
        with at_site(ip):
            p, s = self._operands(state, Producer, "producer_acquire")
            pl.producer_acquire(p, s, token=token_value(try_acquire_token,
                                                        f"{what}: try_acquire_token"),
                                extra_tx=self._extra_tx(extra_tx_count, what), loc=loc)

    def producer_try_acquire(self, state, *, loc=None, ip=None):
        """One test of the empty barrier; returns an i1 token."""
        from ..kernel.values import Scalar
        with at_site(ip):
            p, s = self._operands(state, Producer, "producer_try_acquire")
            return Scalar(pl.producer_try_acquire(p, s, loc=loc))

    def producer_commit(self, state, *, loc=None, ip=None):
        """Signal that the stage's buffer is full."""
        with at_site(ip):
            p, s = self._operands(state, Producer, "producer_commit")
            pl.producer_commit(p, s, elect_one=self.elect_one_commit or None,
                               syncwarp_before=(self.elect_one_commit and
                                                self.syncwarp_before_commit) or None,
                               loc=loc)

    def producer_tail(self, state, *, loc=None, ip=None):
        """Acquire every stage once more so no arrive is in flight when the
        CTA exits."""
        with at_site(ip):
            p, s = self._operands(state, Producer, "producer_tail")
            pl.producer_tail(p, s, loc=loc)

    def producer_get_barrier(self, state, *, loc=None, ip=None):
        """The stage's full barrier (``!llvm.ptr<3>``), for a TMA copy.
        What is done with it goes unchecked: UncheckedBarrierWarning."""
        from .mbarrier import warn_unchecked_barrier
        warn_unchecked_barrier(
            "producer_get_barrier(state)",
            "Issue the stage's copies with tma_load(state, ...) / "
            "bulk_copy(state, ...) and add bytes with producer_acquire(state, "
            "extra_tx_count=...): the checker counts those; it only rejects "
            "an arrive or init of your own on this barrier.")
        return self._producer_barrier(state, loc=loc, ip=ip)

    def _producer_barrier(self, state, *, loc=None, ip=None):
        # The library's own uses (a CLC request names its barrier) model the
        # barrier and do not warn.
        with at_site(ip):
            p, s = self._operands(state, Producer, "producer_get_barrier")
            return SmemPtr(pl.producer_barrier(p, s, loc=loc))

    # -- consumer verbs -----------------------------------------------------

    def consumer_wait(self, state, try_wait_token=None, *, loc=None, ip=None):
        """Wait until the stage's buffer is full."""
        what = f"{type(self).__name__}.consumer_wait"
        with at_site(ip):
            p, s = self._operands(state, Consumer, "consumer_wait")
            pl.consumer_wait(p, s, token=token_value(try_wait_token,
                                                     f"{what}: try_wait_token"), loc=loc)

    def consumer_try_wait(self, state, *, loc=None, ip=None):
        """One test of the full barrier; returns an i1 token."""
        from ..kernel.values import Scalar
        with at_site(ip):
            p, s = self._operands(state, Consumer, "consumer_try_wait")
            return Scalar(pl.consumer_try_wait(p, s, loc=loc))

    def consumer_release(self, state, *, loc=None, ip=None):
        """Signal that the stage's buffer may be refilled."""
        with at_site(ip):
            p, s = self._operands(state, Consumer, "consumer_release")
            self._release(p, s, None, loc)

    def _release(self, p, s, op_type, loc=None):
        pl.consumer_release(p, s, elect_one=self.elect_one_release or None,
                            syncwarp_before=(self.elect_one_release and
                                             self.syncwarp_before_release) or None,
                            op_type=op_type, loc=loc)

    # -- flash-attention: (index, phase) instead of a state -----------------
    # A PipelineState made with stages=0 takes the pipeline's stage count
    # when a verb uses it (state.py), as flash-attention's own mixin builds it.

    def _state_at(self, user_type, index, phase, verb):
        # The pipeline's stage count is known here: refuse a Python-int index
        # or phase out of range at the verb that was given it.
        check_state_fields(self.num_stages, index, phase,
                           f"{type(self).__name__}.{verb}")
        return PipelineState(0, 0, index, phase, user_type=user_type)

    def producer_acquire_w_index_phase(self, index, phase,
                                       try_acquire_token=None,
                                       extra_tx_count=None, *, loc=None, ip=None):
        state = self._state_at(Producer, index, phase, "producer_acquire_w_index_phase")
        self.producer_acquire(state, try_acquire_token, extra_tx_count, loc=loc, ip=ip)

    def producer_commit_w_index(self, index, *, loc=None, ip=None):
        state = self._state_at(Producer, index, 0, "producer_commit_w_index")
        self.producer_commit(state, loc=loc, ip=ip)

    def consumer_wait_w_index_phase(self, index, phase, try_wait_token=None, *,
                                    loc=None, ip=None):
        state = self._state_at(Consumer, index, phase, "consumer_wait_w_index_phase")
        self.consumer_wait(state, try_wait_token, loc=loc, ip=ip)

    def consumer_release_w_index(self, index, *, loc=None, ip=None):
        state = self._state_at(Consumer, index, 0, "consumer_release_w_index")
        self.consumer_release(state, loc=loc, ip=ip)

    # -- participants -------------------------------------------------------

    def make_producer(self):
        from .participants import PipelineProducer
        from .state import make_pipeline_state
        return PipelineProducer(self, make_pipeline_state(Producer,
                                                          self.num_stages),
                                self.producer_group)

    def make_consumer(self):
        from .participants import PipelineConsumer
        from .state import make_pipeline_state
        return PipelineConsumer(self, make_pipeline_state(Consumer,
                                                          self.num_stages),
                                self.consumer_group)

    def make_participants(self):
        """``(PipelineProducer, PipelineConsumer)`` at their start states."""
        return self.make_producer(), self.make_consumer()


def reject_masks(producer_mask, consumer_mask, what):
    if producer_mask is not None or consumer_mask is not None:
        raise PipelineError(
            f"{what}: producer_mask / consumer_mask (arrives on another CTA's "
            "barrier chosen at run time) are not supported by the pipeline "
            "dialect; use a TMA pipeline with cta_layout_vmnk for clusters")


__all__ = ["PipelineBase", "at_site", "multicast_mode", "reject_masks", "set_fields"]
