// RUN: %python -m pipeline_mlir.sim %s --cluster 2 --grid 4 --kernel own_cluster --schedules 20 | FileCheck %s --check-prefix=OWN
// RUN: not %python -m pipeline_mlir.sim %s --cluster 2 --grid 4 --kernel other_cluster --schedules 5 | FileCheck %s --check-prefix=OTHER
// RUN: %python -m pipeline_mlir.sim %S/global_memory.mlir --cluster 1 --grid 2 --kernel handoff --schedules 20 | FileCheck %s --check-prefix=FLAG
// RUN: not %python -m pipeline_mlir.sim %S/global_memory.mlir --cluster 1 --grid 2 --kernel flag_before_fence --schedules 5 --trace | FileCheck %s --check-prefix=TRACE
// RUN: not %python -m pipeline_mlir.sim %s --cluster 2 --grid 3 --kernel own_cluster 2>&1 | FileCheck %s --check-prefix=WHOLE
// RUN: not %python -m pipeline_mlir.sim %s --cluster 2 --grid 64 --kernel own_cluster 2>&1 | FileCheck %s --check-prefix=CAP

// A grid of several clusters (--grid: the CTAs of the launch, a whole
// number of clusters along each axis). Rank 0 of each cluster stores a
// partial (a word per lane) into slot %clusterid.x and fences (membar.gl);
// the cluster syncs (barrier.cluster arrive + wait); rank 1 reads the
// partial of its own cluster (clean), or of the other cluster: the cluster
// barrier orders the CTAs of its own cluster only, so that read is a race.
// A flag released and acquired at gpu scope hands a partial to another
// cluster (global_memory.mlir's @handoff on two clusters of one CTA).

// OWN: pipeline-sim: OK: 20 schedules, 0 deadlocks (@own_cluster, 4 CTA(s) (2 clusters of 2) x 1 warp(s); random, seed 0)
// OTHER: pipeline-sim: race on global memory: warp 0 of CTA 3 reads `ws` (argument 0) byte 0 (llvm.load at {{.*}}grid.mlir:[[LOAD:[0-9]+]]:{{[0-9]+}}) written by warp 0 of CTA 0 (llvm.store at {{.*}}grid.mlir:[[STORE:[0-9]+]]:{{[0-9]+}}) with nothing ordering the two: the read may see the stale value; CTA 0 runs in cluster 0 and CTA 3 in cluster 1: a cluster barrier, or a release or acquire of cluster scope, orders the CTAs of its own cluster only
// OTHER-NEXT: pipeline-sim: note: warp 0 of CTA 3 at {{.*}}grid.mlir:[[LOAD]]
// OTHER-NEXT: pipeline-sim: note: warp 0 of CTA 0 at {{.*}}grid.mlir:[[STORE]]
// OTHER: pipeline-sim: FAILED: 5 schedules, 5 gmem-race (@other_cluster, 4 CTA(s) (2 clusters of 2) x 1 warp(s); random, seed 0)
// FLAG: pipeline-sim: OK: 20 schedules, 0 deadlocks (@handoff, 2 CTA(s) (2 clusters of 1) x 1 warp(s); random, seed 0)
// --trace shows the values global reads return: the poll sees the flag at
// 0, the contributor's atomic add reads 0, the poll then sees 1.
// TRACE: warp 0 of CTA 1 read `flag` (argument 1) byte 0 = 0 (llvm.load at {{.*}}global_memory.mlir:[[POLL:[0-9]+]]:
// TRACE: warp 0 of CTA 0 read `flag` (argument 1) byte 0 = 0 (llvm.atomicrmw at {{.*}}global_memory.mlir:
// TRACE: warp 0 of CTA 1 read `flag` (argument 1) byte 0 = 1 (llvm.load at {{.*}}global_memory.mlir:[[POLL]]:
// TRACE: error: warp 0 of CTA 1 reads `ws` (argument 0) byte 0
// WHOLE: pipeline-sim: error: @own_cluster: Launch: grid (3, 1, 1) is not a whole number of clusters of (2, 1, 1) along every axis
// CAP: the simulator runs at most 32 CTAs (every warp of every CTA is an agent), got '64'

module attributes {gpu.container_module} {
  gpu.module @kernels [#nvvm.target<chip = "sm_90a">] {
    llvm.mlir.global external @__pipeline_dynamic_smem() {addr_space = 3 : i32, alignment = 1024 : i64} : !llvm.array<0 x i8>

    gpu.func @own_cluster(%ws: !llvm.ptr<1> {pipeline.name = "ws"}) kernel attributes {known_block_size = array<i32: 32, 1, 1>} {
      %smem = llvm.mlir.addressof @__pipeline_dynamic_smem : !llvm.ptr<3>
      %unused = pipeline.create storage(%smem : !llvm.ptr<3>) {name = "unused"} : <async, stages = 1, producer = <thread, 32>, consumer = <thread, 32>>
      %rank = nvvm.read.ptx.sreg.cluster.ctarank : i32
      %cid = nvvm.read.ptx.sreg.clusterid.x : i32
      %lane = nvvm.read.ptx.sreg.laneid : i32
      %c0 = arith.constant 0 : i32
      %c1 = arith.constant 1 : i32
      %c32 = arith.constant 32 : i32
      %base = arith.muli %cid, %c32 : i32
      %word = arith.addi %base, %lane : i32
      %first = arith.cmpi eq, %rank, %c0 : i32
      scf.if %first {
        %slot = llvm.getelementptr %ws[%word] : (!llvm.ptr<1>, i32) -> !llvm.ptr<1>, i32
        llvm.store %lane, %slot : i32, !llvm.ptr<1>
        nvvm.memory.barrier <gpu>
      }
      nvvm.cluster.arrive
      nvvm.cluster.wait
      %second = arith.cmpi eq, %rank, %c1 : i32
      scf.if %second {
        %slot = llvm.getelementptr %ws[%word] : (!llvm.ptr<1>, i32) -> !llvm.ptr<1>, i32
        %partial = llvm.load %slot : !llvm.ptr<1> -> i32
      }
      gpu.return
    }

    gpu.func @other_cluster(%ws: !llvm.ptr<1> {pipeline.name = "ws"}) kernel attributes {known_block_size = array<i32: 32, 1, 1>} {
      %smem = llvm.mlir.addressof @__pipeline_dynamic_smem : !llvm.ptr<3>
      %unused = pipeline.create storage(%smem : !llvm.ptr<3>) {name = "unused"} : <async, stages = 1, producer = <thread, 32>, consumer = <thread, 32>>
      %rank = nvvm.read.ptx.sreg.cluster.ctarank : i32
      %cid = nvvm.read.ptx.sreg.clusterid.x : i32
      %lane = nvvm.read.ptx.sreg.laneid : i32
      %c0 = arith.constant 0 : i32
      %c1 = arith.constant 1 : i32
      %c32 = arith.constant 32 : i32
      %base = arith.muli %cid, %c32 : i32
      %word = arith.addi %base, %lane : i32
      %first = arith.cmpi eq, %rank, %c0 : i32
      scf.if %first {
        %slot = llvm.getelementptr %ws[%word] : (!llvm.ptr<1>, i32) -> !llvm.ptr<1>, i32
        llvm.store %lane, %slot : i32, !llvm.ptr<1>
        nvvm.memory.barrier <gpu>
      }
      nvvm.cluster.arrive
      nvvm.cluster.wait
      %second = arith.cmpi eq, %rank, %c1 : i32
      scf.if %second {
        %other = arith.subi %c1, %cid : i32
        %obase = arith.muli %other, %c32 : i32
        %oword = arith.addi %obase, %lane : i32
        %slot = llvm.getelementptr %ws[%oword] : (!llvm.ptr<1>, i32) -> !llvm.ptr<1>, i32
        %partial = llvm.load %slot : !llvm.ptr<1> -> i32
      }
      gpu.return
    }
  }
}
