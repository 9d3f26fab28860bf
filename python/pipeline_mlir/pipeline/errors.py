"""Exceptions raised by the pipeline builders on misuse.

Every check that the dialect's verifiers would make later is also made here,
at the Python call, so that the error names the Python object and verb.
"""

from ..kernel.scope import ScopeError


class PipelineError(ValueError):
    """A pipeline, state or handle used in a way CuTe DSL semantics forbid."""


__all__ = ["PipelineError", "ScopeError"]
