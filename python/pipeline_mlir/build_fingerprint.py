"""What built a cubin, as digests: the key half of "a cache never serves a
stale compile".

A cached cubin is only as fresh as the key it is found by. Three things
make a cubin, and each has a digest here:

- the Python that builds the kernel's IR: the builder's own file(s) and the
  pipeline_mlir sources it builds through (``BUILD_SOURCES``: the kernel
  layer, the pipelines, the dialect bindings, ``layout.py``...);
- the compiler: its Python (``COMPILE_SOURCES``) and the native code of the
  lowering (``native_identity``: our extension's bytes, the build ids of the
  MLIR and LLVM libraries it runs in);
- the assembler: ``ptxas --version`` and / or nvJitLink's version and
  build id, whichever a compile may use (``assembler_identity``).

``compiler_fingerprint()`` covers the compiler (the compile cache adds the
module's text and the assembler); ``build_fingerprint(builder_digest,
assembler)`` covers all three (the GEMM cache, ops/kernel_cache.py, whose
entries are found by config, not by module text).

When each part is read, and why: a process runs the code it loaded, not the
files on disk now. A digest taken after an edit, paired with a cubin built by
the code loaded before it, would file an old cubin under the new code's
fingerprint, and every later process would be served it. So each part is
read once per process, at its first use, and kept: a builder's files, and
with them the package's, when it is registered
(kernel_cache.register_builder), before it builds anything; for the compile
cache, at the first cached compile. Reading before loading errs the safe
way: code loaded after its digest was taken files a new cubin under an old
fingerprint, which the next process, reading the new files, does not match,
so it rebuilds. What this cannot see is a file replaced between its import
and that first use (a package reinstalled under a running process).

Importing this module loads no MLIR; ``assembler_identity`` imports the
compiler (which does) when called.
"""

import ctypes
import functools
import hashlib
import importlib.util
import os
import shutil
import struct
import subprocess

import pipeline_mlir

PACKAGE = os.path.dirname(os.path.abspath(pipeline_mlir.__file__))

# PTX -> cubin: the pass pipelines' driver, the in-process assembler, and the
# diagnostics whose warnings are stored beside a cached cubin.
COMPILE_SOURCES = ("compiler.py", "_nvjitlink.py", "diagnostics.py")
# Python -> IR: what a kernel builder builds through (folders: every .py in
# them, generated dialect bindings included).
BUILD_SOURCES = ("__init__.py", "ir.py", "layout.py", "user_location.py",
                 "kernel", "kernels", "pipeline", "dialects")


def _sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def source_files(names, root=PACKAGE):
    """Absolute paths of ``names`` under ``root``, sorted: files as given,
    folders as every ``.py`` below them."""
    found = []
    for name in names:
        path = os.path.join(root, name)
        if os.path.isdir(path):
            for d, subdirs, files in os.walk(path):
                subdirs[:] = sorted(s for s in subdirs if s != "__pycache__")
                found += [os.path.join(d, f) for f in files if f.endswith(".py")]
        else:
            found.append(path)
    return sorted(found)


def digest_files(paths, root=None):
    """sha256 over the files' names and bytes, read now. Names are relative
    to ``root`` (else the base name), so two checkouts at different places
    agree. A missing file is an error: a digest without it would describe
    a build that does not exist."""
    named = sorted((os.path.relpath(p, root) if root else os.path.basename(p), p)
                   for p in paths)
    h = hashlib.sha256()
    for name, path in named:
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as err:
            raise FileNotFoundError(f"cannot fingerprint {path}: {err}") from None
        h.update(f"{name}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()


@functools.lru_cache(maxsize=None)
def package_digest(names):
    """``digest_files`` of the package files ``names`` (a tuple, see
    ``source_files``), read once per process: the code this process runs."""
    return digest_files(source_files(names), root=PACKAGE)


# --- native code ---------------------------------------------------------------

_PT_NOTE, _NT_GNU_BUILD_ID = 4, 3


def elf_build_id(path):
    """The GNU build id (hex) of a 64-bit little-endian ELF file, or None.

    The linker derives it from the library's contents, so it names one build
    exactly; reading it costs a few small reads where hashing the 118-200 MB
    libraries (nvJitLink, MLIR, LLVM) would cost a third of a second each."""
    try:
        with open(path, "rb") as f:
            head = f.read(64)
            if head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
                return None
            phoff, = struct.unpack_from("<Q", head, 0x20)
            phentsize, phnum = struct.unpack_from("<HH", head, 0x36)
            f.seek(phoff)
            table = f.read(phentsize * phnum)
            for i in range(phnum):
                p_type, = struct.unpack_from("<I", table, i * phentsize)
                if p_type != _PT_NOTE:
                    continue
                offset, = struct.unpack_from("<Q", table, i * phentsize + 0x08)
                size, = struct.unpack_from("<Q", table, i * phentsize + 0x20)
                align, = struct.unpack_from("<Q", table, i * phentsize + 0x30)
                f.seek(offset)
                notes = f.read(size)
                found = _build_id_note(notes, 8 if align == 8 else 4)
                if found:
                    return found
    except (OSError, struct.error):
        return None
    return None


def _build_id_note(notes, align):
    pos = 0
    while pos + 12 <= len(notes):
        namesz, descsz, ntype = struct.unpack_from("<III", notes, pos)
        name_at = pos + 12
        desc_at = name_at + -(-namesz // align) * align
        if ntype == _NT_GNU_BUILD_ID and notes[name_at:name_at + namesz] == b"GNU\0":
            return notes[desc_at:desc_at + descsz].hex()
        pos = desc_at + -(-descsz // align) * align
    return None


def library_identity(path):
    """One shared library: its build id, else the sha256 of its bytes."""
    build_id = elf_build_id(path)
    name = os.path.basename(path)
    return f"{name} build-id {build_id}" if build_id else f"{name} sha256 {_sha256_file(path)}"


@functools.lru_cache(maxsize=None)
def native_identity():
    """The lowering's native code: our extension (hashed whole: 1.5 MB, and
    our CMake build need not emit a build id) and the MLIR / LLVM libraries
    it runs in (build ids). Once per process."""
    spec = importlib.util.find_spec("pipeline_mlir._mlir_libs._pipeline")
    if spec is None or not spec.origin:
        raise ImportError("pipeline_mlir's native extension (_pipeline) is not installed: "
                          "nothing to fingerprint a compile by (run scripts/setup.sh)")
    parts = [f"_pipeline sha256 {_sha256_file(spec.origin)}"]
    # The libraries the extension's RUNPATH names: mlir/_mlir_libs (the MLIR C
    # API with every upstream pass, gpu-module-to-binary included) and
    # llvm/lib (the NVPTX back end).
    for package, folder, prefix in (("mlir", "_mlir_libs", "lib"), ("llvm", "lib", "libLLVM")):
        spec = importlib.util.find_spec(package)
        roots = list(spec.submodule_search_locations or []) if spec else []
        libs = sorted(os.path.join(r, folder, f) for r in roots
                      if os.path.isdir(os.path.join(r, folder))
                      for f in os.listdir(os.path.join(r, folder))
                      if f.startswith(prefix) and ".so" in f)
        parts += [library_identity(p) for p in libs] or [f"no {package} libraries found"]
    return "; ".join(parts)


# --- assemblers ----------------------------------------------------------------

def ptxas_path():
    """The ptxas that MLIR's gpu-module-to-binary runs (its NVPTXSerializer::
    findTool, no toolkit option given): PATH first, then $CUDA_ROOT,
    $CUDA_HOME, $CUDA_PATH (the first set), then /usr/local/cuda (the usual
    compiled-in default); with how it was found, or (None, None)."""
    found = shutil.which("ptxas")
    if found:
        return found, "PATH"
    var = next((v for v in ("CUDA_ROOT", "CUDA_HOME", "CUDA_PATH") if os.environ.get(v)), None)
    root, how = (os.environ[var], f"${var}") if var else ("/usr/local/cuda", "default")
    candidate = os.path.join(root, "bin", "ptxas")
    if os.access(candidate, os.X_OK):
        return candidate, how
    return None, None


@functools.lru_cache(maxsize=None)
def _ptxas_version(path):
    try:
        run = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as err:
        return f"unusable ({type(err).__name__}: {err})"
    if run.returncode != 0:
        return f"unusable (--version exited {run.returncode})"
    # "Built on ...", "release 13.0, V13.0.88", "Build cuda_13.0.r13.0/compiler.N_0"
    return " | ".join(line.strip() for line in run.stdout.splitlines()
                      if line.strip() and not line.startswith("Copyright"))


def ptxas_identity():
    """``ptxas --version`` of the ptxas a compile would run (once per ptxas
    per process: one subprocess, a few ms), or 'no ptxas'."""
    path, how = ptxas_path()
    if path is None:
        return "no ptxas"
    return f"ptxas (via {how}) {_ptxas_version(path)}"


@functools.lru_cache(maxsize=None)
def _nvjitlink_library(lib, version):
    """The file of the loaded libnvJitLink (dladdr of one of its symbols:
    the loader may have found it by soname) and its identity."""
    path = None
    try:
        class DlInfo(ctypes.Structure):
            _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                        ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]

        dladdr = ctypes.CDLL(None).dladdr
        dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(DlInfo)]
        info = DlInfo()
        symbol = ctypes.cast(lib.nvJitLinkVersion, ctypes.c_void_p)
        if dladdr(symbol, ctypes.byref(info)) and info.dli_fname:
            path = os.fsdecode(info.dli_fname)
    except (OSError, AttributeError):
        pass
    found = library_identity(path) if path and os.path.exists(path) else "file unknown"
    return f"nvJitLink {version[0]}.{version[1]} ({found})"


def nvjitlink_identity():
    """nvJitLink's version and the build id of the library loaded (a patch
    release keeps major.minor and may change code generation), or
    'no nvJitLink'. Once per loaded library."""
    from pipeline_mlir import _nvjitlink

    lib = _nvjitlink.load()
    if lib is None:
        return "no nvJitLink"
    return _nvjitlink_library(lib, lib.version)


def assembler_identity(assembler=None):
    """Who may turn PTX into the cubin of a compile that asks for
    ``assembler`` (None: $PIPELINE_MLIR_ASSEMBLER, else 'auto'), as
    ``compiler.assemble`` decides: 'ptxas' (or 'auto' without nvJitLink)
    runs ptxas; 'nvjitlink' runs nvJitLink; 'auto' with nvJitLink runs it but
    hands setmaxnreg PTX, and PTX nvJitLink rejects, to ptxas, so both
    count. Raises as ``compiler.resolve_assembler`` does (an unknown name,
    nvJitLink asked for and missing)."""
    from pipeline_mlir import compiler   # here, not at import: it loads MLIR

    requested = assembler or os.environ.get(compiler.ENV_ASSEMBLER) or "auto"
    tool = compiler.resolve_assembler(requested)
    if tool == "ptxas":
        return f"{requested} -> {ptxas_identity()}"
    if requested == "nvjitlink":
        return f"nvjitlink -> {nvjitlink_identity()}"
    return f"auto -> {nvjitlink_identity()}, setmaxnreg / rejected PTX -> {ptxas_identity()}"


# --- fingerprints ----------------------------------------------------------------

def _combine(*parts):
    h = hashlib.sha256()
    for part in parts:
        h.update(str(part).encode() + b"\0")
    return h.hexdigest()


def compiler_fingerprint():
    """The compiler, PTX -> cubin's assembler aside: package version, its
    Python (``COMPILE_SOURCES``) and native code (each read once per
    process; combining them costs a microsecond)."""
    return _combine("compiler", pipeline_mlir.__version__, package_digest(COMPILE_SOURCES),
                    native_identity())


def build_fingerprint(builder_digest, assembler=None):
    """sha256 (hex) of everything that builds a kernel's cubin: the builder's
    files (``builder_digest``, from ``digest_files``), the package sources it
    builds through (``BUILD_SOURCES``), the compiler and the assembler that
    ``assembler`` (as in ``compiler.to_cubin``) selects."""
    return _combine("build", builder_digest, package_digest(BUILD_SOURCES),
                    compiler_fingerprint(), assembler_identity(assembler))
