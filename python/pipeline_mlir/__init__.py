"""pipeline-mlir: CuTe DSL producer/consumer pipelines as a verifiable MLIR dialect.

Importing this package registers nothing globally; use :func:`register_dialect`
on an ``mlir.ir.Context`` or create one with :func:`make_context`. The upstream
``mlir`` package provides the (single) MLIR copy of the process, so
``mlir.ir`` is imported before our native module.

The MLIR side loads on first use, not at import: ``pipeline_mlir.runtime``
(cuda-bindings + numpy only) must import on a GPU host that has prebuilt
cubins but no MLIR wheels.
"""

__version__ = "0.1.0"

_native_module = None


def _native():
    """The native extension, loaded (after mlir.ir) on first use."""
    global _native_module
    if _native_module is None:
        import mlir.ir  # noqa: F401  (the one MLIR copy; must load first)

        from mlir._mlir_libs import _mlir

        from ._mlir_libs import _pipeline

        _pipeline.register_passes()
        # Each op built looks its dialect's Python module up under the search
        # prefixes; without ours, every pipeline op retried (and failed) the
        # import of mlir.dialects.pipeline (~0.05 ms each, uncached on failure).
        if __name__ + ".dialects" not in _mlir.globals.dialect_search_modules:
            _mlir.globals.append_dialect_search_prefix(__name__ + ".dialects")
        _native_module = _pipeline
    return _native_module


def register_dialect(context=None, load=True):
    """Register (and load) the pipeline dialect in ``context`` (default: current)."""
    _native().register_dialect(context, load)


def make_context():
    """A new ``mlir.ir.Context`` with the upstream dialects and ``pipeline`` loaded."""
    import mlir.ir as ir

    ctx = ir.Context()
    register_dialect(ctx)
    return ctx


_OPS = {"gemm": "gemm", "scaled_mm": "scaled_mm", "attention": "attention",
        "attention_fp8": "attention_fp8"}


def __getattr__(name):
    # The ops (pipeline_mlir.gemm, scaled_mm, attention) import torch: only
    # when asked for.
    if name in _OPS:
        import importlib

        op = getattr(importlib.import_module(f".ops.{_OPS[name]}", __name__), name)
        globals()[name] = op
        return op
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["register_dialect", "make_context", "__version__"]
