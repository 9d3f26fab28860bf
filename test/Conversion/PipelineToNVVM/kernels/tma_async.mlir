// PipelineTmaAsync: warp 4 loads with TMA, warps 0-3 consume.
//   @one_cta:  no cluster.
//   @mcast_m:  cluster (1, 2, 1, 1), loads multicast along M.
//   @mcast_n:  cluster (1, 1, 2, 1), loads multicast along N, deferred init
//              sync through pipeline.init_arrive / init_wait.
// RUN: pipeline-opt %s --convert-pipeline-to-nvvm --cse | FileCheck %s
// RUN: pipeline-opt %s --pipeline-to-cubin="chip=sm_90a format=isa" | %python %S/../Inputs/ptx.py > %t.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx
// RUN: %if ptxas %{ pipeline-opt %s --pipeline-to-cubin="chip=sm_90a format=bin" | FileCheck %s --check-prefix=BIN90 %}
// RUN: %if ptxas %{ pipeline-opt %s --pipeline-to-cubin="chip=sm_100a format=bin" | FileCheck %s --check-prefix=BIN100 %}

!P1 = !pipeline.pipeline<tma_async, stages = 3, producer = #pipeline.group<thread, 1>,
                         consumer = #pipeline.group<thread, 4>, tx_count = 4096>
!PM = !pipeline.pipeline<tma_async, stages = 3, producer = #pipeline.group<thread, 1>,
                         consumer = #pipeline.group<thread, 8>, tx_count = 4096,
                         cluster = #pipeline.cluster<1, 2, 1, 1>, multicast = m>
!PN = !pipeline.pipeline<tma_async, stages = 3, producer = #pipeline.group<thread, 1>,
                         consumer = #pipeline.group<thread, 8>, tx_count = 4096,
                         cluster = #pipeline.cluster<1, 1, 2, 1>, multicast = n>
!PS = !pipeline.state<3, producer>
!CS = !pipeline.state<3, consumer>

module attributes {gpu.container_module} {

gpu.module @one_cta {
  gpu.func @kernel(%desc: !llvm.ptr, %smem: !llvm.ptr<3>, %k: i32) kernel {
    %p = pipeline.create {name = "ab"} : !P1
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %c4 = arith.constant 4 : i32
    %c32 = arith.constant 32 : i32
    %c4096 = arith.constant 4096 : i32
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %warp = arith.divui %tid, %c32 : i32
    %is_producer = arith.cmpi eq, %warp, %c4 : i32
    scf.if %is_producer {
      %s0 = pipeline.state.make : !PS
      %s = scf.for %i = %c0 to %k step %c1 iter_args(%st = %s0) -> (!PS) : i32 {
        pipeline.producer.acquire %p, %st : !P1, !PS
        %idx = pipeline.state.index %st : !PS
        %off = arith.muli %idx, %c4096 : i32
        %dst = llvm.getelementptr %smem[%off] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
        %lane = nvvm.read.ptx.sreg.laneid : i32
        %issuer = arith.cmpi eq, %lane, %c0 : i32
        scf.if %issuer {
          pipeline.copy.tma_load %p, %st, %desc[%c0, %i] to %dst {bytes = 4096 : i64}
              : !P1, !PS, !llvm.ptr, !llvm.ptr<3>
        }
        pipeline.producer.commit %p, %st : !P1, !PS
        %next = pipeline.state.advance %st : !PS
        scf.yield %next : !PS
      }
      pipeline.producer.tail %p, %s : !P1, !PS
    } else {
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

gpu.module @mcast_m {
  gpu.func @kernel(%desc: !llvm.ptr, %smem: !llvm.ptr<3>, %k: i32) kernel {
    %p = pipeline.create {name = "b_tile"} : !PM
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %c4 = arith.constant 4 : i32
    %c32 = arith.constant 32 : i32
    %c4096 = arith.constant 4096 : i32
    %both = arith.constant 3 : i16
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %warp = arith.divui %tid, %c32 : i32
    %is_producer = arith.cmpi eq, %warp, %c4 : i32
    scf.if %is_producer {
      %s0 = pipeline.state.make : !PS
      %s = scf.for %i = %c0 to %k step %c1 iter_args(%st = %s0) -> (!PS) : i32 {
        pipeline.producer.acquire %p, %st : !PM, !PS
        %idx = pipeline.state.index %st : !PS
        %off = arith.muli %idx, %c4096 : i32
        %dst = llvm.getelementptr %smem[%off] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
        %lane = nvvm.read.ptx.sreg.laneid : i32
        %issuer = arith.cmpi eq, %lane, %c0 : i32
        scf.if %issuer {
          // Each CTA loads half of the tile and multicasts it to both.
          pipeline.copy.tma_load %p, %st, %desc[%c0, %i] to %dst multicast %both {bytes = 2048 : i64}
              : !PM, !PS, !llvm.ptr, !llvm.ptr<3>
        }
        pipeline.producer.commit %p, %st : !PM, !PS
        %next = pipeline.state.advance %st : !PS
        scf.yield %next : !PS
      }
      pipeline.producer.tail %p, %s : !PM, !PS
    } else {
      %s0 = pipeline.state.make : !CS
      %s = scf.for %i = %c0 to %k step %c1 iter_args(%st = %s0) -> (!CS) : i32 {
        pipeline.consumer.wait %p, %st : !PM, !CS
        pipeline.consumer.release %p, %st : !PM, !CS
        %next = pipeline.state.advance %st : !CS
        scf.yield %next : !CS
      }
    }
    gpu.return
  }
}

gpu.module @mcast_n {
  gpu.func @kernel(%desc: !llvm.ptr, %smem: !llvm.ptr<3>, %k: i32) kernel {
    %p = pipeline.create {defer_sync, name = "a_tile"} : !PN
    pipeline.init_arrive {cluster_size = 2, relaxed}
    pipeline.init_wait {cluster_size = 2}
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %c4 = arith.constant 4 : i32
    %c32 = arith.constant 32 : i32
    %c4096 = arith.constant 4096 : i32
    %both = arith.constant 3 : i16
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %warp = arith.divui %tid, %c32 : i32
    %is_producer = arith.cmpi eq, %warp, %c4 : i32
    scf.if %is_producer {
      %s0 = pipeline.state.make : !PS
      %s = scf.for %i = %c0 to %k step %c1 iter_args(%st = %s0) -> (!PS) : i32 {
        pipeline.producer.acquire %p, %st : !PN, !PS
        %idx = pipeline.state.index %st : !PS
        %off = arith.muli %idx, %c4096 : i32
        %dst = llvm.getelementptr %smem[%off] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
        %lane = nvvm.read.ptx.sreg.laneid : i32
        %issuer = arith.cmpi eq, %lane, %c0 : i32
        scf.if %issuer {
          pipeline.copy.tma_load %p, %st, %desc[%i, %c0] to %dst multicast %both {bytes = 2048 : i64}
              : !PN, !PS, !llvm.ptr, !llvm.ptr<3>
        }
        pipeline.producer.commit %p, %st : !PN, !PS
        %next = pipeline.state.advance %st : !PS
        scf.yield %next : !PS
      }
      pipeline.producer.tail %p, %s : !PN, !PS
    } else {
      %s0 = pipeline.state.make : !CS
      %s = scf.for %i = %c0 to %k step %c1 iter_args(%st = %s0) -> (!CS) : i32 {
        pipeline.consumer.wait %p, %st : !PN, !CS
        pipeline.consumer.release %p, %st : !PN, !CS
        %next = pipeline.state.advance %st : !CS
        scf.yield %next : !CS
      }
    }
    gpu.return
  }
}

}

// One CTA: full count 1 (the elected expect_tx), empty count 4: as in CuTe
// DSL, lane 0 of each of the 4 consumer warps releases.
// CHECK-LABEL: gpu.module @one_cta
// CHECK: llvm.mlir.global internal @__pipeline_barriers_ab() {addr_space = 3 : i32, alignment = 8 : i64} : !llvm.array<6 x i64>
// CHECK-DAG: %[[C1:.*]] = arith.constant 1 : i32
// CHECK-DAG: %[[C4:.*]] = arith.constant 4 : i32
// Two counts: one elected lane per barrier group (full, then empty), which
// ptxas makes straight-line code.
// CHECK: nvvm.elect.sync
// CHECK-COUNT-3: nvvm.mbarrier.init %{{.*}}, %[[C1]] : !llvm.ptr<3>, i32
// CHECK-NOT: nvvm.mbarrier.init
// CHECK: nvvm.elect.sync
// CHECK-COUNT-3: nvvm.mbarrier.init %{{.*}}, %[[C4]] : !llvm.ptr<3>, i32
// CHECK: nvvm.fence.mbarrier.init
// CHECK-NEXT: nvvm.barrier0
// Acquire = wait on empty[index], then one elected lane arms full[index].
// CHECK: scf.for
// CHECK:   %[[IDX:.*]] = llvm.extractvalue %{{.*}}[0]
// CHECK:   %[[FULL:.*]] = llvm.getelementptr %{{.*}}[%[[IDX]]] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i64
// CHECK:   %[[EMPTY0:.*]] = llvm.getelementptr %[[FULL]][%c3_i32{{(_[0-9]+)?}}] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i64
// CHECK:   nvvm.mbarrier.try_wait.parity %[[EMPTY0]]
// CHECK:   %[[E:.*]] = nvvm.elect.sync -> i1
// CHECK:   scf.if %[[E]] {
// CHECK:     nvvm.mbarrier.arrive.expect_tx %[[FULL]], %{{.*}} : !llvm.ptr<3>, i32
// The copy signals the same full barrier; commit adds nothing for TMA.
// CHECK:   scf.if
// The destination's shared::cta address reused as its shared::cluster one.
// CHECK:     %[[BITS:.*]] = llvm.ptrtoint %{{.*}} : !llvm.ptr<3> to i32
// CHECK:     %[[DST:.*]] = llvm.inttoptr %[[BITS]] : i32 to !llvm.ptr<7>
// CHECK:     nvvm.cp.async.bulk.tensor.shared.cluster.global %[[DST]], %{{.*}}, %[[FULL]], box[%{{.*}}, %{{.*}}] : !llvm.ptr<7>, !llvm.ptr
// CHECK-NOT: nvvm.mbarrier.arrive
// CHECK: scf.yield
// Tail: S = 3 waits.
// CHECK-COUNT-3: nvvm.mbarrier.try_wait.parity
// CHECK: } else {
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK: nvvm.mbarrier.arrive %{{.*}} : !llvm.ptr<3> -> i64

// Cluster of 2 along M: each consumer warp signals both CTAs, so the empty
// count is 2 CTAs * 4 warps; lanes 0-1 arrive remotely through mapa.
// CHECK-LABEL: gpu.module @mcast_m
// CHECK-DAG: %[[C1:.*]] = arith.constant 1 : i32
// CHECK-DAG: %[[C8:.*]] = arith.constant 8 : i32
// CHECK-COUNT-3: nvvm.mbarrier.init %{{.*}}, %[[C1]] : !llvm.ptr<3>, i32
// CHECK-COUNT-3: nvvm.mbarrier.init %{{.*}}, %[[C8]] : !llvm.ptr<3>, i32
// CHECK: nvvm.fence.mbarrier.init
// CHECK-NEXT: nvvm.cluster.arrive.relaxed
// CHECK-NEXT: nvvm.cluster.wait
// CHECK: nvvm.mbarrier.arrive.expect_tx
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global {{.*}} multicast_mask = %{{.*}} : !llvm.ptr<7>, !llvm.ptr
// CHECK: } else {
// CHECK: %[[CFULL:.*]] = llvm.getelementptr %{{.*}}[%{{.*}}] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i64
// CHECK: nvvm.mbarrier.try_wait.parity %[[CFULL]]
// CHECK: %[[EMPTY:.*]] = llvm.getelementptr %[[CFULL]][%c3_i32{{(_[0-9]+)?}}] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i64
// CHECK: %[[LANE:.*]] = nvvm.read.ptx.sreg.laneid : i32
// CHECK: %[[SIG:.*]] = arith.cmpi ult, %[[LANE]], %[[C2:.*]] : i32
// CHECK: %[[DSTRANK:.*]] = arith.remui %[[LANE]], %[[C2]] : i32
// Both CTAs of a 1-D cluster along M share the tile: no lane is dropped.
// CHECK-NOT: arith.andi
// CHECK: scf.if %[[SIG]] {
// CHECK:   %[[REMOTE:.*]] = nvvm.mapa %[[EMPTY]], %[[DSTRANK]] : !llvm.ptr<3> -> !llvm.ptr<7>
// CHECK:   nvvm.mbarrier.arrive %[[REMOTE]] : !llvm.ptr<7>

// Deferred sync: create emits only inits + fence; init_arrive/init_wait
// are the cluster barrier.
// CHECK-LABEL: gpu.module @mcast_n
// CHECK: nvvm.fence.mbarrier.init
// CHECK-NEXT: nvvm.cluster.arrive.relaxed
// CHECK-NEXT: nvvm.cluster.wait
// CHECK-NOT: nvvm.barrier0
// CHECK: nvvm.mapa

// PTX-LABEL: // gpu.binary @one_cta sm_90a
// PTX: .shared .align 8 .b8 __pipeline_barriers_ab[48];
// PTX: elect.sync
// PTX-COUNT-6: mbarrier.init.shared.b64
// PTX: fence.mbarrier_init.release.cluster;
// PTX-NEXT: bar.sync 0;
// PTX-DAG: mbarrier.arrive.expect_tx.shared.b64
// PTX-DAG: cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [
// PTX-DAG: mbarrier.arrive.shared.b64
// PTX-NOT: cvta
// PTX-NOT: mapa
// PTX-NOT: multicast
// PTX-LABEL: // gpu.binary @mcast_m sm_90a
// PTX: fence.mbarrier_init.release.cluster;
// PTX-NEXT: barrier.cluster.arrive.relaxed;
// PTX-NEXT: barrier.cluster.wait;
// PTX-DAG: mbarrier.arrive.expect_tx.shared.b64
// PTX-DAG: cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster [
// PTX-DAG: mapa.shared::cluster.u32
// PTX-DAG: mbarrier.arrive.shared::cluster.b64
// PTX-LABEL: // gpu.binary @mcast_n sm_90a
// PTX: fence.mbarrier_init.release.cluster;
// PTX-NEXT: barrier.cluster.arrive.relaxed;
// PTX-NEXT: barrier.cluster.wait;
// PTX-DAG: cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster [
// PTX-DAG: mapa.shared::cluster.u32
// PTX-DAG: mbarrier.arrive.shared::cluster.b64

// BIN90: gpu.binary @one_cta [#gpu.object<#nvvm.target<chip = "sm_90a", features = "+ptx88">, {{.*}}bin = "\7FELF
// BIN90: gpu.binary @mcast_m [#gpu.object<#nvvm.target<chip = "sm_90a", features = "+ptx88">, {{.*}}bin = "\7FELF
// BIN90: gpu.binary @mcast_n [#gpu.object<#nvvm.target<chip = "sm_90a", features = "+ptx88">, {{.*}}bin = "\7FELF
// BIN100: gpu.binary @one_cta [#gpu.object<#nvvm.target<chip = "sm_100a", features = "+ptx88">, {{.*}}bin = "\7FELF
// BIN100: gpu.binary @mcast_m [#gpu.object<#nvvm.target<chip = "sm_100a", features = "+ptx88">, {{.*}}bin = "\7FELF
// BIN100: gpu.binary @mcast_n [#gpu.object<#nvvm.target<chip = "sm_100a", features = "+ptx88">, {{.*}}bin = "\7FELF
