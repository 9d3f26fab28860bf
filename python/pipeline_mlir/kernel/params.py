"""Kernel parameter kinds.

- :class:`GlobalPtr`: ``!llvm.ptr<1>``, a device (global memory) pointer.
- :class:`Int32`, :class:`Int64`, :class:`Float32`: scalars passed by value.
Each kind also names the runtime's argument kind (``kind``: "ptr", "i32",
"tma", ...), so a compiled kernel knows its launch signature.

- :class:`TmaDescriptor`: ``!llvm.ptr`` (generic address space) pointing at a
  128-byte ``CUtensorMap`` that the host copied into global memory before the
  launch. This is the convention of upstream MLIR's NVGPU TMA lowering and
  the one the runner implements: a pointer parameter needs no
  ``__grid_constant__`` by-value parameter of 128-byte alignment (which the
  upstream gpu.func lowering cannot express), and the descriptor is read by
  ``cp.async.bulk.tensor`` through the generic address.
"""

import mlir.ir as ir
from mlir.dialects import llvm


class Param:
    """Base of parameter kinds; ``ir_type()`` is the gpu.func argument type,
    ``kind`` the runtime argument kind (``pipeline_mlir.runtime.args``)."""

    kind = None

    def ir_type(self):
        raise NotImplementedError

    def __repr__(self):
        return f"{type(self).__name__}()"


class GlobalPtr(Param):
    """A global-memory pointer. ``align``: the alignment in bytes the kernel
    relies on (16 by default: vector loads); a launch refuses a pointer that
    is not aligned to it."""

    def __init__(self, align=16):
        if not isinstance(align, int) or align < 1 or align & (align - 1):
            raise ValueError(f"GlobalPtr: align must be a power of two, got {align!r}")
        self.align = align

    @property
    def kind(self):
        return "ptr" if self.align == 16 else f"ptr:{self.align}"

    def ir_type(self):
        return llvm.PointerType.get(1)

    def __repr__(self):
        return "GlobalPtr()" if self.align == 16 else f"GlobalPtr(align={self.align})"


class TmaDescriptor(Param):
    kind = "tma"

    def ir_type(self):
        return llvm.PointerType.get(0)


class Int32(Param):
    kind = "i32"

    def ir_type(self):
        return ir.IntegerType.get_signless(32)


class Int64(Param):
    kind = "i64"

    def ir_type(self):
        return ir.IntegerType.get_signless(64)


class Float32(Param):
    kind = "f32"

    def ir_type(self):
        return ir.F32Type.get()


_BY_NAME = {
    "ptr": GlobalPtr, "global_ptr": GlobalPtr, "tma_desc": TmaDescriptor,
    "i32": Int32, "i64": Int64, "f32": Float32,
}


def as_param(spec, name):
    """A Param from a Param instance/class or one of the short names."""
    if isinstance(spec, Param):
        return spec
    if isinstance(spec, type) and issubclass(spec, Param):
        return spec()
    if isinstance(spec, str) and spec in _BY_NAME:
        return _BY_NAME[spec]()
    raise TypeError(
        f"parameter {name!r}: expected a Param (GlobalPtr(), Int32(), "
        f"TmaDescriptor(), ...) or one of {sorted(_BY_NAME)}, got {spec!r}")
