"""Held-out synchronization bugs: kernels written the way users write them
(docs/authoring.md, examples/), not derived from the checker's rules, each
next to its correct twin. For every bug the test pins which tool finds it:
``compile()`` / ``to_ptx()`` (the protocol checker, statically, at the
user's line), ``simulate()`` (the CPU simulator, with concrete arguments),
or neither (then the pair is an ``xfail(strict=True)`` naming what is
missing). Every twin passes both, with no checker warning.

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
| release_every_other            | (conditional release)| no     | deadlock          |
| unguarded_prologue             | tilelang#2566        | no     | deadlock          |
| tx_count_in_elements           | (tx bytes)           | yes    | tx bytes          |
| dropped_copy                   | cutlass#1748         | yes    | deadlock          |
| umma_pair_tx_count             | cutlass#3314         | yes    | tx bytes          |
| tma_load_whole_warp            | (tx bytes)           | no     | tx bytes          |
| multicast_consumer_count       | (cluster_m = 2)      | yes    | phase overrun     |
| multicast_no_init_wait         | (defer_sync)         | yes    | uninitialized     |
| multicast_mask_outside_cluster | (multicast)          | yes    | refused           |
| multicast_no_tail              | (cluster exit)       | yes    | exited CTA        |
| store_commit_without_acquire   | (TMA store ring)     | yes    | passes            |
| named_barrier_collision        | tilelang#2360        | yes    | deadlock          |
| producer_keeps_registers       | (register budget)    | yes    | passes            |
| shared_barrier_storage         | (copied create line) | yes*   | passes            |
| unrolled_by_two                | (trip counts)        | yes    | deadlock          |
| leader_releases_for_role       | triton#10035         | no     | buffer overwritten|
| read_after_release             | (load below release) | no     | read after release|
| write_after_commit             | (store below commit) | yes    | commit before write|
| named_barrier_short            | (count of 4 warps)   | yes    | deadlock          |
| participants_commit_in_branch  | (peeled epilogue)    | no     | deadlock          |
| producer_in_rank0_only         | (cluster roles)      | no     | deadlock          |
| tma_store_without_tail         | (TMA store ring)     | yes    | exited CTA        |
| tma_consumer_count_in_threads  | (threads vs warps)   | yes    | deadlock          |
| buffer_from_iteration          | (t % 2 on 4 stages)  | yes*   | passes            |
| read_other_ring                | (copied index line)  | yes*   | passes            |

FlashAttention's release-the-previous-stage idiom (a correct
kernel) passes both: test_release_previous_stage_idiom_is_clean.
(*) found by neither tool before this file. Check 10 of
pipeline-verify-protocol now refuses two pipelines whose barrier storage
overlaps (test/Dialect/Pipeline/VerifyProtocol/barrier-storage.mlir), and
check 16 a plain access into a ring, while a stage is held, whose address
comes from no state index, or that touches a ring another pipeline fills
while holding none of its stages
(test/Dialect/Pipeline/VerifyProtocol/ring-buffer-access.mlir).
docs/VerifyProtocol.md ("Held-out bugs") has the totals.
"""

import inspect
import warnings

import pytest

from pipeline_mlir import diagnostics
from pipeline_mlir.compiler import CompileError
from pipeline_mlir.kernel import GlobalPtr, Int32, Kernel, TmaDescriptor, load, store
from pipeline_mlir.kernel import fence_view_async_shared
from pipeline_mlir.kernel.values import i32
from pipeline_mlir.kernel.warpgroup import set_max_registers
from pipeline_mlir.pipeline import (Agent, CooperativeGroup, NamedBarrier, PipelineError,
                                    pipeline_init_arrive, pipeline_init_wait,
                                    PipelineAsync, PipelineTmaAsync,
                                    PipelineTmaStore, PipelineTmaUmma,
                                    PipelineUserType, make_pipeline_state)
from pipeline_mlir.sim import SimulationFailed

Producer, Consumer = PipelineUserType.Producer, PipelineUserType.Consumer
S = 4                                   # stages
ROWS, COLS = 16, 64                     # an int32 box per stage
TILE = ROWS * COLS * 4
A_BYTES = B_BYTES = 128 * 64 * 2        # bf16 128 x 64 operand boxes


@pytest.fixture(autouse=True)
def _fresh_cache(tmp_path, monkeypatch):
    # A cached build would skip the checker.
    monkeypatch.setenv("PIPELINE_MLIR_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv(diagnostics.ENV_VERBOSE, raising=False)


def _next_line():
    return inspect.currentframe().f_back.f_lineno + 1


def _async(k, consumer=CooperativeGroup(Agent.Thread, 32), producer=32, name="ring"):
    return PipelineAsync.create(
        num_stages=S, producer_group=CooperativeGroup(Agent.Thread, producer),
        consumer_group=consumer, barrier_storage=k.alloc_barriers(2 * S), name=name)


def _produce(k, pipe, n, tail=True):
    s = make_pipeline_state(Producer, S)
    for _, (s,) in k.range(n, carry=[s]):
        pipe.producer_acquire(s)
        pipe.producer_commit(s)
        s.advance()
    if tail:
        pipe.producer_tail(s)
    return s


def _consume(k, pipe, n, state=None):
    c = state if state is not None else make_pipeline_state(Consumer, S)
    for _, (c,) in k.range(n, carry=[c]):
        pipe.consumer_wait(c)
        pipe.consumer_release(c)
        c.advance()
    return c


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


# -- 15. two hand-overs on one named barrier id ----------------------------
def named_barrier_collision(bug):
    """Two consumer warpgroups each hand their staging buffer over with a
    NamedBarrier of 128 threads; both picked id 1, so bar.sync 1 counts
    the 256 threads of both against 128 (it completes with any 4 warps)."""
    threads, tile = 128, 128 * 4
    k = Kernel("bar_collision", chip="sm_90a", block_dim=2 * threads,
               params={"out": TmaDescriptor(), "tiles": Int32()})
    lines = {}
    with k:
        out, tiles = k.args
        staging = k.smem_alloc(2 * tile, align=128, name="staging")
        wg = k.warp_idx() // 4
        for i in range(2):
            pipe = PipelineTmaStore.create(
                num_stages=1, producer_group=CooperativeGroup(Agent.Thread, threads))
            if i == 1:
                lines["bug"] = _next_line()
            sync = NamedBarrier(barrier_id=1 if bug else 1 + i, num_threads=threads)
            with k.if_(wg == i):
                tid = k.thread_idx() % threads
                buf = staging.stage(i, tile)
                for t in k.range(tiles):
                    with k.if_(tid < 32):
                        with k.elect_one():
                            pipe.producer_acquire()
                    sync.arrive_and_wait()
                    store(t * threads + tid, buf, tid)
                    fence_view_async_shared()
                    sync.arrive_and_wait()
                    with k.if_(tid < 32):
                        with k.elect_one():
                            pipe.tma_store(out, [i, t], buf)
                            pipe.producer_commit()
                with k.if_(tid < 32):
                    with k.elect_one():
                        pipe.producer_tail()
    return k, lines["bug"], {"tiles": 3}


# -- 16. a producer warpgroup that never gives its registers back ----------
def producer_keeps_registers(bug):
    """Two consumer warpgroups grow to 232 registers; the producer
    warpgroup's set_max_registers(40, increase=False) is missing, so it
    keeps its entry count (65536 / 384 -> 168): 128 x (168 + 2 x 232)."""
    k = Kernel("keeps_regs", chip="sm_90a", block_dim=384, params={"n": Int32()})
    with k:
        (n,) = k.args
        pipe = _async(k, consumer=CooperativeGroup(Agent.Thread, 256), producer=32)
        wg = k.warp_idx() // 4
        with k.if_(wg == 0) as producer:
            if not bug:
                set_max_registers(40, increase=False)
            with k.if_(k.warp_idx() == 0):
                _produce(k, pipe, n)
        with producer.else_():
            line = _next_line()
            set_max_registers(232, increase=True)
            _consume(k, pipe, n)
    return k, line, {"n": 9}


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


# -- 18. two pipelines on one barrier storage ------------------------------
def shared_barrier_storage(bug):
    """A second ring created on the first ring's barrier array (a copied
    create line): both rings arrive on and wait for the same mbarriers."""
    k = Kernel("shared_bars", block_dim=128, params={"n": Int32()})
    with k:
        (n,) = k.args
        bars_a = k.alloc_barriers(2 * S)
        bars_b = bars_a if bug else k.alloc_barriers(2 * S)
        groups = dict(producer_group=CooperativeGroup(Agent.Thread, 32),
                      consumer_group=CooperativeGroup(Agent.Thread, 32))
        a = PipelineAsync.create(num_stages=S, barrier_storage=bars_a, name="a", **groups)
        line = _next_line()
        b = PipelineAsync.create(num_stages=S, barrier_storage=bars_b, name="b", **groups)
        warp = k.warp_idx()
        with k.if_(warp == 0):
            _produce(k, a, n)
        with k.if_(warp == 1):
            _produce(k, b, n)
        with k.if_(warp == 2):
            _consume(k, a, n)
        with k.if_(warp == 3):
            _consume(k, b, n)
    return k, line, {"n": 9}


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



# -- 22-25. a payload ring: the stage's buffer and the verbs around it -----
STAGE_BYTES = 128                       # one int32 per lane


def payload_ring(bug, what):
    """Warp 0 stores a value per lane into its stage's buffer and commits;
    warp 1 waits, loads it and releases. The bugs:

    - ``read_after_release``: the consumer releases, then loads (the load
      moved below the release while tidying the loop);
    - ``write_after_commit``: the producer commits, then stores;
    - ``buffer_from_iteration``: the producer picks its buffer as
      ``t % 2`` (double-buffering habit) on a ring of 4 stages, so it
      writes buffers it has not acquired while the consumer reads them."""
    k = Kernel("payload_" + what, block_dim=64, params={"out": GlobalPtr(), "n": Int32()})
    lines = {}
    with k:
        out, n = k.args
        ring = k.smem_alloc(S * STAGE_BYTES, align=128, name="ring")
        pipe = _async(k)
        lane = k.lane_idx()
        with k.if_(k.warp_idx() == 0):
            s = make_pipeline_state(Producer, S)
            for t, (s,) in k.range(n, carry=[s]):
                pipe.producer_acquire(s)
                if bug and what == "buffer_from_iteration":
                    lines["bug"] = _next_line()
                    buf = ring.stage(t % 2, STAGE_BYTES)
                else:
                    buf = ring.stage(s.index, STAGE_BYTES)
                if bug and what == "write_after_commit":
                    pipe.producer_commit(s)
                    lines["bug"] = _next_line()
                    store(t, buf, lane)
                else:
                    store(t, buf, lane)
                    pipe.producer_commit(s)
                s.advance()
            pipe.producer_tail(s)
        with k.if_(k.warp_idx() == 1):
            c = make_pipeline_state(Consumer, S)
            for t, (c,) in k.range(n, carry=[c]):
                pipe.consumer_wait(c)
                buf = ring.stage(c.index, STAGE_BYTES)
                if bug and what == "read_after_release":
                    pipe.consumer_release(c)
                    lines["bug"] = _next_line()
                    v = load(buf, i32(), lane)
                else:
                    v = load(buf, i32(), lane)
                    pipe.consumer_release(c)
                store(v, out, t * 32 + lane)
                c.advance()
    return k, lines.get("bug"), {"n": 9}


# -- 26. a final named barrier that leaves out the producer warp ----------
def named_barrier_short(bug):
    """After the mainloop every warp syncs on a named barrier before the
    epilogue; its count was written for the four consumer warps (128) but
    the producer warp reaches it too (160)."""
    k = Kernel("nb_short", block_dim=160, params={"n": Int32()})
    with k:
        (n,) = k.args
        pipe = _async(k, consumer=CooperativeGroup(Agent.Warp, 4))
        sync = NamedBarrier(barrier_id=2, num_threads=128 if bug else 160)
        with k.if_(k.warp_idx() == 0):
            _produce(k, pipe, n)
        with k.if_(k.warp_idx() >= 1):
            _consume(k, pipe, n)
        line = _next_line()
        sync.arrive_and_wait()
    return k, line, {"n": 9}


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


# -- 29. a buffer of the other ring, read with this ring's state -----------
def read_other_ring(bug):
    """Two rings, A and B, each filled by its own producer warp; the
    consumer waits on A and reads B's buffer with A's state (a copied line:
    `rb.stage(ca.index)` for `rb.stage(cb.index)`), before waiting on B:
    the buffer may not be filled yet, or be refilled under the read."""
    k = Kernel("other_ring", block_dim=96, params={"out": GlobalPtr(), "n": Int32()})
    lines = {}
    with k:
        out, n = k.args
        ra = k.smem_alloc(S * STAGE_BYTES, align=128, name="A")
        rb = k.smem_alloc(S * STAGE_BYTES, align=128, name="B")
        a = _async(k, name="a")
        b = _async(k, name="b")
        lane = k.lane_idx()
        for w, (pipe, ring) in enumerate([(a, ra), (b, rb)]):
            with k.if_(k.warp_idx() == w):
                s = make_pipeline_state(Producer, S)
                for t, (s,) in k.range(n, carry=[s]):
                    pipe.producer_acquire(s)
                    store(t, ring.stage(s.index, STAGE_BYTES), lane)
                    pipe.producer_commit(s)
                    s.advance()
                pipe.producer_tail(s)
        with k.if_(k.warp_idx() == 2):
            ca = make_pipeline_state(Consumer, S)
            cb = make_pipeline_state(Consumer, S)
            for t, (ca, cb) in k.range(n, carry=[ca, cb]):
                a.consumer_wait(ca)
                x = load(ra.stage(ca.index, STAGE_BYTES), i32(), lane)
                if bug:
                    lines["bug"] = _next_line()
                    y = load(rb.stage(ca.index, STAGE_BYTES), i32(), lane)
                a.consumer_release(ca)
                b.consumer_wait(cb)
                if not bug:
                    y = load(rb.stage(cb.index, STAGE_BYTES), i32(), lane)
                b.consumer_release(cb)
                store(x + y, out, t * 32 + lane)
                ca.advance()
                cb.advance()
    return k, lines.get("bug"), {"n": 9}

# ---------------------------------------------------------------------------
# What the tools do with each pair.
#
# A case: (id, builder, keyword arguments, static, simulator).
# static: a phrase of compile()'s first error line (at the user's file), or
#   None when the checker lets the bug through (a run-time question).
# simulator: the finding kinds the simulator reports, or None when it passes
#   the bug (what it does not model: registers, bulk-store reads, the storage
#   behind a barrier).
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
    ("release_every_other", release_every_other, {}, None, {"deadlock"}),
    ("unguarded_prologue", unguarded_prologue, {}, None, {"deadlock"}),
    ("tx_count_in_elements", tx_count_in_elements, {},
     "producer_acquire expects 1024 bytes (tx_count 1024) but the 1 copy bound to this "
     "stage deliver 4096", {"tx-count"}),
    ("dropped_copy", dropped_copy, {},
     "producer_acquire expects 32768 bytes (tx_count 32768) but the 1 copy bound to this "
     "stage deliver 16384", {"deadlock"}),
    ("umma_pair_tx_count", umma_pair_tx_count, {},
     "producer_acquire expects 32768 bytes (tx_count 32768) but the 2 copies bound to this "
     "stage deliver 65536", {"tx-count"}),
    ("tma_load_whole_warp", tma_load_whole_warp, {}, None, {"tx-count"}),
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
     "PipelineTmaStore pipeline: loop body acquires 0 stages but commits 1", None),
    ("named_barrier_collision", named_barrier_collision, {},
     "named barrier id 1 counts 128 threads but 256 threads (warps 0-7) reach it",
     {"deadlock"}),
    ("producer_keeps_registers", producer_keeps_registers, {},
     "warpgroups 1-2 at 232 registers per thread and warpgroup 0 at 168 (not resized", None),
    ("shared_barrier_storage", shared_barrier_storage, {},
     "pipeline 'b': its barrier storage (bytes 0-63 of the allocation) overlaps that of "
     "pipeline 'a' (bytes 0-63)", None),
    ("unrolled_by_two", unrolled_by_two, {},
     "the producer role (one warp) commits n stages, the consumer role (one warp) releases "
     "2 * ceildiv(n, 2)", {"deadlock"}),
    ("leader_releases_for_role", leader_releases_for_role, {}, None, {"overwrite"}),
    ("read_after_release", payload_ring, {"what": "read_after_release"}, None,
     {"read-after-release"}),
    ("write_after_commit", payload_ring, {"what": "write_after_commit"},
     "llvm.store writes the stage that producer_commit already published",
     {"commit-before-write"}),
    ("named_barrier_short", named_barrier_short, {},
     "named barrier id 2 counts 128 threads but 160 threads (warps 0-4) reach it",
     {"deadlock"}),
    ("participants_commit_in_branch", participants_commit_in_branch, {}, None, {"deadlock"}),
    ("producer_in_rank0_only", producer_in_rank0_only, {}, None, {"deadlock"}),
    ("tma_store_without_tail", store_commit_without_acquire, {"what": "tail"},
     "PipelineTmaStore pipeline: producer role exits without producer_tail(state): TMA "
     "stores may still be reading shared memory", {"exited-cta"}),
    ("buffer_from_iteration", payload_ring, {"what": "buffer_from_iteration"},
     "llvm.store reaches the ring whose buffers the stages pick (buffers of 128 bytes, "
     "addressed from state.index), while this role holds a stage, but its address is "
     "computed from no state's index", None),
    ("read_other_ring", read_other_ring, {},
     "pipeline 'a': llvm.load touches a buffer of the ring that pipeline 'b' fills (its "
     "producer addresses it from state.index), while this role holds a stage of pipeline "
     "'a' but none of pipeline 'b'", None),
    ("tma_consumer_count_in_threads", tma_load_whole_warp, {"what": "count"},
     "the consumer group CooperativeGroup(Agent.Thread, 128) expects 128 arrivals per "
     "phase, but the consumer role (4 warps, whole-warp consumer_release: one "
     "signalling-lane arrive per warp) gives 4", {"deadlock"}),
]
IDS = [c[0] for c in CASES]
# Where the checker's error names the line the builder returned (the rest
# point at a helper's line in this file: the create or loop of _async /
# _consume / load).
AT_RETURNED_LINE = {"release_after_advance", "store_commit_without_acquire", "read_other_ring",
                    "write_after_commit", "named_barrier_short",
                    "producer_keeps_registers", "shared_barrier_storage", "dropped_copy",
                    "multicast_consumer_count", "release_on_other_pipeline"}
SCHEDULES = 30


def _build(case, bug):
    _, builder, kwargs, _, _ = case
    return builder(bug, **kwargs)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_bug_static(case):
    name, _, _, static, _ = case
    k, line, _ = _build(case, True)
    if static is None:
        # A run-time question: the checker lets it through (no error).
        k.to_ptx()
        return
    with pytest.raises(CompileError) as err:
        k.to_ptx()
    first = str(err.value).splitlines()[0]
    assert first.startswith(f"{__file__}:"), first
    if name in AT_RETURNED_LINE:
        assert first.startswith(f"{__file__}:{line}:"), first
    assert static in first, first


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_bug_simulator(case):
    _, _, _, _, kinds = case
    k, _, args = _build(case, True)
    result = k.simulate(args, schedules=SCHEDULES, check=False)
    if kinds is None:
        assert result.ok, str(result)
        return
    assert not result.ok
    assert kinds <= {f.kind for f in result.findings}, str(result)
    # The report names a line of this file (the user's code).
    assert f"{__file__}:" in str(result)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_twin_is_clean(case):
    k, _, args = _build(case, False)
    with warnings.catch_warnings():
        warnings.simplefilter("error", diagnostics.CheckerWarning)
        k.to_ptx()
    result = k.simulate(args, schedules=SCHEDULES, check=False)
    assert result.ok, str(result)


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
