"""Held-out synchronization bugs: TMA copies and stores (transaction
bytes, multicast, store rings).

Held-out bugs of the TMA pipelines: the bytes a stage is armed with
against the copies that fill it (2-CTA UMMA pairs, multicast clusters), who
issues a copy, and the TMA-store ring's acquire, commit and tail.
Each is next to its correct twin; for every bug the tests pin which tool
finds it (_held_out_bugs.py says how).

| case                           | source               | static | simulator         |
|--------------------------------|----------------------|--------|-------------------|
| tx_count_in_elements           | (tx bytes)           | yes    | tx bytes          |
| dropped_copy                   | cutlass#1748         | yes    | deadlock          |
| umma_pair_tx_count             | cutlass#3314         | yes    | tx bytes          |
| tma_load_whole_warp            | (tx bytes)           | yes+   | tx bytes          |
| multicast_consumer_count       | (cluster_m = 2)      | yes    | phase overrun     |
| multicast_no_init_wait         | (defer_sync)         | yes    | uninitialized     |
| multicast_mask_outside_cluster | (multicast)          | yes    | refused           |
| multicast_no_tail              | (cluster exit)       | yes    | exited CTA        |
| store_commit_without_acquire   | (TMA store ring)     | yes    | smem race         |
| tma_store_without_tail         | (TMA store ring)     | yes    | exited CTA        |
| tma_consumer_count_in_threads  | (threads vs warps)   | yes    | deadlock          |

(+) found by the simulator only before these tests: check 5 now counts a
copy once per thread that issues it (32 for a warp without elect_one;
test/Dialect/Pipeline/VerifyProtocol/tx-bytes.mlir).
"""

import pytest

from pipeline_mlir.kernel import fence_view_async_shared, Int32, Kernel, store, TmaDescriptor
from pipeline_mlir.pipeline import (Agent, CooperativeGroup, make_pipeline_state,
                                    NamedBarrier, pipeline_init_arrive, pipeline_init_wait,
                                    PipelineTmaAsync, PipelineTmaStore, PipelineTmaUmma)

# _fresh_cache: an autouse fixture (a cached build would skip the checker).
from _held_out_bugs import (  # noqa: F401
    A_BYTES, B_BYTES, COLS, Producer, ROWS, S, TILE, _consume, _next_line, _fresh_cache,
    check_simulator, check_static, check_twin)


# -- 11. tx_count written in elements, not bytes ---------------------------
def tx_count_in_elements(bug):
    """`tx_count=ROWS * COLS` (the box's elements) for an int32 box of
    ROWS x COLS x 4 bytes: the full barrier waits for bytes that never come
    (or, the other way round, completes before the copy)."""
    k = Kernel("tx_elems", chip="sm_90a", block_dim=64,
               params={"src": TmaDescriptor(), "n": Int32()})
    with k:
        src, n = k.args
        bars = k.alloc_barriers(2 * S)
        ring = k.smem_alloc(S * TILE, align=128, name="ring")
        line = _next_line()
        pipe = PipelineTmaAsync.create(
            num_stages=S, producer_group=CooperativeGroup(Agent.Thread, 1),
            consumer_group=CooperativeGroup(Agent.Thread, 1),
            tx_count=ROWS * COLS if bug else TILE, barrier_storage=bars, name="ring")
        with k.if_(k.warp_idx() == 1):
            s = make_pipeline_state(Producer, S)
            for t, (s,) in k.range(n, carry=[s]):
                pipe.producer_acquire(s)
                with k.elect_one():
                    pipe.tma_load(s, src, [0, t * ROWS], ring.stage(s.index, TILE), TILE)
                pipe.producer_commit(s)
                s.advance()
            pipe.producer_tail(s)
        with k.if_(k.warp_idx() == 0):
            _consume(k, pipe, n)
    return k, line, {"n": 9}


# -- 12. a 2-CTA PipelineTmaUmma armed with one CTA's bytes ---------------
def umma_pair_tx_count(bug):
    """cta_layout_vmnk=(2, 1, 1, 1): each CTA of the pair loads its A and
    its half of B onto the leader's full barrier, which the leader arms for
    both CTAs: tx_count must be (A + B) x 2 (blackwell_gemm's ring)."""
    k = Kernel("umma_pair", chip="sm_100a", block_dim=64, cluster_dim=(2, 1, 1),
               params={"a": TmaDescriptor(), "b": TmaDescriptor(), "k_tiles": Int32()})
    with k:
        a, b, k_tiles = k.args
        bars = k.alloc_barriers(2 * S)
        ring_a = k.smem_alloc(S * A_BYTES, align=1024, name="A")
        ring_b = k.smem_alloc(S * B_BYTES, align=1024, name="B")
        line = _next_line()
        ring = PipelineTmaUmma.create(
            num_stages=S, producer_group=CooperativeGroup(Agent.Thread, 1),
            consumer_group=CooperativeGroup(Agent.Thread, 1),
            tx_count=(A_BYTES + B_BYTES) * (1 if bug else 2),
            barrier_storage=bars, cta_layout_vmnk=(2, 1, 1, 1), name="ab")
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
            with k.if_(rank == 0):
                _consume(k, ring, k_tiles)
    return k, line, {"k_tiles": 5}


# -- 13. a multicast ring whose consumer count leaves out the peer CTA -----
def multicast_consumer_count(bug, what="count"):
    """Two CTAs multicast B to each other (hopper_gemm's cluster_m=2): each
    consumer warp releases the stage in both CTAs, so the empty barrier
    counts 2 x 4 warps; the bug counts this CTA's 4 warps only."""
    k = Kernel("mcast", chip="sm_90a", block_dim=160, cluster_dim=(2, 1, 1),
               params={"a": TmaDescriptor(), "b": TmaDescriptor(), "n": Int32()})
    half = TILE // 2
    with k:
        a, b, n = k.args
        bars = k.alloc_barriers(2 * S)
        ring_a = k.smem_alloc(S * TILE, align=128, name="A")
        ring_b = k.smem_alloc(S * TILE, align=128, name="B")
        line = _next_line()
        pipe = PipelineTmaAsync.create(
            num_stages=S, producer_group=CooperativeGroup(Agent.Thread, 1),
            consumer_group=CooperativeGroup(Agent.Thread, 4 if bug and what == "count" else 2 * 4),
            tx_count=2 * TILE, barrier_storage=bars, cta_layout_vmnk=(1, 2, 1, 1),
            defer_sync=True, name="ab")
        if not (bug and what == "init"):
            pipeline_init_arrive(cta_layout_vmnk=(1, 2, 1, 1))
            pipeline_init_wait(cta_layout_vmnk=(1, 2, 1, 1))
        rank = k.cluster_cta_rank()
        with k.if_(k.warp_idx() == 4):
            s = make_pipeline_state(Producer, S)
            for t, (s,) in k.range(n, carry=[s]):
                pipe.producer_acquire(s)
                with k.elect_one():
                    pipe.tma_load(s, a, [0, t * ROWS], ring_a.stage(s.index, TILE), TILE)
                    pipe.tma_load(s, b, [0, t * ROWS + rank * (ROWS // 2)],
                                  ring_b.stage(s.index, TILE) + rank * half, half,
                                  mcast_mask=0b111 if bug and what == "mask" else 0b11)
                pipe.producer_commit(s)
                s.advance()
            if not (bug and what == "tail"):
                pipe.producer_tail(s)
        with k.if_(k.warp_idx() < 4):
            _consume(k, pipe, n)
    return k, line, {"n": 9}


# -- 14. a TMA-store ring that commits without acquiring -------------------
def store_commit_without_acquire(bug, what="acquire"):
    """tma_store_epilogue with the acquire left out of the tile loop: the
    third tile's writes may overwrite a buffer a bulk store still reads.
    ``what="tail"``: the acquire is there, the final producer_tail is not
    (the CTA may exit while a bulk store still reads its shared memory)."""
    threads, tile = 128, 128 * 4
    k = Kernel("store_no_acquire", chip="sm_90a", block_dim=threads,
               params={"out": TmaDescriptor(), "tiles": Int32()})
    lines = {}
    with k:
        out, tiles = k.args
        staging = k.smem_alloc(2 * tile, align=128, name="staging")
        pipe = PipelineTmaStore.create(num_stages=2,
                                       producer_group=CooperativeGroup(Agent.Thread, threads))
        sync = NamedBarrier(barrier_id=1, num_threads=threads)
        tid = k.thread_idx()
        storer = k.warp_idx() == 0
        for t in k.range(tiles):
            buf = staging.stage(t % 2, tile)
            if not (bug and what == "acquire"):
                with k.if_(storer):
                    with k.elect_one():
                        pipe.producer_acquire()
            sync.arrive_and_wait()
            store(t * threads + tid, buf, tid)
            fence_view_async_shared()
            sync.arrive_and_wait()
            with k.if_(storer):
                with k.elect_one():
                    pipe.tma_store(out, [0, t], buf)
                    lines["bug"] = _next_line()
                    pipe.producer_commit()
        if not (bug and what == "tail"):
            with k.if_(storer):
                with k.elect_one():
                    pipe.producer_tail()
    return k, lines["bug"], {"tiles": 5}


# -- 17. a TMA copy issued by the whole producer warp ----------------------
def tma_load_whole_warp(bug, what="elect"):
    """The producer warp issues its tma_load without elect_one: 32 copies of
    the box land on the stage, 32 x the bytes its tx_count armed.
    ``what="count"``: four consumer warps release a PipelineTmaAsync stage
    (one signalling lane per warp) and the group is written in threads,
    CooperativeGroup(Agent.Thread, 128): the empty barrier never completes."""
    consumers = 4 if what == "count" else 1
    k = Kernel("warp_tma", chip="sm_90a", block_dim=32 * (consumers + 1),
               params={"src": TmaDescriptor(), "n": Int32()})
    with k:
        src, n = k.args
        bars = k.alloc_barriers(2 * S)
        ring = k.smem_alloc(S * TILE, align=128, name="ring")
        pipe = PipelineTmaAsync.create(
            num_stages=S, producer_group=CooperativeGroup(Agent.Thread, 1),
            consumer_group=CooperativeGroup(
                Agent.Thread, 32 * consumers if bug and what == "count" else consumers),
            tx_count=TILE, barrier_storage=bars, name="ring")
        with k.if_(k.warp_idx() == consumers):
            s = make_pipeline_state(Producer, S)
            for t, (s,) in k.range(n, carry=[s]):
                pipe.producer_acquire(s)
                line = _next_line()
                if bug and what == "elect":
                    pipe.tma_load(s, src, [0, t * ROWS], ring.stage(s.index, TILE), TILE)
                else:
                    with k.elect_one():
                        pipe.tma_load(s, src, [0, t * ROWS], ring.stage(s.index, TILE), TILE)
                pipe.producer_commit(s)
                s.advance()
            pipe.producer_tail(s)
        with k.if_(k.warp_idx() < consumers):
            _consume(k, pipe, n)
    return k, line, {"n": 9}


# -- 21. a copy dropped from a stage whose tx_count still counts it --------
def dropped_copy(bug):
    """A stage of A and B tiles (tx_count = A + B) whose B copy was taken
    out while debugging (cutlass#1748: 'commenting out one of the copies
    hangs'): the full barrier waits for B's bytes forever."""
    k = Kernel("dropped_copy", chip="sm_100a", block_dim=64,
               params={"a": TmaDescriptor(), "b": TmaDescriptor(), "n": Int32()})
    with k:
        a, b, n = k.args
        ring_a = k.smem_alloc(S * A_BYTES, align=1024, name="A")
        ring_b = k.smem_alloc(S * B_BYTES, align=1024, name="B")
        ring = PipelineTmaUmma.create(
            num_stages=S, producer_group=CooperativeGroup(Agent.Thread, 1),
            consumer_group=CooperativeGroup(Agent.Thread, 1), tx_count=A_BYTES + B_BYTES,
            barrier_storage=k.alloc_barriers(2 * S), name="ab")
        with k.if_(k.warp_idx() == 0):
            s = make_pipeline_state(Producer, S)
            for kb, (s,) in k.range(n, carry=[s]):
                line = _next_line()
                ring.producer_acquire(s)
                with k.elect_one():
                    ring.tma_load(s, a, [kb * 64, 0], ring_a.stage(s.index, A_BYTES), A_BYTES)
                    if not bug:
                        ring.tma_load(s, b, [kb * 64, 0], ring_b.stage(s.index, B_BYTES),
                                      B_BYTES)
                ring.producer_commit(s)
                s.advance()
            ring.producer_tail(s)
        with k.if_(k.warp_idx() == 1):
            _consume(k, ring, n)
    return k, line, {"n": 9}


CASES = [
    ("tx_count_in_elements", tx_count_in_elements, {},
     "producer_acquire expects 1024 bytes (tx_count 1024) but the 1 copy bound to this "
     "stage deliver 4096", {"tx-count"}),
    ("dropped_copy", dropped_copy, {},
     "producer_acquire expects 32768 bytes (tx_count 32768) but the 1 copy bound to this "
     "stage deliver 16384", {"deadlock"}),
    ("umma_pair_tx_count", umma_pair_tx_count, {},
     "producer_acquire expects 32768 bytes (tx_count 32768) but the 2 copies bound to this "
     "stage deliver 65536", {"tx-count"}),
    ("tma_load_whole_warp", tma_load_whole_warp, {},
     "producer_acquire expects 4096 bytes (tx_count 4096) but the 1 copy bound to this "
     "stage deliver 131072", {"tx-count"}),
    ("multicast_consumer_count", multicast_consumer_count, {},
     "one signalling-lane arrive per warp from each of the 2 multicast CTAs) gives 8",
     {"overrun"}),
    ("multicast_no_init_wait", multicast_consumer_count, {"what": "init"},
     "producer_acquire uses a pipeline created with defer_sync before any "
     "pipeline_init_wait()", {"uninitialized"}),
    ("multicast_mask_outside_cluster", multicast_consumer_count, {"what": "mask"},
     "producer_acquire expects 8192 bytes (tx_count 8192) but the 2 copies bound to this "
     "stage deliver 10240", {"unsupported"}),
    ("multicast_no_tail", multicast_consumer_count, {"what": "tail"},
     "producer role exits without producer_tail(state): consumers in peer CTAs may still "
     "arrive", {"exited-cta"}),
    ("store_commit_without_acquire", store_commit_without_acquire, {},
     "PipelineTmaStore pipeline: loop body acquires 0 stages but commits 1", {"smem-race"}),
    ("tma_store_without_tail", store_commit_without_acquire, {"what": "tail"},
     "PipelineTmaStore pipeline: producer role exits without producer_tail(state): TMA "
     "stores may still be reading shared memory", {"exited-cta"}),
    ("tma_consumer_count_in_threads", tma_load_whole_warp, {"what": "count"},
     "the consumer group CooperativeGroup(Agent.Thread, 128) expects 128 arrivals per "
     "phase, but the consumer role (4 warps, whole-warp consumer_release: one "
     "signalling-lane arrive per warp) gives 4", {"deadlock"}),
]
IDS = [c[0] for c in CASES]
# Where the checker's error names the line the builder returned (the rest
# point at a helper's line: the create or loop of _async / _consume / load).
AT_RETURNED_LINE = {"dropped_copy", "multicast_consumer_count", "store_commit_without_acquire"}


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_bug_static(case):
    check_static(case, __file__, case[0] in AT_RETURNED_LINE)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_bug_simulator(case):
    check_simulator(case, __file__)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_twin_is_clean(case):
    check_twin(case)
