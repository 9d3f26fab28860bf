"""Shared memory: one dynamic shared-memory arena per kernel, bump-allocated.

Every allocation is a byte offset into the kernel's dynamic shared memory
(``gpu.dynamic_shared_memory``), whose base is rounded up to
:data:`BASE_ALIGN` bytes at run time so that offsets aligned in Python are
aligned in memory (TMA with 128B swizzle needs 1024-byte aligned buffers).
The pointers are ``!llvm.ptr<3>`` values, computed once in the kernel's
prologue, so they may be used anywhere in the kernel.

Why dynamic: the total is only known when the kernel body is complete, CuTe
DSL kernels also use dynamic shared memory, and it is not limited to 48 KiB.
The launcher must pass :attr:`SharedMemory.size` bytes of dynamic shared
memory (``Kernel.smem_bytes``).
"""

import mlir.ir as ir
from mlir.dialects import arith, gpu, llvm, memref

from .values import Scalar, i32, i64, to_value

BASE_ALIGN = 1024


def _gep_bytes(base, offset):
    """``base + offset`` bytes (``llvm.getelementptr i8``)."""
    off = to_value(offset, i32(), what="byte offset")
    return llvm.getelementptr(llvm.PointerType.get(3), base, [off],
                              [-2147483648], ir.IntegerType.get_signless(8), 0)


class SmemPtr:
    """A ``!llvm.ptr<3>`` with byte-offset arithmetic (``ptr + 128``)."""

    __hash__ = object.__hash__

    def __init__(self, value, size=None):
        self._value = value
        self.size = size

    @property
    def ir_value(self):
        return self._value

    value = ir_value

    def __add__(self, offset):
        return SmemPtr(_gep_bytes(self._value, offset))

    def stage(self, index, stage_bytes):
        """Pointer to buffer ``index`` of a ring of ``stage_bytes`` buffers."""
        idx = index if isinstance(index, Scalar) else Scalar(to_value(index, i32()))
        return self + idx * stage_bytes

    def __repr__(self):
        return f"SmemPtr({self._value})"


class SharedMemory:
    """The bump allocator behind ``Kernel.smem_alloc``."""

    def __init__(self, entry_block, anchor):
        # Prologue ops go before `anchor`, the first op of the kernel body, so
        # they dominate every use.
        self._entry = entry_block
        self._anchor = anchor
        self._base = None
        self.used = 0
        self.allocations = []

    @property
    def size(self):
        """Dynamic shared memory bytes to launch with (0 if none is used)."""
        return self.used + BASE_ALIGN if self.used else 0

    def _make_base(self):
        i8 = ir.IntegerType.get_signless(8)
        space = ir.AttrBuilder.get("GPU_AddressSpaceAttr")(
            gpu.AddressSpace.Workgroup, context=ir.Context.current)
        mtype = ir.MemRefType.get([ir.ShapedType.get_dynamic_size()], i8,
                                  memory_space=space)
        dyn = gpu.dynamic_shared_memory(mtype)
        addr = arith.index_cast(i64(), memref.extract_aligned_pointer_as_index(dyn))
        addr = arith.addi(addr, arith.constant(i64(), BASE_ALIGN - 1))
        addr = arith.andi(addr, arith.constant(i64(), -BASE_ALIGN))
        return llvm.inttoptr(llvm.PointerType.get(3), addr)

    def alloc(self, nbytes, align=16, name=None):
        if not isinstance(nbytes, int) or nbytes <= 0:
            raise ValueError(f"smem_alloc: size must be a positive int, got {nbytes!r}")
        if not isinstance(align, int) or align <= 0 or align & (align - 1):
            raise ValueError(f"smem_alloc: align must be a power of two, got {align!r}")
        if align > BASE_ALIGN:
            raise ValueError(f"smem_alloc: align is at most {BASE_ALIGN}, got {align}")
        offset = (self.used + align - 1) // align * align
        self.used = offset + nbytes
        with ir.InsertionPoint(self._anchor):
            if self._base is None:
                self._base = self._make_base()
            ptr = _gep_bytes(self._base, offset) if offset else self._base
        self.allocations.append((name, offset, nbytes))
        return SmemPtr(ptr, nbytes)
