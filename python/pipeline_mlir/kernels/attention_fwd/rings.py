"""Stage: the forward's shared memory and the pipelines over it (``Rings``)."""

from pipeline_mlir.kernel.ring import Ring
from pipeline_mlir.pipeline import Agent, CooperativeGroup


class Rings:
    """The shared memory of a CTA and the pipelines over it: Q (``q``), the
    K and V rings (``k``, ``v``), the O tiles of the TMA-store epilogue
    (``o``, or None), the row sum's ones (``ones``, or None; with
    ``row_sum_fold`` they sit in V's stages). Each ring
    holds its stage count (``Ring``): its buffers, its barriers and every
    pipeline state over it follow it."""

    def __init__(self, k, cfg):
        self.q = Ring.of_layout(k, cfg.q_buffers, cfg.q_layout(), "Q")
        self.k = Ring.of_layout(k, cfg.stages, cfg.k_layout(), "K ring")
        if cfg.row_sum_fold:
            # Each V^T box with the ones' 8 rows below its d (P V's B
            # operand, ``cfg.pv_layout``); the TMA fills the d rows
            # (``v_layout``), the producer writes the ones once.
            pv, v = cfg.pv_layout(), cfg.v_layout()
            self.v = Ring(k, cfg.stages, pv.bytes, align=pv.alignment, name="V ring",
                          layout=pv, tx_bytes=v.bytes)
        else:
            self.v = Ring.of_layout(k, cfg.stages, cfg.v_layout(), "V ring")
        o_layout = cfg.o_layout()
        self.o = (k.smem_alloc(cfg.consumer_warpgroups * o_layout.bytes,
                               align=o_layout.alignment, name="O tiles")
                  if cfg.o_through_smem else None)
        # row_sum_mma: each consumer warpgroup's block of e4m3 ones (the
        # row sum's B operand), written once by that warpgroup (folded
        # into V's stages instead with row_sum_fold).
        ones = cfg.ones_layout() if cfg.row_sum_mma and not cfg.row_sum_fold else None
        self.ones = (k.smem_alloc(cfg.consumer_warpgroups * ones.bytes, align=ones.alignment,
                                  name="ones") if ones else None)

        one_tma_thread = CooperativeGroup(Agent.Thread, 1)
        # Every consumer warp releases a stage once.
        consumers = CooperativeGroup(Agent.Thread, 4 * cfg.consumer_warpgroups)
        for name, ring in (("q", self.q), ("k", self.k), ("v", self.v)):
            ring.create_pipeline(k, one_tma_thread, consumers, name)

    def states(self, side):
        """A start state of ``side`` for each of Q, K and V."""
        return tuple(r.state(side) for r in (self.q, self.k, self.v))
