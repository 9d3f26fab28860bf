// RUN: pipeline-opt %s -split-input-file -verify-diagnostics

// Constant stage indices, phases and group ids out of range (found by
// fuzzing the lowered kernels): the lowering computes barrier addresses from them
// with no bound, so `index 5` of a 2-stage state arrives on shared memory
// past the pipeline's barrier array, and ptxas refuses `try_wait.parity`
// with phase 2. The verifier refuses such constants at the op. Each bug sits
// next to its correct twin, which must verify.

// Bug: index 2 of a 2-stage state (stages are 0 and 1).
!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
func.func @index_past_stages(%p: !P) {
  %c0 = arith.constant 0 : i32
  %c2 = arith.constant 2 : i32
  // expected-error @+1 {{'pipeline.state.make' op index 2 is out of range: the state has 2 stages (index 0..1), and the barrier it names would lie past the pipeline's barrier array, in shared memory the pipeline does not own (give the stage's index, or a start state advanced to it with pipeline.state.advance)}}
  %s = pipeline.state.make index %c2 phase %c0 : !pipeline.state<2, consumer>
  pipeline.consumer.wait %p, %s : !P, !pipeline.state<2, consumer>
  return
}

// -----

// Twin: the last stage, index 1.
!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
func.func @index_last_stage(%p: !P) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %s = pipeline.state.make index %c1 phase %c0 : !pipeline.state<2, consumer>
  pipeline.consumer.wait %p, %s : !P, !pipeline.state<2, consumer>
  return
}

// -----

// Bug: a negative index (llvm.mlir.constant counts as a constant too).
func.func @index_negative() {
  %m1 = llvm.mlir.constant(-1 : i32) : i32
  %c1 = arith.constant 1 : i32
  // expected-error @+1 {{'pipeline.state.make' op index -1 is out of range: the state has 4 stages (index 0..3)}}
  %s = pipeline.state.make index %m1 phase %c1 : !pipeline.state<4, producer>
  return
}

// -----

// Twin: a run-time index is not the verifier's to judge.
func.func @index_runtime(%i: i32) {
  %c1 = arith.constant 1 : i32
  %s = pipeline.state.make index %i phase %c1 : !pipeline.state<4, producer>
  return
}

// -----

// Bug: phase 2 is not a parity.
!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
func.func @phase_two(%p: !P) {
  %c0 = arith.constant 0 : i32
  %c2 = arith.constant 2 : i32
  // expected-error @+1 {{'pipeline.state.make' op phase 2 is not a parity: a pipeline state's phase is the parity mbarrier.try_wait.parity waits on, 0 or 1 (give phase % 2; producers start at 1, consumers at 0)}}
  %s = pipeline.state.make index %c0 phase %c2 count %c0 : !pipeline.state<2, producer>
  pipeline.producer.acquire %p, %s : !P, !pipeline.state<2, producer>
  return
}

// -----

// Twin: phase 1, and any count (a resumed state).
!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
func.func @phase_one(%p: !P) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c9 = arith.constant 9 : i32
  %s = pipeline.state.make index %c0 phase %c1 count %c9 : !pipeline.state<2, producer>
  pipeline.producer.acquire %p, %s : !P, !pipeline.state<2, producer>
  return
}

// -----

// Twin: a simple state's packed phase_index is reduced modulo the stages by
// the lowering, so any value names a stage.
func.func @simple_any_phase_index() {
  %c7 = arith.constant 7 : i32
  %s = pipeline.state.make index %c7 : !pipeline.state<2, consumer, simple>
  return
}

// -----

// Bug: group 2 of an order of 2 groups waits on the next stage's barrier
// (index * length + 2), or past the array on the last stage.
!order = !pipeline.pipeline<order, stages = 2, producer = #pipeline.group<thread, 128>, length = 2>
func.func @order_group_past_length(%p: !order) {
  %g = arith.constant 2 : i32
  // expected-error @+1 {{'pipeline.order.state' op group_id 2 is out of range: the order has 2 groups (group_id 0..1), and the barrier it names would lie past the pipeline's barrier array, in shared memory the pipeline does not own (give PipelineOrder.create a group_id below its length)}}
  %s = pipeline.order.state %p, %g : !order -> !pipeline.state<2, producer_consumer>
  return
}

// -----

// Bug: the verbs check their constant group id too.
!order = !pipeline.pipeline<order, stages = 2, producer = #pipeline.group<thread, 128>, length = 2>
func.func @order_wait_group_past_length(%p: !order, %s: !pipeline.state<2, producer_consumer>) {
  %g = arith.constant 3 : i32
  // expected-error @+1 {{'pipeline.order.wait' op group_id 3 is out of range: the order has 2 groups}}
  pipeline.order.wait %p, %s, %g : !order, !pipeline.state<2, producer_consumer>
  return
}

// -----

// Twin: the last group.
!order = !pipeline.pipeline<order, stages = 2, producer = #pipeline.group<thread, 128>, length = 2>
func.func @order_last_group(%p: !order) {
  %g = arith.constant 1 : i32
  %s = pipeline.order.state %p, %g : !order -> !pipeline.state<2, producer_consumer>
  pipeline.order.wait %p, %s, %g : !order, !pipeline.state<2, producer_consumer>
  %s1 = pipeline.order.arrive %p, %s, %g : !order, !pipeline.state<2, producer_consumer>
  return
}

// -----

// Bug: a named barrier's constant index moves its id past the 16 barriers.
func.func @named_barrier_index_past_15() {
  %c2 = arith.constant 2 : i32
  // expected-error @+1 {{'pipeline.named_barrier.sync' op id 14 + index 2 = 16 is not a named barrier: a CTA has barriers 0..15 (lower the id or the index)}}
  pipeline.named_barrier.sync id = 14, threads = 64 index %c2
  return
}

// -----

// Twin: id 14 + index 1 is barrier 15.
func.func @named_barrier_index_15() {
  %c1 = arith.constant 1 : i32
  pipeline.named_barrier.sync id = 14, threads = 64 index %c1
  return
}
