// Elect once: in a converged warp-role region (scf.if on a warp-uniform
// value, only uniform scf.if / scf.for around and inside it) the verbs share
// one nvvm.elect.sync at the start of the region; anywhere else each verb
// elects its own lane. Also: warp 0 of a 1-D block is tid.x / 32, and one
// fence.mbarrier_init covers a group of deferred creates.
// RUN: pipeline-opt %s --convert-pipeline-to-nvvm --split-input-file | FileCheck %s
// RUN: pipeline-opt %s --convert-pipeline-to-nvvm="elect-once=false" --split-input-file | FileCheck %s --check-prefix=OFF
// (No protocol checker for the PTX run: these are lowering fragments.)
// RUN: pipeline-opt %s --split-input-file --pipeline-to-cubin="chip=sm_90a format=isa verify-protocol=false" | %python %S/Inputs/ptx.py | FileCheck %s --check-prefix=PTX

!P = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>,
                        consumer = #pipeline.group<thread, 1>, tx_count = 1024>
!A = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 1>,
                        consumer = #pipeline.group<thread, 1>>
!PS = !pipeline.state<2, producer>
!CS = !pipeline.state<2, consumer>

// Role branches on the shfl-synced warp index, loops with uniform bounds
// (a kernel argument): each role elects once, before its loop.
// CHECK-LABEL: gpu.func @roles
// CHECK: nvvm.barrier0
// CHECK: nvvm.barrier0
// CHECK: %[[WARP:.*]] = nvvm.shfl.sync idx
// CHECK: %[[ISP:.*]] = arith.cmpi eq, %[[WARP]]
// CHECK: scf.if %[[ISP]] {
// CHECK-NEXT: %[[EP:.*]] = nvvm.elect.sync -> i1
// CHECK-NOT: nvvm.elect.sync
// CHECK: scf.for
// CHECK:   nvvm.mbarrier.try_wait.parity
// CHECK:   scf.if %[[EP]] {
// CHECK:     nvvm.mbarrier.arrive.expect_tx
// CHECK:   nvvm.mbarrier.try_wait.parity
// CHECK:   scf.if %[[EP]] {
// CHECK:     nvvm.mbarrier.arrive %{{.*}} : !llvm.ptr<3> -> i64
// CHECK: } else {
// CHECK-NEXT: %[[EC:.*]] = nvvm.elect.sync -> i1
// CHECK-NOT: nvvm.elect.sync
// CHECK: scf.for
// CHECK:   nvvm.mbarrier.try_wait.parity
// CHECK:   scf.if %[[EC]] {
// CHECK:     nvvm.mbarrier.arrive
// CHECK: gpu.return
// Without the option: one elect.sync per verb, inside the loops.
// OFF-LABEL: gpu.func @roles
// OFF: nvvm.barrier0
// OFF: nvvm.barrier0
// OFF-NOT: nvvm.elect.sync
// OFF: scf.for
// OFF: nvvm.elect.sync
// OFF: nvvm.elect.sync
// OFF: scf.for
// OFF: nvvm.elect.sync
// In the PTX, one elect.sync per role region plus one per create (4; 5 when
// each verb elects), none in the loops.
// PTX-LABEL: // gpu.binary @roles sm_90a
// PTX-COUNT-4: elect.sync
// PTX-NOT: elect.sync
// PTX-LABEL: // gpu.binary @lanes sm_90a
gpu.module @roles {
  gpu.func @roles(%n: i32, %smem: !llvm.ptr<3>, %smem2: !llvm.ptr<3>) kernel
      attributes {known_block_size = array<i32: 64, 1, 1>} {
    %p = pipeline.create storage(%smem : !llvm.ptr<3>) : !P
    %a = pipeline.create storage(%smem2 : !llvm.ptr<3>) : !A
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %c31 = arith.constant 31 : i32
    %all = arith.constant -1 : i32
    %c32 = arith.constant 32 : i32
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %w = arith.divui %tid, %c32 : i32
    %warp = nvvm.shfl.sync idx %all, %w, %c0, %c31 : i32 -> i32
    %is_producer = arith.cmpi eq, %warp, %c0 : i32
    scf.if %is_producer {
      %s0 = pipeline.state.make : !PS
      %s = scf.for %i = %c0 to %n step %c1 iter_args(%st = %s0) -> (!PS) : i32 {
        pipeline.producer.acquire %p, %st : !P, !PS
        pipeline.producer.acquire %a, %st : !A, !PS
        pipeline.producer.commit %a, %st {elect_one} : !A, !PS
        %next = pipeline.state.advance %st : !PS
        scf.yield %next : !PS
      }
    } else {
      %s0 = pipeline.state.make : !CS
      %s = scf.for %i = %c0 to %n step %c1 iter_args(%st = %s0) -> (!CS) : i32 {
        pipeline.consumer.wait %a, %st : !A, !CS
        pipeline.consumer.release %a, %st {elect_one} : !A, !CS
        %next = pipeline.state.advance %st : !CS
        scf.yield %next : !CS
      }
    }
    gpu.return
  }
}

// -----

!A = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 1>,
                        consumer = #pipeline.group<thread, 1>>
!PS = !pipeline.state<2, producer>

// Where it does not apply, each verb keeps its own elect.sync:
// - a branch on the lane id (divergent) around the verb;
// - a loop whose bound differs per thread (tid.x);
// - tid.x / 32 in a 2-D block (not a warp index there);
// - a verb directly in the function body (no warp-role region).
// (Each function first lowers its create: warp 0, elect, inits, bar.sync.)
// CHECK-LABEL: gpu.func @lanes
// CHECK: nvvm.barrier0
// CHECK: scf.if
// CHECK-NOT: nvvm.elect.sync
// CHECK: scf.if
// CHECK: %[[E1:.*]] = nvvm.elect.sync -> i1
// CHECK-NEXT: scf.if %[[E1]] {
// CHECK-NEXT: nvvm.mbarrier.arrive
// CHECK-LABEL: gpu.func @thread_bound
// CHECK: nvvm.barrier0
// CHECK: scf.if
// CHECK-NOT: nvvm.elect.sync
// CHECK: scf.for
// CHECK: %[[E2:.*]] = nvvm.elect.sync -> i1
// CHECK-NEXT: scf.if %[[E2]] {
// CHECK-LABEL: gpu.func @two_d
// CHECK: nvvm.barrier0
// CHECK: scf.if
// CHECK-NOT: nvvm.elect.sync
// CHECK: llvm.insertvalue
// CHECK: %[[E3:.*]] = nvvm.elect.sync -> i1
// CHECK-NEXT: scf.if %[[E3]] {
// CHECK-NEXT: nvvm.mbarrier.arrive
// CHECK-LABEL: gpu.func @no_role
// CHECK: nvvm.barrier0
// CHECK: %[[E4:.*]] = nvvm.elect.sync -> i1
// CHECK-NEXT: scf.if %[[E4]] {
// CHECK-NEXT: nvvm.mbarrier.arrive
gpu.module @lanes {
  gpu.func @lanes(%smem: !llvm.ptr<3>) kernel
      attributes {known_block_size = array<i32: 64, 1, 1>} {
    %a = pipeline.create storage(%smem : !llvm.ptr<3>) : !A
    %c0 = arith.constant 0 : i32
    %c32 = arith.constant 32 : i32
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %warp = arith.divui %tid, %c32 : i32
    %w0 = arith.cmpi eq, %warp, %c0 : i32
    scf.if %w0 {
      %lane = nvvm.read.ptx.sreg.laneid : i32
      %low = arith.cmpi ult, %lane, %c32 : i32
      scf.if %low {
        %s = pipeline.state.make : !PS
        pipeline.producer.commit %a, %s {elect_one} : !A, !PS
      }
    }
    gpu.return
  }
  gpu.func @thread_bound(%smem: !llvm.ptr<3>) kernel
      attributes {known_block_size = array<i32: 64, 1, 1>} {
    %a = pipeline.create storage(%smem : !llvm.ptr<3>) : !A
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %c32 = arith.constant 32 : i32
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %warp = arith.divui %tid, %c32 : i32
    %w0 = arith.cmpi eq, %warp, %c0 : i32
    scf.if %w0 {
      %s0 = pipeline.state.make : !PS
      %s = scf.for %i = %c0 to %tid step %c1 iter_args(%st = %s0) -> (!PS) : i32 {
        pipeline.producer.commit %a, %st {elect_one} : !A, !PS
        %next = pipeline.state.advance %st : !PS
        scf.yield %next : !PS
      }
    }
    gpu.return
  }
  gpu.func @two_d(%smem: !llvm.ptr<3>) kernel
      attributes {known_block_size = array<i32: 16, 4, 1>} {
    %a = pipeline.create storage(%smem : !llvm.ptr<3>) : !A
    %c0 = arith.constant 0 : i32
    %c32 = arith.constant 32 : i32
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %warp = arith.divui %tid, %c32 : i32
    %w0 = arith.cmpi eq, %warp, %c0 : i32
    scf.if %w0 {
      %s = pipeline.state.make : !PS
      pipeline.producer.commit %a, %s {elect_one} : !A, !PS
    }
    gpu.return
  }
  gpu.func @no_role(%smem: !llvm.ptr<3>) kernel
      attributes {known_block_size = array<i32: 32, 1, 1>} {
    %a = pipeline.create storage(%smem : !llvm.ptr<3>) : !A
    %s = pipeline.state.make : !PS
    pipeline.producer.commit %a, %s {elect_one} : !A, !PS
    gpu.return
  }
}

// -----

!A = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 1>,
                        consumer = #pipeline.group<thread, 1>>

// Deferred creates in a row: one fence after the last one; the init sync
// stays with init_arrive / init_wait. Warp 0 of a 1-D block: tid.x / 32,
// no tid.y / tid.z / ntid.
// CHECK-LABEL: gpu.func @deferred
// CHECK-NOT: nvvm.read.ptx.sreg.tid.y
// CHECK-NOT: nvvm.read.ptx.sreg.ntid
// CHECK: %[[T:.*]] = nvvm.read.ptx.sreg.tid.x : i32
// CHECK: arith.divui %[[T]], %c32_i32
// CHECK: nvvm.mbarrier.init
// CHECK-NOT: nvvm.fence.mbarrier.init
// CHECK: nvvm.mbarrier.init
// CHECK-NOT: nvvm.fence.mbarrier.init
// CHECK: nvvm.mbarrier.init
// CHECK: nvvm.fence.mbarrier.init
// CHECK-NOT: nvvm.fence.mbarrier.init
// CHECK: nvvm.barrier0
// CHECK-NOT: nvvm.fence.mbarrier.init
// CHECK-LABEL: gpu.func @interleaved
// A create followed by another op with effects keeps its own fence.
// CHECK: nvvm.mbarrier.init
// CHECK: nvvm.fence.mbarrier.init
// CHECK: nvvm.barrier0
// CHECK: nvvm.mbarrier.init
// CHECK: nvvm.fence.mbarrier.init
// PTX-LABEL: // gpu.binary @fences sm_90a
// PTX-COUNT-1: fence.mbarrier_init.release.cluster;
// PTX-NEXT: bar.sync 0;
// PTX: fence.mbarrier_init.release.cluster;
// PTX-NEXT: bar.sync 0;
// PTX: fence.mbarrier_init.release.cluster;
// PTX-NOT: fence.mbarrier_init
gpu.module @fences {
  gpu.func @deferred(%s0: !llvm.ptr<3>, %s1: !llvm.ptr<3>, %s2: !llvm.ptr<3>) kernel
      attributes {known_block_size = array<i32: 64, 1, 1>} {
    %a = pipeline.create storage(%s0 : !llvm.ptr<3>) {defer_sync} : !A
    %b = pipeline.create storage(%s1 : !llvm.ptr<3>) {defer_sync} : !A
    %c = pipeline.create storage(%s2 : !llvm.ptr<3>) {defer_sync} : !A
    pipeline.init_arrive
    pipeline.init_wait
    gpu.return
  }
  gpu.func @interleaved(%s0: !llvm.ptr<3>, %s1: !llvm.ptr<3>) kernel
      attributes {known_block_size = array<i32: 64, 1, 1>} {
    %a = pipeline.create storage(%s0 : !llvm.ptr<3>) {defer_sync} : !A
    nvvm.barrier0
    %b = pipeline.create storage(%s1 : !llvm.ptr<3>) {defer_sync} : !A
    pipeline.init_arrive
    pipeline.init_wait
    gpu.return
  }
}
