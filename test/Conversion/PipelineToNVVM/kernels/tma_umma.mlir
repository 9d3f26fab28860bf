// PipelineTmaUmma (sm_100a): warp 0 loads with TMA, warp 1 issues the MMAs
// and releases stages with tcgen05.commit.
//   @one_cta:       no cluster, cta_group::1, unmasked commit.
//   @pair:          2-CTA MMA, cluster (2, 1, 1, 1): the leader arms and
//                   releases for both CTAs (mask 0b11, cta_group::2).
//   @pair_mcast_m:  cluster (2, 2, 1, 1), loads multicast along M: the
//                   leader's barrier receives a 2048-byte slice from each
//                   of the 4 CTAs of the mask, into both CTAs of the pair
//                   (tx_count 16384, pipeline-verify-protocol check 5).
//   @mcast_n:       cluster (1, 1, 2, 1), loads multicast along N.
// RUN: pipeline-opt %s --convert-pipeline-to-nvvm=chip=sm_100a --cse | FileCheck %s
// RUN: pipeline-opt %s --pipeline-to-cubin="chip=sm_100a format=isa" | %python %S/../Inputs/ptx.py > %t.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx
// RUN: %if ptxas %{ pipeline-opt %s --pipeline-to-cubin="chip=sm_100a format=bin" | FileCheck %s --check-prefix=BIN100 %}
// tcgen05 needs sm_100a: the lowering refuses sm_90a with a diagnostic.
// RUN: not pipeline-opt %s --pipeline-to-cubin="chip=sm_90a format=isa" 2>&1 | FileCheck %s --check-prefix=SM90

!P1 = !pipeline.pipeline<tma_umma, stages = 4, producer = #pipeline.group<thread, 1>,
                         consumer = #pipeline.group<thread, 1>, tx_count = 4096>
!P2 = !pipeline.pipeline<tma_umma, stages = 4, producer = #pipeline.group<thread, 1>,
                         consumer = #pipeline.group<thread, 1>, tx_count = 8192,
                         cluster = #pipeline.cluster<2, 1, 1, 1>, cta_group = 2>
!P3 = !pipeline.pipeline<tma_umma, stages = 4, producer = #pipeline.group<thread, 1>,
                         consumer = #pipeline.group<thread, 2>, tx_count = 16384,
                         cluster = #pipeline.cluster<2, 2, 1, 1>, multicast = m, cta_group = 2>
!P4 = !pipeline.pipeline<tma_umma, stages = 4, producer = #pipeline.group<thread, 1>,
                         consumer = #pipeline.group<thread, 2>, tx_count = 4096,
                         cluster = #pipeline.cluster<1, 1, 2, 1>, multicast = n>
!PS = !pipeline.state<4, producer>
!CS = !pipeline.state<4, consumer>

module attributes {gpu.container_module} {

gpu.module @one_cta {
  gpu.func @kernel(%desc: !llvm.ptr, %smem: !llvm.ptr<3>, %k: i32) kernel {
    %p = pipeline.create {name = "one_cta"} : !P1
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %c32 = arith.constant 32 : i32
    %c4096 = arith.constant 4096 : i32
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %warp = arith.divui %tid, %c32 : i32
    %is_tma = arith.cmpi eq, %warp, %c0 : i32
    %is_mma = arith.cmpi eq, %warp, %c1 : i32
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
    %mma = arith.andi %is_mma, %is_mma : i1
    scf.if %mma {
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
  gpu.func @kernel(%desc: !llvm.ptr, %smem: !llvm.ptr<3>, %k: i32) kernel {
    %p = pipeline.create {name = "pair"} : !P2
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %c32 = arith.constant 32 : i32
    %c4096 = arith.constant 4096 : i32
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %warp = arith.divui %tid, %c32 : i32
    %is_tma = arith.cmpi eq, %warp, %c0 : i32
    %is_mma = arith.cmpi eq, %warp, %c1 : i32
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
    %rank = nvvm.read.ptx.sreg.cluster.ctarank : i32
    %c2 = arith.constant 2 : i32
    %peer = arith.remui %rank, %c2 : i32
    %leader = arith.cmpi eq, %peer, %c0 : i32
    %mma = arith.andi %is_mma, %leader : i1
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

gpu.module @pair_mcast_m {
  gpu.func @kernel(%desc: !llvm.ptr, %smem: !llvm.ptr<3>, %k: i32) kernel {
    %p = pipeline.create {name = "pair_mcast_m"} : !P3
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %c32 = arith.constant 32 : i32
    %c4096 = arith.constant 4096 : i32
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %warp = arith.divui %tid, %c32 : i32
    %is_tma = arith.cmpi eq, %warp, %c0 : i32
    %is_mma = arith.cmpi eq, %warp, %c1 : i32
    scf.if %is_tma {
      %s0 = pipeline.state.make : !PS
      %s = scf.for %i = %c0 to %k step %c1 iter_args(%st = %s0) -> (!PS) : i32 {
        pipeline.producer.acquire %p, %st : !P3, !PS
        %idx = pipeline.state.index %st : !PS
        %off = arith.muli %idx, %c4096 : i32
        %dst = llvm.getelementptr %smem[%off] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
        %lane = nvvm.read.ptx.sreg.laneid : i32
        %issuer = arith.cmpi eq, %lane, %c0 : i32
        scf.if %issuer {
          %mask = arith.constant 15 : i16
          pipeline.copy.tma_load %p, %st, %desc[%c0, %i] to %dst multicast %mask {bytes = 2048 : i64}
              : !P3, !PS, !llvm.ptr, !llvm.ptr<3>
        }
        pipeline.producer.commit %p, %st : !P3, !PS
        %next = pipeline.state.advance %st : !PS
        scf.yield %next : !PS
      }
      pipeline.producer.tail %p, %s : !P3, !PS
    }
    %rank = nvvm.read.ptx.sreg.cluster.ctarank : i32
    %c2 = arith.constant 2 : i32
    %peer = arith.remui %rank, %c2 : i32
    %leader = arith.cmpi eq, %peer, %c0 : i32
    %mma = arith.andi %is_mma, %leader : i1
    scf.if %mma {
      %s0 = pipeline.state.make : !CS
      %s = scf.for %i = %c0 to %k step %c1 iter_args(%st = %s0) -> (!CS) : i32 {
        pipeline.consumer.wait %p, %st : !P3, !CS
        pipeline.consumer.release %p, %st : !P3, !CS
        %next = pipeline.state.advance %st : !CS
        scf.yield %next : !CS
      }
    }
    gpu.return
  }
}

gpu.module @mcast_n {
  gpu.func @kernel(%desc: !llvm.ptr, %smem: !llvm.ptr<3>, %k: i32) kernel {
    %p = pipeline.create {name = "mcast_n"} : !P4
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %c32 = arith.constant 32 : i32
    %c4096 = arith.constant 4096 : i32
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %warp = arith.divui %tid, %c32 : i32
    %is_tma = arith.cmpi eq, %warp, %c0 : i32
    %is_mma = arith.cmpi eq, %warp, %c1 : i32
    scf.if %is_tma {
      %s0 = pipeline.state.make : !PS
      %s = scf.for %i = %c0 to %k step %c1 iter_args(%st = %s0) -> (!PS) : i32 {
        pipeline.producer.acquire %p, %st : !P4, !PS
        %idx = pipeline.state.index %st : !PS
        %off = arith.muli %idx, %c4096 : i32
        %dst = llvm.getelementptr %smem[%off] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
        %lane = nvvm.read.ptx.sreg.laneid : i32
        %issuer = arith.cmpi eq, %lane, %c0 : i32
        scf.if %issuer {
          %mask = arith.constant 3 : i16
          pipeline.copy.tma_load %p, %st, %desc[%c0, %i] to %dst multicast %mask {bytes = 2048 : i64}
              : !P4, !PS, !llvm.ptr, !llvm.ptr<3>
        }
        pipeline.producer.commit %p, %st : !P4, !PS
        %next = pipeline.state.advance %st : !PS
        scf.yield %next : !PS
      }
      pipeline.producer.tail %p, %s : !P4, !PS
    }
    %mma = arith.andi %is_mma, %is_mma : i1
    scf.if %mma {
      %s0 = pipeline.state.make : !CS
      %s = scf.for %i = %c0 to %k step %c1 iter_args(%st = %s0) -> (!CS) : i32 {
        pipeline.consumer.wait %p, %st : !P4, !CS
        pipeline.consumer.release %p, %st : !P4, !CS
        %next = pipeline.state.advance %st : !CS
        scf.yield %next : !CS
      }
    }
    gpu.return
  }
}

}

// CHECK-LABEL: gpu.module @one_cta
// CHECK: nvvm.fence.mbarrier.init
// CHECK-NEXT: nvvm.barrier0
// CHECK: nvvm.mbarrier.arrive.expect_tx
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global {{.*}} box[%{{.*}}, %{{.*}}] : !llvm.ptr<7>, !llvm.ptr
// MMA release: one elected tcgen05.commit on empty[index], no mask.
// Consumer (MMA warp) loop: state starts at phase 0.
// CHECK: llvm.insertvalue %c0_i32, %{{.*}}[1]
// CHECK: %[[CFULL:.*]] = llvm.getelementptr %{{.*}}[%{{.*}}] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i64
// CHECK: nvvm.mbarrier.try_wait.parity %[[CFULL]]
// CHECK: %[[EMPTY:.*]] = llvm.getelementptr %[[CFULL]][%c4_i32{{(_[0-9]+)?}}] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i64
// CHECK: %[[E:.*]] = nvvm.elect.sync -> i1
// CHECK: scf.if %[[E]] {
// CHECK:   nvvm.tcgen05.commit %[[EMPTY]] : !llvm.ptr<3>

// 2-CTA: only the leader (rank % 2 == 0) arms the full barrier, with both
// CTAs' bytes; every copy completes on the leader's barrier (peer bit
// cleared) through the cta_group::2 form; the commit reaches both CTAs.
// CHECK-LABEL: gpu.module @pair
// CHECK: nvvm.cluster.arrive.relaxed
// CHECK: scf.for
// CHECK:   %[[FULL:.*]] = llvm.getelementptr %{{.*}}[%{{.*}}] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i64
// CHECK:   %[[EMPTY0:.*]] = llvm.getelementptr %[[FULL]][%c4_i32{{(_[0-9]+)?}}] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i64
// CHECK:   nvvm.mbarrier.try_wait.parity %[[EMPTY0]]
// CHECK:   %[[TX:.*]] = arith.constant 8192 : i32
// CHECK:   %[[E:.*]] = nvvm.elect.sync -> i1
// CHECK:   %[[RANK:.*]] = nvvm.read.ptx.sreg.cluster.ctarank : i32
// CHECK:   %[[V:.*]] = arith.remui %[[RANK]], %{{.*}} : i32
// CHECK:   %[[LEAD:.*]] = arith.cmpi eq, %[[V]], %{{.*}} : i32
// CHECK:   %[[GO:.*]] = arith.andi %[[LEAD]], %[[E]] : i1
// CHECK:   scf.if %[[GO]] {
// CHECK:     nvvm.mbarrier.arrive.expect_tx %[[FULL]], %[[TX]] : !llvm.ptr<3>, i32
// CHECK:   %[[ADDR:.*]] = llvm.ptrtoint %[[FULL]] : !llvm.ptr<3> to i64
// CHECK:   %[[PEERBIT:.*]] = arith.constant -16777217 : i64
// CHECK:   %[[LADDR:.*]] = arith.andi %[[ADDR]], %[[PEERBIT]] : i64
// CHECK:   %[[LBAR:.*]] = llvm.inttoptr %[[LADDR]] : i64 to !llvm.ptr<3>
// CHECK:   nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %{{.*}}, %[[LBAR]], box[%{{.*}}, %{{.*}}] {group = #nvvm.cta_group<cta_2>}
// Consumer (MMA warp) loop: state starts at phase 0.
// CHECK: llvm.insertvalue %c0_i32, %{{.*}}[1]
// CHECK: %[[MASK:.*]] = arith.constant 3 : i16
// CHECK: nvvm.tcgen05.commit %{{.*}}, multicast_mask = %[[MASK]] {group = #nvvm.cta_group<cta_2>} : !llvm.ptr<3>, i16

// Multicast along M with pairs: the two pairs of the M mode, 0b1111.
// CHECK-LABEL: gpu.module @pair_mcast_m
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global {{.*}} multicast_mask = %{{.*}} {group = #nvvm.cta_group<cta_2>}
// CHECK: %[[MASK:.*]] = arith.constant 15 : i16
// CHECK: nvvm.tcgen05.commit %{{.*}}, multicast_mask = %[[MASK]] {group = #nvvm.cta_group<cta_2>}

// Multicast along N without pairs: both CTAs of the N mode, cta_group::1.
// CHECK-LABEL: gpu.module @mcast_n
// CHECK-NOT: cta_group
// CHECK: %[[MASK:.*]] = arith.constant 3 : i16
// CHECK: nvvm.tcgen05.commit %{{.*}}, multicast_mask = %[[MASK]] : !llvm.ptr<3>, i16

// PTX-LABEL: // gpu.binary @one_cta sm_100a
// PTX: .target sm_100a
// PTX-DAG: mbarrier.arrive.expect_tx.shared.b64
// PTX-DAG: cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [
// PTX-DAG: tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64
// PTX-LABEL: // gpu.binary @pair sm_100a
// PTX: barrier.cluster.arrive.relaxed;
// PTX-DAG: mbarrier.arrive.expect_tx.shared.b64
// PTX-DAG: cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.cta_group::2 [
// PTX-DAG: tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64
// PTX-LABEL: // gpu.binary @pair_mcast_m sm_100a
// PTX-DAG: cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster.cta_group::2 [
// PTX-DAG: tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64
// PTX-LABEL: // gpu.binary @mcast_n sm_100a
// PTX-DAG: cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster [
// PTX-DAG: tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64

// BIN100: gpu.binary @one_cta [#gpu.object<#nvvm.target<chip = "sm_100a", features = "+ptx88">, {{.*}}bin = "\7FELF
// BIN100: gpu.binary @pair [#gpu.object<#nvvm.target<chip = "sm_100a", features = "+ptx88">, {{.*}}bin = "\7FELF
// BIN100: gpu.binary @pair_mcast_m [#gpu.object<#nvvm.target<chip = "sm_100a", features = "+ptx88">, {{.*}}bin = "\7FELF
// BIN100: gpu.binary @mcast_n [#gpu.object<#nvvm.target<chip = "sm_100a", features = "+ptx88">, {{.*}}bin = "\7FELF

// SM90: error: PipelineTmaUmma uses tcgen05 and needs sm_100a; chip is sm_90a
