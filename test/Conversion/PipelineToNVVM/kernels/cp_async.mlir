// PipelineCpAsync: warps 0-3 copy with cp.async, warp 4 consumes. The
// producer polls with try_acquire and hands the token to acquire; the
// consumer does the same with try_wait / wait.
// RUN: pipeline-opt %s --convert-pipeline-to-nvvm --cse | FileCheck %s
// RUN: pipeline-opt %s --pipeline-to-cubin="chip=sm_90a format=isa" | %python %S/../Inputs/ptx.py > %t.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx
// RUN: %if ptxas %{ pipeline-opt %s --pipeline-to-cubin="chip=sm_90a format=bin" | FileCheck %s --check-prefix=BIN90 %}
// RUN: %if ptxas %{ pipeline-opt %s --pipeline-to-cubin="chip=sm_100a format=bin" | FileCheck %s --check-prefix=BIN100 %}

!P = !pipeline.pipeline<cp_async, stages = 4, producer = #pipeline.group<thread, 128>,
                        consumer = #pipeline.group<warp, 1>>
!PS = !pipeline.state<4, producer>
!CS = !pipeline.state<4, consumer>

module attributes {gpu.container_module} {
gpu.module @cp_async {
  gpu.func @kernel(%src: !llvm.ptr<1>, %smem: !llvm.ptr<3>, %k: i32) kernel {
    %p = pipeline.create storage(%smem : !llvm.ptr<3>) {name = "tiles"} : !P
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %c4 = arith.constant 4 : i32
    %c32 = arith.constant 32 : i32
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %warp = arith.divui %tid, %c32 : i32
    %is_producer = arith.cmpi ult, %warp, %c4 : i32
    scf.if %is_producer {
      %s0 = pipeline.state.make : !PS
      %s = scf.for %i = %c0 to %k step %c1 iter_args(%st = %s0) -> (!PS) : i32 {
        %ready = pipeline.producer.try_acquire %p, %st : !P, !PS
        pipeline.producer.acquire %p, %st token %ready : !P, !PS
        pipeline.producer.commit %p, %st : !P, !PS
        %next = pipeline.state.advance %st : !PS
        scf.yield %next : !PS
      }
      pipeline.producer.tail %p, %s : !P, !PS
    } else {
      %s0 = pipeline.state.make : !CS
      %s = scf.for %i = %c0 to %k step %c1 iter_args(%st = %s0) -> (!CS) : i32 {
        %full = pipeline.consumer.try_wait %p, %st : !P, !CS
        pipeline.consumer.wait %p, %st token %full : !P, !CS
        pipeline.consumer.release %p, %st : !P, !CS
        %next = pipeline.state.advance %st : !CS
        scf.yield %next : !CS
      }
    }
    gpu.return
  }
}
}

// User storage: no global, barriers at the given pointer.
// CHECK-LABEL: gpu.module @cp_async
// CHECK-NOT: llvm.mlir.global
// CHECK: gpu.func @kernel(%{{.*}}: !llvm.ptr<1>, %[[SMEM:.*]]: !llvm.ptr<3>, %{{.*}}: i32)
// CHECK-DAG: %[[C128:.*]] = arith.constant 128 : i32
// CHECK-DAG: %[[C32:.*]] = arith.constant 32 : i32
// CHECK: nvvm.elect.sync
// CHECK: %[[B0:.*]] = llvm.getelementptr %[[SMEM]][%{{.*}}] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i64
// CHECK: nvvm.mbarrier.init %[[B0]], %[[C128]] : !llvm.ptr<3>, i32
// CHECK-COUNT-3: nvvm.mbarrier.init %{{.*}}, %[[C128]]
// CHECK-COUNT-4: nvvm.mbarrier.init %{{.*}}, %[[C32]]
// Producer: one try_wait (no suspend hint), the wait loop only when the
// token is false, then the cp.async arrive without pending-count increment.
// CHECK: scf.for
// CHECK:   %[[FULL:.*]] = llvm.getelementptr %[[SMEM]][%{{.*}}] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i64
// CHECK:   %[[EMPTY:.*]] = llvm.getelementptr %[[FULL]][%c4_i32{{(_[0-9]+)?}}] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i64
// CHECK:   %[[TOKEN:.*]] = nvvm.mbarrier.try_wait %[[EMPTY]], %{{.*}} : !llvm.ptr<3>, i32 -> i1
// CHECK:   %[[NOT:.*]] = arith.xori %[[TOKEN]], %true : i1
// CHECK:   scf.if %[[NOT]] {
// CHECK:       nvvm.mbarrier.try_wait.parity %[[EMPTY]], %{{.*}}, %{{.*}} : !llvm.ptr<3>, i32, i32
// CHECK-NOT: llvm.getelementptr
// CHECK:   nvvm.cp.async.mbarrier.arrive %[[FULL]] {noinc = true} : !llvm.ptr<3>
// CHECK: } else {
// CHECK:   nvvm.mbarrier.try_wait %{{.*}}, %{{.*}} : !llvm.ptr<3>, i32 -> i1
// CHECK:   scf.if
// CHECK:   nvvm.mbarrier.arrive %{{.*}} : !llvm.ptr<3> -> i64

// PTX-LABEL: // gpu.binary @cp_async sm_90a
// PTX: elect.sync
// PTX-COUNT-8: mbarrier.init.shared.b64
// PTX: fence.mbarrier_init.release.cluster;
// PTX-NEXT: bar.sync 0;
// PTX-DAG: cp.async.mbarrier.arrive.noinc.shared.b64
// PTX-DAG: mbarrier.arrive.shared.b64
// PTX-DAG: mbarrier.try_wait.parity.shared.b64

// BIN90: gpu.binary @cp_async [#gpu.object<#nvvm.target<chip = "sm_90a", features = "+ptx88">, {{.*}}bin = "\7FELF
// BIN100: gpu.binary @cp_async [#gpu.object<#nvvm.target<chip = "sm_100a", features = "+ptx88">, {{.*}}bin = "\7FELF
