"""Tensor memory (TMEM) on sm_100: the accumulator store of ``tcgen05.mma``.

TMEM is a per-CTA 128-lane x 512-column array of 32-bit cells, separate from
shared memory. It is allocated at run time, in columns, by one whole warp:

- :func:`alloc`: ``tcgen05.alloc`` writes the allocated TMEM address (lane 0,
  the first column) into a 4-byte slot of *shared* memory, so the other warps
  read it from there (:func:`load_address`) after a CTA-wide barrier;
- :func:`relinquish_alloc_permit`: after its last alloc the CTA gives up the
  right to allocate, so a co-resident CTA waiting in ``tcgen05.alloc`` may go
  ahead (CuTe DSL and CUTLASS do it right after the alloc);
- :func:`dealloc`: gives the columns back; every ``tcgen05`` access to them
  must have completed (the epilogue's ``tcgen05.wait::ld``) and be ordered
  before it by a barrier (``tcgen05.fence::before_thread_sync`` on the reading
  side, ``after_thread_sync`` on the deallocating side).

With ``cta_group=2`` one warp in *each* CTA of the pair executes the alloc and
the dealloc together, and both CTAs get the same address (the pair's MMA
writes the same columns in both).

A TMEM address is ``(lane << 16) | column`` held in an ``!llvm.ptr<6>`` (the
tensor-memory address space of the NVVM ops); :func:`offset` moves it.
"""

import mlir.ir as ir
from mlir.dialects import arith, llvm, nvvm

from ..user_location import user_line
from .smem import SmemPtr
from .values import Scalar, i32, to_value

LANES = 128
COLUMNS = 512
MIN_COLUMNS = 32
HOLDER_BYTES = 4                 # the shared-memory slot tcgen05.alloc writes
TMEM_ADDRESS_SPACE = 6


def tmem_ptr_type():
    return llvm.PointerType.get(TMEM_ADDRESS_SPACE)


def _group(cta_group, what):
    if cta_group not in (1, 2):
        raise ValueError(f"{what}: cta_group must be 1 or 2, got {cta_group!r}")
    return nvvm.CTAGroupKind.CTA_1 if cta_group == 1 else nvvm.CTAGroupKind.CTA_2


def check_columns(columns, what="tmem"):
    """Allocations are a power of two of columns in 32..512."""
    if (not isinstance(columns, int) or columns < MIN_COLUMNS or
            columns > COLUMNS or columns & (columns - 1)):
        raise ValueError(f"{what}: columns must be a power of two in "
                         f"{MIN_COLUMNS}..{COLUMNS}, got {columns!r}")
    return columns


def _holder(holder, what):
    if not isinstance(holder, SmemPtr):
        raise TypeError(f"{what}: holder must be an SmemPtr (a {HOLDER_BYTES}-byte "
                        f"shared-memory slot), got {type(holder).__name__}")
    return holder.ir_value


@user_line
def alloc(holder, columns, cta_group=1):
    """``tcgen05.alloc.cta_group::N.sync.aligned.shared::cta.b32 [holder],
    columns``: run by all 32 lanes of one warp (per CTA of the pair)."""
    what = "tmem.alloc"
    check_columns(columns, what)
    nvvm.tcgen05_alloc(_holder(holder, what), arith.constant(i32(), columns),
                       group=_group(cta_group, what))


@user_line
def relinquish_alloc_permit(cta_group=1):
    """``tcgen05.relinquish_alloc_permit``: no more allocs from this CTA."""
    nvvm.tcgen05_relinquish_alloc_permit(
        group=_group(cta_group, "tmem.relinquish_alloc_permit"))


@user_line
def dealloc(address, columns, cta_group=1):
    """``tcgen05.dealloc``: return ``columns`` columns at ``address`` (one
    warp, as for :func:`alloc`)."""
    what = "tmem.dealloc"
    check_columns(columns, what)
    nvvm.tcgen05_dealloc(_tmem(address, what), arith.constant(i32(), columns),
                         group=_group(cta_group, what))


def load_address(holder):
    """The TMEM address that :func:`alloc` wrote to ``holder``
    (``!llvm.ptr<6>``). Read it after a barrier that follows the alloc."""
    raw = llvm.load(i32(), _holder(holder, "tmem.load_address"))
    return llvm.inttoptr(tmem_ptr_type(), raw)


def _tmem(address, what):
    v = to_value(address, what=what)
    if v.type != tmem_ptr_type():
        raise TypeError(f"{what}: a TMEM address is an !llvm.ptr<6>, got {v.type}")
    return v


def offset(address, lane=0, column=0):
    """``address`` moved by ``lane`` lanes and ``column`` columns (ints or
    i32 Scalars): the address is ``(lane << 16) | column``."""
    what = "tmem.offset"
    if isinstance(lane, int) and not 0 <= lane < LANES:
        raise ValueError(f"{what}: lane must be in 0..{LANES - 1}, got {lane}")
    if isinstance(column, int) and not 0 <= column < COLUMNS:
        raise ValueError(f"{what}: column must be in 0..{COLUMNS - 1}, got {column}")
    if isinstance(lane, int) and isinstance(column, int) and lane == column == 0:
        return _tmem(address, what)
    raw = Scalar(llvm.ptrtoint(i32(), _tmem(address, what)))
    delta = (lane << 16) + column
    return llvm.inttoptr(tmem_ptr_type(), (raw + delta).ir_value)


__all__ = ["alloc", "relinquish_alloc_permit", "dealloc", "load_address", "offset",
           "check_columns", "tmem_ptr_type", "LANES", "COLUMNS", "HOLDER_BYTES"]
