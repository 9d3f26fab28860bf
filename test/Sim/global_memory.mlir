// RUN: %python -m pipeline_mlir.sim %s --cluster 2 --kernel handoff --schedules 20 | FileCheck %s --check-prefix=OK
// RUN: not %python -m pipeline_mlir.sim %s --cluster 2 --kernel flag_before_fence --schedules 5 | FileCheck %s --check-prefix=FENCE
// RUN: not %python -m pipeline_mlir.sim %s --cluster 2 --kernel poll_no_acquire --schedules 5 | FileCheck %s --check-prefix=ACQUIRE
// RUN: not %python -m pipeline_mlir.sim %s --cluster 2 --kernel wrong_count --schedules 5 | FileCheck %s --check-prefix=COUNT

// Global memory the kernel writes and reads back (sim/gmem.py). CTA 0
// stores a partial (a word per lane), fences (membar.gl) and bumps a flag
// (relaxed atomic add, lane 0); CTA 1 polls the flag (a relaxed load in
// every lane, vote.sync.any), fences and reads the partial. The three
// planted mistakes: the fence after the flag instead of before it, no
// fence after the poll, and a poll for a count nobody reaches.

// OK: pipeline-sim: OK: 20 schedules, 0 deadlocks (@handoff, 2 CTA(s) x 1 warp(s); random, seed 0)
// FENCE: pipeline-sim: race on global memory: warp 0 of CTA 1 reads `ws` (argument 0) byte 0 (llvm.load at {{.*}}global_memory.mlir:[[LOAD:[0-9]+]]:{{[0-9]+}}) written by warp 0 of CTA 0 (llvm.store at {{.*}}global_memory.mlir:[[STORE:[0-9]+]]:{{[0-9]+}}) with nothing ordering the two: the read may see the stale value; warp 0 of CTA 0 set `flag` (argument 1) byte 0 (llvm.atomicrmw at {{.*}}global_memory.mlir:{{[0-9]+}}:{{[0-9]+}}) after this write with no fence between them (nor release order): the flag is set before the write is fenced
// FENCE-NEXT: pipeline-sim: note: warp 0 of CTA 1 at {{.*}}global_memory.mlir:[[LOAD]]
// FENCE-NEXT: pipeline-sim: note: warp 0 of CTA 0 at {{.*}}global_memory.mlir:[[STORE]]
// ACQUIRE: pipeline-sim: race on global memory: warp 0 of CTA 1 reads `ws` (argument 0) byte 0 {{.*}}: the poll has no acquire
// COUNT: pipeline-sim: deadlock: root cause: the poll loop at {{.*}}global_memory.mlir:{{[0-9]+}}:{{[0-9]+}} never sees the value it waits for: warp 0 of CTA 1 reads `flag` (argument 1) byte 0, which no warp still running writes again

module attributes {gpu.container_module} {
  gpu.module @kernels [#nvvm.target<chip = "sm_90a">] {
    llvm.mlir.global external @__pipeline_dynamic_smem() {addr_space = 3 : i32, alignment = 1024 : i64} : !llvm.array<0 x i8>

    gpu.func @handoff(%ws: !llvm.ptr<1> {pipeline.name = "ws"}, %flag: !llvm.ptr<1> {pipeline.name = "flag"}) kernel attributes {known_block_size = array<i32: 32, 1, 1>} {
      %smem = llvm.mlir.addressof @__pipeline_dynamic_smem : !llvm.ptr<3>
      %unused = pipeline.create storage(%smem : !llvm.ptr<3>) {name = "unused"} : <async, stages = 1, producer = <thread, 32>, consumer = <thread, 32>>
      %cta = nvvm.read.ptx.sreg.ctaid.x : i32
      %lane = nvvm.read.ptx.sreg.laneid : i32
      %c0 = arith.constant 0 : i32
      %c1 = arith.constant 1 : i32
      %all = arith.constant -1 : i32
      %count = arith.constant 1 : i32
      %first = arith.cmpi eq, %cta, %c0 : i32
      scf.if %first {
        %slot = llvm.getelementptr %ws[%lane] : (!llvm.ptr<1>, i32) -> !llvm.ptr<1>, i32
        llvm.store %lane, %slot : i32, !llvm.ptr<1>
        nvvm.bar.warp.sync %all : i32
        nvvm.memory.barrier <gpu>
        %lane0 = arith.cmpi eq, %lane, %c0 : i32
        scf.if %lane0 {
          %old = llvm.atomicrmw add %flag, %c1 syncscope("device") monotonic : !llvm.ptr<1>, i32
        }
      }
      %second = arith.cmpi eq, %cta, %c1 : i32
      scf.if %second {
      scf.while : () -> () {
        %seen = llvm.load %flag atomic syncscope("device") monotonic {alignment = 4 : i64} : !llvm.ptr<1> -> i32
        %waiting = arith.cmpi ne, %seen, %count : i32
        %any = nvvm.vote.sync any %all, %waiting -> i1
        scf.condition(%any)
      } do {
        scf.yield
      }
      nvvm.memory.barrier <gpu>
      %slot = llvm.getelementptr %ws[%lane] : (!llvm.ptr<1>, i32) -> !llvm.ptr<1>, i32
      %partial = llvm.load %slot : !llvm.ptr<1> -> i32
      }
      gpu.return
    }

    gpu.func @flag_before_fence(%ws: !llvm.ptr<1> {pipeline.name = "ws"}, %flag: !llvm.ptr<1> {pipeline.name = "flag"}) kernel attributes {known_block_size = array<i32: 32, 1, 1>} {
      %smem = llvm.mlir.addressof @__pipeline_dynamic_smem : !llvm.ptr<3>
      %unused = pipeline.create storage(%smem : !llvm.ptr<3>) {name = "unused"} : <async, stages = 1, producer = <thread, 32>, consumer = <thread, 32>>
      %cta = nvvm.read.ptx.sreg.ctaid.x : i32
      %lane = nvvm.read.ptx.sreg.laneid : i32
      %c0 = arith.constant 0 : i32
      %c1 = arith.constant 1 : i32
      %all = arith.constant -1 : i32
      %count = arith.constant 1 : i32
      %first = arith.cmpi eq, %cta, %c0 : i32
      scf.if %first {
        %slot = llvm.getelementptr %ws[%lane] : (!llvm.ptr<1>, i32) -> !llvm.ptr<1>, i32
        llvm.store %lane, %slot : i32, !llvm.ptr<1>
        nvvm.bar.warp.sync %all : i32
        %lane0 = arith.cmpi eq, %lane, %c0 : i32
        scf.if %lane0 {
          %old = llvm.atomicrmw add %flag, %c1 syncscope("device") monotonic : !llvm.ptr<1>, i32
        }
        nvvm.memory.barrier <gpu>
      }
      %second = arith.cmpi eq, %cta, %c1 : i32
      scf.if %second {
      scf.while : () -> () {
        %seen = llvm.load %flag atomic syncscope("device") monotonic {alignment = 4 : i64} : !llvm.ptr<1> -> i32
        %waiting = arith.cmpi ne, %seen, %count : i32
        %any = nvvm.vote.sync any %all, %waiting -> i1
        scf.condition(%any)
      } do {
        scf.yield
      }
      nvvm.memory.barrier <gpu>
      %slot = llvm.getelementptr %ws[%lane] : (!llvm.ptr<1>, i32) -> !llvm.ptr<1>, i32
      %partial = llvm.load %slot : !llvm.ptr<1> -> i32
      }
      gpu.return
    }

    gpu.func @poll_no_acquire(%ws: !llvm.ptr<1> {pipeline.name = "ws"}, %flag: !llvm.ptr<1> {pipeline.name = "flag"}) kernel attributes {known_block_size = array<i32: 32, 1, 1>} {
      %smem = llvm.mlir.addressof @__pipeline_dynamic_smem : !llvm.ptr<3>
      %unused = pipeline.create storage(%smem : !llvm.ptr<3>) {name = "unused"} : <async, stages = 1, producer = <thread, 32>, consumer = <thread, 32>>
      %cta = nvvm.read.ptx.sreg.ctaid.x : i32
      %lane = nvvm.read.ptx.sreg.laneid : i32
      %c0 = arith.constant 0 : i32
      %c1 = arith.constant 1 : i32
      %all = arith.constant -1 : i32
      %count = arith.constant 1 : i32
      %first = arith.cmpi eq, %cta, %c0 : i32
      scf.if %first {
        %slot = llvm.getelementptr %ws[%lane] : (!llvm.ptr<1>, i32) -> !llvm.ptr<1>, i32
        llvm.store %lane, %slot : i32, !llvm.ptr<1>
        nvvm.bar.warp.sync %all : i32
        nvvm.memory.barrier <gpu>
        %lane0 = arith.cmpi eq, %lane, %c0 : i32
        scf.if %lane0 {
          %old = llvm.atomicrmw add %flag, %c1 syncscope("device") monotonic : !llvm.ptr<1>, i32
        }
      }
      %second = arith.cmpi eq, %cta, %c1 : i32
      scf.if %second {
      scf.while : () -> () {
        %seen = llvm.load %flag atomic syncscope("device") monotonic {alignment = 4 : i64} : !llvm.ptr<1> -> i32
        %waiting = arith.cmpi ne, %seen, %count : i32
        %any = nvvm.vote.sync any %all, %waiting -> i1
        scf.condition(%any)
      } do {
        scf.yield
      }
      %slot = llvm.getelementptr %ws[%lane] : (!llvm.ptr<1>, i32) -> !llvm.ptr<1>, i32
      %partial = llvm.load %slot : !llvm.ptr<1> -> i32
      }
      gpu.return
    }

    gpu.func @wrong_count(%ws: !llvm.ptr<1> {pipeline.name = "ws"}, %flag: !llvm.ptr<1> {pipeline.name = "flag"}) kernel attributes {known_block_size = array<i32: 32, 1, 1>} {
      %smem = llvm.mlir.addressof @__pipeline_dynamic_smem : !llvm.ptr<3>
      %unused = pipeline.create storage(%smem : !llvm.ptr<3>) {name = "unused"} : <async, stages = 1, producer = <thread, 32>, consumer = <thread, 32>>
      %cta = nvvm.read.ptx.sreg.ctaid.x : i32
      %lane = nvvm.read.ptx.sreg.laneid : i32
      %c0 = arith.constant 0 : i32
      %c1 = arith.constant 1 : i32
      %all = arith.constant -1 : i32
      %count = arith.constant 2 : i32
      %first = arith.cmpi eq, %cta, %c0 : i32
      scf.if %first {
        %slot = llvm.getelementptr %ws[%lane] : (!llvm.ptr<1>, i32) -> !llvm.ptr<1>, i32
        llvm.store %lane, %slot : i32, !llvm.ptr<1>
        nvvm.bar.warp.sync %all : i32
        nvvm.memory.barrier <gpu>
        %lane0 = arith.cmpi eq, %lane, %c0 : i32
        scf.if %lane0 {
          %old = llvm.atomicrmw add %flag, %c1 syncscope("device") monotonic : !llvm.ptr<1>, i32
        }
      }
      %second = arith.cmpi eq, %cta, %c1 : i32
      scf.if %second {
      scf.while : () -> () {
        %seen = llvm.load %flag atomic syncscope("device") monotonic {alignment = 4 : i64} : !llvm.ptr<1> -> i32
        %waiting = arith.cmpi ne, %seen, %count : i32
        %any = nvvm.vote.sync any %all, %waiting -> i1
        scf.condition(%any)
      } do {
        scf.yield
      }
      nvvm.memory.barrier <gpu>
      %slot = llvm.getelementptr %ws[%lane] : (!llvm.ptr<1>, i32) -> !llvm.ptr<1>, i32
      %partial = llvm.load %slot : !llvm.ptr<1> -> i32
      }
      gpu.return
    }
  }
}
