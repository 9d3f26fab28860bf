"""Ping-pong consumer warpgroups (CUTLASS's
sm90_gemm_tma_warpspecialized_pingpong): two consumer warpgroups take
alternate tiles of one ring. Each consumes the k_tiles stages of its tile,
then ``state.advance(k_tiles)`` skips the other warpgroup's tile, and a
``PipelineOrder`` makes them take turns (mainloop, then epilogue).

The simulator used to report the correct kernel as "wrong initial phase"
whenever k_tiles was not a multiple of 2 x stages: it told which phase a
wait meant from the phase the warp had observed last on that barrier, which
is one lap behind for a state that jumps over stages another warp consumed.
It now takes the phase number from the state (a start state advanced n
times means phase n // stages of its stage), and a wait passes as the
hardware's does, on the barrier's parity. That also finds the race the
order barrier prevents: without it, a warpgroup that jumps over the other's
tile may reach stage s while the other tile's phase of s has not completed
yet, and the parity it waits for then names the phase before, which has
(k_tiles >= stages; below that the previous phase of every stage it waits
on is its own).

Bug / twin pairs: the ordered kernel is clean for every k_tiles and stage
count (checker and simulator); without the order, with a skip of the wrong
length, or without the skip, the simulator reports it.
"""

import inspect
import itertools

import pytest

from _example_checks import protocol_warnings, verify_protocol
from pipeline_mlir.kernel import GlobalPtr, Int32, Kernel
from pipeline_mlir.pipeline import (Agent, CooperativeGroup, PipelineAsync,
                                    PipelineOrder, PipelineUserType,
                                    make_pipeline_state)

HERE = __file__
LINES = {}


def _mark(name):
    """Remember the caller's next line under ``name``."""
    LINES[name] = inspect.currentframe().f_back.f_lineno + 1


def pingpong(stages, k_tiles, *, order=True, skip="k_tiles", warps=1, one_role=False):
    """Warp 0 produces ``ntiles`` tiles of ``k_tiles`` stages; consumer
    warpgroup g (``warps`` warps from warp 1 + g * warps) takes tiles g,
    g + 2, ... ``skip``: how far a warpgroup advances past the other's tile
    ("k_tiles", an int, or None for no skip). ``one_role``: both warpgroups
    run one code path (CUTLASS's form: the start offset and the tiles come
    from the warpgroup index) instead of a Python loop of roles."""
    threads = 32 * warps
    k = Kernel("pingpong_consumers", block_dim=32 + 2 * threads,
               params={"ntiles": Int32(), "out": GlobalPtr()})
    with k:
        ntiles, _ = k.args
        pipe = PipelineAsync.create(
            num_stages=stages, producer_group=CooperativeGroup(Agent.Thread, 32),
            # Each stage is released by one warpgroup: the one whose tile it holds.
            consumer_group=CooperativeGroup(Agent.Thread, threads),
            barrier_storage=k.alloc_barriers(2 * stages), name="ab")
        warp = k.warp_idx()
        wg = (warp - 1) // warps
        if order:
            # CUTLASS: group_id = canonical_warp_group_idx() - Consumer0.
            turns = PipelineOrder.create(k.alloc_barriers(4), depth=2, length=2,
                                         group_id=wg, producer_group=CooperativeGroup(
                                             Agent.Thread, threads), name="turns")
        with k.if_(warp == 0):
            prod = make_pipeline_state(PipelineUserType.Producer, stages)
            for _, _ in k.range(ntiles, carry=[prod]):
                for _, _ in k.range(k_tiles, carry=[prod]):
                    pipe.producer_acquire(prod)
                    pipe.producer_commit(prod)
                    prod.advance()
            pipe.producer_tail(prod)
        for g in ([None] if one_role else range(2)):
            if one_role:
                role = warp >= 1
            else:
                first = 1 + g * warps
                role = (warp >= first) & (warp < first + warps)
            with k.if_(role, carry=[turns] if order and not one_role else []):
                cons = make_pipeline_state(PipelineUserType.Consumer, stages)
                if one_role:
                    g = wg
                    with k.if_(wg == 1, carry=[cons]):
                        cons.advance(k_tiles)
                elif g == 1:
                    cons.advance(k_tiles)  # warpgroup 1 starts at tile 1
                for _, _ in k.range(g, ntiles, 2, carry=[cons] + ([turns] if order else [])):
                    if order:
                        turns.wait()  # mainloop after the other's mainloop
                    for _, _ in k.range(k_tiles, carry=[cons]):
                        _mark("wait")
                        pipe.consumer_wait(cons)
                        pipe.consumer_release(cons)
                        cons.advance()
                    if order:
                        turns.arrive()
                    if skip is not None:
                        cons.advance(k_tiles if skip == "k_tiles" else skip)
                    if order:
                        turns.wait()  # epilogue after the other's epilogue
                        turns.arrive()
    return k


SWEEP = list(itertools.product(range(2, 6), range(1, 10)))


@pytest.mark.parametrize("stages,k_tiles", SWEEP)
def test_ordered_pingpong_is_clean_for_every_k_tiles(stages, k_tiles):
    k = pingpong(stages, k_tiles)
    result = k.simulate({"ntiles": 5}, schedules=8, check=False)
    assert result.ok, str(result)


@pytest.mark.parametrize("stages,k_tiles", [(2, 3), (4, 3), (3, 7)])
def test_ordered_pingpong_passes_the_checker(stages, k_tiles):
    text = str(pingpong(stages, k_tiles).module)
    assert verify_protocol(text) == []
    assert protocol_warnings(text) == []


def test_ordered_pingpong_of_whole_warpgroups_is_clean():
    k = pingpong(3, 5, warps=4)
    assert verify_protocol(str(k.module)) == []
    assert k.simulate({"ntiles": 4}, schedules=4, check=False).ok


@pytest.mark.parametrize("stages,k_tiles", [(2, 2), (2, 3), (3, 5), (4, 4), (5, 9)])
def test_unordered_pingpong_reads_a_stale_stage(stages, k_tiles):
    # k_tiles >= stages: the stage before a jump's target belongs to the
    # other warpgroup's tile, and nothing orders the wait after it.
    result = pingpong(stages, k_tiles, order=False).simulate(
        {"ntiles": 5}, schedules=10, check=False)
    (one,) = result
    assert "early-read" in one.counts, str(result)
    finding = next(f for f in one.findings if f.kind == "early-read")
    assert "PipelineOrder.wait" in finding.message
    assert "jumped over phase" in finding.message
    assert any(f"{HERE}:{LINES['wait']}:" in w for w in finding.where), finding.where


@pytest.mark.parametrize("stages,k_tiles", [(2, 1), (3, 2), (5, 4)])
def test_unordered_pingpong_with_short_tiles_is_correct(stages, k_tiles):
    # The twin: k_tiles < stages, the previous phase of every stage a
    # warpgroup waits on is one it waited on itself.
    result = pingpong(stages, k_tiles, order=False).simulate(
        {"ntiles": 5}, schedules=10, check=False)
    assert result.ok, str(result)


@pytest.mark.parametrize("skip", [None, 0, "minus", "plus"])
@pytest.mark.parametrize("stages,k_tiles", [(2, 3), (3, 4), (4, 1)])
def test_wrong_skip_is_reported(stages, k_tiles, skip):
    amount = {"minus": k_tiles - 1, "plus": k_tiles + 1}.get(skip, skip)
    result = pingpong(stages, k_tiles, skip=amount).simulate(
        {"ntiles": 5}, schedules=10, check=False)
    assert not result.ok, (skip, str(result))


@pytest.mark.parametrize("stages,k_tiles", [(2, 3), (3, 5), (4, 2)])
def test_one_role_pingpong_is_clean(stages, k_tiles):
    # CUTLASS's form: one code path for both consumer warpgroups. Each
    # stage is released by one warpgroup, so the count is one warpgroup's
    # threads; the implied-count check cannot tell that from the role's
    # warps and leaves it alone.
    k = pingpong(stages, k_tiles, warps=4, one_role=True)
    assert verify_protocol(str(k.module)) == []
    assert k.simulate({"ntiles": 4}, schedules=4, check=False).ok


def test_one_role_pingpong_without_order_is_reported():
    result = pingpong(2, 3, one_role=True, order=False).simulate(
        {"ntiles": 5}, schedules=10, check=False)
    assert "early-read" in result[0].counts, str(result)
