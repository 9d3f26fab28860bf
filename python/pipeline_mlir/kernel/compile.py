"""Checking a kernel module and running passes on it.

Lowering to PTX / cubin is ``pipeline_mlir.compiler`` (one implementation,
with its cache and assembler choice); ``Kernel.compile`` / ``Kernel.to_ptx``
call it. This module keeps the small helpers the kernel layer and its tests
use: verification, running an arbitrary pass pipeline on a clone, and
reading ``gpu.binary`` objects.
"""

import mlir.ir as ir
import mlir.passmanager as pm
from mlir._mlir_libs._mlirDialectsGPU import ObjectAttr

from pipeline_mlir.compiler import PIPELINE_TO_CUBIN, LoweringUnavailable  # noqa: F401


def _parse(spec):
    return pm.PassManager.parse(f"builtin.module({spec})")


def has_pipeline_to_cubin(context=None):
    """True if the installed package registers ``pipeline-to-cubin``."""
    ctx = context or _any_context()
    with ctx:
        try:
            _parse(f"{PIPELINE_TO_CUBIN}{{chip=sm_90a format=isa}}")
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
    from ..compiler import check_targets

    check_targets(module)  # the verifier aborts on some #nvvm.target chips
    with module.context:
        module.operation.verify()
    return True


def run_passes(module, spec):
    """Run ``builtin.module(spec)`` on a clone of ``module``; return the clone."""
    with module.context:
        clone = module.operation.clone()
        _parse(spec).run(clone)
    return clone


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
