// PipelineTmaStore: one thread stores an epilogue tile per iteration with
// TMA; completion is tracked by bulk async-groups, not mbarriers. After the
// tail, a TmaStoreFence-style commit/wait.
// RUN: pipeline-opt %s --convert-pipeline-to-nvvm --cse | FileCheck %s
// RUN: pipeline-opt %s --pipeline-to-cubin="chip=sm_90a format=isa" | %python %S/../Inputs/ptx.py > %t.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx
// RUN: %if ptxas %{ pipeline-opt %s --pipeline-to-cubin="chip=sm_90a format=bin" | FileCheck %s --check-prefix=BIN90 %}
// RUN: %if ptxas %{ pipeline-opt %s --pipeline-to-cubin="chip=sm_100a format=bin" | FileCheck %s --check-prefix=BIN100 %}

!P = !pipeline.pipeline<tma_store, stages = 3>
!PS = !pipeline.state<3, producer>

module attributes {gpu.container_module} {
gpu.module @tma_store {
  gpu.func @kernel(%desc: !llvm.ptr, %smem: !llvm.ptr<3>, %k: i32) kernel {
    %p = pipeline.create : !P
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %c2048 = arith.constant 2048 : i32
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %is_storer = arith.cmpi eq, %tid, %c0 : i32
    scf.if %is_storer {
      %s0 = pipeline.state.make : !PS
      %s = scf.for %i = %c0 to %k step %c1 iter_args(%st = %s0) -> (!PS) : i32 {
        pipeline.producer.acquire %p, %st : !P, !PS
        %idx = pipeline.state.index %st : !PS
        %off = arith.muli %idx, %c2048 : i32
        %src = llvm.getelementptr %smem[%off] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
        pipeline.copy.tma_store %desc[%i, %c0] from %src : !llvm.ptr, !llvm.ptr<3>
        pipeline.producer.commit %p, %st : !P, !PS
        %next = pipeline.state.advance %st : !PS
        scf.yield %next : !PS
      }
      pipeline.producer.tail %p, %s : !P, !PS
      pipeline.copy.tma_store %desc[%k, %c0] from %smem : !llvm.ptr, !llvm.ptr<3>
      pipeline.bulk_group.commit
      pipeline.bulk_group.wait {pending = 0 : i64}
    }
    gpu.return
  }
}
}

// No barriers, no init, no CTA sync.
// CHECK-LABEL: gpu.module @tma_store
// CHECK-NOT: llvm.mlir.global
// CHECK-NOT: nvvm.mbarrier
// CHECK-NOT: nvvm.barrier0
// CHECK: scf.for
// Acquire: at most S-1 = 2 groups may still read shared memory.
// CHECK:   nvvm.cp.async.bulk.wait_group 2 {read}
// CHECK:   nvvm.cp.async.bulk.tensor.global.shared.cta %{{.*}}, %{{.*}}, box[%{{.*}}, %{{.*}}] : !llvm.ptr, {{.*}}<3>
// CHECK:   nvvm.cp.async.bulk.commit.group
// CHECK: scf.yield
// Tail: all groups done reading.
// CHECK: nvvm.cp.async.bulk.wait_group 0 {read}
// CHECK: nvvm.cp.async.bulk.tensor.global.shared.cta
// CHECK: nvvm.cp.async.bulk.commit.group
// bulk_group.wait without `read` waits for the writes too.
// CHECK: nvvm.cp.async.bulk.wait_group 0
// CHECK-NOT: {read}
// CHECK: gpu.return

// PTX-LABEL: // gpu.binary @tma_store sm_90a
// PTX-NOT: mbarrier
// PTX: cp.async.bulk.wait_group.read 2;
// PTX: cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [
// PTX: cp.async.bulk.commit_group;
// PTX: cp.async.bulk.wait_group.read 0;
// PTX: cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [
// PTX: cp.async.bulk.commit_group;
// PTX: cp.async.bulk.wait_group 0;
// PTX-NOT: mbarrier

// BIN90: gpu.binary @tma_store [#gpu.object<#nvvm.target<chip = "sm_90a", features = "+ptx88">, {{.*}}bin = "\7FELF
// BIN100: gpu.binary @tma_store [#gpu.object<#nvvm.target<chip = "sm_100a", features = "+ptx88">, {{.*}}bin = "\7FELF
