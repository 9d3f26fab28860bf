"""Shared memory handed to TMA stores: the checker's staging-buffer rule
(a ``PipelineTmaStore`` with more stages than staging buffers), each bug
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


def epilogue(stages=2, buffers=2, lines=None):
    """The TMA-store epilogue: ``stages`` for the store pipeline, tiles
    written to buffer ``t % buffers``. ``lines`` gets the line of the
    pipeline's creation."""
    k = Kernel("epilogue", block_dim=THREADS,
               params={"out_desc": TmaDescriptor(), "num_tiles": Int32()})
    with k:
        out_desc, num_tiles = k.args
        staging = k.smem_alloc(buffers * TILE_BYTES, align=128, name="staging")
        if lines is not None:
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
            sync.arrive_and_wait()
            store(t * THREADS + tid, buf, tid)
            fence_view_async_shared()
            sync.arrive_and_wait()
            with k.if_(is_storer):
                with k.elect_one():
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
