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

Usage: python examples/hopper_gemm.py [--print-ir] [--out DIR] [--cluster] [--bn 128|256]
(builds, checks and compiles; ``examples/hopper_gemm_host.py`` runs it).

``--out DIR``: where the cubin and its launch metadata go (by default a
folder in the system's temporary directory, not the source tree:
examples/_common.py).
"""

import sys
from dataclasses import dataclass, replace

from pipeline_mlir.kernel import (GlobalPtr, Int32, Kernel, TmaDescriptor,
                                  fence_view_async_shared)
from pipeline_mlir.kernel import epilogue, wgmma
from pipeline_mlir.kernel.tile_scheduler import PersistentTileScheduler
from pipeline_mlir.kernel.tma import TmaTile
from pipeline_mlir.kernel.warpgroup import (THREADS_PER_WARPGROUP,
                                            check_register_budget,
                                            set_max_registers)
from pipeline_mlir.pipeline import (Agent, CooperativeGroup, NamedBarrier,
                                    PipelineTmaAsync, PipelineTmaStore,
                                    PipelineUserType, make_pipeline_state,
                                    pipeline_init_arrive, pipeline_init_wait)

BLOCK_K = 64                    # one 128-byte swizzle row of 16-bit elements
SMEM_LIMIT = 227 * 1024         # dynamic shared memory per block on sm_90
EPILOGUE_BARRIER = 1            # named barriers 1, 2: one per consumer WG


@dataclass(frozen=True)
class GemmConfig:
    """One kernel variant. The defaults are the fastest configuration; the
    other switches exist for the step-by-step table of docs/gemm.md."""
    dtype: str = "bf16"
    block_n: int = 256
    consumer_warpgroups: int = 2      # tile M = 64 per consumer warpgroup
    stages: int = 4                   # at most; fewer if shared memory is short
    cluster_m: int = 1                # 2: multicast B to a CTA pair along M
    setmaxnreg: bool = True
    producer_registers: int = 40
    consumer_registers: int = 232
    tma_store_epilogue: bool = True
    epilogue_passes: int = 2          # through half the C tile: room for 4 stages
    group_m: int = 8                  # grouped tile order (L2 reuse)

    @property
    def block_m(self):
        return 64 * self.consumer_warpgroups

    @property
    def threads(self):
        return THREADS_PER_WARPGROUP * (1 + self.consumer_warpgroups)

    @property
    def name(self):
        return (f"gemm_{self.dtype}_{self.block_m}x{self.block_n}_c{self.cluster_m}"
                f"{'_r' if self.setmaxnreg else ''}"
                f"{'_tmastore' if self.tma_store_epilogue else '_direct'}"
                f"{self.epilogue_passes if self.tma_store_epilogue and self.epilogue_passes > 1 else ''}")

    def tiles(self):
        """(A tile, B tile as loaded by one CTA, epilogue bytes)."""
        a = TmaTile(self.block_m, BLOCK_K, self.dtype)
        b = TmaTile(self.block_n // self.cluster_m, BLOCK_K, self.dtype)
        epi = (self.block_m * self.block_n * 2 // self.epilogue_passes
               if self.tma_store_epilogue else 0)
        return a, b, epi

    def num_stages(self):
        """Stages that fit next to the epilogue buffer and the barriers."""
        a, b, epi = self.tiles()
        stage = a.bytes + b.bytes * self.cluster_m
        # 1024: the arena's alignment slack (kernel/smem.py); 256: barriers.
        fit = (SMEM_LIMIT - epi - 1024 - 256) // stage
        if fit < 2:
            raise ValueError(f"{self.name}: not even 2 stages of {stage} bytes fit")
        return min(self.stages, fit)


def build(cfg=GemmConfig(), chip="sm_90a"):
    """The kernel for ``cfg`` (``.module`` is the built module)."""
    if cfg.setmaxnreg:
        check_register_budget(cfg.threads, 1, cfg.producer_registers,
                              cfg.consumer_warpgroups, cfg.consumer_registers)
    a_tile, b_tile, epi_bytes = cfg.tiles()
    stages, cluster = cfg.num_stages(), cfg.cluster_m
    b_stage_bytes = b_tile.bytes * cluster          # the whole B tile
    layout = (1, cluster, 1, 1) if cluster > 1 else None
    mma = wgmma.WarpgroupMma(cfg.block_n, cfg.dtype)
    k = Kernel(cfg.name, chip=chip, block_dim=cfg.threads,
               cluster_dim=(cluster, 1, 1),
               params={"a": TmaDescriptor(), "b": TmaDescriptor(),
                       "c": TmaDescriptor(), "c_ptr": GlobalPtr(),
                       "m": Int32(), "n": Int32(), "k": Int32()})
    with k:
        desc_a, desc_b, desc_c, c_ptr, m, n, kdim = k.args
        barriers = k.alloc_barriers(2 * stages)
        ring_a = k.smem_alloc(stages * a_tile.bytes, align=1024, name="A ring")
        ring_b = k.smem_alloc(stages * b_stage_bytes, align=1024, name="B ring")
        c_buf = (k.smem_alloc(epi_bytes, align=1024, name="C tile")
                 if epi_bytes else None)

        ring = PipelineTmaAsync.create(
            num_stages=stages,
            producer_group=CooperativeGroup(Agent.Thread, 1),
            # One signalling lane per consumer warp, per CTA it releases.
            consumer_group=CooperativeGroup(
                Agent.Thread, cluster * 4 * cfg.consumer_warpgroups),
            tx_count=a_tile.bytes + b_stage_bytes,
            barrier_storage=barriers, cta_layout_vmnk=layout,
            defer_sync=True, name="ab")
        pipeline_init_arrive(cta_layout_vmnk=layout)
        pipeline_init_wait(cta_layout_vmnk=layout)

        sched = PersistentTileScheduler(m, n, cfg.block_m, cfg.block_n,
                                        group_m=cfg.group_m, cluster_m=cluster)
        first, stride = sched.first_and_stride()
        k_blocks = (kdim + (BLOCK_K - 1)) // BLOCK_K
        rank = k.cluster_cta_rank() if cluster > 1 else None
        warp = k.warp_idx()
        warpgroup = warp // 4

        with k.if_(warpgroup == 0) as role:
            # ---- producer warpgroup ----
            if cfg.setmaxnreg:
                set_max_registers(cfg.producer_registers, increase=False)
            with k.if_(warp == 0):
                state = make_pipeline_state(PipelineUserType.Producer, stages)
                for unit, _ in k.range(first, sched.num_units, stride, carry=[state]):
                    m_blk, n_blk = sched.tile(unit, rank)
                    for kb, _ in k.range(k_blocks, carry=[state]):
                        ring.producer_acquire(state)
                        with k.elect_one():
                            x = kb * BLOCK_K
                            ring.tma_load(state, desc_a, [x, m_blk * cfg.block_m],
                                          ring_a.stage(state.index, a_tile.bytes),
                                          a_tile.bytes)
                            b_dst = ring_b.stage(state.index, b_stage_bytes)
                            if cluster == 1:
                                ring.tma_load(state, desc_b, [x, n_blk * cfg.block_n],
                                              b_dst, b_tile.bytes)
                            else:
                                # This CTA's half of B, written into both CTAs.
                                ring.tma_load(state, desc_b,
                                              [x, n_blk * cfg.block_n + rank * b_tile.rows],
                                              b_dst + rank * b_tile.bytes, b_tile.bytes,
                                              mcast_mask=(1 << cluster) - 1)
                        ring.producer_commit(state)
                        state.advance()
                # No arrive may land on this CTA's barriers after it exits.
                ring.producer_tail(state)

        with role.else_():
            # ---- consumer warpgroups ----
            if cfg.setmaxnreg:
                set_max_registers(cfg.consumer_registers, increase=True)
            cw = warpgroup - 1
            warp_in_wg, lane = warp % 4, k.lane_idx()
            leader = (warp_in_wg == 0) & (lane == 0)
            a_base = wgmma.smem_matrix_descriptor(ring_a + cw * (64 * 128))
            b_base = wgmma.smem_matrix_descriptor(ring_b)
            a_step, b_step = a_tile.bytes >> 4, b_stage_bytes >> 4

            def mma_k_block(acc, stage):
                """The 4 wgmma of one k-block on ring stage ``stage``, as one
                group."""
                s = stage.to(64)
                da = (s * a_step + a_base).ir_value
                db = (s * b_step + b_base).ir_value
                wgmma.fence()
                for kk in range(BLOCK_K // mma.k):
                    mma.mma(acc, wgmma.advance_descriptor(da, kk * 2 * mma.k),
                            wgmma.advance_descriptor(db, kk * 2 * mma.k))
                wgmma.commit_group()

            store = (PipelineTmaStore.create(
                num_stages=1, producer_group=CooperativeGroup(Agent.Thread, 1))
                if c_buf else None)
            epi_sync = NamedBarrier(EPILOGUE_BARRIER, THREADS_PER_WARPGROUP)
            read = make_pipeline_state(PipelineUserType.Consumer, stages)
            release = make_pipeline_state(PipelineUserType.Consumer, stages)
            acc = mma.accumulator()
            for unit, _ in k.range(first, sched.num_units, stride,
                                   carry=[read, release]):
                m_blk, n_blk = sched.tile(unit, rank)
                acc.zero()
                ring.consumer_wait(read)
                mma_k_block(acc, read.index)
                read.advance()
                for kb, _ in k.range(1, k_blocks, carry=[read, release, acc]):
                    ring.consumer_wait(read)
                    mma_k_block(acc, read.index)
                    # Release order: the group just issued reads stage `read`;
                    # wait_group(1) retires every older group, so no wgmma
                    # reads stage `release` any more and its producer may
                    # overwrite it. Releasing before this wait would let TMA
                    # overwrite operands an in-flight wgmma still reads
                    # (pipeline-verify-protocol check 8 and pipeline-sim's
                    # async-read report it: docs/VerifyProtocol.md).
                    wgmma.wait_group(1)
                    ring.consumer_release(release)
                    read.advance()
                    release.advance()
                wgmma.wait_group(0)
                ring.consumer_release(release)
                release.advance()

                row0 = m_blk * cfg.block_m + cw * 64
                if c_buf is not None:
                    per_pass = epilogue.boxes(cfg.block_n) // cfg.epilogue_passes
                    tile = c_buf + cw * (64 * cfg.block_n * 2 // cfg.epilogue_passes)
                    for p in range(cfg.epilogue_passes):
                        boxes = range(p * per_pass, (p + 1) * per_pass)
                        # The previous TMA stores must have read the buffer.
                        with k.if_(leader):
                            store.producer_acquire()
                        epi_sync.arrive_and_wait_w_index(cw)
                        epilogue.store_fragment(acc, tile, warp_in_wg, lane, cfg.dtype,
                                                box_range=boxes)
                        # Generic-proxy writes -> visible to TMA (async proxy).
                        fence_view_async_shared()
                        epi_sync.arrive_and_wait_w_index(cw)
                        with k.if_(leader):
                            for i, box in enumerate(boxes):
                                store.tma_store(desc_c, [n_blk * cfg.block_n +
                                                         box * epilogue.BOX_COLS, row0],
                                                tile + i * epilogue.BOX_BYTES)
                            store.producer_commit()
                else:
                    epilogue.store_fragment_global(acc, c_ptr, row0,
                                                   n_blk * cfg.block_n, m, n,
                                                   warp_in_wg, lane, cfg.dtype)
            if store is not None:
                with k.if_(leader):
                    store.producer_tail()
    k.config = cfg
    k.stages = stages
    return k


if __name__ == "__main__":
    from _common import main
    cfg = GemmConfig()
    if "--cluster" in sys.argv:
        cfg = replace(cfg, cluster_m=2)
    if "--bn" in sys.argv:
        cfg = replace(cfg, block_n=int(sys.argv[sys.argv.index("--bn") + 1]))
    sys.exit(main(build(cfg), cfg.name))
