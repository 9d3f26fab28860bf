"""Held-out synchronization bugs, third round: ported from public bug
reports of other kernel stacks, none shown to the checker before.

Each bug is what the report's kernel (or compiler) did, ported to this API,
next to its correct twin; for every bug the tests pin which tool finds it
(_held_out_bugs.py says how).

| case                        | source                              | static | simulator  |
|-----------------------------|-------------------------------------|--------|------------|
| multicast_trips_per_cta     | deepseek-ai/DeepGEMM#415, #429      | yes*   | deadlock   |
| block_sync_in_role          | NVIDIA/Fuser#4187                   | yes*   | deadlock   |
| barrier_in_per_warp_loop    | intel/sycl-tla#830                  | yes*   | deadlock   |
| fence_only_in_loop          | MoonshotAI/FlashKDA#24              | yes    | smem race  |
| tx_from_clamped_box         | mirage-project/mirage#705           | yes    | tx bytes   |
| phase_flip_on_empty_tile    | Dao-AILab/flash-attention#2258      | yes*   | deadlock   |
| state_remade_per_tile       | tile-ai/tilelang#2674               | yes    | deadlock   |

(*) passed by the checker before these tests, now refused:
- check 19 (test/Dialect/Pipeline/VerifyProtocol/uniform-trips.mlir): a
  ring the CTAs of a cluster share inside a loop whose trip count differs
  between them; a block-wide `bar.sync 0` under a warp-role branch; a
  barrier synced in a loop whose trip count differs between the warps it
  counts;
- check 2, advances on every path (state-advance-paths.mlir): a state
  advanced on paths where its wait does not run.

The simulator found all seven before any change (a deadlock, a race of the
TMA store with the unfenced writes, or the short transaction count).
"""

import pytest

from pipeline_mlir.kernel import (fence_view_async_shared, Int32, Kernel, load, store,
                                  TmaDescriptor)
from pipeline_mlir.kernel.values import i32
from pipeline_mlir.pipeline import (Agent, CooperativeGroup, make_pipeline_state,
                                    NamedBarrier, pipeline_init_arrive, pipeline_init_wait,
                                    PipelineAsync, PipelineTmaAsync, PipelineTmaStore)

# _fresh_cache: an autouse fixture (a cached build would skip the checker).
from _held_out_bugs import (  # noqa: F401
    Consumer, Producer, ROWS, S, TILE, _async, _consume, _next_line, _produce, _fresh_cache,
    check_simulator, check_static, check_twin)


# -- 41. a multicast pair whose CTAs run different k-loops -----------------
def multicast_trips_per_cta(bug):
    """deepseek-ai/DeepGEMM#415 (and #429): the k-grouped GEMM lays the
    groups' tiles back to back and each CTA takes the k-loop length of its
    own tile's group; with an odd number of tiles per group, the two CTAs of
    a multicast cluster straddle two groups and run different numbers of
    k-blocks on barriers they share (each consumer warp releases the stage
    in both CTAs, each CTA's load lands in both): the longer one waits
    forever. The twin takes the group of the cluster's first tile, the same
    in both CTAs (DeepGEMM's fix keeps a cluster inside one group)."""
    k = Kernel("mcast_trips", chip="sm_90a", block_dim=160, cluster_dim=(2, 1, 1),
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
        if bug:
            tile = k.block_idx()
        else:
            tile = k.block_idx() // 2 * 2   # the cluster's first tile
        # Group g has n + g k-blocks.
        k_blocks = n + tile // tiles_per_group
        with k.if_(k.warp_idx() == 4):
            s = make_pipeline_state(Producer, S)
            for t, (s,) in k.range(k_blocks, carry=[s]):
                lines["bug"] = _next_line()
                pipe.producer_acquire(s)
                with k.elect_one():
                    pipe.tma_load(s, a, [0, t * ROWS], ring_a.stage(s.index, TILE), TILE)
                    pipe.tma_load(s, b, [0, t * ROWS + rank * (ROWS // 2)],
                                  ring_b.stage(s.index, TILE) + rank * half, half,
                                  mcast_mask=0b11)
                pipe.producer_commit(s)
                s.advance()
            pipe.producer_tail(s)
        with k.if_(k.warp_idx() < 4):
            _consume(k, pipe, k_blocks)
    return k, lines["bug"], {"n": 3, "tiles_per_group": 1}


# -- 42. a CTA-wide barrier inside one warp role ---------------------------
def block_sync_in_role(bug):
    """NVIDIA/Fuser#4187: the code generator placed a block-wide
    `__syncthreads()` (the read-after-write sync of the compute warps'
    shared-memory tile) inside the warp-specialized branch of the compute
    warps; the load warp never reaches it and the compute warps wait there
    forever. The twin syncs the compute warps on a named barrier of their
    own (the fix: a barrier counting the threads of the branch)."""
    k = Kernel("block_sync_role", block_dim=160, params={"n": Int32()})
    lines = {}
    with k:
        (n,) = k.args
        pipe = _async(k, consumer=CooperativeGroup(Agent.Thread, 128))
        tile = k.smem_alloc(128 * 4, align=16, name="tile")
        shifted = k.smem_alloc(128 * 4, align=16, name="shifted")
        compute = NamedBarrier(barrier_id=1, num_threads=128)
        with k.if_(k.warp_idx() == 4):
            _produce(k, pipe, n)
        with k.if_(k.warp_idx() < 4):
            tid = k.thread_idx()
            c = make_pipeline_state(Consumer, S)
            for _, (c,) in k.range(n, carry=[c]):
                pipe.consumer_wait(c)
                pipe.consumer_release(c)
                c.advance()
            store(tid, tile, tid)
            if bug:
                lines["bug"] = _next_line()
                k.sync_threads()
            else:
                compute.arrive_and_wait()
            store(load(tile, i32(), (tid + 32) % 128), shifted, tid)
    return k, lines.get("bug"), {"n": 5}


# -- 43. a barrier in a loop whose trip count each warp computes -----------
def barrier_in_per_warp_loop(bug):
    """intel/sycl-tla#830 (the same hang: vllm-project/vllm-xpu-kernels#312):
    the causal attention mainloop keeps its warps together with a barrier
    of the whole work-group inside the k-block loop, but each warp computes
    the loop's trip count from its own query rows (the causal diagonal), so
    the warps reach the barrier different numbers of times: the warp with
    the longest loop waits at its last barrier for warps that have left
    the loop. Here the four compute warps stage each key block in shared
    memory and sync on a named barrier of the four. The twin bounds every
    warp's loop by the CTA's last row (masking the rest), the same for all
    warps."""
    k = Kernel("per_warp_loop", block_dim=128, params={"q_block": Int32()})
    lines = {}
    with k:
        (q_block,) = k.args
        keys = k.smem_alloc(128 * 4, align=16, name="keys")
        scores = k.smem_alloc(128 * 4, align=16, name="scores")
        together = NamedBarrier(barrier_id=1, num_threads=128)
        tid = k.thread_idx()
        if bug:
            # warp w's rows end on the diagonal at key block 4 q + w
            k_blocks = q_block * 4 + k.warp_idx() + 1
        else:
            k_blocks = q_block * 4 + 4
        for kb in k.range(k_blocks):
            store(kb * 128 + tid, keys, tid)
            lines["bug"] = _next_line()
            together.arrive_and_wait()
            store(load(keys, i32(), (tid + 32) % 128), scores, tid)
            together.arrive_and_wait()
    return k, lines["bug"], {"q_block": 1}


# -- 44. the proxy fence only inside a loop that may not run ---------------
def fence_only_in_loop(bug):
    """MoonshotAI/FlashKDA#24: the state tile is zero-initialised with
    ordinary stores before the chunk loop; each chunk updates it and fences
    (`fence.proxy.async.shared::cta`), and the TMA store after the loop
    writes it out. For an empty sequence (no chunks: a varlen batch) the
    loop never runs, so no fence separates the zero-init from the TMA store,
    which may read stale shared memory. The twin fences after the
    zero-init as well."""
    threads, tile = 128, 128 * 4
    k = Kernel("fence_in_loop", chip="sm_90a", block_dim=threads,
               params={"out": TmaDescriptor(), "chunks": Int32()})
    lines = {}
    with k:
        out, chunks = k.args
        state = k.smem_alloc(tile, align=128, name="state")
        pipe = PipelineTmaStore.create(num_stages=1,
                                       producer_group=CooperativeGroup(Agent.Thread, threads))
        sync = NamedBarrier(barrier_id=1, num_threads=threads)
        tid = k.thread_idx()
        storer = k.warp_idx() == 0
        store(0, state, tid)
        if not bug:
            fence_view_async_shared()
        for c in k.range(chunks):
            store(load(state, i32(), tid) + c, state, tid)
            fence_view_async_shared()
        sync.arrive_and_wait()
        with k.if_(storer):
            with k.elect_one():
                pipe.producer_acquire()
                lines["bug"] = _next_line()
                pipe.tma_store(out, [0, 0], state)
                pipe.producer_commit()
                pipe.producer_tail()
    return k, lines["bug"], {"chunks": 0}


# -- 45. tx bytes of a clamped box, the box itself not clamped -------------
def tx_from_clamped_box(bug):
    """mirage-project/mirage#705: for a batch smaller than the MMA's N the
    kernel armed each k-tile with the bytes of a box clamped to the batch
    (`min(MMA_N, batch) x 64 x 2` = 1024), but the split-K task's TMA
    descriptor kept the full 16-row box (2048 bytes): the extra bytes
    corrupt the full barrier's transaction count and the MMA warp waits
    forever. The twin arms the stage with the bytes of the box the copy
    moves."""
    mma_n, batch, box_k = 16, 8, 64
    box_bytes = mma_n * box_k * 2
    k = Kernel("tx_clamped", chip="sm_90a", block_dim=64,
               params={"src": TmaDescriptor(), "n": Int32()})
    lines = {}
    with k:
        src, n = k.args
        bars = k.alloc_barriers(2 * S)
        ring = k.smem_alloc(S * box_bytes, align=128, name="ring")
        pipe = PipelineTmaAsync.create(
            num_stages=S, producer_group=CooperativeGroup(Agent.Thread, 1),
            consumer_group=CooperativeGroup(Agent.Thread, 1),
            tx_count=(min(mma_n, batch) if bug else mma_n) * box_k * 2,
            barrier_storage=bars, name="ring")
        with k.if_(k.warp_idx() == 1):
            s = make_pipeline_state(Producer, S)
            for t, (s,) in k.range(n, carry=[s]):
                lines["bug"] = _next_line()
                pipe.producer_acquire(s)
                with k.elect_one():
                    pipe.tma_load(s, src, [0, t * mma_n], ring.stage(s.index, box_bytes),
                                  box_bytes)
                pipe.producer_commit(s)
                s.advance()
            pipe.producer_tail(s)
        with k.if_(k.warp_idx() == 0):
            c = make_pipeline_state(Consumer, S)
            for _, (c,) in k.range(n, carry=[c]):
                pipe.consumer_wait(c)
                with k.elect_one():
                    pipe.consumer_release(c)
                c.advance()
    return k, lines["bug"], {"n": 5}


# -- 46. a consumer phase flipped on a tile with no work -------------------
def phase_flip_on_empty_tile(bug):
    """Dao-AILab/flash-attention#2258 (fix 4): in the block-sparse forward,
    the MMA warp hands each tile's output to the correction warps through a
    one-stage barrier pair, but skips tiles with no key blocks; the
    correction warps flipped their consumer phase on every tile, empty or
    not, so after an odd number of empty tiles they wait on the wrong
    parity (a hang). The twin advances the consumer state only on tiles it
    waited on, like the producer."""
    k = Kernel("empty_tile_phase", block_dim=64,
               params={"tiles": Int32(), "first_tile": Int32()})
    lines = {}
    with k:
        tiles, first_tile = k.args
        pipe = PipelineAsync.create(
            num_stages=1, producer_group=CooperativeGroup(Agent.Thread, 32),
            consumer_group=CooperativeGroup(Agent.Thread, 32),
            barrier_storage=k.alloc_barriers(2), name="o_corr")
        # The tiles before `first_tile` have no key blocks (the block-sparse
        # mask leaves their rows empty).
        with k.if_(k.warp_idx() == 0):
            s = make_pipeline_state(Producer, 1)
            for t, (s,) in k.range(tiles, carry=[s]):
                with k.if_(t >= first_tile, carry=[s]):
                    pipe.producer_acquire(s)
                    pipe.producer_commit(s)
                    s.advance()
            pipe.producer_tail(s)
        with k.if_(k.warp_idx() == 1):
            c = make_pipeline_state(Consumer, 1)
            for t, (c,) in k.range(tiles, carry=[c]):
                if bug:
                    with k.if_(t >= first_tile):
                        pipe.consumer_wait(c)
                        pipe.consumer_release(c)
                    lines["bug"] = _next_line()
                    c.advance()
                else:
                    with k.if_(t >= first_tile, carry=[c]):
                        pipe.consumer_wait(c)
                        pipe.consumer_release(c)
                        c.advance()
    return k, lines.get("bug"), {"tiles": 4, "first_tile": 1}


# -- 47. a consumer state made afresh for every tile -----------------------
def state_remade_per_tile(bug):
    """tile-ai/tilelang#2674 (review of the fix): warp specialization under
    an outer persistent loop kept the producer's mbarrier phase across
    tiles but restarted the consumer's on every tile, so from the second
    tile on the consumer waits on parities of the first lap unless the
    k-loop's trip count is a multiple of the phase period (2 x stages):
    wrong results or a hang. The twin carries the consumer state across
    tiles, like the producer's."""
    k = Kernel("remade_state", block_dim=64, params={"tiles": Int32(), "n": Int32()})
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
            if bug:
                for _ in k.range(tiles):
                    lines["bug"] = _next_line()
                    c = make_pipeline_state(Consumer, S)
                    _consume(k, pipe, n, c)
            else:
                c = make_pipeline_state(Consumer, S)
                for _, (c,) in k.range(tiles, carry=[c]):
                    c = _consume(k, pipe, n, c)
    return k, lines.get("bug"), {"tiles": 3, "n": 3}


CASES = [
    ("multicast_trips_per_cta", multicast_trips_per_cta, {},
     "pipeline 'ab': its barriers are shared by the 2 CTAs of the cluster", {"deadlock"}),
    ("block_sync_in_role", block_sync_in_role, {},
     "block-wide barrier (bar.sync 0, k.sync_threads()) inside a warp-role branch, reached by "
     "warps 0-3 of the CTA's 5", {"deadlock"}),
    ("barrier_in_per_warp_loop", barrier_in_per_warp_loop, {},
     "named barrier 1 (128 threads) synced inside a loop whose trip count differs between the "
     "warps it counts: warp 0 runs the loop 5 times, warp 1 6 times (with q_block = 1)",
     {"deadlock"}),
    ("fence_only_in_loop", fence_only_in_loop, {},
     "proxy fence: this TMA store reads shared memory through the async proxy that warps "
     "0-3 wrote with ordinary stores (the generic proxy), and on some path no "
     "fence.proxy.async.shared::cta lies between the writes and the store", {"smem-race"}),
    ("tx_from_clamped_box", tx_from_clamped_box, {},
     "pipeline 'ring': producer_acquire expects 1024 bytes (tx_count 1024) but the 1 copy "
     "bound to this stage deliver 2048", {"tx-count"}),
    ("phase_flip_on_empty_tile", phase_flip_on_empty_tile, {},
     "pipeline 'o_corr': the state advances 1 stage on every path through the loop body, but "
     "the body waits on 1 stage on some paths and 0 on others", {"deadlock"}),
    ("state_remade_per_tile", state_remade_per_tile, {},
     "pipeline 'ring': the consumer state is made inside a loop", {"deadlock"}),
]
IDS = [c[0] for c in CASES]
# Where the checker's error names the line the builder returned.
AT_RETURNED_LINE = set(IDS)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_bug_static(case):
    check_static(case, __file__, case[0] in AT_RETURNED_LINE)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_bug_simulator(case):
    check_simulator(case, __file__)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_twin_is_clean(case):
    check_twin(case)
