"""Pipeline states: ``PipelineState``, ``PipelineStateSimple``, ``make_pipeline_state``.

A state object wraps one ``!pipeline.state`` SSA value. CuTe DSL's API looks
mutable (``state.advance()``), so ``advance()`` emits
``pipeline.state.advance`` and rebinds the Python object to the new value.
Inside ``k.range(..., carry=[state])`` the object is rebound to the loop's
iteration argument and, after the loop, to its result.
"""

import weakref

import mlir.ir as ir
from mlir.dialects import arith

from ..dialects import pipeline as pl
from ..kernel.scope import (block_encloses, current_block, defining_block,
                            note_update, require_visible)
from ..kernel.values import Scalar, i32
from ..user_location import user_line
from .agent import PipelineUserType
from .emit import i32_value, stage_count
from .errors import PipelineError


def _role(user_type, what):
    if not isinstance(user_type, PipelineUserType):
        raise TypeError(f"{what}: expected a PipelineUserType, got {user_type!r}")
    return user_type


def _is_int(x):
    return isinstance(x, int) and not isinstance(x, bool)


def check_state_fields(stages, index, phase, what):
    """Refuse Python-int fields that name no stage or parity, here, naming
    the call, rather than in the verifier: the lowering computes barrier
    addresses from ``index`` with no bound (index 5 of a 2-stage pipeline
    arrives on shared memory past its barriers) and waits with
    ``try_wait.parity phase``, which takes 0 or 1. ``stages`` 0: not known
    yet (flash-attention's ``PipelineState(0, ...)``), only the phase is
    checked. Run-time values are the verbs' business."""
    if _is_int(phase) and phase not in (0, 1):
        raise PipelineError(
            f"{what}: phase {phase} is not a parity: a state's phase is the parity "
            "its waits use, 0 or 1 (give phase % 2; producers start at 1, "
            "consumers at 0)")
    if _is_int(index) and stages and not 0 <= index < stages:
        raise PipelineError(
            f"{what}: index {index} is out of range for a {stages}-stage pipeline "
            f"(0..{stages - 1}): the barrier it names would lie past the "
            "pipeline's barrier array (give the stage's index, e.g. "
            f"{index % stages}, or advance a start state there)")


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
        if self._value is None:
            raise PipelineError(
                f"{what}: this PipelineState was made with stages=0 (flash-attention's "
                "(index, phase) form), which takes its stage count from the pipeline verb "
                "that uses it; only pipeline verbs accept it (give stages to use it "
                "otherwise)")
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

    ``stages=0`` is flash-attention's ``PipelineState(stages=0, count=0,
    index=i, phase=p)``, an (index, phase) pair for one verb: the
    ``!pipeline.state`` is made when a pipeline verb takes it, with that
    pipeline's stage count (CuTe DSL's verbs read only index and phase).
    """

    @user_line  # notes on the phase operand name the user's line
    def __init__(self, stages, count, index, phase, *,
                 user_type=PipelineUserType.ProducerConsumer):
        current_block("PipelineState")
        _role(user_type, "PipelineState")
        if isinstance(stages, int) and not isinstance(stages, bool) and stages == 0:
            check_state_fields(0, index, phase, "PipelineState")
            self._value = None
            self._stages = 0
            self._fields = (count, index, phase)
            self._user_type = user_type
            return
        stage_count(stages, "PipelineState: stages")
        check_state_fields(stages, index, phase, "PipelineState")
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


def _state_like(state):
    """CuTe DSL's verbs read a state's ``index`` and ``phase`` only, so a
    state class of the user's own (flash-attention's PipelineStateSimple
    keeps one i32 ``phase_index``) works with them: it has ``stages``,
    ``index`` and ``phase``."""
    return all(hasattr(type(state), a) or hasattr(state, a)
               for a in ("stages", "index", "phase"))


# -- one !pipeline.state per (index, phase) -------------------------------------
#
# A state given as (index, phase) -- stages=0, or a state class of the user's
# -- is made into a `pipeline.state.make` at each verb, and flash-attention's
# properties recompute index and phase at each read. The checker ties an
# acquire to its copies, a wait to its release, through the state *value*, so
# each verb getting a fresh state.make of equal operands would hide the pairs.
# Within one kernel, a state.make of the same stage count, role and operands
# (equal as CSE would find them: constants by value, pure arith ops by name,
# attributes and operands) is reused wherever it is visible.

_MADE = weakref.WeakKeyDictionary()  # Kernel -> {key: !pipeline.state value}
_KEY_DEPTH = 8


def _operand_key(x, depth=0):
    if isinstance(x, bool):
        return ("int", int(x))
    if isinstance(x, int):
        return ("int", x)
    v = getattr(x, "ir_value", x)
    if not isinstance(v, ir.Value):
        return ("object", id(x))
    if isinstance(v, ir.OpResult) and depth < _KEY_DEPTH:
        op = v.owner
        name = op.name
        if name == "arith.constant":
            attr = op.attributes["value"]
            if isinstance(attr, ir.IntegerAttr):
                return ("int", ir.IntegerAttr(attr).value)
        if name.startswith("arith.") and not op.regions:
            attrs = tuple(sorted((n, str(op.attributes[n])) for n in op.attributes))
            return (name, attrs, v.result_number,
                    tuple(_operand_key(o, depth + 1) for o in op.operands))
    return ("value", v)


def _made_state(stages, user_type, count, index, phase):
    """A PipelineState of ``stages`` for (count, index, phase), reusing one
    already made in this kernel for the same operands where visible."""
    from ..kernel.kernel import active_kernel
    kernel = active_kernel()
    if kernel is None:
        return PipelineState(stages, count, index, phase, user_type=user_type)
    made = _MADE.setdefault(kernel, {})
    key = (stages, user_type, _operand_key(count), _operand_key(index),
           _operand_key(phase))
    value = made.get(key)
    if value is not None and block_encloses(defining_block(value),
                                            current_block("pipeline state")):
        return PipelineState.from_value(value)
    state = PipelineState(stages, count, index, phase, user_type=user_type)
    made[key] = state.ir_value
    return state


def as_state(state, what, stages=None):
    """``state`` as one of ours; with the pipeline's ``stages`` (a verb),
    also a ``stages=0`` PipelineState or a state-like object of the user's,
    made into a ``!pipeline.state`` of that many stages here."""
    if isinstance(state, _StateBase):
        if state._value is None and stages is not None:
            count, index, phase = state._fields
            return _made_state(stages, state.user_type, count, index, phase)
        return state
    if stages is not None and not isinstance(state, (int, float)) and _state_like(state):
        own = state.stages
        if own not in (0, stages):
            raise PipelineError(
                f"{what}: the state ({type(state).__name__}) has {own} stages but the "
                f"pipeline has {stages} (a state walks its own pipeline's ring)")
        return _made_state(stages, PipelineUserType.ProducerConsumer, 0, state.index,
                           state.phase)
    raise TypeError(
        f"{what}: expected a PipelineState (make_pipeline_state("
        f"PipelineUserType..., stages)), got {type(state).__name__}")
