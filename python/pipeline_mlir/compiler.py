"""Compiler stages: pipeline IR -> NVVM/LLVM IR -> PTX -> cubin.

Each stage is one pass pipeline run in-process through the upstream
PassManager (the `pipeline-to-nvvm` / `pipeline-to-cubin` pipelines that the
native extension registers). PTX -> cubin is the assembler's job: nvJitLink
in-process by default (the nvidia-nvjitlink dependency), else ptxas as a
subprocess through `gpu-module-to-binary format=bin` (see `assemble`).
Compiled artifacts are cached by content hash: the key covers the module's
text, the chip, every option, the compiler's fingerprint (the package
version, this module's Python and the native code of the lowering: a
rebuilt lowering with an unchanged version string must not return stale
PTX) and, for a cubin, the identity of every assembler the compile may run
(``ptxas --version``, nvJitLink's version and build id), so an upgraded
assembler or compiler misses instead of returning an old entry
(``pipeline_mlir/build_fingerprint.py`` computes these, once per process).

    from pipeline_mlir import compiler
    ptx = compiler.to_ptx(module, chip="sm_90a")
    cubin = compiler.to_cubin(module, chip="sm_90a")
"""

import hashlib
import json
import os
import shutil
import tempfile
import warnings

import mlir.ir as ir
import mlir.passmanager as passmanager
from mlir.dialects import gpu

import pipeline_mlir
from pipeline_mlir import _nvjitlink, build_fingerprint, diagnostics

ASSEMBLERS = ("auto", "nvjitlink", "ptxas")
ENV_ASSEMBLER = "PIPELINE_MLIR_ASSEMBLER"  # default for assembler=None

# The chips the lowering emits code for (getLoweringChips in C++).
SUPPORTED_CHIPS = pipeline_mlir._native().lowering_chips()


from pipeline_mlir.diagnostics import CompileError  # noqa: E402  (re-exported)


class LoweringUnavailable(CompileError):
    """The pass pipeline is not registered in this build of pipeline_mlir."""


# The named pass pipelines the native extension registers.
PIPELINE_TO_NVVM = "pipeline-to-nvvm"
PIPELINE_TO_CUBIN = "pipeline-to-cubin"


def check_chip(chip, argument="chip"):
    """Raise TypeError / ValueError naming `argument` unless `chip` is one of
    SUPPORTED_CHIPS. A chip reaches MLIR as a pass option and then as an
    #nvvm.target, where upstream aborts on some strings ("P4"): only
    known names get that far."""
    if not isinstance(chip, str):
        raise TypeError(f"{argument} must be a str such as 'sm_90a', not "
                        f"{type(chip).__name__}")
    if chip not in SUPPORTED_CHIPS:
        raise ValueError(f"{argument}: unsupported chip {chip!r}; pipeline-mlir "
                         f"targets {', '.join(SUPPORTED_CHIPS)}")


def check_targets(module):
    """Raise ValueError if an #nvvm.target in `module` (one attached by hand,
    say) would abort upstream MLIR's verifier or the NVPTX back end; printing
    or verifying such a module kills the process, so this runs first."""
    from pipeline_mlir._mlir_libs import _pipeline

    _pipeline.check_nvvm_targets(module.operation)


def _check_request(module, chip):
    check_chip(chip)
    check_targets(module)


def _options(chip, verify_protocol, watchdog, extra=None):
    opts = {"chip": chip,
            "verify-protocol": "true" if verify_protocol else "false",
            "watchdog": "true" if watchdog else "false"}
    opts.update(extra or {})
    return " ".join(f"{k}={v}" for k, v in opts.items())


def _drop_targets(op):
    """pipeline-to-cubin attaches the #nvvm.target of the requested chip;
    drop any target the module was built with so that each gpu.module ends
    up with exactly one (and one module compiles for any chip)."""
    for inner in op.regions[0].blocks[0].operations:
        if inner.operation.name == "gpu.module" and "targets" in inner.attributes:
            del inner.attributes["targets"]


def _run(module, pipeline, drop_targets=False, as_module=False, verbose=None):
    """Run a textual pass pipeline on a clone of `module`; return the clone's
    operation, or an ir.Module with `as_module` (print + parse, ~0.5 ms on a
    small kernel; operation.clone() copies in memory). Warnings become
    Python warnings, errors a CompileError (pipeline_mlir.diagnostics)."""
    with module.context:
        # With locations: diagnostics must name the user's lines.
        clone = (ir.Module.parse(module.operation.get_asm(enable_debug_info=True))
                 if as_module else module.operation.clone())
        if drop_targets:
            _drop_targets(clone.operation)
        try:
            passes = passmanager.PassManager.parse(f"builtin.module({pipeline})")
        except (ValueError, ir.MLIRError) as err:
            raise LoweringUnavailable(
                f"{pipeline}: the pass pipeline is not registered in this "
                f"build of pipeline_mlir ({err})") from None
        diagnostics.run(passes, clone.operation, pipeline, verbose)
    return clone


def _load_assembler_with_the_compiler():
    """Load libnvJitLink when this module is imported, not at the first compile.

    Mapping and relocating the library costs 8-9 ms once per process (a 118 MB
    image; docs/benchmarks.md section 4). CuTe DSL pays the same cost for its
    assembler (libnvptxcompiler, linked into the native module that
    ``import cutlass`` loads) at import, so loading ours with the compiler
    keeps "the first compile of a process" the same work on both sides; the
    benchmark also reports import + first compile. A background thread does not
    hide the load (it blocks on the dynamic loader's lock that the build
    needs). Skipped when the ptxas path is asked for.
    """
    if os.environ.get(ENV_ASSEMBLER, "auto") != "ptxas":
        _nvjitlink.load()


_load_assembler_with_the_compiler()


def resolve_assembler(assembler=None):
    """'nvjitlink' or 'ptxas': what `assembler` (None: $PIPELINE_MLIR_ASSEMBLER,
    else 'auto') means here. 'auto' takes nvJitLink when it loads."""
    assembler = assembler or os.environ.get(ENV_ASSEMBLER) or "auto"
    if assembler not in ASSEMBLERS:
        raise ValueError(f"unknown assembler {assembler!r}; expected one of "
                         f"{', '.join(ASSEMBLERS)}")
    if assembler == "auto":
        return "nvjitlink" if _nvjitlink.available() else "ptxas"
    if assembler == "nvjitlink" and not _nvjitlink.available():
        raise CompileError(_nvjitlink.unavailable_reason())
    return assembler


def needs_whole_program_ptxas(ptx):
    """Whether `ptx` must be assembled by the ptxas program rather than
    nvJitLink: nvJitLink compiles each input as a separate compilation unit
    and then ignores ``setmaxnreg`` ("(C7504) 'setmaxnreg' ignored to
    maintain compatibility across compilation units", nvJitLink 13.5), so a
    warp-specialized kernel keeps the entry register cap in its consumer
    warpgroups: an attention kernel's wgmma are then serialized for lack of
    registers (C7512) and it runs at two thirds of its speed. 'auto' sends
    such PTX to ptxas when ptxas is on PATH."""
    text = ptx if isinstance(ptx, str) else bytes(ptx).decode(errors="replace")
    if "setmaxnreg" not in text:
        return False
    if shutil.which("ptxas") is None:
        warnings.warn(
            "this kernel resizes its warpgroups' registers (setmaxnreg), which nvJitLink "
            "ignores, and no ptxas is on PATH: its consumers keep the entry's register "
            "count, and a wgmma-heavy kernel may run far slower (put CUDA's ptxas on PATH)",
            RuntimeWarning, stacklevel=4)
        return False
    return True


def assemble(ptx, chip, assembler, ptxas_fallback):
    """cubin bytes of `ptx` for `chip` with the resolved `assembler`.

    `ptxas_fallback()` produces the cubin through the subprocess path; 'auto'
    uses it when nvJitLink rejects the PTX (an nvJitLink older than the
    chip, say), so nvJitLink never breaks a compile that ptxas accepts."""
    requested = assembler or os.environ.get(ENV_ASSEMBLER) or "auto"
    if resolve_assembler(assembler) == "ptxas":
        return ptxas_fallback()
    if requested == "auto" and needs_whole_program_ptxas(ptx):
        return ptxas_fallback()
    try:
        return _nvjitlink.assemble(ptx, chip)
    except _nvjitlink.NvJitLinkError as err:
        if requested == "auto":
            return ptxas_fallback()
        raise CompileError(str(err)) from None


def to_nvvm(module, chip="sm_90a", verify_protocol=True, watchdog=False,
            verbose=None):
    """Lower pipeline ops (and the kernel's arith/scf/gpu ops) to NVVM + LLVM.
    ``verbose``: IR dumps in a CompileError (default $PIPELINE_MLIR_VERBOSE)."""
    _check_request(module, chip)
    return _run(module, PIPELINE_TO_NVVM + "{" +
                _options(chip, verify_protocol, watchdog) + "}", as_module=True,
                verbose=verbose)


def _binary_objects(module):
    """(name, bytes) for every gpu.binary in the module."""
    found = []
    for op in module.operation.regions[0].blocks[0].operations:
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
    from pipeline_mlir.runtime.cache_dir import cache_root

    return cache_root()


def _cache_key(module, *parts):
    """sha256 of the compiler (package version, its Python, the native
    lowering: build_fingerprint.compiler_fingerprint), the module's text and
    `parts` (the options and, for a cubin, the assemblers' identity)."""
    h = hashlib.sha256()
    h.update(build_fingerprint.compiler_fingerprint().encode())
    for part in (str(module),) + parts:
        h.update(b"\0" + str(part).encode())
    return h.hexdigest()


def _lower_one(module, chip, fmt, verify_protocol, watchdog, verbose=None):
    lowered = _run(module, PIPELINE_TO_CUBIN + "{" +
                   _options(chip, verify_protocol, watchdog, {"format": fmt}) + "}",
                   drop_targets=True, verbose=verbose)
    objects = _binary_objects(lowered)
    if len(objects) != 1:
        raise CompileError(f"expected one gpu.module, found {len(objects)}")
    return bytes(objects[0][1])


def _compile(module, chip, fmt, verify_protocol, watchdog, use_cache,
             assembler=None, verbose=None):
    _check_request(module, chip)
    tool = resolve_assembler(assembler) if fmt == "bin" else None
    # The key prints the module and asks the assemblers their versions (a
    # ptxas subprocess, once per process): skip it when not caching.
    if use_cache:
        parts = [PIPELINE_TO_CUBIN, chip, fmt, verify_protocol, watchdog]
        if fmt == "bin":
            # Different assemblers (and versions, and 'auto' vs 'nvjitlink',
            # which route setmaxnreg PTX differently) give different, equally
            # valid cubins; keep their entries apart.
            parts.append(build_fingerprint.assembler_identity(assembler))
        path = os.path.join(_cache_dir(), _cache_key(module, *parts) + "." + fmt)
        if os.path.exists(path):
            # A cached compile warns as the first one did.
            _issue(_read_warnings(path))
            with open(path, "rb") as f:
                return f.read()
    caught = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            data = _lower(module, chip, fmt, verify_protocol, watchdog, assembler,
                          verbose, tool)
    finally:  # a failing compile still shows its warnings
        issued = list(dict.fromkeys((str(w.message), w.category, w.filename, w.lineno)
                                    for w in caught))  # once, even if lowered twice
        _issue(issued)
    if use_cache:
        checker = [[m, f, n] for m, c, f, n in issued if c is diagnostics.CheckerWarning]
        if checker:  # beside the entry, only when there is something to say
            _write_atomic(path + ".warnings", json.dumps(checker).encode())
        _write_atomic(path, data)
    return data


def _read_warnings(path):
    try:
        with open(path + ".warnings") as f:
            return [(m, diagnostics.CheckerWarning, fn, n) for m, fn, n in json.load(f)]
    except (OSError, ValueError):
        return []


def _issue(found):
    for message, category, filename, lineno in found:
        warnings.warn_explicit(message, category, filename, lineno)


def _write_atomic(path, data):
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path))
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)  # atomic: concurrent compiles never see half a file


def _lower(module, chip, fmt, verify_protocol, watchdog, assembler, verbose, tool):
    if fmt == "bin":
        def ptxas():
            return _lower_one(module, chip, "bin", verify_protocol, watchdog, verbose)
        if tool == "ptxas":
            data = ptxas()
        else:
            ptx = _lower_one(module, chip, "isa", verify_protocol, watchdog, verbose)
            data = assemble(ptx, chip, assembler, ptxas)
    else:
        data = _lower_one(module, chip, fmt, verify_protocol, watchdog, verbose)
    return data


def to_ptx(module, chip="sm_90a", verify_protocol=True, watchdog=False,
           use_cache=True, verbose=None):
    """PTX text of the module's (single) gpu.module."""
    return _compile(module, chip, "isa", verify_protocol, watchdog,
                    use_cache, verbose=verbose).decode()


def to_cubin(module, chip="sm_90a", verify_protocol=True, watchdog=False,
             use_cache=True, assembler=None, verbose=None):
    """cubin bytes of the module's (single) gpu.module.

    assembler: 'nvjitlink' (in-process, the default dependency), 'ptxas'
    (subprocess through gpu-module-to-binary, needs ptxas on PATH) or 'auto'
    (nvJitLink when it loads, else ptxas); None reads
    $PIPELINE_MLIR_ASSEMBLER, default 'auto'.

    A failing check raises CompileError led by the user's file:line; checker
    warnings are issued as ``diagnostics.CheckerWarning``. ``verbose``
    (default $PIPELINE_MLIR_VERBOSE) adds MLIR's IR dumps to the error."""
    return _compile(module, chip, "bin", verify_protocol, watchdog, use_cache,
                    assembler, verbose)
