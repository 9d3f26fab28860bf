// PipelineAsyncUmma (sm_100a): warps 0-3 fill stages with ordinary stores
// and arrive; warp 4 issues the MMAs and releases with tcgen05.commit.
//   @one_cta: no cluster.
//   @pair:    2-CTA MMA, cluster (2, 1, 1, 1): both CTAs' producers arrive
//             on the leader's full barrier (mapa + shared::cluster).
// RUN: pipeline-opt %s --convert-pipeline-to-nvvm=chip=sm_100a --cse | FileCheck %s
// RUN: pipeline-opt %s --pipeline-to-cubin="chip=sm_100a format=isa" | %python %S/../Inputs/ptx.py > %t.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx
// RUN: %if ptxas %{ pipeline-opt %s --pipeline-to-cubin="chip=sm_100a format=bin" | FileCheck %s --check-prefix=BIN100 %}

!P1 = !pipeline.pipeline<async_umma, stages = 2, producer = #pipeline.group<warp, 4>,
                         consumer = #pipeline.group<thread, 1>>
!P2 = !pipeline.pipeline<async_umma, stages = 2, producer = #pipeline.group<warp, 4>,
                         consumer = #pipeline.group<thread, 1>,
                         cluster = #pipeline.cluster<2, 1, 1, 1>, cta_group = 2>
!PS = !pipeline.state<2, producer>
!CS = !pipeline.state<2, consumer>

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
    %c4 = arith.constant 4 : i32
    %is_producer = arith.cmpi ult, %warp, %c4 : i32
    %is_mma = arith.cmpi eq, %warp, %c4 : i32
    %mma = arith.andi %is_mma, %leader : i1
    scf.if %is_producer {
      %s0 = pipeline.state.make : !PS
      %s = scf.for %i = %c0 to %k step %c1 iter_args(%st = %s0) -> (!PS) : i32 {
        pipeline.producer.acquire %p, %st : !P1, !PS
        pipeline.producer.commit %p, %st : !P1, !PS
        %next = pipeline.state.advance %st : !PS
        scf.yield %next : !PS
      }
      pipeline.producer.tail %p, %s : !P1, !PS
    }
    scf.if %is_mma {
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
    %c4 = arith.constant 4 : i32
    %is_producer = arith.cmpi ult, %warp, %c4 : i32
    %is_mma = arith.cmpi eq, %warp, %c4 : i32
    %mma = arith.andi %is_mma, %leader : i1
    scf.if %is_producer {
      %s0 = pipeline.state.make : !PS
      %s = scf.for %i = %c0 to %k step %c1 iter_args(%st = %s0) -> (!PS) : i32 {
        pipeline.producer.acquire %p, %st : !P2, !PS
        pipeline.producer.commit %p, %st : !P2, !PS
        %next = pipeline.state.advance %st : !PS
        scf.yield %next : !PS
      }
      pipeline.producer.tail %p, %s : !P2, !PS
    }
    scf.if %mma {
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

// Full count: 4 producer warps (128); with a CTA pair both CTAs' producers
// arrive on the leader's full barrier (256). Empty count: one commit.
// CHECK-LABEL: gpu.module @one_cta
// CHECK-DAG: %[[C128:.*]] = arith.constant 128 : i32
// CHECK-DAG: %[[C1:.*]] = arith.constant 1 : i32
// CHECK-COUNT-2: nvvm.mbarrier.init %{{.*}}, %[[C128]]
// CHECK-COUNT-2: nvvm.mbarrier.init %{{.*}}, %[[C1]]
// CHECK: nvvm.barrier0
// CHECK: scf.for
// CHECK:   nvvm.mbarrier.try_wait.parity
// CHECK:   nvvm.mbarrier.arrive %{{.*}} : !llvm.ptr<3> -> i64
// CHECK: nvvm.elect.sync
// CHECK: nvvm.tcgen05.commit %{{.*}} : !llvm.ptr<3>
// CHECK-LABEL: gpu.module @pair
// CHECK-DAG: %[[C256:.*]] = arith.constant 256 : i32
// CHECK-DAG: %[[C1:.*]] = arith.constant 1 : i32
// CHECK-COUNT-2: nvvm.mbarrier.init %{{.*}}, %[[C256]]
// CHECK-COUNT-2: nvvm.mbarrier.init %{{.*}}, %[[C1]]
// CHECK: nvvm.cluster.arrive.relaxed
// CHECK: scf.for
// CHECK:   %[[FULL:.*]] = llvm.getelementptr %{{.*}}[%{{.*}}] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i64
// CHECK:   %[[EMPTY:.*]] = llvm.getelementptr %[[FULL]][%c2_i32{{(_[0-9]+)?}}] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i64
// CHECK:   nvvm.mbarrier.try_wait.parity %[[EMPTY]]
// Leader rank = rank - rank % 2 (the remainder is shared with the kernel's
// own leader test after CSE).
// CHECK:   %[[LEAD:.*]] = arith.subi %[[RANK:.*]], %[[ODD:.*]] : i32
// CHECK:   %[[REMOTE:.*]] = nvvm.mapa %[[FULL]], %[[LEAD]] : !llvm.ptr<3> -> !llvm.ptr<7>
// CHECK:   nvvm.mbarrier.arrive %[[REMOTE]] : !llvm.ptr<7>
// CHECK: %[[MASK:.*]] = arith.constant 3 : i16
// CHECK: nvvm.tcgen05.commit %{{.*}}, multicast_mask = %[[MASK]] {group = #nvvm.cta_group<cta_2>}

// PTX-LABEL: // gpu.binary @one_cta sm_100a
// PTX-DAG: mbarrier.arrive.shared.b64
// PTX-DAG: tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64
// PTX-LABEL: // gpu.binary @pair sm_100a
// PTX-DAG: mapa.shared::cluster.u32
// PTX-DAG: mbarrier.arrive.shared::cluster.b64
// PTX-DAG: tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64

// BIN100: gpu.binary @one_cta [#gpu.object<#nvvm.target<chip = "sm_100a", features = "+ptx88">, {{.*}}bin = "\7FELF
// BIN100: gpu.binary @pair [#gpu.object<#nvvm.target<chip = "sm_100a", features = "+ptx88">, {{.*}}bin = "\7FELF
