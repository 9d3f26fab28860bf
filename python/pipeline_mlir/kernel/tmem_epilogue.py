"""Epilogue from tensor memory: an fp32 accumulator row segment that
``tcgen05.ld.32x32b`` put in a thread's registers -> 16-bit values in a
128-byte-swizzled shared-memory box that one TMA store writes out.

Why this shape: with ``32x32b`` each thread of the epilogue warpgroup holds
consecutive columns of *one* row (TMEM lane = row of D), so a 64-column
segment is exactly one 128-byte swizzle row of 16-bit values: 8 stores of 16
bytes, chunk ``c`` of row ``r`` at chunk ``c ^ (r % 8)``. The 8 lanes of a
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

from .epilogue import _float_type
from .tma import SWIZZLE_BYTES
from .values import i32

SEGMENT_COLUMNS = 64            # one 128-byte row of 16-bit values
CHUNK_ELEMENTS = 8              # 16 bytes of 16-bit values


def store_row_segment(bits, box, row, dtype="bf16"):
    """Write 64 fp32 values (``bits``: the ``vector<64xi32>`` of a
    ``tcgen05.ld...32x32b.x64``) as ``dtype`` into row ``row`` (an i32
    Scalar) of the 128-byte-swizzled box at ``box`` (an ``SmemPtr``)."""
    vt = bits.type if isinstance(bits.type, ir.VectorType) else None
    if vt is None or vt.shape != [SEGMENT_COLUMNS] or vt.element_type != i32():
        raise ValueError(f"store_row_segment: bits must be a vector<{SEGMENT_COLUMNS}xi32> "
                         f"(tcgen05.ld 32x32b.x{SEGMENT_COLUMNS}), got {bits.type}")
    out_t = _float_type(dtype)
    f32 = ir.F32Type.get()
    values = llvm.bitcast(ir.VectorType.get([SEGMENT_COLUMNS], f32), bits)
    halves = arith.truncf(ir.VectorType.get([SEGMENT_COLUMNS], out_t), values)
    chunk_t = ir.VectorType.get([CHUNK_ELEMENTS], out_t)
    row_base = box + row * SWIZZLE_BYTES
    swz = row % 8
    for c in range(SEGMENT_COLUMNS // CHUNK_ELEMENTS):
        piece = llvm.shufflevector(chunk_t, halves, halves,
                                   list(range(c * CHUNK_ELEMENTS, (c + 1) * CHUNK_ELEMENTS)))
        ptr = row_base + (swz ^ c) * 16
        llvm.store(piece, ptr.ir_value, alignment=16)


__all__ = ["store_row_segment", "SEGMENT_COLUMNS"]
