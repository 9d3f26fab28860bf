"""The simulator on a stage that one warp releases for a role while another
warp's asynchronous read of it may still run (sim/asyncread.py,
``check_ended_hold``): any asynchronous reader (wgmma, bulk store,
tcgen05.mma), any releasing warp.

Warps 0-3 (a consumer warpgroup) each wait on a stage and read it
asynchronously (a ``wgmma``; or lane 0 of warp 1 bulk-stores it out),
meet on a named barrier, and thread 0 releases the stage for all (a
consumer group of 1): that release ends every warp's hold. The twin
retires the read (``wgmma.wait_group`` / ``cp.async.bulk.wait_group.read``)
before the barrier, so every read is done before the release: clean. The
bug retires it after the barrier: warp 0's own read is retired before its
release, but the other warps' reads are not ordered before it, and the
producer may refill the stage under them. It is an ``async-read`` finding
in every schedule, at the release's line and the read's, naming the op and
the wait that retires it.

tcgen05.mma (``_umma_kernel``): warp 0 issues the MMA on the stage and
commits it to an accumulator pipeline (a tcgen05.commit that lands once
the MMA is done); warp 1, which holds the stage too, releases it. The twin
waits on the accumulator first (the commit's landing is ordered before the
release): clean. The bug meets warp 0 on a named barrier instead: the
release may come before the MMA is done, found in the schedules where the
commit lands after it.
"""

import re

import mlir.ir as ir
import pytest
from mlir.dialects import arith, nvvm

from pipeline_mlir.kernel import GlobalPtr, Int32, Kernel, tcgen05, tmem
from pipeline_mlir.kernel import wgmma as W
from pipeline_mlir.kernel.values import to_value
from pipeline_mlir.layout import OperandLayout
from pipeline_mlir.pipeline import (Agent, CooperativeGroup, NamedBarrier, PipelineAsync,
                                    PipelineUmmaAsync, PipelineUserType, TmaStoreFence,
                                    make_pipeline_state)
from pipeline_mlir.user_location import user_line

from _held_out_bugs import _next_line

S = 2
TILE = OperandLayout("bf16", "K", 128, 64, 64)      # 64 x 64 bf16: 8 KiB per stage
TILE_BYTES = 64 * 64 * 2
SCHEDULES = 6


@user_line
def _bulk_out(dst, stage):
    """The stage out to ``dst`` (``cp.async.bulk.global.shared::cta``)."""
    size = arith.constant(ir.IntegerType.get_signless(32), TILE_BYTES)
    nvvm.cp_async_bulk_global_shared_cta(to_value(dst), to_value(stage), size)


def _kernel(reader, retired_before_barrier):
    """Warp 4 produces; warps 0-3 read each stage with ``reader`` and thread
    0 releases it after the role's barrier."""
    k = Kernel(f"release_by_another_{reader}_{retired_before_barrier}", block_dim=160,
               params={"dst": GlobalPtr(), "n": Int32()})
    lines = {}
    with k:
        dst, n = k.args
        buf = k.smem_alloc(S * TILE_BYTES, align=1024, name="tiles")
        pipe = PipelineAsync.create(
            num_stages=S, producer_group=CooperativeGroup(Agent.Thread, 32),
            consumer_group=CooperativeGroup(Agent.Thread, 1),
            barrier_storage=k.alloc_barriers(2 * S), name="tiles")
        with k.if_(k.warp_idx() == 4):
            s = make_pipeline_state(PipelineUserType.Producer, S)
            for _, (s,) in k.range(n, carry=[s]):
                pipe.producer_acquire(s)
                pipe.producer_commit(s)
                s.advance()
            pipe.producer_tail(s)
        with k.if_(k.warp_idx() < 4):
            role = NamedBarrier(1, 128)
            mma = W.WarpgroupMma(64, TILE)
            c = make_pipeline_state(PipelineUserType.Consumer, S)
            for _, (c,) in k.range(n, carry=[c]):
                pipe.consumer_wait(c)
                stage = buf.stage(c.index, TILE_BYTES)
                if reader == "wgmma":
                    desc = W.smem_matrix_descriptor(stage, TILE)
                    W.fence()
                    lines["read"] = _next_line()
                    mma.mma(mma.accumulator(), desc, desc, accumulate=False)
                    W.commit_group()
                    if retired_before_barrier:
                        W.wait_group(0)
                    role.sync()
                    if not retired_before_barrier:
                        W.wait_group(0)
                else:
                    groups = TmaStoreFence(num_stages=1)
                    with k.if_(k.thread_idx() == 32):
                        lines["read"] = _next_line()
                        _bulk_out(dst, stage)
                        groups.arrive()
                        if retired_before_barrier:
                            groups.wait()
                    role.sync()
                    if not retired_before_barrier:
                        with k.if_(k.thread_idx() == 32):
                            groups.wait()
                with k.if_(k.thread_idx() == 0):
                    lines["release"] = _next_line()
                    pipe.consumer_release(c)
                c.advance()
    return k, lines


def _umma_kernel(wait_on_the_commit):
    """Warp 4 produces; warp 0 issues a tcgen05.mma on each stage and
    commits it to ``acc``; warp 1 holds the stage too and releases it, after
    waiting on ``acc`` (twin) or after a named barrier with warp 0 (bug)."""
    k = Kernel(f"release_by_another_umma_{wait_on_the_commit}", chip="sm_100a",
               block_dim=160, params={"n": Int32()})
    lines = {}
    with k:
        (n,) = k.args
        buf = k.smem_alloc(S * TILE_BYTES, align=1024, name="tiles")
        holder = k.smem_alloc(4, align=4, name="tmem holder")
        pipe = PipelineAsync.create(
            num_stages=S, producer_group=CooperativeGroup(Agent.Thread, 32),
            consumer_group=CooperativeGroup(Agent.Thread, 1),
            barrier_storage=k.alloc_barriers(2 * S), name="tiles")
        acc = PipelineUmmaAsync.create(
            num_stages=1, producer_group=CooperativeGroup(Agent.Thread, 1),
            consumer_group=CooperativeGroup(Agent.Thread, 32),
            barrier_storage=k.alloc_barriers(2), name="acc")
        # Each role syncs at its own site: the unaligned form (an aligned
        # bar.sync from two sites in one generation is undefined).
        meet = NamedBarrier(1, 64)
        with k.if_(k.warp_idx() == 0):
            tmem.alloc(holder, 64)
        k.sync_threads()
        with k.if_(k.warp_idx() == 4):
            s = make_pipeline_state(PipelineUserType.Producer, S)
            for _, (s,) in k.range(n, carry=[s]):
                pipe.producer_acquire(s)
                pipe.producer_commit(s)
                s.advance()
            pipe.producer_tail(s)
        with k.if_(k.warp_idx() == 0):
            mma = tcgen05.Mma(128, 64)
            d = tmem.load_address(holder)
            c = make_pipeline_state(PipelineUserType.Consumer, S)
            a = make_pipeline_state(PipelineUserType.Producer, 1)
            for _, (c, a) in k.range(n, carry=[c, a]):
                pipe.consumer_wait(c)
                acc.producer_acquire(a)
                desc = tcgen05.smem_descriptor(buf.stage(c.index, TILE_BYTES), TILE)
                with k.elect_one():
                    lines["read"] = _next_line()
                    mma.mma(d, desc, desc, False)
                acc.producer_commit(a)
                if not wait_on_the_commit:
                    meet.wait_unaligned()
                c.advance()
                a.advance()
            acc.producer_tail(a)
        with k.if_(k.warp_idx() == 1):
            c = make_pipeline_state(PipelineUserType.Consumer, S)
            a = make_pipeline_state(PipelineUserType.Consumer, 1)
            for _, (c, a) in k.range(n, carry=[c, a]):
                pipe.consumer_wait(c)
                if wait_on_the_commit:
                    acc.consumer_wait(a)
                else:
                    meet.wait_unaligned()
                with k.if_(k.thread_idx() == 32):
                    lines["release"] = _next_line()
                    pipe.consumer_release(c)
                if not wait_on_the_commit:
                    acc.consumer_wait(a)
                acc.consumer_release(a)
                c.advance()
                a.advance()
        # Free the tensor memory once every role is done with it.
        tcgen05.fence_before_thread_sync()
        k.sync_threads()
        with k.if_(k.warp_idx() == 0):
            tcgen05.fence_after_thread_sync()
            tmem.dealloc(tmem.load_address(holder), 64)
    return k, lines


@pytest.fixture(scope="module")
def results():
    out = {}
    for reader in ("wgmma", "bulk", "tcgen05"):
        for before in (True, False):
            k, lines = (_umma_kernel(before) if reader == "tcgen05" else
                        _kernel(reader, before))
            out[reader, before] = (k.simulate({"n": 2 * S + 1}, schedules=SCHEDULES,
                                              check=False), lines)
    return out


@pytest.mark.parametrize("reader", ["wgmma", "bulk", "tcgen05"])
def test_read_retired_before_the_barrier_passes(results, reader):
    r, _ = results[reader, True]
    assert r.ok, str(r)


_OP = {"wgmma": "nvvm.wgmma.mma_async", "bulk": "nvvm.cp.async.bulk.global.shared.cta"}
_WAIT = {"wgmma": "wgmma.wait_group", "bulk": "cp.async.bulk.wait_group.read"}


@pytest.mark.parametrize("reader", ["wgmma", "bulk"])
def test_read_retired_after_the_barrier_is_found_at_the_release(results, reader):
    r, lines = results[reader, False]
    # every schedule: happens-before, not the interleaving
    (kernel,) = r
    assert kernel.counts == {"async-read": SCHEDULES}, str(r)
    f = r.findings[0]
    release = f"{__file__}:{lines['release']}:"
    read = f"{__file__}:{lines['read']}:"
    assert re.search(
        rf"consumer warp 0 of CTA 0 releases stage \d of pipeline 'tiles' at {release}\d+, "
        rf"which ends the hold of consumer warp [1-3] of CTA 0 too, while consumer warp [1-3] "
        rf"of CTA 0's {re.escape(_OP[reader])} at {read}\d+ may still read that stage "
        rf"asynchronously: ", f.message), f.message
    assert "Retire the read in consumer warp" in f.message and _WAIT[reader] in f.message
    assert any(release in w for w in f.where) and any(read in w for w in f.where), f.where


def test_mma_not_done_at_another_warps_release_is_found(results):
    """The commit's landing (the MMA done) is an event: a release that only
    met the MMA warp after its tcgen05.commit races it, found in the
    schedules where the landing comes later."""
    r, lines = results["tcgen05", False]
    (kernel,) = r
    assert set(kernel.counts) == {"async-read"} and kernel.counts["async-read"] >= 1, str(r)
    f = r.findings[0]
    release = f"{__file__}:{lines['release']}:"
    read = f"{__file__}:{lines['read']}:"
    assert re.search(
        rf"consumer warp 1 of CTA 0 releases stage \d of pipeline 'tiles' at {release}\d+, "
        rf"which ends the hold of consumer warp 0 of CTA 0 too, while consumer warp 0 of "
        rf"CTA 0's nvvm.tcgen05.mma at {read}\d+ may still read that stage asynchronously: "
        rf"the tcgen05.commit covering it has not landed", f.message), f.message
    assert "wait on the barrier a tcgen05.commit of" in f.message, f.message
