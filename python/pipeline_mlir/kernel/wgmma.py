"""Hopper warpgroup MMA (``wgmma.mma_async``) with operands in shared memory.

Three pieces, each one upstream NVVM op or a few ``arith`` ops:

- :func:`smem_matrix_descriptor`: the 64-bit shared-memory matrix descriptor
  of a K-major operand tile laid out by TMA with a 128-byte swizzle (rows of
  64 16-bit elements, 8-row groups 1024 bytes apart);
- :class:`Accumulator`: the fp32 accumulator fragment of one warpgroup, an
  ``!llvm.struct`` of ``n / 2`` floats held in registers, loop-carriable
  (``k.range(..., carry=[acc])``) like a pipeline state;
- :class:`WarpgroupMma`: one ``m64nNk16`` instruction shape and its operand
  types; ``mma(acc, desc_a, desc_b)`` issues one ``nvvm.wgmma.mma_async``.
  :func:`fence`, :func:`commit_group` and :func:`wait_group` are the
  ``wgmma.fence`` / ``commit_group`` / ``wait_group`` of the PTX ISA
  (section "Asynchronous Warpgroup Level Matrix Multiply-Accumulate").

Ordering rules a kernel must follow (and the GEMM example states where it
does): ``fence()`` before the first ``mma`` that reads accumulator registers
written by ordinary instructions (the zeroing, or the previous tile's
epilogue reads); a shared-memory stage read by an ``mma`` may be released to
its producer only after ``wait_group`` has retired the group that contains
that ``mma``.

Descriptor layout (PTX ISA, "Matrix Descriptor Format"): bits 0-13 start
address >> 4; 16-29 leading-dimension byte offset >> 4 (unused for swizzled
K-major tiles, conventionally 1); 32-45 stride byte offset >> 4 (the distance
between 8-row groups: 1024 bytes for 128-byte rows); 49-51 base offset (0 for
1024-byte aligned tiles); 62-63 swizzle mode (1 = 128-byte).
"""

import mlir.ir as ir
from mlir.dialects import arith, llvm, nvvm

from ..user_location import user_line
from .smem import SmemPtr
from .values import i32, i64, to_value

# Element type name -> (wgmma operand type, bytes).
ELEMENT_TYPES = {
    "bf16": (nvvm.WGMMATypes.bf16, 2),
    "f16": (nvvm.WGMMATypes.f16, 2),
}
SWIZZLE_128B_MODE = 1
ROW_BYTES_128B = 128            # one swizzle atom row: 64 16-bit elements
GROUP_STRIDE_128B = 8 * ROW_BYTES_128B  # 8 rows make one swizzle atom
K_PER_INSTRUCTION = 16          # wgmma ...k16 for 16-bit operands


def _element(dtype, what):
    if dtype not in ELEMENT_TYPES:
        raise ValueError(f"{what}: element type must be one of "
                         f"{sorted(ELEMENT_TYPES)}, got {dtype!r}")
    return ELEMENT_TYPES[dtype]


def smem_address(ptr):
    """The 32-bit shared::cta address of an ``SmemPtr``."""
    p = ptr.ir_value if isinstance(ptr, SmemPtr) else to_value(ptr, what="smem pointer")
    return llvm.ptrtoint(i32(), p)


def smem_matrix_descriptor(tile):
    """Descriptor (i64) of a K-major, 128-byte-swizzled operand tile at
    ``tile`` (an ``SmemPtr``, 1024-byte aligned). Advance along K with
    :func:`advance_descriptor`."""
    addr = arith.extui(i64(), smem_address(tile))
    start = arith.andi(arith.shrui(addr, arith.constant(i64(), 4)),
                       arith.constant(i64(), 0x3FFF))
    fixed = ((1 << 16)                                  # leading offset: 16 B
             | ((GROUP_STRIDE_128B >> 4) << 32)         # stride offset
             | (SWIZZLE_128B_MODE << 62))
    # i64 constants are signed in MLIR: fold the top bit in two's complement.
    if fixed >= 1 << 63:
        fixed -= 1 << 64
    return arith.ori(start, arith.constant(i64(), fixed))


def advance_descriptor(desc, byte_offset):
    """``desc`` moved ``byte_offset`` bytes (a multiple of 16) along the
    tile: the start-address field counts 16-byte units. Within a 128-byte
    swizzled row this selects the k-th 32-byte slice, which the hardware
    swizzles with the same XOR pattern TMA wrote."""
    if byte_offset % 16:
        raise ValueError(f"descriptor offsets are multiples of 16 bytes, got {byte_offset}")
    if byte_offset == 0:
        return desc
    return arith.addi(desc, arith.constant(i64(), byte_offset >> 4))


class Accumulator:
    """The fp32 accumulator fragment of ``m64nN`` for one warpgroup: ``n/2``
    floats per thread in an ``!llvm.struct``. Value ``i`` of thread
    ``(warp w, lane l)`` of the warpgroup is element
    ``(16 w + l / 4 + 8 ((i / 2) % 2),  8 (i / 4) + 2 (l % 4) + i % 2)``."""

    def __init__(self, n, value=None):
        self.n = n
        self.count = n // 2
        f32 = ir.F32Type.get()
        self.type = llvm.StructType.get_literal([f32] * self.count)
        self._value = value if value is not None else self._zeros()

    def _zeros(self):
        zero = arith.constant(ir.F32Type.get(), 0.0)
        v = llvm.mlir_undef(self.type)
        for i in range(self.count):
            v = llvm.insertvalue(v, zero, [i])
        return v

    def zero(self):
        """Reset every value to 0 (a fresh tile)."""
        self._value = self._zeros()

    @property
    def ir_value(self):
        return self._value

    def value(self, i):
        """Value ``i`` (an f32 SSA value)."""
        return llvm.extractvalue(ir.F32Type.get(), self._value, [i])

    # Loop-carried protocol (kernel.control.range_).
    def _carry_values(self):
        return [self._value]

    def _carry_rebind(self, values):
        (self._value,) = values


class WarpgroupMma:
    """``wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{dtype}.{dtype}`` with A
    and B K-major in shared memory (``A`` row-major ``M x K``, ``B`` given
    as ``N x K``)."""

    M = 64

    def __init__(self, n, dtype="bf16"):
        if not isinstance(n, int) or not 8 <= n <= 256 or n % 8:
            raise ValueError(f"wgmma N must be a multiple of 8 in 8..256, got {n!r}")
        self.n = n
        self.dtype = dtype
        self.operand_type, self.element_bytes = _element(dtype, "WarpgroupMma")
        self.k = K_PER_INSTRUCTION

    def accumulator(self):
        return Accumulator(self.n)

    @user_line
    def mma(self, acc, desc_a, desc_b):
        """``acc += A x B`` for one k16 slice (asynchronous: the result is
        defined once :func:`wait_group` retired this instruction's group)."""
        shape = ir.Attribute.parse(f"#nvvm.shape<m = 64, n = {self.n}, k = 16>")
        acc._value = nvvm.wgmma_mma_async(
            acc.type, acc.ir_value, desc_a, desc_b, shape,
            self.operand_type, self.operand_type, nvvm.WGMMATypes.f32,
            nvvm.WGMMAScaleOut.one, nvvm.WGMMAScaleIn.one, nvvm.WGMMAScaleIn.one,
            nvvm.MMALayout.row, nvvm.MMALayout.col)


@user_line
def fence():
    """``wgmma.fence.sync.aligned``: orders register and shared-memory
    accesses before the warpgroup's next ``wgmma``."""
    nvvm.wgmma_fence_aligned()


@user_line
def commit_group():
    """``wgmma.commit_group.sync.aligned``: close the group of ``wgmma``
    issued since the last commit."""
    nvvm.wgmma_commit_group_sync_aligned()


@user_line
def wait_group(pending):
    """``wgmma.wait_group.sync.aligned pending``: wait until at most
    ``pending`` groups are in flight."""
    if not isinstance(pending, int) or not 0 <= pending <= 7:
        raise ValueError(f"wait_group: pending must be an int in 0..7, got {pending!r}")
    nvvm.wgmma_wait_group_sync_aligned(pending)
