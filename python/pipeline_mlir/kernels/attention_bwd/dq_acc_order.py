"""dQ in the accumulator's order (``AttentionBwdConfig.dq_acc_order``,
FA4's dQ scheme on the ops we have): each consumer writes its fp32 dQ
fragment (``m64 x 64``) into its shared-memory tile in the wgmma
accumulator's own order, 16-byte stores without swizzle
(``store_fragment_acc_order``), and the reduce warp adds the tile's 16 KiB
with one TMA tensor reduce-add over a tensor map that views the flat fp32
accumulator as a 2-D ``[n / ACC_ROW, ACC_ROW]`` array with the unswizzled
box ``[TILE_ROWS, ACC_ROW]``: contiguous bytes, as a 1-D bulk reduce-add
would move them. The global accumulator holds one such 16 KiB block per
(batch, 64-row query tile, query head, 64-column group)
(``acc_tile_row``); the host un-permutes it while converting to bf16
(``ops/attention_bwd_host.dq_from_acc_order``).

The order (a tile's float of each fragment value, the tiles' order) is
``ops/attention_bwd_acc_order.ACC_ORDER``, which the host's un-permute and
the postprocess kernel read too. A thread's chunk is one 16-byte store of
one row (columns ``2p, 2p + 1, 2p + 8, 2p + 9`` of a 16-column group); the
8 threads of a quarter-warp write 128 contiguous bytes (one wavefront per
quarter-warp: no bank conflict), and the four lanes of a row's ``p`` fill
its 16 columns' 64 contiguous bytes.

With 80-query steps (dQ^T, ``m64 x n80``) the order is
``ACC_ORDER.for_block_m(80)``: 10 chunks a thread (its values ``4 j .. 4 j
+ 3``), 20 KiB tiles of 80 queries, 20 rows of the view; the reduce warp
adds them as one box the same way.
"""

import mlir.ir as ir
from mlir.dialects import llvm

from pipeline_mlir.kernel import Scalar
from pipeline_mlir.kernel.values import f32, to_value
from pipeline_mlir.ops.attention_bwd_acc_order import ACC_ORDER
from pipeline_mlir.user_location import user_line

# Columns of one consumer's tile in this order (DQ_CHUNK).
ACC_COLS = ACC_ORDER.tile
TILE_FLOATS = ACC_ORDER.tile_floats         # 4096: 16 KiB
# The 2-D view of the accumulator: rows of ACC_ROW floats (TMA's box side
# limit 256), a tile TILE_ROWS of them.
ACC_ROW = ACC_ORDER.row
TILE_ROWS = ACC_ORDER.tile_rows             # 16
CHUNK_FLOATS = ACC_ORDER.chunk_floats       # one 16-byte store
acc_order_float = ACC_ORDER.value_float
chunk_values = ACC_ORDER.chunk_values


def acc_order(cfg):
    """The accumulator's order of ``cfg``'s dQ tiles (transposed at 80
    queries)."""
    return ACC_ORDER.for_block_m(cfg.block_m)


@user_line
def store_fragment_acc_order(acc, smem, warp, lane, order=ACC_ORDER):
    """Write ``acc`` (``m64 x 64`` fp32, or with ``order.transposed`` dQ^T's
    ``m64 x n80``) into the tile at ``smem`` in the accumulator's order:
    8 (10) stores of 16 bytes per thread."""
    if acc.n != order.fragment_n:
        raise ValueError(f"store_fragment_acc_order: a {order.fragment_n}-column fragment, "
                         f"got n = {acc.n}")
    quad_t = ir.VectorType.get([CHUNK_FLOATS], f32())
    base = smem + (warp * 32 + lane) * (CHUNK_FLOATS * 4)   # chunk_float(t, 0) * 4
    for c in range(order.chunks):
        v = llvm.mlir_undef(quad_t)
        for e, i in enumerate(order.chunk_values(c)):
            v = llvm.insertelement(v, acc.value(i), to_value(Scalar(e)))
        ptr = base + order.chunk_float(0, c) * 4
        llvm.store(v, ptr.ir_value, alignment=16)


def acc_tile_row(cfg, b, heads, padded_q, h, m_block, cw):
    """The first row, in the ``[n / ACC_ROW, ACC_ROW]`` view, of consumer
    ``cw``'s tile of query block ``m_block``, head ``h``, batch entry ``b``:
    tile ``((b (padded_q / 64) + row / 64) heads + h) (d / 64) + group``
    (the output's order of batch, rows and heads, so that the host's
    un-permute merges batch with query tile, head with column group; 80
    for 64 with 80-query steps)."""
    from .dq_reduce import dq_row
    order = acc_order(cfg)
    groups = cfg.head_dim // ACC_COLS
    group = cw if cfg.dq_split else 0
    bm = b * (padded_q // order.queries) + dq_row(cfg, m_block, cw) // order.queries
    tile = order.tile_index(bm, heads, h, groups, group)
    return tile * order.tile_rows
