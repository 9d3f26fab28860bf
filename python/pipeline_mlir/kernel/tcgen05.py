"""Blackwell (sm_100a) fifth-generation tensor cores: ``tcgen05.mma`` with
operands in shared memory and the accumulator in tensor memory, ``tcgen05.ld``
for the epilogue, and the tcgen05 fences and waits.

Pieces, each one upstream NVVM op or a compile-time constant:

- :func:`instruction_descriptor`: the 32-bit instruction descriptor of
  ``.kind::f16`` (bf16/fp16 in, fp32 accumulate, K-major A and B, dense),
  a Python int (PTX ISA, "Instruction descriptor format for .kind::f16");
- :func:`smem_descriptor`: the 64-bit shared-memory descriptor of a K-major
  tile as its ``OperandLayout`` says TMA wrote it
  (``nvvm.tcgen05.mma_smem_desc``); select a K slice with
  :func:`k_slice_descriptor`;
- :class:`Mma`: one ``tcgen05.mma.cta_group::{1,2}.kind::f16`` shape; its
  ``mma`` is issued by *one* thread (the caller elects it) and completes
  asynchronously: a ``tcgen05.commit`` (what ``PipelineTmaUmma.
  consumer_release`` and ``PipelineUmmaAsync.producer_commit`` emit) arrives
  on an mbarrier once every earlier MMA of that thread is done;
- :func:`load_32x32b`: ``tcgen05.ld.sync.aligned.32x32b.xN`` -- lane ``l`` of
  warp ``w`` gets ``N`` consecutive columns of TMEM lane ``32 (w % 4) + l``;
  :func:`wait_load` (``tcgen05.wait::ld``) before the registers are used;
- :func:`fence_before_thread_sync` / :func:`fence_after_thread_sync`: order
  tcgen05 operations across a barrier (an mbarrier wait, a named barrier):
  "before" on the side that signals, "after" on the side that waited.

Shared-memory descriptor (PTX ISA, "Shared memory descriptor" of tcgen05):
bits 0-13 start address >> 4; 16-29 leading-dimension byte offset >> 4;
32-45 stride byte offset >> 4 (both as for wgmma: the layout's
``leading_byte_offset`` / ``stride_byte_offset``); **46-48 the fixed version
0b001**; 49-51 base offset; 52 leading-dimension mode; **61-63 swizzle mode,
2 = 128-byte** (:data:`SWIZZLE_CODES`). Hopper's wgmma descriptor has no
version field and puts the 128-byte swizzle as 1 in bits 62-63, so the two
are not interchangeable.
"""

import mlir.ir as ir
from mlir.dialects import arith, llvm, nvvm

from ..user_location import user_line
from . import tmem
from .smem import SmemPtr
from .values import i1, i32, to_value
from ..layout import DTYPES, K_BYTES_PER_INSTRUCTION, OperandLayout, descriptor_units
from .wgmma import advance_descriptor, k_slice_descriptor, smem_address  # noqa: F401

# Operand type name -> instruction descriptor code (kind::f16 table).
OPERAND_CODES = {"f16": 0, "bf16": 1}
ACCUMULATOR_F32 = 1
# Swizzle span in bytes -> tcgen05 descriptor swizzle code (bits 61-63).
SWIZZLE_CODES = {0: 0, 128: 2, 64: 4, 32: 6}
DESCRIPTOR_VERSION = 1           # bits 46-48 (set by the op itself)
LOAD_REPEATS = (1, 2, 4, 8, 16, 32, 64, 128)


def _valid_shapes(cta_group):
    """(M values, N rule) of dense kind::f16 MMA per CTA group."""
    if cta_group == 1:
        return (64, 128), lambda m, n: 8 <= n <= 256 and n % (8 if m == 64 else 16) == 0
    return (128, 256), lambda m, n: 32 <= n <= 256 and n % 16 == 0


def check_shape(m, n, cta_group, what="tcgen05"):
    if cta_group not in (1, 2):
        raise ValueError(f"{what}: cta_group must be 1 or 2, got {cta_group!r}")
    ms, n_ok = _valid_shapes(cta_group)
    if m not in ms:
        raise ValueError(f"{what}: M must be one of {ms} for cta_group::{cta_group}, "
                         f"got {m!r}")
    if not isinstance(n, int) or not n_ok(m, n):
        step = 8 if (cta_group == 1 and m == 64) else 16
        low = 8 if cta_group == 1 else 32
        raise ValueError(f"{what}: N must be a multiple of {step} in {low}..256 for "
                         f"M={m}, cta_group::{cta_group}, got {n!r}")


def instruction_descriptor(m, n, dtype="bf16", cta_group=1):
    """The ``idesc`` of ``tcgen05.mma...kind::f16`` for an ``m x n`` tile
    (``m`` is the pair's M with ``cta_group=2``), ``dtype`` A and B, fp32 D,
    both operands K-major, dense, no negation.

    Bits: 4-5 D type (1 = f32); 7-9 A type, 10-12 B type (0 = f16, 1 =
    bf16); 13/14 negate A/B; 15/16 transpose A/B (0 = K-major); 17-22 N >> 3;
    24-28 M >> 4."""
    if dtype not in OPERAND_CODES:
        raise ValueError(f"instruction_descriptor: dtype must be one of "
                         f"{sorted(OPERAND_CODES)}, got {dtype!r}")
    check_shape(m, n, cta_group, "instruction_descriptor")
    code = OPERAND_CODES[dtype]
    return ((ACCUMULATOR_F32 << 4) | (code << 7) | (code << 10)
            | ((n >> 3) << 17) | ((m >> 4) << 24))


def smem_descriptor(tile, layout):
    """Descriptor (i64) of the K-major tile at ``tile`` (an ``SmemPtr``,
    ``layout.alignment``-aligned) laid out as ``layout`` (an
    ``OperandLayout``) says."""
    if not isinstance(tile, SmemPtr):
        raise TypeError(f"smem_descriptor: tile must be an SmemPtr, got "
                        f"{type(tile).__name__}")
    if not isinstance(layout, OperandLayout) or layout.major != "K":
        raise ValueError(f"smem_descriptor: layout must be a K-major OperandLayout "
                         f"(kind::f16 here reads K-major operands), got {layout}")
    start = arith.shrui(smem_address(tile), arith.constant(i32(), 4))
    i8 = ir.IntegerType.get_signless(8)
    return nvvm.tcgen05_mma_smem_desc(
        ir.IntegerType.get_signless(64), start,
        arith.constant(i32(), descriptor_units(layout.leading_byte_offset)),
        arith.constant(i32(), descriptor_units(layout.stride_byte_offset)),
        arith.constant(i8, 0),                             # base offset
        arith.constant(i1(), 0),                           # relative LBO
        arith.constant(i8, SWIZZLE_CODES[layout.swizzle]))


class Mma:
    """``tcgen05.mma.cta_group::{cta_group}.kind::f16`` of an ``m x n x 16``
    step with A and B K-major in shared memory, D (fp32) in TMEM.

    With ``cta_group=2`` the instruction is issued by the pair's leader CTA
    and ``m`` is the pair's M (256): each CTA holds ``m / 2`` rows of A, half
    of B's ``n`` rows and ``m / 2`` lanes of D, at the same shared-memory and
    TMEM addresses."""

    def __init__(self, m, n, dtype="bf16", cta_group=1):
        check_shape(m, n, cta_group, "tcgen05.Mma")
        self.m, self.n, self.dtype, self.cta_group = m, n, dtype, cta_group
        self.k = K_BYTES_PER_INSTRUCTION // DTYPES[dtype][0]   # kind::f16: 16
        self.idesc = instruction_descriptor(m, n, dtype, cta_group)

    @property
    def accumulator_columns(self):
        """TMEM columns of one fp32 accumulator (one column per N)."""
        return self.n

    @user_line
    def mma(self, d, desc_a, desc_b, accumulate):
        """``D (+)= A x B``: ``accumulate`` is an i1 Scalar/value or a bool
        (False: overwrite D, the first k-step of a tile)."""
        if isinstance(accumulate, bool):
            acc = arith.constant(i1(), int(accumulate))
        else:
            acc = to_value(accumulate, i1(), what="tcgen05.Mma.mma: accumulate")
        group = (nvvm.CTAGroupKind.CTA_1 if self.cta_group == 1
                 else nvvm.CTAGroupKind.CTA_2)
        nvvm.tcgen05_mma(nvvm.Tcgen05MMAKind.F16, group,
                         tmem._tmem(d, "tcgen05.Mma.mma: d"),
                         to_value(desc_a, what="tcgen05.Mma.mma: desc_a"),
                         to_value(desc_b, what="tcgen05.Mma.mma: desc_b"),
                         arith.constant(i32(), self.idesc), acc)


@user_line
def load_32x32b(address, repeat):
    """``tcgen05.ld.sync.aligned.32x32b.x{repeat}.b32``: ``repeat`` columns
    starting at ``address`` (whose lane must be ``32 * (warp % 4)``) into a
    ``vector<repeat x i32>`` per thread. Follow with :func:`wait_load`."""
    if repeat not in LOAD_REPEATS:
        raise ValueError(f"load_32x32b: repeat must be one of {LOAD_REPEATS}, "
                         f"got {repeat!r}")
    t = ir.VectorType.get([repeat], i32()) if repeat > 1 else i32()
    return nvvm.tcgen05_ld(t, nvvm.Tcgen05LdStShape.SHAPE_32X32B,
                           tmem._tmem(address, "load_32x32b"))


@user_line
def wait_load():
    """``tcgen05.wait::ld.sync.aligned``: this thread's TMEM loads are done."""
    nvvm.tcgen05_wait(nvvm.Tcgen05WaitKind.LOAD)


@user_line
def wait_store():
    """``tcgen05.wait::st.sync.aligned``."""
    nvvm.tcgen05_wait(nvvm.Tcgen05WaitKind.STORE)


def fence_before_thread_sync():
    """``tcgen05.fence::before_thread_sync``: earlier tcgen05 operations are
    ordered before the barrier arrive that follows."""
    nvvm.tcgen05_fence(nvvm.Tcgen05FenceKind.BEFORE_THREAD_SYNC)


def fence_after_thread_sync():
    """``tcgen05.fence::after_thread_sync``: later tcgen05 operations are
    ordered after the barrier wait that precedes."""
    nvvm.tcgen05_fence(nvvm.Tcgen05FenceKind.AFTER_THREAD_SYNC)


__all__ = ["instruction_descriptor", "smem_descriptor", "advance_descriptor",
           "k_slice_descriptor", "SWIZZLE_CODES",
           "Mma", "load_32x32b", "wait_load", "wait_store",
           "fence_before_thread_sync", "fence_after_thread_sync", "check_shape"]
