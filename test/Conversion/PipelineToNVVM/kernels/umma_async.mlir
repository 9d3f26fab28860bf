// PipelineUmmaAsync (sm_100a): warp 0 (the MMA warp) commits accumulators
// with tcgen05.commit; warps 1-4 (the epilogue) wait and release.
//   @one_cta: no cluster; 3 stages.
//   @pair:    2-CTA MMA, cluster (2, 1, 1, 1): the leader's commit reaches
//             both CTAs (mask 0b11), both epilogues release the leader's
//             stage, and only the leader runs the producer (and its tail).
// RUN: pipeline-opt %s --convert-pipeline-to-nvvm=chip=sm_100a --cse | FileCheck %s
// RUN: pipeline-opt %s --pipeline-to-cubin="chip=sm_100a format=isa" | %python %S/../Inputs/ptx.py > %t.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx
// RUN: %if ptxas %{ pipeline-opt %s --pipeline-to-cubin="chip=sm_100a format=bin" | FileCheck %s --check-prefix=BIN100 %}

!P1 = !pipeline.pipeline<umma_async, stages = 3, producer = #pipeline.group<thread, 1>,
                         consumer = #pipeline.group<warp, 4>>
!P2 = !pipeline.pipeline<umma_async, stages = 3, producer = #pipeline.group<thread, 1>,
                         consumer = #pipeline.group<warp, 4>,
                         cluster = #pipeline.cluster<2, 1, 1, 1>, cta_group = 2>
!PS = !pipeline.state<3, producer>
!CS = !pipeline.state<3, consumer>

module attributes {gpu.container_module} {
gpu.module @one_cta {
  gpu.func @kernel(%k: i32) kernel {
    %p = pipeline.create {name = "one_cta"} : !P1
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %c2 = arith.constant 2 : i32
    %c32 = arith.constant 32 : i32
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %warp = arith.divui %tid, %c32 : i32
    %rank = nvvm.read.ptx.sreg.cluster.ctarank : i32
    %peer = arith.remui %rank, %c2 : i32
    %leader = arith.cmpi eq, %peer, %c0 : i32
    %is_mma = arith.cmpi eq, %warp, %c0 : i32
    %is_epilogue = arith.cmpi ugt, %warp, %c0 : i32
    %mma = arith.andi %is_mma, %leader : i1
    scf.if %is_mma {
      %s0 = pipeline.state.make : !PS
      %s = scf.for %i = %c0 to %k step %c1 iter_args(%st = %s0) -> (!PS) : i32 {
        pipeline.producer.acquire %p, %st : !P1, !PS
        pipeline.producer.commit %p, %st : !P1, !PS
        %next = pipeline.state.advance %st : !PS
        scf.yield %next : !PS
      }
      pipeline.producer.tail %p, %s : !P1, !PS
    }
    scf.if %is_epilogue {
      %s0 = pipeline.state.make : !CS
      %s = scf.for %i = %c0 to %k step %c1 iter_args(%st = %s0) -> (!CS) : i32 {
        pipeline.consumer.wait %p, %st : !P1, !CS
        pipeline.consumer.release %p, %st : !P1, !CS
        %next = pipeline.state.advance %st : !CS
        scf.yield %next : !CS
      }
    }
    gpu.return
  }
}

gpu.module @pair {
  gpu.func @kernel(%k: i32) kernel {
    %p = pipeline.create {name = "pair"} : !P2
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %c2 = arith.constant 2 : i32
    %c32 = arith.constant 32 : i32
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %warp = arith.divui %tid, %c32 : i32
    %rank = nvvm.read.ptx.sreg.cluster.ctarank : i32
    %peer = arith.remui %rank, %c2 : i32
    %leader = arith.cmpi eq, %peer, %c0 : i32
    %is_mma = arith.cmpi eq, %warp, %c0 : i32
    %is_epilogue = arith.cmpi ugt, %warp, %c0 : i32
    %mma = arith.andi %is_mma, %leader : i1
    scf.if %mma {
      %s0 = pipeline.state.make : !PS
      %s = scf.for %i = %c0 to %k step %c1 iter_args(%st = %s0) -> (!PS) : i32 {
        pipeline.producer.acquire %p, %st : !P2, !PS
        pipeline.producer.commit %p, %st : !P2, !PS
        %next = pipeline.state.advance %st : !PS
        scf.yield %next : !PS
      }
      pipeline.producer.tail %p, %s : !P2, !PS
    }
    scf.if %is_epilogue {
      %s0 = pipeline.state.make : !CS
      %s = scf.for %i = %c0 to %k step %c1 iter_args(%st = %s0) -> (!CS) : i32 {
        pipeline.consumer.wait %p, %st : !P2, !CS
        pipeline.consumer.release %p, %st : !P2, !CS
        %next = pipeline.state.advance %st : !CS
        scf.yield %next : !CS
      }
    }
    gpu.return
  }
}
}

// CHECK-LABEL: gpu.module @one_cta
// CHECK-DAG: %[[C1:.*]] = arith.constant 1 : i32
// CHECK-DAG: %[[C128:.*]] = arith.constant 128 : i32
// CHECK-COUNT-3: nvvm.mbarrier.init %{{.*}}, %[[C1]]
// CHECK-COUNT-3: nvvm.mbarrier.init %{{.*}}, %[[C128]]
// Producer commit: elected, unmasked tcgen05.commit on full[index].
// CHECK: scf.for
// CHECK:   %[[FULL:.*]] = llvm.getelementptr %{{.*}}[%{{.*}}] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i64
// CHECK:   %[[EMPTY0:.*]] = llvm.getelementptr %[[FULL]][%c3_i32{{(_[0-9]+)?}}] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i64
// CHECK:   nvvm.mbarrier.try_wait.parity %[[EMPTY0]]
// CHECK:   %[[E:.*]] = nvvm.elect.sync -> i1
// CHECK:   scf.if %[[E]] {
// CHECK:     nvvm.tcgen05.commit %[[FULL]] : !llvm.ptr<3>
// Tail without a pair: advance S-1 = 2 stages at once, then one wait.
// CHECK: scf.yield
// CHECK: %[[ADV:.*]] = arith.addi %{{.*}}, %c2_i32 : i32
// CHECK: arith.divui %[[ADV]], %c3_i32 : i32
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK-NOT: nvvm.mbarrier.try_wait.parity
// CHECK: llvm.insertvalue %c0_i32, %{{.*}}[1]
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK: nvvm.mbarrier.arrive %{{.*}} : !llvm.ptr<3> -> i64

// CHECK-LABEL: gpu.module @pair
// CHECK-DAG: %[[C1:.*]] = arith.constant 1 : i32
// CHECK-DAG: %[[C256:.*]] = arith.constant 256 : i32
// CHECK-COUNT-3: nvvm.mbarrier.init %{{.*}}, %[[C1]]
// CHECK-COUNT-3: nvvm.mbarrier.init %{{.*}}, %[[C256]]
// CHECK: scf.for
// CHECK:   %[[MASK:.*]] = arith.constant 3 : i16
// CHECK:   nvvm.tcgen05.commit %{{.*}}, multicast_mask = %[[MASK]] {group = #nvvm.cta_group<cta_2>}
// Tail guarded by the leader test (rank % 2 == 0), one wait.
// CHECK: scf.yield
// CHECK: scf.if %{{.*}} {
// CHECK:   %[[ADV:.*]] = arith.addi %{{.*}}, %c2_i32 : i32
// CHECK:     nvvm.mbarrier.try_wait.parity
// CHECK-NOT: nvvm.mbarrier.try_wait.parity
// Epilogue release: remote arrive on the leader's empty barrier.
// CHECK: llvm.insertvalue %c0_i32, %{{.*}}[1]
// CHECK: %[[CFULL:.*]] = llvm.getelementptr %{{.*}}[%{{.*}}] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i64
// CHECK: nvvm.mbarrier.try_wait.parity %[[CFULL]]
// CHECK: %[[EMPTY:.*]] = llvm.getelementptr %[[CFULL]][%c3_i32{{(_[0-9]+)?}}] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i64
// CHECK: %[[L:.*]] = arith.subi %{{.*}}, %{{.*}} : i32
// CHECK: %[[REMOTE:.*]] = nvvm.mapa %[[EMPTY]], %[[L]] : !llvm.ptr<3> -> !llvm.ptr<7>
// CHECK: nvvm.mbarrier.arrive %[[REMOTE]]

// PTX-LABEL: // gpu.binary @one_cta sm_100a
// PTX-DAG: tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64
// PTX-DAG: mbarrier.arrive.shared.b64
// PTX-LABEL: // gpu.binary @pair sm_100a
// PTX-DAG: tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64
// PTX-DAG: mapa.shared::cluster.u32
// PTX-DAG: mbarrier.arrive.shared::cluster.b64

// BIN100: gpu.binary @one_cta [#gpu.object<#nvvm.target<chip = "sm_100a", features = "+ptx88">, {{.*}}bin = "\7FELF
// BIN100: gpu.binary @pair [#gpu.object<#nvvm.target<chip = "sm_100a", features = "+ptx88">, {{.*}}bin = "\7FELF
