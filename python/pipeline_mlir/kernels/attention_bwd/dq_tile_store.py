"""The fp32 dQ tile's stores from registers (``store_fragment_f32``), with
or without bank conflicts (``AttentionBwdConfig.dq_store_spread``), and
where each thread's pair goes (``f32_pair_offset``).
"""

import mlir.ir as ir
from mlir.dialects import llvm

from pipeline_mlir.kernel import Scalar
from pipeline_mlir.kernel.values import f32, to_value
from pipeline_mlir.user_location import user_line


def f32_pair_offset(layout, row, pair, j, spread=False):
    """(box, byte offset in the box) where the thread holding column pair
    ``pair`` of row ``row`` of an ``m64 x n`` fragment stores at its
    ``j``-th store into the fp32 tile ``layout`` (ints or i32 Scalars): its
    pair ``j`` (columns ``8 j + 2 pair ..``); with ``spread``, on odd rows
    its pair ``j ^ 2`` (``store_fragment_f32``)."""
    box, in_box = divmod(8 * j, layout.box_cols)
    offset = row * layout.atom_bytes + (in_box * 4 + pair * 8)
    if spread:
        offset = offset ^ ((row & 1) * 64)     # pair j ^ 2: 16 columns over, same box
    return box, offset ^ ((row & 7) << 4)


@user_line
def store_fragment_f32(acc, smem, warp, lane, layout, first_box=0, spread=False):
    """Write ``acc`` (``m64 x n`` fp32) into boxes ``first_box ..`` of the
    fp32 tile ``layout`` at ``smem`` (swizzled as TMA reads it): one 8-byte
    store per pair of adjacent columns. With the 128-byte swizzle the eight
    rows a warp writes at once land in different 16-byte chunks, but a
    64-bit store is carried out a half-warp (4 rows) at a time, and rows 2i
    and 2i + 1 map a column pair onto the same two chunks: each half fills
    4 of the 8 chunks twice. ``spread``: lanes of odd rows store their pair
    ``j ^ 2`` (64 bytes over, same box) where the even rows store pair
    ``j``, so each half covers all 8 chunks once (one select per value)."""
    from mlir.dialects import arith

    pair_t = ir.VectorType.get([2], f32())
    quad, pair = lane // 4, lane % 4
    row = warp * 16 + quad
    if spread:
        if layout.box_cols != 32 or acc.n % 32:
            raise ValueError("store_fragment_f32: spread needs 32-column boxes filled "
                             f"whole, got {layout.box_cols}-column boxes and n = {acc.n}")
        odd = (quad & 1) == 1                  # rows 16 w + quad (+ 8): same parity
    for j in range(acc.n // 8):
        for half in range(2):
            r = row + 8 * half
            box, swizzled = f32_pair_offset(layout, r, pair, j, spread)
            i = 4 * j + 2 * half
            lo, hi = acc.value(i), acc.value(i + 1)
            if spread:
                other = 4 * (j ^ 2) + 2 * half
                lo = arith.select(odd.ir_value, acc.value(other), lo)
                hi = arith.select(odd.ir_value, acc.value(other + 1), hi)
            v = llvm.mlir_undef(pair_t)
            v = llvm.insertelement(v, lo, to_value(Scalar(0)))
            v = llvm.insertelement(v, hi, to_value(Scalar(1)))
            ptr = smem + ((first_box + box) * layout.box_bytes) + swizzled
            llvm.store(v, ptr.ir_value)


def transposed_offset(layout, row, col):
    """Byte offset in the fp32 tile ``layout`` (rows: queries, boxes of
    ``box_cols`` dQ columns, swizzled as TMA reads it) where value ``(row,
    col)`` of an ``m64 x n`` dQ^T fragment goes: tile row ``col`` (the
    query), tile column ``row`` (the dQ column). ``row``, ``col``: ints or
    i32 Scalars (``store_fragment_f32_transposed``)."""
    box, in_box = row // layout.box_cols, row % layout.box_cols
    return (box * layout.box_bytes + col * layout.atom_bytes
            + ((in_box * layout.element_bytes) ^ ((col & 7) << 4)))


@user_line
def store_fragment_f32_transposed(acc, smem, warp, lane, layout):
    """Write ``acc`` (``m64 x n`` fp32, dQ^T: rows the tile's 64 columns,
    columns its ``n`` rows) transposed into the fp32 tile ``layout`` at
    ``smem`` (``layout.rows == n``, 64 columns): one 4-byte store per
    value. A warp's store covers 4 query rows (``2 p + el``) x 8
    contiguous columns (``quad``): the swizzle puts the 4 rows' 32 bytes in
    different 16-byte chunk pairs, so no bank conflict. Four pointers a
    thread (row half ``eh``, column parity ``el``); column group ``j`` adds
    ``8 j`` rows of the tile, an immediate."""
    if layout.dtype != "f32" or layout.major != "K" or layout.rows != acc.n \
            or layout.cols != 64:
        raise ValueError(f"store_fragment_f32_transposed: an f32 {acc.n} x 64 tile, "
                         f"got {layout}")
    quad, pair = lane // 4, lane % 4
    row = warp * 16 + quad
    ptrs = {(eh, el): smem + transposed_offset(layout, row + 8 * eh, pair * 2 + el)
            for eh in range(2) for el in range(2)}
    for j in range(acc.n // 8):
        for eh in range(2):
            for el in range(2):
                v = acc.value(4 * j + 2 * eh + el)
                ptr = ptrs[(eh, el)] + (8 * j * layout.atom_bytes) if j else ptrs[(eh, el)]
                llvm.store(v, ptr.ir_value)
