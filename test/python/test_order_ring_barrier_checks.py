"""Slips that keep every count right, written with the Python API: each bug
is reported at compile time at the user's line, and its correct twin is not.

- verb order: a consumer_release moved above its consumer_wait, a
  producer_tail doubled (pipeline-verify-protocol, property 15);
- ring buffers: a pipeline with more stages than the buffers of the ring it
  indexes by hand (``ring + state.index * bytes``; ``ring.stage(...)``
  already refuses the mismatch at build time): ``smem_alloc`` tells the
  checker the ring's size (property 16);
- named barriers: a hand-over through two NamedBarriers whose consumer
  syncs once more than the producer arrives (property 9, second part);
- the examples' own slips of the same kinds, planted in their printed IR:
  the cluster's pipeline_init_wait above its pipeline_init_arrive
  (property 13, third part), the epilogue's tma_store below the
  producer_commit that closes its group, or dropped (property 15).
"""

import os

import mlir.ir as ir
import mlir.passmanager as passmanager
import pytest

import pipeline_mlir
from _example_checks import example_ir, verify_protocol

from pipeline_mlir.kernel import GlobalPtr, Int32, Kernel, load, store
from pipeline_mlir.pipeline import (Agent, CooperativeGroup, NamedBarrier, PipelineAsync,
                                    PipelineUserType, make_pipeline_state)



def errors_at(module):
    """``[(location, message)]`` of the checker's errors on a built module,
    with the user's file:line locations kept."""
    text = module.operation.get_asm(enable_debug_info=True)
    with pipeline_mlir.make_context():
        parsed = ir.Module.parse(text)
        try:
            passmanager.PassManager.parse(
                "builtin.module(pipeline-verify-protocol)").run(parsed.operation)
        except ir.MLIRError as e:
            return [(str(d.location), d.message) for d in e.error_diagnostics]
    return []

TILE = 2048  # bytes per buffer: one 16-byte vector per lane, four times
HERE = os.path.basename(__file__)


def _v4i32():
    return ir.VectorType.get([4], ir.IntegerType.get_signless(32))


def copy_ring(stages, buffers, *, release_first=False, tail_twice=False):
    """A producer warp fills a ring of ``buffers`` buffers, indexed by hand,
    through a ``stages``-stage PipelineAsync; a consumer warp drains it."""
    k = Kernel(f"ring_s{stages}_b{buffers}", block_dim=64,
               params={"src": GlobalPtr(), "dst": GlobalPtr(), "ntiles": Int32()})
    with k:
        src, dst, ntiles = k.args
        barriers = k.alloc_barriers(2 * stages)
        ring = k.smem_alloc(buffers * TILE, align=128, name="ring")
        pipe = PipelineAsync.create(
            num_stages=stages, producer_group=CooperativeGroup(Agent.Thread, 32),
            consumer_group=CooperativeGroup(Agent.Thread, 32), barrier_storage=barriers)
        warp, lane = k.warp_idx(), k.lane_idx()
        with k.if_(warp == 1):
            state = make_pipeline_state(PipelineUserType.Producer, stages)
            for t, _ in k.range(ntiles, carry=[state]):
                pipe.producer_acquire(state)
                buf = ring + state.index * TILE  # the ring line
                for i in range(TILE // 512):
                    store(load(src, _v4i32(), lane + 32 * i), buf, lane + 32 * i)
                pipe.producer_commit(state)
                state.advance()
            pipe.producer_tail(state)
            if tail_twice:
                pipe.producer_tail(state)  # the doubled tail
        with k.if_(warp == 0):
            state = make_pipeline_state(PipelineUserType.Consumer, stages)
            for t, _ in k.range(ntiles, carry=[state]):
                if release_first:
                    pipe.consumer_release(state)  # the release moved up
                pipe.consumer_wait(state)
                buf = ring + state.index * TILE
                for i in range(TILE // 512):
                    store(load(buf, _v4i32(), lane + 32 * i), dst, lane + 32 * i)
                if not release_first:
                    pipe.consumer_release(state)
                state.advance()
    return k.module


def _line_of(needle):
    with open(__file__) as f:
        for n, line in enumerate(f, 1):
            if needle in line:
                return n
    raise AssertionError(needle)


def test_more_stages_than_ring_buffers():
    (where, diag), = errors_at(copy_ring(4, 3))
    assert f"{HERE}\":{_line_of('# the ring line')}:" in where
    assert ("the buffer of stage 3 starts at byte 6144 of a 6144-byte shared-memory "
            "allocation (rule: a pipeline has no more stages than the buffers of the ring "
            "it indexes): the ring holds 3 buffers of 2048 bytes") in diag
    assert "use at most 3 stages, or allocate 4 buffers" in diag


@pytest.mark.parametrize("stages", [2, 3])
def test_stages_within_the_ring(stages):
    assert errors_at(copy_ring(stages, 3)) == []


def test_release_above_its_wait():
    (where, diag), = errors_at(copy_ring(3, 3, release_first=True))
    assert f"{HERE}\":{_line_of('# the release moved up')}:" in where
    assert ("consumer.release runs before the consumer.wait of its state (rule: a "
            "stage's consumer.release follows its consumer.wait)") in diag
    assert "(move consumer.release after consumer.wait)" in diag


def test_producer_tail_doubled():
    (where, diag), = errors_at(copy_ring(3, 3, tail_twice=True))
    assert f"{HERE}\":{_line_of('# the doubled tail')}:" in where
    assert "producer.tail a second time (rule: a producer role ends with one " \
           "producer.tail per pipeline)" in diag


def hand_over(extra_sync=False):
    """Warp 0 writes a buffer and arrives on ``full``; warp 1 syncs on
    ``full``, reads, and arrives on ``empty``, which warp 0 syncs on before
    every refill but the first."""
    k = Kernel("hand_over" + ("_extra" if extra_sync else ""), block_dim=64,
               params={"src": GlobalPtr(), "dst": GlobalPtr(), "ntiles": Int32()})
    with k:
        src, dst, ntiles = k.args
        buf = k.smem_alloc(512, align=128, name="buf")
        full, empty = NamedBarrier(1, 64), NamedBarrier(2, 64)
        warp, lane = k.warp_idx(), k.lane_idx()
        with k.if_(warp == 0):
            for t, _ in k.range(ntiles):
                with k.if_(t > 0):
                    empty.arrive_and_wait()
                store(load(src, _v4i32(), lane), buf, lane)
                full.arrive()
        with k.if_(warp == 1):
            for t, _ in k.range(ntiles):
                full.arrive_and_wait()  # warp 1's first sync
                if extra_sync:
                    full.arrive_and_wait()  # the doubled sync
                store(load(buf, _v4i32(), lane), dst, lane)
                with k.if_(t < ntiles - 1):
                    empty.arrive()
    return k.module


def test_named_barrier_sync_doubled():
    (where, diag), = errors_at(hand_over(extra_sync=True))
    assert f"{HERE}\":{_line_of("# warp 1's first sync")}:" in where
    assert ("named barrier id 1 counts 64 threads (warps 0-1); warp 1 only syncs on it, "
            "2 * ntiles times") in diag
    assert "its last sync never completes" in diag


def test_named_barrier_hand_over_is_clean():
    assert errors_at(hand_over()) == []


def _swap_lines(text, first, second):
    lines = text.split("\n")
    i = next(n for n, line in enumerate(lines) if first in line)
    j = next(n for n, line in enumerate(lines) if second in line)
    lines[i], lines[j] = lines[j], lines[i]
    return "\n".join(lines)


def test_cluster_init_wait_above_its_arrive():
    text = example_ir("tma_reduction_cluster")
    assert verify_protocol(text) == []
    (diag,) = verify_protocol(_swap_lines(text, "pipeline.init_arrive", "pipeline.init_wait"))
    assert diag.startswith("pipeline.init_wait with no pipeline.init_arrive before it (rule: "
                           "one cluster arrive, then one cluster wait)")
    assert "(call pipeline.init_arrive once, then pipeline.init_wait once" in diag


def test_epilogue_store_below_its_commit_or_dropped():
    text = example_ir("tma_store_epilogue")
    assert verify_protocol(text) == []
    (diag,) = verify_protocol(_swap_lines(text, "pipeline.copy.tma_store",
                                          "pipeline.producer.commit"))
    assert ("copy.tma_store runs after the producer.commit that closes its stage (rule: a "
            "PipelineTmaStore stage's copy.tma_store goes between producer.acquire and "
            "producer.commit)") in diag
    dropped = "\n".join(line for line in text.split("\n")
                        if "pipeline.copy.tma_store" not in line)
    (diag,) = verify_protocol(dropped)
    assert "producer.commit closes a bulk group with no copy.tma_store since the " \
           "producer.acquire of its state" in diag
