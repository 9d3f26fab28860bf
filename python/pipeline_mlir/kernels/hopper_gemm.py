"""A warp-specialized, persistent Hopper GEMM: TMA -> PipelineTmaAsync ->
wgmma -> TMA-store epilogue, every barrier through the pipeline dialect.

    C[M, N] = A[M, K] @ B[N, K]^T        (bf16 or fp16 in, fp32 accumulate)

A is row-major M x K and B is given as N x K (both K-major, the layout
wgmma reads without transposition; ``torch.matmul(a, b.T)`` is the same
product). C is row-major M x N.

Roles (one CTA of ``128 * (1 + consumer_warpgroups)`` threads):
- warpgroup 0, the producer: lowers its registers (``setmaxnreg.dec``); its
  warp 0 walks the tiles of the persistent schedule and, per k-block,
  acquires a stage of the operand ring and issues the TMA loads of an A tile
  (``64 * consumer_warpgroups`` x 64) and a B tile (``block_n`` x 64), which
  complete on the stage's full barrier (``tx_count`` = both tiles' bytes);
- warpgroups 1.., the consumers: raise their registers, and each computes 64
  rows of the tile with ``wgmma.m64n{block_n}k16``, 4 per k-block, fp32
  accumulators in registers; then the epilogue writes the tile as 16-bit
  values to swizzled shared memory and one thread TMA-stores it while the
  next tile's mainloop starts.

With ``cluster_m=2`` two CTAs stacked along M share every B tile: each loads
half of it and multicasts it to both, and a consumer releases a stage in
both CTAs (the producer may overwrite a stage only when both have read it).
With ``cluster_along_n`` as well, the pair sits side by side along N and
shares every A tile instead (each loads half of its rows and multicasts
them): an output whose tile rows are odd in number keeps no empty tile.
With ``cluster_n=2`` (and ``cluster_m=2``) the cluster is 2x2 tiles: A is
multicast along N and B along M, each CTA loading half of each, and a
consumer releases a stage in the three CTAs of its tile row and column.

The parts, one concept a module: ``kernels/gemm_config.py``, the
configuration (``GemmConfig``) and its shared-memory plan;
``kernels/gemm_mainloop.py``, the work units, the producer's loads and
the consumers' mainloops; ``kernels/gemm_store.py``, the stores of a
finished tile. This module builds the kernel from them (``build``, the
consumer role) and re-exports their names. Two schedules live in files of
their own: stream-K's fix-up of the tiles
several CTAs compute parts of (``kernels/streamk_fixup.py``), and the
ping-pong consumers that take whole tiles in turn
(``kernels/hopper_gemm_pingpong.py``).

Usage: python examples/hopper_gemm.py [--print-ir] [--out DIR] [--cluster] [--bn 128|256]
(builds, checks and compiles; ``examples/hopper_gemm_host.py`` runs it).

``--out DIR``: where the cubin and its launch metadata go (by default a
folder in the system's temporary directory, not the source tree:
examples/_common.py).
"""

from dataclasses import replace

import mlir.ir as ir
from mlir.dialects import arith

from pipeline_mlir.kernel import GlobalPtr, Int32, Kernel, TmaDescriptor, load
from pipeline_mlir.kernel import epilogue, wgmma
from pipeline_mlir.kernel.epilogue import Epilogue, EpilogueContext
from pipeline_mlir.kernel.tile_scheduler import (PersistentTileScheduler, StreamKSchedule,
                                                  split_k_count)
from pipeline_mlir.kernel.warpgroup import THREADS_PER_WARPGROUP, set_max_registers
from pipeline_mlir.kernels import hopper_gemm_pingpong
from pipeline_mlir.kernels.gemm_config import (  # noqa: F401 (re-exported)
    ACCUMULATIONS, BARRIER_BLOCK, EPILOGUE_BARRIER, SMEM_LIMIT, SMEM_PER_SM, GemmConfig)
from pipeline_mlir.kernels.gemm_mainloop import (  # noqa: F401 (re-exported)
    Cluster2x2Scheduler, ClusterAlongNScheduler, MmaKBlock, mainloop_fast, mainloop_promoted,
    producer,
    unit_range, unit_work)
from pipeline_mlir.kernels.gemm_store import (  # noqa: F401 (re-exported)
    store_partial_global, store_tile)
from pipeline_mlir.kernels.promoted_mainloop import OverlappedPromotion
from pipeline_mlir.kernels.streamk_fixup import stream_k_partial, stream_k_share
from pipeline_mlir.kernels.streamk_timeline import UNITS, Timeline, event
from pipeline_mlir.pipeline import (Agent, CooperativeGroup, NamedBarrier,
                                    PipelineTmaAsync, PipelineTmaStore,
                                    PipelineUserType, make_pipeline_state,
                                    pipeline_init_arrive, pipeline_init_wait)


def build(cfg=GemmConfig(), chip="sm_90a"):
    """The kernel for ``cfg`` (``.module`` is the built module)."""
    cfg.check()
    a_tile, b_tile, c_tile = cfg.layouts()
    epi_bytes = cfg.epilogue_bytes()
    stages, cluster = cfg.num_stages(), cfg.cluster_size
    a_stage_bytes = a_tile.bytes * cfg.a_multicast  # the whole A tile
    b_stage_bytes = b_tile.bytes * cfg.b_multicast  # the whole B tile
    layout = (1, cfg.cluster_m, cfg.cluster_n, 1) if cluster > 1 else None
    params = {"a": TmaDescriptor(), "b": TmaDescriptor(),
              "c": TmaDescriptor(), "c_ptr": GlobalPtr(),
              "m": Int32(), "n": Int32(), "k": Int32()}
    if cfg.scaled:
        params.update(scale_a=GlobalPtr(align=4), scale_b=GlobalPtr(align=4))
    if cfg.stream_k:
        # the fp32 partial tiles (two slots per CTA), the per-warp arrival
        # counters of the stream-K tiles (ops/streamk_host.py sizes both),
        # the CTAs sharing the stream-K run and the whole-tile rounds before
        # it (ops/gemm_stream_k.py: stream_k_launch)
        params.update(sk_workspace=GlobalPtr(), sk_counters=GlobalPtr(align=4),
                      sk_ctas=Int32(), sk_rounds=Int32())
        if cfg.timeline:
            params.update(sk_timeline=GlobalPtr(align=8))
    epi_params = epilogue.kernel_params(cfg.epilogue, cfg.c_dtype) if cfg.fused else {}
    params.update(epi_params)
    # Two CTAs per SM: ptxas must keep the entry registers within half the
    # register file (.minnctapersm), or the second CTA does not fit.
    extra = {"min_ctas_per_sm": cfg.ctas_per_sm} if cfg.ctas_per_sm > 1 else {}
    k = Kernel(cfg.name, chip=chip, block_dim=cfg.threads,
               cluster_dim=(cluster, 1, 1), params=params, **extra)
    with k:
        desc_a, desc_b, desc_c, c_ptr, m, n, kdim = k.args[:7]
        extra = len(k.args) - len(epi_params)
        sk_args = (5 if cfg.timeline else 4) if cfg.stream_k else 0
        scale_ptrs = k.args[7:extra - sk_args]
        stream_args = k.args[extra - sk_args:extra] if cfg.stream_k else None
        epi_args = dict(zip(epi_params, k.args[extra:]))
        barriers = k.alloc_barriers(2 * stages)
        ring_a = k.smem_alloc(stages * a_stage_bytes, align=a_tile.alignment, name="A ring")
        ring_b = k.smem_alloc(stages * b_stage_bytes, align=b_tile.alignment, name="B ring")
        c_buf = (k.smem_alloc(epi_bytes, align=c_tile.alignment, name="C tile")
                 if epi_bytes else None)

        ring = PipelineTmaAsync.create(
            num_stages=stages,
            producer_group=CooperativeGroup(Agent.Thread, 1),
            # One signalling lane per consumer warp, per CTA it releases.
            # Ping-pong: a stage is read by one consumer warpgroup.
            consumer_group=CooperativeGroup(
                Agent.Thread,
                cfg.releasing_ctas * 4 * (1 if cfg.pingpong_m else cfg.consumer_warpgroups)),
            tx_count=a_stage_bytes + b_stage_bytes,
            barrier_storage=barriers, cta_layout_vmnk=layout,
            defer_sync=True, name="ab")
        pipeline_init_arrive(cta_layout_vmnk=layout)
        pipeline_init_wait(cta_layout_vmnk=layout)

        if cfg.cluster_n > 1:
            sched = Cluster2x2Scheduler(m, n, cfg.block_m, cfg.block_n, group_m=cfg.group_m)
        elif cfg.cluster_along_n:
            sched = ClusterAlongNScheduler(m, n, cfg.block_m, cfg.block_n, group_m=cfg.group_m)
        else:
            sched = PersistentTileScheduler(m, n, cfg.block_m, cfg.block_n,
                                            group_m=cfg.group_m, cluster_m=cluster)
        units = sched.first_and_stride()        # this CTA's first tile, stride
        k_blocks = (kdim + (a_tile.k - 1)) // a_tile.k
        split = None
        if cfg.split_k > 1:
            splits = split_k_count(cfg.split_k, k_blocks)
            split = (splits, sched.num_units * splits)
        if cfg.stream_k:
            split = StreamKSchedule(sched.num_units, k_blocks, units[1], units[0],
                                    stream_args[2], rounds=stream_args[3])
        rank = k.cluster_cta_rank() if cluster > 1 else None
        warp = k.warp_idx()
        warpgroup = warp // 4

        if cfg.producer_last:
            # The consumer warpgroups first (wgmma's warpgroups are 4
            # aligned warps), then the producer's lone warp.
            with k.if_(warp == cfg.producer_warp) as role:
                producer(k, cfg, ring, sched, units, rank, k_blocks, desc_a, desc_b,
                         ring_a, ring_b, split, stream_args)
            with role.else_():
                consumer(k, cfg, ring, sched, units, rank, k_blocks, warp, ring_a, ring_b,
                         c_buf, desc_c, c_ptr, m, n, scale_ptrs, epi_args, split, stream_args)
        else:
            with k.if_(warpgroup == 0) as role:
                if cfg.setmaxnreg:
                    set_max_registers(cfg.producer_registers, increase=False)
                with k.if_(warp == 0):
                    producer(k, cfg, ring, sched, units, rank, k_blocks, desc_a, desc_b,
                             ring_a, ring_b, split, stream_args)
            with role.else_():
                if cfg.setmaxnreg:
                    set_max_registers(cfg.consumer_registers, increase=True)
                if cfg.pingpong_m:
                    hopper_gemm_pingpong.consumer(k, cfg, ring, sched, units, k_blocks, warp,
                                                  ring_a, ring_b, c_buf, desc_c, c_ptr, m, n,
                                                  epi_args)
                else:
                    consumer(k, cfg, ring, sched, units, rank, k_blocks, warp, ring_a,
                             ring_b, c_buf, desc_c, c_ptr, m, n, scale_ptrs, epi_args, split,
                             stream_args)
    if k.smem_bytes > cfg.smem_limit:
        raise ValueError(f"{cfg.name}: {k.smem_bytes} bytes of shared memory > the "
                         f"{cfg.smem_limit} that {cfg.ctas_per_sm} CTAs per SM leave each")
    k.config = cfg
    k.stages = stages
    return k


def consumer(k, cfg, ring, sched, units, rank, k_blocks, warp, ring_a, ring_b, c_buf,
             desc_c, c_ptr, m, n, scale_ptrs, epi_args=None, split=None, stream_args=None):
    """Warpgroups 1..: per tile, the mainloop into an fp32 accumulator, then
    the epilogue (the fused one, ``cfg.epilogue``, in registers first). A
    stream-K unit that is part of a tile goes through ``stream_k_partial``:
    it leaves its partial, or (the tile's last in K order) adds the others'
    before the TMA-store epilogue."""
    _, _, c_tile = cfg.layouts()
    stages = ring.num_stages
    cw = warp // 4 if cfg.producer_last else warp // 4 - 1
    warp_in_wg, lane = warp % 4, k.lane_idx()
    leader = (warp_in_wg == 0) & (lane == 0)
    mma_k_block = MmaKBlock(cfg, ring_a, ring_b, cw)
    scale = None
    if scale_ptrs:
        f32 = ir.F32Type.get()
        scale = arith.mulf(load(scale_ptrs[0], f32), load(scale_ptrs[1], f32))
    first, stride = units
    store = (PipelineTmaStore.create(
        num_stages=1, producer_group=CooperativeGroup(Agent.Thread, 1))
        if c_buf else None)
    epi_sync = NamedBarrier(EPILOGUE_BARRIER, THREADS_PER_WARPGROUP)
    read = make_pipeline_state(PipelineUserType.Consumer, stages)
    release = make_pipeline_state(PipelineUserType.Consumer, stages)
    acc = mma_k_block.mma.accumulator()
    promoted = cfg.accumulation == "promoted"
    part = mma_k_block.mma.accumulator() if promoted else None
    streamed = isinstance(split, StreamKSchedule)
    times = Timeline(k, stream_args[4] if cfg.timeline else None, cw, leader)
    times.stamp(UNITS, 0)
    for unit, _ in k.range(*unit_range(sched, units, split), carry=[read, release]):
        m_blk, n_blk, kb_range, part_of = unit_work(sched, unit, rank, k_blocks, split)
        blocks = k_blocks if part_of is None else part_of[0 if streamed else 1]
        times.stamp(unit, event("start"))
        if cfg.promotion_overlap:
            OverlappedPromotion(k, ring, mma_k_block)(acc, read, release, blocks)
        elif promoted:
            mainloop_promoted(k, ring, mma_k_block, acc, part, read, blocks)
        else:
            mainloop_fast(k, ring, mma_k_block, acc, read, release, blocks)
        times.stamp(unit, event("mainloop"))
        row0 = m_blk * cfg.block_m + cw * wgmma.WarpgroupMma.M
        out = acc if scale is None else acc * scale
        if part_of is not None and not streamed:
            store_partial_global(out, c_ptr, row0, n_blk * cfg.block_n, m, n, part_of[0],
                                 warp_in_wg, lane)
            continue
        ctx = (EpilogueContext(row0, n_blk * cfg.block_n, m, n, warp_in_wg, lane,
                               cfg.c_dtype, epi_args) if cfg.fused else None)
        if c_buf is None:
            if ctx is not None:
                out = cfg.epilogue.apply(out, ctx)
            epilogue.store_fragment_global(out, c_ptr, row0, n_blk * cfg.block_n, m, n,
                                           warp_in_wg, lane, cfg.c_dtype)
            continue
        if streamed and cfg.sk_share:
            # Every partial unit stores, waits for the tile's other
            # contributors and stores its share of C; a whole tile stores
            # C through the TMA epilogue.
            partial = stream_k_share(k, cfg, split, part_of, out.ir_value, stream_args, cw,
                                     warp_in_wg, lane, c_ptr, m, n, m_blk, n_blk, rank,
                                     times=(times, unit), sync=epi_sync)
            with k.if_(~partial):
                store_tile(k, cfg, out, ctx, store, epi_sync, c_buf, desc_c, c_tile, row0,
                           n_blk, cw, warp_in_wg, lane, leader)
                times.stamp(unit, event("done"))
        elif streamed:
            # A partial unit that does not end its tile leaves its partial
            # and arrives; one that ends it waits for those and adds them;
            # it and a whole tile then store C through the TMA epilogue.
            total, stores = stream_k_partial(k, cfg, split, part_of, kb_range[1] == k_blocks,
                                             out.ir_value, stream_args, cw, warp_in_wg, lane,
                                             rank, times=(times, unit))
            with k.if_(stores):
                store_tile(k, cfg, total, ctx, store, epi_sync, c_buf, desc_c, c_tile, row0,
                           n_blk, cw, warp_in_wg, lane, leader)
                times.stamp(unit, event("done"))
        else:
            store_tile(k, cfg, out, ctx, store, epi_sync, c_buf, desc_c, c_tile, row0,
                       n_blk, cw, warp_in_wg, lane, leader)
    if store is not None:
        with k.if_(leader):
            store.producer_tail()
    times.stamp(UNITS, 1)


def build_variant(overrides, dtype, chip):
    """(cubin, launch facts) of the variant ``overrides`` (``GemmConfig``
    fields, ``pipeline_mlir.ops.gemm_configs.VARIANTS``) in ``dtype``
    ('bf16' / 'f16'): the kernel cache's builder of this family."""
    from pipeline_mlir.ops.hopper_gemm_host import meta_of

    overrides = dict(overrides)
    if overrides.get("epilogue") is not None:   # its to_json form (a cache key)
        overrides["epilogue"] = Epilogue.from_json(overrides["epilogue"])
    cfg = replace(GemmConfig(dtype=dtype), **overrides)
    k = build(cfg, chip=chip)
    return bytes(k.compile()), meta_of(cfg, k)
