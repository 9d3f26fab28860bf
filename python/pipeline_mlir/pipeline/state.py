"""Pipeline states: ``PipelineState``, ``PipelineStateSimple``, ``make_pipeline_state``.

A state object wraps one ``!pipeline.state`` SSA value. CuTe DSL's API looks
mutable (``state.advance()``), so ``advance()`` emits
``pipeline.state.advance`` and rebinds the Python object to the new value.
Inside ``k.range(..., carry=[state])`` the object is rebound to the loop's
iteration argument and, after the loop, to its result.
"""

import mlir.ir as ir
from mlir.dialects import arith

from ..dialects import pipeline as pl
from ..kernel.scope import current_block, note_update, require_visible
from ..kernel.values import Scalar, i32
from ..user_location import user_line
from .agent import PipelineUserType
from .emit import i32_value, stage_count
from .errors import PipelineError


def _role(user_type, what):
    if not isinstance(user_type, PipelineUserType):
        raise TypeError(f"{what}: expected a PipelineUserType, got {user_type!r}")
    return user_type


class _StateBase:
    """Shared by both state forms: the SSA value, its type, rebinding."""

    _simple = False

    def _init_from_value(self, value):
        t = value.type
        if not isinstance(t, pl.StateType):
            t = pl.StateType(t)
        if bool(t.simple) != self._simple:
            raise TypeError(f"{type(self).__name__} cannot wrap {t}")
        self._value = value
        self._stages = t.stages
        self._user_type = PipelineUserType(pl.Role(t.role))

    @classmethod
    def from_value(cls, value):
        """Wrap an existing ``!pipeline.state`` value (no op is emitted)."""
        obj = cls.__new__(cls)
        obj._init_from_value(value)
        return obj

    @property
    def ir_value(self):
        return self._value

    value = ir_value

    @property
    def stages(self):
        return self._stages

    @property
    def user_type(self):
        """The PipelineUserType this state was made for."""
        return self._user_type

    def _use(self, what):
        require_visible(self._value, f"{what} (state)")
        return self._value

    def _field(self, fn, name):
        return Scalar(fn(self._use(f"{type(self).__name__}.{name}")))

    @property
    def index(self):
        return self._field(pl.state_index, "index")

    @property
    def phase(self):
        return self._field(pl.state_phase, "phase")

    def advance(self, amount=None):
        """Move to the next stage (or ``amount`` stages on); rebinds self."""
        v = self._use(f"{type(self).__name__}.advance")
        amt = None if amount is None else i32_value(amount, "advance amount")
        note_update(self, "advanced")
        self._value = pl.state_advance(v, amount=amt)

    def clone(self):
        """An independent state object with the same value."""
        return type(self).from_value(self._use(f"{type(self).__name__}.clone"))

    # Loop-carried protocol (kernel.control.range_).
    def _carry_values(self):
        return [self._value]

    def _carry_rebind(self, values):
        (self._value,) = values

    def __repr__(self):
        return f"{type(self).__name__}({self._value.type})"


class PipelineState(_StateBase):
    """``PipelineState(stages, count, index, phase)``: (index, phase, count).

    ``count``, ``index`` and ``phase`` are Python ints or i32 values. States
    made this way are ``producer_consumer`` states (usable by both sides);
    ``make_pipeline_state`` makes role-typed states.
    """

    @user_line  # notes on the phase operand name the user's line
    def __init__(self, stages, count, index, phase, *,
                 user_type=PipelineUserType.ProducerConsumer):
        current_block("PipelineState")
        stage_count(stages, "PipelineState: stages")
        _role(user_type, "PipelineState")
        t = pl.StateType.get(stages, user_type.value)
        v = pl.state_make(t, index=i32_value(index, "PipelineState index"),
                          phase=i32_value(phase, "PipelineState phase"),
                          count=i32_value(count, "PipelineState count"))
        self._init_from_value(v)

    @property
    def count(self):
        return self._field(pl.state_count, "count")

    def reset_count(self):
        """Keep index and phase, set count to 0 (rebinds self)."""
        index, phase = self.index, self.phase
        t = self._value.type
        note_update(self, "reset (reset_count)")
        self._value = pl.state_make(t, index=index.ir_value,
                                    phase=phase.ir_value,
                                    count=arith.constant(i32(), 0))

    def reverse(self):
        """Step back one stage: index - 1, wrapping to stages - 1 with the
        phase flipped; count - 1 (rebinds self)."""
        index, phase, count = self.index, self.phase, self.count
        wrap = index == 0
        new_index = wrap.select(self._stages - 1, (index - 1).ir_value)
        new_phase = wrap.select((phase ^ 1).ir_value, phase.ir_value)
        note_update(self, "moved back (reverse)")
        self._value = pl.state_make(self._value.type, index=new_index.ir_value,
                                    phase=new_phase.ir_value,
                                    count=(count - 1).ir_value)


class PipelineStateSimple(_StateBase):
    """flash-attention's ``PipelineStateSimple(stages, phase_index)``.

    One i32 ``phase_index``: index = phase_index % stages, phase =
    (phase_index / stages) & 1. It has no count.
    """

    _simple = True

    def __init__(self, stages, phase_index, *,
                 user_type=PipelineUserType.ProducerConsumer):
        current_block("PipelineStateSimple")
        stage_count(stages, "PipelineStateSimple: stages")
        _role(user_type, "PipelineStateSimple")
        t = pl.StateType.get(stages, user_type.value, simple=True)
        v = pl.state_make(t, index=i32_value(phase_index,
                                             "PipelineStateSimple phase_index"))
        self._init_from_value(v)

    @property
    def count(self):
        raise PipelineError("PipelineStateSimple has no count (it packs only "
                            "phase_index); use PipelineState for a count")


def make_pipeline_state(type, stages, *, simple=False):
    """The start state of a side: producers (index 0, phase 1, count 0) --
    buffers start empty, so the first acquire passes -- and consumers
    (0, 0, 0). ``simple=True`` makes the flash-attention PipelineStateSimple
    form (producer phase_index = stages)."""
    current_block("make_pipeline_state")
    _role(type, "make_pipeline_state")
    stage_count(stages, "make_pipeline_state: stages")
    if type is PipelineUserType.ProducerConsumer:
        raise PipelineError(
            "make_pipeline_state: a ProducerConsumer state has no start "
            "state (producers start at phase 1, consumers at 0); use "
            "PipelineState(stages, count, index, phase)")
    t = pl.StateType.get(stages, type.value, simple=simple)
    cls = PipelineStateSimple if simple else PipelineState
    return cls.from_value(pl.state_make(t))


def as_state(state, what):
    if not isinstance(state, _StateBase):
        raise TypeError(
            f"{what}: expected a PipelineState (make_pipeline_state("
            f"PipelineUserType..., stages)), got {type(state).__name__}")
    return state
