"""Thin layer over ``cuda.bindings.driver``: lazy import, error checking,
the device and its primary context.

Nothing here imports MLIR. ``cuda-bindings`` is imported on first use, so
the validation code of the runtime works (and is tested) without it.
"""

import functools
import os

from .errors import CudaError, NoGpuError

_cuda = None


def cuda():
    """The ``cuda.bindings.driver`` module (raises NoGpuError if missing)."""
    global _cuda
    if _cuda is None:
        try:
            from cuda.bindings import driver
        except ImportError as err:  # pragma: no cover - depends on the env
            raise NoGpuError(
                "cuda-bindings is not installed (pip install cuda-bindings): "
                f"{err}") from None
        _cuda = driver
    return _cuda


def result_name(code):
    try:
        err, name = cuda().cuGetErrorName(code)
        if int(err) == 0:
            return name.decode() if isinstance(name, bytes) else str(name)
    except Exception:  # the driver may be unusable; keep the number
        pass
    return f"CUresult {int(code)}"


def check(ret, call):
    """Unpack a cuda-bindings return tuple; raise CudaError on failure."""
    if isinstance(ret, tuple):
        err, rest = ret[0], ret[1:]
    else:
        err, rest = ret, ()
    if int(err) != 0:
        raise CudaError(call, int(err), result_name(err))
    if not rest:
        return None
    return rest[0] if len(rest) == 1 else rest


@functools.lru_cache(maxsize=None)
def _init():
    drv = cuda()
    try:
        err = drv.cuInit(0)
    except Exception as exc:  # DynamicLibNotFoundError: no libcuda.so
        raise NoGpuError(f"the CUDA driver library is not available: {exc}") from None
    err = err[0] if isinstance(err, tuple) else err
    if int(err) != 0:
        raise NoGpuError(f"cuInit failed: {result_name(err)} ({int(err)})")
    count = check(drv.cuDeviceGetCount(), "cuDeviceGetCount")
    if count == 0:
        raise NoGpuError("cuInit succeeded but no CUDA device is present")
    return count


def no_gpu_reason():
    """None when a GPU is usable, else a sentence saying why not."""
    if os.environ.get("PIPELINE_MLIR_NO_GPU"):
        return "PIPELINE_MLIR_NO_GPU is set"
    try:
        _init()
    except NoGpuError as err:
        return str(err)
    except CudaError as err:
        return str(err)
    return None


def device_count():
    return _init()
