"""Epilogue: a warpgroup's fp32 accumulator -> 16-bit values in shared
memory, laid out as the C tile's ``OperandLayout`` says (swizzled boxes of
64 rows that one TMA store each writes to global memory).

Why swizzled: thread ``(w, l)`` holds rows ``16 w + l / 4 (+ 8)`` and column
pairs ``8 j + 2 (l % 4)``; with plain 128-byte rows the 8 rows that a warp
writes at once would hit the same banks 8 times. With the 128-byte swizzle
row ``r``'s 16-byte chunk ``c`` sits at chunk ``c ^ (r % 8)``, so the 32
lanes of a store cover 32 distinct banks. TMA stores with the same swizzle
undo it on the way out.

The caller owns the ordering around it (see ``examples/hopper_gemm.py``):
the buffer must be free (the previous TMA stores finished reading it:
``PipelineTmaStore.producer_acquire``), and after the stores each thread
runs ``fence.proxy.async.shared::cta`` before the barrier that lets one
thread issue the TMA stores.
"""

import mlir.ir as ir
from mlir.dialects import arith, llvm

from ..layout import DTYPES, OperandLayout

# A 16-byte chunk of 16-bit values is 8 columns: one column group ``j`` of
# the wgmma accumulator (columns 8 j .. 8 j + 7).
CHUNK_BYTES = 16


OUT_DTYPES = ("bf16", "f16")


def _check_out_dtype(dtype):
    if dtype not in OUT_DTYPES:
        raise ValueError(f"epilogue: output dtype must be 'bf16' or 'f16', got {dtype!r}")


def _float_type(dtype):
    _check_out_dtype(dtype)
    return ir.BF16Type.get() if dtype == "bf16" else ir.F16Type.get()


def check_tile(layout, n, what="epilogue"):
    """``layout`` is a C tile that ``store_fragment`` can write from an
    ``m64nN`` accumulator: 64 rows, ``n`` columns of a 16-bit type, whole
    16-byte chunks per box row."""
    if not isinstance(layout, OperandLayout):
        raise TypeError(f"{what}: the C tile must be an OperandLayout, got "
                        f"{type(layout).__name__}")
    _check_out_dtype(layout.dtype)
    if layout.major != "K" or layout.rows != 64 or layout.cols != n:
        raise ValueError(f"{what}: the C tile must be 64 x {n} with its columns "
                         f"contiguous (major 'K'), got {layout}")


def store_fragment(acc, smem, warp, lane, layout, box_range=None):
    """Write ``acc`` (a ``Fragment`` of ``m64nN``) into ``smem`` as the
    C tile ``layout`` (64 x N, 16-bit) says: box ``b`` at ``smem + b *
    layout.box_bytes``. With ``box_range`` (a ``range`` of box indices) only
    those boxes are written, the first one at ``smem`` (an epilogue in
    several passes through a smaller buffer).

    ``warp`` is the warp index inside the warpgroup and ``lane`` the lane
    (i32 Scalars)."""
    check_tile(layout, acc.n)
    out_t = _float_type(layout.dtype)
    pair_t = ir.VectorType.get([2], out_t)
    nboxes = layout.boxes
    box_range = range(nboxes) if box_range is None else box_range
    if not box_range or box_range.start < 0 or box_range.stop > nboxes:
        raise ValueError(f"epilogue: box_range {box_range} is not inside 0..{nboxes}")
    chunks = layout.atom_bytes // CHUNK_BYTES       # column groups per box row
    quad, pair = lane // 4, lane % 4
    # Row 16 w + quad of the box (and row + 8 below it), whose swizzle is
    # that of row `quad`: it depends on the row modulo 8 only. The thread's
    # values are a pair of columns.
    row_base = (warp * 16 + quad) * layout.atom_bytes + pair * 2 * layout.element_bytes
    # One pointer per 16-byte chunk column; everything else is an immediate.
    chunk_ptrs = [smem + (row_base + layout.swizzled_chunk(quad, c) * CHUNK_BYTES)
                  for c in range(chunks)]
    below = layout.swizzled_offset(8, 0)    # row r + 8: same swizzle, 8 rows on
    for j in range(box_range.start * chunks, box_range.stop * chunks):
        box, chunk = divmod(j, chunks)
        for half in range(2):
            i = 4 * j + 2 * half
            lo = arith.truncf(out_t, acc.value(i))
            hi = arith.truncf(out_t, acc.value(i + 1))
            v = llvm.mlir_undef(pair_t)
            v = llvm.insertelement(v, lo, arith.constant(ir.IntegerType.get_signless(32), 0))
            v = llvm.insertelement(v, hi, arith.constant(ir.IntegerType.get_signless(32), 1))
            offset = (box - box_range.start) * layout.box_bytes + half * below
            ptr = chunk_ptrs[chunk] + offset if offset else chunk_ptrs[chunk]
            llvm.store(v, ptr.ir_value)
    return len(box_range)


def store_fragment_global(acc, c_ptr, row0, col0, m, n, warp, lane, dtype="bf16"):
    """Write ``acc`` straight from registers to a row-major ``m x n`` matrix
    of ``dtype`` at ``c_ptr``
    (``!llvm.ptr<1>``), rows ``row0..row0+63`` and columns ``col0..col0+N-1``,
    skipping elements outside ``m x n`` (``n`` must be even). Simpler and
    slower than the TMA-store path: one store per value pair, each
    predicated. Kept for the step-by-step table of docs/gemm.md."""
    from mlir.dialects import scf

    out_t = _float_type(dtype)
    elem = DTYPES[dtype][0]
    pair_t = ir.VectorType.get([2], out_t)
    i32t = ir.IntegerType.get_signless(32)
    quad, pair = lane // 4, lane % 4
    col_base = col0 + pair * 2
    for half in range(2):
        row = row0 + warp * 16 + quad + half * 8
        row_ok = row < m
        # Byte offset of (row, col_base) in i64: rows * n can pass 2^31.
        base = (row.to(64) * n.to(64) + col_base.to(64)) * elem
        for j in range(acc.n // 8):
            i = 4 * j + 2 * half
            lo = arith.truncf(out_t, acc.value(i))
            hi = arith.truncf(out_t, acc.value(i + 1))
            v = llvm.mlir_undef(pair_t)
            v = llvm.insertelement(v, lo, arith.constant(i32t, 0))
            v = llvm.insertelement(v, hi, arith.constant(i32t, 1))
            ok = row_ok & (col_base + 8 * j < n)
            branch = scf.IfOp(ok.ir_value, [], has_else=False)
            with ir.InsertionPoint(branch.then_block):
                off = (base + 8 * elem * j).ir_value
                p = llvm.getelementptr(c_ptr.type, c_ptr, [off], [-2147483648],
                                       ir.IntegerType.get_signless(8), 0)
                llvm.store(v, p)
                scf.YieldOp([])


__all__ = ["store_fragment", "store_fragment_global", "check_tile"]
