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

Two schedules live in files of their own: stream-K's fix-up of the tiles
several CTAs compute parts of (``kernels/streamk_fixup.py``), and the
ping-pong consumers that take whole tiles in turn
(``kernels/hopper_gemm_pingpong.py``).

Usage: python examples/hopper_gemm.py [--print-ir] [--out DIR] [--cluster] [--bn 128|256]
(builds, checks and compiles; ``examples/hopper_gemm_host.py`` runs it).

``--out DIR``: where the cubin and its launch metadata go (by default a
folder in the system's temporary directory, not the source tree:
examples/_common.py).
"""

from dataclasses import dataclass, replace

import mlir.ir as ir
from mlir.dialects import arith, llvm

from pipeline_mlir.chip_limits import SMEM_PER_BLOCK, THREADS_PER_WARP
from pipeline_mlir.kernel import (GlobalPtr, Int32, Kernel, TmaDescriptor,
                                  fence_view_async_shared, load)
from pipeline_mlir.kernel import epilogue, wgmma
from pipeline_mlir.kernel.epilogue import Epilogue, EpilogueContext
from pipeline_mlir.kernel.tile_scheduler import (PersistentTileScheduler, StreamKSchedule,
                                                  _divmod, _min, split_k_count, split_k_unit)
from pipeline_mlir.kernel.values import Scalar, i32
from pipeline_mlir.kernel.warpgroup import (THREADS_PER_WARPGROUP,
                                            check_register_budget,
                                            set_max_registers)
from pipeline_mlir.kernels import hopper_gemm_pingpong
from pipeline_mlir.kernels.promoted_mainloop import OverlappedPromotion
from pipeline_mlir.kernels.streamk_fixup import (prefetch_partials, stream_k_partial,
                                                 stream_k_share)
from pipeline_mlir.kernels.streamk_timeline import UNITS, Timeline, event
from pipeline_mlir.layout import DTYPES, OperandLayout, descriptor_units
from pipeline_mlir.pipeline import (Agent, CooperativeGroup, NamedBarrier,
                                    PipelineTmaAsync, PipelineTmaStore,
                                    PipelineUserType, make_pipeline_state,
                                    pipeline_init_arrive, pipeline_init_wait)

SMEM_LIMIT = SMEM_PER_BLOCK           # dynamic shared memory one CTA may opt into
SMEM_PER_SM = 228 * 1024        # an SM's shared memory; each resident CTA reserves 1 KiB
BARRIER_BLOCK = 1024            # the barriers' share of the arena: the rings start 1024-aligned
EPILOGUE_BARRIER = 1            # named barriers 1..: one per consumer WG (1-3 at 192 rows)
ACCUMULATIONS = ("fast", "promoted")


@dataclass(frozen=True)
class GemmConfig:
    """One kernel variant. The defaults are the fastest 16-bit configuration;
    the other switches exist for the step-by-step table of docs/gemm.md and
    for the FP8 GEMM (``examples/fp8_gemm.py``)."""
    dtype: str = "bf16"               # A and B
    block_n: int = 256
    consumer_warpgroups: int = 2      # tile M = 64 per consumer warpgroup
    stages: int = 4                   # at most; fewer if shared memory is short
    cluster_m: int = 1                # 2: multicast B to a CTA pair along M
    # With cluster_m=2: the pair is two tiles side by side along N that
    # share the A tile (each CTA loads half of its rows and multicasts them
    # to both); B is each CTA's own. For an output of an odd count of tile
    # rows and an even count of tile columns (2072 x 16040 on 192x192: 11
    # x 84), where the pair along M computes a twelfth, empty, row.
    cluster_along_n: bool = False
    setmaxnreg: bool = True
    producer_registers: int = 40
    consumer_registers: int = 232
    tma_store_epilogue: bool = True
    epilogue_passes: int = 2          # through half the C tile: room for 4 stages
    group_m: int = 8                  # grouped tile order (L2 reuse)
    swizzle: int = 128                # of the operand tiles and the C tile
    out_dtype: str = ""               # C; "" = dtype
    scaled: bool = False              # C = scale_a * scale_b * (A @ B^T), two f32 pointers
    accumulation: str = "fast"        # or "promoted": see mainloop_promoted
    # Promoted only: each promotion overlaps the next k-block's wgmma, in
    # a second partial accumulator (kernels/promoted_mainloop.py).
    promotion_overlap: bool = False
    # A fused epilogue on the fp32 accumulator (kernel/epilogue.py); None
    # (or an identity Epilogue) builds exactly the kernel without one.
    epilogue: Epilogue = None
    # Split-K (S > 1): each output tile's K blocks are cut into S contiguous
    # ranges, one work unit each; a unit stores its fp32 partial tile into
    # the workspace slice ``split`` of an (S, M, N) fp32 tensor (``c_ptr``)
    # and kernels/splitk_reduce.py sums the slices into C. For outputs of
    # too few tiles to fill the SMs (ops/gemm_configs.choose_split).
    split_k: int = 1
    # Stream-K: the waves the tiles fill whole run as above; the remaining
    # tiles' K blocks are shared equally by all CTAs, and the CTAs that
    # computed parts of one tile leave fp32 partials in a workspace, the
    # tile's last contributor in K order waiting for them and adding them
    # to its accumulator in K order (bitwise the same every run) and
    # storing C. For shapes whose last wave would be part-empty
    # (ops/gemm_configs.choose; kernel/tile_scheduler.StreamKSchedule).
    stream_k: bool = False
    # Profiling only (kernels/streamk_timeline.py): a stream-K kernel that
    # stamps the time of each phase of each unit into a sixth stream-K
    # argument; never in the pick's table (gemm_configs.TIMELINE_VARIANTS).
    timeline: bool = False
    # Stream-K: the producer of the unit that ends a partial tile asks L2
    # for the other contributors' partials (cp.async.bulk.prefetch.L2) once
    # it has issued the unit's last loads, a ring's depth of K blocks
    # before its consumers read them (an experiment: STREAM_K_EXPERIMENTS).
    sk_prefetch: bool = False
    # Stream-K, the shared fix-up (for launches whose every run is one
    # segment: sk_ctas a multiple of the stream-K tiles, the leftover kind
    # of gemm_configs.stream_k_launch(share=True)): every contributor of a
    # partial tile stores its partial and arrives, waits for all the
    # tile's arrivals, then sums its own share of the tile's partials (its
    # 1/contributors of each warp's slot region, every contributor's value
    # in K order: the same bits every run) and stores that share of C from
    # registers; a second arrival per warp lets the last one out reset the
    # counter. One partial's worth of loads per CTA instead of all of them
    # on the tile's last contributor.
    sk_share: bool = False
    # CTAs resident on one SM (1 or 2). With 2, each holds half the SM's
    # shared memory and registers (ptxas is told so: .minnctapersm; the
    # producer is then one warp, ``producer_last``) and the persistent grid
    # is twice the SMs, so that one CTA's epilogue runs while the other
    # CTA's wgmma keep the tensor cores busy: the cooperative kernel's
    # consumers otherwise leave them idle for the whole epilogue of every
    # tile (a fused gelu's, most of all).
    ctas_per_sm: int = 1
    # The ping-pong schedule (kernels/hopper_gemm_pingpong.py): 0, the
    # cooperative one above (the consumer warpgroups share each tile, 64
    # rows each); 64 or 128, each of the two consumer warpgroups owns whole
    # tiles of this many rows, the two take the CTA's tiles in turn and
    # issue their mainloops in turn, so that one's epilogue runs while the
    # other's wgmma keep the tensor cores busy.
    pingpong_m: int = 0

    @property
    def block_m(self):
        """Rows of a tile (of each consumer warpgroup's own, ping-pong)."""
        return self.pingpong_m or wgmma.WarpgroupMma.M * self.consumer_warpgroups

    @property
    def c_dtype(self):
        # Split-K writes fp32 partial tiles; the reduction rounds them.
        return "f32" if self.split_k > 1 else (self.out_dtype or self.dtype)

    @property
    def producer_last(self):
        """Two CTAs per SM: the producer is one warp after the consumer
        warpgroups, not a warpgroup before them, and nobody resizes
        registers. ptxas holds every role to the launch's registers, and
        refuses an m64n128 wgmma within the 80 of two 384-thread CTAs; at
        288 threads it allows 96 (ptxas -v), which hold m64n128's 64
        accumulators and a bias + activation epilogue without a spill."""
        return self.ctas_per_sm > 1

    @property
    def producer_warp(self):
        """The producer's warp: 0, or after the consumers' (``producer_last``)."""
        return 4 * self.consumer_warpgroups if self.producer_last else 0

    @property
    def threads(self):
        if self.producer_last:
            return THREADS_PER_WARPGROUP * self.consumer_warpgroups + THREADS_PER_WARP
        return THREADS_PER_WARPGROUP * (1 + self.consumer_warpgroups)

    @property
    def name(self):
        out = f"_{self.out_dtype}" if self.out_dtype and self.out_dtype != self.dtype else ""
        return (f"gemm_{self.dtype}{out}_{self.block_m}x{self.block_n}_c{self.cluster_m}"
                f"{'_r' if self.setmaxnreg else ''}"
                f"{'_tmastore' if self.tma_store_epilogue else '_direct'}"
                f"{self.epilogue_passes if self.tma_store_epilogue and self.epilogue_passes > 1 else ''}"
                f"{'_scaled' if self.scaled else ''}"
                f"{'_promoted' if self.accumulation == 'promoted' else ''}"
                f"{'_overlap' if self.promotion_overlap else ''}"
                f"{'_' + self.epilogue.tag if self.fused else ''}"
                f"{f'_sk{self.split_k}' if self.split_k > 1 else ''}"
                f"{'_streamk' if self.stream_k else ''}"
                f"{'_timeline' if self.timeline else ''}"
                f"{'_pf' if self.sk_prefetch else ''}"
                f"{'_share' if self.sk_share else ''}"
                f"{f'_x{self.ctas_per_sm}' if self.ctas_per_sm > 1 else ''}"
                f"{'_pp' if self.pingpong_m else ''}"
                f"{'_cn' if self.cluster_along_n else ''}")

    @property
    def fused(self):
        """An epilogue that emits anything (None and identity do not)."""
        return isinstance(self.epilogue, Epilogue) and not self.epilogue.is_identity

    def layouts(self):
        """(A tile, B tile as loaded by one CTA, C tile of one consumer
        warpgroup). A k-block is one swizzle span of K (``a.k``), so every
        operand tile is one TMA box."""
        a = OperandLayout.one_box(self.dtype, "K", self.swizzle,
                                  self.block_m // self.a_multicast)
        b = OperandLayout.one_box(self.dtype, "K", self.swizzle,
                                  self.block_n // self.b_multicast)
        c = OperandLayout(self.c_dtype, "K", self.c_swizzle, wgmma.WarpgroupMma.M, self.block_n)
        return a, b, c

    @property
    def a_multicast(self):
        """CTAs that share each A tile (each loading its part of the rows)."""
        return self.cluster_m if self.cluster_along_n else 1

    @property
    def b_multicast(self):
        """CTAs that share each B tile (each loading its part of the rows)."""
        return 1 if self.cluster_along_n else self.cluster_m

    @property
    def c_swizzle(self):
        """The C tile's swizzle: the operands' where its box (one swizzle
        span of C) divides ``block_n``, else the widest smaller one that
        does: a tile cut to the shape (``block_n`` 160 or 224: 64-byte
        boxes of 32 columns; 176, 208 or 240: 32-byte boxes of 16)."""
        elem = DTYPES[self.c_dtype][0]
        sw = self.swizzle
        while sw > 32 and self.block_n % (sw // elem):
            sw //= 2
        return sw

    @property
    def pass_boxes(self):
        """C boxes of one epilogue pass (the last pass may hold fewer)."""
        boxes = self.layouts()[2].boxes
        return -(-boxes // self.epilogue_passes)

    def epilogue_bytes(self):
        """The C buffer: each consumer warpgroup's share of one pass."""
        if not self.tma_store_epilogue or self.split_k > 1:
            return 0     # split-K stores its fp32 partials from registers
        c = self.layouts()[2]
        if c.boxes % self.epilogue_passes:
            return self.consumer_warpgroups * self.pass_boxes * c.box_bytes
        return self.consumer_warpgroups * c.bytes // self.epilogue_passes

    @property
    def smem_limit(self):
        """Dynamic shared memory one CTA may use so that ``ctas_per_sm`` fit."""
        if self.ctas_per_sm == 1:
            return SMEM_LIMIT
        return SMEM_PER_SM // self.ctas_per_sm - 1024

    def num_stages(self):
        """Stages that fit next to the epilogue buffer and the barriers."""
        a, b, _ = self.layouts()
        stage = a.bytes * self.a_multicast + b.bytes * self.b_multicast
        if self.ctas_per_sm > 1:
            # Exact: the barriers take the arena's first aligned block and
            # the rings and C buffer are whole 1024-byte blocks (kernel/
            # smem.py); two 128x128 CTAs' three stages fit to the byte.
            fit = (self.smem_limit - self.epilogue_bytes() - BARRIER_BLOCK) // stage
        else:
            # 1024: the arena's alignment slack (kernel/smem.py); 256: barriers.
            fit = (SMEM_LIMIT - self.epilogue_bytes() - 1024 - 256) // stage
        if fit < 2:
            raise ValueError(f"{self.name}: not even 2 stages of {stage} bytes fit")
        return min(self.stages, fit)

    def check(self):
        if self.epilogue is not None and not isinstance(self.epilogue, Epilogue):
            raise TypeError(f"{self.name}: epilogue must be an Epilogue "
                            f"(pipeline_mlir.kernel.epilogue) or None, got "
                            f"{type(self.epilogue).__name__}")
        if self.accumulation not in ACCUMULATIONS:
            raise ValueError(f"{self.name}: accumulation must be one of {ACCUMULATIONS}, "
                             f"got {self.accumulation!r}")
        if self.promotion_overlap and self.accumulation != "promoted":
            raise ValueError(f"{self.name}: promotion_overlap overlaps the promoted "
                             "accumulation's additions; build it with "
                             "accumulation='promoted'")
        if isinstance(self.split_k, bool) or not isinstance(self.split_k, int) \
                or self.split_k < 1:
            raise ValueError(f"{self.name}: split_k must be an int >= 1 (1: no split), got "
                             f"{self.split_k!r}")
        if self.split_k > 1:
            self._check_split()
        if self.stream_k:
            self._check_stream_k()
        if self.timeline and not self.stream_k:
            raise ValueError(f"{self.name}: timeline stamps the stream-K phases; build it "
                             "with stream_k=True")
        if self.sk_share and (not self.stream_k or self.sk_prefetch or self.scaled):
            raise ValueError(f"{self.name}: sk_share is a stream-K fix-up (without sk_prefetch "
                             "or scaled); build it with stream_k=True")
        if self.sk_prefetch and not self.stream_k:
            raise ValueError(f"{self.name}: sk_prefetch prefetches stream-K partials; build "
                             "it with stream_k=True")
        if self.ctas_per_sm != 1:
            self._check_ctas_per_sm()
        if self.cluster_along_n and (self.cluster_m != 2 or self.split_k > 1 or self.stream_k
                                     or self.pingpong_m or self.ctas_per_sm > 1):
            raise ValueError(f"{self.name}: cluster_along_n turns the 2-CTA cluster of the "
                             "plain persistent schedule along N: build it with cluster_m=2 "
                             "and without split_k, stream_k, pingpong_m or ctas_per_sm")
        if self.pingpong_m:
            self._check_pingpong()
        c = self.layouts()[2]
        if self.tma_store_epilogue and self.split_k == 1:
            epilogue.check_tile(c, self.block_n, self.name)
            # Passes of ceil(boxes / passes) boxes, the last one fewer (a
            # tile cut to the shape: 13 boxes in 2 passes of 7 and 6), but
            # none empty.
            if not 1 <= self.epilogue_passes <= c.boxes or \
                    (self.epilogue_passes - 1) * self.pass_boxes >= c.boxes:
                raise ValueError(f"{self.name}: the {c.boxes} C boxes do not split into "
                                 f"{self.epilogue_passes} epilogue passes")
            if c.boxes % self.epilogue_passes and self.fused:
                raise ValueError(f"{self.name}: uneven epilogue passes are built without a "
                                 "fused epilogue")
        if self.setmaxnreg:
            check_register_budget(self.threads, 1, self.producer_registers,
                                  self.consumer_warpgroups, self.consumer_registers)

    def _check_ctas_per_sm(self):
        if self.ctas_per_sm not in (1, 2):
            raise ValueError(f"{self.name}: ctas_per_sm must be 1 or 2, got "
                             f"{self.ctas_per_sm!r}")
        if self.cluster_m > 1 or self.split_k > 1 or self.stream_k:
            raise ValueError(f"{self.name}: ctas_per_sm=2 is built for the plain persistent "
                             "schedule of one-CTA tiles (its grid is twice the SMs); build "
                             "it without cluster_m, split_k or stream_k")
        if self.setmaxnreg:
            raise ValueError(f"{self.name}: ctas_per_sm=2 runs a lone producer warp after the "
                             "consumers and resizes no registers (ptxas holds every role to "
                             "the launch's share): build it with setmaxnreg=False")

    def _check_pingpong(self):
        if self.pingpong_m not in (64, 128):
            raise ValueError(f"{self.name}: pingpong_m is the rows of each consumer "
                             "warpgroup's tile: 64 or 128 (one or two m64 wgmma a k-slice), "
                             f"got {self.pingpong_m!r}")
        if self.consumer_warpgroups != 2:
            raise ValueError(f"{self.name}: the ping-pong schedule takes turns between two "
                             "consumer warpgroups: build it with consumer_warpgroups=2")
        if (self.cluster_m > 1 or self.split_k > 1 or self.stream_k or self.ctas_per_sm > 1
                or self.scaled or self.accumulation != "fast"):
            raise ValueError(f"{self.name}: the ping-pong schedule is built for the plain "
                             "persistent schedule of one-CTA tiles and the fast accumulation: "
                             "build it without cluster_m, split_k, stream_k, ctas_per_sm, "
                             "scaled or accumulation='promoted'")
        if self.pingpong_m * self.block_n > 128 * 128:
            raise ValueError(f"{self.name}: a {self.pingpong_m}x{self.block_n} tile is more "
                             "than the 128 fp32 accumulators a thread that one warpgroup "
                             "holds beside the epilogue")

    def _check_stream_k(self):
        if self.split_k > 1:
            raise ValueError(f"{self.name}: stream_k and split_k are two ways to cut K; "
                             "build one or the other")
        if not self.tma_store_epilogue:
            raise ValueError(f"{self.name}: stream_k stores whole tiles through the TMA "
                             "epilogue; build it with tma_store_epilogue=True")
        if self.fused:
            raise ValueError(f"{self.name}: stream_k applies the epilogue to a whole tile "
                             "summed in registers, which spills with a fused epilogue "
                             "(ptxas -v); a fused call keeps its plain variant")

    def _check_split(self):
        if self.cluster_m > 1:
            raise ValueError(f"{self.name}: split_k needs cluster_m=1 (a cluster's CTAs share "
                             "B tiles of one K range; the split units do not pair up): "
                             "build the split-K variant without a cluster")
        if self.fused:
            raise ValueError(f"{self.name}: a fused epilogue cannot run on split-K partial "
                             "sums (it is not linear); apply it in the reduction "
                             "(kernels/splitk_reduce.py) and build the GEMM without it")
        if self.out_dtype and self.out_dtype != self.dtype:
            raise ValueError(f"{self.name}: split_k writes fp32 partials and the reduction "
                             "picks the output dtype; leave out_dtype unset")


def build(cfg=GemmConfig(), chip="sm_90a"):
    """The kernel for ``cfg`` (``.module`` is the built module)."""
    cfg.check()
    a_tile, b_tile, c_tile = cfg.layouts()
    epi_bytes = cfg.epilogue_bytes()
    stages, cluster = cfg.num_stages(), cfg.cluster_m
    a_stage_bytes = a_tile.bytes * cfg.a_multicast  # the whole A tile
    b_stage_bytes = b_tile.bytes * cfg.b_multicast  # the whole B tile
    layout = (1, cluster, 1, 1) if cluster > 1 else None
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
                Agent.Thread, cluster * 4 * (1 if cfg.pingpong_m else cfg.consumer_warpgroups)),
            tx_count=a_stage_bytes + b_stage_bytes,
            barrier_storage=barriers, cta_layout_vmnk=layout,
            defer_sync=True, name="ab")
        pipeline_init_arrive(cta_layout_vmnk=layout)
        pipeline_init_wait(cta_layout_vmnk=layout)

        if cfg.cluster_along_n:
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


class ClusterAlongNScheduler(PersistentTileScheduler):
    """The grouped order of ``PersistentTileScheduler`` over units of two
    tiles side by side along N (``GemmConfig.cluster_along_n``): ``group_m``
    rows of tiles swept by column pairs; CTA rank r of the cluster takes
    column ``2 * pair + r`` of the unit's row."""

    def __init__(self, m, n, block_m, block_n, group_m=8):
        super().__init__(m, n, block_m, 2 * block_n, group_m=group_m, cluster_m=1)
        self.cluster_m = 2      # the cluster's ids (first_and_stride)

    def tile(self, unit, cta_rank=None):
        per_group = self.tiles_n * self.group_m
        group, in_group = _divmod(unit, per_group)
        first_m = group * self.group_m
        rows = _min(self.tiles_m - first_m, Scalar(arith.constant(i32(), self.group_m)))
        n_pair, in_rows = _divmod(in_group, rows)
        return first_m + in_rows, n_pair * 2 + cta_rank


def unit_range(sched, units, split):
    """``(start, stop, step)`` of this CTA's unit loop: every ``stride``-th
    tile (or split-K unit) from its first, or its stream-K units in order."""
    first, stride = units
    if split is None:
        return first, sched.num_units, stride
    if isinstance(split, StreamKSchedule):
        return 0, split.units, 1
    return first, split[1], stride


def unit_work(sched, unit, rank, k_blocks, split):
    """``(m_block, n_block, k-block range args, part)`` of a work unit: the
    whole K of a tile (``part`` None), or (split-K, ``split`` = (splits,
    units)) one split's contiguous K blocks, ``part`` = (split index, K
    blocks) (``tile_scheduler.split_k_unit``), or (stream-K, ``split`` a
    ``StreamKSchedule``) the unit's K blocks of its tile, ``part`` = (K
    blocks, partial, workspace slot, stream-K tile). The producer and the
    consumers call it alike, so both walk the same blocks."""
    if split is None:
        m_blk, n_blk = sched.tile(unit, rank)
        return m_blk, n_blk, (k_blocks,), None
    if isinstance(split, StreamKSchedule):
        tile, begin, count, partial, slot, sk_tile = split.unit(unit)
        m_blk, n_blk = sched.tile(tile, rank)
        return m_blk, n_blk, (begin, begin + count), (count, partial, slot, sk_tile)
    tile, index, begin, count = split_k_unit(unit, sched.num_units, split[0], k_blocks)
    m_blk, n_blk = sched.tile(tile, rank)
    return m_blk, n_blk, (begin, begin + count), (index, count)


def producer(k, cfg, ring, sched, units, rank, k_blocks, desc_a, desc_b, ring_a, ring_b,
             split=None, stream_args=None):
    """Warp 0 of warpgroup 0: walks the tiles of the persistent schedule and,
    per k-block, fills a ring stage with the A and the B tile (with
    ``cfg.sk_prefetch``, then the L2 prefetch of the partials a unit that
    ends its tile will add)."""
    a_tile, b_tile, _ = cfg.layouts()
    cluster = cfg.cluster_m
    a_stage_bytes = a_tile.bytes * cfg.a_multicast
    b_stage_bytes = b_tile.bytes * cfg.b_multicast
    stages = ring.num_stages
    state = make_pipeline_state(PipelineUserType.Producer, stages)
    for unit, _ in k.range(*unit_range(sched, units, split), carry=[state]):
        m_blk, n_blk, kb_range, part_of = unit_work(sched, unit, rank, k_blocks, split)
        for kb, _ in k.range(*kb_range, carry=[state]):
            ring.producer_acquire(state)
            with k.elect_one():
                x = kb * a_tile.k
                if cfg.cluster_along_n:
                    # This CTA's half of A's rows, written into both CTAs;
                    # its own B tile.
                    ring.tma_load(state, desc_a,
                                  a_tile.coords(m_blk * cfg.block_m + rank * a_tile.rows, x),
                                  ring_a.stage(state.index, a_stage_bytes)
                                  + rank * a_tile.bytes, a_tile.bytes,
                                  mcast_mask=(1 << cluster) - 1)
                    ring.tma_load(state, desc_b, b_tile.coords(n_blk * cfg.block_n, x),
                                  ring_b.stage(state.index, b_stage_bytes), b_tile.bytes)
                else:
                    ring.tma_load(state, desc_a, a_tile.coords(m_blk * cfg.block_m, x),
                                  ring_a.stage(state.index, a_tile.bytes), a_tile.bytes)
                    b_dst = ring_b.stage(state.index, b_stage_bytes)
                    if cluster == 1:
                        ring.tma_load(state, desc_b, b_tile.coords(n_blk * cfg.block_n, x),
                                      b_dst, b_tile.bytes)
                    else:
                        # This CTA's half of B, written into both CTAs.
                        ring.tma_load(state, desc_b,
                                      b_tile.coords(n_blk * cfg.block_n + rank * b_tile.rows,
                                                    x),
                                      b_dst + rank * b_tile.bytes, b_tile.bytes,
                                      mcast_mask=(1 << cluster) - 1)
            ring.producer_commit(state)
            state.advance()
        if cfg.sk_prefetch:
            prefetch_partials(k, cfg, split, part_of, kb_range[1] == k_blocks,
                              stream_args[0], rank)
    # No arrive may land on this CTA's barriers after it exits.
    ring.producer_tail(state)


class MmaKBlock:
    """The wgmma of one k-block of consumer warpgroup ``cw``: the operand
    descriptors of a ring stage and the ``k_slices`` instructions on them,
    issued as one group."""

    def __init__(self, cfg, ring_a, ring_b, cw):
        self.a, self.b, _ = cfg.layouts()
        self.mma = wgmma.WarpgroupMma(cfg.block_n, self.a, self.b)
        self.a_base = wgmma.smem_matrix_descriptor(
            ring_a + cw * self.a.mn_offset(wgmma.WarpgroupMma.M), self.a)
        self.b_base = wgmma.smem_matrix_descriptor(ring_b, self.b)
        self.a_step = descriptor_units(self.a.bytes * cfg.a_multicast)
        self.b_step = descriptor_units(self.b.bytes * cfg.b_multicast)

    def __call__(self, acc, stage, accumulate=True):
        """``acc (+)= A x B`` over the k-block in ring stage ``stage``; with
        ``accumulate=False`` the first instruction overwrites ``acc``."""
        s = stage.to(64)
        da = (s * self.a_step + self.a_base).ir_value
        db = (s * self.b_step + self.b_base).ir_value
        wgmma.fence()
        for kk in range(self.a.k_slices):
            self.mma.mma(acc, wgmma.k_slice_descriptor(da, self.a, kk),
                         wgmma.k_slice_descriptor(db, self.b, kk),
                         accumulate=accumulate or kk > 0)
        wgmma.commit_group()


def mainloop_fast(k, ring, mma_k_block, acc, read, release, k_blocks):
    """One tile: every k-block accumulates into ``acc`` in the tensor core
    (for FP8, in the tensor core's reduced-precision accumulator: the
    ``use_fast_accum`` of cuBLASLt)."""
    acc.zero()
    ring.consumer_wait(read)
    mma_k_block(acc, read.index)
    read.advance()
    for kb, _ in k.range(1, k_blocks, carry=[read, release, acc]):
        ring.consumer_wait(read)
        mma_k_block(acc, read.index)
        # Release order: the group just issued reads stage `read`;
        # wait_group(1) retires every older group, so no wgmma reads stage
        # `release` any more and its producer may overwrite it. Releasing
        # before this wait would let TMA overwrite operands an in-flight
        # wgmma still reads (pipeline-verify-protocol check 8 and
        # pipeline-sim's async-read report it: docs/VerifyProtocol.md).
        wgmma.wait_group(1)
        ring.consumer_release(release)
        read.advance()
        release.advance()
    wgmma.wait_group(0)
    ring.consumer_release(release)
    release.advance()


def mainloop_promoted(k, ring, mma_k_block, total, part, read, k_blocks):
    """One tile, with promotion: each k-block's wgmma result, accumulated
    from zero in ``part``, is added into the fp32 ``total`` (DeepGEMM's and
    CUTLASS's "2xacc" way around FP8 wgmma's reduced-precision
    accumulator). The addition needs the group retired, so each k-block
    ends with ``wait_group(0)``, and the stage is released right after it;
    the other consumer warpgroup's wgmma keep the tensor cores busy
    meanwhile. Costs ``part``'s registers (N / 2 per thread)."""
    total.zero()
    for kb, _ in k.range(k_blocks, carry=[read, total, part]):
        ring.consumer_wait(read)
        mma_k_block(part, read.index, accumulate=False)
        wgmma.wait_group(0)
        ring.consumer_release(read)
        total += part               # fp32 adds on the CUDA cores
        read.advance()


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
                                     times=(times, unit))
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


def store_tile(k, cfg, out, ctx, store, epi_sync, c_buf, desc_c, c_tile, row0, n_blk, cw,
               warp_in_wg, lane, leader):
    """The TMA-store epilogue of one whole tile: per pass, the fused
    epilogue, then the pass's columns into the swizzled C buffer and TMA
    stores of its boxes."""
    per_pass = cfg.pass_boxes
    tile = c_buf + cw * (per_pass * c_tile.box_bytes)
    for p in range(cfg.epilogue_passes):
        boxes = range(p * per_pass, min((p + 1) * per_pass, c_tile.boxes))
        # The fused epilogue once per pass: the pass stores only its
        # columns, so LLVM drops the other columns' loads and math, and
        # a pass holds its share of the residual in registers, not the
        # whole tile's (a 128x256 tile's would not fit beside the
        # accumulator). Before the waits below, so that its bias and
        # residual loads are in flight while the previous TMA stores
        # drain (the loads read other columns than those stores write).
        values = cfg.epilogue.apply(out, ctx) if ctx is not None else out
        # The previous TMA stores must have read the buffer.
        with k.if_(leader):
            store.producer_acquire()
        epi_sync.arrive_and_wait_w_index(cw)
        epilogue.store_fragment(values, tile, warp_in_wg, lane, c_tile, box_range=boxes)
        # Generic-proxy writes -> visible to TMA (async proxy).
        fence_view_async_shared()
        epi_sync.arrive_and_wait_w_index(cw)
        with k.if_(leader):
            offsets = c_tile.box_offsets()
            for box in boxes:
                col, smem = offsets[box]
                store.tma_store(desc_c, c_tile.coords(row0, n_blk * cfg.block_n + col),
                                tile + (smem - offsets[boxes.start][1]))
            store.producer_commit()


def store_partial_global(acc, ws_ptr, row0, col0, m, n, split, warp, lane):
    """Split-K: write the fp32 accumulator ``acc`` (``m64nN``) into slice
    ``split`` of the row-major (S, m, n) fp32 workspace at ``ws_ptr``, rows
    ``row0..row0+63`` and columns ``col0..``, skipping elements outside
    ``m x n`` (``n`` a multiple of 8, so a thread's column pair is all in or
    all out). One 8-byte store per value pair: each quad of lanes writes 32
    contiguous bytes of a row, whole sectors; the partials are read once,
    by the reduction, so they need no swizzled TMA store."""
    from mlir.dialects import scf

    f32 = ir.F32Type.get()
    pair_t = ir.VectorType.get([2], f32)
    i32t = ir.IntegerType.get_signless(32)
    quad, pair = lane // 4, lane % 4
    col_base = col0 + pair * 2
    for half in range(2):
        row = row0 + warp * 16 + quad + half * 8
        row_ok = row < m
        # i64 byte offset: split * m * n can pass 2^31 elements.
        base = ((split.to(64) * m.to(64) + row.to(64)) * n.to(64) + col_base.to(64)) * 4
        for j in range(acc.n // 8):
            i = 4 * j + 2 * half
            v = llvm.mlir_undef(pair_t)
            v = llvm.insertelement(v, acc.value(i), arith.constant(i32t, 0))
            v = llvm.insertelement(v, acc.value(i + 1), arith.constant(i32t, 1))
            ok = row_ok & (col_base + 8 * j < n)
            branch = scf.IfOp(ok.ir_value, [], has_else=False)
            with ir.InsertionPoint(branch.then_block):
                off = (base + 8 * 4 * j).ir_value
                p = llvm.getelementptr(ws_ptr.type, ws_ptr, [off], [-2147483648],
                                       ir.IntegerType.get_signless(8), 0)
                llvm.store(v, p, alignment=8)
                scf.YieldOp([])


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
