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
                                                 DqReduce, GradGemms, Mainloop, ReduceWarp,
                                                 SoftmaxGrad)
from pipeline_mlir.kernel import wgmma


class DoReleasedBeforeDpRetired(Mainloop):
    """dO's stage goes back right after the dP^T GEMM is issued, before
    ``wait_group`` retired it (and the dV GEMM that reads it later): TMA
    may overwrite dO under both."""

    def issue_scores(self, reads, q_tile, do_tile, between=None):
        s, dp = super().issue_scores(reads, q_tile, do_tile, between)
        _, _, do_read, _ = self.rings.step_states(reads)
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
        return self.columns(stage)


class LseReadAfterTileRelease(Mainloop):
    """``stats_with_tiles``: LSE's row rides on Q's stage (and dPsum's on
    dO's), so "LSE's stage" is Q's: here Q's and dO's stages go back as
    soon as S^T and dP^T retired, before the rows riding on them are
    loaded (and before dV and dK read the tiles): the producer may refill
    them under the loads."""

    def issue_scores(self, reads, q_tile, do_tile, between=None):
        s, dp = super().issue_scores(reads, q_tile, do_tile, between)
        q_read, _, do_read, _ = self.rings.step_states(reads)
        wgmma.wait_group(0)                                # S^T and dP^T retired
        self.rings.q.pipe.consumer_release(q_read)         # wrong: LSE read below
        self.rings.do.pipe.consumer_release(do_read)       # wrong: dPsum read below
        return s, dp

    def release_q_do(self, q_read, do_read):
        """Both went back already (``issue_scores``)."""


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


class ReduceWarpIssuesBeforeDqFull(ReduceWarp):
    """``dq_reduce_warp``: the reduce warp's wait on "dQ full" moved after
    its reduce-add: TMA reads the dQ tile before the consumer wrote it
    (every barrier count still matches)."""

    def wait_full(self, cw):
        """Waited after the reduce-add (``reduce``)."""

    def reduce(self, h, m_block, cw):
        super().reduce(h, m_block, cw)
        self.full.arrive_and_wait_w_index(cw)             # wrong: after the read


class ReduceWarpGivesBackBeforeRead(ReduceWarp):
    """``dq_reduce_warp``: "dQ empty" arrived before the bulk group's
    ``wait_group.read``: the consumer may write the tile again while TMA
    still reads it."""

    def reduce(self, h, m_block, cw):
        """``ReduceWarp.reduce`` without the wait for the read."""
        with self.k.if_(self.k.lane_idx() == 0):
            self.add(h, m_block, cw)
            self.groups.arrive()

    def give_back(self, cw):
        super().give_back(cw)
        with self.k.if_(self.k.lane_idx() == 0):
            self.groups.wait()                            # wrong: after the arrive


class ConsumerDropsDqFence(DqHandOff):
    """``dq_reduce_warp``: the consumer hands its dQ tile over without the
    ``fence.proxy.async`` after its ordinary stores: TMA's proxy may not see
    them."""

    def issue(self, h, m_block, step=None):
        self.full.arrive_w_index(self.cw)                 # wrong: no proxy fence


class ConsumerWritesBeforeDqEmpty(DqHandOff):
    """``dq_reduce_warp``: the consumer's wait on "dQ empty" moved after
    its writes of the dQ tile (before the fence): it may overwrite the tile
    under the last reduce-add's read (every barrier count still matches)."""

    def claim(self):
        """Waited after the writes (``issue``)."""

    def issue(self, h, m_block, step=None):
        self.empty.arrive_and_wait_w_index(self.cw)       # wrong: after the writes
        super().issue(h, m_block, step)


# The dQ hand-off's mistakes, planted in builds with dq_reduce_warp
# (test_attention_bwd_reduce_warp.py).
REDUCE_WARP_STAGES_WITH = {
    "reduce_warp_skips_dq_full": replace(STAGES, reduce_warp=ReduceWarpSkipsDqFull),
    "consumer_skips_dq_empty": replace(STAGES, dq_hand_off=ConsumerSkipsDqEmpty),
    "reduce_warp_issues_before_dq_full": replace(STAGES, reduce_warp=ReduceWarpIssuesBeforeDqFull),
    "reduce_warp_gives_back_before_read": replace(STAGES,
                                                  reduce_warp=ReduceWarpGivesBackBeforeRead),
    "consumer_drops_dq_fence": replace(STAGES, dq_hand_off=ConsumerDropsDqFence),
    "consumer_writes_before_dq_empty": replace(STAGES, dq_hand_off=ConsumerWritesBeforeDqEmpty),
}


class _Synced:
    """A barrier already waited on: its ``arrive_and_wait`` does nothing."""

    def arrive_and_wait(self):
        pass


class DsHandedOverBeforeWritten(GradGemms):
    """``shared_ds`` (``dq_split``, ``block_m128``): the barrier over both
    warpgroups moved before this warpgroup's dS^T stores instead of after
    them: the other warpgroup's dQ GEMMs may read the tile before (or
    while) it is written (every barrier count still matches)."""

    def store_ds(self, ds, it, ds_regs=None):
        both = self.both
        both.arrive_and_wait()                            # wrong: before the writes
        self.both = _Synced()
        try:
            return super().store_ds(ds, it, ds_regs)
        finally:
            self.both = both


class _ThisWarpgroup:
    """The barrier over both warpgroups replaced by this warpgroup's own."""

    def __init__(self, grads):
        self.grads = grads

    def arrive_and_wait(self):
        self.grads.wg_sync.arrive_and_wait_w_index(self.grads.cw)


class DsHandedOverByOneWarpgroup(GradGemms):
    """``shared_ds``: the barrier after the dS^T stores covers this
    warpgroup only: the other one's dQ GEMMs may read the tile before it
    is written."""

    def store_ds(self, ds, it, ds_regs=None):
        both, self.both = self.both, _ThisWarpgroup(self)  # wrong: one warpgroup
        try:
            return super().store_ds(ds, it, ds_regs)
        finally:
            self.both = both


class DsSingleBuffer(GradGemms):
    """``shared_ds``: every step writes the same dS^T buffer: a warpgroup
    may overwrite its tile while the other one's dQ GEMMs of the step
    before still read it."""

    def store_ds(self, ds, it, ds_regs=None):
        return super().store_ds(ds, 0, ds_regs)           # wrong: one buffer


# The dS^T hand-over's mistakes, planted in builds with shared_ds.
SHARED_DS_STAGES_WITH = {
    "ds_handed_over_before_written": replace(STAGES, grads=DsHandedOverBeforeWritten),
    "ds_handed_over_by_one_warpgroup": replace(STAGES, grads=DsHandedOverByOneWarpgroup),
    "ds_single_buffer": replace(STAGES, grads=DsSingleBuffer),
}


# With stats_with_tiles (LSE and dPsum on Q's and dO's stages: no 'lse'
# ring to release early) the LSE mistake is planted as Q's stage released
# before LSE's row on it is read.
STATS_WITH_TILES_STAGES_WITH = {
    "lse_read_after_release": replace(STAGES, mainloop=LseReadAfterTileRelease),
}


def build_with_mistake(name, cfg=attention_bwd.AttentionBwdConfig()):
    """The backward kernel for ``cfg`` with mistake ``name`` planted (the
    LSE read's twin of the layout ``cfg.stats_with_tiles`` picks)."""
    mistakes = {**STAGES_WITH, **REDUCE_WARP_STAGES_WITH, **SHARED_DS_STAGES_WITH}
    if cfg.stats_with_tiles:
        mistakes.update(STATS_WITH_TILES_STAGES_WITH)
    return attention_bwd.build(cfg, stages=mistakes[name])
