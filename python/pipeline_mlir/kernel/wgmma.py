"""Hopper warpgroup MMA (``wgmma.mma_async``) with operands in shared memory.

Three pieces, each one upstream NVVM op or a few ``arith`` ops:

- :func:`smem_matrix_descriptor`: the 64-bit shared-memory matrix descriptor
  of an operand tile as its :class:`~pipeline_mlir.layout.OperandLayout`
  says TMA laid it out (every field but the start address comes from the
  layout), moved along K with :func:`k_slice_descriptor`;
- :class:`Accumulator`: the fp32 accumulator fragment of one warpgroup, an
  ``!llvm.struct`` of ``n / 2`` floats held in registers, loop-carriable
  (``k.range(..., carry=[acc])``) like a pipeline state;
- :class:`WarpgroupMma`: one ``m64nNkK`` instruction shape for an A and a B
  layout (K, operand types and transposition follow from them);
  ``mma(acc, desc_a, desc_b)`` issues one ``nvvm.wgmma.mma_async``.
  :func:`fence`, :func:`commit_group` and :func:`wait_group` are the
  ``wgmma.fence`` / ``commit_group`` / ``wait_group`` of the PTX ISA
  (section "Asynchronous Warpgroup Level Matrix Multiply-Accumulate").

Ordering rules a kernel must follow (and the GEMM example states where it
does): ``fence()`` before the first ``mma`` that reads accumulator registers
written by ordinary instructions (the zeroing, or the previous tile's
epilogue reads); a shared-memory stage read by an ``mma`` may be released to
its producer only after ``wait_group`` has retired the group that contains
that ``mma``.

The descriptor's fields and the canonical layouts behind them are described
(and computed) in ``python/pipeline_mlir/layout.py``.
"""

import mlir.ir as ir
from mlir.dialects import arith, llvm, nvvm

from ..layout import DTYPES, K_BYTES_PER_INSTRUCTION, OperandLayout, descriptor_units
from .smem import SmemPtr
from .values import i32, i64, to_value


def smem_address(ptr):
    """The 32-bit shared::cta address of an ``SmemPtr``."""
    p = ptr.ir_value if isinstance(ptr, SmemPtr) else to_value(ptr, what="smem pointer")
    return llvm.ptrtoint(i32(), p)


def smem_matrix_descriptor(tile, layout):
    """Descriptor (i64) of the operand tile at ``tile`` (an ``SmemPtr``,
    ``layout.alignment``-aligned) laid out as ``layout`` (an
    ``OperandLayout``) says. Select a K slice with :func:`k_slice_descriptor`."""
    if not isinstance(layout, OperandLayout):
        raise TypeError(f"smem_matrix_descriptor: layout must be an OperandLayout, got "
                        f"{type(layout).__name__}")
    addr = arith.extui(i64(), smem_address(tile))
    start = arith.andi(arith.shrui(addr, arith.constant(i64(), 4)),
                       arith.constant(i64(), 0x3FFF))
    fixed = layout.descriptor_bits
    # i64 constants are signed in MLIR: fold the top bit in two's complement.
    if fixed >= 1 << 63:
        fixed -= 1 << 64
    return arith.ori(start, arith.constant(i64(), fixed))


def advance_descriptor(desc, byte_offset):
    """``desc`` moved ``byte_offset`` bytes (a multiple of 16) along the
    tile: the start-address field counts 16-byte units. Within a swizzled
    row this selects a 32-byte K slice, which the hardware swizzles with
    the same XOR pattern TMA wrote."""
    units = descriptor_units(byte_offset)
    if units == 0:
        return desc
    return arith.addi(desc, arith.constant(i64(), units))


def k_slice_descriptor(desc, layout, s):
    """``desc`` (of a tile laid out as ``layout``) moved to K slice ``s``,
    the operand of the ``s``-th wgmma along the tile's K."""
    return advance_descriptor(desc, layout.k_slice_offset(s))


def _operand(x, role):
    """An operand's layout: an ``OperandLayout``, or a dtype name for a
    K-major operand (only its dtype and major-ness matter to the MMA)."""
    if isinstance(x, OperandLayout):
        return x.dtype, x.major
    if isinstance(x, str):
        if x not in DTYPES:
            raise ValueError(f"WarpgroupMma: {role} dtype must be one of {sorted(DTYPES)}, "
                             f"got {x!r}")
        return x, "K"
    raise TypeError(f"WarpgroupMma: {role} must be an OperandLayout or a dtype name, "
                    f"got {type(x).__name__}")


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
    """``wgmma.mma_async.sync.aligned.m64n{n}k{k}.f32.{A}.{B}`` with A and B
    in shared memory. ``a`` and ``b`` are their ``OperandLayout`` (or a
    dtype name: K-major). K-major A is row-major ``M x K`` and K-major B is
    given as ``N x K``; MN-major operands (``M x K`` stored K x M, B given
    ``K x N``) are read transposed, which the PTX ISA allows for 16-bit
    types only."""

    M = 64

    def __init__(self, n, a="bf16", b=None):
        if not isinstance(n, int) or not 8 <= n <= 256 or n % 8:
            raise ValueError(f"wgmma N must be a multiple of 8 in 8..256, got {n!r}")
        (a_dtype, a_major), (b_dtype, b_major) = _operand(a, "a"), _operand(
            a if b is None else b, "b")
        a_bytes, b_bytes = DTYPES[a_dtype][0], DTYPES[b_dtype][0]
        if a_bytes != b_bytes or (a_bytes == 2 and a_dtype != b_dtype):
            raise ValueError(f"WarpgroupMma: A ({a_dtype}) and B ({b_dtype}) must be the "
                             "same 16-bit type, both tf32, or both 8-bit (e4m3/e5m2)")
        for role, dtype, major in (("A", a_dtype, a_major), ("B", b_dtype, b_major)):
            if major == "MN" and a_bytes != 2:
                raise ValueError(f"WarpgroupMma: {role} is MN-major {dtype}; wgmma reads "
                                 "only 16-bit operands transposed (PTX ISA: imm-trans is "
                                 "for .f16/.bf16), so give 8-bit and tf32 operands K-major")
        self.n = n
        self.dtype = a_dtype
        self.a_type = getattr(nvvm.WGMMATypes, DTYPES[a_dtype][2])
        self.b_type = getattr(nvvm.WGMMATypes, DTYPES[b_dtype][2])
        # A: row = K-major (M x K), col = transposed. B: col = K-major (N x K).
        self.layout_a = nvvm.MMALayout.row if a_major == "K" else nvvm.MMALayout.col
        self.layout_b = nvvm.MMALayout.col if b_major == "K" else nvvm.MMALayout.row
        self.k = K_BYTES_PER_INSTRUCTION // a_bytes

    def accumulator(self):
        return Accumulator(self.n)

    def mma(self, acc, desc_a, desc_b, accumulate=True):
        """``acc += A x B`` for one K slice, or ``acc = A x B`` with
        ``accumulate=False`` (wgmma's scale-d = 0: the accumulator's input
        is ignored). Asynchronous: the result is defined once
        :func:`wait_group` retired this instruction's group."""
        shape = ir.Attribute.parse(f"#nvvm.shape<m = 64, n = {self.n}, k = {self.k}>")
        acc._value = nvvm.wgmma_mma_async(
            acc.type, acc.ir_value, desc_a, desc_b, shape,
            self.a_type, self.b_type, nvvm.WGMMATypes.f32,
            nvvm.WGMMAScaleOut.one if accumulate else nvvm.WGMMAScaleOut.zero,
            nvvm.WGMMAScaleIn.one, nvvm.WGMMAScaleIn.one, self.layout_a, self.layout_b)


def fence():
    """``wgmma.fence.sync.aligned``: orders register and shared-memory
    accesses before the warpgroup's next ``wgmma``."""
    nvvm.wgmma_fence_aligned()


def commit_group():
    """``wgmma.commit_group.sync.aligned``: close the group of ``wgmma``
    issued since the last commit."""
    nvvm.wgmma_commit_group_sync_aligned()


def wait_group(pending):
    """``wgmma.wait_group.sync.aligned pending``: wait until at most
    ``pending`` groups are in flight."""
    if not isinstance(pending, int) or not 0 <= pending <= 7:
        raise ValueError(f"wait_group: pending must be an int in 0..7, got {pending!r}")
    nvvm.wgmma_wait_group_sync_aligned(pending)
