"""The forward's consumer warpgroups (``consumer``): per work unit the
mainloop over the key blocks, then the epilogue; and the scales they apply
(``Scales``).
"""

from dataclasses import dataclass

from pipeline_mlir.chip_limits import WGMMA_M
from pipeline_mlir.kernel import Scalar
from pipeline_mlir.kernel.fragment import Fragment, RowVector
from pipeline_mlir.kernel.memory import load
from pipeline_mlir.kernel.values import f32
from pipeline_mlir.pipeline import PipelineUserType

from .mainloop import TileAccumulators


def consumer(k, cfg, stages, rings, sched, args, warp, warpgroup):
    """Warpgroups 1..: per work unit, the mainloop over the key blocks (the
    online softmax between its GEMMs), then the epilogue."""
    cw = warpgroup - 1
    warp_in_wg, lane = warp % 4, k.lane_idx()
    turns = stages.pingpong(k, cfg, cw)
    mainloop = stages.mainloop(k, cfg, rings, turns)
    thread_row, thread_col = Fragment.thread_origin(warp_in_wg, lane)
    scales = Scales.of(cfg, args)
    softmax = stages.softmax(k, cfg, sched, scales.scale_log2, thread_row, thread_col)
    epi = stages.epilogue(k, cfg, rings.o, cw, warp_in_wg, lane, thread_row, thread_col)
    epi.scales = scales
    if cfg.row_sum_mma and not cfg.row_sum_fold:      # (folded: the producer's)
        mainloop.write_ones(cw, warp_in_wg, lane)
    states = rings.states(PipelineUserType.Consumer)
    for r, _ in k.range(sched.rounds, carry=list(states)):
        m_block, b, h = sched.round_unit(r)
        n_blocks = sched.kv_blocks(m_block)
        n_free = sched.unmasked_blocks(m_block)
        m_row0 = m_block * cfg.block_m + cw * WGMMA_M
        acc = TileAccumulators(mainloop.mma_o.accumulator(), RowVector.full(float("-inf")),
                               RowVector.full(0.0), whole_sums=cfg.row_sum_mma)
        mainloop.tile(states, acc, softmax, cw, m_row0, n_blocks, n_free)
        epi.tile(acc, args, b, h, m_row0)
    epi.tail()


@dataclass
class Scales:
    """The consumers' scales: ``scale_log2`` (softmax scale x log2 e, the
    FP8 forward's q and k descales folded in: S's accumulator is Q8 K8^T)
    and ``v_descale`` (FP8: O's, applied with 1 / row sum; None for bf16)."""
    scale_log2: object
    v_descale: object = None

    @classmethod
    def of(cls, cfg, args):
        if not cfg.fp8:
            return cls(args.scale_log2)
        qd, kd, vd = (Scalar(load(p, f32())) for p in (args.q_descale, args.k_descale,
                                                         args.v_descale))
        return cls(args.scale_log2 * qd * kd, vd)
