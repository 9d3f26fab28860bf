"""``NamedBarrier(barrier_id, num_threads)``: the 16 hardware CTA barriers."""

from ..dialects import pipeline as pl
from ..kernel.scope import current_block
from .emit import i32_value
from .errors import PipelineError
from .mbarrier import SyncObject


class NamedBarrier(SyncObject):
    """``arrive`` = ``bar.arrive id, n``; ``arrive_and_wait`` / ``sync`` /
    ``wait`` = ``bar.sync id, n`` (a named barrier has no wait without an
    arrive); ``*_unaligned`` use ``barrier.cta.*``. Id 0 is
    ``__syncthreads``'s."""

    def __init__(self, barrier_id, num_threads):
        if not isinstance(barrier_id, int) or not 0 <= barrier_id <= 15:
            raise PipelineError(f"NamedBarrier: barrier_id must be in 0..15, "
                                f"got {barrier_id!r}")
        if (not isinstance(num_threads, int) or num_threads <= 0
                or num_threads % 32 or num_threads > 1024):
            raise PipelineError(
                "NamedBarrier: num_threads must be a positive multiple of the "
                f"warp size (32) and at most 1024, got {num_threads!r}")
        self.barrier_id = barrier_id
        self.num_threads = num_threads

    def _emit(self, fn, index=None, unaligned=False):
        current_block("NamedBarrier")
        idx = None if index is None else i32_value(index, "NamedBarrier index")
        fn(self.barrier_id, self.num_threads, index=idx,
           unaligned=unaligned or None)

    def arrive(self):
        self._emit(pl.named_barrier_arrive)

    def arrive_unaligned(self):
        self._emit(pl.named_barrier_arrive, unaligned=True)

    def wait(self):
        self._emit(pl.named_barrier_sync)

    def wait_unaligned(self):
        self._emit(pl.named_barrier_sync, unaligned=True)

    def arrive_and_wait(self):
        self._emit(pl.named_barrier_sync)

    def sync(self):
        self._emit(pl.named_barrier_sync)

    # flash-attention: barrier `barrier_id + index`.
    def arrive_w_index(self, index):
        self._emit(pl.named_barrier_arrive, index=index)

    def arrive_and_wait_w_index(self, index):
        self._emit(pl.named_barrier_sync, index=index)

    def get_barrier(self):
        return self.barrier_id

    def max(self):
        return self.num_threads
