"""Compiler stages: pipeline IR -> NVVM/LLVM IR -> PTX -> cubin.

Each stage is one pass pipeline run in-process through the upstream
PassManager (the `pipeline-to-nvvm` / `pipeline-to-cubin` pipelines that the
native extension registers). Compiled artifacts are cached by content hash:
the key covers the module's text, the chip, every option and the package
version, so a stale entry can never be returned.

    from pipeline_mlir import compiler
    ptx = compiler.to_ptx(module, chip="sm_90a")
    cubin = compiler.to_cubin(module, chip="sm_90a")
"""

import hashlib
import os
import tempfile

import mlir.ir as ir
import mlir.passmanager as passmanager
from mlir.dialects import gpu

import pipeline_mlir

SUPPORTED_CHIPS = ("sm_90a", "sm_100a", "sm_101a", "sm_103a")


class CompileError(RuntimeError):
    """A pass failed; the message carries MLIR's diagnostics."""


def _check_chip(chip):
    if chip not in SUPPORTED_CHIPS:
        raise ValueError(f"unsupported chip {chip!r}; pipeline-mlir targets "
                         f"{', '.join(SUPPORTED_CHIPS)}")


def _options(chip, verify_protocol, watchdog, extra=None):
    opts = {"chip": chip,
            "verify-protocol": "true" if verify_protocol else "false",
            "watchdog": "true" if watchdog else "false"}
    opts.update(extra or {})
    return " ".join(f"{k}={v}" for k, v in opts.items())


def _drop_targets(module):
    """pipeline-to-cubin attaches the #nvvm.target of the requested chip;
    drop any target the module was built with so that each gpu.module ends
    up with exactly one (and one module compiles for any chip)."""
    for op in module.body.operations:
        if op.operation.name == "gpu.module" and "targets" in op.attributes:
            del op.attributes["targets"]


def _run(module, pipeline, drop_targets=False):
    """Run a textual pass pipeline on a clone of `module`; return the clone."""
    with module.context:
        clone = ir.Module.parse(str(module))
        if drop_targets:
            _drop_targets(clone)
        try:
            passmanager.PassManager.parse(
                f"builtin.module({pipeline})").run(clone.operation)
        except ir.MLIRError as err:
            raise CompileError(f"{pipeline}: {err}") from None
    return clone


def to_nvvm(module, chip="sm_90a", verify_protocol=True, watchdog=False):
    """Lower pipeline ops (and the kernel's arith/scf/gpu ops) to NVVM + LLVM."""
    _check_chip(chip)
    return _run(module, "pipeline-to-nvvm{" +
                _options(chip, verify_protocol, watchdog) + "}")


def _binary_objects(module):
    """(name, bytes) for every gpu.binary in the module."""
    found = []
    for op in module.body.operations:
        if op.operation.name != "gpu.binary":
            continue
        name = ir.StringAttr(op.attributes["sym_name"]).value
        for obj in ir.ArrayAttr(op.attributes["objects"]):
            found.append((name, gpu.ObjectAttr(obj).object))
    if not found:
        raise CompileError("the pass pipeline produced no gpu.binary "
                           "(does the module contain a gpu.module?)")
    return found


def _cache_dir():
    root = os.environ.get("PIPELINE_MLIR_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")),
        "pipeline-mlir")
    os.makedirs(root, exist_ok=True)
    return root


def _cache_key(module, *parts):
    h = hashlib.sha256()
    h.update(pipeline_mlir.__version__.encode())
    for part in (str(module),) + parts:
        h.update(b"\0" + str(part).encode())
    return h.hexdigest()


def _compile(module, chip, fmt, verify_protocol, watchdog, use_cache):
    _check_chip(chip)
    key = _cache_key(module, chip, fmt, verify_protocol, watchdog)
    path = os.path.join(_cache_dir(), key + "." + fmt)
    if use_cache and os.path.exists(path):
        with open(path, "rb") as f:
            return f.read()
    lowered = _run(module, "pipeline-to-cubin{" +
                   _options(chip, verify_protocol, watchdog, {"format": fmt}) + "}",
                   drop_targets=True)
    objects = _binary_objects(lowered)
    if len(objects) != 1:
        raise CompileError(f"expected one gpu.module, found {len(objects)}")
    data = bytes(objects[0][1])
    if use_cache:
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path))
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)  # atomic: concurrent compiles never see half a file
    return data


def to_ptx(module, chip="sm_90a", verify_protocol=True, watchdog=False,
           use_cache=True):
    """PTX text of the module's (single) gpu.module."""
    return _compile(module, chip, "isa", verify_protocol, watchdog,
                    use_cache).decode()


def to_cubin(module, chip="sm_90a", verify_protocol=True, watchdog=False,
             use_cache=True):
    """cubin bytes of the module's (single) gpu.module (ptxas runs here)."""
    return _compile(module, chip, "bin", verify_protocol, watchdog, use_cache)
