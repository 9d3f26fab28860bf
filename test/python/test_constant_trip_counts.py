"""Constant trip counts, including 1 (tilelang#2566: a
single-iteration warp-specialized pipelined loop hangs). The stage-balance
check (pipeline-verify-protocol check 11) counted a loop as
``ceildiv(ub - lb, step)`` iterations, assuming every loop runs: right for
run-time bounds (the comparison is then made where they do), wrong for a
constant loop that runs backwards. A producer that fills ``stages`` stages
and then loops over ``[stages, k_tiles)`` with a constant ``k_tiles = 1``
counted 2 - 1 = 1 stage, equal to the consumer's, and the hang passed. It
now counts 0 iterations for such a loop (and for a branch on the variable of
a constant loop whose bound lies outside its range:
``test/Dialect/Pipeline/VerifyProtocol/stage-balance-constant.mlir``).
Each bug has its correct twin.
"""

import inspect

import pytest

from pipeline_mlir.kernel import Int32, Kernel
from pipeline_mlir.pipeline import (Agent, CooperativeGroup, PipelineAsync,
                                    PipelineUserType, make_pipeline_state)

from test_stage_balance import check

T32 = CooperativeGroup(Agent.Thread, 32)
Producer, Consumer = PipelineUserType.Producer, PipelineUserType.Consumer


def ring(k, stages=2):
    return PipelineAsync.create(num_stages=stages, producer_group=T32, consumer_group=T32,
                                barrier_storage=k.alloc_barriers(2 * stages), name="ab")


def _prologue_kernel(k_tiles, prefetch):
    """Warp 0 fills ``prefetch`` stages, then the rest of ``k_tiles`` in a
    main loop over [prefetch, k_tiles); warp 1 consumes ``k_tiles``.
    Returns (kernel, line of the consumer's release)."""
    stages = 2
    k = Kernel("prologue", block_dim=64)
    with k:
        p = ring(k, stages)
        warp = k.warp_idx()
        with k.if_(warp == 0):
            s = make_pipeline_state(Producer, stages)
            for _, (s,) in k.range(prefetch, carry=[s]):
                p.producer_acquire(s)
                p.producer_commit(s)
                s.advance()
            for _, (s,) in k.range(prefetch, k_tiles, carry=[s]):
                p.producer_acquire(s)
                p.producer_commit(s)
                s.advance()
            p.producer_tail(s)
        with k.if_(warp == 1):
            c = make_pipeline_state(Consumer, stages)
            for _, (c,) in k.range(k_tiles, carry=[c]):
                p.consumer_wait(c)
                p.consumer_release(c); line = inspect.currentframe().f_lineno
                c.advance()
    return k, line


@pytest.mark.parametrize("k_tiles,counts", [
    (1, "commits 2 stages, the consumer role (one warp) releases 1 (2 against 1)"),
    (0, "commits 2 stages, the consumer role (one warp) releases 0 (2 against 0)"),
])
def test_prologue_past_a_short_constant_loop_is_reported(k_tiles, counts):
    k, line = _prologue_kernel(k_tiles, prefetch=2)
    errors, _ = check(None, module=k.module)
    assert len(errors) == 1, errors
    assert f"test_constant_trip_counts.py\":{line}:" in errors[0]
    assert f"pipeline 'ab': the producer role (one warp) {counts}" in errors[0]
    assert "the producer fills stages nobody consumes" in errors[0]


@pytest.mark.parametrize("k_tiles", [0, 1, 2, 5])
def test_prologue_of_min_stages_twin_is_silent(k_tiles):
    # CUTLASS's prefetch count: min(stages, k_tiles).
    k, _ = _prologue_kernel(k_tiles, prefetch=min(2, k_tiles))
    assert check(None, module=k.module) == ([], [])


@pytest.mark.parametrize("producer,consumer", [(4, 3), (1, 2), (3, 1)])
def test_constant_trip_counts_that_differ_are_reported(producer, consumer):
    k = Kernel("const_trips", block_dim=64)
    with k:
        p = ring(k)
        warp = k.warp_idx()
        with k.if_(warp == 0):
            s = make_pipeline_state(Producer, 2)
            for _, (s,) in k.range(producer, carry=[s]):
                p.producer_acquire(s)
                p.producer_commit(s)
                s.advance()
            p.producer_tail(s)
        with k.if_(warp == 1):
            c = make_pipeline_state(Consumer, 2)
            for _, (c,) in k.range(consumer, carry=[c]):
                p.consumer_wait(c)
                p.consumer_release(c)
                c.advance()
    errors, _ = check(None, module=k.module)
    assert len(errors) == 1, errors
    assert f"({producer} against {consumer})" in errors[0]


def test_mixed_constant_and_runtime_counts_are_compared():
    """A constant producer loop against a consumer loop over a kernel
    argument: equal only for one launch value."""
    k = Kernel("mixed_trips", block_dim=64, params={"n": Int32()})
    with k:
        (n,) = k.args
        p = ring(k)
        warp = k.warp_idx()
        with k.if_(warp == 0):
            s = make_pipeline_state(Producer, 2)
            for _, (s,) in k.range(1, carry=[s]):
                p.producer_acquire(s)
                p.producer_commit(s)
                s.advance()
            p.producer_tail(s)
        with k.if_(warp == 1):
            c = make_pipeline_state(Consumer, 2)
            for _, (c,) in k.range(n, carry=[c]):
                p.consumer_wait(c)
                p.consumer_release(c)
                c.advance()
    errors, _ = check(None, module=k.module)
    assert len(errors) == 1, errors
    assert "commits 1 stage, the consumer role (one warp) releases n (for n = 2: " \
           "1 against 2)" in errors[0]
