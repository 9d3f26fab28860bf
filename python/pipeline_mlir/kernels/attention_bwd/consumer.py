"""The backward's consumer warpgroups (``consumer``): the stages of one
warpgroup put together, dK and dV carried over every step, then the
epilogue.
"""

from pipeline_mlir.kernel.fragment import Fragment
from pipeline_mlir.kernel.warpgroup import THREADS_PER_WARPGROUP
from pipeline_mlir.pipeline import NamedBarrier, PipelineUserType

from .config import CONSUMER_WARPGROUPS, WG_BARRIER
from .turns import Turns


def consumer(k, cfg, stages, rings, sched, args, warp, warpgroup):
    """A consumer warpgroup: dK and dV of its 64 keys (d 256: its columns
    of the CTA's 64 keys) over every step, then the epilogue."""
    cw = warpgroup - 1
    warp_in_wg, lane = warp % 4, k.lane_idx()
    leader = (warp_in_wg == 0) & (lane == 0)
    thread_row, thread_col = Fragment.thread_origin(warp_in_wg, lane)
    wg_sync = NamedBarrier(WG_BARRIER, THREADS_PER_WARPGROUP, num_ids=CONSUMER_WARPGROUPS)
    epi = stages.epilogue(k, cfg, rings, sched, args, cw, warp_in_wg, lane, leader, wg_sync)

    kv_read = rings.kv.state(PipelineUserType.Consumer)
    rings.kv.pipe.consumer_wait(kv_read)
    kv_tile = rings.kv.buffer(kv_read.index)
    scores = stages.scores(cfg, kv_tile, cw)
    grads = stages.grads(k, cfg, rings, kv_tile, cw, warp_in_wg, lane, wg_sync)
    reduce = (stages.dq_hand_off if cfg.dq_reduce_warp else stages.dq_reduce)(
        k, cfg, sched, args, grads.dq_tile, cw, leader, wg_sync)
    softmax_grad = stages.softmax_grad(k, cfg, rings, sched, args, cw, lane,
                                       thread_row, thread_col)
    turns = Turns(k, cfg, cw) if cfg.pingpong else None
    mainloop = stages.mainloop(k, cfg, rings, sched, args, scores, softmax_grad, grads,
                               reduce, turns)

    dv = grads.accumulator()
    dk = grads.accumulator()
    reads = rings.states(PipelineUserType.Consumer)
    if not cfg.dq_deferred:
        for it, _ in k.range(sched.steps, carry=reads + [dv, dk]):
            mainloop.step(it, reads, dv, dk)
    else:
        # The previous step's last dQ part (retired, not stored yet).
        dq_last = Fragment.zeros(grads.dq_n)
        for it, _ in k.range(sched.steps, carry=reads + [dv, dk, dq_last]):
            mainloop.step(it, reads, dv, dk, dq_last)
        mainloop.finish_dq(sched.steps - 1, dq_last)

    # Every GEMM of this warpgroup retired in its last step; K and V go
    # back before the epilogue writes over them.
    rings.kv.pipe.consumer_release(kv_read)
    reduce.tail()
    epi(kv_tile, dv, dk)
