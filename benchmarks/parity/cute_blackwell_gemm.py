"""CuTe DSL 4.8.1 side of the Blackwell GEMM comparison (docs/gemm.md,
"Blackwell"): a persistent, warp-specialized bf16 GEMM in the configuration
of CuTe DSL's public ``dense_gemm_persistent`` example, written here against
the wheel's library (``cutlass.utils`` helpers, ``cutlass.pipeline``), compiled
to PTX without a GPU. Runs in .bench-venv:

    CUTE_DSL_ARCH=sm_100a .bench-venv/bin/python benchmarks/parity/cute_blackwell_gemm.py OUTDIR

(re-executes itself once per variant, with CUTE_DSL_KEEP/DUMP_DIR set).
Writes OUTDIR/cute_bw_gemm_cta{1,2}.ptx.

Configuration (the same as examples/blackwell_gemm.py with the static
scheduler): bf16 A (M x K) and B (N x K) K-major, fp32 accumulate, bf16 C
row-major; MMA tile 128 x 256 (1-CTA) or 256 x 256 (cta_group::2, cluster
2 x 1); K = 64 per stage, 4 operand stages, 2 accumulator stages in TMEM;
warps 0-3 epilogue (TMEM -> registers -> smem -> TMA store), warp 4 MMA,
warp 5 TMA; static persistent tile scheduler.
"""
import os
import shutil
import subprocess
import sys

import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline
import cutlass.utils as utils
import cutlass.utils.blackwell_helpers as sm100_utils
from cutlass.cute.nvgpu import cpasync, tcgen05
from cutlass.utils.gemm.sm100 import epilogue_tma_store

AB_STAGES, ACC_STAGES, C_STAGES = 4, 2, 2
EPI_WARPS, MMA_WARP, TMA_WARP = (0, 1, 2, 3), 4, 5
THREADS = 32 * 6


class Gemm:
    """The kernel object the wheel's epilogue helper reads its facts from."""

    def __init__(self, cta_group):
        self.use_2cta_instrs = cta_group == 2
        self.cta_group = tcgen05.CtaGroup.TWO if self.use_2cta_instrs else tcgen05.CtaGroup.ONE
        self.mma_tiler_mn = (128 * cta_group, 256)
        self.cluster_shape_mn = (cta_group, 1)
        self.acc_dtype = cutlass.Float32
        self.epilogue_warp_id = EPI_WARPS
        self.epilog_sync_bar_id = 1
        self.num_c_stage = C_STAGES

    @cute.jit
    def __call__(self, a: cute.Tensor, b: cute.Tensor, c: cute.Tensor,
                 max_active_clusters: cutlass.Constexpr):
        self.a_dtype, self.b_dtype, self.c_dtype = a.element_type, b.element_type, c.element_type
        self.c_layout = utils.LayoutEnum.from_tensor(c)
        a_major = utils.LayoutEnum.from_tensor(a).mma_major_mode()
        b_major = utils.LayoutEnum.from_tensor(b).mma_major_mode()
        tiled_mma = sm100_utils.make_trivial_tiled_mma(
            self.a_dtype, a_major, b_major, self.acc_dtype, self.cta_group, self.mma_tiler_mn)
        k_inst = cute.size(tiled_mma.shape_mnk, mode=[2])
        self.mma_tiler = (*self.mma_tiler_mn, k_inst * 4)
        self.cta_tile_shape_mnk = (self.mma_tiler[0] // cute.size(tiled_mma.thr_id.shape),
                                   self.mma_tiler[1], self.mma_tiler[2])
        self.cluster_layout_vmnk = cute.tiled_divide(
            cute.make_layout((*self.cluster_shape_mn, 1)), (tiled_mma.thr_id.shape,))
        self.epi_tile = sm100_utils.compute_epilogue_tile_shape(
            self.cta_tile_shape_mnk, self.use_2cta_instrs, self.c_layout, self.c_dtype)
        a_smem = sm100_utils.make_smem_layout_a(tiled_mma, self.mma_tiler, self.a_dtype, AB_STAGES)
        b_smem = sm100_utils.make_smem_layout_b(tiled_mma, self.mma_tiler, self.b_dtype, AB_STAGES)
        c_smem = sm100_utils.make_smem_layout_epi(self.c_dtype, self.c_layout, self.epi_tile,
                                                  C_STAGES)
        a_op = sm100_utils.cluster_shape_to_tma_atom_A((*self.cluster_shape_mn, 1), tiled_mma.thr_id)
        b_op = sm100_utils.cluster_shape_to_tma_atom_B((*self.cluster_shape_mn, 1), tiled_mma.thr_id)
        tma_a, tma_ta = cute.nvgpu.make_tiled_tma_atom_A(
            a_op, a, cute.slice_(a_smem, (None, None, None, 0)), self.mma_tiler, tiled_mma,
            self.cluster_layout_vmnk.shape)
        tma_b, tma_tb = cute.nvgpu.make_tiled_tma_atom_B(
            b_op, b, cute.slice_(b_smem, (None, None, None, 0)), self.mma_tiler, tiled_mma,
            self.cluster_layout_vmnk.shape)
        tma_c, tma_tc = cpasync.make_tiled_tma_atom(
            cpasync.CopyBulkTensorTileS2GOp(), c, cute.slice_(c_smem, (None, None, 0)),
            self.epi_tile)
        a_bytes = cute.size_in_bytes(self.a_dtype, cute.slice_(a_smem, (None, None, None, 0)))
        b_bytes = cute.size_in_bytes(self.b_dtype, cute.slice_(b_smem, (None, None, None, 0)))
        self.tx_count = (a_bytes + b_bytes) * cute.size(tiled_mma.thr_id.shape)

        ntiles = (cute.ceil_div(c.shape[0], self.cta_tile_shape_mnk[0]),
                  cute.ceil_div(c.shape[1], self.cta_tile_shape_mnk[1]), c.shape[2])
        sched = utils.PersistentTileSchedulerParams(ntiles, (*self.cluster_shape_mn, 1))
        grid = utils.StaticPersistentTileScheduler.get_grid_shape(sched, max_active_clusters)

        @cute.struct
        class Storage:
            ab_full: cute.struct.MemRange[cutlass.Int64, AB_STAGES]
            ab_empty: cute.struct.MemRange[cutlass.Int64, AB_STAGES]
            acc_full: cute.struct.MemRange[cutlass.Int64, ACC_STAGES]
            acc_empty: cute.struct.MemRange[cutlass.Int64, ACC_STAGES]
            tmem_holder: cutlass.Int32
            sC: cute.struct.Align[cute.struct.MemRange[self.c_dtype, cute.cosize(c_smem.outer)], 1024]
            sA: cute.struct.Align[cute.struct.MemRange[self.a_dtype, cute.cosize(a_smem.outer)], 1024]
            sB: cute.struct.Align[cute.struct.MemRange[self.b_dtype, cute.cosize(b_smem.outer)], 1024]
        self.storage = Storage

        self.kernel(tiled_mma, tma_a, tma_ta, tma_b, tma_tb, tma_c, tma_tc, a_smem, b_smem,
                    c_smem, sched, self.cluster_layout_vmnk, self.epi_tile).launch(grid=grid, block=[THREADS, 1, 1],
                                          cluster=(*self.cluster_shape_mn, 1))

    @cute.kernel
    def kernel(self, tiled_mma: cute.TiledMma, tma_a: cute.CopyAtom, mA: cute.Tensor,
               tma_b: cute.CopyAtom, mB: cute.Tensor, tma_c: cute.CopyAtom, mC: cute.Tensor,
               a_smem: cute.ComposedLayout, b_smem: cute.ComposedLayout,
               c_smem: cute.ComposedLayout, sched_params: utils.PersistentTileSchedulerParams,
               vmnk: cute.Layout, epi_tile: cute.Tile):
        warp = cute.arch.make_warp_uniform(cute.arch.warp_idx())
        tidx, _, _ = cute.arch.thread_idx()
        bidx, bidy, bidz = cute.arch.block_idx()
        v = cute.size(tiled_mma.thr_id.shape)
        mma_coord_v = bidx % v
        is_leader = mma_coord_v == 0
        rank = cute.arch.make_warp_uniform(cute.arch.block_idx_in_cluster())
        coord_vmnk = vmnk.get_flat_coord(rank)

        smem = utils.SmemAllocator()
        st = smem.allocate(self.storage)
        ab = pipeline.PipelineTmaUmma.create(
            barrier_storage=st.ab_full.data_ptr(), num_stages=AB_STAGES,
            producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread),
            consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, 1),
            tx_count=self.tx_count, cta_layout_vmnk=vmnk, defer_sync=True)
        acc = pipeline.PipelineUmmaAsync.create(
            barrier_storage=st.acc_full.data_ptr(), num_stages=ACC_STAGES,
            producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread),
            consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, len(EPI_WARPS) * v),
            cta_layout_vmnk=vmnk, defer_sync=True)
        c_pipe = pipeline.PipelineTmaStore.create(
            num_stages=C_STAGES,
            producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, 32 * len(EPI_WARPS)))
        pipeline.pipeline_init_arrive(cluster_shape_mn=vmnk, is_relaxed=True)

        sA = st.sA.get_tensor(a_smem.outer, swizzle=a_smem.inner)
        sB = st.sB.get_tensor(b_smem.outer, swizzle=b_smem.inner)
        sC = st.sC.get_tensor(c_smem.outer, swizzle=c_smem.inner)

        gA = cute.local_tile(mA, cute.slice_(self.mma_tiler, (None, 0, None)), (None, None, None))
        gB = cute.local_tile(mB, cute.slice_(self.mma_tiler, (0, None, None)), (None, None, None))
        gC = cute.local_tile(mC, cute.slice_(self.mma_tiler, (None, None, 0)), (None, None, None))
        k_tiles = cute.size(gA, mode=[3])
        thr_mma = tiled_mma.get_slice(mma_coord_v)
        tCgA, tCgB, tCgC = thr_mma.partition_A(gA), thr_mma.partition_B(gB), thr_mma.partition_C(gC)
        tAsA, tAgA = cpasync.tma_partition(
            tma_a, coord_vmnk[2], cute.make_layout(cute.slice_(vmnk, (0, 0, None, 0)).shape),
            cute.group_modes(sA, 0, 3), cute.group_modes(tCgA, 0, 3))
        tBsB, tBgB = cpasync.tma_partition(
            tma_b, coord_vmnk[1], cute.make_layout(cute.slice_(vmnk, (0, None, 0, 0)).shape),
            cute.group_modes(sB, 0, 3), cute.group_modes(tCgB, 0, 3))
        tCrA, tCrB = tiled_mma.make_fragment_A(sA), tiled_mma.make_fragment_B(sB)
        acc_shape = tiled_mma.partition_shape_C(self.mma_tiler[:2])
        tCtAcc_fake = tiled_mma.make_fragment_C(cute.append(acc_shape, ACC_STAGES))
        tmem_cols = utils.get_num_tmem_alloc_cols(tCtAcc_fake)

        pipeline.pipeline_init_wait(cluster_shape_mn=vmnk)
        grid_dim = cute.arch.grid_dim()

        if warp == TMA_WARP:
            sched = utils.StaticPersistentTileScheduler.create(sched_params, (bidx, bidy, bidz), grid_dim)
            work = sched.initial_work_tile_info()
            prod = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, AB_STAGES)
            while work.is_valid_tile:
                t = work.tile_idx
                m, n, l = t[0] // v, t[1], t[2]
                tAgA_t = tAgA[(None, m, None, l)]
                tBgB_t = tBgB[(None, n, None, l)]
                for kt in cutlass.range(k_tiles, unroll=1):
                    ab.producer_acquire(prod)
                    cute.copy(tma_a, tAgA_t[(None, kt)], tAsA[(None, prod.index)],
                              tma_bar_ptr=ab.producer_get_barrier(prod))
                    cute.copy(tma_b, tBgB_t[(None, kt)], tBsB[(None, prod.index)],
                              tma_bar_ptr=ab.producer_get_barrier(prod))
                    prod.advance()
                sched.advance_to_next_work()
                work = sched.get_current_work()
            ab.producer_tail(prod)

        if warp == MMA_WARP:
            cute.arch.alloc_tmem(tmem_cols, st.tmem_holder.ptr, is_two_cta=self.use_2cta_instrs)
            cute.arch.relinquish_tmem_alloc_permit(is_two_cta=self.use_2cta_instrs)
            cute.arch.barrier(barrier_id=2, number_of_threads=32 * (1 + len(EPI_WARPS)))
            tmem = cute.arch.retrieve_tmem_ptr(self.acc_dtype, 16, st.tmem_holder.ptr)
            tCtAcc = cute.make_tensor(tmem, tCtAcc_fake.layout)
            sched = utils.StaticPersistentTileScheduler.create(sched_params, (bidx, bidy, bidz), grid_dim)
            work = sched.initial_work_tile_info()
            cons = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, AB_STAGES)
            accp = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, ACC_STAGES)
            while work.is_valid_tile:
                acc_t = tCtAcc[(None, None, None, accp.index)]
                if is_leader:
                    acc.producer_acquire(accp)
                tiled_mma.set(tcgen05.Field.ACCUMULATE, False)
                for kt in cutlass.range(k_tiles, unroll=1):
                    if is_leader:
                        ab.consumer_wait(cons)
                        for kb in cutlass.range(cute.size(tCrA, mode=[2]), unroll_full=True):
                            cute.gemm(tiled_mma, acc_t, tCrA[(None, None, kb, cons.index)],
                                      tCrB[(None, None, kb, cons.index)], acc_t)
                            tiled_mma.set(tcgen05.Field.ACCUMULATE, True)
                        ab.consumer_release(cons)
                    cons.advance()
                if is_leader:
                    acc.producer_commit(accp)
                accp.advance()
                sched.advance_to_next_work()
                work = sched.get_current_work()
            acc.producer_tail(accp)
            cute.arch.barrier(barrier_id=3, number_of_threads=32 * (1 + len(EPI_WARPS)))
            if self.use_2cta_instrs:
                cute.arch.cluster_arrive()
                cute.arch.cluster_wait()
            cute.arch.dealloc_tmem(tmem, tmem_cols, is_two_cta=self.use_2cta_instrs)

        if warp < MMA_WARP:
            cute.arch.barrier(barrier_id=2, number_of_threads=32 * (1 + len(EPI_WARPS)))
            tmem = cute.arch.retrieve_tmem_ptr(self.acc_dtype, 16, st.tmem_holder.ptr)
            tCtAcc = cute.make_tensor(tmem, tCtAcc_fake.layout)
            sched = utils.StaticPersistentTileScheduler.create(sched_params, (bidx, bidy, bidz), grid_dim)
            work = sched.initial_work_tile_info()
            accc = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, ACC_STAGES)
            while work.is_valid_tile:
                t = work.tile_idx
                accc = epilogue_tma_store(self, tidx, warp, tma_c, tCtAcc, sC, tCgC, epi_tile,
                                          sched.num_tiles_executed, lambda x: x,
                                          (t[0] // v, t[1], t[2]), accc, acc, c_pipe)
                sched.advance_to_next_work()
                work = sched.get_current_work()
            c_pipe.producer_tail()
            if self.use_2cta_instrs:
                cute.arch.cluster_arrive()
                cute.arch.cluster_wait()
            cute.arch.barrier(barrier_id=3, number_of_threads=32 * (1 + len(EPI_WARPS)))


def compile_variant(cta_group):
    from cutlass.cute.runtime import make_fake_compact_tensor

    m = n = k = 4096
    # (rows, cols, batch), cols contiguous: K-major A and B, row-major C.
    a = make_fake_compact_tensor(cutlass.BFloat16, (m, k, 1), stride_order=(1, 0, 2),
                                 assumed_align=16)
    b = make_fake_compact_tensor(cutlass.BFloat16, (n, k, 1), stride_order=(1, 0, 2),
                                 assumed_align=16)
    c = make_fake_compact_tensor(cutlass.BFloat16, (m, n, 1), stride_order=(1, 0, 2),
                                 assumed_align=16)
    cute.compile(Gemm(cta_group), a, b, c, 148 // cta_group)


def main(out, variant=None):
    out = os.path.abspath(out)
    os.makedirs(out, exist_ok=True)
    if variant is None:
        for g in ("1", "2"):
            dump = os.path.join(out, f"_dump_cta{g}")
            env = dict(os.environ, CUTE_DSL_ARCH="sm_100a", CUTE_DSL_KEEP="ptx",
                       CUTE_DSL_DUMP_DIR=dump)
            subprocess.run([sys.executable, __file__, out, g], env=env, check=True)
        return
    dump = os.environ["CUTE_DSL_DUMP_DIR"]
    shutil.rmtree(dump, ignore_errors=True)
    os.makedirs(dump)
    compile_variant(int(variant))
    ptx = [os.path.join(d, f) for d, _, fs in os.walk(dump) for f in fs if f.endswith(".ptx")]
    assert len(ptx) == 1, ptx
    shutil.move(ptx[0], os.path.join(out, f"cute_bw_gemm_cta{variant}.ptx"))
    shutil.rmtree(dump, ignore_errors=True)
    print("wrote", os.path.join(out, f"cute_bw_gemm_cta{variant}.ptx"), flush=True)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "parity-out/bw-gemm",
         sys.argv[2] if len(sys.argv) > 2 else None)
