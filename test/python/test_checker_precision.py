"""Code ported from CuTe DSL and flash-attention the way a user writes it
passes pipeline-verify-protocol (false positives it once reported), through the
builders; the bug twin of each is still rejected.

- flash-attention's ``*_w_index_phase`` / ``producer_commit_w_index``: the
  library builds a state per call, with phase 0 for the commit (whose phase
  nothing reads);
- a producer state resumed mid-stream, ``PipelineState(S, count, index,
  phase)`` with count > 0.
"""

import pytest

from pipeline_mlir.kernel import Int32, Kernel
from pipeline_mlir.pipeline import (Agent, CooperativeGroup, PipelineAsync,
                                    PipelineState, PipelineUserType,
                                    make_pipeline_state)

from _example_checks import protocol_warnings, simulate, verify_protocol

STAGES = 2


def _kernel(produce):
    """Warp 0 produces with ``produce(k, pipeline, n)``, warp 1 consumes with
    states (wait, release, advance) as many stages as it produces
    (``produce.stages(n)``, default ``n``): the stage-balance check compares
    the two."""
    k = Kernel("precision", block_dim=64, params={"n": Int32()})
    with k:
        (n,) = k.args
        pipeline = PipelineAsync.create(
            num_stages=STAGES, producer_group=CooperativeGroup(Agent.Thread, 32),
            consumer_group=CooperativeGroup(Agent.Thread, 32),
            barrier_storage=k.alloc_barriers(2 * STAGES))
        warp_idx = k.warp_idx()
        with k.if_(warp_idx == 0):
            produce(k, pipeline, n)
        with k.if_(warp_idx == 1):
            cons = make_pipeline_state(PipelineUserType.Consumer, STAGES)
            for _, _ in k.range(getattr(produce, "stages", lambda n: n)(n), carry=[cons]):
                pipeline.consumer_wait(cons)
                pipeline.consumer_release(cons)
                cons.advance()
    return str(k.module)


def produce_w_index_phase(k, pipeline, n):
    # flash-attention: (index, phase) computed from the iteration; the commit
    # names only the index.
    state = make_pipeline_state(PipelineUserType.Producer, STAGES)
    for _, _ in k.range(n, carry=[state]):
        pipeline.producer_acquire_w_index_phase(state.index, state.phase)
        pipeline.producer_commit_w_index(state.index)
        state.advance()
    pipeline.producer_tail(state)


def produce_unrolled_w_index_phase(k, pipeline, n):
    # Three trace-time stages: (0, 1), (1, 1), then stage 0 a lap later at
    # phase 0; each commit's state has phase 0.
    for i in range(3):
        pipeline.producer_acquire_w_index_phase(i % STAGES, (i // STAGES + 1) & 1)
        pipeline.producer_commit_w_index(i % STAGES)
    pipeline.producer_tail(PipelineState(STAGES, 3, 1, 0,
                                         user_type=PipelineUserType.Producer))


produce_unrolled_w_index_phase.stages = lambda n: 3


def produce_resumed(k, pipeline, n):
    # Two stages produced, then the producer state is rebuilt mid-stream
    # (count 2: index 0, phase 0 after one lap).
    first = make_pipeline_state(PipelineUserType.Producer, STAGES)
    for _ in range(STAGES):
        pipeline.producer_acquire(first)
        pipeline.producer_commit(first)
        first.advance()
    state = PipelineState(STAGES, STAGES, 0, 0, user_type=PipelineUserType.Producer)
    for _, _ in k.range(n, carry=[state]):
        pipeline.producer_acquire(state)
        pipeline.producer_commit(state)
        state.advance()
    pipeline.producer_tail(state)


produce_resumed.stages = lambda n: n + STAGES


@pytest.mark.parametrize("produce", [produce_w_index_phase, produce_unrolled_w_index_phase,
                                     produce_resumed])
def test_ported_producer_is_accepted(produce):
    text = _kernel(produce)
    assert verify_protocol(text) == []
    assert protocol_warnings(text) == []


def test_w_index_phase_kernel_runs_in_the_simulator():
    report = simulate(_kernel(produce_w_index_phase))["precision"]
    assert report.ok, report


def produce_started_at_phase_0(k, pipeline, n):
    # The bug twin: a hand-made start state at phase 0 (count 0).
    state = PipelineState(STAGES, 0, 0, 0, user_type=PipelineUserType.Producer)
    for _, _ in k.range(n, carry=[state]):
        pipeline.producer_acquire(state)
        pipeline.producer_commit(state)
        state.advance()
    pipeline.producer_tail(state)


def produce_first_w_index_at_phase_0(k, pipeline, n):
    # The bug twin: the first acquire of the pipeline at phase 0.
    pipeline.producer_acquire_w_index_phase(0, 0)
    pipeline.producer_commit_w_index(0)
    pipeline.producer_tail(PipelineState(STAGES, 1, 1, 1,
                                         user_type=PipelineUserType.Producer))


produce_first_w_index_at_phase_0.stages = lambda n: 1


@pytest.mark.parametrize("produce", [produce_started_at_phase_0,
                                     produce_first_w_index_at_phase_0])
def test_a_start_at_phase_0_is_rejected(produce):
    (error,) = verify_protocol(_kernel(produce))
    assert error.startswith("producer state starts at phase 0")


# -- The boundaries of the held-out rules (test_held_out_bugs_stage_counts.py) --

def produce_peeled_first(k, pipeline, n):
    # A peeled first iteration, then `range(1, n)`: the stage counts keep
    # the assumption n >= 1 (a loop from 1), as FlashAttention's mainloop
    # from k-block 1 does; a prologue of 2 or more stages is counted
    # max(0, n - S) and must be guarded.
    state = make_pipeline_state(PipelineUserType.Producer, STAGES)
    pipeline.producer_acquire(state)
    pipeline.producer_commit(state)
    state.advance()
    for _, _ in k.range(1, n, carry=[state]):
        pipeline.producer_acquire(state)
        pipeline.producer_commit(state)
        state.advance()
    pipeline.producer_tail(state)


def produce_guarded_prologue(k, pipeline, n):
    # A prologue of STAGES stages, each under `n > i`, then `range(STAGES, n)`:
    # [n > 0] + [n > 1] + max(0, n - 2) = n for every n.
    state = make_pipeline_state(PipelineUserType.Producer, STAGES)
    for i in range(STAGES):
        with k.if_(n > i, carry=[state]):
            pipeline.producer_acquire(state)
            pipeline.producer_commit(state)
            state.advance()
    for _, _ in k.range(STAGES, n, carry=[state]):
        pipeline.producer_acquire(state)
        pipeline.producer_commit(state)
        state.advance()
    pipeline.producer_tail(state)


def produce_commit_in_loop_variable_branch(k, pipeline, n):
    # Two stages per iteration of `range(0, n, 2)`, the second under
    # `t + 1 < n` (odd n): the branch holds on ceildiv(n - 1, 2) of the
    # loop's ceildiv(n, 2) iterations, and ceildiv(n, 2) + ceildiv(n - 1, 2)
    # = n for every n (no launch values make the counts differ).
    state = make_pipeline_state(PipelineUserType.Producer, STAGES)
    for t, _ in k.range(0, n, 2, carry=[state]):
        pipeline.producer_acquire(state)
        pipeline.producer_commit(state)
        state.advance()
        with k.if_(t + 1 < n, carry=[state]):
            pipeline.producer_acquire(state)
            pipeline.producer_commit(state)
            state.advance()
    pipeline.producer_tail(state)


@pytest.mark.parametrize("produce", [produce_peeled_first, produce_guarded_prologue,
                                     produce_commit_in_loop_variable_branch])
def test_loop_shapes_near_the_count_rules_are_accepted(produce):
    text = _kernel(produce)
    assert verify_protocol(text) == []
    assert protocol_warnings(text) == []


def produce_unguarded_prologue(k, pipeline, n):
    # The bug twin of produce_guarded_prologue: with n < STAGES the prologue
    # fills stages the consumer never takes.
    state = make_pipeline_state(PipelineUserType.Producer, STAGES)
    for _ in range(STAGES):
        pipeline.producer_acquire(state)
        pipeline.producer_commit(state)
        state.advance()
    for _, _ in k.range(STAGES, n, carry=[state]):
        pipeline.producer_acquire(state)
        pipeline.producer_commit(state)
        state.advance()
    pipeline.producer_tail(state)


def test_an_unguarded_prologue_is_rejected():
    (error,) = verify_protocol(_kernel(produce_unguarded_prologue))
    assert "commits max(0, n - 2) + 2 stages" in error, error


def _four_warp_consumers(release, group):
    """Warp 0 produces, warps 1-4 each wait on every stage and release it
    with ``release(k, pipeline, state)``."""
    from pipeline_mlir.pipeline import NamedBarrier

    k = Kernel("releasers", block_dim=160, params={"n": Int32()})
    with k:
        (n,) = k.args
        pipeline = PipelineAsync.create(
            num_stages=STAGES, producer_group=CooperativeGroup(Agent.Thread, 32),
            consumer_group=group, barrier_storage=k.alloc_barriers(2 * STAGES))
        with k.if_(k.warp_idx() == 0):
            produce_w_index_phase(k, pipeline, n)
        with k.if_(k.warp_idx() >= 1):
            role = NamedBarrier(1, 128)
            cons = make_pipeline_state(PipelineUserType.Consumer, STAGES)
            for _, _ in k.range(n, carry=[cons]):
                pipeline.consumer_wait(cons)
                release(k, pipeline, cons, role)
                cons.advance()
    return str(k.module)


def release_elected_per_warp(k, pipeline, state, role):
    with k.elect_one():
        pipeline.consumer_release(state)


def release_by_one_thread_after_role_barrier(k, pipeline, state, role):
    role.sync()
    with k.if_(k.thread_idx() == 32):
        pipeline.consumer_release(state)


def release_by_one_thread(k, pipeline, state, role):
    with k.if_(k.thread_idx() == 32):
        pipeline.consumer_release(state)


@pytest.mark.parametrize("release, group", [
    (release_elected_per_warp, CooperativeGroup(Agent.Thread, 4)),
    (release_by_one_thread_after_role_barrier, CooperativeGroup(Agent.Thread, 1)),
], ids=["elected_per_warp", "one_thread_after_role_barrier"])
def test_releases_that_cover_every_waiting_warp_are_accepted(release, group):
    text = _four_warp_consumers(release, group)
    assert verify_protocol(text) == []
    assert protocol_warnings(text) == []


def test_one_thread_releasing_for_four_warps_is_rejected():
    (error,) = verify_protocol(_four_warp_consumers(release_by_one_thread,
                                                    CooperativeGroup(Agent.Thread, 1)))
    assert "warps 1-4 wait on each stage but only warp 1 releases it" in error, error


# The simulator's kernels of a stage one thread releases for a role whose
# warps read it asynchronously (test_sim_release_by_another_warp.py): the
# checker (check 8, a release by another warp of the role) agrees with it on
# the wgmma and the bulk store: each read retired before the role barrier
# passes, retired after it is refused at the release.
@pytest.mark.parametrize("reader, others", [("wgmma", "warps 1-3"), ("bulk", "warp 1")])
def test_a_read_of_another_warp_at_the_release(reader, others):
    from test_sim_release_by_another_warp import _kernel

    twin, _ = _kernel(reader, True)
    assert verify_protocol(str(twin.module)) == []
    bug, _ = _kernel(reader, False)
    (error,) = verify_protocol(str(bug.module))
    assert (f"pipeline.consumer.release by warp 0 hands back a stage of pipeline 'tiles' for "
            f"{others} too (the release ends their hold)") in error, error
    assert "it is retired only after the barrier that orders this release" in error, error


# A loop from 1 with nothing peeled before it makes no promise that n >= 1:
# `range(1, n)` then one last stage fills a stage nobody consumes at n = 0
# (refused); the last stage guarded by `n > 0` passes.
def _produce_from_1_then_last(guarded):
    def produce(k, pipeline, n):
        state = make_pipeline_state(PipelineUserType.Producer, STAGES)
        for _, _ in k.range(1, n, carry=[state]):
            pipeline.producer_acquire(state)
            pipeline.producer_commit(state)
            state.advance()
        if guarded:
            with k.if_(n > 0, carry=[state]):
                pipeline.producer_acquire(state)
                pipeline.producer_commit(state)
                state.advance()
        else:
            pipeline.producer_acquire(state)
            pipeline.producer_commit(state)
            state.advance()
        pipeline.producer_tail(state)
    return produce


def test_a_loop_from_1_without_a_peeled_first_iteration():
    assert verify_protocol(_kernel(_produce_from_1_then_last(True))) == []
    (error,) = verify_protocol(_kernel(_produce_from_1_then_last(False)))
    assert "commits max(0, n - 1) + 1 stages" in error and "(for n = 0: 1 against 0)" in error, \
        error
