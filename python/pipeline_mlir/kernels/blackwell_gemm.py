"""A warp-specialized, persistent Blackwell (sm_100a) GEMM: TMA ->
PipelineTmaUmma -> tcgen05.mma into tensor memory -> PipelineUmmaAsync ->
tcgen05.ld epilogue -> TMA store, with cluster launch control handing out
tiles through PipelineClcFetchAsync. Every barrier goes through the pipeline
dialect.

    C[M, N] = A[M, K] @ B[N, K]^T        (bf16 or fp16 in, fp32 accumulate)

A is row-major M x K, B is given as N x K (both K-major), C is row-major.

Roles (one CTA of 7 warps, 224 threads; 6 warps with the static scheduler):
- warps 0-3, the epilogue warpgroup: per tile, wait for an accumulator
  stage, read it from TMEM 64 columns at a time (``tcgen05.ld 32x32b.x64``:
  thread ``(w, l)`` gets row ``32 w + l``), release the stage after the last
  read, convert to 16 bits into a swizzled shared-memory box (two buffers)
  that one thread TMA-stores;
- warp 4, MMA: per k-block wait for an operand stage, one elected thread
  issues 4 ``tcgen05.mma ... k16`` into the tile's TMEM accumulator and
  releases the stage with ``tcgen05.commit`` (arrives when those MMAs are
  done); after the last k-block it commits the accumulator stage to the
  epilogue. It also allocates the 512 TMEM columns (2 accumulator stages of
  ``block_n`` fp32 columns) and frees them at the end;
- warp 5, TMA: per k-block acquire a stage of the ring and load an A tile
  (128 x 64) and a B tile (``block_n / cta_group`` x 64);
- warp 6, scheduler (CLC): asks cluster launch control for the next tile
  (``try_cancel``) into a 2-stage response ring; every warp, this one
  included, reads each response and stops when no cluster was left.

With ``cta_group=2`` a cluster of two CTAs is one MMA "pair": the leader
CTA's MMA warp issues ``tcgen05.mma.cta_group::2`` m256, reading A and B from
*both* CTAs' shared memory at the same offsets (each CTA loads its 128 rows
of A and its half of B, completing on the leader's full barrier through the
``.cta_group::2`` TMA form) and writing D into both CTAs' TMEM; its commits
multicast to both CTAs' barriers. Each CTA's epilogue stores its own 128 rows.

Usage: python examples/blackwell_gemm.py [--print-ir] [--out DIR] [--pair] [--static]
(builds, checks and compiles for sm_100a; no Blackwell GPU runs it here).

``--out DIR``: where the cubin and its launch metadata go (by default a
folder in the system's temporary directory, not the source tree:
examples/_common.py).
"""

import sys
from dataclasses import dataclass, replace

from pipeline_mlir.chip_limits import SMEM_PER_BLOCK
from pipeline_mlir.kernel import (Int32, Kernel, Scalar, TmaDescriptor,
                                  fence_view_async_shared)
from pipeline_mlir.kernel import clc, tcgen05, tmem
from pipeline_mlir.kernel.tile_scheduler import PersistentTileScheduler
from pipeline_mlir.kernel.tmem_epilogue import store_row_segment
from pipeline_mlir.layout import OperandLayout, descriptor_units
from pipeline_mlir.kernel.values import i1, to_value
from pipeline_mlir.pipeline import (Agent, CooperativeGroup, NamedBarrier,
                                    PipelineClcFetchAsync, PipelineState,
                                    PipelineTmaStore,
                                    PipelineTmaUmma, PipelineUmmaAsync,
                                    PipelineUserType, make_pipeline_state,
                                    pipeline_init_arrive, pipeline_init_wait)

BLOCK_M = 128                   # rows per CTA (TMEM lanes)
SMEM_LIMIT = SMEM_PER_BLOCK           # dynamic shared memory one CTA may opt into
EPILOGUE_WARPS = 4                  # warps 0-3 (TMEM lane quarter = warp)
MMA_WARP, TMA_WARP, SCHED_WARP = 4, 5, 6
EPILOGUE_BARRIER = 1
CLC_STAGES = 2
Producer, Consumer = PipelineUserType.Producer, PipelineUserType.Consumer


@dataclass(frozen=True)
class GemmConfig:
    """One kernel variant."""
    dtype: str = "bf16"
    block_n: int = 256                # N of the tile (of the pair's tile)
    cta_group: int = 1                # 2: a CTA pair, tcgen05.mma m256
    stages: int = 4                   # operand ring, at most (shared memory)
    acc_stages: int = 2               # accumulators in TMEM
    scheduler: str = "clc"            # or "static": PersistentTileScheduler
    epilogue_buffers: int = 2         # C boxes (128 rows) the epilogue cycles through
    swizzle: int = 128                # of every operand and C box
    group_m: int = 8                  # grouped tile order (L2 reuse)

    @property
    def mma_m(self):
        return BLOCK_M * self.cta_group

    @property
    def clc(self):
        return self.scheduler == "clc"

    @property
    def warps(self):
        return 7 if self.clc else 6

    @property
    def threads(self):
        return 32 * self.warps

    @property
    def tmem_columns(self):
        return self.acc_stages * self.block_n

    @property
    def name(self):
        return (f"bw_gemm_{self.dtype}_{self.mma_m}x{self.block_n}_cta{self.cta_group}"
                f"_{self.scheduler}")

    def check(self):
        if self.scheduler not in ("clc", "static"):
            raise ValueError(f"{self.name}: scheduler must be 'clc' or 'static', "
                             f"got {self.scheduler!r}")
        tcgen05.check_shape(self.mma_m, self.block_n, self.cta_group, self.name)
        tmem.check_columns(self.tmem_columns, f"{self.name}: acc_stages * block_n")
        segments = self.block_n // self.layouts()[2].cols
        if segments % self.epilogue_buffers:
            raise ValueError(f"{self.name}: the {segments} epilogue "
                             f"segments must cycle evenly through {self.epilogue_buffers} buffers")

    def layouts(self):
        """(A tile, B tile, C box), as one CTA loads and stores them; a
        k-block is one swizzle span of K (``a.k``)."""
        return (OperandLayout.one_box(self.dtype, "K", self.swizzle, BLOCK_M),
                OperandLayout.one_box(self.dtype, "K", self.swizzle,
                                      self.block_n // self.cta_group),
                OperandLayout.one_box(self.dtype, "K", self.swizzle, BLOCK_M))

    def num_stages(self):
        """Operand stages that fit next to the epilogue buffers."""
        a, b, c = self.layouts()
        # 1024: the arena's alignment slack; 512: barriers, responses, TMEM slot.
        fit = (SMEM_LIMIT - self.epilogue_buffers * c.bytes - 1024 - 512) // (a.bytes + b.bytes)
        if fit < 2:
            raise ValueError(f"{self.name}: not even 2 stages fit in shared memory")
        return min(self.stages, fit)


def build(cfg=GemmConfig(), chip="sm_100a"):
    """The kernel for ``cfg`` (``.module`` is the built module)."""
    cfg.check()
    a_tile, b_tile, c_box = cfg.layouts()
    stages, pair = cfg.num_stages(), cfg.cta_group == 2
    layout = (2, 1, 1, 1) if pair else None
    k = Kernel(cfg.name, chip=chip, block_dim=cfg.threads,
               cluster_dim=(cfg.cta_group, 1, 1),
               params={"a": TmaDescriptor(), "b": TmaDescriptor(), "c": TmaDescriptor(),
                       "m": Int32(), "n": Int32(), "k": Int32()})
    with k:
        desc_a, desc_b, desc_c, m, n, kdim = k.args
        ring_bars = k.alloc_barriers(2 * stages, name="ring barriers")
        acc_bars = k.alloc_barriers(2 * cfg.acc_stages, name="acc barriers")
        tmem_slot = k.smem_alloc(tmem.HOLDER_BYTES, align=16, name="TMEM address")
        ring_a = k.smem_alloc(stages * a_tile.bytes, align=a_tile.alignment, name="A ring")
        ring_b = k.smem_alloc(stages * b_tile.bytes, align=b_tile.alignment, name="B ring")
        c_buf = k.smem_alloc(cfg.epilogue_buffers * c_box.bytes, align=c_box.alignment,
                             name="C boxes")

        # Operand ring: one TMA thread per CTA fills a stage (the leader arms
        # the bytes of both CTAs), one tcgen05.commit empties it.
        ring = PipelineTmaUmma.create(
            num_stages=stages, producer_group=CooperativeGroup(Agent.Thread, 1),
            consumer_group=CooperativeGroup(Agent.Thread, 1),
            tx_count=(a_tile.bytes + b_tile.bytes) * cfg.cta_group,
            barrier_storage=ring_bars, cta_layout_vmnk=layout, defer_sync=True,
            name="ab")
        # Accumulators: the MMA's commit fills one, one elected lane of each
        # epilogue warp (of each CTA of the pair) empties it.
        acc = PipelineUmmaAsync.create(
            num_stages=cfg.acc_stages, producer_group=CooperativeGroup(Agent.Thread, 1),
            consumer_group=CooperativeGroup(Agent.Thread, EPILOGUE_WARPS),
            barrier_storage=acc_bars, cta_layout_vmnk=layout, defer_sync=True,
            name="acc")
        scheduler = None
        if cfg.clc:
            clc_bars = k.alloc_barriers(2 * CLC_STAGES, name="CLC barriers")
            responses = k.smem_alloc(CLC_STAGES * clc.RESPONSE_BYTES, align=16,
                                     name="CLC responses")
            # Every thread of the cluster reads each response and releases it.
            fetch = PipelineClcFetchAsync.create(
                barrier_storage=clc_bars, num_stages=CLC_STAGES,
                producer_group=CooperativeGroup(Agent.Thread, 1),
                consumer_group=CooperativeGroup(Agent.Thread, cfg.threads * cfg.cta_group),
                tx_count=clc.RESPONSE_BYTES,
                cta_layout_vmnk=(1, 2, 1, 1) if pair else None, defer_sync=True,
                name="clc")
            scheduler = clc.ClcTileScheduler(fetch, responses, cfg.cta_group)

        warp = k.warp_idx()
        rank = k.cluster_cta_rank() if pair else None
        # TMEM: one warp allocates (in each CTA of a pair), everyone reads
        # the address after a barrier. A pair's cta_group::2 alloc comes
        # after the init barrier of the cluster: the PTX ISA asks that the
        # peer CTA be known to have started before it. The pair's address
        # is then published by bar.sync 0; one CTA's, by the init barrier.
        if pair:
            pipeline_init_arrive(cta_layout_vmnk=layout)
            pipeline_init_wait(cta_layout_vmnk=layout)
        with k.if_(warp == MMA_WARP):
            tmem.alloc(tmem_slot, cfg.tmem_columns, cfg.cta_group)
            tmem.relinquish_alloc_permit(cfg.cta_group)
        tcgen05.fence_before_thread_sync()
        if pair:
            k.sync_threads()
        else:
            pipeline_init_arrive(cta_layout_vmnk=layout)
            pipeline_init_wait(cta_layout_vmnk=layout)
        tcgen05.fence_after_thread_sync()

        tiles = PersistentTileScheduler(m, n, BLOCK_M, cfg.block_n,
                                        group_m=cfg.group_m, cluster_m=cfg.cta_group)
        k_blocks = (kdim + (a_tile.k - 1)) // a_tile.k

        def work(carry=(), before_next=None, seen=None):
            """The persistent loop of one role: yields ``(m_block, n_block)``
            of each tile this CTA computes, carrying ``carry``. With CLC,
            ``before_next`` runs before each response is read from the
            ``seen`` state (a consumer state by default)."""
            if not cfg.clc:
                first, stride = tiles.first_and_stride()
                for unit, _ in k.range(first, tiles.num_units, stride, carry=carry):
                    yield tiles.tile(unit, rank)
                return
            valid = Scalar(to_value(1, i1()))
            unit = scheduler.first_unit()
            seen = seen or make_pipeline_state(Consumer, CLC_STAGES)
            for _ in k.while_(valid, carry=[valid, unit, seen, *carry]):
                yield tiles.tile(unit, rank)
                if before_next is not None:
                    before_next()
                ok, nxt = scheduler.next_unit(seen)
                seen.advance()
                valid.set(ok)
                unit.set(nxt)

        def idle():
            """A warp with no part in a tile still reads every response."""
            if cfg.clc:
                for _ in work():
                    pass

        with k.if_(warp < EPILOGUE_WARPS):
            epilogue(k, cfg, acc, work, desc_c, tmem_slot, c_buf, c_box, warp)

        with k.if_(warp == MMA_WARP):
            def mma_role():
                mainloop_mma(k, cfg, ring, acc, work, tmem_slot, ring_a, ring_b,
                             a_tile, b_tile, k_blocks)
            if pair:
                # Only the pair's leader issues MMAs (for both CTAs).
                with k.if_(rank == 0) as leader:
                    mma_role()
                with leader.else_():
                    idle()
            else:
                mma_role()

        with k.if_(warp == TMA_WARP):
            state = make_pipeline_state(Producer, stages)
            for m_blk, n_blk in work([state]):
                for kb, _ in k.range(k_blocks, carry=[state]):
                    ring.producer_acquire(state)
                    with k.elect_one():
                        x = kb * a_tile.k
                        ring.tma_load(state, desc_a, a_tile.coords(m_blk * BLOCK_M, x),
                                      ring_a.stage(state.index, a_tile.bytes), a_tile.bytes)
                        # This CTA's rows of the (pair's) B tile.
                        b_row = n_blk * cfg.block_n + (rank * b_tile.rows if pair else 0)
                        ring.tma_load(state, desc_b, b_tile.coords(b_row, x),
                                      ring_b.stage(state.index, b_tile.bytes), b_tile.bytes)
                    ring.producer_commit(state)
                    state.advance()
            # No tcgen05.commit may land on this CTA's barriers after it exits.
            ring.producer_tail(state)

        if cfg.clc:
            with k.if_(warp == SCHED_WARP):
                def scheduler_role():
                    ask = make_pipeline_state(Producer, CLC_STAGES)

                    def request():
                        scheduler.fetch(ask)
                        ask.advance()
                    # This warp also reads the responses (to know when to
                    # stop): a producer_consumer state, counted among the
                    # consumers like every other warp.
                    seen = PipelineState(CLC_STAGES, 0, 0, 0)
                    for _ in work([ask], before_next=request, seen=seen):
                        pass
                    fetch.producer_tail(ask)
                if pair:
                    # The first CTA asks for the cluster; responses reach both.
                    with k.if_(rank == 0) as first:
                        scheduler_role()
                    with first.else_():
                        idle()
                else:
                    scheduler_role()

        # Free TMEM once every epilogue read is done (the MMAs finished
        # before the epilogue saw their last commit).
        tcgen05.fence_before_thread_sync()
        if pair:
            k.cluster_sync()
        else:
            k.sync_threads()
        with k.if_(warp == MMA_WARP):
            tcgen05.fence_after_thread_sync()
            tmem.dealloc(tmem.load_address(tmem_slot), cfg.tmem_columns, cfg.cta_group)
    k.config = cfg
    k.stages = stages
    return k


def mainloop_mma(k, cfg, ring, acc, work, tmem_slot, ring_a, ring_b, a_tile, b_tile,
                 k_blocks):
    """The MMA warp: per tile, an accumulator stage; per k-block, 4 MMAs
    from one elected thread, then ``tcgen05.commit`` releases the stage."""
    mma = tcgen05.Mma(cfg.mma_m, cfg.block_n, cfg.dtype, cfg.cta_group)
    read = make_pipeline_state(Consumer, ring.num_stages)
    fill = make_pipeline_state(Producer, cfg.acc_stages)
    base = tmem.load_address(tmem_slot)
    a_base = tcgen05.smem_descriptor(ring_a, a_tile)
    b_base = tcgen05.smem_descriptor(ring_b, b_tile)
    for _ in work([read, fill]):
        # The epilogue has read this accumulator stage out (its release
        # follows a tcgen05.fence::before_thread_sync).
        acc.producer_acquire(fill)
        tcgen05.fence_after_thread_sync()
        d = tmem.offset(base, column=fill.index * cfg.block_n)
        for kb, _ in k.range(k_blocks, carry=[read]):
            ring.consumer_wait(read)
            s = read.index.to(64)
            da = (s * descriptor_units(a_tile.bytes) + Scalar(a_base)).ir_value
            db = (s * descriptor_units(b_tile.bytes) + Scalar(b_base)).ir_value
            first_k = kb == 0
            with k.elect_one():
                for kk in range(a_tile.k_slices):
                    mma.mma(d, tcgen05.k_slice_descriptor(da, a_tile, kk),
                            tcgen05.k_slice_descriptor(db, b_tile, kk),
                            accumulate=~first_k if kk == 0 else True)
            # tcgen05.commit: the stage is free once these MMAs completed.
            ring.consumer_release(read)
            read.advance()
        acc.producer_commit(fill)
        fill.advance()
    acc.producer_tail(fill)


def epilogue(k, cfg, acc, work, desc_c, tmem_slot, c_buf, c_box, warp):
    """Warps 0-3: TMEM -> registers -> 16-bit swizzled boxes -> TMA store."""
    lane = k.lane_idx()
    row = warp * 32 + lane                       # TMEM lane = row of the tile
    rows = tmem.offset(tmem.load_address(tmem_slot), lane=warp * 32)
    issuer = k.thread_idx() == 0
    store = PipelineTmaStore.create(num_stages=cfg.epilogue_buffers,
                                    producer_group=CooperativeGroup(Agent.Thread, 1))
    sync = NamedBarrier(EPILOGUE_BARRIER, 32 * EPILOGUE_WARPS)
    segments = cfg.block_n // c_box.cols
    drain = make_pipeline_state(Consumer, cfg.acc_stages)
    for m_blk, n_blk in work([drain]):
        acc.consumer_wait(drain)
        tcgen05.fence_after_thread_sync()
        col0 = drain.index * cfg.block_n
        # A run-time loop (one copy of the load / convert / store code, not
        # one per segment): the TMEM column, the box and the store's column
        # are computed from the segment index.
        for s, _ in k.range(segments, unroll=1):
            column = s * c_box.cols
            bits = tcgen05.load_32x32b(tmem.offset(rows, column=col0 + column),
                                       c_box.cols)
            tcgen05.wait_load()
            box = c_buf.stage(s % cfg.epilogue_buffers, c_box.bytes)
            with k.if_(issuer):
                store.producer_acquire()        # the box's last store has read it
            sync.arrive_and_wait()
            store_row_segment(bits, box, row, c_box)
            fence_view_async_shared()           # generic writes -> TMA (async proxy)
            sync.arrive_and_wait()
            with k.if_(issuer):
                col = n_blk * cfg.block_n + column
                store.tma_store(desc_c, c_box.coords(m_blk * BLOCK_M, col), box)
                store.producer_commit()
        # Every segment read (each iteration's wait::ld): the MMA may
        # overwrite this stage.
        tcgen05.fence_before_thread_sync()
        with k.elect_one():
            acc.consumer_release(drain)
        drain.advance()
    with k.if_(issuer):
        store.producer_tail()
