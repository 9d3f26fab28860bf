"""A TMA-store epilogue with PipelineTmaStore (sm_90a).

A warpgroup writes output tiles to a 2-buffer staging ring in shared memory
and one thread stores each tile with TMA. ``producer_acquire()`` waits until
the buffer about to be overwritten has been read by its TMA store
(``cp.async.bulk.wait_group.read 1``), ``producer_commit()`` closes the
store's bulk group, ``producer_tail()`` drains them before the CTA exits.

Usage: python examples/tma_store_epilogue.py [--print-ir] [--out DIR]

``--out DIR``: where the cubin and its launch metadata go (by default a
folder in the system's temporary directory, not the source tree:
examples/_common.py).
"""

import sys

from pipeline_mlir.kernel import (Int32, Kernel, TmaDescriptor,
                                  fence_view_async_shared, store)
from pipeline_mlir.pipeline import (Agent, CooperativeGroup, NamedBarrier,
                                    PipelineTmaStore)

THREADS = 128
TILE_BYTES = THREADS * 4  # one i32 per thread


def build(num_stages=2, chip="sm_90a"):
    """The kernel (``.module`` is the built module)."""
    k = Kernel("tma_store_epilogue", chip=chip, block_dim=THREADS,
               params={"out_desc": TmaDescriptor(), "num_tiles": Int32()})
    with k:
        out_desc, num_tiles = k.args
        staging = k.smem_alloc(num_stages * TILE_BYTES, align=128,
                               name="staging")
        pipeline = PipelineTmaStore.create(
            num_stages=num_stages,
            producer_group=CooperativeGroup(Agent.Thread, THREADS))
        epilogue_sync = NamedBarrier(barrier_id=1, num_threads=THREADS)
        tid = k.thread_idx()
        is_storer = k.warp_idx() == 0

        for t in k.range(num_tiles):
            buf = staging.stage(t % num_stages, TILE_BYTES)
            # The buffer must no longer be read by an earlier TMA store.
            with k.if_(is_storer):
                with k.elect_one():
                    pipeline.producer_acquire()
            epilogue_sync.arrive_and_wait()
            store(t * THREADS + tid, buf, tid)      # the "accumulator"
            fence_view_async_shared()                # visible to TMA
            epilogue_sync.arrive_and_wait()
            with k.if_(is_storer):
                with k.elect_one():
                    pipeline.tma_store(out_desc, [0, t], buf)
                    pipeline.producer_commit()
        with k.if_(is_storer):
            with k.elect_one():
                pipeline.producer_tail()
    return k


if __name__ == "__main__":
    from _common import main
    sys.exit(main(build(), "tma_store_epilogue"))
