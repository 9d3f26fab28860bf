"""Benchmark kernels built with pipeline_mlir.pipeline + pipeline_mlir.kernel.

Streaming copy (global -> shared -> consumer warps -> global), one kernel per
(kind, stages, tile):

- ``tma``:   PipelineTmaAsync. Warp 4 is the producer: it acquires the stage
  (the lowering arms ``full`` with ``expect_tx(tile)``) and one elected lane
  issues a 1-D bulk copy (``pipeline.copy.bulk`` = ``cp.async.bulk``) of the
  whole tile. Same shape as the hand-written ``reference/tma_pipe.cu``.
- ``async``: PipelineAsync. Warps 4-7 are producers that copy the tile with
  16-byte ``ld.global.v4`` / ``st.shared.v4`` and commit with one arrive per
  warp (``elect_one_commit``, after ``__syncwarp``).
- ``cpasync``: PipelineCpAsync. Warps 4-7 issue 16-byte ``cp.async.cg`` per
  lane and commit with ``cp.async.mbarrier.arrive.noinc`` (every lane).

In all three, warps 0-3 consume: wait, 16-byte ``ld.shared.v4`` of the whole
stage (all loads first, so ``tile / 2 KiB`` of them are in flight per
thread), 16-byte ``st.global.v4`` to the output, release with one arrive per
warp. CTAs are persistent (grid = #SMs x CTAs/SM) and stride over the tiles.

Handoff latency: ``pingpong(stages)``: warp 0 produces, warp 1 consumes, a
PipelineAsync with one arrive per warp and no payload (``pingpong.cu``'s
"warp" waiters); the consumer reads clock64 and globaltimer around its loop.
"""

import mlir.ir as ir
from mlir.dialects import llvm, nvvm

from pipeline_mlir.kernel import GlobalPtr, Int32, Kernel, Scalar, load, store
from pipeline_mlir.kernel.values import i32, i64
from pipeline_mlir.pipeline import (Agent, CooperativeGroup, PipelineAsync,
                                    PipelineCpAsync, PipelineTmaAsync,
                                    PipelineUserType, make_pipeline_state)

KINDS = ("tma", "async", "cpasync")
CONSUMER_WARPS = 4
VEC = 16  # bytes per vector access


def _v4i32():
    return ir.VectorType.get([4], i32())


def _byte_offset(ptr, offset64):
    """``(i8*)ptr + offset64`` on a global pointer."""
    i8 = ir.IntegerType.get_signless(8)
    return llvm.getelementptr(ptr.type, ptr, [offset64.ir_value],
                              [-2147483648], i8, 0)


def _producer_warps(kind):
    return 1 if kind == "tma" else 4


def block_threads(kind):
    return 32 * (CONSUMER_WARPS + _producer_warps(kind))


def stream_name(kind, stages, tile):
    return f"stream_{kind}_s{stages}_t{tile // 1024}k"


def build_stream(kind, stages, tile, chip="sm_90a"):
    """The streaming-copy kernel; params (src, dst, num_tiles)."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    per_thread = tile // VEC // (32 * CONSUMER_WARPS)
    if per_thread * VEC * 32 * CONSUMER_WARPS != tile:
        raise ValueError(f"tile {tile} is not a multiple of {VEC * 32 * CONSUMER_WARPS}")
    pw = _producer_warps(kind)
    k = Kernel(stream_name(kind, stages, tile), chip=chip,
               block_dim=block_threads(kind),
               params={"src": GlobalPtr(), "dst": GlobalPtr(),
                       "num_tiles": Int32()})
    with k:
        src, dst, num_tiles = k.args
        barriers = k.alloc_barriers(2 * stages)
        ring = k.smem_alloc(stages * tile, align=128, name="ring")
        consumers = CooperativeGroup(Agent.Thread, CONSUMER_WARPS)
        if kind == "tma":
            pipe = PipelineTmaAsync.create(
                num_stages=stages, producer_group=CooperativeGroup(Agent.Thread, 1),
                consumer_group=consumers, tx_count=tile, barrier_storage=barriers)
        elif kind == "async":
            pipe = PipelineAsync.create(
                num_stages=stages, producer_group=CooperativeGroup(Agent.Thread, pw),
                consumer_group=consumers, barrier_storage=barriers,
                elect_one_commit=True, elect_one_release=True)
        else:
            pipe = PipelineCpAsync.create(
                num_stages=stages,
                producer_group=CooperativeGroup(Agent.Thread, 32 * pw),
                consumer_group=consumers, barrier_storage=barriers,
                elect_one_release=True)

        warp = k.warp_idx()
        tid = k.thread_idx()
        first = k.block_idx()
        stride = Scalar(nvvm.read_ptx_sreg_nctaid_x(i32()))

        with k.if_(warp >= CONSUMER_WARPS):  # producer warp(s)
            ptid = tid - 32 * CONSUMER_WARPS
            state = make_pipeline_state(PipelineUserType.Producer, stages)
            for t, _ in k.range(first, num_tiles, stride, carry=[state]):
                pipe.producer_acquire(state)
                gsrc = _byte_offset(src, t.to(64) * tile)
                buf = ring.stage(state.index, tile)
                if kind == "tma":
                    with k.elect_one():
                        pipe.bulk_copy(state, gsrc, buf, tile)
                else:
                    n = tile // VEC // (32 * pw)
                    if kind == "async":
                        vals = [load(gsrc, _v4i32(), ptid + i * 32 * pw)
                                for i in range(n)]
                        for i, v in enumerate(vals):
                            store(v, buf, ptid + i * 32 * pw)
                    else:
                        from pipeline_mlir.kernel import element_ptr
                        for i in range(n):
                            to = element_ptr(buf, _v4i32(), ptid + i * 32 * pw)
                            frm = element_ptr(gsrc, _v4i32(), ptid + i * 32 * pw)
                            nvvm.cp_async_shared_global(
                                to.ir_value, frm, VEC, nvvm.LoadCacheModifierKind.CG)
                pipe.producer_commit(state)
                state.advance()
            pipe.producer_tail(state)

        with k.if_(warp < CONSUMER_WARPS):  # consumer warps
            state = make_pipeline_state(PipelineUserType.Consumer, stages)
            for t, _ in k.range(first, num_tiles, stride, carry=[state]):
                pipe.consumer_wait(state)
                buf = ring.stage(state.index, tile)
                gdst = _byte_offset(dst, t.to(64) * tile)
                step = 32 * CONSUMER_WARPS
                vals = [load(buf, _v4i32(), tid + i * step) for i in range(per_thread)]
                for i, v in enumerate(vals):
                    store(v, gdst, tid + i * step)
                pipe.consumer_release(state)
                state.advance()
    return k


def build_pingpong(stages, chip="sm_90a"):
    """Producer warp 0 -> consumer warp 1, no payload; params (n, out).

    ``out`` gets three i64: consumer clock64 cycles, globaltimer ns and the
    iterations it completed (the same Result fields as pingpong.cu)."""
    k = Kernel(f"pingpong_s{stages}", chip=chip, block_dim=64,
               params={"n": Int32(), "out": GlobalPtr()})
    with k:
        n, out = k.args
        barriers = k.alloc_barriers(2 * stages)
        one_warp = CooperativeGroup(Agent.Thread, 1)
        pipe = PipelineAsync.create(
            num_stages=stages, producer_group=one_warp, consumer_group=one_warp,
            barrier_storage=barriers, elect_one_commit=True,
            elect_one_release=True, syncwarp_before_commit=False,
            syncwarp_before_release=False)
        warp = k.warp_idx()
        with k.if_(warp == 0):
            state = make_pipeline_state(PipelineUserType.Producer, stages)
            for _, _ in k.range(n, carry=[state]):
                pipe.producer_acquire(state)
                pipe.producer_commit(state)
                state.advance()
            pipe.producer_tail(state)  # after the consumer's timed loop
        with k.if_(warp == 1):
            state = make_pipeline_state(PipelineUserType.Consumer, stages)
            c0 = Scalar(nvvm.read_ptx_sreg_clock64(i64()))
            g0 = Scalar(nvvm.read_ptx_sreg_globaltimer(i64()))
            count = Scalar(ir_i64(0))
            for _, _ in k.range(n, carry=[state, count]):
                pipe.consumer_wait(state)
                pipe.consumer_release(state)
                state.advance()
                count.set(count + 1)
            c1 = Scalar(nvvm.read_ptx_sreg_clock64(i64()))
            g1 = Scalar(nvvm.read_ptx_sreg_globaltimer(i64()))
            with k.if_(k.lane_idx() == 0):
                store(c1 - c0, out, 0)
                store(g1 - g0, out, 1)
                store(count, out, 2)
    return k


def ir_i64(v):
    from mlir.dialects import arith
    return arith.constant(i64(), v)


def stream_configs():
    """(kind, stages, tile) of the sweep: stages 1-6 x tiles 16/32 KiB
    (64 KiB for stages <= 3), every kind."""
    out = []
    for kind in KINDS:
        for stages in range(1, 7):
            for tile in (16384, 32768, 65536):
                if stages * tile > 200 * 1024:
                    continue
                out.append((kind, stages, tile))
    return out
