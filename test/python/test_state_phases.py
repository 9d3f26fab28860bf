"""Property 14 of pipeline-verify-protocol from Python: phases the loop
structure decides, each bug next to its correct twin, with the checker's
error at the user's line and the simulator's finding (it catches the same
bugs at run time) naming the user's line too.

- ``make_pipeline_state`` inside the persistent tile loop: the state
  restarts at (index 0, start phase) every tile while the barriers keep
  their phases (the twin carries the state across tiles; a tile of a
  multiple of 2 x stages k-blocks makes the restart harmless);
- the same restart with an explicit pair computed from the k loop's
  variable alone (``consumer_wait_w_index_phase(k % S, (k // S) % 2)``
  inside the tile loop; the twin counts k across tiles);
- ``consumer_wait_w_index_phase(k % S, k % 2)``: the phase flips every
  iteration instead of every lap of the ring (tilelang#3087);
- ``consumer_wait_w_index_phase(k % S, (k // S + 1) % 2)``: an explicit-phase
  waiter whose first iteration starts at the producer's parity
  (flash-attention#1317's shape), and flash-attention's packed
  ``PipelineStateSimple(S, k)`` for a producer, whose phase_index counts
  from ``S``.
"""

import inspect

import mlir.ir as ir
import mlir.passmanager as passmanager
import pytest

from pipeline_mlir.kernel import GlobalPtr, Int32, Kernel
from pipeline_mlir.pipeline import (Agent, CooperativeGroup, PipelineAsync,
                                    PipelineStateSimple, PipelineUserType,
                                    make_pipeline_state)

HERE = __file__
STAGES = 2


def _line():
    """The caller's next line."""
    return inspect.currentframe().f_back.f_lineno + 1


def build(consumer, k_tiles=None):
    """Warp 0 fills ``ntiles`` tiles of ``k_tiles`` stages (a kernel argument
    unless given) with a state carried across tiles; warp 1 consumes them as
    ``consumer`` says. Returns the kernel and the line of the consumer's
    state (its make, or the explicit-phase wait)."""
    k = Kernel("state_phases", block_dim=64,
               params={"ntiles": Int32(), "k_tiles": Int32(), "out": GlobalPtr()})
    with k:
        ntiles, k_arg, _ = k.args
        kt = k_arg if k_tiles is None else k_tiles
        warp_group = CooperativeGroup(Agent.Thread, 32)
        pipe = PipelineAsync.create(num_stages=STAGES, producer_group=warp_group,
                                    consumer_group=warp_group,
                                    barrier_storage=k.alloc_barriers(2 * STAGES), name="ab")
        warp = k.warp_idx()
        with k.if_(warp == 0):
            prod = make_pipeline_state(PipelineUserType.Producer, STAGES)
            for _, _ in k.range(ntiles, carry=[prod]):
                for _, _ in k.range(kt, carry=[prod]):
                    pipe.producer_acquire(prod)
                    pipe.producer_commit(prod)
                    prod.advance()
            pipe.producer_tail(prod)
        with k.if_(warp == 1):
            if consumer in ("restarted", "carried"):
                if consumer == "carried":
                    line = _line()
                    cons = make_pipeline_state(PipelineUserType.Consumer, STAGES)
                for _, _ in k.range(ntiles, carry=[cons] if consumer == "carried" else []):
                    if consumer == "restarted":
                        line = _line()
                        cons = make_pipeline_state(PipelineUserType.Consumer, STAGES)
                    for _, _ in k.range(kt, carry=[cons]):
                        pipe.consumer_wait(cons)
                        pipe.consumer_release(cons)
                        cons.advance()
            elif consumer in ("explicit_per_tile", "explicit_across_tiles"):
                for t, _ in k.range(ntiles):
                    for kk, _ in k.range(kt):
                        n = kk if consumer == "explicit_per_tile" else t * kt + kk
                        line = _line()
                        pipe.consumer_wait_w_index_phase(n % STAGES, (n // STAGES) % 2)
                        pipe.consumer_release_w_index(n % STAGES)
            else:
                for t, _ in k.range(ntiles * kt):
                    phase = {"flip_every_iteration": t % 2,
                             "flip_every_lap": (t // STAGES) % 2,
                             "start_at_one": (t // STAGES + 1) % 2}[consumer]
                    line = _line()
                    pipe.consumer_wait_w_index_phase(t % STAGES, phase)
                    pipe.consumer_release_w_index(t % STAGES)
    return k, line


def check(k):
    """The checker's error diagnostics (empty when it accepts)."""
    try:
        passmanager.PassManager.parse("builtin.module(pipeline-verify-protocol)",
                                      context=k.context).run(k.module.operation)
    except ir.MLIRError as e:
        return e.error_diagnostics
    return []


def test_restarted_state_is_an_error_at_its_line():
    k, line = build("restarted")
    (diag,) = check(k)
    assert f'"{HERE}":{line}:' in str(diag.location)
    assert ("pipeline 'ab': the consumer state is made inside a loop "
            "(make_pipeline_state(PipelineUserType.Consumer, 2) runs again every "
            "iteration") in diag.message
    assert "carry it (k.range(..., carry=[state]))" in diag.message


def test_restarted_state_with_a_constant_tile_names_its_length():
    k, _ = build("restarted", k_tiles=3)
    (diag,) = check(k)
    assert "one iteration walks 3 stage(s), not a multiple of 2 x 2 stages" in diag.message


def test_restart_after_a_multiple_of_two_laps_is_accepted():
    # 4 k-blocks of 2 stages: every stage is back at its start parity.
    k, _ = build("restarted", k_tiles=4)
    assert check(k) == []
    assert k.simulate({"ntiles": 3}, schedules=5, check=False).ok


def test_carried_state_is_accepted():
    k, _ = build("carried")
    assert check(k) == []
    assert k.simulate({"ntiles": 3, "k_tiles": 3}, schedules=5, check=False).ok


def test_simulator_finds_the_restart_at_the_users_line():
    k, _ = build("restarted")
    result = k.simulate({"ntiles": 3, "k_tiles": 3}, schedules=5, check=False)
    (one,) = result
    assert not one.ok
    assert all(f.where for f in one.findings), one.findings
    assert any(HERE in w for f in one.findings for w in f.where)


def test_phase_flipped_every_iteration_is_an_error():
    k, line = build("flip_every_iteration")
    (diag,) = check(k)
    assert f'"{HERE}":{line}:' in str(diag.location)
    assert ("the phase given to this state flips at iteration 1 of the loop, where "
            "the index goes from 0 to 1 of 2 stages") in diag.message
    assert "compute the phase as (k // 2) % 2" in diag.message


def test_phase_flipped_every_lap_is_accepted():
    k, _ = build("flip_every_lap")
    assert check(k) == []
    assert k.simulate({"ntiles": 3, "k_tiles": 3}, schedules=5, check=False).ok


def test_explicit_phase_starting_at_one_is_an_error():
    k, line = build("start_at_one")
    (diag,) = check(k)
    assert f'"{HERE}":{line}:' in str(diag.location)
    assert ("in the loop's first iteration this state is (index 0, phase 1) and the "
            "consumer's first pipeline.consumer.wait on the pipeline reads it") in diag.message


@pytest.mark.parametrize("consumer", ["flip_every_iteration", "start_at_one"])
def test_simulator_finding_carries_the_users_line(consumer):
    k, line = build(consumer)
    (one,) = k.simulate({"ntiles": 3, "k_tiles": 3}, schedules=5, check=False)
    assert not one.ok
    assert any(f"{HERE}:{line}:" in w for f in one.findings for w in f.where), one.findings


def test_explicit_pair_restarted_per_tile_is_an_error():
    k, line = build("explicit_per_tile", k_tiles=3)
    (diag,) = check(k)
    assert f'"{HERE}":{line}:' in str(diag.location)
    assert ("this state's (index, phase) is computed from the inner loop's variables "
            "alone") in diag.message
    assert "one pass of the inner loop walks 3 stage(s)" in diag.message
    (one,) = k.simulate({"ntiles": 3}, schedules=5, check=False)
    assert not one.ok


def test_explicit_pair_counted_across_tiles_is_accepted():
    k, _ = build("explicit_across_tiles", k_tiles=3)
    assert check(k) == []
    assert k.simulate({"ntiles": 3}, schedules=5, check=False).ok


def packed_producer(offset):
    """flash-attention's producer: a PipelineStateSimple per iteration from
    the loop variable, phase_index ``k + offset`` (``offset`` = stages is
    the producer's start). Returns the kernel and the state's line."""
    k = Kernel("packed_producer", block_dim=64, params={"n": Int32(), "out": GlobalPtr()})
    with k:
        n, _ = k.args
        warp_group = CooperativeGroup(Agent.Thread, 32)
        pipe = PipelineAsync.create(num_stages=STAGES, producer_group=warp_group,
                                    consumer_group=warp_group,
                                    barrier_storage=k.alloc_barriers(2 * STAGES), name="kv")
        warp = k.warp_idx()
        with k.if_(warp == 0):
            for i, _ in k.range(n):
                line = _line()
                st = PipelineStateSimple(STAGES, i + offset, user_type=PipelineUserType.Producer)
                pipe.producer_acquire(st)
                pipe.producer_commit(st)
            pipe.producer_tail(PipelineStateSimple(STAGES, n + offset,
                                                   user_type=PipelineUserType.Producer))
        with k.if_(warp == 1):
            cons = make_pipeline_state(PipelineUserType.Consumer, STAGES)
            for _, _ in k.range(n, carry=[cons]):
                pipe.consumer_wait(cons)
                pipe.consumer_release(cons)
                cons.advance()
    return k, line


def test_packed_producer_counting_from_zero_is_an_error():
    k, line = packed_producer(0)
    (diag,) = check(k)
    assert f'"{HERE}":{line}:' in str(diag.location)
    assert ("in the loop's first iteration this state is (index 0, phase 0) and the "
            "producer's first pipeline.producer.acquire on the pipeline reads it") in diag.message
    assert "PipelineStateSimple(2, 2 + k)" in diag.message
    (one,) = k.simulate({"n": 5}, schedules=5, check=False)
    assert one.counts.get("deadlock")


def test_packed_producer_counting_from_stages_is_accepted():
    k, _ = packed_producer(STAGES)
    assert check(k) == []
    assert k.simulate({"n": 5}, schedules=5, check=False).ok
