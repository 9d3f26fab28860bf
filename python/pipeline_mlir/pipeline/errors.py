"""Exceptions raised by the pipeline builders on misuse.

Every check that the dialect's verifiers would make later is also made here,
at the Python call, so that the error names the Python object and verb.
"""

from ..kernel.scope import ScopeError


class PipelineError(ValueError):
    """A pipeline, state or handle used in a way CuTe DSL semantics forbid."""


class UncheckedBarrierWarning(UserWarning):
    """A kernel drives an mbarrier by hand (``MbarrierArray``, or the handle
    of ``producer_get_barrier``): the protocol checker and the simulator do
    not model such barriers, so their arrive counts, phases and init order
    go unchecked. Issued once per kernel, at the user's
    line."""


__all__ = ["PipelineError", "ScopeError", "UncheckedBarrierWarning"]
