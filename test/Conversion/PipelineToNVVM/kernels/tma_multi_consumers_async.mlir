// PipelineTmaMultiConsumersAsync (sm_100a): warp 0 loads with TMA; warp 1
// (MMA) and warps 2-5 (async) both consume every stage and release it
// through their own mechanism (op_type).
//   @one_cta: no cluster.
//   @pair:    2-CTA MMA, cluster (2, 1, 1, 1).
// RUN: pipeline-opt %s --convert-pipeline-to-nvvm=chip=sm_100a --cse | FileCheck %s
// RUN: pipeline-opt %s --pipeline-to-cubin="chip=sm_100a format=isa" | %python %S/../Inputs/ptx.py > %t.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx
// RUN: %if ptxas %{ pipeline-opt %s --pipeline-to-cubin="chip=sm_100a format=bin" | FileCheck %s --check-prefix=BIN100 %}

!P1 = !pipeline.pipeline<tma_multi_consumers_async, stages = 2,
                         producer = #pipeline.group<thread, 1>,
                         consumer = #pipeline.group<thread, 129>, tx_count = 4096>
!P2 = !pipeline.pipeline<tma_multi_consumers_async, stages = 2,
                         producer = #pipeline.group<thread, 1>,
                         consumer = #pipeline.group<thread, 129>, tx_count = 8192,
                         cluster = #pipeline.cluster<2, 1, 1, 1>, cta_group = 2>
!PS = !pipeline.state<2, producer>
!CS = !pipeline.state<2, consumer>

module attributes {gpu.container_module} {
gpu.module @one_cta {
  gpu.func @kernel(%desc: !llvm.ptr, %smem: !llvm.ptr<3>, %k: i32) kernel {
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
    %c4096 = arith.constant 4096 : i32
    %is_tma = arith.cmpi eq, %warp, %c0 : i32
    %is_mma = arith.cmpi eq, %warp, %c1 : i32
    %mma = arith.andi %is_mma, %leader : i1
    %is_async = arith.cmpi ugt, %warp, %c1 : i32
    scf.if %is_tma {
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
    }
    scf.if %mma {
      %s0 = pipeline.state.make : !CS
      %s = scf.for %i = %c0 to %k step %c1 iter_args(%st = %s0) -> (!CS) : i32 {
        pipeline.consumer.wait %p, %st : !P1, !CS
        pipeline.consumer.release %p, %st {op_type = #pipeline.op_type<tcgen05_mma>} : !P1, !CS
        %next = pipeline.state.advance %st : !CS
        scf.yield %next : !CS
      }
    }
    scf.if %is_async {
      %s0 = pipeline.state.make : !CS
      %s = scf.for %i = %c0 to %k step %c1 iter_args(%st = %s0) -> (!CS) : i32 {
        pipeline.consumer.wait %p, %st : !P1, !CS
        pipeline.consumer.release %p, %st {op_type = #pipeline.op_type<async_thread>} : !P1, !CS
        %next = pipeline.state.advance %st : !CS
        scf.yield %next : !CS
      }
    }
    gpu.return
  }
}

gpu.module @pair {
  gpu.func @kernel(%desc: !llvm.ptr, %smem: !llvm.ptr<3>, %k: i32) kernel {
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
    %c4096 = arith.constant 4096 : i32
    %is_tma = arith.cmpi eq, %warp, %c0 : i32
    %is_mma = arith.cmpi eq, %warp, %c1 : i32
    %mma = arith.andi %is_mma, %leader : i1
    %is_async = arith.cmpi ugt, %warp, %c1 : i32
    scf.if %is_tma {
      %s0 = pipeline.state.make : !PS
      %s = scf.for %i = %c0 to %k step %c1 iter_args(%st = %s0) -> (!PS) : i32 {
        pipeline.producer.acquire %p, %st : !P2, !PS
        %idx = pipeline.state.index %st : !PS
        %off = arith.muli %idx, %c4096 : i32
        %dst = llvm.getelementptr %smem[%off] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
        %lane = nvvm.read.ptx.sreg.laneid : i32
        %issuer = arith.cmpi eq, %lane, %c0 : i32
        scf.if %issuer {
          pipeline.copy.tma_load %p, %st, %desc[%c0, %i] to %dst {bytes = 4096 : i64}
              : !P2, !PS, !llvm.ptr, !llvm.ptr<3>
        }
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
        pipeline.consumer.release %p, %st {op_type = #pipeline.op_type<tcgen05_mma>} : !P2, !CS
        %next = pipeline.state.advance %st : !CS
        scf.yield %next : !CS
      }
    }
    scf.if %is_async {
      %s0 = pipeline.state.make : !CS
      %s = scf.for %i = %c0 to %k step %c1 iter_args(%st = %s0) -> (!CS) : i32 {
        pipeline.consumer.wait %p, %st : !P2, !CS
        pipeline.consumer.release %p, %st {op_type = #pipeline.op_type<async_thread>} : !P2, !CS
        %next = pipeline.state.advance %st : !CS
        scf.yield %next : !CS
      }
    }
    gpu.return
  }
}
}

// Empty count: 1 MMA commit + 128 async threads.
// CHECK-LABEL: gpu.module @one_cta
// CHECK-DAG: %[[C1:.*]] = arith.constant 1 : i32
// CHECK-DAG: %[[C129:.*]] = arith.constant 129 : i32
// CHECK-COUNT-2: nvvm.mbarrier.init %{{.*}}, %[[C1]]
// CHECK-COUNT-2: nvvm.mbarrier.init %{{.*}}, %[[C129]]
// CHECK: nvvm.mbarrier.arrive.expect_tx
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global
// The MMA consumer releases with tcgen05.commit, the async one arrives.
// CHECK: nvvm.tcgen05.commit %{{.*}} : !llvm.ptr<3>
// CHECK: nvvm.mbarrier.arrive %{{.*}} : !llvm.ptr<3> -> i64
// The leader test (rank % 2 == 0) is CSE'd with the kernel's own.
// CHECK-LABEL: gpu.module @pair
// CHECK: %[[RANK:.*]] = nvvm.read.ptx.sreg.cluster.ctarank
// CHECK: %[[ODD:.*]] = arith.remui %[[RANK]], %c2_i32
// CHECK: %[[LEAD:.*]] = arith.cmpi eq, %[[ODD]], %c0_i32
// CHECK: scf.for
// CHECK:   %[[E:.*]] = nvvm.elect.sync -> i1
// CHECK:   arith.andi %[[LEAD]], %[[E]] : i1
// CHECK:   nvvm.mbarrier.arrive.expect_tx
// CHECK:   nvvm.cp.async.bulk.tensor.shared.cluster.global {{.*}} {group = #nvvm.cta_group<cta_2>}
// CHECK: nvvm.tcgen05.commit %{{.*}}, multicast_mask = %{{.*}} {group = #nvvm.cta_group<cta_2>}
// CHECK: nvvm.mbarrier.arrive %{{.*}} : !llvm.ptr<3> -> i64

// PTX-LABEL: // gpu.binary @one_cta sm_100a
// PTX-DAG: mbarrier.arrive.expect_tx.shared.b64
// PTX-DAG: cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [
// PTX-DAG: tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64
// PTX-DAG: mbarrier.arrive.shared.b64
// PTX-LABEL: // gpu.binary @pair sm_100a
// PTX-DAG: cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.cta_group::2 [
// PTX-DAG: tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64
// PTX-DAG: mbarrier.arrive.shared.b64

// BIN100: gpu.binary @one_cta [#gpu.object<#nvvm.target<chip = "sm_100a", features = "+ptx88">, {{.*}}bin = "\7FELF
// BIN100: gpu.binary @pair [#gpu.object<#nvvm.target<chip = "sm_100a", features = "+ptx88">, {{.*}}bin = "\7FELF
