"""Synchronization mistakes planted in the library's attention backward
(pipeline_mlir/kernels/attention_bwd/), each a wrong version of one of
its stages: ``build(cfg, stages=STAGES_WITH[name])`` builds the kernel with
that stage replaced. The kernel holds no mistake of its own; these are what
the protocol checker and the simulator must reject (test_attention_bwd.py).

Each wrong stage is its correct twin with one release moved, one fence
dropped or one barrier narrowed, so the kernel around the mistake is the
production one.
"""

from dataclasses import replace

from pipeline_mlir.kernels import attention_bwd
from pipeline_mlir.kernels.attention_bwd import (BLOCK_M, STAGES, DkvEpilogue, DqHandOff,
                                                 DqReduce, Mainloop, ReduceWarp, SoftmaxGrad,
                                                 load_columns)


class DoReleasedBeforeDpRetired(Mainloop):
    """dO's stage goes back right after the dP^T GEMM is issued, before
    ``wait_group`` retired it (and the dV GEMM that reads it later): TMA
    may overwrite dO under both."""

    def issue_scores(self, reads, q_tile, do_tile, between=None):
        s, dp = super().issue_scores(reads, q_tile, do_tile, between)
        _, _, do_read, _ = reads
        self.rings.do.pipe.consumer_release(do_read)      # wrong: dP^T still reads it
        return s, dp

    def release_q_do(self, q_read, do_read):
        """dO went back already (``issue_scores``)."""
        self.rings.q.pipe.consumer_release(q_read)


class DqReduceBeforeFence(DqReduce):
    """The reduce-add reads the dQ tile through TMA's proxy without the
    ``fence.proxy.async`` after the warps' ordinary stores into it."""

    def issue(self, h, m_block, step=None):
        self.reduce(h, m_block, step)                      # wrong: no proxy fence


class EpilogueRacesLastMma(DkvEpilogue):
    """The barrier before the dK/dV stores covers this warpgroup only: the
    other one's last GEMMs may still read the K and V rows these stores
    overwrite."""

    def both_released(self):
        self.wg_sync.arrive_and_wait_w_index(self.cw)    # wrong: this warpgroup only


class LseReadAfterRelease(SoftmaxGrad):
    """LSE's stage goes back before its values are loaded: the producer may
    refill it under the loads."""

    def load_lse(self, lse_read):
        pipe = self.rings.lse.pipe
        pipe.consumer_wait(lse_read)
        stage = self.rings.lse.buffer(lse_read.index)
        pipe.consumer_release(lse_read)                   # wrong: read below
        return load_columns(stage, self.lane, self.cfg.block_m)


STAGES_WITH = {
    "do_released_before_dp_retired": replace(STAGES, mainloop=DoReleasedBeforeDpRetired),
    "dq_reduce_before_fence": replace(STAGES, dq_reduce=DqReduceBeforeFence),
    "epilogue_races_last_mma": replace(STAGES, epilogue=EpilogueRacesLastMma),
    "lse_read_after_release": replace(STAGES, softmax_grad=LseReadAfterRelease),
}


class ReduceWarpSkipsDqFull(ReduceWarp):
    """``dq_reduce_warp``: the reduce warp issues each reduce-add without
    waiting on "dQ full": TMA may read the dQ tile while the consumer still
    writes it."""

    def wait_full(self, cw):
        pass                                                 # wrong: no wait


class ConsumerSkipsDqEmpty(DqHandOff):
    """``dq_reduce_warp``: the consumer writes its dQ tile without waiting
    on "dQ empty": it may overwrite the tile under the last reduce-add's
    read."""

    def claim(self):
        pass                                                 # wrong: no wait


# The dQ hand-off's mistakes, planted in builds with dq_reduce_warp
# (test_attention_bwd_reduce_warp.py).
REDUCE_WARP_STAGES_WITH = {
    "reduce_warp_skips_dq_full": replace(STAGES, reduce_warp=ReduceWarpSkipsDqFull),
    "consumer_skips_dq_empty": replace(STAGES, dq_hand_off=ConsumerSkipsDqEmpty),
}


def build_with_mistake(name, cfg=attention_bwd.AttentionBwdConfig()):
    """The backward kernel for ``cfg`` with mistake ``name`` planted."""
    return attention_bwd.build(cfg, stages={**STAGES_WITH, **REDUCE_WARP_STAGES_WITH}[name])
