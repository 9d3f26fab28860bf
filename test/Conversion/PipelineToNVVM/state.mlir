// pipeline.state.* lowering: (index, phase, count) arithmetic.
// RUN: pipeline-opt %s --convert-pipeline-to-nvvm --cse --split-input-file | FileCheck %s

// CHECK-LABEL: func.func @make
// CHECK-SAME: (%[[I:.*]]: i32, %[[P:.*]]: i32, %[[C:.*]]: i32)
func.func @make(%i: i32, %p: i32, %c: i32) -> !pipeline.state<4, consumer> {
  // CHECK: %[[U:.*]] = llvm.mlir.poison : !llvm.struct<(i32, i32, i32)>
  // CHECK: %[[S0:.*]] = llvm.insertvalue %[[I]], %[[U]][0]
  // CHECK: %[[S1:.*]] = llvm.insertvalue %[[P]], %[[S0]][1]
  // CHECK: %[[S:.*]] = llvm.insertvalue %[[C]], %[[S1]][2]
  %s = pipeline.state.make index %i phase %p count %c : !pipeline.state<4, consumer>
  return %s : !pipeline.state<4, consumer>
}

// CHECK-LABEL: func.func @read
// CHECK: %[[S:.*]] = builtin.unrealized_conversion_cast %{{.*}} : !pipeline.state<4, consumer> to !llvm.struct<(i32, i32, i32)>
func.func @read(%s: !pipeline.state<4, consumer>) -> (i32, i32, i32) {
  // CHECK: %[[IDX:.*]] = llvm.extractvalue %[[S]][0]
  %0 = pipeline.state.index %s : !pipeline.state<4, consumer>
  // CHECK: %[[PH:.*]] = llvm.extractvalue %[[S]][1]
  %1 = pipeline.state.phase %s : !pipeline.state<4, consumer>
  // CHECK: %[[CNT:.*]] = llvm.extractvalue %[[S]][2]
  %2 = pipeline.state.count %s : !pipeline.state<4, consumer>
  // CHECK: return %[[IDX]], %[[PH]], %[[CNT]]
  return %0, %1, %2 : i32, i32, i32
}

// -----

// Start states: producer (0, 1, 0), consumer (0, 0, 0).
// CHECK-LABEL: func.func @start_states
func.func @start_states() -> (!pipeline.state<2, producer>, !pipeline.state<2, consumer>) {
  // CHECK: %[[Z:.*]] = arith.constant 0 : i32
  // CHECK: %[[ONE:.*]] = arith.constant 1 : i32
  // CHECK: %[[P0:.*]] = llvm.insertvalue %[[Z]], %{{.*}}[0]
  // CHECK: %[[P1:.*]] = llvm.insertvalue %[[ONE]], %[[P0]][1]
  // CHECK: llvm.insertvalue %[[Z]], %[[P1]][2]
  %p = pipeline.state.make : !pipeline.state<2, producer>
  // CHECK: %[[C1:.*]] = llvm.insertvalue %[[Z]], %{{.*}}[1]
  // CHECK: llvm.insertvalue %[[Z]], %[[C1]][2]
  %c = pipeline.state.make : !pipeline.state<2, consumer>
  return %p, %c : !pipeline.state<2, producer>, !pipeline.state<2, consumer>
}

// -----

// advance(): index + 1; on wrap-around index = 0 and the phase flips.
// CHECK-LABEL: func.func @advance_one
func.func @advance_one(%s: !pipeline.state<3, producer>) -> i32 {
  // CHECK: %[[ONE:.*]] = arith.constant 1 : i32
  // CHECK: %[[IDX:.*]] = llvm.extractvalue %{{.*}}[0]
  // CHECK: %[[PH:.*]] = llvm.extractvalue %{{.*}}[1]
  // CHECK: %[[CNT:.*]] = llvm.extractvalue %{{.*}}[2]
  // CHECK: %[[S:.*]] = arith.constant 3 : i32
  // CHECK: %[[NEXT:.*]] = arith.addi %[[IDX]], %[[ONE]] : i32
  // CHECK: %[[WRAP:.*]] = arith.cmpi eq, %[[NEXT]], %[[S]] : i32
  // CHECK: %[[ZERO:.*]] = arith.constant 0 : i32
  // CHECK: %[[NIDX:.*]] = arith.select %[[WRAP]], %[[ZERO]], %[[NEXT]] : i32
  // CHECK: %[[FLIP:.*]] = arith.xori %[[PH]], %[[ONE]] : i32
  // CHECK: %[[NPH:.*]] = arith.select %[[WRAP]], %[[FLIP]], %[[PH]] : i32
  // CHECK: %[[NCNT:.*]] = arith.addi %[[CNT]], %[[ONE]] : i32
  // CHECK: %[[T0:.*]] = llvm.insertvalue %[[NIDX]], %{{.*}}[0]
  // CHECK: %[[T1:.*]] = llvm.insertvalue %[[NPH]], %[[T0]][1]
  // CHECK: llvm.insertvalue %[[NCNT]], %[[T1]][2]
  %t = pipeline.state.advance %s : !pipeline.state<3, producer>
  %i = pipeline.state.index %t : !pipeline.state<3, producer>
  return %i : i32
}

// -----

// advance(n): index += n; phase ^= (index / S) & 1; index %= S; count += n.
// CHECK-LABEL: func.func @advance_n
// CHECK-SAME: (%{{.*}}: !pipeline.state<3, consumer>, %[[N:.*]]: i32)
func.func @advance_n(%s: !pipeline.state<3, consumer>, %n: i32) -> i32 {
  // CHECK: %[[ONE:.*]] = arith.constant 1 : i32
  // CHECK: %[[IDX:.*]] = llvm.extractvalue %{{.*}}[0]
  // CHECK: %[[PH:.*]] = llvm.extractvalue %{{.*}}[1]
  // CHECK: %[[CNT:.*]] = llvm.extractvalue %{{.*}}[2]
  // CHECK: %[[S:.*]] = arith.constant 3 : i32
  // CHECK: %[[SUM:.*]] = arith.addi %[[IDX]], %[[N]] : i32
  // CHECK: %[[LAPS:.*]] = arith.divui %[[SUM]], %[[S]] : i32
  // CHECK: %[[ODD:.*]] = arith.andi %[[LAPS]], %[[ONE]] : i32
  // CHECK: %[[NPH:.*]] = arith.xori %[[PH]], %[[ODD]] : i32
  // CHECK: %[[NIDX:.*]] = arith.remui %[[SUM]], %[[S]] : i32
  // CHECK: %[[NCNT:.*]] = arith.addi %[[CNT]], %[[N]] : i32
  // CHECK: %[[T0:.*]] = llvm.insertvalue %[[NIDX]], %{{.*}}[0]
  // CHECK: %[[T1:.*]] = llvm.insertvalue %[[NPH]], %[[T0]][1]
  // CHECK: llvm.insertvalue %[[NCNT]], %[[T1]][2]
  %t = pipeline.state.advance %s by %n : !pipeline.state<3, consumer>
  %i = pipeline.state.index %t : !pipeline.state<3, consumer>
  return %i : i32
}

// -----

// PipelineStateSimple: one i32 phase_index; producers start at S.
// CHECK-LABEL: func.func @simple
func.func @simple() -> (i32, i32, i32) {
  // CHECK: %[[S:.*]] = arith.constant 4 : i32
  // CHECK: %[[ONE:.*]] = arith.constant 1 : i32
  // CHECK: %[[PI:.*]] = arith.addi %[[S]], %[[ONE]] : i32
  %s = pipeline.state.make : !pipeline.state<4, producer, simple>
  %t = pipeline.state.advance %s : !pipeline.state<4, producer, simple>
  // index = pi % S
  // CHECK: %[[IDX:.*]] = arith.remui %[[PI]], %[[S]] : i32
  %0 = pipeline.state.index %t : !pipeline.state<4, producer, simple>
  // phase = (pi / S) & 1
  // CHECK: %[[Q:.*]] = arith.divui %[[PI]], %[[S]] : i32
  // CHECK: %[[PH:.*]] = arith.andi %[[Q]], %[[ONE]] : i32
  %1 = pipeline.state.phase %t : !pipeline.state<4, producer, simple>
  // count = pi - S (the producer start)
  // CHECK: %[[CNT:.*]] = arith.subi %[[PI]], %[[S]] : i32
  %2 = pipeline.state.count %t : !pipeline.state<4, producer, simple>
  // CHECK: return %[[IDX]], %[[PH]], %[[CNT]]
  return %0, %1, %2 : i32, i32, i32
}

// -----

// One stage: the packed value only toggles its parity.
// CHECK-LABEL: func.func @simple_one_stage
// CHECK: %[[PI:.*]] = builtin.unrealized_conversion_cast %{{.*}} to i32
func.func @simple_one_stage(%s: !pipeline.state<1, consumer, simple>) -> i32 {
  // CHECK: %[[ONE:.*]] = arith.constant 1 : i32
  // CHECK: %[[T:.*]] = arith.xori %[[PI]], %[[ONE]] : i32
  %t = pipeline.state.advance %s : !pipeline.state<1, consumer, simple>
  // CHECK: arith.andi %[[T]], %{{.*}} : i32
  %p = pipeline.state.phase %t : !pipeline.state<1, consumer, simple>
  return %p : i32
}
