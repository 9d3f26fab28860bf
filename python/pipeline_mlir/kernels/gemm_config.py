"""The Hopper GEMM's configuration (``GemmConfig``): one kernel variant's
tile, stages, cluster, epilogue and schedule switches, the shared-memory
plan they imply (``layouts``, ``epilogue_bytes``, ``num_stages``) and the
combinations ``check`` refuses. The kernel is built from it by
``kernels/hopper_gemm.py`` (``build``), which re-exports these names.
"""

from dataclasses import dataclass

from pipeline_mlir.chip_limits import SMEM_PER_BLOCK, SMEM_PER_SM, THREADS_PER_WARP
from pipeline_mlir.kernel import epilogue, wgmma
from pipeline_mlir.kernel.epilogue import Epilogue
from pipeline_mlir.kernel.warpgroup import THREADS_PER_WARPGROUP, check_register_budget
from pipeline_mlir.layout import DTYPES, OperandLayout

SMEM_LIMIT = SMEM_PER_BLOCK           # dynamic shared memory one CTA may opt into
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
    # 2 with cluster_m=2: a 2x2 cluster of tiles, two along M by two along
    # N. Each CTA loads half of its A tile's rows and multicasts them to the
    # CTA beside it along N (same tile row), and half of its B tile's rows
    # to the CTA below it along M (same tile column); a consumer releases a
    # stage in the three CTAs whose loads land in it. Both operands are
    # read once per pair of tiles: for narrow outputs of a tall M and a long
    # K, where each row of one-CTA tiles reads all of B again.
    cluster_n: int = 1
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
    # The shared fix-up with one arrival a warp (needs sk_share): the
    # warp whose arrival completes the tile's count resets the counter at
    # once (a relaxed store after its acquire fence) and sums its share
    # without polling; the others poll until they read the full count or
    # the reset. No second arrival on the way out (two fewer fences and an
    # atomic's round trip at the end of every contributor).
    sk_one_arrival: bool = False
    # The shared fix-up's sums over this many of a lane's 16-byte vectors at
    # a time (needs sk_share; 1: one vector at a time, the loop's next
    # vector's loads behind this one's C stores): SHARE_LOADS / it
    # contributors of each vector loaded together (streamk_fixup.
    # _sum_share_grouped), so a share of that many vectors a lane takes one
    # round trip per batch of contributors. The same sums, the same bits.
    sk_share_vectors: int = 1
    # With sk_one_arrival: one arrival a consumer warpgroup instead of a
    # warp (``<tile>_streamk_share1g``): the warpgroup's warps meet at its
    # epilogue barrier after their partial stores, its first warp arrives
    # (and resets, or polls), and they meet again before the share loads.
    # The same sums, the same bits. A candidate, not measured.
    sk_wg_arrival: bool = False
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
                f"{'1' if self.sk_one_arrival else ''}"
                f"{'g' if self.sk_wg_arrival else ''}"
                f"{f'v{self.sk_share_vectors}' if self.sk_share_vectors > 1 else ''}"
                f"{f'_x{self.ctas_per_sm}' if self.ctas_per_sm > 1 else ''}"
                f"{'_pp' if self.pingpong_m else ''}"
                f"{'_cn' if self.cluster_along_n else ''}"
                f"{f'_n{self.cluster_n}' if self.cluster_n > 1 else ''}")

    @property
    def cluster_size(self):
        """CTAs of the cluster: ``cluster_m`` along M times ``cluster_n``
        along N (the pair along N of ``cluster_along_n`` is ``cluster_m``)."""
        return self.cluster_m * self.cluster_n

    @property
    def releasing_ctas(self):
        """CTAs whose consumers release each stage: every CTA that shares a
        row or a column of the cluster with this one (itself included)."""
        return self.cluster_m + self.cluster_n - 1

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
        return self.cluster_m if self.cluster_along_n else self.cluster_n

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
        self._check_cluster_shape()
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
        if self.sk_one_arrival and not self.sk_share:
            raise ValueError(f"{self.name}: sk_one_arrival is the shared fix-up's protocol; "
                             "build it with sk_share=True")
        if self.sk_wg_arrival and not self.sk_one_arrival:
            raise ValueError(f"{self.name}: sk_wg_arrival is one arrival a warpgroup of the "
                             "one-arrival fix-up; build it with sk_one_arrival=True")
        if self.sk_share_vectors != 1 and (not self.sk_share
                                           or not 1 <= self.sk_share_vectors <= 8):
            raise ValueError(f"{self.name}: sk_share_vectors (1-8) groups the shared fix-up's "
                             "sums; build it with sk_share=True")
        if self.sk_prefetch and not self.stream_k:
            raise ValueError(f"{self.name}: sk_prefetch prefetches stream-K partials; build "
                             "it with stream_k=True")
        if self.ctas_per_sm != 1:
            self._check_ctas_per_sm()
        # Stream-K runs on these clusters as on the pair along M: the
        # schedule's units are the cluster's tiles, every CTA of it walks
        # the same K blocks (the multicast loads), and each CTA has
        # workspace slots and counters of its own (kernels/streamk_fixup.py).
        if self.cluster_along_n and (self.cluster_m != 2 or self.split_k > 1
                                     or self.pingpong_m or self.ctas_per_sm > 1
                                     or self.sk_prefetch):
            raise ValueError(f"{self.name}: cluster_along_n turns the 2-CTA cluster of the "
                             "persistent schedule along N: build it with cluster_m=2 "
                             "and without split_k, pingpong_m, ctas_per_sm or sk_prefetch")
        if self.cluster_n != 1 and (self.cluster_n != 2 or self.cluster_m != 2
                                    or self.cluster_along_n or self.split_k > 1
                                    or self.pingpong_m or self.ctas_per_sm > 1
                                    or self.sk_prefetch):
            raise ValueError(f"{self.name}: cluster_n=2 makes the persistent schedule's "
                             "2x2 cluster: build it with cluster_m=2 and without "
                             "cluster_along_n, split_k, pingpong_m, ctas_per_sm or "
                             "sk_prefetch")
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

    def _check_cluster_shape(self):
        # Before anything divides by them: cluster_m=0 divided by zero and
        # cluster_m=3 failed in the A tile's layout (85 rows), far from the
        # field; a group_m of one tile row left the 2x2 scheduler groups of
        # 0 units (a division by zero in the kernel).
        for field, meaning in (("cluster_m", "CTAs along M, or the pair along N with "
                                "cluster_along_n"), ("cluster_n", "2: the 2x2 cluster")):
            value = getattr(self, field)
            if type(value) is not int or value not in (1, 2):
                raise ValueError(f"{self.name}: {field} must be 1 or 2 ({meaning}), got "
                                 f"{value!r}")
        if type(self.group_m) is not int or self.group_m < 1:
            raise ValueError(f"{self.name}: group_m (tile rows swept together) must be an "
                             f"int >= 1, got {self.group_m!r}")
        if self.cluster_n == 2 and self.group_m % 2:
            raise ValueError(f"{self.name}: the 2x2 cluster's grouped order sweeps units of "
                             f"two tile rows, so group_m must be even, got {self.group_m}")

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
