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
