// RUN: pipeline-opt %s -canonicalize -split-input-file | FileCheck %s

// Folds of the pure state ops: advancing by a constant 0 is the identity, and
// reading a field of a non-simple state.make that was given that field yields
// the operand.

// CHECK-LABEL: func.func @advance_by_zero
// CHECK-SAME: (%[[S:.*]]: !pipeline.state<4, producer>)
// CHECK: %[[M:.*]] = pipeline.state.make : <2, consumer, simple>
// CHECK-NOT: pipeline.state.advance
// CHECK: return %[[S]], %[[M]] : !pipeline.state<4, producer>, !pipeline.state<2, consumer, simple>
func.func @advance_by_zero(%s: !pipeline.state<4, producer>) -> (!pipeline.state<4, producer>, !pipeline.state<2, consumer, simple>) {
  %c0 = arith.constant 0 : i32
  %a = pipeline.state.advance %s by %c0 : !pipeline.state<4, producer>
  %simple = pipeline.state.make : !pipeline.state<2, consumer, simple>
  %b = pipeline.state.advance %simple by %c0 : !pipeline.state<2, consumer, simple>
  return %a, %b : !pipeline.state<4, producer>, !pipeline.state<2, consumer, simple>
}

// -----

// CHECK-LABEL: func.func @advance_by_nonzero_kept
// CHECK: %[[C1:.*]] = arith.constant 1 : i32
// CHECK: %[[A:.*]] = pipeline.state.advance %{{.*}} by %[[C1]] : <4, producer>
// CHECK: %[[B:.*]] = pipeline.state.advance %[[A]] : <4, producer>
// CHECK: return %[[B]]
func.func @advance_by_nonzero_kept(%s: !pipeline.state<4, producer>) -> !pipeline.state<4, producer> {
  %c1 = arith.constant 1 : i32
  %a = pipeline.state.advance %s by %c1 : !pipeline.state<4, producer>
  %b = pipeline.state.advance %a : !pipeline.state<4, producer>
  return %b : !pipeline.state<4, producer>
}

// -----

// CHECK-LABEL: func.func @fields_of_make
// CHECK-SAME: (%[[I:.*]]: i32, %[[PH:.*]]: i32, %[[C:.*]]: i32)
// CHECK-NOT: pipeline.state
// CHECK: return %[[I]], %[[PH]], %[[C]] : i32, i32, i32
func.func @fields_of_make(%i: i32, %ph: i32, %c: i32) -> (i32, i32, i32) {
  %s = pipeline.state.make index %i phase %ph count %c : !pipeline.state<4, consumer>
  %0 = pipeline.state.index %s : !pipeline.state<4, consumer>
  %1 = pipeline.state.phase %s : !pipeline.state<4, consumer>
  %2 = pipeline.state.count %s : !pipeline.state<4, consumer>
  return %0, %1, %2 : i32, i32, i32
}

// -----

// Without a count operand the count is implicit (0): it is not folded to an
// operand, and the state.make stays for it.
// CHECK-LABEL: func.func @count_without_operand
// CHECK-SAME: (%[[I:.*]]: i32, %[[PH:.*]]: i32)
// CHECK: %[[S:.*]] = pipeline.state.make index %[[I]] phase %[[PH]] : <4, producer>
// CHECK: %[[CNT:.*]] = pipeline.state.count %[[S]] : <4, producer>
// CHECK: return %[[I]], %[[CNT]] : i32, i32
func.func @count_without_operand(%i: i32, %ph: i32) -> (i32, i32) {
  %s = pipeline.state.make index %i phase %ph : !pipeline.state<4, producer>
  %0 = pipeline.state.index %s : !pipeline.state<4, producer>
  %1 = pipeline.state.count %s : !pipeline.state<4, producer>
  return %0, %1 : i32, i32
}

// -----

// A simple state's index and phase are derived from the packed phase_index,
// so they are not the operand of state.make.
// CHECK-LABEL: func.func @simple_not_folded
// CHECK: %[[S:.*]] = pipeline.state.make index %{{.*}} : <4, consumer, simple>
// CHECK: %[[IDX:.*]] = pipeline.state.index %[[S]] : <4, consumer, simple>
// CHECK: %[[PH:.*]] = pipeline.state.phase %[[S]] : <4, consumer, simple>
// CHECK: return %[[IDX]], %[[PH]]
func.func @simple_not_folded(%pi: i32) -> (i32, i32) {
  %s = pipeline.state.make index %pi : !pipeline.state<4, consumer, simple>
  %0 = pipeline.state.index %s : !pipeline.state<4, consumer, simple>
  %1 = pipeline.state.phase %s : !pipeline.state<4, consumer, simple>
  return %0, %1 : i32, i32
}

// -----

// Barrier ops have memory effects and are never dropped, even when unused.
// CHECK-LABEL: func.func @verbs_survive
// CHECK: pipeline.create
// CHECK: pipeline.producer.acquire
// CHECK: pipeline.producer.try_acquire
// CHECK: pipeline.consumer.try_wait
!async = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
func.func @verbs_survive() {
  %p = pipeline.create : !async
  %ps = pipeline.state.make : !pipeline.state<2, producer>
  %cs = pipeline.state.make : !pipeline.state<2, consumer>
  pipeline.producer.acquire %p, %ps : !async, !pipeline.state<2, producer>
  %t = pipeline.producer.try_acquire %p, %ps : !async, !pipeline.state<2, producer>
  %u = pipeline.consumer.try_wait %p, %cs : !async, !pipeline.state<2, consumer>
  return
}
