"""TMA descriptors (CUtensorMap) through cuTensorMapEncodeTiled.

Shapes, strides and boxes are given outermost-first, like ``array.shape``
and ``array.strides`` (bytes); the driver wants innermost-first, so they are
reversed here. The innermost dimension must be contiguous. Every rule the
driver checks is checked first, with a message that names the dimension.

``layout=`` takes a ``pipeline_mlir.layout.OperandLayout`` (the object the
kernel was built from): its box and swizzle, and its dtype checked against
the tensor's, so that host and kernel cannot disagree. FP8 tensors
(``float8_e4m3fn``, ``float8_e5m2``) are copied as bytes (TMA has no FP8
type; a copy does not convert).
"""

import ctypes

from . import _driver
from .errors import TmaDescriptorError

SWIZZLES = {None: 0, "none": 0, 0: 0, 32: 32, "32B": 32, 64: 64, "64B": 64,
            128: 128, "128B": 128}
# numpy dtype name -> (CUtensorMapDataType enum name, bytes)
DTYPES = {
    "uint8": ("CU_TENSOR_MAP_DATA_TYPE_UINT8", 1), "int8": ("CU_TENSOR_MAP_DATA_TYPE_UINT8", 1),
    "uint16": ("CU_TENSOR_MAP_DATA_TYPE_UINT16", 2), "int16": ("CU_TENSOR_MAP_DATA_TYPE_UINT16", 2),
    "uint32": ("CU_TENSOR_MAP_DATA_TYPE_UINT32", 4), "int32": ("CU_TENSOR_MAP_DATA_TYPE_INT32", 4),
    "uint64": ("CU_TENSOR_MAP_DATA_TYPE_UINT64", 8), "int64": ("CU_TENSOR_MAP_DATA_TYPE_INT64", 8),
    "float16": ("CU_TENSOR_MAP_DATA_TYPE_FLOAT16", 2), "float32": ("CU_TENSOR_MAP_DATA_TYPE_FLOAT32", 4),
    "float64": ("CU_TENSOR_MAP_DATA_TYPE_FLOAT64", 8), "bfloat16": ("CU_TENSOR_MAP_DATA_TYPE_BFLOAT16", 2),
    "tfloat32": ("CU_TENSOR_MAP_DATA_TYPE_TFLOAT32", 4),
    "float8_e4m3fn": ("CU_TENSOR_MAP_DATA_TYPE_UINT8", 1),
    "float8_e5m2": ("CU_TENSOR_MAP_DATA_TYPE_UINT8", 1),
}
DESCRIPTOR_BYTES = 128
DESCRIPTOR_ALIGN = 64


def _dtype_name(dtype):
    name = getattr(dtype, "name", None) or str(dtype)
    return name.replace("torch.", "")


def validate(address, shape, strides, dtype, box_shape, swizzle=None, element_strides=None):
    """Check every cuTensorMapEncodeTiled rule; return the normalized
    (dtype_name, elem_bytes, swizzle_bytes, element_strides)."""
    name = _dtype_name(dtype)
    if name not in DTYPES:
        raise TmaDescriptorError(f"dtype {name!r} is not supported by TMA; one of "
                                 f"{', '.join(sorted(DTYPES))}")
    elem = DTYPES[name][1]
    rank = len(shape)
    if not 1 <= rank <= 5:
        raise TmaDescriptorError(f"TMA tensors have rank 1..5, got rank {rank} (shape {tuple(shape)})")
    if len(strides) != rank or len(box_shape) != rank:
        raise TmaDescriptorError(f"shape {tuple(shape)}, strides {tuple(strides)} and box "
                                 f"{tuple(box_shape)} must all have rank {rank}")
    if address % 16:
        raise TmaDescriptorError(f"global address {address:#x} is not 16-byte aligned "
                                 f"(it is {address % 16} bytes past a 16-byte boundary)")
    for d, n in enumerate(shape):
        if not 1 <= n <= 2**32:
            raise TmaDescriptorError(f"shape[{d}] = {n} is outside 1..2^32")
    if strides[-1] != elem:
        raise TmaDescriptorError(f"the innermost dimension must be contiguous: strides[-1] "
                                 f"is {strides[-1]} bytes, the element is {elem} bytes")
    for d in range(rank - 1):
        s = strides[d]
        if s % 16:
            raise TmaDescriptorError(f"strides[{d}] = {s} bytes is not a multiple of 16 bytes")
        if not 0 < s < 2**40:
            raise TmaDescriptorError(f"strides[{d}] = {s} bytes is outside 1..2^40-1")
    for d, b in enumerate(box_shape):
        if not 1 <= b <= 256:
            raise TmaDescriptorError(f"box_shape[{d}] = {b} is outside 1..256")
    inner_bytes = box_shape[-1] * elem
    if inner_bytes % 16:
        raise TmaDescriptorError(f"the box's inner dimension is {inner_bytes} bytes "
                                 f"({box_shape[-1]} x {elem}); it must be a multiple of 16 bytes")
    if swizzle not in SWIZZLES:
        raise TmaDescriptorError(f"swizzle {swizzle!r} is not one of none, 32, 64, 128")
    span = SWIZZLES[swizzle]
    if span and inner_bytes > span:
        raise TmaDescriptorError(f"the box's inner dimension is {inner_bytes} bytes, more than "
                                 f"the {span}-byte swizzle span; use a smaller inner box or a "
                                 "wider swizzle")
    es = tuple(element_strides or (1,) * rank)
    if len(es) != rank or any(not 1 <= e <= 8 for e in es):
        raise TmaDescriptorError(f"element_strides {es} must be {rank} values in 1..8")
    return name, elem, span, es


class TmaDescriptor:
    """A 128-byte CUtensorMap (``bytes``) plus, on first use as a pointer
    parameter, a 64-byte aligned device copy of it."""

    def __init__(self, data, info, owner=None):
        if len(data) != DESCRIPTOR_BYTES:
            raise ValueError(f"a CUtensorMap is {DESCRIPTOR_BYTES} bytes, got {len(data)}")
        self.bytes, self.info, self.owner = bytes(data), info, owner
        self._device_copy = None

    def device_copy(self, device):
        """DeviceBuffer holding the descriptor (cuMemAlloc is 256-aligned)."""
        if self._device_copy is None:
            from .memory import DeviceBuffer

            buf = DeviceBuffer(DESCRIPTOR_BYTES, device)
            buf.copy_bytes_from_host(self.bytes)
            self._device_copy = buf
        return self._device_copy

    def free(self):
        if self._device_copy is not None:
            self._device_copy.free()
            self._device_copy = None

    def __repr__(self):
        return (f"TmaDescriptor(shape={self.info['shape']}, box={self.info['box_shape']}, "
                f"dtype={self.info['dtype']}, swizzle={self.info['swizzle']})")


def _from_layout(layout, dtype, box_shape, swizzle):
    """(box_shape, swizzle) of an OperandLayout, after checking that the
    explicit arguments and the tensor's dtype agree with it."""
    if box_shape is not None or swizzle is not None:
        raise TmaDescriptorError("pass either layout= or box_shape=/swizzle=, not both: the "
                                 "layout already says the box and the swizzle")
    for attr in ("box", "swizzle", "torch_dtype"):
        if not hasattr(layout, attr):
            raise TmaDescriptorError(f"layout must be a pipeline_mlir.layout.OperandLayout, "
                                     f"got {type(layout).__name__}")
    if dtype is not None and _dtype_name(dtype) != layout.torch_dtype:
        raise TmaDescriptorError(f"the tensor is {_dtype_name(dtype)} but the layout "
                                 f"{layout} is {layout.torch_dtype}")
    return layout.box, layout.swizzle


def make_tma_descriptor(array_or_ptr, shape=None, strides=None, dtype=None, box_shape=None,
                        swizzle=None, element_strides=None, l2_promotion=128,
                        oob_fill_nan=False, layout=None):
    """Encode a tiled TMA descriptor for the tensor at `array_or_ptr` (a
    device tensor/array or an int address; shape/strides/dtype default to
    the array's). The box and swizzle come from ``box_shape``/``swizzle`` or
    from ``layout`` (an ``OperandLayout``)."""
    from .args import device_address

    if layout is not None:
        box_shape, swizzle = _from_layout(
            layout, dtype if dtype is not None else getattr(array_or_ptr, "dtype", None),
            box_shape, swizzle)
    if box_shape is None:
        raise TmaDescriptorError("box_shape is required")
    address, host = device_address(array_or_ptr)
    if host is not None:
        raise TmaDescriptorError("TMA needs device memory: pass a CUDA tensor, a DeviceBuffer "
                                 "or a device address, not a host array")
    if shape is None:
        shape = tuple(array_or_ptr.shape)
    if dtype is None:
        dtype = getattr(array_or_ptr, "dtype", None)
        if dtype is None:
            raise TmaDescriptorError("dtype is required for a raw pointer")
    name = _dtype_name(dtype)
    if strides is None:
        if hasattr(array_or_ptr, "stride") and callable(array_or_ptr.stride):  # torch
            elem = array_or_ptr.element_size()
            strides = tuple(s * elem for s in array_or_ptr.stride())
        elif hasattr(array_or_ptr, "strides") and array_or_ptr.strides is not None:
            strides = tuple(array_or_ptr.strides)
        else:  # contiguous
            elem = DTYPES.get(name, (None, 1))[1]
            strides, acc = [], elem
            for n in reversed(shape):
                strides.insert(0, acc)
                acc *= n
    shape, strides, box_shape = tuple(map(int, shape)), tuple(map(int, strides)), tuple(map(int, box_shape))
    name, elem, span, es = validate(address, shape, strides, name, box_shape, swizzle,
                                    element_strides)
    info = {"shape": shape, "strides": strides, "box_shape": box_shape, "dtype": name,
            "swizzle": span, "element_strides": es, "address": address}
    drv = _driver.cuda()
    _driver.device_count()  # NoGpuError without a driver/GPU
    swz = {0: "NONE", 32: "32B", 64: "64B", 128: "128B"}[span]
    l2 = {0: "NONE", 64: "L2_64B", 128: "L2_128B", 256: "L2_256B"}[l2_promotion]
    rank = len(shape)
    tmap = _driver.check(drv.cuTensorMapEncodeTiled(
        getattr(drv.CUtensorMapDataType, DTYPES[name][0]), rank, address,
        [drv.cuuint64_t(n) for n in reversed(shape)],
        [drv.cuuint64_t(s) for s in reversed(strides[:-1])],
        [drv.cuuint32_t(b) for b in reversed(box_shape)],
        [drv.cuuint32_t(e) for e in reversed(es)],
        drv.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
        getattr(drv.CUtensorMapSwizzle, f"CU_TENSOR_MAP_SWIZZLE_{swz}"),
        getattr(drv.CUtensorMapL2promotion, f"CU_TENSOR_MAP_L2_PROMOTION_{l2}"),
        drv.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA
        if oob_fill_nan else drv.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
        "cuTensorMapEncodeTiled")
    data = ctypes.string_at(int(tmap.getPtr()), DESCRIPTOR_BYTES)
    return TmaDescriptor(data, info, owner=array_or_ptr)
