// PipelineClcFetchAsync (sm_100a): the scheduler warp (warp 0 of CTA 0)
// asks cluster launch control for the next tile; the response lands in
// every CTA of the cluster and completes each CTA's full barrier; warps 1-4
// of every CTA read it and release the stage on CTA 0.
//   @one_cta: no cluster.
//   @pair:    cluster (1, 2, 1, 1): lanes 0-1 of the scheduler warp arm
//             both CTAs' full barriers, consumers release remotely.
// RUN: pipeline-opt %s --convert-pipeline-to-nvvm=chip=sm_100a --cse | FileCheck %s
// RUN: pipeline-opt %s --pipeline-to-cubin="chip=sm_100a format=isa" | %python %S/../Inputs/ptx.py > %t.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx
// RUN: %if ptxas %{ pipeline-opt %s --pipeline-to-cubin="chip=sm_100a format=bin" | FileCheck %s --check-prefix=BIN100 %}

!P1 = !pipeline.pipeline<clc_fetch_async, stages = 2, producer = #pipeline.group<thread, 1>,
                         consumer = #pipeline.group<warp, 4>, tx_count = 16>
!P2 = !pipeline.pipeline<clc_fetch_async, stages = 2, producer = #pipeline.group<thread, 1>,
                         consumer = #pipeline.group<thread, 256>, tx_count = 16,
                         cluster = #pipeline.cluster<1, 2, 1, 1>>
!PS = !pipeline.state<2, producer>
!CS = !pipeline.state<2, consumer>

module attributes {gpu.container_module} {
gpu.module @one_cta {
  gpu.func @kernel(%smem: !llvm.ptr<3>, %k: i32) kernel {
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
    %is_sched = arith.cmpi eq, %warp, %c0 : i32
    %rank0 = arith.cmpi eq, %rank, %c0 : i32
    %sched = arith.andi %is_sched, %rank0 : i1
    %is_consumer = arith.cmpi ugt, %warp, %c0 : i32
    scf.if %sched {
      %s0 = pipeline.state.make : !PS
      %s = scf.for %i = %c0 to %k step %c1 iter_args(%st = %s0) -> (!PS) : i32 {
        pipeline.producer.acquire %p, %st : !P1, !PS
        %bar = pipeline.producer.barrier %p, %st : !P1, !PS
        %idx = pipeline.state.index %st : !PS
        %resp = llvm.getelementptr %smem[%idx] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i128
        %lane = nvvm.read.ptx.sreg.laneid : i32
        %issuer = arith.cmpi eq, %lane, %c0 : i32
        scf.if %issuer {
          nvvm.clusterlaunchcontrol.try.cancel %resp, %bar
        }
        pipeline.producer.commit %p, %st : !P1, !PS
        %next = pipeline.state.advance %st : !PS
        scf.yield %next : !PS
      }
      pipeline.producer.tail %p, %s : !P1, !PS
    }
    scf.if %is_consumer {
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
  gpu.func @kernel(%smem: !llvm.ptr<3>, %k: i32) kernel {
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
    %is_sched = arith.cmpi eq, %warp, %c0 : i32
    %rank0 = arith.cmpi eq, %rank, %c0 : i32
    %sched = arith.andi %is_sched, %rank0 : i1
    %is_consumer = arith.cmpi ugt, %warp, %c0 : i32
    scf.if %sched {
      %s0 = pipeline.state.make : !PS
      %s = scf.for %i = %c0 to %k step %c1 iter_args(%st = %s0) -> (!PS) : i32 {
        pipeline.producer.acquire %p, %st : !P2, !PS
        %bar = pipeline.producer.barrier %p, %st : !P2, !PS
        %idx = pipeline.state.index %st : !PS
        %resp = llvm.getelementptr %smem[%idx] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i128
        %lane = nvvm.read.ptx.sreg.laneid : i32
        %issuer = arith.cmpi eq, %lane, %c0 : i32
        scf.if %issuer {
          nvvm.clusterlaunchcontrol.try.cancel multicast, %resp, %bar
        }
        pipeline.producer.commit %p, %st : !P2, !PS
        %next = pipeline.state.advance %st : !PS
        scf.yield %next : !PS
      }
      pipeline.producer.tail %p, %s : !P2, !PS
    }
    scf.if %is_consumer {
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

// One CTA: lane 0 of the scheduler warp arms the local full barrier with
// the 16-byte response; commit adds nothing (the response completes it).
// CHECK-LABEL: gpu.module @one_cta
// CHECK: scf.for
// CHECK:   %[[FULL:.*]] = llvm.getelementptr %{{.*}}[%{{.*}}] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i64
// CHECK:   %[[EMPTY0:.*]] = llvm.getelementptr %[[FULL]][%c2_i32{{(_[0-9]+)?}}] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i64
// CHECK:   nvvm.mbarrier.try_wait.parity %[[EMPTY0]]
// CHECK:   %[[TX:.*]] = arith.constant 16 : i32
// CHECK:   %[[LANE:.*]] = nvvm.read.ptx.sreg.laneid : i32
// CHECK:   %[[L0:.*]] = arith.cmpi ult, %[[LANE]], %{{.*}} : i32
// CHECK:   scf.if %[[L0]] {
// CHECK:     nvvm.mbarrier.arrive.expect_tx %[[FULL]], %[[TX]] : !llvm.ptr<3>, i32
// CHECK:   nvvm.clusterlaunchcontrol.try.cancel
// CHECK-NOT: nvvm.mbarrier.arrive
// CHECK:   scf.yield
// CHECK-LABEL: gpu.module @pair
// Lane r arms CTA r's full barrier.
// CHECK: scf.for
// CHECK:   %[[FULL:.*]] = llvm.getelementptr %{{.*}}[%{{.*}}] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i64
// CHECK:   %[[EMPTY0:.*]] = llvm.getelementptr %[[FULL]][%c2_i32{{(_[0-9]+)?}}] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i64
// CHECK:   nvvm.mbarrier.try_wait.parity %[[EMPTY0]]
// CHECK:   %[[LANE:.*]] = nvvm.read.ptx.sreg.laneid : i32
// CHECK:   %[[ACTIVE:.*]] = arith.cmpi ult, %[[LANE]], %{{.*}} : i32
// CHECK:   scf.if %[[ACTIVE]] {
// CHECK:     %[[REMOTE:.*]] = nvvm.mapa %[[FULL]], %[[LANE]] : !llvm.ptr<3> -> !llvm.ptr<7>
// CHECK:     nvvm.mbarrier.arrive.expect_tx %[[REMOTE]], %{{.*}} {scope = #nvvm.mem_scope<cluster>} : !llvm.ptr<7>, i32
// Consumers of every CTA release CTA 0's empty barrier.
// CHECK: llvm.insertvalue %c0_i32, %{{.*}}[1]
// CHECK: %[[CFULL:.*]] = llvm.getelementptr %{{.*}}[%{{.*}}] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i64
// CHECK: nvvm.mbarrier.try_wait.parity %[[CFULL]]
// CHECK: %[[EMPTY:.*]] = llvm.getelementptr %[[CFULL]][%c2_i32{{(_[0-9]+)?}}] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i64
// CHECK: %[[R0:.*]] = nvvm.mapa %[[EMPTY]], %c0_i32 : !llvm.ptr<3> -> !llvm.ptr<7>
// CHECK: nvvm.mbarrier.arrive %[[R0]]

// PTX-LABEL: // gpu.binary @one_cta sm_100a
// PTX-DAG: mbarrier.arrive.expect_tx.shared.b64
// PTX-DAG: clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes.b128
// PTX-DAG: mbarrier.arrive.shared.b64
// PTX-LABEL: // gpu.binary @pair sm_100a
// PTX-DAG: mbarrier.arrive.expect_tx.release.cluster.shared::cluster.b64
// PTX-DAG: clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes.multicast::cluster::all.b128
// PTX-DAG: mapa.shared::cluster.u32 {{.*}}, 0;
// PTX-DAG: mbarrier.arrive.shared::cluster.b64

// BIN100: gpu.binary @one_cta [#gpu.object<#nvvm.target<chip = "sm_100a", features = "+ptx88">, {{.*}}bin = "\7FELF
// BIN100: gpu.binary @pair [#gpu.object<#nvvm.target<chip = "sm_100a", features = "+ptx88">, {{.*}}bin = "\7FELF
