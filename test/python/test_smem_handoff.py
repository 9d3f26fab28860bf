"""Shared memory handed to TMA stores: the checker's staging-buffer rule
(a ``PipelineTmaStore`` with more stages than staging buffers) and its
hand-over rule (a barrier over the writing warps between their stores and
the TMA store, and between the store's wait and the next writes), each bug
built through the Python API next to its correct twin.

The kernel is the TMA-store epilogue of ``examples/tma_store_epilogue.py``:
a warpgroup writes a tile into a staging buffer, one thread stores it with
TMA. Bugs are planted by its knobs, not by editing IR.
"""

import inspect

import pytest

from pipeline_mlir import diagnostics
from pipeline_mlir.compiler import CompileError
from pipeline_mlir.kernel import (Int32, Kernel, TmaDescriptor,
                                  fence_view_async_shared, store)
from pipeline_mlir.pipeline import (Agent, CooperativeGroup, NamedBarrier,
                                    PipelineTmaStore)

from _example_checks import verify_protocol

THREADS = 128
TILE_BYTES = THREADS * 4


@pytest.fixture(autouse=True)
def _fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PIPELINE_MLIR_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv(diagnostics.ENV_VERBOSE, raising=False)


def here():
    """The caller's line number."""
    return inspect.currentframe().f_back.f_lineno


def epilogue(stages=2, buffers=2, lines=None, sync_after_acquire=True,
             sync_before_store=True, fence=True):
    """The TMA-store epilogue: ``stages`` for the store pipeline, tiles
    written to buffer ``t % buffers``; the knobs drop its barriers and its
    proxy fence. ``lines`` gets the lines of the pipeline's creation, the
    warps' stores and the TMA store."""
    lines = {} if lines is None else lines
    k = Kernel("epilogue", block_dim=THREADS,
               params={"out_desc": TmaDescriptor(), "num_tiles": Int32()})
    with k:
        out_desc, num_tiles = k.args
        staging = k.smem_alloc(buffers * TILE_BYTES, align=128, name="staging")
        lines["create"] = here() + 1
        pipeline = PipelineTmaStore.create(
            num_stages=stages, producer_group=CooperativeGroup(Agent.Thread, THREADS),
            name="c")
        sync = NamedBarrier(barrier_id=1, num_threads=THREADS)
        tid = k.thread_idx()
        is_storer = k.warp_idx() == 0
        for t in k.range(num_tiles):
            buf = staging.stage(t % buffers, TILE_BYTES)
            with k.if_(is_storer):
                with k.elect_one():
                    pipeline.producer_acquire()
            if sync_after_acquire:
                sync.arrive_and_wait()
            lines["write"] = here() + 1
            store(t * THREADS + tid, buf, tid)
            if fence:
                fence_view_async_shared()
            if sync_before_store:
                sync.arrive_and_wait()
            with k.if_(is_storer):
                with k.elect_one():
                    lines["store"] = here() + 1
                    pipeline.tma_store(out_desc, [0, t], buf)
                    pipeline.producer_commit()
        with k.if_(is_storer):
            with k.elect_one():
                pipeline.producer_tail()
    return k


# -- staging buffers -----------------------------------------------------------

def test_three_stages_over_two_buffers_is_an_error_at_the_create():
    lines = {}
    k = epilogue(stages=3, buffers=2, lines=lines)
    with pytest.raises(CompileError) as err:
        k.compile()
    first = str(err.value).splitlines()[0]
    assert first.startswith(f"{__file__}:{lines['create']}:")
    assert ("error: pipeline 'c' has 3 stages but its tma_stores read 2 staging buffers "
            "in turn") in first
    assert "create it with num_stages=2" in first
    assert "index the buffer by the tile counter modulo 3" in first


@pytest.mark.parametrize("stages,buffers", [(2, 2), (3, 3), (2, 3), (1, 1)])
def test_at_most_as_many_stages_as_buffers_is_clean(stages, buffers):
    assert verify_protocol(str(epilogue(stages, buffers).module)) == []


def test_one_buffer_with_two_stages_is_an_error():
    (msg,) = verify_protocol(str(epilogue(stages=2, buffers=1).module))
    assert msg.startswith("pipeline 'c' has 2 stages but its tma_stores read 1 staging "
                          "buffer in turn")
    assert "note: this store reads the buffer" in msg


# -- shared-memory hand-over through the named barrier --------------------------

def test_the_epilogue_with_both_barriers_is_clean():
    assert verify_protocol(str(epilogue().module)) == []


def test_no_barrier_between_the_writes_and_the_tma_store():
    lines = {}
    k = epilogue(sync_before_store=False, lines=lines)
    with pytest.raises(CompileError) as err:
        k.compile()
    first, *notes = str(err.value).splitlines()
    assert first.startswith(f"{__file__}:{lines['store']}:")
    assert ("error: shared-memory hand-over: this TMA store reads shared memory that "
            "warps 0-3 write with ordinary stores") in first
    assert "call arrive_and_wait() on a NamedBarrier over the writing warps" in first
    assert any(n.strip().startswith(f"{__file__}:{lines['write']}:") for n in notes)


def test_no_barrier_between_producer_acquire_and_the_writes():
    lines = {}
    k = epilogue(sync_after_acquire=False, lines=lines)
    with pytest.raises(CompileError) as err:
        k.compile()
    first, *notes = str(err.value).splitlines()
    assert first.startswith(f"{__file__}:{lines['write']}:")
    assert ("error: shared-memory hand-over: warps 0-3 write shared memory that an earlier "
            "TMA store may still be reading") in first
    assert "after producer_acquire(), before these stores" in first
    assert any(n.strip().startswith(f"{__file__}:{lines['store']}:") for n in notes)


# -- the same bugs planted in the Hopper GEMM's epilogue --------------------------

def hopper_ir():
    import sys
    from _example_checks import EXAMPLES_DIR
    if EXAMPLES_DIR not in sys.path:
        sys.path.insert(0, EXAMPLES_DIR)
    import hopper_gemm
    return str(hopper_gemm.build().module)


def drop_nth(text, needle, n):
    """Drop the n-th line (0-based) holding ``needle``."""
    lines = text.splitlines(keepends=True)
    hits = [i for i, line in enumerate(lines) if needle in line]
    del lines[hits[n]]
    return "".join(lines)


SYNC = "pipeline.named_barrier.sync id = 1"


def test_hopper_gemm_epilogue_is_clean():
    text = hopper_ir()
    # Two passes, each: acquire, sync, writes, fence, sync, stores.
    assert text.count(SYNC) == 4
    assert verify_protocol(text) == []


def test_hopper_gemm_without_the_sync_before_its_tma_stores():
    (msg,) = verify_protocol(drop_nth(hopper_ir(), SYNC, 1))
    assert msg.startswith("shared-memory hand-over: this TMA store reads shared memory "
                          "that warps 4-11 write with ordinary stores")
    assert "hopper_gemm.py" not in msg  # the message; the note names the line
    assert "note: written here by warps 4-11" in msg


def test_hopper_gemm_without_the_sync_after_its_second_acquire():
    (msg,) = verify_protocol(drop_nth(hopper_ir(), SYNC, 2))
    assert msg.startswith("shared-memory hand-over: warps 4-11 write shared memory that an "
                          "earlier TMA store may still be reading: its wait")
    assert "note: the TMA store that may still read the buffer" in msg


def test_hopper_gemm_epilogue_passes_through_one_buffer_need_one_stage():
    text = hopper_ir().replace("tma_store, stages = 1>", "tma_store, stages = 2>") \
                      .replace("<1, producer>", "<2, producer>")
    (msg,) = verify_protocol(text)
    assert msg.startswith("PipelineTmaStore pipeline has 2 stages but its tma_stores read 1 "
                          "staging buffer in turn")


# -- proxy fence before the TMA store ---------------------------------------------

def test_no_proxy_fence_between_the_writes_and_the_tma_store():
    lines = {}
    k = epilogue(fence=False, lines=lines)
    with pytest.raises(CompileError) as err:
        k.compile()
    first, *notes = str(err.value).splitlines()
    assert first.startswith(f"{__file__}:{lines['store']}:")
    assert ("error: proxy fence: this TMA store reads shared memory through the async proxy "
            "that warps 0-3 wrote with ordinary stores") in first
    assert "call fence_view_async_shared() after the stores" in first
    assert any(n.strip().startswith(f"{__file__}:{lines['write']}:") for n in notes)


def test_hopper_gemm_without_its_proxy_fences():
    text = hopper_ir()
    fence = "nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>"
    assert text.count(fence) == 2
    # One finding per write left unfenced: the first pass's, which every
    # later store also reads past.
    (msg,) = verify_protocol(drop_nth(drop_nth(text, fence, 1), fence, 0))
    assert msg.startswith("proxy fence: this TMA store reads shared memory through the "
                          "async proxy that warps 4-11 wrote")
    # The second pass's fence alone dropped: its stores are reported.
    (msg,) = verify_protocol(drop_nth(text, fence, 1))
    assert msg.startswith("proxy fence: this TMA store")
