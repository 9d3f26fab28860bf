"""Compiling a kernel module: verify, lower, extract the gpu.binary object.

One call does the whole lowering: the named pass pipeline
``pipeline-to-cubin{chip=... format=bin|isa}`` (pipeline dialect -> NVVM ->
LLVM -> PTX -> cubin through ``gpu-module-to-binary``, which runs ptxas from
PATH for ``format=bin``). For cubins the assembler is chosen as in
``pipeline_mlir.compiler``: with nvJitLink installed (the ``fast`` extra) the
PTX is assembled in-process, else ptxas runs. Modules are cloned first, so a
kernel can be compiled for several chips or formats.
"""

import mlir.ir as ir
import mlir.passmanager as pm
from mlir._mlir_libs._mlirDialectsGPU import ObjectAttr

PIPELINE = "pipeline-to-cubin"


class LoweringUnavailable(RuntimeError):
    """The ``pipeline-to-cubin`` pass pipeline is not registered (yet)."""


def _parse(spec):
    return pm.PassManager.parse(f"builtin.module({spec})")


def has_pipeline_to_cubin(context=None):
    """True if the installed package registers ``pipeline-to-cubin``."""
    ctx = context or _any_context()
    with ctx:
        try:
            _parse(f"{PIPELINE}{{chip=sm_90a format=isa}}")
            return True
        except (ValueError, ir.MLIRError, RuntimeError):
            return False


def _any_context():
    try:
        ctx = ir.Context.current
    except ValueError:
        ctx = None
    if ctx is None:
        import pipeline_mlir
        ctx = pipeline_mlir.make_context()
    return ctx


def verify(module):
    """Verify ``module``; raises ``mlir.ir.MLIRError`` with the diagnostics."""
    with module.context:
        module.operation.verify()
    return True


def run_passes(module, spec):
    """Run ``builtin.module(spec)`` on a clone of ``module``; return the clone."""
    with module.context:
        clone = module.operation.clone()
        _parse(spec).run(clone)
    return clone


def lower(module, chip, fmt, assembler=None):
    """Lower a clone of ``module`` to a ``gpu.binary``; return its objects.

    Returns ``{gpu.module name: object bytes}``. ``assembler`` ('auto',
    'nvjitlink', 'ptxas'; None: $PIPELINE_MLIR_ASSEMBLER or 'auto') picks
    how ``fmt="bin"`` turns PTX into a cubin.
    """
    if fmt == "bin":
        from pipeline_mlir import compiler

        if compiler.resolve_assembler(assembler) == "nvjitlink":
            ptx = _lower(module, chip, "isa")
            return {name: compiler.assemble(
                        text, chip, assembler,
                        lambda name=name: _lower(module, chip, "bin")[name])
                    for name, text in ptx.items()}
    return _lower(module, chip, fmt)


def _lower(module, chip, fmt):
    with module.context:
        try:
            passes = _parse(f"{PIPELINE}{{chip={chip} format={fmt}}}")
        except (ValueError, ir.MLIRError, RuntimeError) as e:
            raise LoweringUnavailable(
                f"the '{PIPELINE}' pass pipeline is not registered in this "
                "build of pipeline_mlir (it lowers pipeline ops to NVVM and "
                "runs gpu-module-to-binary); rebuild the package once it has "
                f"landed. ({e})") from None
        clone = module.operation.clone()
        _drop_targets(clone)
        passes.run(clone)
        return binaries(clone)


def _drop_targets(op):
    """pipeline-to-cubin attaches the #nvvm.target for the requested chip;
    drop the one the kernel was built with so each gpu.module has exactly
    one target (and compiling for another chip is possible)."""
    for inner in op.regions[0].blocks[0].operations:
        if inner.operation.name == "gpu.module" and "targets" in inner.attributes:
            del inner.attributes["targets"]


def binaries(op):
    """``{name: bytes}`` of every ``gpu.binary`` directly inside ``op``."""
    out = {}
    region = op.regions[0]
    for inner in region.blocks[0].operations:
        if inner.operation.name != "gpu.binary":
            continue
        name = ir.StringAttr(inner.attributes["sym_name"]).value
        objects = inner.attributes["objects"]
        if len(objects) != 1:
            raise RuntimeError(
                f"gpu.binary @{name} has {len(objects)} objects; expected one "
                "target per kernel module")
        out[name] = ObjectAttr(objects[0]).object
    if not out:
        raise RuntimeError("lowering produced no gpu.binary")
    return out
