// RUN: %python -m pipeline_mlir.sim %s --cluster 2 --kernel handed_over --schedules 20 | FileCheck %s --check-prefix=CLEAN
// RUN: not %python -m pipeline_mlir.sim %s --cluster 2 --kernel no_cluster_barrier --schedules 5 | FileCheck %s --check-prefix=RACE
// RUN: %python -m pipeline_mlir.sim %s --cluster 2 --kernel st_async_waited --schedules 20 | FileCheck %s --check-prefix=ASYNC
// RUN: not %python -m pipeline_mlir.sim %s --cluster 2 --kernel st_async_unwaited --schedules 5 | FileCheck %s --check-prefix=UNWAITED

// Distributed shared memory (sim/smemrace.py): in a cluster of two CTAs,
// CTA 0 stores a word per lane into CTA 1's buffer through a mapa address
// (st.shared::cluster) and both meet at the cluster barrier; then CTA 1
// reads its buffer. Without the cluster barrier the read races with the
// store.

// CLEAN: pipeline-sim: OK: 20 schedules, 0 deadlocks (@handed_over, 2 CTA(s) x 1 warp(s); random, seed 0)
// RACE: pipeline-sim: race on plain shared memory: warp {{[01]}} of CTA {{[01]}} {{reads|writes}} shared memory at byte 16 of CTA 1 with llvm.{{load|store}} at {{.*}}dsmem.mlir:{{[0-9]+}}:{{[0-9]+}} while nothing orders it after the {{write|read \(its end\)}} by warp 0 of CTA {{[01]}}'s llvm.{{load|store}} at {{.*}}dsmem.mlir:{{[0-9]+}}:{{[0-9]+}}
// RACE: pipeline-sim: FAILED: 5 schedules, 5 smem-race (@no_cluster_barrier, 2 CTA(s) x 1 warp(s); random, seed 0)

// st.async (sim/rawbar.py): each CTA initializes an mbarrier by hand and
// both meet at the cluster barrier; CTA 1 arms its barrier for 4 bytes,
// CTA 0 sends a word into CTA 1's buffer with st.async completing on that
// barrier, and CTA 1 waits for phase 0 and reads the word. Without the
// wait the read races with the st.async.

// ASYNC: pipeline-sim: OK: 20 schedules, 0 deadlocks (@st_async_waited, 2 CTA(s) x 1 warp(s); random, seed 0)
// UNWAITED: pipeline-sim: race on plain shared memory: warp {{[01]}} of CTA {{[01]}} {{reads|writes}} shared memory at byte 16 of CTA 1 with {{llvm.load|st.async}} at {{.*}}dsmem.mlir:{{[0-9]+}}:{{[0-9]+}} while nothing orders it after the {{write|read \(its end\)}} by warp 0 of CTA {{[01]}}'s {{llvm.load|st.async}} at {{.*}}dsmem.mlir:{{[0-9]+}}:{{[0-9]+}}
// UNWAITED: pipeline-sim: FAILED: 5 schedules, 5 smem-race (@st_async_unwaited, 2 CTA(s) x 1 warp(s); random, seed 0)

module attributes {gpu.container_module} {
  gpu.module @kernels [#nvvm.target<chip = "sm_90a">] {
    llvm.mlir.global external @__pipeline_dynamic_smem() {addr_space = 3 : i32, alignment = 1024 : i64} : !llvm.array<0 x i8>

    gpu.func @handed_over(%out: !llvm.ptr<1> {pipeline.name = "out"}) kernel attributes {known_block_size = array<i32: 32, 1, 1>, known_cluster_size = array<i32: 2, 1, 1>} {
      %smem = llvm.mlir.addressof @__pipeline_dynamic_smem : !llvm.ptr<3>
      %c16 = arith.constant 16 : i32
      %buf = llvm.getelementptr %smem[%c16] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
      %unused = pipeline.create storage(%smem : !llvm.ptr<3>) {name = "unused"} : <async, stages = 1, producer = <thread, 32>, consumer = <thread, 32>>
      %rank = nvvm.read.ptx.sreg.cluster.ctarank : i32
      %lane = nvvm.read.ptx.sreg.laneid : i32
      %c0 = arith.constant 0 : i32
      %c1 = arith.constant 1 : i32
      %first = arith.cmpi eq, %rank, %c0 : i32
      scf.if %first {
        %peer = nvvm.mapa %buf, %c1 : !llvm.ptr<3> -> !llvm.ptr<7>
        %word = llvm.getelementptr %peer[%lane] : (!llvm.ptr<7>, i32) -> !llvm.ptr<7>, i32
        llvm.store %lane, %word : i32, !llvm.ptr<7>
        nvvm.cluster.arrive
        nvvm.cluster.wait
      }
      %second = arith.cmpi eq, %rank, %c1 : i32
      scf.if %second {
        nvvm.cluster.arrive
        nvvm.cluster.wait
        %mine = llvm.getelementptr %buf[%lane] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i32
        %v = llvm.load %mine : !llvm.ptr<3> -> i32
        %slot = llvm.getelementptr %out[%lane] : (!llvm.ptr<1>, i32) -> !llvm.ptr<1>, i32
        llvm.store %v, %slot : i32, !llvm.ptr<1>
      }
      gpu.return
    }

    gpu.func @no_cluster_barrier(%out: !llvm.ptr<1> {pipeline.name = "out"}) kernel attributes {known_block_size = array<i32: 32, 1, 1>, known_cluster_size = array<i32: 2, 1, 1>} {
      %smem = llvm.mlir.addressof @__pipeline_dynamic_smem : !llvm.ptr<3>
      %c16 = arith.constant 16 : i32
      %buf = llvm.getelementptr %smem[%c16] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
      %unused = pipeline.create storage(%smem : !llvm.ptr<3>) {name = "unused"} : <async, stages = 1, producer = <thread, 32>, consumer = <thread, 32>>
      %rank = nvvm.read.ptx.sreg.cluster.ctarank : i32
      %lane = nvvm.read.ptx.sreg.laneid : i32
      %c0 = arith.constant 0 : i32
      %c1 = arith.constant 1 : i32
      %first = arith.cmpi eq, %rank, %c0 : i32
      scf.if %first {
        %peer = nvvm.mapa %buf, %c1 : !llvm.ptr<3> -> !llvm.ptr<7>
        %word = llvm.getelementptr %peer[%lane] : (!llvm.ptr<7>, i32) -> !llvm.ptr<7>, i32
        llvm.store %lane, %word : i32, !llvm.ptr<7>
      }
      %second = arith.cmpi eq, %rank, %c1 : i32
      scf.if %second {
        %mine = llvm.getelementptr %buf[%lane] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i32
        %v = llvm.load %mine : !llvm.ptr<3> -> i32
        %slot = llvm.getelementptr %out[%lane] : (!llvm.ptr<1>, i32) -> !llvm.ptr<1>, i32
        llvm.store %v, %slot : i32, !llvm.ptr<1>
      }
      gpu.return
    }

    gpu.func @st_async_waited(%out: !llvm.ptr<1> {pipeline.name = "out"}) kernel attributes {known_block_size = array<i32: 32, 1, 1>, known_cluster_size = array<i32: 2, 1, 1>} {
      %smem = llvm.mlir.addressof @__pipeline_dynamic_smem : !llvm.ptr<3>
      %c0 = arith.constant 0 : i32
      %c1 = arith.constant 1 : i32
      %c4 = arith.constant 4 : i32
      %c16 = arith.constant 16 : i32
      %ticks = arith.constant 1000000 : i32
      %c160 = arith.constant 160 : i32
      %xbar = llvm.getelementptr %smem[%c160] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
      %buf = llvm.getelementptr %smem[%c16] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
      %unused = pipeline.create storage(%smem : !llvm.ptr<3>) {name = "unused"} : <async, stages = 1, producer = <thread, 32>, consumer = <thread, 32>>
      %rank = nvvm.read.ptx.sreg.cluster.ctarank : i32
      %lane = nvvm.read.ptx.sreg.laneid : i32
      %lane0 = arith.cmpi eq, %lane, %c0 : i32
      scf.if %lane0 {
        nvvm.mbarrier.init %xbar, %c1 : !llvm.ptr<3>, i32
      }
      nvvm.fence.mbarrier.init
      nvvm.cluster.arrive
      nvvm.cluster.wait
      %first = arith.cmpi eq, %rank, %c0 : i32
      scf.if %first {
        scf.if %lane0 {
          %peer = nvvm.mapa %buf, %c1 : !llvm.ptr<3> -> !llvm.ptr<7>
          %peer_i = llvm.ptrtoint %peer : !llvm.ptr<7> to i32
          %bar = nvvm.mapa %xbar, %c1 : !llvm.ptr<3> -> !llvm.ptr<7>
          %bar_i = llvm.ptrtoint %bar : !llvm.ptr<7> to i32
          %v = arith.constant 1.0 : f32
          llvm.inline_asm has_side_effects "st.async.shared::cluster.mbarrier::complete_tx::bytes.f32 [$0], $2, [$1];", "r,r,f" %peer_i, %bar_i, %v : (i32, i32, f32) -> ()
        }
      }
      %second = arith.cmpi eq, %rank, %c1 : i32
      scf.if %second {
        scf.if %lane0 {
          %state = nvvm.mbarrier.arrive.expect_tx %xbar, %c4 : !llvm.ptr<3>, i32 -> i64
        }
        nvvm.mbarrier.try_wait.parity %xbar, %c0, %ticks : !llvm.ptr<3>, i32, i32
        %word = llvm.load %buf : !llvm.ptr<3> -> i32
        %slot = llvm.getelementptr %out[%lane] : (!llvm.ptr<1>, i32) -> !llvm.ptr<1>, i32
        llvm.store %word, %slot : i32, !llvm.ptr<1>
      }
      nvvm.cluster.arrive
      nvvm.cluster.wait
      gpu.return
    }

    gpu.func @st_async_unwaited(%out: !llvm.ptr<1> {pipeline.name = "out"}) kernel attributes {known_block_size = array<i32: 32, 1, 1>, known_cluster_size = array<i32: 2, 1, 1>} {
      %smem = llvm.mlir.addressof @__pipeline_dynamic_smem : !llvm.ptr<3>
      %c0 = arith.constant 0 : i32
      %c1 = arith.constant 1 : i32
      %c4 = arith.constant 4 : i32
      %c16 = arith.constant 16 : i32
      %ticks = arith.constant 1000000 : i32
      %c160 = arith.constant 160 : i32
      %xbar = llvm.getelementptr %smem[%c160] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
      %buf = llvm.getelementptr %smem[%c16] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
      %unused = pipeline.create storage(%smem : !llvm.ptr<3>) {name = "unused"} : <async, stages = 1, producer = <thread, 32>, consumer = <thread, 32>>
      %rank = nvvm.read.ptx.sreg.cluster.ctarank : i32
      %lane = nvvm.read.ptx.sreg.laneid : i32
      %lane0 = arith.cmpi eq, %lane, %c0 : i32
      scf.if %lane0 {
        nvvm.mbarrier.init %xbar, %c1 : !llvm.ptr<3>, i32
      }
      nvvm.fence.mbarrier.init
      nvvm.cluster.arrive
      nvvm.cluster.wait
      %first = arith.cmpi eq, %rank, %c0 : i32
      scf.if %first {
        scf.if %lane0 {
          %peer = nvvm.mapa %buf, %c1 : !llvm.ptr<3> -> !llvm.ptr<7>
          %peer_i = llvm.ptrtoint %peer : !llvm.ptr<7> to i32
          %bar = nvvm.mapa %xbar, %c1 : !llvm.ptr<3> -> !llvm.ptr<7>
          %bar_i = llvm.ptrtoint %bar : !llvm.ptr<7> to i32
          %v = arith.constant 1.0 : f32
          llvm.inline_asm has_side_effects "st.async.shared::cluster.mbarrier::complete_tx::bytes.f32 [$0], $2, [$1];", "r,r,f" %peer_i, %bar_i, %v : (i32, i32, f32) -> ()
        }
      }
      %second = arith.cmpi eq, %rank, %c1 : i32
      scf.if %second {
        scf.if %lane0 {
          %state = nvvm.mbarrier.arrive.expect_tx %xbar, %c4 : !llvm.ptr<3>, i32 -> i64
        }
        %word = llvm.load %buf : !llvm.ptr<3> -> i32
        %slot = llvm.getelementptr %out[%lane] : (!llvm.ptr<1>, i32) -> !llvm.ptr<1>, i32
        llvm.store %word, %slot : i32, !llvm.ptr<1>
      }
      nvvm.cluster.arrive
      nvvm.cluster.wait
      gpu.return
    }
  }
}
