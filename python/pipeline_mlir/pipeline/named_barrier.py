"""``NamedBarrier(barrier_id, num_threads)``: the 16 hardware CTA barriers.

``barrier_id=None`` takes a free id of the kernel being built (the innermost
open ``with Kernel(...)``), from 15 down, so that automatic ids stay clear
of the small ids people write by hand; ``num_ids=k`` takes k consecutive ids
for ``*_w_index`` use (id + index). Id 0 is never taken: it is
``__syncthreads``'s. An explicit id that an earlier automatic barrier of the
same kernel took is an error (create explicit barriers first, or let every
barrier take its id). Whether ids of roles that run at the same time
collide, and whether thread counts match the warps that reach each barrier,
is checked by pipeline-verify-protocol (NamedBarrierChecks.cpp).
"""

from ..dialects import pipeline as pl
from ..kernel.scope import current_block
from .emit import i32_value
from .errors import PipelineError
from .mbarrier import SyncObject


def _kernel_ids():
    from ..kernel.kernel import active_kernel
    k = active_kernel()
    return None if k is None else k.named_barrier_ids


def _take_free_ids(count, num_threads):
    taken = _kernel_ids()
    if taken is None:
        raise PipelineError(
            "NamedBarrier: barrier_id=None assigns a free id of the kernel being "
            "built; call it inside `with Kernel(...)` or give barrier_id")
    for first in range(16 - count, 0, -1):
        ids = range(first, first + count)
        if not any(i in taken for i in ids):
            for i in ids:
                taken[i] = f"an automatic NamedBarrier(num_threads={num_threads!r})"
            return first
    raise PipelineError(
        f"NamedBarrier: no {count} free consecutive barrier id(s) left in 1..15 "
        f"(taken: {sorted(taken)})")


def _note_explicit_id(barrier_id, count):
    taken = _kernel_ids()
    if taken is None or not isinstance(barrier_id, int):
        return
    for i in range(barrier_id, barrier_id + count):
        owner = taken.get(i)
        if owner is not None and owner.startswith("an automatic"):
            raise PipelineError(
                f"NamedBarrier: barrier_id {i} was already assigned to {owner} of "
                "this kernel; create barriers with explicit ids first, or let "
                "this one take a free id (barrier_id=None)")
        taken.setdefault(i, "an explicit NamedBarrier")


class NamedBarrier(SyncObject):
    """``arrive`` = ``bar.arrive id, n``; ``arrive_and_wait`` / ``sync`` /
    ``wait`` = ``bar.sync id, n`` (a named barrier has no wait without an
    arrive); ``*_unaligned`` use ``barrier.cta.*``. Id 0 is
    ``__syncthreads``'s."""

    def __init__(self, barrier_id=None, num_threads=None, *, num_ids=1):
        if (not isinstance(num_ids, int) or isinstance(num_ids, bool)
                or not 1 <= num_ids <= 15):
            raise PipelineError(f"NamedBarrier: num_ids must be in 1..15, got {num_ids!r}")
        if barrier_id is None:
            barrier_id = _take_free_ids(num_ids, num_threads)
        else:
            _note_explicit_id(barrier_id, num_ids)
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
