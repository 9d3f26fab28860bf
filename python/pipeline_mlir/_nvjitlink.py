"""PTX -> cubin in-process through NVIDIA's nvJitLink library (the default).

The upstream lowering assembles PTX with ``gpu-module-to-binary format=bin``,
which writes temporary files and runs ptxas as a subprocess: a process start
and a file round trip per kernel. nvJitLink is the same assembler as a shared
library (the ``nvidia-nvjitlink`` wheel, a dependency of the package), so the
cubin comes back in memory. When it cannot be loaded, compiles fall back to
ptxas on PATH.

Bound with ctypes rather than through ``cuda.bindings.nvjitlink``: importing
cuda-bindings' wrapper costs ~30 ms (cuda.pathfinder), which is more than the
subprocess it replaces saves on a small kernel; ctypes needs a few symbols.

    from pipeline_mlir import _nvjitlink
    if _nvjitlink.available():
        cubin = _nvjitlink.assemble(ptx_text, "sm_90a")
"""

import ctypes
import glob
import importlib.util
import os

ENV_LIBRARY = "PIPELINE_MLIR_NVJITLINK"  # explicit path to libnvJitLink.so.N
_INPUT_PTX = 2  # NVJITLINK_INPUT_PTX

_lib = None
_load_error = None
_loaded = False


class NvJitLinkError(RuntimeError):
    """nvJitLink rejected the input; the message carries its error log."""


def _candidates():
    explicit = os.environ.get(ENV_LIBRARY)
    if explicit:
        return [explicit]
    found = []
    # The nvidia-nvjitlink wheels install nvidia/cu13/lib/libnvJitLink.so.13
    # (CUDA 13) or nvidia/nvjitlink/lib/libnvJitLink.so.12 (the -cu12 wheel);
    # find_spec locates the namespace package without importing anything.
    spec = importlib.util.find_spec("nvidia")
    for root in (spec.submodule_search_locations if spec else None) or []:
        for pattern in ("cu*/lib/libnvJitLink.so.*", "nvjitlink/lib/libnvJitLink.so.*"):
            found += sorted(glob.glob(os.path.join(root, pattern)), reverse=True)
    # Then whatever the dynamic loader finds (a CUDA toolkit on the path).
    return found + ["libnvJitLink.so.13", "libnvJitLink.so.12", "libnvJitLink.so"]


def _bind(lib):
    major, minor = ctypes.c_uint(), ctypes.c_uint()
    if lib.nvJitLinkVersion(ctypes.byref(major), ctypes.byref(minor)) != 0:
        raise OSError("nvJitLinkVersion failed")
    lib.version = (major.value, minor.value)

    # The header maps each entry point to its versioned symbol
    # (__nvJitLinkCreate_13_0 ...); the <major>_0 one exists in every minor.
    def fn(name, *argtypes):
        f = getattr(lib, f"__nvJitLink{name}_{major.value}_0", None) or \
            getattr(lib, f"nvJitLink{name}")
        f.restype = ctypes.c_int
        f.argtypes = argtypes
        setattr(lib, name, f)

    handle, size_p = ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t)
    fn("Create", ctypes.POINTER(handle), ctypes.c_uint32,
       ctypes.POINTER(ctypes.c_char_p))
    fn("AddData", handle, ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t,
       ctypes.c_char_p)
    fn("Complete", handle)
    fn("GetLinkedCubinSize", handle, size_p)
    fn("GetLinkedCubin", handle, ctypes.c_void_p)
    fn("GetErrorLogSize", handle, size_p)
    fn("GetErrorLog", handle, ctypes.c_char_p)
    fn("Destroy", ctypes.POINTER(handle))
    return lib


def load():
    """The bound library, or None if no libnvJitLink can be loaded."""
    global _lib, _load_error, _loaded
    if not _loaded:
        _loaded = True
        errors = []
        for path in _candidates():
            try:
                _lib = _bind(ctypes.CDLL(path))
                break
            except (OSError, AttributeError) as e:
                errors.append(f"{path}: {e}")
        _load_error = "; ".join(errors) or "no candidate library"
    return _lib


def available():
    return load() is not None


def unavailable_reason():
    """Why load() returned None ('' if it did not)."""
    return "" if load() is not None else (
        "nvJitLink is not loadable (pip install nvidia-nvjitlink, or set "
        f"{ENV_LIBRARY}): {_load_error}")


def version():
    """(major, minor) of the loaded library."""
    lib = load()
    if lib is None:
        raise NvJitLinkError(unavailable_reason())
    return lib.version


def _error_log(lib, h):
    size = ctypes.c_size_t()
    if lib.GetErrorLogSize(h, ctypes.byref(size)) != 0 or size.value <= 1:
        return ""
    buf = ctypes.create_string_buffer(size.value)
    lib.GetErrorLog(h, buf)
    return buf.value.decode(errors="replace").strip()


def assemble(ptx, chip, options=("-O3",)):
    """cubin bytes for PTX text (str or bytes) on ``chip`` (e.g. "sm_90a").

    ``-O3`` is ptxas's default, so the result matches the subprocess path.
    """
    lib = load()
    if lib is None:
        raise NvJitLinkError(unavailable_reason())
    data = ptx.encode() if isinstance(ptx, str) else bytes(ptx)
    opts = [f"-arch={chip}".encode()] + [o.encode() for o in options]
    argv = (ctypes.c_char_p * len(opts))(*opts)
    h = ctypes.c_void_p()
    rc = lib.Create(ctypes.byref(h), len(opts), argv)
    if rc != 0:
        raise NvJitLinkError(f"nvJitLinkCreate({' '.join(o.decode() for o in opts)}) "
                             f"failed with code {rc}")
    try:
        for step, call in (
                ("nvJitLinkAddData", lambda: lib.AddData(h, _INPUT_PTX, data, len(data),
                                                         b"kernel.ptx")),
                ("nvJitLinkComplete", lambda: lib.Complete(h))):
            rc = call()
            if rc != 0:
                raise NvJitLinkError(f"{step} failed with code {rc} for {chip}: "
                                     f"{_error_log(lib, h)}")
        size = ctypes.c_size_t()
        if lib.GetLinkedCubinSize(h, ctypes.byref(size)) != 0:
            raise NvJitLinkError("nvJitLinkGetLinkedCubinSize failed")
        buf = ctypes.create_string_buffer(size.value)
        if lib.GetLinkedCubin(h, buf) != 0:
            raise NvJitLinkError("nvJitLinkGetLinkedCubin failed")
        return buf.raw
    finally:
        lib.Destroy(ctypes.byref(h))
