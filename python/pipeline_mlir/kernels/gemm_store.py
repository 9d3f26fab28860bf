"""The Hopper GEMM's stores of a finished tile: the TMA-store epilogue
through the swizzled C buffer, pass by pass (``store_tile``, the fused
epilogue applied per pass), and split-K's fp32 partial tile straight from
registers into its workspace slice (``store_partial_global``). Used by
``kernels/hopper_gemm.py`` (which re-exports them) and the ping-pong
consumers.
"""

import mlir.ir as ir
from mlir.dialects import arith, llvm

from pipeline_mlir.kernel import epilogue, fence_view_async_shared


def store_tile(k, cfg, out, ctx, store, epi_sync, c_buf, desc_c, c_tile, row0, n_blk, cw,
               warp_in_wg, lane, leader):
    """The TMA-store epilogue of one whole tile: per pass, the fused
    epilogue, then the pass's columns into the swizzled C buffer and TMA
    stores of its boxes."""
    per_pass = cfg.pass_boxes
    tile = c_buf + cw * (per_pass * c_tile.box_bytes)
    for p in range(cfg.epilogue_passes):
        boxes = range(p * per_pass, min((p + 1) * per_pass, c_tile.boxes))
        # The fused epilogue once per pass: the pass stores only its
        # columns, so LLVM drops the other columns' loads and math, and
        # a pass holds its share of the residual in registers, not the
        # whole tile's (a 128x256 tile's would not fit beside the
        # accumulator). Before the waits below, so that its bias and
        # residual loads are in flight while the previous TMA stores
        # drain (the loads read other columns than those stores write).
        values = cfg.epilogue.apply(out, ctx) if ctx is not None else out
        # The previous TMA stores must have read the buffer.
        with k.if_(leader):
            store.producer_acquire()
        epi_sync.arrive_and_wait_w_index(cw)
        epilogue.store_fragment(values, tile, warp_in_wg, lane, c_tile, box_range=boxes)
        # Generic-proxy writes -> visible to TMA (async proxy).
        fence_view_async_shared()
        epi_sync.arrive_and_wait_w_index(cw)
        with k.if_(leader):
            offsets = c_tile.box_offsets()
            for box in boxes:
                col, smem = offsets[box]
                store.tma_store(desc_c, c_tile.coords(row0, n_blk * cfg.block_n + col),
                                tile + (smem - offsets[boxes.start][1]))
            store.producer_commit()


def store_partial_global(acc, ws_ptr, row0, col0, m, n, split, warp, lane):
    """Split-K: write the fp32 accumulator ``acc`` (``m64nN``) into slice
    ``split`` of the row-major (S, m, n) fp32 workspace at ``ws_ptr``, rows
    ``row0..row0+63`` and columns ``col0..``, skipping elements outside
    ``m x n`` (``n`` a multiple of 8, so a thread's column pair is all in or
    all out). One 8-byte store per value pair: each quad of lanes writes 32
    contiguous bytes of a row, whole sectors; the partials are read once,
    by the reduction, so they need no swizzled TMA store."""
    from mlir.dialects import scf

    f32 = ir.F32Type.get()
    pair_t = ir.VectorType.get([2], f32)
    i32t = ir.IntegerType.get_signless(32)
    quad, pair = lane // 4, lane % 4
    col_base = col0 + pair * 2
    for half in range(2):
        row = row0 + warp * 16 + quad + half * 8
        row_ok = row < m
        # i64 byte offset: split * m * n can pass 2^31 elements.
        base = ((split.to(64) * m.to(64) + row.to(64)) * n.to(64) + col_base.to(64)) * 4
        for j in range(acc.n // 8):
            i = 4 * j + 2 * half
            v = llvm.mlir_undef(pair_t)
            v = llvm.insertelement(v, acc.value(i), arith.constant(i32t, 0))
            v = llvm.insertelement(v, acc.value(i + 1), arith.constant(i32t, 1))
            ok = row_ok & (col_base + 8 * j < n)
            branch = scf.IfOp(ok.ir_value, [], has_else=False)
            with ir.InsertionPoint(branch.then_block):
                off = (base + 8 * 4 * j).ir_value
                p = llvm.getelementptr(ws_ptr.type, ws_ptr, [off], [-2147483648],
                                       ir.IntegerType.get_signless(8), 0)
                llvm.store(v, p, alignment=8)
                scf.YieldOp([])
