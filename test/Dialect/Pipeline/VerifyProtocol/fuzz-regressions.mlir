// Inputs on which the protocol checker crashed (found by scripts/fuzz.py). Each must end in
// diagnostics and a clean failure, not an assertion or a segfault.
// RUN: not pipeline-opt %s --pipeline-verify-protocol -split-input-file -o /dev/null 2>&1 | FileCheck %s

// `advance by 2` is one op but two stages: the state-threading check indexed
// its list of advance ops by the stage count (SmallVector index assert), and
// a sum of advances below zero (`by -3`) indexed the verbs at -1.

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 128>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>
func.func @advance_by_amount(%n: index, %cond: i1) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %two = arith.constant 2 : i32
  %p = pipeline.create {name = "ab"} : !P
  %s0 = pipeline.state.make : !ps
  %c = pipeline.state.make : !cs
  %r:2 = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0, %keep = %c) -> (!ps, !cs) {
    %s1 = scf.if %cond -> (!ps) {
      %a = pipeline.state.advance %s : !ps
      scf.yield %a : !ps
    } else {
      %b = pipeline.state.advance %s by %two : !ps
      %b1 = pipeline.state.advance %b by %two : !ps
      %one = arith.constant -3 : i32
      %b2 = pipeline.state.advance %b1 by %one : !ps
      scf.yield %b2 : !ps
    }
    scf.yield %s1, %keep : !ps, !cs
  }
  %cN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %r#1) -> (!cs) {
    pipeline.consumer.wait %p, %s : !P, !cs
    %u = pipeline.state.advance %s by %two : !cs
    scf.yield %u : !cs
  }
  return
}
// CHECK: fuzz-regressions.mlir:34:10: error: pipeline 'ab': state advanced twice per iteration but the loop body waits on 1 stage
// CHECK: note: the stage is used here

// -----

// Two acquires of one state, each with its copy: the tx-bytes check kept an
// ArrayRef to a temporary copy of the copies list and read freed memory.

!T = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 2>, consumer = #pipeline.group<thread, 256>, tx_count = 4096, cluster = #pipeline.cluster<1, 2, 1, 1>, multicast = m>
!ps = !pipeline.state<2, producer>
func.func @two_acquires_one_state(%desc: !llvm.ptr, %buf: !llvm.ptr<3>, %w0: i1, %w1: i1) {
  %x = arith.constant 0 : i32
  %t = pipeline.create {name = "ab"} : !T
  %s = pipeline.state.make : !ps
  scf.if %w0 {
    pipeline.producer.acquire %t, %s : !T, !ps
    pipeline.copy.tma_load %t, %s, %desc[%x] to %buf {bytes = 256 : i64} : !T, !ps, !llvm.ptr, !llvm.ptr<3>
    pipeline.producer.tail %t, %s : !T, !ps
  }
  scf.if %w1 {
    pipeline.producer.acquire %t, %s : !T, !ps
    pipeline.copy.tma_load %t, %s, %desc[%x] to %buf {bytes = 4096 : i64} : !T, !ps, !llvm.ptr, !llvm.ptr<3>
    pipeline.producer.tail %t, %s : !T, !ps
  }
  return
}
// CHECK: error: pipeline 'ab': producer.acquire expects 4096 bytes (tx_count 4096) but the 1 copy bound to this stage deliver 256
// CHECK-NOT: PLEASE submit a bug report

// -----

// A negative wgmma wait count (`wait.group -1`, an immediate the NVVM
// verifier accepts) made the asynchronous-read check erase past the start
// of its queue (SmallVector erase assert). A negative count is read as 0
// (nothing left in flight), so the release after it is clean.

!P = !pipeline.pipeline<tma_async, stages = 4, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 4>, tx_count = 1024>
!cs = !pipeline.state<4, consumer>
!acc = !llvm.struct<(f32, f32, f32, f32)>
func.func @negative_wait_group(%base: i64, %acc0: !acc) {
  %p = pipeline.create {name = "neg"} : !P
  %s = pipeline.state.make : !cs
  pipeline.consumer.wait %p, %s : !P, !cs
  %i = pipeline.state.index %s : !cs
  %i64 = arith.extui %i : i32 to i64
  %d = arith.addi %base, %i64 : i64
  nvvm.wgmma.fence.aligned
  %acc1 = nvvm.wgmma.mma_async %d, %d, %acc0, <m = 64, n = 8, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>] : !acc -> !acc
  nvvm.wgmma.commit.group.sync.aligned
  nvvm.wgmma.wait.group.sync.aligned -1
  pipeline.consumer.release %p, %s : !P, !cs
  return
}
// CHECK-NOT: pipeline 'neg'
