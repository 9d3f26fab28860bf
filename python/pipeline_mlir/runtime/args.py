"""Kernel parameters: declared kinds, binding user values, packing.

A kernel's parameters are declared either per call, by wrapping values
(``ptr(x)``, ``i32(n)``, ``tma(desc)``), or once, with a signature list
(``["ptr", "ptr:4", "i32", "tma"]``). Bare Python numbers are never guessed:
an int could be an i32, an i64 or a device address.

Pointer parameters accept: torch CUDA tensors (``data_ptr()``), objects
with ``__cuda_array_interface__`` or a CUDA ``__dlpack__``, DeviceBuffer /
DevicePointer, ints (with a ``ptr`` declaration), and host arrays (numpy,
CPU torch tensors, CPU DLPack) which are copied to a temporary device buffer
before the launch and copied back after it.
"""

import ctypes
import operator
import struct

from .errors import ArgumentError
from .memory import DeviceBuffer, DevicePointer

# kind -> (struct format, min, max)
SCALARS = {
    "i8": ("<b", -2**7, 2**7 - 1), "i16": ("<h", -2**15, 2**15 - 1),
    "i32": ("<i", -2**31, 2**31 - 1), "i64": ("<q", -2**63, 2**63 - 1),
    "u8": ("<B", 0, 2**8 - 1), "u16": ("<H", 0, 2**16 - 1),
    "u32": ("<I", 0, 2**32 - 1), "u64": ("<Q", 0, 2**64 - 1),
    "f16": ("<e", None, None), "f32": ("<f", None, None), "f64": ("<d", None, None),
}
KINDS = tuple(SCALARS) + ("ptr", "tma", "tma_byval")


class Arg:
    kind = "?"


class Scalar(Arg):
    def __init__(self, kind, value):
        if kind not in SCALARS:
            raise ArgumentError(f"unknown scalar type {kind!r}; one of {', '.join(SCALARS)}")
        fmt, lo, hi = SCALARS[kind]
        if lo is not None:
            if not isinstance(value, (int, bool, float)) and hasattr(value, "__index__"):
                try:  # numpy integers, 0-d integer tensors
                    value = operator.index(value)
                except TypeError:
                    pass
            if not isinstance(value, int) or isinstance(value, bool):
                raise ArgumentError(f"{kind} needs an int, got {type(value).__name__} {value!r}")
            if not lo <= value <= hi:
                raise ArgumentError(f"{value} is out of range for {kind} [{lo}, {hi}]")
        else:
            if not isinstance(value, (int, float)) and not hasattr(value, "__float__"):
                raise ArgumentError(f"{kind} needs a number, got {type(value).__name__}")
            value = float(value)
            try:
                struct.pack(fmt, value)
            except OverflowError:
                raise ArgumentError(f"{value} is out of range for {kind}") from None
        self.kind, self.value = kind, value

    def pack(self):
        return struct.pack(SCALARS[self.kind][0], self.value), struct.calcsize(SCALARS[self.kind][0])

    def __repr__(self):
        return f"{self.kind}({self.value!r})"


class Pointer(Arg):
    kind = "ptr"

    def __init__(self, obj, align=16):
        if align < 1 or align & (align - 1):
            raise ArgumentError(f"pointer alignment must be a power of two, got {align}")
        self.obj, self.align = obj, align

    def __repr__(self):
        return f"ptr({type(self.obj).__name__}, align={self.align})"


class Tma(Arg):
    def __init__(self, desc, by_value=False):
        from .tensormap import TmaDescriptor

        if not isinstance(desc, TmaDescriptor):
            raise ArgumentError(f"tma() needs a TmaDescriptor (make_tma_descriptor), "
                                f"got {type(desc).__name__}")
        self.desc, self.by_value = desc, by_value
        self.kind = "tma_byval" if by_value else "tma"

    def __repr__(self):
        return f"{self.kind}({self.desc!r})"


def _scalar_factory(kind):
    def make(value):
        return Scalar(kind, value)

    make.__name__ = kind
    make.__doc__ = f"Declare `value` as a {kind} kernel parameter."
    return make


i8, i16, i32, i64 = (_scalar_factory(k) for k in ("i8", "i16", "i32", "i64"))
u8, u16, u32, u64 = (_scalar_factory(k) for k in ("u8", "u16", "u32", "u64"))
f16, f32, f64 = (_scalar_factory(k) for k in ("f16", "f32", "f64"))


def ptr(obj, align=16):
    """Declare `obj` (array, tensor, buffer or int address) as a pointer
    parameter whose address must be `align`-byte aligned."""
    return Pointer(obj, align)


def tma(desc, by_value=False):
    """Declare a TMA descriptor parameter: by default a pointer to a 64-byte
    aligned device copy (an ``!llvm.ptr`` parameter); ``by_value=True``
    passes the 128 bytes themselves (a ``__grid_constant__`` CUtensorMap)."""
    return Tma(desc, by_value)


def parse_signature(signature):
    """['ptr', 'ptr:4', 'i32', 'tma'] -> [(kind, align)]"""
    out = []
    for i, spec in enumerate(signature):
        kind, _, extra = str(spec).partition(":")
        if kind not in KINDS:
            raise ArgumentError(f"signature entry {i} is {spec!r}; expected one of "
                                f"{', '.join(KINDS)} (ptr may carry an alignment: 'ptr:4')")
        align = 16
        if extra:
            if kind != "ptr" or not extra.isdigit():
                raise ArgumentError(f"signature entry {i} is {spec!r}: only 'ptr:N' takes a suffix")
            align = int(extra)
        out.append((kind, align))
    return out


def _is_numpy_scalar(obj):
    return type(obj).__module__ == "numpy" and getattr(obj, "shape", None) == () and \
        hasattr(obj, "item")


def _is_array_like(obj):
    return (hasattr(obj, "__cuda_array_interface__") or hasattr(obj, "__dlpack__")
            or hasattr(obj, "__array_interface__") or hasattr(obj, "data_ptr")
            or isinstance(obj, (DeviceBuffer, DevicePointer)))


def where(i, kernel, names=None):
    """How messages name argument ``i``: "argument 2 ('n') of kernel 'k'"."""
    name = f" ({names[i]!r})" if names and i < len(names) else ""
    return f"argument {i}{name} of kernel '{kernel}'"


def bind(args, signature, kernel, names=None):
    """Typed Args for `args`, checked against `signature` (may be None).
    `names`: the parameters' names, for the messages."""
    args = list(args)
    if signature is not None:
        sig = parse_signature(signature)
        if len(args) != len(sig):
            raise ArgumentError(
                f"kernel '{kernel}' takes {len(sig)} argument(s) "
                f"({', '.join(k for k, _ in sig)}), got {len(args)}")
    else:
        sig = [None] * len(args)
    bound = []
    for i, (value, spec) in enumerate(zip(args, sig)):
        at = where(i, kernel, names)
        if isinstance(value, Arg):
            if spec is not None and spec[0] != value.kind:
                raise ArgumentError(f"{at} is declared {spec[0]} but was given {value!r}")
            bound.append(value)
            continue
        if spec is None:
            if _is_array_like(value):
                bound.append(Pointer(value))
                continue
            raise ArgumentError(
                f"{at} is a bare {type(value).__name__} ({value!r}); say its type, "
                f"e.g. i32({value!r}) or ptr({value!r}), or give the kernel a signature")
        kind, align = spec
        if kind in SCALARS:
            if _is_numpy_scalar(value):  # np.int32(3), np.float32(0.5), np.array(7)
                value = value.item()
            if _is_array_like(value):
                raise ArgumentError(f"{at} is declared {kind} but was given an array "
                                    f"({type(value).__name__})")
            try:
                bound.append(Scalar(kind, value))
            except ArgumentError as err:
                raise ArgumentError(f"{at}: {err}") from None
        elif kind == "ptr":
            if isinstance(value, (float, bool, str, bytes)) or value is None:
                raise ArgumentError(f"{at} is declared ptr but was given "
                                    f"{type(value).__name__} {value!r}")
            bound.append(Pointer(value, align))
        else:
            try:
                bound.append(Tma(value, by_value=(kind == "tma_byval")))
            except ArgumentError as err:
                raise ArgumentError(f"{at}: {err}") from None
    return bound


def device_address(obj):
    """(address, None) for device-resident objects, (None, host numpy
    array) for host arrays. Raises ArgumentError for anything else."""
    if isinstance(obj, DevicePointer):
        return obj.address, None
    if isinstance(obj, DeviceBuffer):
        return obj.address, None
    if isinstance(obj, int) and not isinstance(obj, bool):
        if obj < 0:
            raise ArgumentError(f"device address {obj} is negative")
        return obj, None
    mod = type(obj).__module__ or ""
    if mod.startswith("torch") and hasattr(obj, "data_ptr"):
        if not obj.is_contiguous():
            raise ArgumentError("a non-contiguous torch tensor cannot be passed as a "
                                "pointer; call .contiguous() first")
        if obj.is_cuda:
            return int(obj.data_ptr()), None
        return None, obj.detach().numpy()
    cai = getattr(obj, "__cuda_array_interface__", None)
    if cai is not None:
        strides = cai.get("strides")
        if strides is not None:
            raise ArgumentError("a strided __cuda_array_interface__ array cannot be passed "
                                "as a pointer; make it contiguous")
        return int(cai["data"][0]), None
    if hasattr(obj, "__array_interface__"):
        import numpy as np

        arr = np.asarray(obj)
        if not arr.flags["C_CONTIGUOUS"]:
            raise ArgumentError("a non-contiguous numpy array cannot be passed as a "
                                "pointer; use np.ascontiguousarray")
        return None, arr
    if hasattr(obj, "__dlpack__"):
        dev_type, _ = obj.__dlpack_device__()
        if dev_type in (2, 3, 13):  # kDLCUDA, kDLCUDAHost, kDLCUDAManaged
            return _dlpack_address(obj), None
        if dev_type == 1:  # kDLCPU
            import numpy as np

            return None, np.from_dlpack(obj)
        raise ArgumentError(f"DLPack device type {dev_type} is neither CUDA nor CPU")
    raise ArgumentError(f"cannot pass a {type(obj).__name__} as a pointer (expected a "
                        "tensor, an array, a DeviceBuffer or DevicePointer, or an int address)")


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


def _dlpack_address(obj):
    """data + byte_offset of a DLPack capsule's DLTensor (the producer
    stays the owner: the capsule is not consumed)."""
    capsule = obj.__dlpack__()
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    tensor = _DLTensor.from_address(get(capsule, b"dltensor"))
    return int(tensor.data or 0) + int(tensor.byte_offset)
