"""Stage: the backward's epilogue, dK and dV written over the K and V tiles
and stored by TMA (``DkvEpilogue``), and where a warpgroup's tiles go
(``dkv_row``, ``dkv_column``).
"""

from pipeline_mlir.chip_limits import WGMMA_M
from pipeline_mlir.kernel import epilogue, fence_view_async_shared
from pipeline_mlir.kernel.warpgroup import THREADS_PER_WARPGROUP
from pipeline_mlir.pipeline import NamedBarrier, PipelineTmaStore

from .config import EPILOGUE_BARRIER


class DkvEpilogue:
    """dK (scaled) and dV written over the K and V tiles and stored by TMA.
    The other warpgroup's GEMMs may still read K and V, which the tiles of
    dK and dV overlap (this warpgroup's 64 x d tile covers the first
    columns of all 128 key rows; at d 256 its 64 x 128 tile is the boxes of
    its columns, which the other warpgroup's S^T and dP^T read): each
    warpgroup released 'kv', and the barrier over both orders the writes
    after the other's reads."""

    def __init__(self, k, cfg, rings, sched, args, cw, warp_in_wg, lane, leader, wg_sync):
        self.k, self.cfg, self.sched, self.args, self.cw = k, cfg, sched, args, cw
        self.warp_in_wg, self.lane, self.leader, self.wg_sync = warp_in_wg, lane, leader, wg_sync
        self.out_store = PipelineTmaStore.create(num_stages=1, producer_group=rings.one,
                                                 name="dkv")

    def both_released(self):
        """Wait until both consumer warpgroups are past their last GEMM."""
        NamedBarrier(EPILOGUE_BARRIER, 2 * THREADS_PER_WARPGROUP).arrive_and_wait()

    def __call__(self, kv_tile, dv, dk):
        k, cfg, cw, args = self.k, self.cfg, self.cw, self.args
        dkv_layout = cfg.dkv_layout()
        kv_bytes = cfg.kv_layout().bytes
        self.both_released()
        k_out = kv_tile + cw * dkv_layout.bytes
        v_out = kv_tile + kv_bytes + cw * dkv_layout.bytes
        epilogue.store_fragment(dv, v_out, self.warp_in_wg, self.lane, dkv_layout)
        epilogue.store_fragment(dk * args.scale, k_out, self.warp_in_wg, self.lane, dkv_layout)
        fence_view_async_shared()
        self.wg_sync.arrive_and_wait_w_index(cw)
        with k.if_(self.leader):
            self.out_store.producer_acquire()
            sched = self.sched
            row = dkv_row(cfg, sched.n_block, cw)
            for desc, tile in ((args.dk, k_out), (args.dv, v_out)):
                for col, off in dkv_layout.box_offsets():
                    self.out_store.tma_store(desc, [dkv_column(cfg, sched.h_kv, cw, col), row,
                                                    sched.b], tile + off)
            self.out_store.producer_commit()
            self.out_store.producer_tail()


def dkv_row(cfg, n_block, cw):
    """dK's and dV's first row of consumer ``cw``'s tile in key block
    ``n_block``: its 64 keys (with column parts, the CTA's)."""
    if cfg.column_parts == 1:
        return n_block * cfg.block_n + cw * WGMMA_M
    return n_block * cfg.block_n


def dkv_column(cfg, h_kv, cw, col):
    """dK's and dV's tensor column of column ``col`` of consumer ``cw``'s
    tile, K/V head ``h_kv`` (with column parts, within its columns)."""
    if cfg.column_parts == 1:
        return h_kv * cfg.head_dim + col
    return h_kv * cfg.head_dim + cw * cfg.part_cols + col
