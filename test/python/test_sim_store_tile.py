"""pipeline-sim follows the whole tile a TMA store reads (sim/smemrace.py,
``async_read(tile=True)``): without the box's extent, the run of words the
same source line wrote before the store and no store has read since. So
another warp's refill of any word of the tile must be ordered after the
issuing thread's ``cp.async.bulk.wait_group.read`` by a barrier: a wait
orders only the thread that runs it.

A warpgroup stages each tile (one word per thread), thread 0 stores it,
commits and waits for the reads. Planted: no barrier before the refill
(tile-ai/TileOPs#1550, the port in test_held_out_bugs_seventh.py), found at
the refill's line naming the store. Clean: the barrier before the refill;
a ring of two slots in one buffer (the wait keeps one store in flight, so
the next slot is written while the previous store reads its own: the tile
must stop at the slot's end)."""

import inspect

import pytest

from pipeline_mlir.dialects import pipeline as pl
from pipeline_mlir.kernel import Int32, Kernel, TmaDescriptor, fence_view_async_shared, store
from pipeline_mlir.pipeline import tma_store

TILE = 128 * 4   # bytes: a word per thread


def _line():
    return inspect.currentframe().f_back.f_lineno + 1


def staged(barrier: bool, slots: int = 1):
    k = Kernel(f"staged_{int(barrier)}_{slots}", chip="sm_90a", block_dim=128,
               params={"out": TmaDescriptor(), "tiles": Int32()})
    lines = {}
    with k:
        out, tiles = k.args
        staging = k.smem_alloc(TILE * slots, align=128, name="C_shared")
        tid = k.thread_idx()
        for t in k.range(tiles):
            slot = t % slots
            with k.if_(tid == 0):    # the store that last read this slot is done
                pl.bulk_group_wait(pending=slots - 1, read=True)
            if barrier:
                k.sync_threads()
            lines["refill"] = _line()
            store(t * 128 + tid, staging, slot * 128 + tid)
            fence_view_async_shared()
            k.sync_threads()
            with k.if_(tid == 0):
                lines["store"] = _line()
                tma_store(out, [0, t], staging + slot * TILE)
                pl.bulk_group_commit()
        with k.if_(tid == 0):
            pl.bulk_group_wait(pending=0, read=False)
    return k, lines


@pytest.mark.parametrize("slots", [1, 2])
def test_a_barrier_after_the_issuers_wait_is_clean(slots):
    k, _ = staged(True, slots)
    res = k.simulate({"tiles": 5}, schedules=20, check=False)
    assert res.ok, str(res)


def test_the_refill_no_barrier_orders_is_found():
    k, lines = staged(False)
    res = k.simulate({"tiles": 3}, schedules=20, check=False)
    assert set(res[0].counts) == {"smem-race"}, str(res)
    assert res[0].counts["smem-race"] >= 10, str(res)   # most schedules
    f, = res.findings
    assert f.message.startswith("warp "), f.message
    assert "of CTA 0 writes shared memory" in f.message
    assert f"test_sim_store_tile.py:{lines['refill']}:" in f.message.split(" while ")[0]
    assert f"warp 0 of CTA 0's pipeline.copy.tma_store at " \
           f"{__file__}:{lines['store']}:" in f.message


def test_the_issuing_warps_own_words_are_not_the_tile_end():
    """The tile is the words the store's source line wrote: the other
    warps' words (bytes 128 on) are in it, though the issuing warp wrote
    the first 128."""
    k, _ = staged(False)
    res = k.simulate({"tiles": 3}, schedules=20, check=False)
    f, = res.findings
    byte = int(f.message.split("shared memory at byte ")[1].split()[0])
    assert byte >= 128, f.message
