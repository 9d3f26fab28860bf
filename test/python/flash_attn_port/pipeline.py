"""FlashAttention's extension classes (module ``flash_attn.cute.pipeline``), on
pipeline_mlir: defined the way FlashAttention defines them, with the
imports changed (``cutlass.pipeline`` -> ``pipeline_mlir.pipeline``, the
other CuTe DSL names -> ``cute_names``).

One body differs: FlashAttention's ``PipelineTmaAsync.producer_acquire`` /
``PipelineTmaUmma.producer_acquire`` add ``extra_tx_count`` by driving CuTe
DSL's barrier objects (``sync_object_empty.wait``, ``sync_object_full.
arrive_and_expect_tx``) by hand. Here the barriers live behind
``pipeline.create`` (pipelines expose no ``sync_object_*``: reading one
raises and says so) and the base verb already takes ``extra_tx_count``, so
the override passes it on.
"""

from dataclasses import dataclass
from typing import Optional

from pipeline_mlir.pipeline import PipelineState, PipelineUserType
from pipeline_mlir.pipeline import PipelineAsync as PipelineAsyncOg
from pipeline_mlir.pipeline import PipelineCpAsync as PipelineCpAsyncOg
from pipeline_mlir.pipeline import PipelineTmaAsync as PipelineTmaAsyncOg
from pipeline_mlir.pipeline import PipelineTmaUmma as PipelineTmaUmmaOg
from pipeline_mlir.pipeline import PipelineUmmaAsync as PipelineUmmaAsyncOg
from pipeline_mlir.pipeline import PipelineAsyncUmma as PipelineAsyncUmmaOg

from .cute_names import Boolean, Int32, const_expr, cute, dsl_user_op


def _override_create(parent_cls, child_cls):
    """A ``create`` that builds a ``parent_cls`` and turns it into a
    ``child_cls`` (frozen: the class is swapped with object.__setattr__)."""

    @staticmethod
    def create(*args, **kwargs):
        obj = parent_cls.create(*args, **kwargs)
        object.__setattr__(obj, "__class__", child_cls)
        return obj

    return create


def _make_state(index: Int32, phase: Int32) -> PipelineState:
    """An (index, phase) state for one verb; stages=0: the verb's pipeline
    supplies the stage count."""
    return PipelineState(stages=0, count=Int32(0), index=index, phase=phase)


class PipelineStateSimple:
    """A ring position packed in one Int32 ``phase_index``: index =
    phase_index % stages, phase = phase_index // stages (a single stage
    flips phase_index between 0 and 1)."""

    def __init__(self, stages: int, phase_index: Int32):
        self._stages = stages
        self._phase_index = phase_index

    def clone(self) -> "PipelineStateSimple":
        return PipelineStateSimple(self.stages, self._phase_index)

    @property
    def stages(self) -> int:
        return self._stages

    @property
    def index(self) -> Int32:
        if const_expr(self._stages == 1):
            return Int32(0)
        return self._phase_index % self._stages

    @property
    def phase(self) -> Int32:
        # The parity is the low bit; the wait reads only that bit.
        if const_expr(self._stages == 1):
            return self._phase_index
        return self._phase_index // self._stages

    def advance(self):
        if const_expr(self._stages == 1):
            self._phase_index ^= 1
        else:
            self._phase_index += 1


def make_pipeline_state(type: PipelineUserType, stages: int):
    """Producers start one lap ahead (phase_index = stages: buffers start
    empty), consumers at 0."""
    if type is PipelineUserType.Producer:
        return PipelineStateSimple(stages, Int32(stages))
    if type is PipelineUserType.Consumer:
        return PipelineStateSimple(stages, Int32(0))
    raise AssertionError("make_pipeline_state: Producer or Consumer")


def _call_with_elect_one(parent_method, self, state, elect_one, syncwarp, loc, ip):
    """``parent_method`` run by one elected lane per warp (after a warp
    sync unless the lanes are known converged), or by every thread."""
    if const_expr(elect_one):
        if const_expr(syncwarp):
            cute.arch.sync_warp()
        with cute.arch.elect_one():
            parent_method(self, state, loc=loc, ip=ip)
    else:
        parent_method(self, state, loc=loc, ip=ip)


class _PipelineIndexPhaseMixin:
    """``*_w_index_phase`` / ``*_w_index`` verbs: build the state, call the
    state verb of whatever class this is mixed into."""

    @dsl_user_op
    def producer_acquire_w_index_phase(self, index: Int32, phase: Int32,
                                       try_acquire_token: Optional[Boolean] = None,
                                       *, loc=None, ip=None):
        self.producer_acquire(_make_state(index, phase), try_acquire_token, loc=loc, ip=ip)

    @dsl_user_op
    def producer_commit_w_index(self, index: Int32, *, loc=None, ip=None):
        self.producer_commit(_make_state(index, Int32(0)), loc=loc, ip=ip)

    @dsl_user_op
    def consumer_wait_w_index_phase(self, index: Int32, phase: Int32,
                                    try_wait_token: Optional[Boolean] = None,
                                    *, loc=None, ip=None):
        self.consumer_wait(_make_state(index, phase), try_wait_token, loc=loc, ip=ip)

    @dsl_user_op
    def consumer_release_w_index(self, index: Int32, *, loc=None, ip=None):
        self.consumer_release(_make_state(index, Int32(0)), loc=loc, ip=ip)


@dataclass(frozen=True)
class PipelineAsync(_PipelineIndexPhaseMixin, PipelineAsyncOg):
    """``elect_one_commit`` / ``elect_one_release`` (given to create): one
    elected lane per warp arrives, for groups that count warps."""

    _elect_one_commit: bool = False
    _syncwarp_before_commit: bool = True
    _elect_one_release: bool = False
    _syncwarp_before_release: bool = True

    @staticmethod
    def create(*args, elect_one_commit: bool = False, syncwarp_before_commit: bool = True,
               elect_one_release: bool = False, syncwarp_before_release: bool = True,
               **kwargs):
        obj = PipelineAsyncOg.create(*args, **kwargs)
        object.__setattr__(obj, "__class__", PipelineAsync)
        object.__setattr__(obj, "_elect_one_commit", elect_one_commit)
        object.__setattr__(obj, "_syncwarp_before_commit", syncwarp_before_commit)
        object.__setattr__(obj, "_elect_one_release", elect_one_release)
        object.__setattr__(obj, "_syncwarp_before_release", syncwarp_before_release)
        return obj

    @dsl_user_op
    def producer_commit(self, state: PipelineState, *, loc=None, ip=None):
        _call_with_elect_one(PipelineAsyncOg.producer_commit, self, state,
                             self._elect_one_commit, self._syncwarp_before_commit, loc, ip)

    @dsl_user_op
    def consumer_release(self, state: PipelineState, *, loc=None, ip=None):
        _call_with_elect_one(PipelineAsyncOg.consumer_release, self, state,
                             self._elect_one_release, self._syncwarp_before_release, loc, ip)


@dataclass(frozen=True)
class PipelineCpAsync(_PipelineIndexPhaseMixin, PipelineCpAsyncOg):
    _elect_one_release: bool = False
    _syncwarp_before_release: bool = True

    @staticmethod
    def create(*args, elect_one_release: bool = False, syncwarp_before_release: bool = True,
               **kwargs):
        obj = PipelineCpAsyncOg.create(*args, **kwargs)
        object.__setattr__(obj, "__class__", PipelineCpAsync)
        object.__setattr__(obj, "_elect_one_release", elect_one_release)
        object.__setattr__(obj, "_syncwarp_before_release", syncwarp_before_release)
        return obj

    @dsl_user_op
    def consumer_release(self, state: PipelineState, *, loc=None, ip=None):
        _call_with_elect_one(PipelineCpAsyncOg.consumer_release, self, state,
                             self._elect_one_release, self._syncwarp_before_release, loc, ip)


@dataclass(frozen=True)
class PipelineTmaAsync(_PipelineIndexPhaseMixin, PipelineTmaAsyncOg):
    """``producer_acquire`` arms ``tx_count + extra_tx_count`` bytes."""

    @dsl_user_op
    def producer_acquire(self, state: PipelineState,
                         try_acquire_token: Optional[Boolean] = None,
                         extra_tx_count: int = 0, *, loc=None, ip=None):
        PipelineTmaAsyncOg.producer_acquire(self, state, try_acquire_token, extra_tx_count,
                                            loc=loc, ip=ip)


PipelineTmaAsync.create = _override_create(PipelineTmaAsyncOg, PipelineTmaAsync)


@dataclass(frozen=True)
class PipelineTmaUmma(_PipelineIndexPhaseMixin, PipelineTmaUmmaOg):
    """``producer_acquire`` arms ``tx_count + extra_tx_count`` bytes."""

    @dsl_user_op
    def producer_acquire(self, state: PipelineState,
                         try_acquire_token: Optional[Boolean] = None,
                         extra_tx_count: int = 0, *, loc=None, ip=None):
        PipelineTmaUmmaOg.producer_acquire(self, state, try_acquire_token, extra_tx_count,
                                           loc=loc, ip=ip)


PipelineTmaUmma.create = _override_create(PipelineTmaUmmaOg, PipelineTmaUmma)


@dataclass(frozen=True)
class PipelineUmmaAsync(_PipelineIndexPhaseMixin, PipelineUmmaAsyncOg):
    pass


PipelineUmmaAsync.create = _override_create(PipelineUmmaAsyncOg, PipelineUmmaAsync)


@dataclass(frozen=True)
class PipelineAsyncUmma(_PipelineIndexPhaseMixin, PipelineAsyncUmmaOg):
    pass


PipelineAsyncUmma.create = _override_create(PipelineAsyncUmmaOg, PipelineAsyncUmma)
