"""pipeline-mlir: CuTe DSL producer/consumer pipelines as a verifiable MLIR dialect.

Importing this package registers nothing globally; use :func:`register_dialect`
on an ``mlir.ir.Context`` or create one with :func:`make_context`. The upstream
``mlir`` package provides the (single) MLIR copy of the process, so
``mlir.ir`` is imported before our native module.
"""

import mlir.ir as _ir  # noqa: F401  (must load before our extension)

from ._mlir_libs import _pipeline as _native

__version__ = "0.1.0"

_native.register_passes()


def register_dialect(context=None, load=True):
    """Register (and load) the pipeline dialect in ``context`` (default: current)."""
    _native.register_dialect(context, load)


def make_context():
    """A new ``mlir.ir.Context`` with the upstream dialects and ``pipeline`` loaded."""
    ctx = _ir.Context()
    register_dialect(ctx)
    return ctx


__all__ = ["register_dialect", "make_context", "__version__"]
