"""The simulator on schedules that depend on loaded data (sim/memory.py).

A block-sparse consumer skips the tiles its mask leaves empty; a producer
that fills every tile (it does not read the mask) overfills the ring, and
the kernel hangs whenever some tile is empty. The simulator reads the
mask from a seeded random fill (a new one per schedule) or from the
values the user gives, and its report names the branch on memory, what
each warp took there and the values that led there. flash-attention#2258
in its real form: the skip decided by the loaded mask, the consumer
advancing its phase on every tile."""

import pytest

from pipeline_mlir.kernel import GlobalPtr, Int32, Kernel, load
from pipeline_mlir.kernel.values import i32
from pipeline_mlir.pipeline import (Agent, CooperativeGroup, make_pipeline_state,
                                    PipelineAsync, PipelineUserType)
from pipeline_mlir.sim import cli

from _held_out_bugs import _next_line

Producer, Consumer = PipelineUserType.Producer, PipelineUserType.Consumer
S, TILES = 2, 6


def _ring(k, stages=S):
    return PipelineAsync.create(
        num_stages=stages, producer_group=CooperativeGroup(Agent.Thread, 32),
        consumer_group=CooperativeGroup(Agent.Thread, 32),
        barrier_storage=k.alloc_barriers(2 * stages), name="ring")


def _masked(bug):
    """Warp 0 fills a stage per non-empty tile (``bug``: per tile, the mask
    unread); warp 1 waits on the tiles whose ``mask[t]`` is not 0."""
    k = Kernel("masked_" + ("bug" if bug else "twin"), block_dim=64,
               params={"mask": GlobalPtr(), "tiles": Int32()})
    lines = {}
    with k:
        mask, tiles = k.args
        pipe = _ring(k)
        with k.if_(k.warp_idx() == 0):
            s = make_pipeline_state(Producer, S)
            for t, (s,) in k.range(tiles, carry=[s]):
                if bug:
                    pipe.producer_acquire(s)
                    pipe.producer_commit(s)
                    s.advance()
                else:
                    with k.if_(load(mask, i32(), t) != 0, carry=[s]):
                        pipe.producer_acquire(s)
                        pipe.producer_commit(s)
                        s.advance()
            pipe.producer_tail(s)
        with k.if_(k.warp_idx() == 1):
            c = make_pipeline_state(Consumer, S)
            for t, (c,) in k.range(tiles, carry=[c]):
                lines["branch"] = _next_line()
                with k.if_(load(mask, i32(), t) != 0, carry=[c]):
                    pipe.consumer_wait(c)
                    pipe.consumer_release(c)
                    c.advance()
    return k, lines


def _phase_flip(bug):
    """flash-attention#2258 (fix 4) with the skip read from the block-sparse
    mask, as the kernel had it: both roles skip the empty tiles; the
    consumer (``bug``) advances its one-stage state on every tile."""
    k = Kernel("sparse_phase_" + ("bug" if bug else "twin"), block_dim=64,
               params={"mask": GlobalPtr(), "tiles": Int32()})
    with k:
        mask, tiles = k.args
        pipe = _ring(k, stages=1)
        with k.if_(k.warp_idx() == 0):
            s = make_pipeline_state(Producer, 1)
            for t, (s,) in k.range(tiles, carry=[s]):
                with k.if_(load(mask, i32(), t) != 0, carry=[s]):
                    pipe.producer_acquire(s)
                    pipe.producer_commit(s)
                    s.advance()
            pipe.producer_tail(s)
        with k.if_(k.warp_idx() == 1):
            c = make_pipeline_state(Consumer, 1)
            for t, (c,) in k.range(tiles, carry=[c]):
                if bug:
                    with k.if_(load(mask, i32(), t) != 0):
                        pipe.consumer_wait(c)
                        pipe.consumer_release(c)
                    c.advance()
                else:
                    with k.if_(load(mask, i32(), t) != 0, carry=[c]):
                        pipe.consumer_wait(c)
                        pipe.consumer_release(c)
                        c.advance()
    return k


@pytest.fixture(scope="module")
def masked():
    return {bug: _masked(bug) for bug in (True, False)}


def test_random_fill_finds_the_skip_the_producer_does_not_make(masked):
    k, lines = masked[True]
    r = k.simulate({"tiles": TILES}, schedules=8, check=False)
    assert r[0].counts == {"deadlock": 8}, str(r)
    text = str(r)
    # The branch on memory, at the user's line, what the consumer took on
    # each tile, and the mask's values the schedule read.
    assert f"scf.if at {__file__}:{lines['branch']}:" in text, text
    assert "branches on memory (loaded at" in text
    assert "warp 1 of CTA 0: " in text and "else" in text
    assert "memory read from `mask` (argument 0) (random fill, seed 0, schedule 0" in text
    twin, _ = masked[False]
    assert twin.simulate({"tiles": TILES}, schedules=8, check=False).ok


def test_given_mask_decides_the_schedule(masked):
    """The user's values: all tiles full, the bug's producer and consumer
    agree (no hang: the simulator does not guess); one empty tile, a hang
    in every schedule, its value in the report."""
    k, _ = masked[True]
    assert k.simulate({"tiles": TILES, "mask": [1] * TILES}, schedules=4, check=False).ok
    r = k.simulate({"tiles": TILES, "mask": [1, 1, 0, 1, 1, 1]}, schedules=4, check=False)
    assert r[0].counts == {"deadlock": 4}, str(r)
    assert "(given; byte offset=value): +0=1 +4=1 +8=0 +12=1" in str(r), str(r)
    twin, _ = masked[False]
    assert twin.simulate({"tiles": TILES, "mask": [0, 1, 0, 0, 1, 0]}, schedules=4,
                         check=False).ok
    # Exhaustive exploration keeps one fill for every schedule.
    r = k.simulate({"tiles": 3, "mask": [1, 0, 1]}, exhaustive_bound=1, schedules=50,
                   check=False)
    assert r[0].deadlocks == r[0].schedules > 0
    # A mask shorter than the loop reads: refused, not guessed.
    r = k.simulate({"tiles": TILES, "mask": [1, 1]}, schedules=1, check=False)
    assert "unsupported" in r[0].counts and "beyond the 2 values given" in str(r)


def test_flash_attention_2258_with_the_mask_loaded():
    """Both roles skip by the loaded mask; the consumer's phase flips on
    empty tiles too: after an odd number of them its wait names the wrong
    parity (it passes on an old phase, or hangs)."""
    bug, twin = _phase_flip(True), _phase_flip(False)
    r = bug.simulate({"tiles": TILES}, schedules=12, check=False)
    assert r[0].deadlocks > 0 and set(r[0].counts) <= {"deadlock", "early-read"}, str(r)
    assert "branches on memory" in str(r)
    assert bug.simulate({"tiles": 3, "mask": [1, 1, 1]}, schedules=3, check=False).ok
    assert not bug.simulate({"tiles": 3, "mask": [0, 1, 1]}, schedules=3, check=False).ok
    assert twin.simulate({"tiles": TILES}, schedules=12, check=False).ok


def test_cli_reads_a_buffer_argument():
    assert cli._kernel_arg("0=1,0,1") == (0, [1, 0, 1])
    assert cli._kernel_arg("1=8") == (1, 8)


def test_loop_bound_from_memory():
    """A tile's k-block count read from memory bounds the consumer's loop
    (the producer runs a fixed count): a hang unless every count read is
    the producer's; a count read as a huge unsigned value is refused."""
    k = Kernel("kblocks_from_memory", block_dim=64,
               params={"counts": GlobalPtr(), "tiles": Int32()})
    with k:
        counts, tiles = k.args
        pipe = _ring(k)
        with k.if_(k.warp_idx() == 0):
            s = make_pipeline_state(Producer, S)
            for _, (s,) in k.range(tiles, carry=[s]):
                pipe.producer_acquire(s)
                pipe.producer_commit(s)
                s.advance()
            pipe.producer_tail(s)
        with k.if_(k.warp_idx() == 1):
            c = make_pipeline_state(Consumer, S)
            for _, (c,) in k.range(load(counts, i32(), 0), carry=[c]):
                pipe.consumer_wait(c)
                pipe.consumer_release(c)
                c.advance()
    assert k.simulate({"tiles": 3, "counts": [3]}, schedules=3, check=False).ok
    r = k.simulate({"tiles": 3}, schedules=6, check=False)
    assert r[0].counts == {"deadlock": 6}, str(r)   # the fill's counts are 0 or 1
    assert "scf.for at" in str(r) and "branches on memory" in str(r) and " trips" in str(r)
    r = k.simulate({"tiles": 3, "counts": [-1]}, schedules=1, check=False)
    assert "unsupported" in r[0].counts and "computed from memory, give 4294967295" in str(r)
