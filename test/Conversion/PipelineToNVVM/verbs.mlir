// Producer/consumer verb variants: elect_one / syncwarp_before arrives
// (flash-attention), extra_tx on TMA acquire, producer.barrier.
// RUN: pipeline-opt %s --convert-pipeline-to-nvvm --cse --split-input-file | FileCheck %s

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 4>,
                        consumer = #pipeline.group<thread, 4>>
// CHECK-LABEL: gpu.func @elect_one
gpu.module @m {
  gpu.func @elect_one(%smem: !llvm.ptr<3>) kernel {
    %p = pipeline.create storage(%smem : !llvm.ptr<3>) : !P
    %ps = pipeline.state.make : !pipeline.state<2, producer>
    %cs = pipeline.state.make : !pipeline.state<2, consumer>
    // Equal full and empty counts: one elected block initializes all four
    // barriers (a block per group only where the counts differ).
    // CHECK: nvvm.elect.sync
    // CHECK-COUNT-4: nvvm.mbarrier.init
    // CHECK-NOT: nvvm.elect.sync
    // One arrive per warp: __syncwarp, then the elected lane arrives.
    // CHECK: nvvm.barrier0
    // CHECK: %[[FULL:.*]] = llvm.getelementptr
    // CHECK: %[[ALL:.*]] = arith.constant -1 : i32
    // CHECK: nvvm.bar.warp.sync %[[ALL]] : i32
    // CHECK: %[[E:.*]] = nvvm.elect.sync -> i1
    // CHECK: scf.if %[[E]] {
    // CHECK:   nvvm.mbarrier.arrive %[[FULL]] : !llvm.ptr<3> -> i64
    pipeline.producer.commit %p, %ps {elect_one, syncwarp_before} : !P, !pipeline.state<2, producer>
    // Without syncwarp_before: no bar.warp.sync.
    // CHECK: %[[STAGE:.*]] = llvm.getelementptr %{{.*}}[%{{.*}}] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i64
    // CHECK: %[[EMPTY:.*]] = llvm.getelementptr %[[STAGE]][%c2_i32{{(_[0-9]+)?}}] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i64
    // CHECK-NOT: nvvm.bar.warp.sync
    // CHECK: %[[E2:.*]] = nvvm.elect.sync -> i1
    // CHECK: scf.if %[[E2]] {
    // CHECK:   nvvm.mbarrier.arrive %[[EMPTY]] : !llvm.ptr<3> -> i64
    pipeline.consumer.release %p, %cs {elect_one} : !P, !pipeline.state<2, consumer>
    gpu.return
  }
}

// -----

!T = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>,
                        consumer = #pipeline.group<thread, 1>, tx_count = 1024>
// CHECK-LABEL: gpu.func @extra_tx
// CHECK-SAME: %[[EXTRA:[^:]*]]: i32
gpu.module @m {
  gpu.func @extra_tx(%smem: !llvm.ptr<3>, %extra: i32) kernel {
    %p = pipeline.create storage(%smem : !llvm.ptr<3>) {defer_sync} : !T
    // defer_sync: fence only, no CTA barrier.
    // CHECK: nvvm.fence.mbarrier.init
    // CHECK-NOT: nvvm.barrier0
    %ps = pipeline.state.make : !pipeline.state<2, producer>
    // CHECK: %[[FULL:.*]] = llvm.getelementptr %{{.*}}[%{{.*}}] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i64
    // CHECK: %[[EMPTY:.*]] = llvm.getelementptr %[[FULL]][%c2_i32{{(_[0-9]+)?}}] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i64
    // CHECK: nvvm.mbarrier.try_wait.parity %[[EMPTY]]
    // CHECK: %[[TX:.*]] = arith.constant 1024 : i32
    // CHECK: %[[SUM:.*]] = arith.addi %[[TX]], %[[EXTRA]] : i32
    // CHECK: nvvm.mbarrier.arrive.expect_tx %[[FULL]], %[[SUM]] : !llvm.ptr<3>, i32
    pipeline.producer.acquire %p, %ps extra_tx %extra : !T, !pipeline.state<2, producer>
    // producer.barrier is full[index] of the same state (CSE'd with the
    // barrier that acquire armed).
    // CHECK: nvvm.mbarrier.inval %[[FULL]]
    %bar = pipeline.producer.barrier %p, %ps : !T, !pipeline.state<2, producer>
    nvvm.mbarrier.inval %bar : !llvm.ptr<3>
    gpu.return
  }
}
