"""Held-out synchronization bugs, second round: ported from public bug
reports of other kernel stacks, none shown to the checker before.

Each bug is what the report's user (or compiler) wrote, ported to this
API, next to its correct twin; for every bug the tests pin which tool finds
it (_held_out_bugs.py says how).

| case                        | source                          | static | simulator      |
|-----------------------------|---------------------------------|--------|----------------|
| arrive_on_empty_tile        | vllm-project/vllm#26026         | yes*   | arrive count   |
| cluster_sync_in_one_role    | triton-lang/triton#9456         | yes*   | deadlock+      |
| release_previous_one_stage  | tile-ai/tilelang#2567           | yes*   | deadlock       |
| state_of_another_ring       | tile-ai/tilelang#3087           | builder| -              |
| tile_id_second_reader       | PyFR/GiMMiK#23                  | yes    | overwrite      |
| warpgroups_as_group_count   | NVIDIA/cutlass#2404             | yes    | phase overrun  |
| mma_release_skips_first     | facebookexperimental/triton#170 | yes    | unbalanced     |

(*) passed by the checker before these tests, now refused:
- a consumer that waits on a stage while it holds num_stages others
  (check 18, stages held at once);
- a named barrier synced on one branch of a non-role if inside a loop and
  only arrived on by the other (check 9);
- a cluster barrier inside a warp-role branch while the other warps wait at
  a CTA barrier after the roles join (check 9).
(test/Dialect/Pipeline/VerifyProtocol/held-stages.mlir.)

(+) passed by the simulator before, which did not model `barrier.cluster`
(`k.cluster_sync()`); it now counts every thread of every CTA of the
cluster that has not exited, and reports the deadlock at the user's line
(test_sim_cluster_barrier.py).

state_of_another_ring is refused by the builder at the verb (a state of 4
stages on a ring of 1), before any IR
(test_state_of_another_ring_is_refused_by_the_builder).
mma_release_skips_first ports the lagged release (`if k > 0`) of the TLX
pipelined Blackwell GEMM tutorial with its release after the loop dropped.
"""

import pytest

from pipeline_mlir.kernel import GlobalPtr, Int32, Kernel, load, store, TmaDescriptor
from pipeline_mlir.kernel.values import i32
from pipeline_mlir.pipeline import (Agent, CooperativeGroup, make_pipeline_state,
                                    NamedBarrier, PipelineAsync, PipelineError,
                                    PipelineTmaAsync)

# _fresh_cache: an autouse fixture (a cached build would skip the checker).
from _held_out_bugs import (  # noqa: F401
    Consumer, Producer, ROWS, S, TILE, _async, _consume, _next_line, _produce, _fresh_cache,
    check_simulator, check_static, check_twin)


# -- 34. an early-exit path that arrives on the epilogue barrier ----------
def arrive_on_empty_tile(bug):
    """vllm-project/vllm#26026 (CUTLASS MLA): per tile, the load warp and
    the compute warps meet on an epilogue named barrier
    (`arrive_and_wait`); a compute path for a tile with no k-blocks calls
    `arrive()` only and loops around, so the compute warps arrive twice on
    one phase of the barrier while the load warp still waits. The twin
    waits on both paths. The two roles sync at their own sites, so the
    port spells those syncs unaligned (`barrier.sync`: the aligned
    `bar.sync` from two role branches is undefined itself, check 19)."""
    k = Kernel("arrive_empty", block_dim=160, params={"tiles": Int32(), "k_tiles": Int32()})
    lines = {}
    with k:
        tiles, k_tiles = k.args
        pipe = _async(k, consumer=CooperativeGroup(Agent.Warp, 4))
        epi = NamedBarrier(barrier_id=3, num_threads=160)
        with k.if_(k.warp_idx() == 0):
            s = make_pipeline_state(Producer, S)
            for _, (s,) in k.range(tiles, carry=[s]):
                for _, (s,) in k.range(k_tiles, carry=[s]):
                    pipe.producer_acquire(s)
                    pipe.producer_commit(s)
                    s.advance()
                epi.wait_unaligned()
            pipe.producer_tail(s)
        with k.if_(k.warp_idx() >= 1):
            c = make_pipeline_state(Consumer, S)
            for _, (c,) in k.range(tiles, carry=[c]):
                c = _consume(k, pipe, k_tiles, c)
                with k.if_(k_tiles > 0) as work:
                    epi.wait_unaligned()
                with work.else_():
                    if bug:
                        lines["bug"] = _next_line()
                        epi.arrive()
                    else:
                        epi.wait_unaligned()
    return k, lines.get("bug"), {"tiles": 3, "k_tiles": 0}


# -- 35. a cluster barrier inside one role ---------------------------------
def cluster_sync_in_one_role(bug):
    """triton-lang/triton#9456: a warp-specialized kernel emitted its
    cluster barrier (a cross-CTA exchange before the epilogue) inside one
    partition; `barrier.cluster` has no thread mask, every thread of every
    CTA of the cluster must arrive, so the producer warp that never reaches
    it (it waits at the CTA barrier where the partitions join) leaves the
    consumer warp waiting. The twin syncs the cluster after the join, where
    every warp reaches it."""
    k = Kernel("cluster_in_role", chip="sm_90a", block_dim=64, cluster_dim=(2, 1, 1),
               params={"n": Int32()})
    lines = {}
    with k:
        (n,) = k.args
        pipe = _async(k)
        with k.if_(k.warp_idx() == 0):
            _produce(k, pipe, n)
        with k.if_(k.warp_idx() == 1):
            _consume(k, pipe, n)
            if bug:
                lines["bug"] = _next_line()
                k.cluster_sync()
        # The partitions join before the epilogue.
        k.sync_threads()
        if not bug:
            k.cluster_sync()
    return k, lines.get("bug"), {"n": 5}


# -- 36. a consumer that holds two stages of a one-stage ring --------------
def release_previous_one_stage(bug):
    """tile-ai/tilelang#2567's cycle: the consumer's release of a buffer is
    sequenced after work that needs the producer's next fill of that same
    buffer. Ported: FlashAttention's release-the-previous-stage idiom (wait
    on i, then release i - 1) on a ring of one stage (a Q buffer): the wait
    on i needs the producer's commit of i, whose acquire needs the release
    of i - 1. The twin gives the ring the two stages the idiom holds."""
    stages = 1 if bug else 2
    k = Kernel("prev_one_stage", block_dim=64, params={"n": Int32()})
    lines = {}
    with k:
        (n,) = k.args
        lines["bug"] = _next_line()
        pipe = PipelineAsync.create(
            num_stages=stages, producer_group=CooperativeGroup(Agent.Thread, 32),
            consumer_group=CooperativeGroup(Agent.Thread, 32),
            barrier_storage=k.alloc_barriers(2 * stages), name="q")
        with k.if_(k.warp_idx() == 0):
            s = make_pipeline_state(Producer, stages)
            for _, (s,) in k.range(n + 1, carry=[s]):
                pipe.producer_acquire(s)
                pipe.producer_commit(s)
                s.advance()
            pipe.producer_tail(s)
        with k.if_(k.warp_idx() == 1):
            c = make_pipeline_state(Consumer, stages)
            prev = make_pipeline_state(Consumer, stages)
            pipe.consumer_wait(c)
            c.advance()
            for _, (c, prev) in k.range(n, carry=[c, prev]):
                pipe.consumer_wait(c)
                pipe.consumer_release(prev)
                c.advance()
                prev.advance()
            pipe.consumer_release(prev)
    return k, lines["bug"], {"n": 4}


# -- 37. a state whose stage count is another ring's -----------------------
def state_of_another_ring(bug):
    """tile-ai/tilelang#3087: a wait on a barrier of one slot was given the
    parity of the S-stage ring next to it ((k / S) % 2 instead of k % 2):
    it passes on a phase that already completed. Ported: two rings, A of S
    stages and B of one stage (a per-iteration scale); the consumer's state
    for B was made with S, copied from A's line, so its phase flips every S
    waits while B's barrier flips every wait."""
    k = Kernel("state_other_ring", block_dim=96, params={"out": GlobalPtr(), "n": Int32()})
    lines = {}
    with k:
        out, n = k.args
        pa = _async(k, name="a")
        pb = PipelineAsync.create(
            num_stages=1, producer_group=CooperativeGroup(Agent.Thread, 32),
            consumer_group=CooperativeGroup(Agent.Thread, 32),
            barrier_storage=k.alloc_barriers(2), name="b")
        scale = k.smem_alloc(128, align=128, name="scale")
        lane = k.lane_idx()
        with k.if_(k.warp_idx() == 0):
            _produce(k, pa, n)
        with k.if_(k.warp_idx() == 2):
            s = make_pipeline_state(Producer, 1)
            for t, (s,) in k.range(n, carry=[s]):
                pb.producer_acquire(s)
                store(t, scale, lane)
                pb.producer_commit(s)
                s.advance()
            pb.producer_tail(s)
        with k.if_(k.warp_idx() == 1):
            ca = make_pipeline_state(Consumer, S)
            lines["bug"] = _next_line()
            cb = make_pipeline_state(Consumer, S if bug else 1)
            for t, (ca, cb) in k.range(n, carry=[ca, cb]):
                pa.consumer_wait(ca)
                pb.consumer_wait(cb)
                v = load(scale, i32(), lane)
                pb.consumer_release(cb)
                store(v, out, t * 32 + lane)
                pa.consumer_release(ca)
                ca.advance()
                cb.advance()
    return k, lines["bug"], {"n": 6}


# -- 38. a tile-id ring read by two roles, released by one ----------------
def tile_id_second_reader(bug):
    """PyFR/GiMMiK#23: a warp-specialized kernel's work-id pipeline
    deadlocked because a consumer lapped the producer. Ported: a scheduler
    warp broadcasts each tile id through a 2-stage ring to the MMA warp and
    the epilogue warp; the ring's consumer group counts one warp (the MMA's)
    and only the MMA warp releases, so the scheduler refills a slot the
    epilogue warp has not read. The twin counts and releases both."""
    k = Kernel("tile_id", block_dim=96, params={"out": GlobalPtr(), "tiles": Int32()})
    lines = {}
    stages = 2
    with k:
        out, tiles = k.args
        lines["bug"] = _next_line()
        pipe = PipelineAsync.create(
            num_stages=stages, producer_group=CooperativeGroup(Agent.Thread, 32),
            consumer_group=CooperativeGroup(Agent.Thread, 32 if bug else 64),
            barrier_storage=k.alloc_barriers(2 * stages), name="tile_id")
        ids = k.smem_alloc(stages * 128, align=128, name="ids")
        lane = k.lane_idx()
        warp = k.warp_idx()
        with k.if_(warp == 0):
            s = make_pipeline_state(Producer, stages)
            for t, (s,) in k.range(tiles, carry=[s]):
                pipe.producer_acquire(s)
                store(t, ids.stage(s.index, 128), lane)
                pipe.producer_commit(s)
                s.advance()
            pipe.producer_tail(s)
        for role in (1, 2):
            with k.if_(warp == role):
                c = make_pipeline_state(Consumer, stages)
                for t, (c,) in k.range(tiles, carry=[c]):
                    pipe.consumer_wait(c)
                    v = load(ids.stage(c.index, 128), i32(), lane)
                    if role == 1 or not bug:
                        pipe.consumer_release(c)
                    store(v, out, (role - 1) * 4096 + t * 32 + lane)
                    c.advance()
    return k, lines["bug"], {"tiles": 6}


# -- 39. two consumer warpgroups counted as two arrivals -------------------
def warpgroups_as_group_count(bug):
    """NVIDIA/cutlass#2404 (CuTe DSL): a PipelineTmaAsync ring consumed by
    two warpgroups (eight warps) was created with
    CooperativeGroup(Agent.Thread, 2), one per warpgroup; the stage is
    released by one signalling lane per consumer warp, eight arrivals on an
    empty barrier that counts two. The twin counts the eight warps."""
    k = Kernel("two_wgs", chip="sm_90a", block_dim=288,
               params={"src": TmaDescriptor(), "n": Int32()})
    with k:
        src, n = k.args
        ring = k.smem_alloc(S * TILE, align=128, name="ring")
        line = _next_line()
        pipe = PipelineTmaAsync.create(
            num_stages=S, producer_group=CooperativeGroup(Agent.Thread, 1),
            consumer_group=CooperativeGroup(Agent.Thread, 2 if bug else 8),
            tx_count=TILE, barrier_storage=k.alloc_barriers(2 * S), name="ring")
        with k.if_(k.warp_idx() == 8):
            s = make_pipeline_state(Producer, S)
            for t, (s,) in k.range(n, carry=[s]):
                pipe.producer_acquire(s)
                with k.elect_one():
                    pipe.tma_load(s, src, [0, t * ROWS], ring.stage(s.index, TILE), TILE)
                pipe.producer_commit(s)
                s.advance()
            pipe.producer_tail(s)
        with k.if_(k.warp_idx() < 8):
            _consume(k, pipe, n)
    return k, line, {"n": 9}


# -- 40. the lagged release that forgets the first stage -------------------
def mma_release_skips_first(bug):
    """facebookexperimental/triton#170's TLX pipelined Blackwell GEMM
    tutorial pattern (release the previous k-block's buffer once the next
    MMA is issued, `if k > 0`), with the last buffer's release after the
    loop forgotten: the consumer
    releases n - 1 stages of the n it waits on, so a persistent producer's
    next tile waits for a stage nobody frees. The twin releases the last
    stage after the loop."""
    k = Kernel("lagged_release", block_dim=64, params={"tiles": Int32(), "n": Int32()})
    lines = {}
    with k:
        tiles, n = k.args
        pipe = _async(k)
        with k.if_(k.warp_idx() == 0):
            s = make_pipeline_state(Producer, S)
            for _, (s,) in k.range(tiles, carry=[s]):
                for _, (s,) in k.range(n, carry=[s]):
                    pipe.producer_acquire(s)
                    pipe.producer_commit(s)
                    s.advance()
            pipe.producer_tail(s)
        with k.if_(k.warp_idx() == 1):
            c = make_pipeline_state(Consumer, S)
            prev = make_pipeline_state(Consumer, S)
            for _, (c, prev) in k.range(tiles, carry=[c, prev]):
                for kb, (c, prev) in k.range(n, carry=[c, prev]):
                    pipe.consumer_wait(c)
                    with k.if_(kb > 0, carry=[prev]):
                        pipe.consumer_release(prev)
                        prev.advance()
                    c.advance()
                if not bug:
                    pipe.consumer_release(prev)
                    prev.advance()
                else:
                    lines["bug"] = _next_line() - 2
    return k, lines.get("bug"), {"tiles": 3, "n": 4}


CASES = [
    ("arrive_on_empty_tile", arrive_on_empty_tile, {},
     "named barrier 3: this branch only arrives on it (arrive) where the other branch of the "
     "same if syncs on it (arrive_and_wait / sync), inside a loop", {"arrive-count"}),
    ("cluster_sync_in_one_role", cluster_sync_in_one_role, {},
     "cluster barrier inside a warp-role branch (rule: barrier.cluster has no thread mask, it "
     "completes when every non-exited thread of the cluster arrived)", {"deadlock"}),
    ("release_previous_one_stage", release_previous_one_stage, {},
     "pipeline 'q': this consumer_wait makes the role hold 2 stages at once", {"deadlock"}),
    ("tile_id_second_reader", tile_id_second_reader, {},
     "pipeline 'tile_id': loop body waits on 1 stage but releases 0", {"overwrite"}),
    ("warpgroups_as_group_count", warpgroups_as_group_count, {},
     "the consumer group CooperativeGroup(Agent.Thread, 2) expects 2 arrivals per phase, but "
     "the consumer role (8 warps, whole-warp consumer_release: one signalling-lane arrive per "
     "warp) gives 8", {"overrun"}),
    ("mma_release_skips_first", mma_release_skips_first, {},
     "this role waits on n * tiles stages but releases n * tiles - tiles", {"unbalanced"}),
]
IDS = [c[0] for c in CASES]
# Where the checker's error names the line the builder returned (the rest
# point at another line of the role: the release or wait the count is on).
AT_RETURNED_LINE = {"arrive_on_empty_tile", "cluster_sync_in_one_role",
                    "warpgroups_as_group_count"}


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_bug_static(case):
    check_static(case, __file__, case[0] in AT_RETURNED_LINE)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_bug_simulator(case):
    check_simulator(case, __file__)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_twin_is_clean(case):
    check_twin(case)


def test_state_of_another_ring_is_refused_by_the_builder():
    """tile-ai/tilelang#3087's wrong parity law, ported (a state of S
    stages on a ring of one): refused by the builder at the verb, before any
    IR; the twin (a state of the ring's own stage count) passes both
    tools."""
    with pytest.raises(PipelineError) as err:
        state_of_another_ring(True)
    assert ("PipelineAsync.consumer_wait: the state has 4 stages but the pipeline has 1 (a "
            "state walks its own pipeline's ring)") in str(err.value)
    check_twin(("state_of_another_ring", state_of_another_ring, {}, None, None))
