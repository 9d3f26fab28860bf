"""Held-out synchronization bugs: the CTA's shared resources (named
barriers, registers, barrier storage, ring buffers).

Held-out bugs of what the roles of a CTA share besides a pipeline's
stages: named barrier ids and thread counts, the register file that
setmaxnreg divides, the storage behind a pipeline's mbarriers, and the
shared-memory buffers a ring's state picks.
Each is next to its correct twin; for every bug the tests pin which tool
finds it (_held_out_bugs.py says how).

| case                           | source               | static | simulator         |
|--------------------------------|----------------------|--------|-------------------|
| named_barrier_collision        | tilelang#2360        | yes    | deadlock          |
| producer_keeps_registers       | (register budget)    | yes    | deadlock          |
| shared_barrier_storage         | (copied create line) | yes*   | early read, overrun|
| read_after_release             | (load below release) | yes+   | read after release|
| write_after_commit             | (store below commit) | yes    | commit before write|
| named_barrier_short            | (count of 4 warps)   | yes    | deadlock          |
| buffer_from_iteration          | (t % 2 on 4 stages)  | yes*   | smem race+        |
| read_other_ring                | (copied index line)  | yes*   | smem race         |

(*) found by neither tool before these tests. Check 10 of
pipeline-verify-protocol now refuses two pipelines whose barrier storage
overlaps (test/Dialect/Pipeline/VerifyProtocol/barrier-storage.mlir), and
check 16 a plain access into a ring, while a stage is held, whose address
comes from no state index, or that touches a ring another pipeline fills
while holding none of its stages
(test/Dialect/Pipeline/VerifyProtocol/ring-buffer-access.mlir).
(+) read_after_release: found by the simulator only before these tests:
check 7 now covers the consumer's side too, a load from a stage after its
release (test/Dialect/Pipeline/VerifyProtocol/release-before-read.mlir).
buffer_from_iteration: passed by the simulator before; the holders' loads
of a stage (addressed from state.index) now go into its plain-shared-memory
shadow, which the producer's write through `t % 2` (no state index) races.
"""

import pytest

from pipeline_mlir.kernel import (fence_view_async_shared, GlobalPtr, Int32, Kernel, load,
                                  store, TmaDescriptor)
from pipeline_mlir.kernel.values import i32
from pipeline_mlir.kernel.warpgroup import set_max_registers
from pipeline_mlir.pipeline import (Agent, CooperativeGroup, make_pipeline_state,
                                    NamedBarrier, PipelineAsync, PipelineTmaStore)

# _fresh_cache: an autouse fixture (a cached build would skip the checker).
from _held_out_bugs import (  # noqa: F401
    Consumer, Producer, S, _async, _consume, _next_line, _produce, _fresh_cache,
    check_simulator, check_static, check_twin)


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


CASES = [
    ("named_barrier_collision", named_barrier_collision, {},
     "named barrier id 1 counts 128 threads but 256 threads (warps 0-7) reach it",
     {"deadlock"}),
    ("producer_keeps_registers", producer_keeps_registers, {},
     "warpgroups 1-2 at 232 registers per thread and warpgroup 0 at 168 (not resized",
     {"deadlock"}),
    ("shared_barrier_storage", shared_barrier_storage, {},
     "pipeline 'b': its barrier storage (bytes 0-63 of the allocation) overlaps that of "
     "pipeline 'a' (bytes 0-63)", {"early-read", "overrun"}),
    ("read_after_release", payload_ring, {"what": "read_after_release"},
     "llvm.load reads the stage that consumer_release already handed back to the producer",
     {"read-after-release"}),
    ("write_after_commit", payload_ring, {"what": "write_after_commit"},
     "llvm.store writes the stage that producer_commit already published",
     {"commit-before-write"}),
    ("named_barrier_short", named_barrier_short, {},
     "named barrier id 2 counts 128 threads but 160 threads (warps 0-4) reach it",
     {"deadlock"}),
    ("buffer_from_iteration", payload_ring, {"what": "buffer_from_iteration"},
     "llvm.store reaches the ring whose buffers the stages pick (buffers of 128 bytes, "
     "addressed from state.index), while this role holds a stage, but its address is "
     "computed from no state's index", {"smem-race"}),
    ("read_other_ring", read_other_ring, {},
     "pipeline 'a': llvm.load touches a buffer of the ring that pipeline 'b' fills (its "
     "producer addresses it from state.index), while this role holds a stage of pipeline "
     "'a' but none of pipeline 'b'", {"smem-race"}),
]
IDS = [c[0] for c in CASES]
# Where the checker's error names the line the builder returned (the rest
# point at a helper's line: the create or loop of _async / _consume / load).
AT_RETURNED_LINE = {"named_barrier_short", "producer_keeps_registers", "read_after_release",
                    "read_other_ring", "shared_barrier_storage", "write_after_commit"}


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_bug_static(case):
    check_static(case, __file__, case[0] in AT_RETURNED_LINE)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_bug_simulator(case):
    check_simulator(case, __file__)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_twin_is_clean(case):
    check_twin(case)
