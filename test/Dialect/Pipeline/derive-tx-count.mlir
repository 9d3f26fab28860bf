// pipeline-derive-tx-count: tx_count left out of a TMA pipeline is the bytes
// its stages' copies deliver, counted as the checker counts them.
// RUN: pipeline-opt --pipeline-derive-tx-count %s | FileCheck %s

!T = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 128>>
!ps = !pipeline.state<2, producer>

// Two copies per stage (one in a loop of 2) deliver 2 x 4096 + 1024 = 9216
// bytes; the acquire arms tx_count + extra_tx, so tx_count = 9216 - 512.
// CHECK-LABEL: func.func @derived
// CHECK: pipeline.create {name = "ab"} : <tma_async, {{.*}}tx_count = 8704>
// CHECK: pipeline.producer.acquire {{.*}} extra_tx {{.*}}tx_count = 8704>
func.func @derived(%n: index, %desc: !llvm.ptr, %src: !llvm.ptr<1>, %buf: !llvm.ptr<3>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %x = arith.constant 0 : i32
  %size = arith.constant 1024 : i32
  %extra = arith.constant 512 : i32
  %p = pipeline.create {name = "ab"} : !T
  %s0 = pipeline.state.make : !ps
  %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
    pipeline.producer.acquire %p, %s extra_tx %extra : !T, !ps
    scf.for %j = %c0 to %c2 step %c1 {
      pipeline.copy.tma_load %p, %s, %desc[%x, %x] to %buf {bytes = 4096 : i64} : !T, !ps, !llvm.ptr, !llvm.ptr<3>
    }
    pipeline.copy.bulk %p, %s, %src to %buf, %size : !T, !ps, !llvm.ptr<1>, !llvm.ptr<3>
    pipeline.producer.commit %p, %s : !T, !ps
    %s1 = pipeline.state.advance %s : !ps
    scf.yield %s1 : !ps
  }
  pipeline.producer.tail %p, %sN : !T, !ps
  return
}

// The stage's barrier handle taken next to its tma_load (CuTe DSL passes
// producer_get_barrier(state) to cute.copy): the handle
// hides no copy, so the tma_load's bytes are the tx_count (the derivation
// used to answer "no tma_load is bound"). A handle only waited on is no
// copy either.
// CHECK-LABEL: func.func @barrier_handle_next_to_the_copy
// CHECK: pipeline.create {name = "ab"} : <tma_async, {{.*}}tx_count = 8192>
// CHECK: pipeline.producer.barrier
func.func @barrier_handle_next_to_the_copy(%n: index, %desc: !llvm.ptr, %buf: !llvm.ptr<3>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %x = arith.constant 0 : i32
  %p = pipeline.create {name = "ab"} : !T
  %s0 = pipeline.state.make : !ps
  %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
    pipeline.producer.acquire %p, %s : !T, !ps
    %bar = pipeline.producer.barrier %p, %s : !T, !ps
    %token = arith.constant 0 : i64
    %done = nvvm.mbarrier.test.wait %bar, %token : !llvm.ptr<3>, i64 -> i1
    pipeline.copy.tma_load %p, %s, %desc[%x, %x] to %buf {bytes = 8192 : i64} : !T, !ps, !llvm.ptr, !llvm.ptr<3>
    pipeline.producer.commit %p, %s : !T, !ps
    %s1 = pipeline.state.advance %s : !ps
    scf.yield %s1 : !ps
  }
  pipeline.producer.tail %p, %sN : !T, !ps
  return
}
