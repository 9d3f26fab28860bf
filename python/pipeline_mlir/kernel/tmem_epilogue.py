"""Epilogue from tensor memory: an fp32 accumulator row segment that
``tcgen05.ld.32x32b`` put in a thread's registers -> 16-bit values in a
swizzled shared-memory box (the C box's ``OperandLayout``) that one TMA store
writes out.

Why this shape: with ``32x32b`` each thread of the epilogue warpgroup holds
consecutive columns of *one* row (TMEM lane = row of D), so a segment of
one box row (64 columns with the 128-byte swizzle) is written as 16-byte
stores, chunk ``c`` of row ``r`` at chunk ``c ^ (r % 8)``. The 8 lanes of a
quarter-warp write 8 consecutive rows, whose chunks the swizzle spreads over
all 32 banks. TMA stores with the same swizzle undo it on the way out (the
Hopper epilogue in ``epilogue.py`` uses the same box layout).

The caller owns the ordering (see ``examples/blackwell_gemm.py``): the
buffer must be free (``PipelineTmaStore.producer_acquire``), the loads must
be complete (``tcgen05.wait::ld``), and every writer runs
``fence.proxy.async.shared::cta`` before the barrier that lets one thread
issue the TMA store.
"""

import mlir.ir as ir
from mlir.dialects import arith, llvm

from .epilogue import CHUNK_BYTES, _float_type
from .values import i32


def store_row_segment(bits, box, row, layout):
    """Write one box row of fp32 values (``bits``: the ``vector<Nxi32>`` of a
    ``tcgen05.ld...32x32b.xN``, ``N = layout.box_cols``) as ``layout.dtype``
    into row ``row`` (an i32 Scalar) of the box at ``box`` (an ``SmemPtr``)
    laid out as ``layout`` (the C box) says."""
    cols = layout.box_cols
    vt = bits.type if isinstance(bits.type, ir.VectorType) else None
    if vt is None or vt.shape != [cols] or vt.element_type != i32():
        raise ValueError(f"store_row_segment: bits must be a vector<{cols}xi32> "
                         f"(tcgen05.ld 32x32b.x{cols}), got {bits.type}")
    out_t = _float_type(layout.dtype)
    f32 = ir.F32Type.get()
    values = llvm.bitcast(ir.VectorType.get([cols], f32), bits)
    halves = arith.truncf(ir.VectorType.get([cols], out_t), values)
    per_chunk = CHUNK_BYTES // layout.element_bytes
    chunk_t = ir.VectorType.get([per_chunk], out_t)
    row_base = box + row * layout.atom_bytes
    for c in range(cols // per_chunk):
        piece = llvm.shufflevector(chunk_t, halves, halves,
                                   list(range(c * per_chunk, (c + 1) * per_chunk)))
        ptr = row_base + layout.swizzled_chunk(row, c) * CHUNK_BYTES
        llvm.store(piece, ptr.ir_value, alignment=CHUNK_BYTES)


__all__ = ["store_row_segment"]
