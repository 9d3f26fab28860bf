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
