"""Arrive counts under the docs' role idioms, through the
Python API: the checker derives who releases a stage from the role
conditions -- `warpgroup = k.warp_idx() // 4`, `k.if_(warpgroup == i)` in a
Python loop, `.else_()` -- and compares the arrivals with the group's count.

| report              | shape                                           | bug           | twin  |
|---------------------|-------------------------------------------------|---------------|-------|
| ThunderKittens#115  | 4 consumer warpgroups (Python loop), count of 2 | Thread, 256   | 512   |
| ThunderKittens#115  | `tid // 128 < 4`, one role, count of 2          | Thread, 256   | 512   |
| cutlass#2418        | ping-pong consumer warpgroups, count of 1       | Thread, 1     | 128   |
| (cooperative pair)  | 2 warpgroups, same code, ping-pong's count      | Thread, 128   | 256   |
| (else_ role split)  | warpgroup 0 produces, else: 2 warpgroups        | Thread, 128   | 256   |

Each bug fails compile() at the pipeline's creation line, in the Python
API's words (CooperativeGroup(Agent.Thread, n), consumer_release), naming
the declared count and the arrivals; each twin compiles. The simulator
confirms the TK#115 hang's mechanism (phases complete early: a producer
overwrites a stage still being read, or the ring deadlocks).
"""

import inspect

import pytest

from pipeline_mlir import diagnostics
from pipeline_mlir.compiler import CompileError
from pipeline_mlir.kernel import Int32, Kernel
from pipeline_mlir.pipeline import (Agent, CooperativeGroup, PipelineAsync,
                                    PipelineUserType, make_pipeline_state)

Producer, Consumer = PipelineUserType.Producer, PipelineUserType.Consumer
STAGES = 4


@pytest.fixture(autouse=True)
def _fresh_cache(tmp_path, monkeypatch):
    # A cached cubin would skip the checker.
    monkeypatch.setenv("PIPELINE_MLIR_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv(diagnostics.ENV_VERBOSE, raising=False)


def produce(k, pipe, n):
    """Warp 0 fills `n` stages (whole-warp commits: producer group Thread 32)."""
    s = make_pipeline_state(Producer, STAGES)
    for _, (s,) in k.range(n, carry=[s]):
        pipe.producer_acquire(s)
        pipe.producer_commit(s)
        s.advance()
    pipe.producer_tail(s)


def consume(k, pipe, n, state=None):
    """Every thread of the role waits on and releases `n` stages."""
    c = state if state is not None else make_pipeline_state(Consumer, STAGES)
    for _, (c,) in k.range(n, carry=[c]):
        pipe.consumer_wait(c)
        pipe.consumer_release(c)
        c.advance()
    return c


def thunderkittens_115(consumer_threads, warpgroups=4):
    """Warpgroup 0 produces; consumer warpgroups 1..4, built in a Python
    loop, each release every stage (cooperative): 4 x 128 arrivals."""
    k = Kernel("tk115", chip="sm_90a", block_dim=(warpgroups + 1) * 128,
               params={"n": Int32()})
    with k:
        (n,) = k.args
        line = inspect.currentframe().f_lineno + 1
        pipe = PipelineAsync.create(
            num_stages=STAGES, producer_group=CooperativeGroup(Agent.Thread, 32),
            consumer_group=CooperativeGroup(Agent.Thread, consumer_threads),
            barrier_storage=k.alloc_barriers(2 * STAGES))
        warp = k.warp_idx()
        warpgroup = warp // 4
        with k.if_(warp == 0):
            produce(k, pipe, n)
        for i in range(1, warpgroups + 1):
            with k.if_(warpgroup == i):
                consume(k, pipe, n)
    return k, line


def thunderkittens_115_range(consumer_threads):
    """The same kernel with one consumer role over a range of warpgroups:
    `warpgroup < 4` with the warpgroup as `tid // 128`; warpgroup 4 produces."""
    k = Kernel("tk115_range", chip="sm_90a", block_dim=5 * 128, params={"n": Int32()})
    with k:
        (n,) = k.args
        line = inspect.currentframe().f_lineno + 1
        pipe = PipelineAsync.create(
            num_stages=STAGES, producer_group=CooperativeGroup(Agent.Thread, 32),
            consumer_group=CooperativeGroup(Agent.Thread, consumer_threads),
            barrier_storage=k.alloc_barriers(2 * STAGES))
        warpgroup = k.thread_idx() // 128
        with k.if_(k.warp_idx() == 16):
            produce(k, pipe, n)
        with k.if_(warpgroup < 4):
            consume(k, pipe, n)
    return k, line


def cutlass_2418(consumer_threads):
    """CUTLASS's ping-pong: consumer warpgroups 1 and 2 take turns by tiles
    of `k_tiles` stages (warpgroup 2 starts one tile in; after each tile
    each skips the other's), so each stage is released by one warpgroup."""
    k = Kernel("cutlass2418", chip="sm_90a", block_dim=3 * 128,
               params={"tiles": Int32(), "k_tiles": Int32()})
    with k:
        tiles, k_tiles = k.args
        line = inspect.currentframe().f_lineno + 1
        pipe = PipelineAsync.create(
            num_stages=STAGES, producer_group=CooperativeGroup(Agent.Thread, 32),
            consumer_group=CooperativeGroup(Agent.Thread, consumer_threads),
            barrier_storage=k.alloc_barriers(2 * STAGES))
        warp = k.warp_idx()
        warpgroup = warp // 4
        with k.if_(warp == 0):
            s = make_pipeline_state(Producer, STAGES)
            for _, (s,) in k.range(tiles * 2, carry=[s]):
                for _, (s,) in k.range(k_tiles, carry=[s]):
                    pipe.producer_acquire(s)
                    pipe.producer_commit(s)
                    s.advance()
            pipe.producer_tail(s)
        for i in range(2):
            with k.if_(warpgroup == i + 1):
                c = make_pipeline_state(Consumer, STAGES)
                if i == 1:
                    c.advance(k_tiles)
                for _, (c,) in k.range(tiles, carry=[c]):
                    consume(k, pipe, k_tiles, c)
                    c.advance(k_tiles)       # the other warpgroup's tile
    return k, line


def else_split(consumer_threads):
    """The docs' role split: warpgroup 0 produces, `.else_()` (warpgroups 1
    and 2 of 384 threads) consumes with every thread: 256 arrivals."""
    k = Kernel("else_split", chip="sm_90a", block_dim=3 * 128, params={"n": Int32()})
    with k:
        (n,) = k.args
        line = inspect.currentframe().f_lineno + 1
        pipe = PipelineAsync.create(
            num_stages=STAGES, producer_group=CooperativeGroup(Agent.Thread, 128),
            consumer_group=CooperativeGroup(Agent.Thread, consumer_threads),
            barrier_storage=k.alloc_barriers(2 * STAGES))
        warpgroup = k.warp_idx() // 4
        with k.if_(warpgroup == 0) as producer:
            produce(k, pipe, n)
        with producer.else_():
            consume(k, pipe, n)
    return k, line


def compile_error(k):
    with pytest.raises(CompileError) as err:
        k.compile()
    return str(err.value)


def test_thunderkittens_115_four_warpgroups_counted_as_two():
    k, line = thunderkittens_115(256)
    msg = compile_error(k)
    first = msg.splitlines()[0]
    assert first.startswith(f"{__file__}:{line}:")
    assert (
        "error: PipelineAsync pipeline: the consumer group CooperativeGroup(Agent.Thread, 256) "
        "expects 256 arrivals per phase, but 4 consumer roles release it (warps 4-7: whole-warp "
        "consumer_release, 128; warps 8-11: whole-warp consumer_release, 128; warps 12-15: "
        "whole-warp consumer_release, 128; warps 16-19: whole-warp consumer_release, 128): the "
        "roles run the same code, which does not depend on the warp index, so each releases "
        "every stage and the barrier gets 512 per phase: phases complete early and producers "
        "overwrite a stage still being read; use CooperativeGroup(Agent.Thread, 512)") in first
    assert msg.count("note: a consumer role (warps") == 4


def test_cooperative_warpgroups_counted_as_one():
    # Two warpgroups with the same code release every stage: a count of one
    # warpgroup (the ping-pong count) completes each phase twice.
    k, line = thunderkittens_115(128, warpgroups=2)
    first = compile_error(k).splitlines()[0]
    assert first.startswith(f"{__file__}:{line}:")
    assert ("so each releases every stage and the barrier gets 256 per phase: phases complete "
            "early and producers overwrite a stage still being read; use "
            "CooperativeGroup(Agent.Thread, 256)") in first


def test_thunderkittens_115_twin_counts_four_warpgroups():
    k, _ = thunderkittens_115(512)
    k.compile()


@pytest.mark.parametrize("count", [256, 512])
def test_thunderkittens_115_warpgroup_range(count):
    k, line = thunderkittens_115_range(count)
    if count == 512:
        k.compile()
        return
    first = compile_error(k).splitlines()[0]
    assert first.startswith(f"{__file__}:{line}:")
    assert (
        "error: PipelineAsync pipeline: the consumer group CooperativeGroup(Agent.Thread, 256) "
        "expects 256 arrivals per phase, but the consumer role (16 warps, whole-warp "
        "consumer_release) gives 512: phases complete early and producers overwrite a stage "
        "still being read; use CooperativeGroup(Agent.Thread, 512)") in first


def test_cutlass_2418_pingpong_consumers_counted_as_one_thread():
    k, line = cutlass_2418(1)
    msg = compile_error(k)
    first = msg.splitlines()[0]
    assert first.startswith(f"{__file__}:{line}:")
    assert (
        "error: PipelineAsync pipeline: the consumer group CooperativeGroup(Agent.Thread, 1) "
        "expects 1 arrivals per phase, but 2 consumer roles release it (warps 4-7: whole-warp "
        "consumer_release, 128; warps 8-11: whole-warp consumer_release, 128)") in first
    assert ("use CooperativeGroup(Agent.Thread, 256) when every role releases each stage, or "
            "CooperativeGroup(Agent.Thread, 128) when they take turns") in first


def test_cutlass_2418_twin_counts_one_warpgroup():
    k, _ = cutlass_2418(128)
    k.compile()


def test_else_branch_of_a_warpgroup_split_counted_as_one_warpgroup():
    k, line = else_split(128)
    msg = compile_error(k)
    first = msg.splitlines()[0]
    assert first.startswith(f"{__file__}:{line}:")
    assert (
        "error: PipelineAsync pipeline: the consumer group CooperativeGroup(Agent.Thread, 128) "
        "expects 128 arrivals per phase, but the consumer role (8 warps, whole-warp "
        "consumer_release) gives 256: phases complete early and producers overwrite a stage "
        "still being read; use CooperativeGroup(Agent.Thread, 256)") in first


def test_else_branch_twin_counts_both_warpgroups():
    k, _ = else_split(256)
    k.compile()


def test_simulator_sees_thunderkittens_115_too():
    # The checker's finding, confirmed at run time: 512 arrivals on a
    # barrier that counts 256 complete its phases early; the twin runs clean.
    from _example_checks import messages, simulate

    bug = simulate(str(thunderkittens_115(256)[0].module), schedules=4)["tk115"]
    assert {"overrun", "overwrite"} & set(messages(bug)), messages(bug)
    twin = simulate(str(thunderkittens_115(512)[0].module), schedules=4)["tk115"]
    assert twin.ok, messages(twin)
