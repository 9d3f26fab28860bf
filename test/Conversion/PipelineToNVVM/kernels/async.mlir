// PipelineAsync: warp 0 produces, warps 1-2 consume, one CTA.
// RUN: pipeline-opt %s --convert-pipeline-to-nvvm --cse | FileCheck %s
// RUN: pipeline-opt %s --pipeline-to-cubin="chip=sm_90a format=isa" | %python %S/../Inputs/ptx.py > %t.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx
// RUN: FileCheck %s --check-prefix=PTXN < %t.ptx
// RUN: %if ptxas %{ pipeline-opt %s --pipeline-to-cubin="chip=sm_90a format=bin" | FileCheck %s --check-prefix=BIN90 %}
// RUN: %if ptxas %{ pipeline-opt %s --pipeline-to-cubin="chip=sm_100a format=bin" | FileCheck %s --check-prefix=BIN100 %}

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<warp, 1>,
                        consumer = #pipeline.group<warp, 2>>
!PS = !pipeline.state<2, producer>
!CS = !pipeline.state<2, consumer>

module attributes {gpu.container_module} {
gpu.module @async {
  gpu.func @kernel(%n: i32) kernel {
    %p = pipeline.create {name = "ab"} : !P
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %c32 = arith.constant 32 : i32
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %warp = arith.divui %tid, %c32 : i32
    %is_producer = arith.cmpi eq, %warp, %c0 : i32
    scf.if %is_producer {
      %s0 = pipeline.state.make : !PS
      %s = scf.for %i = %c0 to %n step %c1 iter_args(%st = %s0) -> (!PS) : i32 {
        pipeline.producer.acquire %p, %st : !P, !PS
        pipeline.producer.commit %p, %st : !P, !PS
        %next = pipeline.state.advance %st : !PS
        scf.yield %next : !PS
      }
      pipeline.producer.tail %p, %s : !P, !PS
    } else {
      %s0 = pipeline.state.make : !CS
      %s = scf.for %i = %c0 to %n step %c1 iter_args(%st = %s0) -> (!CS) : i32 {
        pipeline.consumer.wait %p, %st : !P, !CS
        pipeline.consumer.release %p, %st : !P, !CS
        %next = pipeline.state.advance %st : !CS
        scf.yield %next : !CS
      }
    }
    gpu.return
  }
}
}

// Shared-memory storage: 2*S barriers of 8 bytes.
// CHECK: llvm.mlir.global internal @__pipeline_barriers_ab() {addr_space = 3 : i32, alignment = 8 : i64} : !llvm.array<4 x i64>
// CHECK-LABEL: gpu.func @kernel
// CHECK: %[[BASE:.*]] = llvm.mlir.addressof @__pipeline_barriers_ab : !llvm.ptr<3>
// Full count = producer warp (32 threads), empty count = 2 warps (64).
// CHECK-DAG: %[[C32:.*]] = arith.constant 32 : i32
// CHECK-DAG: %[[C64:.*]] = arith.constant 64 : i32
// CHECK: %[[WARP:.*]] = arith.divui %{{.*}}, %[[C32]] : i32
// CHECK: %[[W0:.*]] = arith.cmpi eq, %[[WARP]], %{{.*}} : i32
// CHECK: scf.if %[[W0]] {
// Two counts: one elected block per barrier group.
// CHECK:   %[[E:.*]] = nvvm.elect.sync -> i1
// CHECK:   scf.if %[[E]] {
// CHECK:     nvvm.mbarrier.init %{{.*}}, %[[C32]] : !llvm.ptr<3>, i32
// CHECK:     nvvm.mbarrier.init %{{.*}}, %[[C32]] : !llvm.ptr<3>, i32
// CHECK:   %[[E2:.*]] = nvvm.elect.sync -> i1
// CHECK:   scf.if %[[E2]] {
// CHECK:     nvvm.mbarrier.init %{{.*}}, %[[C64]] : !llvm.ptr<3>, i32
// CHECK:     nvvm.mbarrier.init %{{.*}}, %[[C64]] : !llvm.ptr<3>, i32
// CHECK-NOT: nvvm.mbarrier.init
// CHECK: nvvm.fence.mbarrier.init
// CHECK-NEXT: nvvm.barrier0
// Producer start state (0, 1, 0).
// CHECK: %[[PS:.*]] = llvm.insertvalue %{{.*}}[1]
// Acquire: wait on empty[index] = &full[index] + S (S = 2) with the state's
// phase; full[index] is shared with the commit (CSE).
// CHECK: scf.for {{.*}} iter_args(%[[ST:.*]] = %{{.*}}) -> (!llvm.struct<(i32, i32, i32)>)
// CHECK:   %[[IDX:.*]] = llvm.extractvalue %[[ST]][0]
// CHECK:   %[[PH:.*]] = llvm.extractvalue %[[ST]][1]
// CHECK:   %[[FULL:.*]] = llvm.getelementptr %[[BASE]][%[[IDX]]] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i64
// CHECK:   %[[EMPTY:.*]] = llvm.getelementptr %[[FULL]][%c2_i32{{(_[0-9]+)?}}] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i64
// CHECK:   %[[HINT:.*]] = arith.constant 10000000 : i32
// CHECK:   nvvm.mbarrier.try_wait.parity %[[EMPTY]], %[[PH]], %[[HINT]] : !llvm.ptr<3>, i32, i32
// Commit: every producer thread arrives on full[index].
// CHECK-NOT: llvm.getelementptr
// CHECK:   nvvm.mbarrier.arrive %[[FULL]] : !llvm.ptr<3> -> i64
// Tail: one wait per stage on the empty barriers.
// CHECK-NOT: scf.while
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK-NOT: nvvm.mbarrier.try_wait
// CHECK: } else {
// Consumer: wait on full[index], release empty[index].
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK: nvvm.mbarrier.arrive

// PTX-LABEL: // gpu.binary @async sm_90a
// PTX: .shared .align 8 .b8 __pipeline_barriers_ab[32];
// PTX: elect.sync
// PTX-COUNT-4: mbarrier.init.shared.b64
// PTX-NOT: mbarrier.init
// PTX: fence.mbarrier_init.release.cluster;
// PTX-NEXT: bar.sync 0;
// Producer loop (1), tail (2) and consumer loop (1) waits, each CuTe DSL's
// loop: the hint as an immediate, exit on success, back edge unconditional;
// 32-bit shared addresses (no 64-bit barrier arithmetic). One arrive per loop.
// PTX-COUNT-4: mbarrier.try_wait.parity.shared.b64 P1, [%r{{[0-9]+}}], %r{{[0-9]+}}, 10000000;
// PTX-NOT: mbarrier.try_wait
// PTXN-NOT: %rd{{[0-9]+}}, __pipeline_barriers
// PTXN-NOT: mul.wide
// PTXN-COUNT-2: mbarrier.arrive.shared.b64
// PTXN-NOT: mbarrier.arrive
// PTXN-NOT: mapa
// PTXN-NOT: expect_tx

// BIN90: gpu.binary @async [#gpu.object<#nvvm.target<chip = "sm_90a", features = "+ptx88">, {{.*}}bin = "\7FELF
// BIN100: gpu.binary @async [#gpu.object<#nvvm.target<chip = "sm_100a", features = "+ptx88">, {{.*}}bin = "\7FELF
