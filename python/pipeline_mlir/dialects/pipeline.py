"""The ``pipeline`` dialect in Python.

- every op as a generated class (``CreateOp``, ``ProducerAcquireOp``, ...) and a
  builder function (``create``, ``producer_acquire``, ...);
- the dialect's enums (``Agent``, ``OpType``, ``PipelineKind``, ``Role``,
  ``Multicast``);
- real Python classes for its types and attributes: ``PipelineType``,
  ``StateType``, ``CooperativeGroupAttr``, ``ClusterLayoutAttr`` (subclasses of
  ``mlir.ir.Type`` / ``mlir.ir.Attribute``, built through the C API).
"""

import pipeline_mlir as _pkg

_pkg._native()  # load mlir.ir, then our extension, and register passes

from .._mlir_libs._pipeline import (
    ClusterLayoutAttr,
    CooperativeGroupAttr,
    PipelineType,
    StateType,
)
from ._pipeline_enum_gen import *  # noqa: F401,F403
from ._pipeline_enum_gen import Agent, Multicast, PipelineKind, Role
from ._pipeline_ops_gen import *  # noqa: F401,F403
from . import _pipeline_ops_gen as _ops_gen
from ..user_location import at_user_line as _at_user_line

# The op builder functions (``producer_acquire(...)``, ...) put the op at the
# calling user's line when no location is given (see user_location.py).
for _name, _fn in list(vars(_ops_gen).items()):
    if (callable(_fn) and not isinstance(_fn, type) and _name[0].islower()
            and getattr(_fn, "__module__", None) == _ops_gen.__name__):
        globals()[_name] = _at_user_line(_fn)
del _name, _fn


def _downcast(prop, cls):
    """Wrap a native accessor that returns a plain Attribute (or None)."""
    raw = prop.fget
    return property(lambda self: None if (a := raw(self)) is None else cls(a))


PipelineType.producer = _downcast(PipelineType.producer, CooperativeGroupAttr)
PipelineType.consumer = _downcast(PipelineType.consumer, CooperativeGroupAttr)
PipelineType.cluster = _downcast(PipelineType.cluster, ClusterLayoutAttr)

# Enum-valued views of the integer accessors the native classes expose.
CooperativeGroupAttr.agent = property(lambda self: Agent(self.agent_value))
PipelineType.kind = property(lambda self: PipelineKind(self.kind_value))
PipelineType.multicast = property(lambda self: Multicast(self.multicast_value))
StateType.role = property(lambda self: Role(self.role_value))


def _cluster_size(self):
    c = self.cluster
    return 1 if c is None else c.v * c.m * c.n * c.l


PipelineType.cluster_size = property(_cluster_size)


# -- argument checks in front of the native constructors --------------------
# The native `get`s take C integers: a Python int out of range, a value of the
# wrong type or an enum integer that names no case would otherwise surface as
# nanobind's "incompatible function arguments" (listing C++ signatures) or as
# a type whose enum prints empty. Check here and name the argument.

_I64 = (-(1 << 63), (1 << 63) - 1)


def _int_arg(what, value, lo=_I64[0], hi=_I64[1]):
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} must be an int, got {type(value).__name__}")
    if not lo <= value <= hi:
        raise ValueError(f"{what} must be in [{lo}, {hi}], got {value}")
    return int(value)


def _enum_arg(what, value, enum):
    """An enum member or its integer value; anything else is rejected."""
    if isinstance(value, enum):
        return int(value.value) if hasattr(value, "value") else int(value)
    n = _int_arg(what, value, -(1 << 31), (1 << 31) - 1)
    valid = sorted(int(m.value) if hasattr(m, "value") else int(m) for m in enum)
    if n not in valid:
        raise ValueError(f"{what} = {n} is not a {enum.__name__} "
                         f"(valid: {', '.join(map(str, valid))})")
    return n


def _attr_arg(what, value, cls):
    if value is None:
        return None
    if not isinstance(value, cls):
        raise TypeError(f"{what} must be a {cls.__name__} or None, got "
                        f"{type(value).__name__}")
    return value


def _checked_get(native, check):
    def get(cls, *args, **kwargs):
        return native(*check(*args, **kwargs))
    get.__doc__ = native.__doc__
    return classmethod(get)


def _group_args(agent, size, context=None):
    return (_enum_arg("agent", agent, Agent), _int_arg("size", size), context)


def _cluster_args(v, m, n, l, context=None):
    return (_int_arg("v", v), _int_arg("m", m), _int_arg("n", n),
            _int_arg("l", l), context)


def _pipeline_args(kind, stages, producer=None, consumer=None, tx_count=0,
                   cluster=None, multicast=0, cta_group=1, length=0,
                   context=None):
    return (_enum_arg("kind", kind, PipelineKind), _int_arg("stages", stages),
            _attr_arg("producer", producer, CooperativeGroupAttr),
            _attr_arg("consumer", consumer, CooperativeGroupAttr),
            _int_arg("tx_count", tx_count),
            _attr_arg("cluster", cluster, ClusterLayoutAttr),
            _enum_arg("multicast", multicast, Multicast),
            _int_arg("cta_group", cta_group), _int_arg("length", length),
            context)


def _state_args(stages, role, simple=False, context=None):
    if not isinstance(simple, bool):
        raise TypeError(f"simple must be a bool, got {type(simple).__name__}")
    return (_int_arg("stages", stages), _enum_arg("role", role, Role), simple,
            context)


CooperativeGroupAttr.get = _checked_get(CooperativeGroupAttr.get, _group_args)
ClusterLayoutAttr.get = _checked_get(ClusterLayoutAttr.get, _cluster_args)
PipelineType.get = _checked_get(PipelineType.get, _pipeline_args)
StateType.get = _checked_get(StateType.get, _state_args)


# -- the meaning of each kind: the C++ table (KindTraits.h) -----------------
# The builders and the simulator read these instead of keeping their own
# copies of which mechanism signals which barrier.

from types import MappingProxyType as _ReadOnly

from .._mlir_libs._pipeline import arrive_count, barrier_plan  # noqa: E402
from .._mlir_libs._pipeline import kind_traits as _native_kind_traits  # noqa: E402

_TRAITS = {int(k): _ReadOnly(_native_kind_traits(int(k))) for k in PipelineKind}
_TRAITS_BY_NAME = {t["kind_name"]: t for t in _TRAITS.values()}


def kind_traits(kind):
    """The row of ``kind`` in the C++ table of pipeline kinds (KindTraits.h),
    read-only: ``producer_op`` / ``consumer_op`` (OpType values, spelled in
    ``*_op_name``), ``consumer_op_per_release``, ``tx_bytes``,
    ``stage_copies``, ``tcgen05``, ``multicast``, ``pair_scales_full`` /
    ``pair_scales_empty`` (the 2-CTA doubling), ``arm``, ``commit``,
    ``release`` (arrive targets), ``tail_leader_only``, ... ``kind`` is a
    PipelineKind, its integer value or its spelling (``"tma_async"``)."""
    if isinstance(kind, str):
        traits = _TRAITS_BY_NAME.get(kind)
    else:
        traits = _TRAITS.get(_enum_arg("kind", kind, PipelineKind))
    if traits is None:
        raise ValueError(f"{kind!r} is not a pipeline kind "
                         f"({', '.join(_TRAITS_BY_NAME)})")
    return traits
