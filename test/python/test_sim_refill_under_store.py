"""pipeline-sim orders a TMA load's (or bulk copy's) async-proxy writes
after every asynchronous read of the words it lands on
(sim/smemrace.py, ``async_fill``): a bulk or TMA store's source must be
read before a copy refills it. The issuing thread's own store needs its
``cp.async.bulk.wait_group.read`` before the copy (uccl-project/mKernel#18,
the port in test_held_out_bugs_eighth.py); another warp's store needs that
wait ordered before the copy by a barrier.

Warp 1 TMA-stores the ring's first buffer (a fixed address, tied to no
stage), retires the store's reads and arrives on named barrier 1; warp 0
meets it there, then refills stage 0 with a TMA load. Planted: warp 1
waits for the reads only after the barrier (found at the load's line,
naming the store, in every schedule); the same thread storing and
refilling with no wait in between. Clean: the wait before the barrier, and
the same thread's wait before its load."""

import inspect

import pytest

from pipeline_mlir.dialects import pipeline as pl
from pipeline_mlir.kernel import Int32, Kernel, TmaDescriptor
from pipeline_mlir.pipeline import (Agent, CooperativeGroup, make_pipeline_state, NamedBarrier,
                                    PipelineTmaAsync, PipelineUserType, tma_store)

TILE = 4096
S = 2
SCHEDULES = 12


def _line():
    return inspect.currentframe().f_back.f_lineno + 1


def refill(storer: int, wait_first: bool):
    """Warp ``storer`` (1: the other warp, 0: the producer itself) stores
    the ring's first buffer before warp 0's loads; ``wait_first``: its
    wait_group.read comes before the hand-over (the barrier, or the
    producer's first load); otherwise just after it."""
    k = Kernel(f"refill_{storer}_{int(wait_first)}", chip="sm_90a", block_dim=64,
               params={"src": TmaDescriptor(), "out": TmaDescriptor(), "k_tiles": Int32()})
    lines = {}
    with k:
        src, out, k_tiles = k.args
        bars = k.alloc_barriers(2 * S)
        ring_buf = k.smem_alloc(S * TILE, align=128, name="ring")
        ring = PipelineTmaAsync.create(
            num_stages=S, producer_group=CooperativeGroup(Agent.Thread, 1),
            consumer_group=CooperativeGroup(Agent.Thread, 1),
            tx_count=TILE, barrier_storage=bars, name="ring")
        handed = NamedBarrier(barrier_id=1, num_threads=64)

        def store_out(me):
            if storer != me:
                return
            with k.elect_one():
                lines["store"] = _line()
                tma_store(out, [0, 0], ring_buf)
                pl.bulk_group_commit()
                if wait_first:
                    pl.bulk_group_wait(pending=0, read=True)

        def wait_late(me):
            if storer == me and not wait_first:
                with k.elect_one():
                    pl.bulk_group_wait(pending=0, read=True)

        with k.if_(k.warp_idx() == 0):
            store_out(0)
            handed.arrive_and_wait()
            s = make_pipeline_state(PipelineUserType.Producer, S)
            for kb, (s,) in k.range(k_tiles, carry=[s]):
                ring.producer_acquire(s)
                with k.elect_one():
                    lines["load"] = _line()
                    ring.tma_load(s, src, [kb * 64, 0], ring_buf.stage(s.index, TILE), TILE)
                    wait_late(0)
                ring.producer_commit(s)
                s.advance()
            ring.producer_tail(s)
        with k.if_(k.warp_idx() == 1):
            store_out(1)
            handed.arrive()
            wait_late(1)
            c = make_pipeline_state(PipelineUserType.Consumer, S)
            for _, (c,) in k.range(k_tiles, carry=[c]):
                ring.consumer_wait(c)
                ring.consumer_release(c)
                c.advance()
        with k.if_(k.warp_idx() == 0):
            with k.elect_one():
                pl.bulk_group_wait(pending=0, read=False)
    return k, lines


def _sim(k):
    return k.simulate({"k_tiles": 3}, schedules=SCHEDULES, check=False)


@pytest.mark.parametrize("storer", [0, 1])
def test_the_reads_retired_before_the_refill_are_clean(storer):
    k, _ = refill(storer, True)
    res = _sim(k)
    assert res.ok, str(res)


@pytest.mark.parametrize("storer", [0, 1])
def test_a_refill_under_the_stores_read_is_found(storer):
    k, lines = refill(storer, False)
    res = _sim(k)
    assert res[0].counts == {"smem-race": SCHEDULES}, str(res)   # every schedule
    msg = res.findings[0].message
    assert f"pipeline.copy.tma_load at {__file__}:{lines['load']}:" in msg, msg
    assert f"pipeline.copy.tma_store at {__file__}:{lines['store']}:" in msg, msg
    assert "(through the async proxy, as the copy lands)" in msg, msg
