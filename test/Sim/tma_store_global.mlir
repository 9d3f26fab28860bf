// RUN: %python -m pipeline_mlir.sim %s --grid 2 --kernel tma_waited --tensor-map 1=4:32x4:32x1@0 --schedules 20 | FileCheck %s --check-prefix=CLEAN
// RUN: not %python -m pipeline_mlir.sim %s --grid 2 --kernel tma_read_only --tensor-map 1=4:32x4:32x1@0 --schedules 5 | FileCheck %s --check-prefix=READ
// RUN: %python -m pipeline_mlir.sim %s --grid 2 --kernel tma_read_only --schedules 5 | FileCheck %s --check-prefix=NOMAP
// RUN: not %python -m pipeline_mlir.sim %s --grid 2 --kernel tma_read_only --tensor-map 1=4:32x4 2>&1 | FileCheck %s --check-prefix=USAGE

// A TMA tensor store from shared to global memory handed to another CTA by
// a flag (sim/gmem.py): CTA 0 writes a word per lane into shared memory,
// fences the proxy, TMA-stores the box at (0, 1) through `desc`, commits,
// waits for the group, fences (membar.gl) and bumps the flag; CTA 1
// (another cluster: --grid 2) polls the flag, fences and reads row 1 of
// the tensor. --tensor-map says where the box lands: a 32 x 4 tensor of
// 4-byte elements in `ws` (argument 0), boxes of 32 x 1 (row 1: bytes 128
// to 255). With the wait's .read form only (the store has read shared
// memory, its bytes need not have landed) the read races with the store;
// without the map the store is not followed.

// CLEAN: pipeline-sim: OK: 20 schedules, 0 deadlocks (@tma_waited, 2 CTA(s) (2 clusters of 1) x 1 warp(s); random, seed 0)
// READ: pipeline-sim: race on global memory: warp 0 of CTA 1 reads `ws` (argument 0) byte 128 (llvm.load at {{.*}}tma_store_global.mlir:[[LOAD:[0-9]+]]:{{[0-9]+}}) written by warp 0 of CTA 0 (nvvm.cp.async.bulk.tensor.global.shared.cta at {{.*}}tma_store_global.mlir:[[STORE:[0-9]+]]:{{[0-9]+}}) with nothing ordering the two: the read may see the stale value; no cp.async.bulk.wait_group (without .read) of warp 0 of CTA 0 retired that TMA store before the release: its bytes may not have landed (.read only waits until the copy has read shared memory)
// READ-NEXT: pipeline-sim: note: warp 0 of CTA 1 at {{.*}}tma_store_global.mlir:[[LOAD]]
// READ-NEXT: pipeline-sim: note: warp 0 of CTA 0 at {{.*}}tma_store_global.mlir:[[STORE]]
// READ: pipeline-sim: FAILED: 5 schedules, 5 gmem-race (@tma_read_only, 2 CTA(s) (2 clusters of 1) x 1 warp(s); random, seed 0)
// NOMAP: pipeline-sim: OK: 5 schedules, 0 deadlocks (@tma_read_only, 2 CTA(s) (2 clusters of 1) x 1 warp(s); random, seed 0)
// USAGE: error: argument --tensor-map: expected POS=ELEM:DIMS:BOX[:STRIDES][@ARG[+OFFSET]] (e.g. 3=4:128x200:32x64@7), got '1=4:32x4'

module attributes {gpu.container_module} {
  gpu.module @kernels [#nvvm.target<chip = "sm_90a">] {
    llvm.mlir.global external @__pipeline_dynamic_smem() {addr_space = 3 : i32, alignment = 1024 : i64} : !llvm.array<0 x i8>

    gpu.func @tma_waited(%ws: !llvm.ptr<1> {pipeline.name = "ws"}, %desc: !llvm.ptr {pipeline.name = "desc"}, %flag: !llvm.ptr<1> {pipeline.name = "flag"}) kernel attributes {known_block_size = array<i32: 32, 1, 1>} {
      %smem = llvm.mlir.addressof @__pipeline_dynamic_smem : !llvm.ptr<3>
      %c16 = arith.constant 16 : i32
      %buf = llvm.getelementptr %smem[%c16] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
      %unused = pipeline.create storage(%smem : !llvm.ptr<3>) {name = "unused"} : <async, stages = 1, producer = <thread, 32>, consumer = <thread, 32>>
      %cta = nvvm.read.ptx.sreg.ctaid.x : i32
      %lane = nvvm.read.ptx.sreg.laneid : i32
      %c0 = arith.constant 0 : i32
      %c1 = arith.constant 1 : i32
      %c32 = arith.constant 32 : i32
      %all = arith.constant -1 : i32
      %first = arith.cmpi eq, %cta, %c0 : i32
      scf.if %first {
        %word = llvm.getelementptr %buf[%lane] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i32
        llvm.store %lane, %word : i32, !llvm.ptr<3>
        nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
        nvvm.bar.warp.sync %all : i32
        %lane0 = arith.cmpi eq, %lane, %c0 : i32
        scf.if %lane0 {
          nvvm.cp.async.bulk.tensor.global.shared.cta %desc, %buf, box[%c0, %c1] : !llvm.ptr, <3>
          nvvm.cp.async.bulk.commit.group
          nvvm.cp.async.bulk.wait_group 0
          nvvm.memory.barrier <gpu>
          %old = llvm.atomicrmw add %flag, %c1 syncscope("device") monotonic : !llvm.ptr<1>, i32
        }
      }
      %second = arith.cmpi eq, %cta, %c1 : i32
      scf.if %second {
        scf.while : () -> () {
          %seen = llvm.load %flag atomic syncscope("device") monotonic {alignment = 4 : i64} : !llvm.ptr<1> -> i32
          %waiting = arith.cmpi ne, %seen, %c1 : i32
          %any = nvvm.vote.sync any %all, %waiting -> i1
          scf.condition(%any)
        } do {
          scf.yield
        }
        nvvm.memory.barrier <gpu>
        %i = arith.addi %lane, %c32 : i32
        %slot = llvm.getelementptr %ws[%i] : (!llvm.ptr<1>, i32) -> !llvm.ptr<1>, i32
        %partial = llvm.load %slot : !llvm.ptr<1> -> i32
      }
      gpu.return
    }

    gpu.func @tma_read_only(%ws: !llvm.ptr<1> {pipeline.name = "ws"}, %desc: !llvm.ptr {pipeline.name = "desc"}, %flag: !llvm.ptr<1> {pipeline.name = "flag"}) kernel attributes {known_block_size = array<i32: 32, 1, 1>} {
      %smem = llvm.mlir.addressof @__pipeline_dynamic_smem : !llvm.ptr<3>
      %c16 = arith.constant 16 : i32
      %buf = llvm.getelementptr %smem[%c16] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
      %unused = pipeline.create storage(%smem : !llvm.ptr<3>) {name = "unused"} : <async, stages = 1, producer = <thread, 32>, consumer = <thread, 32>>
      %cta = nvvm.read.ptx.sreg.ctaid.x : i32
      %lane = nvvm.read.ptx.sreg.laneid : i32
      %c0 = arith.constant 0 : i32
      %c1 = arith.constant 1 : i32
      %c32 = arith.constant 32 : i32
      %all = arith.constant -1 : i32
      %first = arith.cmpi eq, %cta, %c0 : i32
      scf.if %first {
        %word = llvm.getelementptr %buf[%lane] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i32
        llvm.store %lane, %word : i32, !llvm.ptr<3>
        nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
        nvvm.bar.warp.sync %all : i32
        %lane0 = arith.cmpi eq, %lane, %c0 : i32
        scf.if %lane0 {
          nvvm.cp.async.bulk.tensor.global.shared.cta %desc, %buf, box[%c0, %c1] : !llvm.ptr, <3>
          nvvm.cp.async.bulk.commit.group
          nvvm.cp.async.bulk.wait_group 0 {read}
          nvvm.memory.barrier <gpu>
          %old = llvm.atomicrmw add %flag, %c1 syncscope("device") monotonic : !llvm.ptr<1>, i32
        }
      }
      %second = arith.cmpi eq, %cta, %c1 : i32
      scf.if %second {
        scf.while : () -> () {
          %seen = llvm.load %flag atomic syncscope("device") monotonic {alignment = 4 : i64} : !llvm.ptr<1> -> i32
          %waiting = arith.cmpi ne, %seen, %c1 : i32
          %any = nvvm.vote.sync any %all, %waiting -> i1
          scf.condition(%any)
        } do {
          scf.yield
        }
        nvvm.memory.barrier <gpu>
        %i = arith.addi %lane, %c32 : i32
        %slot = llvm.getelementptr %ws[%i] : (!llvm.ptr<1>, i32) -> !llvm.ptr<1>, i32
        %partial = llvm.load %slot : !llvm.ptr<1> -> i32
      }
      gpu.return
    }
  }
}
