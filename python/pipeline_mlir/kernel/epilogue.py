"""Epilogue: a warpgroup's fp32 accumulator -> 16-bit values in shared
memory, laid out as 128-byte-swizzled 64 x 64 boxes that one TMA store each
writes to global memory.

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

from .smem import SmemPtr
from .tma import SWIZZLE_BYTES
from .values import Scalar

BOX_COLS = 64                   # 16-bit elements in one 128-byte row
BOX_ROWS = 64                   # one wgmma M of rows
BOX_BYTES = BOX_ROWS * SWIZZLE_BYTES


def _float_type(dtype):
    if dtype == "bf16":
        return ir.BF16Type.get()
    if dtype == "f16":
        return ir.F16Type.get()
    raise ValueError(f"epilogue: output dtype must be 'bf16' or 'f16', got {dtype!r}")


def boxes(n):
    """Number of 64-column boxes in an ``n``-column fragment."""
    if n % BOX_COLS:
        raise ValueError(f"epilogue: the fragment's N ({n}) must be a multiple of {BOX_COLS}")
    return n // BOX_COLS


def store_fragment(acc, smem, warp, lane, dtype="bf16", box_range=None):
    """Write ``acc`` (an ``Accumulator`` of ``m64nN``) as ``dtype`` into
    ``smem``: ``N / 64`` boxes of 64 x 64, box ``b`` at ``smem + b * 8192``.
    With ``box_range`` (a ``range`` of box indices) only those boxes are
    written, the first one at ``smem`` (an epilogue in several passes
    through a smaller buffer).

    ``warp`` is the warp index inside the warpgroup and ``lane`` the lane
    (i32 Scalars)."""
    out_t = _float_type(dtype)
    pair_t = ir.VectorType.get([2], out_t)
    nboxes = boxes(acc.n)
    box_range = range(nboxes) if box_range is None else box_range
    if not box_range or box_range.start < 0 or box_range.stop > nboxes:
        raise ValueError(f"epilogue: box_range {box_range} is not inside 0..{nboxes}")
    quad, pair = lane // 4, lane % 4
    thread_base = (warp * 16 + quad) * SWIZZLE_BYTES + pair * 4
    # One pointer per 16-byte chunk column; everything else is an immediate.
    chunk_ptrs = [smem + (thread_base + ((quad ^ c) * 16)) for c in range(8)]
    for j in range(box_range.start * 8, box_range.stop * 8):
        box, chunk = divmod(j, 8)
        for half in range(2):
            i = 4 * j + 2 * half
            lo = arith.truncf(out_t, acc.value(i))
            hi = arith.truncf(out_t, acc.value(i + 1))
            v = llvm.mlir_undef(pair_t)
            v = llvm.insertelement(v, lo, arith.constant(ir.IntegerType.get_signless(32), 0))
            v = llvm.insertelement(v, hi, arith.constant(ir.IntegerType.get_signless(32), 1))
            offset = (box - box_range.start) * BOX_BYTES + half * 8 * SWIZZLE_BYTES
            ptr = chunk_ptrs[chunk] + offset if offset else chunk_ptrs[chunk]
            llvm.store(v, ptr.ir_value)
    return len(box_range)




def store_fragment_global(acc, c_ptr, row0, col0, m, n, warp, lane, dtype="bf16"):
    """Write ``acc`` straight from registers to a row-major ``m x n`` matrix
    at ``c_ptr`` (``!llvm.ptr<1>``), rows ``row0..row0+63`` and columns
    ``col0..col0+N-1``, skipping elements outside ``m x n`` (``n`` must be
    even). Simpler and slower than the TMA-store path: 4-byte stores, each
    predicated. Kept for the step-by-step table of docs/gemm.md."""
    from mlir.dialects import scf

    out_t = _float_type(dtype)
    pair_t = ir.VectorType.get([2], out_t)
    i32t = ir.IntegerType.get_signless(32)
    quad, pair = lane // 4, lane % 4
    col_base = col0 + pair * 2
    for half in range(2):
        row = row0 + warp * 16 + quad + half * 8
        row_ok = row < m
        # Byte offset of (row, col_base) in i64: rows * n can pass 2^31.
        base = (row.to(64) * n.to(64) + col_base.to(64)) * 2
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
                off = (base + 16 * j).ir_value
                p = llvm.getelementptr(c_ptr.type, c_ptr, [off], [-2147483648],
                                       ir.IntegerType.get_signless(8), 0)
                llvm.store(v, p)
                scf.YieldOp([])


__all__ = ["store_fragment", "store_fragment_global", "boxes", "BOX_COLS",
           "BOX_ROWS", "BOX_BYTES"]
