"""Stage: the backward's score GEMMs, S^T = K Q^T and dP^T = V dO^T
(``ScoreGemms``).
"""

from pipeline_mlir.kernel import wgmma
from pipeline_mlir.kernel.fragment import Fragment



class ScoreGemms:
    """S^T = K_w Q^T and dP^T = V_w dO^T of this warpgroup's 64 keys: A
    (its rows of K or V) and B (Q or dO, N x K) from shared memory. With two
    column parts both warpgroups of the key group compute the same two, or
    with ``split_scores`` each those of its half of the queries."""

    def __init__(self, cfg, kv_tile, cw):
        kv_layout = self.kv_layout = cfg.kv_layout()
        self.q_layout = cfg.q_layout()
        self.block_m = cfg.score_n
        self.mma = wgmma.WarpgroupMma(cfg.score_n, kv_layout, self.q_layout)   # m64 n=bm
        # split_scores: this warpgroup's queries, rows score_n * cw.. of Q and dO.
        self.q_rows = (self.q_layout.mn_offset(cfg.score_n) * cw if cfg.split_scores
                       else None)
        if cfg.column_parts == 1:
            # This warpgroup's 64 keys: rows 64 cw.. of K and V.
            self.k_a = wgmma.smem_matrix_descriptor(kv_tile + kv_layout.mn_offset(64) * cw,
                                                    kv_layout)
            self.v_a = wgmma.smem_matrix_descriptor(
                kv_tile + kv_layout.bytes + kv_layout.mn_offset(64) * cw, kv_layout)
        else:
            # The CTA's 64 keys, every warpgroup's.
            self.k_a = wgmma.smem_matrix_descriptor(kv_tile, kv_layout)
            self.v_a = wgmma.smem_matrix_descriptor(kv_tile + kv_layout.bytes, kv_layout)

    def issue(self, q_tile, do_tile, between=None):
        """(S^T, dP^T): two committed groups, S^T's first; ``between()``,
        if given, runs after S^T's issue and before dP^T's."""
        kv_layout, q_layout = self.kv_layout, self.q_layout
        if self.q_rows is not None:
            q_tile, do_tile = q_tile + self.q_rows, do_tile + self.q_rows
        q_b = wgmma.smem_matrix_descriptor(q_tile, q_layout)
        do_b = wgmma.smem_matrix_descriptor(do_tile, q_layout)
        s = Fragment.undef(self.block_m)
        dp = Fragment.undef(self.block_m)
        for acc, a, bdesc in ((s, self.k_a, q_b), (dp, self.v_a, do_b)):
            if acc is dp and between is not None:
                between()
            if acc is s or between is not None:
                wgmma.fence()
            for kk in range(kv_layout.k_slices):
                self.mma.mma(acc, wgmma.k_slice_descriptor(a, kv_layout, kk),
                             wgmma.k_slice_descriptor(bdesc, q_layout, kk),
                             accumulate=kk > 0)
            wgmma.commit_group()
        return s, dp
