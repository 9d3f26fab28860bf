"""The copy ring: ``src`` -> a ring of shared-memory stages -> ``dst``.

Producer warps fill the stages from global memory, consumer warps drain them
to global memory, and one pipeline says when a stage is full and when it is
free again. It is the kernel of the streaming benchmarks
(benchmarks/build_bundle.py, benchmarks/trace/) and of the GPU suite's
PipelineAsync / PipelineCpAsync copies (test/gpu/builder_kernels.py): one
kernel, built with different parameters.

Kinds (how the producers fill a stage):

- ``async``: PipelineAsync. Producer lanes copy 16-byte vectors with
  ``ld.global`` / ``st.shared`` and commit with an mbarrier arrive.
- ``cpasync``: PipelineCpAsync. Producer lanes issue 16-byte ``cp.async.cg``
  and commit with ``cp.async.mbarrier.arrive.noinc`` (every lane: the
  barrier completes when the copies land).
- ``tma``: PipelineTmaAsync. One producer thread (an elected lane) copies
  the whole tile with a 1-D bulk copy (``cp.async.bulk``); acquiring the
  stage arms ``full`` with ``expect_tx(tile)``.
- ``tma2d``: as ``tma``, but the copy is a 2-D tensor TMA
  (``cp.async.bulk.tensor.2d``, ``PipelineTmaAsync.tma_load``) of a
  ``tile / 1024 x 256`` int32 box of ``src`` viewed as a row-major
  ``(ntiles * tile / 1024, 256)`` int32 matrix (the shape of CuTe DSL's
  streaming kernel, benchmarks/cute_streaming.py); every tile is still one
  contiguous chunk. ``src`` is then that matrix's tensor map
  (``make_tma_descriptor(src, shape=(rows, 256), box_shape=(tile // 1024,
  256))``), passed as a pointer to its device copy.

Consumers wait, load the whole stage (16-byte ``ld.shared``, all loads
first, so ``tile / (512 * consumer_warps)`` of them are in flight per
thread), store it to ``dst`` and release the stage.

Warps ``[0, consumer_warps)`` consume, the next ``producer_warps`` produce
(``tma``, ``tma2d``: one producer warp). ``schedule`` picks the tiles of a CTA:
``"blocked"``: CTA ``b`` copies tiles ``[b * ntiles, (b + 1) * ntiles)``;
``"persistent"``: CTA ``b`` copies tiles ``b, b + gridDim.x, ...`` below
``ntiles`` (grid = SMs x CTAs per SM). ``per_warp`` picks who arrives:
one elected lane per warp (the groups count warps; ``tma`` consumers always
do) or every lane (the groups count threads). ``participants`` drives
PipelineAsync through CuTe DSL's ``make_participants`` handles instead of
explicit states.

Parameters of the kernel: ``(src, dst, ntiles)`` (``tma2d``: ``src`` is the
tensor map).

Usage: python examples/copy_ring.py [--kind async|cpasync|tma|tma2d] [--print-ir] [--out DIR]
(the GPU suite's shape: blocked, one warp per role; ``tma``, ``tma2d``: 4
consumer warps, 16 KiB tiles, persistent, as the benchmark)

``--out DIR``: where the cubin and its launch metadata go (by default a
folder in the system's temporary directory, not the source tree:
examples/_common.py).
"""

import sys

import mlir.ir as ir
from mlir.dialects import llvm, nvvm

from pipeline_mlir.kernel import (GlobalPtr, Int32, Kernel, Scalar, TmaDescriptor,
                                  element_ptr, load, store)
from pipeline_mlir.kernel.values import i32
from pipeline_mlir.pipeline import (Agent, CooperativeGroup, PipelineAsync,
                                    PipelineCpAsync, PipelineTmaAsync,
                                    PipelineUserType, make_pipeline_state)

KINDS = ("tma", "async", "cpasync", "tma2d")
TMA_KINDS = ("tma", "tma2d")  # PipelineTmaAsync, one producer thread
SCHEDULES = ("blocked", "persistent")
VEC = 16  # bytes per vector access
TMA2D_COLS = 256  # int32 elements per tensor-map row (the TMA box limit): 1 KiB
TMA2D_ROW_BYTES = 4 * TMA2D_COLS


def _v4i32():
    return ir.VectorType.get([4], i32())


def _byte_offset(ptr, offset64):
    """``(i8*)ptr + offset64`` on a global pointer."""
    i8 = ir.IntegerType.get_signless(8)
    return llvm.getelementptr(ptr.type, ptr, [offset64.ir_value],
                              [-2147483648], i8, 0)


def producer_warps_of(kind, producer_warps):
    """The producer warps a kernel of ``kind`` runs (``tma``, ``tma2d``: one)."""
    return 1 if kind in TMA_KINDS else producer_warps


def block_threads(kind, producer_warps=1, consumer_warps=1):
    return 32 * (consumer_warps + producer_warps_of(kind, producer_warps))


def _create(kind, stages, tile, barriers, pw, cw, per_warp, pipeline_name):
    if kind in TMA_KINDS:
        return PipelineTmaAsync.create(
            num_stages=stages, producer_group=CooperativeGroup(Agent.Thread, 1),
            consumer_group=CooperativeGroup(Agent.Thread, cw), tx_count=tile,
            barrier_storage=barriers, name=pipeline_name)
    per = 1 if per_warp else 32
    consumers = CooperativeGroup(Agent.Thread, per * cw)
    if kind == "async":
        return PipelineAsync.create(
            num_stages=stages, producer_group=CooperativeGroup(Agent.Thread, per * pw),
            consumer_group=consumers, barrier_storage=barriers,
            elect_one_commit=per_warp, elect_one_release=per_warp, name=pipeline_name)
    # cp.async.mbarrier.arrive.noinc arrives once per producer lane
    return PipelineCpAsync.create(
        num_stages=stages, producer_group=CooperativeGroup(Agent.Thread, 32 * pw),
        consumer_group=consumers, barrier_storage=barriers,
        elect_one_release=per_warp, name=pipeline_name)


def build(kind="async", stages=4, tile=4096, *, producer_warps=1, consumer_warps=1,
          schedule="blocked", per_warp=False, participants=False, chip="sm_90a",
          name=None, pipeline_name=None, min_ctas_per_sm=None):
    """The copy-ring kernel (``.module`` is the built module); see the module
    docstring for the parameters."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {SCHEDULES}, got {schedule!r}")
    if kind in TMA_KINDS and not per_warp:
        raise ValueError(f"kind {kind!r}: the TmaAsync consumers release once per warp "
                         "(per_warp=True)")
    if kind == "tma2d" and (tile % TMA2D_ROW_BYTES or tile // TMA2D_ROW_BYTES > 256):
        raise ValueError(f"kind 'tma2d': tile {tile} must be 1..256 rows of "
                         f"{TMA2D_ROW_BYTES} bytes (a TMA box side is at most 256)")
    if participants and kind != "async":
        raise ValueError(f"participants: only the 'async' kind uses them, not {kind!r}")
    pw, cw = producer_warps_of(kind, producer_warps), consumer_warps
    for who, warps in (("producer", pw), ("consumer", cw)):
        if tile % (VEC * 32 * warps):
            raise ValueError(f"tile {tile} is not a multiple of {VEC * 32 * warps} "
                             f"(16 bytes x 32 lanes x {warps} {who} warps)")
    k = Kernel(name or f"copy_ring_{kind}_s{stages}_t{tile // 1024}k", chip=chip,
               block_dim=32 * (cw + pw), min_ctas_per_sm=min_ctas_per_sm,
               params={"src": TmaDescriptor() if kind == "tma2d" else GlobalPtr(),
                       "dst": GlobalPtr(), "ntiles": Int32()})
    with k:
        src, dst, ntiles = k.args
        barriers = k.alloc_barriers(2 * stages)
        ring = k.smem_alloc(stages * tile, align=128, name="ring")
        pipe = _create(kind, stages, tile, barriers, pw, cw, per_warp, pipeline_name)
        warp, tid = k.warp_idx(), k.thread_idx()

        def tiles(carry):
            """(loop over this CTA's tiles, tile index of an iteration)."""
            if schedule == "persistent":
                stride = Scalar(nvvm.read_ptx_sreg_nctaid_x(i32()))
                return k.range(k.block_idx(), ntiles, stride, carry=carry), lambda t: t
            first = k.block_idx() * ntiles
            return k.range(ntiles, carry=carry), lambda t: first + t

        def fill(t, index):
            """The producers' copy of tile ``t`` into stage ``index``."""
            gsrc = _byte_offset(src, t.to(64) * tile)
            buf = ring.stage(index, tile)
            ptid = tid - 32 * cw
            n = tile // VEC // (32 * pw)
            if kind == "async":
                vals = [load(gsrc, _v4i32(), ptid + i * 32 * pw) for i in range(n)]
                for i, v in enumerate(vals):
                    store(v, buf, ptid + i * 32 * pw)
            else:
                for i in range(n):
                    to = element_ptr(buf, _v4i32(), ptid + i * 32 * pw)
                    frm = element_ptr(gsrc, _v4i32(), ptid + i * 32 * pw)
                    nvvm.cp_async_shared_global(to.ir_value, frm, VEC,
                                                nvvm.LoadCacheModifierKind.CG)

        def drain(t, index):
            """The consumers' copy of stage ``index`` to tile ``t``."""
            buf = ring.stage(index, tile)
            gdst = _byte_offset(dst, t.to(64) * tile)
            step = 32 * cw
            vals = [load(buf, _v4i32(), tid + i * step) for i in range(tile // VEC // step)]
            for i, v in enumerate(vals):
                store(v, gdst, tid + i * step)

        if participants:
            producer, consumer = pipe.make_participants()
            with k.if_(warp >= cw):
                loop, tile_of = tiles([producer])
                for t, _ in loop:
                    handle = producer.acquire_and_advance()
                    fill(tile_of(t), handle.index)
                    producer.commit(handle)
                producer.tail()
            with k.if_(warp < cw):
                loop, tile_of = tiles([consumer])
                for t, _ in loop:
                    handle = consumer.wait_and_advance()
                    drain(tile_of(t), handle.index)
                    consumer.release(handle)
            return k

        with k.if_(warp >= cw):  # producer warp(s)
            state = make_pipeline_state(PipelineUserType.Producer, stages)
            loop, tile_of = tiles([state])
            for t, _ in loop:
                pipe.producer_acquire(state)
                if kind == "tma":
                    gsrc = _byte_offset(src, tile_of(t).to(64) * tile)
                    buf = ring.stage(state.index, tile)
                    with k.elect_one():
                        pipe.bulk_copy(state, gsrc, buf, tile)
                elif kind == "tma2d":
                    rows = tile // TMA2D_ROW_BYTES
                    buf = ring.stage(state.index, tile)
                    with k.elect_one():  # coordinates innermost first: (column, row)
                        pipe.tma_load(state, src, [0, tile_of(t) * rows], buf, tile)
                else:
                    fill(tile_of(t), state.index)
                pipe.producer_commit(state)
                state.advance()
            pipe.producer_tail(state)

        with k.if_(warp < cw):  # consumer warps
            state = make_pipeline_state(PipelineUserType.Consumer, stages)
            loop, tile_of = tiles([state])
            for t, _ in loop:
                pipe.consumer_wait(state)
                drain(tile_of(t), state.index)
                pipe.consumer_release(state)
                state.advance()
    return k


def _main(argv):
    from _common import main

    kind = argv[argv.index("--kind") + 1] if "--kind" in argv else "async"
    if kind in TMA_KINDS:
        kernel = build(kind, 4, 16384, consumer_warps=4, schedule="persistent", per_warp=True)
    else:
        kernel = build(kind, participants=kind == "async")
    return main(kernel, "copy_ring")


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
