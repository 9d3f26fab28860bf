// Per-stage code is unrolled up to 8 stages and a run-time loop beyond, so
// that the lowering is linear in the stage count (found by fuzzing: unrolled barrier
// inits and producer-tail wait loops made 1024 stages take 20 s and 2 GB to
// PTX, and 2048 stages ran out of 6 GB).
// RUN: pipeline-opt %s --convert-pipeline-to-nvvm --cse | FileCheck %s
// The largest stage count the verifier accepts goes all the way to PTX.
// RUN: sed -e 's/stages = 64,/stages = 14528,/' -e 's/state<64,/state<14528,/g' %s > %t.mlir
// RUN: pipeline-opt %t.mlir --pipeline-to-cubin="chip=sm_90a format=isa" | %python %S/Inputs/ptx.py | FileCheck %s --check-prefix=PTX
// RUN: %if ptxas %{ pipeline-opt %t.mlir --pipeline-to-cubin="chip=sm_90a format=bin" | FileCheck %s --check-prefix=BIN %}

!P = !pipeline.pipeline<async, stages = 64, producer = #pipeline.group<warp, 1>,
                        consumer = #pipeline.group<warp, 2>>
!PS = !pipeline.state<64, producer>

gpu.module @many {
  gpu.func @kernel() kernel {
    %p = pipeline.create {name = "ab"} : !P
    %s = pipeline.state.make : !PS
    pipeline.producer.tail %p, %s : !P, !PS
    gpu.return
  }
}

// 128 barriers, initialized by one loop over the 64 full barriers that also
// initializes empty barrier i + 64 (producer warp: 32, consumer warps: 64).
// CHECK: llvm.mlir.global internal @__pipeline_barriers_ab() {{.*}} : !llvm.array<128 x i64>
// CHECK: %[[BASE:.*]] = llvm.mlir.addressof @__pipeline_barriers_ab
// CHECK: %[[S:.*]] = arith.constant 64 : i32
// CHECK: nvvm.elect.sync
// CHECK: scf.for %[[I:.*]] = %{{.*}} to %[[S]] step
// CHECK-NEXT: %[[FULL:.*]] = llvm.getelementptr %[[BASE]][%[[I]]]
// CHECK-NEXT: nvvm.mbarrier.init %[[FULL]], %c32_i32
// CHECK-NEXT: %[[J:.*]] = arith.addi %[[I]], %[[S]]
// CHECK-NEXT: %[[EMPTY:.*]] = llvm.getelementptr %[[BASE]][%[[J]]]
// CHECK-NEXT: nvvm.mbarrier.init %[[EMPTY]], %c64_i32
// CHECK-NEXT: }
// CHECK-NOT: nvvm.mbarrier.init
// The producer tail: one loop of 64 waits on the empty barriers (one
// try_wait.parity each), the state carried and advanced once per trip.
// CHECK: scf.for {{.*}} iter_args(%[[ST:.*]] = %{{.*}}) -> (!llvm.struct<(i32, i32, i32)>)
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK-NOT: nvvm.mbarrier.try_wait
// CHECK: scf.yield %{{.*}} : !llvm.struct<(i32, i32, i32)>
// CHECK: gpu.return

// 2 * 14528 barriers fill the 227 KiB (0x38c00 bytes) ptxas allows a CTA.
// PTX: .shared .align 8 .b8 __pipeline_barriers_ab[232448];
// PTX: mbarrier.init.shared{{(::cta)?}}.b64
// PTX: mbarrier.try_wait
// BIN: gpu.binary @many
