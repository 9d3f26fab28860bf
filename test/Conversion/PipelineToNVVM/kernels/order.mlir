// PipelineOrder: two warpgroups take turns, in order, on a depth-2 ring.
// RUN: pipeline-opt %s --convert-pipeline-to-nvvm --cse | FileCheck %s
// RUN: pipeline-opt %s --pipeline-to-cubin="chip=sm_90a format=isa" | %python %S/../Inputs/ptx.py > %t.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx
// RUN: %if ptxas %{ pipeline-opt %s --pipeline-to-cubin="chip=sm_90a format=bin" | FileCheck %s --check-prefix=BIN90 %}
// RUN: %if ptxas %{ pipeline-opt %s --pipeline-to-cubin="chip=sm_100a format=bin" | FileCheck %s --check-prefix=BIN100 %}

!P = !pipeline.pipeline<order, stages = 2, producer = #pipeline.group<warp, 4>, length = 2>
!S = !pipeline.state<2, producer_consumer>

module attributes {gpu.container_module} {
gpu.module @order {
  gpu.func @kernel(%k: i32) kernel {
    %p = pipeline.create {name = "mma_order"} : !P
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %c128 = arith.constant 128 : i32
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %gid = arith.divui %tid, %c128 : i32
    %s0 = pipeline.order.state %p, %gid : !P -> !S
    %s = scf.for %i = %c0 to %k step %c1 iter_args(%st = %s0) -> (!S) : i32 {
      pipeline.order.wait %p, %st, %gid : !P, !S
      %next = pipeline.order.arrive %p, %st, %gid : !P, !S
      scf.yield %next : !S
    }
    gpu.return
  }
}
}

// depth * length = 4 barriers, each counting one warpgroup (128 threads).
// CHECK-LABEL: gpu.module @order
// CHECK: llvm.mlir.global internal @__pipeline_barriers_mma_order() {{.*}} : !llvm.array<4 x i64>
// CHECK: %[[BASE:.*]] = llvm.mlir.addressof @__pipeline_barriers_mma_order
// CHECK-DAG: %[[C128:.*]] = arith.constant 128 : i32
// CHECK-COUNT-4: nvvm.mbarrier.init %{{.*}}, %[[C128]] : !llvm.ptr<3>, i32
// CHECK-NOT: nvvm.mbarrier.init
// Start state: index 0, phase = (group_id == 0), count 0.
// CHECK: %[[GID:.*]] = arith.divui %{{.*}}, %{{.*}} : i32
// CHECK: %[[FIRST:.*]] = arith.cmpi eq, %[[GID]], %{{.*}} : i32
// CHECK: %[[PH0:.*]] = arith.extui %[[FIRST]] : i1 to i32
// CHECK: llvm.insertvalue %[[PH0]], %{{.*}}[1]
// wait: barrier index * length + group_id.
// CHECK: scf.for
// CHECK:   %[[IDX:.*]] = llvm.extractvalue %{{.*}}[0]
// CHECK:   %[[PH:.*]] = llvm.extractvalue %{{.*}}[1]
// CHECK:   %[[L:.*]] = arith.constant 2 : i32
// CHECK:   %[[ROW:.*]] = arith.muli %[[IDX]], %[[L]] : i32
// CHECK:   %[[SLOT:.*]] = arith.addi %[[ROW]], %[[GID]] : i32
// CHECK:   %[[BAR:.*]] = llvm.getelementptr %[[BASE]][%[[SLOT]]]
// CHECK:     nvvm.mbarrier.try_wait.parity %[[BAR]], %[[PH]], %{{.*}} : !llvm.ptr<3>, i32, i32
// arrive: barrier index * length + (group_id + 1) % length, then advance.
// CHECK:   %[[G1:.*]] = arith.addi %[[GID]], %{{.*}} : i32
// CHECK:   %[[NEXTG:.*]] = arith.remui %[[G1]], %[[L]] : i32
// CHECK:   %[[SLOT2:.*]] = arith.addi %[[ROW]], %[[NEXTG]] : i32
// CHECK:   %[[BAR2:.*]] = llvm.getelementptr %[[BASE]][%[[SLOT2]]]
// CHECK:   nvvm.mbarrier.arrive %[[BAR2]] : !llvm.ptr<3> -> i64
// CHECK:   scf.yield

// PTX-LABEL: // gpu.binary @order sm_90a
// PTX-COUNT-4: mbarrier.init.shared.b64
// PTX: fence.mbarrier_init.release.cluster;
// PTX-NEXT: bar.sync 0;
// PTX: mbarrier.try_wait.parity.shared.b64
// PTX: mbarrier.arrive.shared.b64

// BIN90: gpu.binary @order [#gpu.object<#nvvm.target<chip = "sm_90a", features = "+ptx88">, {{.*}}bin = "\7FELF
// BIN100: gpu.binary @order [#gpu.object<#nvvm.target<chip = "sm_100a", features = "+ptx88">, {{.*}}bin = "\7FELF
