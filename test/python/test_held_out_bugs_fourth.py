"""Held-out synchronization bugs, fourth round: ported from public bug
reports of other kernel stacks, none shown to the checker before.

Each bug is what the report's kernel did, ported to this API, next to its
correct twin; for every bug the tests pin which tool finds it
(_held_out_bugs.py says how).

| case                        | source                          | static | simulator |
|-----------------------------|---------------------------------|--------|-----------|
| multicast_valid_per_cta     | deepseek-ai/DeepGEMM#415        | yes*   | see CASES |
| aligned_sync_across_roles   | mlc-ai/TIRx-kernels#21, #66     | yes*   | see CASES |
| wgmma_wait_after_barrier    | triton-lang/triton#11047        | yes*   | see CASES |

(*) passed by the checker before these tests, now refused by check 19
(test/Dialect/Pipeline/VerifyProtocol/uniform-trips.mlir): a ring the CTAs
of a cluster share under a branch whose condition differs between them in
a way their rank alone does not decide; an aligned named barrier synced at
different sites by warps of different roles in one generation; and by
check 8 (async-reads-other-warps.mlir): a stage released by one thread for
two warpgroups whose wgmma reads of it are retired only after the barrier
the release is ordered after.
"""

import pytest

from pipeline_mlir.kernel import Int32, Kernel, TmaDescriptor
from pipeline_mlir.kernel import wgmma as W
from pipeline_mlir.layout import OperandLayout
from pipeline_mlir.pipeline import (Agent, CooperativeGroup, make_pipeline_state,
                                    NamedBarrier, pipeline_init_arrive, pipeline_init_wait,
                                    PipelineAsync, PipelineTmaAsync)

# _fresh_cache: an autouse fixture (a cached build would skip the checker).
from _held_out_bugs import (  # noqa: F401
    Consumer, Producer, ROWS, S, TILE, _async, _consume, _next_line, _produce, _fresh_cache,
    check_simulator, check_static, check_twin)


# -- 48. each CTA of a multicast pair decides alone whether to multicast ----
def multicast_valid_per_cta(bug):
    """deepseek-ai/DeepGEMM#415 (its second form): the k-grouped GEMM lays
    the groups' tiles back to back, and each CTA decides from its own tile
    whether TMA multicast is valid (its pair partner is in its group). Where
    a cluster straddles two groups the two CTAs disagree: one multicasts
    half of B into both CTAs, its peer loads the whole of B alone, so one
    CTA's full barrier waits for bytes its peer never sends (a hang) and the
    other receives more than it armed. The twin decides from the cluster's
    first tile, the same in both CTAs."""
    k = Kernel("mcast_valid", chip="sm_90a", block_dim=160, cluster_dim=(2, 1, 1),
               params={"a": TmaDescriptor(), "b": TmaDescriptor(), "n": Int32(),
                       "tiles_per_group": Int32()})
    half = TILE // 2
    lines = {}
    with k:
        a, b, n, tiles_per_group = k.args
        bars = k.alloc_barriers(2 * S)
        ring_a = k.smem_alloc(S * TILE, align=128, name="A")
        ring_b = k.smem_alloc(S * TILE, align=128, name="B")
        pipe = PipelineTmaAsync.create(
            num_stages=S, producer_group=CooperativeGroup(Agent.Thread, 1),
            consumer_group=CooperativeGroup(Agent.Thread, 2 * 4),
            tx_count=2 * TILE, barrier_storage=bars, cta_layout_vmnk=(1, 2, 1, 1),
            defer_sync=True, name="ab")
        pipeline_init_arrive(cta_layout_vmnk=(1, 2, 1, 1))
        pipeline_init_wait(cta_layout_vmnk=(1, 2, 1, 1))
        rank = k.cluster_cta_rank()
        tile = k.block_idx() if bug else k.block_idx() // 2 * 2
        # Multicast is valid when the next tile is in the same group.
        valid = tile % tiles_per_group + 1 < tiles_per_group
        with k.if_(k.warp_idx() == 4):
            s = make_pipeline_state(Producer, S)
            for t, (s,) in k.range(n, carry=[s]):
                pipe.producer_acquire(s)
                with k.elect_one():
                    pipe.tma_load(s, a, [0, t * ROWS], ring_a.stage(s.index, TILE), TILE)
                    with k.if_(valid) as mc:
                        lines["bug"] = _next_line()
                        pipe.tma_load(s, b, [0, t * ROWS + rank * (ROWS // 2)],
                                      ring_b.stage(s.index, TILE) + rank * half, half,
                                      mcast_mask=0b11)
                    with mc.else_():
                        pipe.tma_load(s, b, [0, t * ROWS], ring_b.stage(s.index, TILE),
                                      TILE)
                pipe.producer_commit(s)
                s.advance()
            pipe.producer_tail(s)
        with k.if_(k.warp_idx() < 4):
            _consume(k, pipe, n)
    return k, lines["bug"], {"n": 3, "tiles_per_group": 2}


# -- 49. an aligned named barrier synced from two role branches -------------
def aligned_sync_across_roles(bug):
    """mlc-ai/TIRx-kernels#21 (and #66): a named barrier that hands the
    compute warps' results to another role is synced by both roles, each
    at its own `bar.sync` in its own branch. `bar.sync` is the aligned
    form, which promises that the blocking participants of a generation
    run the same barrier instruction; from distinct static sites it is
    undefined (compute-sanitizer reports divergent barriers). The fix
    spells those sites as the unaligned `barrier.sync`."""
    k = Kernel("aligned_roles", block_dim=160, params={"n": Int32()})
    lines = {}
    with k:
        (n,) = k.args
        pipe = _async(k, consumer=CooperativeGroup(Agent.Thread, 128))
        handover = NamedBarrier(barrier_id=3, num_threads=160)
        with k.if_(k.warp_idx() == 4):
            _produce(k, pipe, n)
            if bug:
                handover.sync()
            else:
                handover.wait_unaligned()
        with k.if_(k.warp_idx() < 4):
            _consume(k, pipe, n)
            if bug:
                lines["bug"] = _next_line()
                handover.sync()
            else:
                handover.wait_unaligned()
    return k, lines.get("bug"), {"n": 3}


# -- 50. another warpgroup's wgmma still reading at the release ------------
WG_TILE = OperandLayout("bf16", "K", 128, 64, 64)   # 64 x 64 bf16 per stage
WG_TILE_BYTES = 64 * 64 * 2


def wgmma_wait_after_barrier(bug):
    """triton-lang/triton#11047: two warpgroups each issue a wgmma reading
    a shared operand, meet on a barrier, and only then wait for their wgmma
    (`warpgroup_mma_wait(0)`); the shared memory is then overwritten for the
    next block. The wait retires only its own warpgroup's reads, so the
    other warpgroup's may still run when the buffer is refilled. Ported to a
    ring: thread 0 releases the stage for both warpgroups (a consumer group
    of 1) after their barrier, which lets the producer refill it while the
    second warpgroup's wgmma reads it. The twin waits for the wgmma before
    the barrier (the fix: a barrier after the wait)."""
    k = Kernel("wgmma_wait_after_barrier", chip="sm_90a", block_dim=288,
               params={"n": Int32()})
    lines = {}
    with k:
        (n,) = k.args
        buf = k.smem_alloc(S * WG_TILE_BYTES, align=1024, name="b")
        pipe = PipelineAsync.create(
            num_stages=S, producer_group=CooperativeGroup(Agent.Thread, 32),
            consumer_group=CooperativeGroup(Agent.Thread, 1),
            barrier_storage=k.alloc_barriers(2 * S), name="b")
        with k.if_(k.warp_idx() == 8):
            _produce(k, pipe, n)
        with k.if_(k.warp_idx() < 8):
            both = NamedBarrier(1, 256)
            mma = W.WarpgroupMma(64, WG_TILE)
            c = make_pipeline_state(Consumer, S)
            for _, (c,) in k.range(n, carry=[c]):
                pipe.consumer_wait(c)
                desc = W.smem_matrix_descriptor(buf.stage(c.index, WG_TILE_BYTES), WG_TILE)
                W.fence()
                mma.mma(mma.accumulator(), desc, desc, accumulate=False)
                W.commit_group()
                if not bug:
                    W.wait_group(0)
                both.sync()
                if bug:
                    W.wait_group(0)
                with k.if_(k.thread_idx() == 0):
                    lines["bug"] = _next_line()
                    pipe.consumer_release(c)
                c.advance()
    return k, lines["bug"], {"n": 2 * S + 1}


CASES = [
    ("multicast_valid_per_cta", multicast_valid_per_cta, {},
     "pipeline 'ab': its barriers are shared by the 2 CTAs of the cluster (multicast loads "
     "land in every CTA of the mask and the consumers release the stage in each of them, or "
     "a 2-CTA pair), but this op sits under a branch whose condition differs between those "
     "CTAs", {"tx-count"}),
    ("aligned_sync_across_roles", aligned_sync_across_roles, {},
     "aligned named barrier 3 (bar.sync 3, 160) synced by warps 0-3 here and by warp 4 at "
     "another site, in one generation", {"divergent-barrier"}),
    ("wgmma_wait_after_barrier", wgmma_wait_after_barrier, {},
     "consumer_release by warp 0 hands back a stage of pipeline 'b' for warps 1-7 too (the "
     "release ends their hold), while their WarpgroupMma.mma may still read it "
     "asynchronously: it is retired only after the barrier that orders this release after "
     "those warps", {"async-read"}),
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
