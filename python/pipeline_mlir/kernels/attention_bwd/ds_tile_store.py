"""The bf16 dS^T tile's stores from the register A operand it was packed
into for the dK GEMM (``store_operand_a``), rather than from the fp32
fragment: the fp32 values need not stay live next to the packed ones; and
a warpgroup's half of a shared P^T or dS^T tile (``store_half``,
``split_scores``).
"""

import mlir.ir as ir
from mlir.dialects import arith, llvm

from pipeline_mlir.kernel.epilogue import CHUNK_BYTES, check_tile
from pipeline_mlir.user_location import user_line


@user_line
def store_operand_a(ops, smem, warp, lane, layout, box):
    """Write box ``box`` of the ``m64 x n`` 16-bit tile ``layout`` at
    ``smem`` (swizzled as a C tile, as ``epilogue.store_fragment`` writes
    it) from ``ops``, the same tile as a wgmma register A operand
    (``Fragment.to_operand_a``): its registers are the fragment's value
    pairs in order (k-slice ``s``, register ``r``: pair ``4 s + r``, i.e.
    column group ``j = p // 2``, row half ``p % 2``), each one 4-byte store
    where the fragment's pair lands."""
    n = len(ops) * ops.k_per_slice
    check_tile(layout, n, "store_operand_a")
    regs = [r for s in range(len(ops)) for r in ops.slice(s)]
    chunks = layout.atom_bytes // CHUNK_BYTES       # column groups per box row
    quad, pair = lane // 4, lane % 4
    row_base = (warp * 16 + quad) * layout.atom_bytes + pair * 2 * layout.element_bytes
    chunk_ptrs = [smem + (row_base + layout.swizzled_chunk(quad, c) * CHUNK_BYTES)
                  for c in range(chunks)]
    below = layout.swizzled_offset(8, 0)    # row r + 8: same swizzle, 8 rows on
    i32 = ir.IntegerType.get_signless(32)
    for j in range(box * chunks, (box + 1) * chunks):
        chunk = j % chunks
        for half in range(2):
            v = regs[2 * j + half]
            assert v.type == i32
            ptr = chunk_ptrs[chunk] + half * below if half else chunk_ptrs[chunk]
            llvm.store(v, ptr.ir_value)


@user_line
def store_half(frag, smem, warp, lane, layout, half):
    """Write ``frag`` (an ``m64 x n/2`` fp32 Fragment) as bf16 into columns
    ``n/2 * half ..`` (``half`` a runtime 0 or 1) of the ``m64 x n``
    16-bit tile ``layout`` at ``smem`` (one 128-byte box, swizzled as a C
    tile, as ``epilogue.store_fragment`` writes it): fragment column group
    ``j`` (8 columns, one 16-byte chunk) lands in chunk ``chunks/2 * half +
    j`` of its row, the swizzle XORing the row's line into it."""
    check_tile(layout, 2 * frag.n, "store_half")
    chunks = layout.atom_bytes // CHUNK_BYTES       # column groups per box row
    if layout.boxes != 1 or frag.n // 8 != chunks // 2:
        raise ValueError(f"store_half: {frag.n} columns are not half of {layout}'s one box")
    out_t = ir.BF16Type.get()
    pair_t = ir.VectorType.get([2], out_t)
    i32 = ir.IntegerType.get_signless(32)
    quad, pair = lane // 4, lane % 4
    row_base = (warp * 16 + quad) * layout.atom_bytes + pair * 2 * layout.element_bytes
    first = half * (chunks // 2)
    chunk_ptrs = [smem + (row_base + layout.swizzled_chunk(quad, first + c) * CHUNK_BYTES)
                  for c in range(chunks // 2)]
    below = layout.swizzled_offset(8, 0)    # row r + 8: same swizzle, 8 rows on
    for j in range(chunks // 2):
        for h in range(2):
            i = 4 * j + 2 * h
            v = llvm.mlir_undef(pair_t)
            v = llvm.insertelement(v, arith.truncf(out_t, frag.value(i)),
                                   arith.constant(i32, 0))
            v = llvm.insertelement(v, arith.truncf(out_t, frag.value(i + 1)),
                                   arith.constant(i32, 1))
            ptr = chunk_ptrs[j] + below if h else chunk_ptrs[j]
            llvm.store(v, ptr.ir_value)
