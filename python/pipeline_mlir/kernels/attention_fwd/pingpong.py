"""Stage: the consumer warpgroups' GEMM turns (``PingPong``)."""

from pipeline_mlir.kernel.warpgroup import THREADS_PER_WARPGROUP
from pipeline_mlir.pipeline import NamedBarrier

from .config import PINGPONG_BARRIER


class PingPong:
    """The consumer warpgroups issue their GEMMs in turn (0, 1, .., 0, 1,
    ..): warpgroup w waits on barrier id w (its own 128 threads plus the 128
    of the warpgroup before it, which arrive when they have issued), then
    arrives on the next one's. Without ``cfg.pingpong``, ``begin`` and
    ``end`` emit nothing."""

    def __init__(self, k, cfg, cw):
        wgs = cfg.consumer_warpgroups
        self.barrier = (NamedBarrier(PINGPONG_BARRIER, 2 * THREADS_PER_WARPGROUP,
                                     num_ids=wgs)
                        if cfg.pingpong else None)
        self.mine, self.other = self.ids(cw, wgs)
        if self.barrier is not None:
            # Warpgroup 0 issues first: the last one lets it through once.
            with k.if_(cw == wgs - 1):
                self.barrier.arrive_w_index(0)

    def ids(self, cw, wgs):
        """(the id warpgroup ``cw`` waits on, the id it arrives on)."""
        return cw, (cw + 1) % wgs

    def begin(self):
        if self.barrier is not None:
            self.barrier.arrive_and_wait_w_index(self.mine)

    def end(self):
        if self.barrier is not None:
            self.barrier.arrive_w_index(self.other)
