"""Held-out synchronization bugs, eighth round: ported from public bug
reports of other kernel stacks, none shown to the checker before.

Each bug is what the report's kernel did, ported to this API, next to its
correct twin; for every bug the tests pin which tool finds it
(_held_out_bugs.py says how).

VERDICTS BEFORE ANY CHANGE (the checker and the simulator as they were
when these ports were written) and now:

| case                          | source                    | before | now  | simulator   |
|-------------------------------|---------------------------|--------|------|-------------|
| pair_mma_multicast_count      | triton-lang/triton#10196  | no     | yes* | deadlock    |
| output_tile_in_input_stage    | uccl-project/mKernel#18   | no     | yes* | smem-race*  |

Before: the checker refused neither; the simulator found the first (a
deadlock: the producer waits on an empty barrier that gets 2 of its 4
arrivals per phase) and passed the second, which both tools missed.
Every twin passed both tools.

(*) now refused:
- check 6, the arrivals an MMA consumer's release implies
  (ImpliedArriveCounts.cpp, lit arrive-counts.mlir): a PipelineTmaUmma
  release in a cluster is a tcgen05.commit multicast to the CTAs whose
  loads land in the stage, issued by the leader CTA of each pair, so each
  CTA's empty barrier gets one commit per MMA warp from each of its
  multicast peers' pairs (mcast_size); before, a release in a cluster was
  not counted at all (its arrivals land on other CTAs);
- check 8, a refill under the same thread's bulk store
  (AsyncReadHandBack.cpp, lit async-reads.mlir): a copy into a stage (TMA
  load, bulk copy) while a bulk store of the same buffer (the same
  allocation: the same stage, or a fixed address of the ring's allocation)
  issued by that thread may still read it; before, check 8 looked at
  releases and acquires only, and tied a bulk store to a stage only
  through state.index (the store of C reads the ring's first buffer at a
  fixed address, so the acquire before the refill saw nothing in flight).

(*) the simulator now finds the second (smem-race at the load's line,
naming the store): a TMA load or bulk copy's writes into words a bulk or
TMA store's read still covers (its group not retired by a wait_group.read
before the copy) race it (smemrace.async_fill); before, it did not order a
TMA load's writes after the same thread's store reads.
"""

import pytest

from mlir.dialects import arith  # noqa: F401

from pipeline_mlir.dialects import pipeline as pl
from pipeline_mlir.kernel import fence_view_async_shared, Int32, Kernel, store, TmaDescriptor
from pipeline_mlir.pipeline import (Agent, CooperativeGroup, make_pipeline_state,
                                    NamedBarrier, pipeline_init_arrive, pipeline_init_wait,
                                    PipelineTmaAsync, PipelineTmaUmma, tma_store)

# _fresh_cache: an autouse fixture (a cached build would skip the checker).
from _held_out_bugs import (  # noqa: F401
    A_BYTES, B_BYTES, Consumer, Producer, ROWS, S, TILE, _next_line, _fresh_cache,
    check_simulator, check_static, check_twin)


# -- 63. a pair's MMA releases a multicast ring: arrivals counted per CTA --
def pair_mma_multicast_count(bug):
    """triton-lang/triton#10196: Gluon's tcgen05_mma_barrier_count helper
    had no two_ctas flag, so the empty barrier of a stage that a 2-CTA MMA
    releases into a multicast ring counted one arrival per CTA of the
    multicast group; with a CTA pair only the leader issues the MMA and its
    tcgen05.commit, one arrival per pair (found by Triton's multi-CTA
    ConSan). Ported to a cluster of two pairs (cta_layout_vmnk=(2, 2, 1,
    1)) multicasting along M: each CTA's empty barrier gets one commit from
    each pair's leader, 2 in all; the bug counts the 4 CTAs."""
    k = Kernel("pair_mcast_count", chip="sm_100a", block_dim=64, cluster_dim=(4, 1, 1),
               params={"a": TmaDescriptor(), "b": TmaDescriptor(), "k_tiles": Int32()})
    lines = {}
    with k:
        a, b, k_tiles = k.args
        bars = k.alloc_barriers(2 * S)
        ring_a = k.smem_alloc(S * A_BYTES, align=1024, name="A")
        ring_b = k.smem_alloc(S * B_BYTES, align=1024, name="B")
        lines["bug"] = _next_line()
        ring = PipelineTmaUmma.create(
            num_stages=S, producer_group=CooperativeGroup(Agent.Thread, 1),
            consumer_group=CooperativeGroup(Agent.Thread, 4 if bug else 2),
            barrier_storage=bars, cta_layout_vmnk=(2, 2, 1, 1), mcast_mode_mn=(1, 0),
            defer_sync=True, name="ab")
        pipeline_init_arrive(cta_layout_vmnk=(2, 2, 1, 1), is_relaxed=True)
        pipeline_init_wait(cta_layout_vmnk=(2, 2, 1, 1))
        rank = k.cluster_cta_rank()
        with k.if_(k.warp_idx() == 0):
            s = make_pipeline_state(Producer, S)
            for kb, (s,) in k.range(k_tiles, carry=[s]):
                ring.producer_acquire(s)
                with k.elect_one():
                    ring.tma_load(s, a, [kb * 64, rank * 128],
                                  ring_a.stage(s.index, A_BYTES), A_BYTES)
                    ring.tma_load(s, b, [kb * 64, rank * 128],
                                  ring_b.stage(s.index, B_BYTES), B_BYTES)
                ring.producer_commit(s)
                s.advance()
            ring.producer_tail(s)
        with k.if_(k.warp_idx() == 1):
            with k.if_(rank % 2 == 0):
                c = make_pipeline_state(Consumer, S)
                for _, (c,) in k.range(k_tiles, carry=[c]):
                    ring.consumer_wait(c)
                    ring.consumer_release(c)
                    c.advance()
    return k, lines["bug"], {"k_tiles": 5}


# -- 64. one shared-memory tile is an input stage and the output C ---------
def output_tile_in_input_stage(bug):
    """uccl-project/mKernel#18 (fused AllGather + GEMM): to save shared
    memory, one tile of the input ring also holds each task's output C,
    which the producer warp TMA-stores to global memory; before its next
    task's TMA loads refill that tile it must wait for the store to finish
    reading it. The wait sat at a fixed k-block of the next task, which
    lined up with the tile's reuse only when the task's k-blocks were a
    multiple of the ring's depth; otherwise a load raced the store (wrong
    results at M = 16384 and 32768). The fix waits at the start of each
    task, before any load. Ported to a producer warp whose ring's first
    buffer holds C (the consumer's result, elided: the store reads what the
    buffer holds once the consumer warp has waited on every stage of the
    task and met named barrier 1); the bug waits for the store's reads at
    k-block S - 1, the twin before its first load."""
    k = Kernel("output_in_input_tile", chip="sm_90a", block_dim=64,
               params={"src": TmaDescriptor(), "out": TmaDescriptor(),
                       "tasks": Int32(), "k_tiles": Int32()})
    lines = {}
    with k:
        src, out, tasks, k_tiles = k.args
        bars = k.alloc_barriers(2 * S)
        ring_buf = k.smem_alloc(S * TILE, align=128, name="ring")
        ring = PipelineTmaAsync.create(
            num_stages=S, producer_group=CooperativeGroup(Agent.Thread, 1),
            consumer_group=CooperativeGroup(Agent.Thread, 1),
            tx_count=TILE, barrier_storage=bars, name="ring")
        c_ready = NamedBarrier(barrier_id=1, num_threads=64)
        with k.if_(k.warp_idx() == 0):
            s = make_pipeline_state(Producer, S)
            for t, (s,) in k.range(tasks, carry=[s]):
                if not bug:
                    with k.elect_one():
                        pl.bulk_group_wait(pending=0, read=True)
                for kb, (s,) in k.range(k_tiles, carry=[s]):
                    ring.producer_acquire(s)
                    with k.elect_one():
                        lines["bug"] = _next_line()
                        ring.tma_load(s, src, [kb * 64, t * ROWS],
                                      ring_buf.stage(s.index, TILE), TILE)
                        if bug:
                            with k.if_(kb == S - 1):
                                pl.bulk_group_wait(pending=0, read=True)
                    ring.producer_commit(s)
                    s.advance()
                c_ready.arrive_and_wait()
                with k.elect_one():
                    tma_store(out, [0, t], ring_buf)
                    pl.bulk_group_commit()
            with k.elect_one():
                pl.bulk_group_wait(pending=0, read=False)
            ring.producer_tail(s)
        with k.if_(k.warp_idx() == 1):
            c = make_pipeline_state(Consumer, S)
            for _, (c,) in k.range(tasks, carry=[c]):
                for _, (c,) in k.range(k_tiles, carry=[c]):
                    ring.consumer_wait(c)
                    ring.consumer_release(c)
                    c.advance()
                c_ready.arrive()
    return k, lines["bug"], {"tasks": 3, "k_tiles": 3}


CASES = [
    ("pair_mma_multicast_count", pair_mma_multicast_count, {},
     "expects 4 arrivals per phase, but the consumer role", {"deadlock"}),
    ("output_tile_in_input_stage", output_tile_in_input_stage, {},
     "refills a stage of pipeline 'ring' whose buffer a bulk store issued by this "
     "thread may still read", {"smem-race"}),
]
IDS = [c[0] for c in CASES]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_bug_static(case):
    check_static(case, __file__, True)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_bug_simulator(case):
    check_simulator(case, __file__)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_twin_is_clean(case):
    check_twin(case)
