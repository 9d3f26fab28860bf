"""Hopper warpgroup MMA (``wgmma.mma_async``) with operands in shared memory.

Three pieces, each one upstream NVVM op or a few ``arith`` ops:

- :func:`smem_matrix_descriptor`: the 64-bit shared-memory matrix descriptor
  of an operand tile as its :class:`~pipeline_mlir.layout.OperandLayout`
  says TMA laid it out (every field but the start address comes from the
  layout), moved along K with :func:`k_slice_descriptor`;
- the accumulator: a register :class:`~.fragment.Fragment` (``m64 x n``
  f32 in the wgmma layout), loop-carriable (``k.range(..., carry=[acc])``);
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

from ..chip_limits import WGMMA_N_MAX
from ..layout import DTYPES, K_BYTES_PER_INSTRUCTION, OperandLayout, descriptor_units
from ..user_location import user_line
from .fragment import Fragment, OperandA
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


# The accumulator of a warpgroup MMA is a register Fragment (kernel/fragment.py).
Accumulator = Fragment


class WarpgroupMma:
    """``wgmma.mma_async.sync.aligned.m64n{n}k{k}.f32.{A}.{B}`` with A and B
    in shared memory. ``a`` and ``b`` are their ``OperandLayout`` (or a
    dtype name: K-major). K-major A is row-major ``M x K`` and K-major B is
    given as ``N x K``; MN-major operands (``M x K`` stored K x M, B given
    ``K x N``) are read transposed, which the PTX ISA allows for 16-bit
    types only."""

    M = 64

    def __init__(self, n, a="bf16", b=None):
        if not isinstance(n, int) or not 8 <= n <= WGMMA_N_MAX or n % 8:
            raise ValueError(f"wgmma N must be a multiple of 8 in 8..{WGMMA_N_MAX}, got {n!r}")
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
        self.dtype_b = b_dtype
        self.a_type = getattr(nvvm.WGMMATypes, DTYPES[a_dtype][2])
        self.b_type = getattr(nvvm.WGMMATypes, DTYPES[b_dtype][2])
        self.b_major = b_major
        # A: row = K-major (M x K), col = transposed. B: col = K-major (N x K),
        # row = MN-major (given K x N, attention's V).
        self.layout_a = nvvm.MMALayout.row if a_major == "K" else nvvm.MMALayout.col
        self.layout_b = nvvm.MMALayout.col if b_major == "K" else nvvm.MMALayout.row
        self.k = K_BYTES_PER_INSTRUCTION // a_bytes

    def accumulator(self):
        """A zeroed ``m64 x n`` f32 :class:`Fragment`."""
        return Fragment(self.n)

    def _check_acc(self, acc):
        if not isinstance(acc, Fragment) or acc.n != self.n:
            raise TypeError(f"wgmma m64n{self.n}: the accumulator must be a Fragment of "
                            f"n={self.n}, got {acc!r}")

    @user_line
    def mma(self, acc, desc_a, desc_b, accumulate=True):
        """``acc += A x B`` for one k-slice, A and B in shared memory
        (asynchronous: the result is defined once :func:`wait_group`
        retired this instruction's group). ``accumulate=False``: ``acc = A x
        B`` (the wgmma's scale-d is 0; acc's old values are not read)."""
        self._check_acc(acc)
        shape = ir.Attribute.parse(f"#nvvm.shape<m = 64, n = {self.n}, k = {self.k}>")
        scale = nvvm.WGMMAScaleOut.one if accumulate else nvvm.WGMMAScaleOut.zero
        acc._set_struct(nvvm.wgmma_mma_async(
            acc.type, acc.ir_value, desc_a, desc_b, shape,
            self.a_type, self.b_type, nvvm.WGMMATypes.f32,
            scale, nvvm.WGMMAScaleIn.one, nvvm.WGMMAScaleIn.one,
            self.layout_a, self.layout_b))

    @user_line
    def mma_rs(self, acc, a, desc_b, accumulate=True):
        """``acc += A x B`` for one k-slice with A in registers (``a``: the
        four i32 registers of one slice of an :class:`OperandA`, e.g.
        ``p.slice(j)``) and B in shared memory.

        Upstream's ``nvvm.wgmma.mma_async`` takes A only as a shared-memory
        descriptor, so this one instruction is an ``llvm.inline_asm`` (PTX
        ISA "wgmma.mma_async", register-A form; see :func:`_mma_rs_asm`).
        The registers of ``a`` must not be overwritten before
        :func:`wait_group` retires this instruction's group (the PTX rule for
        register operands of an asynchronous wgmma)."""
        self._check_acc(acc)
        if isinstance(a, OperandA):
            raise TypeError("mma_rs takes one k-slice: a.slice(j), not the whole OperandA")
        if len(a) != 4:
            raise ValueError(f"mma_rs: a k-slice of A is 4 i32 registers, got {len(a)}")
        acc._set_struct(_mma_rs_asm(self, acc, list(a), desc_b, accumulate))


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


def _mma_rs_asm(mma, acc, a_regs, desc_b, accumulate):
    """``wgmma.mma_async.sync.aligned.m64nNkK.f32.A.B`` with A in registers,
    as one ``llvm.inline_asm``: outputs ``$0..$(n/2-1)`` are the accumulator
    (tied to the inputs of the same index), then the four A registers, the B
    descriptor and the scale-d flag, turned into the predicate the
    instruction takes. The immediates are scale-a = scale-b = 1 and, for
    16-bit types, trans-b (1 for an MN-major B); 8-bit types (k32) have no
    trans-b (their B is K-major)."""
    count = acc.count
    dtype = {"bf16": "bf16", "f16": "f16", "e4m3": "e4m3", "e5m2": "e5m2"}.get(mma.dtype)
    if dtype is None:
        raise ValueError(f"mma_rs: register A supports bf16/f16/e4m3/e5m2 here, "
                         f"got {mma.dtype!r}")
    outs = ", ".join(f"${i}" for i in range(count))
    a0 = 2 * count       # operands $count..$2count-1 are the tied inputs
    a_ops = ", ".join(f"${a0 + j}" for j in range(4))
    desc, scale = f"${a0 + 4}", f"${a0 + 5}"
    if DTYPES[mma.dtype][0] == 1:
        # 8-bit: k32, B K-major only, so the PTX form has no imm-trans-b.
        b_type = DTYPES[mma.dtype_b][2]
        tail = "p, 1, 1"
    else:
        b_type = dtype
        tail = f"p, 1, 1, {0 if mma.b_major == 'K' else 1}"
    text = ("{\n.reg .pred p;\n"
            f"setp.ne.b32 p, {scale}, 0;\n"
            f"wgmma.mma_async.sync.aligned.m64n{mma.n}k{mma.k}.f32.{dtype}.{b_type} "
            f"{{{outs}}}, {{{a_ops}}}, {desc}, {tail};\n}}\n")
    constraints = ",".join(["=f"] * count + [str(i) for i in range(count)] +
                           ["r"] * 4 + ["l", "n"])
    values = list(acc.values) + a_regs + [desc_b,
                                          arith.constant(i32(), 1 if accumulate else 0)]
    return llvm.inline_asm(acc.type, values, text, constraints, has_side_effects=True)
