"""Held-out synchronization bugs: stage balance, states, trip counts,
arrive counts.

Held-out bugs of the stage protocol itself: which stage each role
waits on and releases, how many stages each role's loops run, which state a
verb uses, and who arrives (PipelineAsync rings between warps, clusters).
Each is next to its correct twin; for every bug the tests pin which tool
finds it (_held_out_bugs.py says how).

| case                           | source               | static | simulator         |
|--------------------------------|----------------------|--------|-------------------|
| release_after_advance          | (off by one stage)   | yes    | unbalanced        |
| tail_missing_on_else           | (role split)         | yes    | exited CTA        |
| release_on_other_pipeline      | (two rings)          | yes    | unbalanced        |
| fewer_trips_constant           | (trip counts)        | yes    | deadlock          |
| fewer_trips_runtime            | (trip counts)        | yes    | deadlock          |
| persistent_extra_advance       | (nested states)      | yes    | deadlock          |
| count_in_warps                 | (warps vs threads)   | yes    | arrive count      |
| elected_async_producer         | (elect_one habit)    | yes    | deadlock          |
| release_every_other            | (conditional release)| yes+   | deadlock          |
| unguarded_prologue             | tilelang#2566        | yes*   | deadlock          |
| unrolled_by_two                | (trip counts)        | yes    | deadlock          |
| leader_releases_for_role       | triton#10035         | yes*   | buffer overwritten|
| participants_commit_in_branch  | (peeled epilogue)    | yes*   | deadlock          |
| producer_in_rank0_only         | (cluster roles)      | yes*   | deadlock          |

(+) found by the simulator only before these tests: a verb under a branch
on the iteration that repeats every m iterations, in a loop of run-time trip
count, is now counted over the period
(test/Dialect/Pipeline/VerifyProtocol/periodic-branches.mlir).

(*) found by the simulator only before: a loop from a constant start S >= 2
to a run-time bound is counted max(0, n - S), so an unguarded prologue of S
stages counts S + max(0, n - S); a verb under `t + 1 < n` (any `a * i + b
<cmp> c`, in a loop of constant step) is counted on the iterations the
branch holds
(test/Dialect/Pipeline/VerifyProtocol/stage-balance-prologue.mlir); the
roles of a per-CTA ring (no multicast, no CTA pair) are placed per CTA rank
of the cluster, and a CTA whose consumers wait with no producer is refused
(stage-balance-cluster.mlir); a consumer role whose warps wait on a stage
that fewer of them release, with no barrier across the role, is refused
(arrive-counts-roles.mlir).

FlashAttention's release-the-previous-stage idiom (a correct
kernel) passes both: test_release_previous_stage_idiom_is_clean.
"""

import warnings

import pytest

from pipeline_mlir import diagnostics
from pipeline_mlir.kernel import Int32, Kernel, load, TmaDescriptor
from pipeline_mlir.pipeline import (Agent, CooperativeGroup, make_pipeline_state,
                                    PipelineError, PipelineTmaUmma)

# _fresh_cache: an autouse fixture (a cached build would skip the checker).
from _held_out_bugs import (  # noqa: F401
    A_BYTES, B_BYTES, Consumer, Producer, S, SCHEDULES, _async, _consume, _next_line,
    _produce, _fresh_cache, check_simulator, check_static, check_twin)


# -- 1. a consumer releases the stage after the one it waited on -----------
def release_after_advance(bug):
    """The consumer advances its state between wait and release (the
    'release the previous stage' idiom done backwards): it releases a stage
    it never waited on, whose phase the producer has not filled yet."""
    k = Kernel("release_next", block_dim=64, params={"n": Int32()})
    lines = {}
    with k:
        (n,) = k.args
        pipe = _async(k)
        with k.if_(k.warp_idx() == 0):
            _produce(k, pipe, n)
        with k.if_(k.warp_idx() == 1):
            c = make_pipeline_state(Consumer, S)
            for _, (c,) in k.range(n, carry=[c]):
                pipe.consumer_wait(c)
                if bug:
                    c.advance()
                    lines["bug"] = _next_line()
                    pipe.consumer_release(c)
                else:
                    pipe.consumer_release(c)
                    c.advance()
    return k, lines.get("bug"), {"n": 9}


# -- 2. producer_tail missing on one branch of a role split ----------------
def tail_missing_on_else(bug, wrong_pipe=False):
    """Two TMA producer warps, one per operand ring of a tcgen05 MMA warp,
    split with if_/else_: the else branch's producer forgets producer_tail.
    Its CTA may exit while the MMA's tcgen05.commit still has to arrive on
    its empty barriers (asynchronous releases)."""
    k = Kernel("tail_else", chip="sm_100a", block_dim=96,
               params={"a": TmaDescriptor(), "b": TmaDescriptor(), "n": Int32()})
    lines = {}
    with k:
        a, b, n = k.args
        ring_a = k.smem_alloc(S * A_BYTES, align=1024, name="A")
        ring_b = k.smem_alloc(S * B_BYTES, align=1024, name="B")
        pa = PipelineTmaUmma.create(
            num_stages=S, producer_group=CooperativeGroup(Agent.Thread, 1),
            consumer_group=CooperativeGroup(Agent.Thread, 1), tx_count=A_BYTES,
            barrier_storage=k.alloc_barriers(2 * S), name="a")
        pb = PipelineTmaUmma.create(
            num_stages=S, producer_group=CooperativeGroup(Agent.Thread, 1),
            consumer_group=CooperativeGroup(Agent.Thread, 1), tx_count=B_BYTES,
            barrier_storage=k.alloc_barriers(2 * S), name="b")
        warp = k.warp_idx()

        def load(pipe, desc, ring, nbytes, tail):
            s = make_pipeline_state(Producer, S)
            for kb, (s,) in k.range(n, carry=[s]):
                pipe.producer_acquire(s)
                with k.elect_one():
                    pipe.tma_load(s, desc, [kb * 64, 0], ring.stage(s.index, nbytes), nbytes)
                pipe.producer_commit(s)
                s.advance()
            if tail:
                pipe.producer_tail(s)

        with k.if_(warp == 0) as first:
            load(pa, a, ring_a, A_BYTES, True)
        with first.else_():
            with k.if_(warp == 1):
                lines["bug"] = _next_line()
                load(pb, b, ring_b, B_BYTES, not (bug and not wrong_pipe))
        with k.if_(warp == 2):
            ca = make_pipeline_state(Consumer, S)
            cb = make_pipeline_state(Consumer, S)
            for _, (ca, cb) in k.range(n, carry=[ca, cb]):
                pa.consumer_wait(ca)
                pb.consumer_wait(cb)
                pa.consumer_release(ca)
                if bug and wrong_pipe:
                    lines["bug"] = _next_line()
                    pa.consumer_release(cb)        # meant pb
                else:
                    pb.consumer_release(cb)
                ca.advance()
                cb.advance()
    return k, lines["bug"], {"n": 9}


# -- 3/4. the consumer loop runs fewer trips than the producer's -----------
def fewer_trips_constant(bug):
    k = Kernel("fewer_const", block_dim=64, params={})
    with k:
        pipe = _async(k)
        with k.if_(k.warp_idx() == 0):
            _produce(k, pipe, 8)
        with k.if_(k.warp_idx() == 1):
            line = _next_line()
            _consume(k, pipe, 7 if bug else 8)
    return k, line, {}


def fewer_trips_runtime(bug):
    """The consumer skips the last k-block (`n - 1`: a user who peeled the
    last iteration into an epilogue and then forgot it)."""
    k = Kernel("fewer_rt", block_dim=64, params={"n": Int32()})
    with k:
        (n,) = k.args
        pipe = _async(k)
        with k.if_(k.warp_idx() == 0):
            _produce(k, pipe, n)
        with k.if_(k.warp_idx() == 1):
            line = _next_line()
            _consume(k, pipe, n - 1 if bug else n)
    return k, line, {"n": 6}


# -- 5. a persistent consumer advances its state once more per tile --------
def persistent_extra_advance(bug):
    """Tile loop around the k loop; after each tile the consumer advances
    its state once more (it 'skips' a stage for the epilogue) while the
    producer does not: the roles drift one stage per tile."""
    k = Kernel("persist_skip", block_dim=64, params={"tiles": Int32(), "k_tiles": Int32()})
    lines = {}
    with k:
        tiles, k_tiles = k.args
        pipe = _async(k)
        with k.if_(k.warp_idx() == 0):
            s = make_pipeline_state(Producer, S)
            for _, (s,) in k.range(tiles, carry=[s]):
                for _, (s,) in k.range(k_tiles, carry=[s]):
                    pipe.producer_acquire(s)
                    pipe.producer_commit(s)
                    s.advance()
            pipe.producer_tail(s)
        with k.if_(k.warp_idx() == 1):
            c = make_pipeline_state(Consumer, S)
            for _, (c,) in k.range(tiles, carry=[c]):
                c = _consume(k, pipe, k_tiles, c)
                if bug:
                    lines["bug"] = _next_line()
                    c.advance()
    return k, lines.get("bug"), {"tiles": 3, "k_tiles": 3}


# -- 6. a PipelineAsync consumer group written in warps, not threads -------
def count_in_warps(bug):
    """Four consumer warps, every thread releases (PipelineAsync): the
    group is 128 threads, written as CooperativeGroup(Agent.Thread, 4)."""
    k = Kernel("warps_not_threads", block_dim=160, params={"n": Int32()})
    with k:
        (n,) = k.args
        line = _next_line()
        pipe = _async(k, consumer=CooperativeGroup(Agent.Thread, 4) if bug
                      else CooperativeGroup(Agent.Warp, 4))
        with k.if_(k.warp_idx() == 0):
            _produce(k, pipe, n)
        with k.if_(k.warp_idx() >= 1):
            _consume(k, pipe, n)
    return k, line, {"n": 9}


# -- 7. the consumer waits on a producer-side state ------------------------
def consumer_with_producer_state(bug):
    """The consumer copies the producer's state line (phase 1 start): its
    first waits pass on empty stages."""
    k = Kernel("consumer_pstate", block_dim=64, params={"n": Int32()})
    with k:
        (n,) = k.args
        pipe = _async(k)
        with k.if_(k.warp_idx() == 0):
            _produce(k, pipe, n)
        with k.if_(k.warp_idx() == 1):
            line = _next_line()
            c = make_pipeline_state(Producer if bug else Consumer, S)
            _consume(k, pipe, n, c)
    return k, line, {"n": 9}


# -- 8. a producer acquire/commit under elect_one on a 32-thread group -----
def elected_async_producer(bug):
    """A PipelineAsync producer warp (group of 32 threads) wraps its
    acquire/commit in elect_one, as TMA producers do: one arrival of 32."""
    k = Kernel("elected_producer", block_dim=64, params={"n": Int32()})
    with k:
        (n,) = k.args
        line = _next_line()
        pipe = _async(k)
        with k.if_(k.warp_idx() == 0):
            s = make_pipeline_state(Producer, S)
            for _, (s,) in k.range(n, carry=[s]):
                pipe.producer_acquire(s)
                if bug:
                    with k.elect_one():
                        pipe.producer_commit(s)
                else:
                    pipe.producer_commit(s)
                s.advance()
            pipe.producer_tail(s)
        with k.if_(k.warp_idx() == 1):
            _consume(k, pipe, n)
    return k, line, {"n": 9}


# -- 9. releases on every other k-block only -------------------------------
def release_every_other(bug):
    """The consumer releases only on even k-blocks (it meant to release two
    stages at once every other iteration and forgot the second)."""
    k = Kernel("release_even", block_dim=64, params={"n": Int32()})
    lines = {}
    with k:
        (n,) = k.args
        pipe = _async(k)
        with k.if_(k.warp_idx() == 0):
            _produce(k, pipe, n)
        with k.if_(k.warp_idx() == 1):
            c = make_pipeline_state(Consumer, S)
            for i, (c,) in k.range(n, carry=[c]):
                pipe.consumer_wait(c)
                if bug:
                    with k.if_(i % 2 == 0):
                        lines["bug"] = _next_line()
                        pipe.consumer_release(c)
                else:
                    pipe.consumer_release(c)
                c.advance()
    return k, lines.get("bug"), {"n": 12}


# -- 10. a prologue that fills every stage whatever the trip count ---------
def unguarded_prologue(bug):
    """The producer fills S stages in a prologue (a Python loop) and the rest
    in `range(S, n)`; with n < S it fills more stages than the consumer
    takes (tilelang#2566's shape with a run-time trip count)."""
    k = Kernel("prologue", block_dim=64, params={"n": Int32()})
    lines = {}
    with k:
        (n,) = k.args
        pipe = _async(k)
        with k.if_(k.warp_idx() == 0):
            s = make_pipeline_state(Producer, S)
            for i in range(S):
                if bug:
                    lines["bug"] = _next_line()
                    pipe.producer_acquire(s)
                    pipe.producer_commit(s)
                    s.advance()
                else:
                    with k.if_(n > i, carry=[s]):
                        pipe.producer_acquire(s)
                        pipe.producer_commit(s)
                        s.advance()
            for _, (s,) in k.range(S, n, carry=[s]):
                pipe.producer_acquire(s)
                pipe.producer_commit(s)
                s.advance()
            pipe.producer_tail(s)
        with k.if_(k.warp_idx() == 1):
            _consume(k, pipe, n)
    return k, lines.get("bug"), {"n": 2}


# -- 19. a consumer unrolled by two over an odd trip count -----------------
def unrolled_by_two(bug):
    """The consumer takes two stages per iteration of `range(0, n, 2)`; for
    odd n its last iteration waits for a stage nobody fills. The twin
    guards the second half with `i + 1 < n`."""
    k = Kernel("unroll2", block_dim=64, params={"n": Int32()})
    lines = {}
    with k:
        (n,) = k.args
        pipe = _async(k)
        with k.if_(k.warp_idx() == 0):
            _produce(k, pipe, n)
        with k.if_(k.warp_idx() == 1):
            c = make_pipeline_state(Consumer, S)
            for i, (c,) in k.range(0, n, 2, carry=[c]):
                pipe.consumer_wait(c)
                pipe.consumer_release(c)
                c.advance()
                if bug:
                    lines["bug"] = _next_line()
                    pipe.consumer_wait(c)
                    pipe.consumer_release(c)
                    c.advance()
                else:
                    with k.if_(i + 1 < n, carry=[c]):
                        pipe.consumer_wait(c)
                        pipe.consumer_release(c)
                        c.advance()
    return k, lines.get("bug"), {"n": 7}


# -- 20. one thread releases for a role of four warps ----------------------
def leader_releases_for_role(bug):
    """Four consumer warps wait on each stage; one thread releases it for
    all of them (a count of 1), right after its own wait. Its warp may run
    a lap of the ring ahead: the producer refills the stage and its phase
    completes again while another warp of the role still polls the old
    parity, which then names a phase that will not come
    (triton-lang/triton#10035). The twin counts the 128 threads of the
    role, each releasing after its own wait."""
    k = Kernel("leader_release", block_dim=160, params={"n": Int32()})
    lines = {}
    with k:
        (n,) = k.args
        line = _next_line()
        pipe = _async(k, consumer=CooperativeGroup(Agent.Thread, 1 if bug else 128))
        with k.if_(k.warp_idx() == 0):
            _produce(k, pipe, n)
        with k.if_(k.warp_idx() >= 1):
            c = make_pipeline_state(Consumer, S)
            for _, (c,) in k.range(n, carry=[c]):
                pipe.consumer_wait(c)
                if bug:
                    with k.if_(k.thread_idx() == 32):
                        lines["bug"] = _next_line()
                        pipe.consumer_release(c)
                else:
                    pipe.consumer_release(c)
                c.advance()
    return k, lines.get("bug", line), {"n": 24}


# -- 27. a participant commit left in a branch -----------------------------
def participants_commit_in_branch(bug):
    """CuTe DSL's participants (`acquire_and_advance`, `commit(h)`): the
    last iteration's commit was put under `t + 1 < n` (an epilogue peeled
    by hand), so the last stage is acquired and never committed."""
    k = Kernel("participants", block_dim=64, params={"n": Int32()})
    lines = {}
    with k:
        (n,) = k.args
        pipe = _async(k)
        producer, consumer = pipe.make_participants()
        with k.if_(k.warp_idx() == 0):
            for t, (producer,) in k.range(n, carry=[producer]):
                handle = producer.acquire_and_advance()
                if bug:
                    with k.if_(t + 1 < n):
                        lines["bug"] = _next_line()
                        handle.commit()
                else:
                    handle.commit()
            producer.tail()
        with k.if_(k.warp_idx() == 1):
            for _, (consumer,) in k.range(n, carry=[consumer]):
                handle = consumer.wait_and_advance()
                handle.release()
    return k, lines.get("bug"), {"n": 9}


# -- 28. a producer in one CTA of the cluster, consumers in both ----------
def producer_in_rank0_only(bug):
    """A cluster of two CTAs, each with its own (not multicast) ring: the
    producer role was put under `cluster_cta_rank() == 0` (as a multicast
    leader would be), so CTA 1's consumers wait for stages nobody fills."""
    k = Kernel("rank0_producer", chip="sm_90a", block_dim=64, cluster_dim=(2, 1, 1),
               params={"n": Int32()})
    lines = {}
    with k:
        (n,) = k.args
        pipe = _async(k)
        rank = k.cluster_cta_rank()
        with k.if_(k.warp_idx() == 0):
            if bug:
                lines["bug"] = _next_line()
                with k.if_(rank == 0):
                    _produce(k, pipe, n)
            else:
                _produce(k, pipe, n)
        with k.if_(k.warp_idx() == 1):
            _consume(k, pipe, n)
    return k, lines.get("bug"), {"n": 9}


CASES = [
    ("release_after_advance", release_after_advance, {},
     "consumer_release uses a state advanced 1 stage past its consumer_wait", {"unbalanced"}),
    ("tail_missing_on_else", tail_missing_on_else, {},
     "producer role exits without producer_tail(state): the consumer's tcgen05.commit "
     "arrives when its MMAs complete", {"exited-cta"}),
    ("release_on_other_pipeline", tail_missing_on_else, {"wrong_pipe": True},
     "loop body waits on 1 stage but releases 2", {"unbalanced"}),
    ("fewer_trips_constant", fewer_trips_constant, {},
     "commits 8 stages, the consumer role (one warp) releases 7", {"deadlock"}),
    ("fewer_trips_runtime", fewer_trips_runtime, {},
     "commits n stages, the consumer role (one warp) releases n - 1", {"deadlock"}),
    ("persistent_extra_advance", persistent_extra_advance, {},
     "advances k_tiles + 1 stages per iteration", {"deadlock"}),
    ("count_in_warps", count_in_warps, {},
     "the consumer group CooperativeGroup(Agent.Thread, 4) expects 4 arrivals per phase, "
     "but the consumer role (4 warps, whole-warp consumer_release) gives 128", {"arrive-count"}),
    ("elected_async_producer", elected_async_producer, {},
     "producer_commit runs on one thread (guarded) but the producer group "
     "CooperativeGroup(Agent.Thread, 32) counts 32 arrivals", {"deadlock"}),
    ("release_every_other", release_every_other, {},
     "consumer_release runs on 1 of every 2 iterations (its scf.if's condition repeats every 2 "
     "iterations), and the loop's trip count is only known at run time: every 2 iterations "
     "the loop waits on 2 stages but releases 1", {"deadlock"}),
    ("unguarded_prologue", unguarded_prologue, {},
     "the producer role (one warp) commits max(0, n - 4) + 4 stages, the consumer role "
     "(one warp) releases n (for n = 1: 4 against 1)", {"deadlock"}),
    ("unrolled_by_two", unrolled_by_two, {},
     "the producer role (one warp) commits n stages, the consumer role (one warp) releases "
     "2 * ceildiv(n, 2)", {"deadlock"}),
    ("leader_releases_for_role", leader_releases_for_role, {},
     "warps 1-4 wait on each stage but only warp 1 releases it (warps 2-4 never arrive)",
     {"overwrite"}),
    ("participants_commit_in_branch", participants_commit_in_branch, {},
     "this role acquires n stages but commits n - 1 (for n = 1: 1 against 0); every "
     "producer_acquire needs its producer_commit the same number of times: the "
     "producer_commit here sits in a branch on the loop variable that holds on n - 1 of "
     "the loop's n iterations", {"deadlock"}),
    ("producer_in_rank0_only", producer_in_rank0_only, {},
     "its producer role runs in CTA 0 of the cluster of 2 only (this branch on the CTA "
     "rank), but the ring is per CTA (not multicast) and its consumers also wait in CTA 1",
     {"deadlock"}),
]
IDS = [c[0] for c in CASES]
# Where the checker's error names the line the builder returned (the rest
# point at a helper's line: the create or loop of _async / _consume / load).
AT_RETURNED_LINE = {"release_after_advance", "release_every_other", "release_on_other_pipeline",
                    "participants_commit_in_branch", "producer_in_rank0_only",
                    "leader_releases_for_role"}


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_bug_static(case):
    check_static(case, __file__, case[0] in AT_RETURNED_LINE)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_bug_simulator(case):
    check_simulator(case, __file__)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_twin_is_clean(case):
    check_twin(case)


def test_consumer_waits_on_a_producer_state():
    """A consumer role that copies the producer's state line
    (`make_pipeline_state(Producer, S)`, phase 1: its first waits pass on
    empty stages) is refused by the builder at the verb, before any IR."""
    with pytest.raises(PipelineError) as err:
        consumer_with_producer_state(True)
    assert ("PipelineAsync.consumer_wait is a consumer verb but the state was made for the "
            "producer (make it with make_pipeline_state(PipelineUserType.Consumer, stages))"
            ) in str(err.value)
    k, _, args = consumer_with_producer_state(False)
    k.to_ptx()
    assert k.simulate(args, schedules=SCHEDULES, check=False).ok


def test_release_previous_stage_idiom_is_clean():
    """FlashAttention's consumer waits on stage i and releases stage i - 1
    (its state one behind), releasing the last stage after the loop: correct,
    and neither tool may flag it."""
    k = Kernel("release_previous", block_dim=64, params={"n": Int32()})
    with k:
        (n,) = k.args
        pipe = _async(k)
        with k.if_(k.warp_idx() == 0):
            _produce(k, pipe, n + 1)
        with k.if_(k.warp_idx() == 1):
            c = make_pipeline_state(Consumer, S)
            prev = make_pipeline_state(Consumer, S)
            pipe.consumer_wait(c)
            c.advance()
            for _, (c, prev) in k.range(n, carry=[c, prev]):
                pipe.consumer_wait(c)
                pipe.consumer_release(prev)
                c.advance()
                prev.advance()
            pipe.consumer_release(prev)
    with warnings.catch_warnings():
        warnings.simplefilter("error", diagnostics.CheckerWarning)
        k.to_ptx()
    assert k.simulate({"n": 6}, schedules=SCHEDULES, check=False).ok
