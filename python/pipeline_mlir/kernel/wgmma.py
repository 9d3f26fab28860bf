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

from .fragment import Fragment, OperandA
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


# The accumulator of a warpgroup MMA is a register Fragment (kernel/fragment.py).
Accumulator = Fragment


class WarpgroupMma:
    """``wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{dtype}.{dtype}`` with A
    and B K-major in shared memory (``A`` row-major ``M x K``, ``B`` given
    as ``N x K``)."""

    M = 64

    def __init__(self, n, dtype="bf16", b_major="K"):
        if not isinstance(n, int) or not 8 <= n <= 256 or n % 8:
            raise ValueError(f"wgmma N must be a multiple of 8 in 8..256, got {n!r}")
        self.n = n
        self.dtype = dtype
        self.operand_type, self.element_bytes = _element(dtype, "WarpgroupMma")
        self.k = K_PER_INSTRUCTION
        # B K-major (given N x K) is "col"; MN-major B (V of attention) "row".
        self.b_major = b_major
        if b_major not in ("K", "MN"):
            raise ValueError(f"WarpgroupMma: b_major must be 'K' or 'MN', got {b_major!r}")
        self.layout_b = nvvm.MMALayout.col if b_major == "K" else nvvm.MMALayout.row

    def accumulator(self):
        """A zeroed ``m64 x n`` f32 :class:`Fragment`."""
        return Fragment(self.n)

    def _check_acc(self, acc):
        if not isinstance(acc, Fragment) or acc.n != self.n:
            raise TypeError(f"wgmma m64n{self.n}: the accumulator must be a Fragment of "
                            f"n={self.n}, got {acc!r}")

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
            self.operand_type, self.operand_type, nvvm.WGMMATypes.f32,
            scale, nvvm.WGMMAScaleIn.one, nvvm.WGMMAScaleIn.one,
            nvvm.MMALayout.row, self.layout_b))

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


def _mma_rs_asm(mma, acc, a_regs, desc_b, accumulate):
    """``wgmma.mma_async.sync.aligned.m64nNk16.f32.T.T`` with A in registers,
    as one ``llvm.inline_asm``: outputs ``$0..$(n/2-1)`` are the accumulator
    (tied to the inputs of the same index), then the four A registers, the B
    descriptor and the scale-d flag, turned into the predicate the
    instruction takes. The immediates are scale-a = scale-b = 1 and
    trans-b (1 for an MN-major B)."""
    count = acc.count
    dtype = {"bf16": "bf16", "f16": "f16"}.get(mma.dtype)
    if dtype is None:
        raise ValueError(f"mma_rs: register A supports bf16/f16 here, got {mma.dtype!r}")
    outs = ", ".join(f"${i}" for i in range(count))
    a0 = 2 * count       # operands $count..$2count-1 are the tied inputs
    a_ops = ", ".join(f"${a0 + j}" for j in range(4))
    desc, scale = f"${a0 + 4}", f"${a0 + 5}"
    trans_b = 0 if mma.b_major == "K" else 1
    text = ("{\n.reg .pred p;\n"
            f"setp.ne.b32 p, {scale}, 0;\n"
            f"wgmma.mma_async.sync.aligned.m64n{mma.n}k16.f32.{dtype}.{dtype} "
            f"{{{outs}}}, {{{a_ops}}}, {desc}, p, 1, 1, {trans_b};\n}}\n")
    constraints = ",".join(["=f"] * count + [str(i) for i in range(count)] +
                           ["r"] * 4 + ["l", "n"])
    values = list(acc.values) + a_regs + [desc_b,
                                          arith.constant(i32(), 1 if accumulate else 0)]
    return llvm.inline_asm(acc.type, values, text, constraints, has_side_effects=True)
