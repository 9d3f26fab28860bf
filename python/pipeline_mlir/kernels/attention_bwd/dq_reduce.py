"""Stage: dQ added into the fp32 accumulator by TMA reduce-adds
(``DqReduce``), and where a warpgroup's dQ tile goes (``dq_column``).
"""

from mlir.dialects import nvvm

from pipeline_mlir.chip_limits import WGMMA_M
from pipeline_mlir.kernel import fence_view_async_shared
from pipeline_mlir.kernel.values import i32, to_value
from pipeline_mlir.pipeline import TmaStoreFence


def tma_reduce_add(desc, coords, src):
    """``cp.reduce.async.bulk.tensor.*.global.shared::cta.add.tile``: add the
    box at ``src`` into the tensor at ``coords`` (innermost first); it joins
    the thread's open bulk group, like a TMA store."""
    from pipeline_mlir.pipeline.emit import smem_pointer
    nvvm.CpAsyncBulkTensorReduceOp(
        to_value(desc, what="tma_reduce_add: desc"), smem_pointer(src, "tma_reduce_add: src"),
        nvvm.TMAReduxKind.ADD, [to_value(c, i32(), what="coordinate") for c in coords],
        mode=nvvm.TMAStoreMode.TILE)


class DqReduce:
    """This warpgroup's dQ tile added into the fp32 accumulator by TMA
    reduce-adds (``cp.reduce.async.bulk.tensor ... add``), one thread's
    bulk groups: a ``TmaStoreFence`` (commit / wait of bulk async-groups),
    since a reduce is no copy.tma_store of a ``PipelineTmaStore`` stage."""

    def __init__(self, k, cfg, sched, args, dq_tile, cw, leader, wg_sync):
        self.k, self.cfg, self.sched, self.args = k, cfg, sched, args
        # dq_tile(step): the step's tile (GradGemms.dq_tile).
        self.dq_tile, self.cw, self.leader, self.wg_sync = dq_tile, cw, leader, wg_sync
        # With two tiles a wait leaves the last reduce-add reading.
        self.groups = TmaStoreFence(num_stages=cfg.dq_buffers)

    def acquire(self):
        """The leader waits until the previous reduce-adds read the tile
        (the warpgroup's next barrier tells the others); with two tiles,
        all but the last one, which reads the other tile."""
        with self.k.if_(self.leader):
            self.groups.wait()

    def claim(self):
        """Nothing: ``acquire`` waited before the step's dS^T stores (the
        hand-off to a reduce warp waits here, ``DqHandOff.claim``)."""

    def issue(self, h, m_block, step=None):
        """Fence the generic writes of step ``step``'s dQ tile for TMA's
        proxy, let the leader know every warp wrote, and add the tile at
        query block ``m_block`` of head ``h``."""
        fence_view_async_shared()                # generic writes -> TMA's proxy
        self.reduce(h, m_block, step)

    def reduce(self, h, m_block, step=None):
        args, cfg = self.args, self.cfg
        self.wg_sync.arrive_and_wait_w_index(self.cw)
        with self.k.if_(self.leader):
            for col, off in cfg.dq_layout().box_offsets():
                tma_reduce_add(args.dq_accum, [dq_column(cfg, h, self.cw, col),
                                               dq_row(cfg, m_block, self.cw), self.sched.b],
                               self.dq_tile(step) + off)
            self.groups.arrive()

    def tail(self):
        """The last reduce-adds must finish reading before the CTA exits."""
        with self.k.if_(self.leader):
            self.groups.tail()


def dq_row(cfg, m_block, cw):
    """dQ's first row (query) of consumer ``cw``'s dQ tile in query block
    ``m_block``: the block's first, or with ``dq_rows`` its rows ``64 cw``."""
    if cfg.dq_rows:
        return m_block * cfg.block_m + cw * WGMMA_M
    return m_block * cfg.block_m


def dq_column(cfg, h, cw, col):
    """dQ's tensor column (in the host's (batch, seqlen, heads * d) map) of
    column ``col`` of consumer ``cw``'s dQ tile, query head ``h``."""
    d = cfg.head_dim
    if cfg.column_parts == 1 and not cfg.dq_split:
        return h * d + col
    return h * d + cw * cfg.dq_cols + col
