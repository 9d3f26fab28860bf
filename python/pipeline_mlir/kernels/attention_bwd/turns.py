"""Stage: the consumer warpgroups' score-GEMM turns (``Turns``), the
backward's ping-pong (``AttentionBwdConfig.pingpong``).
"""

from pipeline_mlir.kernel.warpgroup import THREADS_PER_WARPGROUP
from pipeline_mlir.pipeline import NamedBarrier

from .config import CONSUMER_WARPGROUPS, PINGPONG_BARRIER


class Turns:
    """The consumers issue their steps' S^T and dP^T GEMMs in turn (0, 1,
    0, 1, ..): warpgroup ``cw`` waits on barrier ``PINGPONG_BARRIER + cw``
    (its 128 threads and the other warpgroup's, which arrive once they have
    issued theirs), then arrives on the other's. So one warpgroup's softmax
    gradient runs while the other's score GEMMs do, rather than both at once
    with the tensor cores idle (FlashAttention-3's ping-pong, as the
    forward's ``PingPong``). Both warpgroups take one turn per step and run
    the same steps; warpgroup 1 lets warpgroup 0 through once at the start,
    and its last arrive is left pending at exit (a start signal's). Without
    ``cfg.pingpong``, ``begin`` and ``end`` emit nothing."""

    def __init__(self, k, cfg, cw):
        self.barrier = (NamedBarrier(PINGPONG_BARRIER, 2 * THREADS_PER_WARPGROUP,
                                     num_ids=CONSUMER_WARPGROUPS)
                        if cfg.pingpong else None)
        self.mine, self.other = cw, (cw + 1) % CONSUMER_WARPGROUPS
        if self.barrier is not None:
            with k.if_(cw == CONSUMER_WARPGROUPS - 1):
                self.barrier.arrive_w_index(0)

    def begin(self):
        if self.barrier is not None:
            self.barrier.arrive_and_wait_w_index(self.mine)

    def end(self):
        if self.barrier is not None:
            self.barrier.arrive_w_index(self.other)
