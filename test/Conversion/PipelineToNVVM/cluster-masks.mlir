// Which CTAs an arrive reaches on a 2-D cluster, where it depends on the
// CTA's coordinate. Cluster (V, M, N, L) = (1, 2, 2, 1): rank = m + 2n.
// RUN: pipeline-opt %s --convert-pipeline-to-nvvm=chip=sm_100a --cse --split-input-file | FileCheck %s

// TmaAsync, multicast along M: lane r (r < 4) signals CTA r only if CTA r
// has the same n (rank / 2) as this CTA.
!P = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>,
                        consumer = #pipeline.group<thread, 8>, tx_count = 1024,
                        cluster = #pipeline.cluster<1, 2, 2, 1>, multicast = m>
// CHECK-LABEL: gpu.func @tma_async_mcast_m
gpu.module @m {
  gpu.func @tma_async_mcast_m(%smem: !llvm.ptr<3>) kernel {
    %p = pipeline.create storage(%smem : !llvm.ptr<3>) : !P
    %cs = pipeline.state.make : !pipeline.state<2, consumer>
    // CHECK: nvvm.cluster.wait
    // CHECK: %[[STAGE:.*]] = llvm.getelementptr %{{.*}}[%{{.*}}] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i64
    // CHECK: %[[EMPTY:.*]] = llvm.getelementptr %[[STAGE]][%c2_i32{{(_[0-9]+)?}}] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i64
    // CHECK: %[[LANE:.*]] = nvvm.read.ptx.sreg.laneid : i32
    // CHECK: %[[C4:.*]] = arith.constant 4 : i32
    // CHECK: %[[SIG:.*]] = arith.cmpi ult, %[[LANE]], %[[C4]] : i32
    // CHECK: %[[DST:.*]] = arith.remui %[[LANE]], %[[C4]] : i32
    // CHECK: %[[RANK:.*]] = nvvm.read.ptx.sreg.cluster.ctarank : i32
    // CHECK: %[[MY_Q:.*]] = arith.divui %[[RANK]], %[[C2:.*]] : i32
    // CHECK: %[[MY_N:.*]] = arith.remui %[[MY_Q]], %[[C2]] : i32
    // CHECK: %[[DST_Q:.*]] = arith.divui %[[DST]], %[[C2]] : i32
    // CHECK: %[[DST_N:.*]] = arith.remui %[[DST_Q]], %[[C2]] : i32
    // CHECK: %[[SAME_N:.*]] = arith.cmpi eq, %[[MY_N]], %[[DST_N]] : i32
    // CHECK: %[[GO:.*]] = arith.andi %[[SIG]], %[[SAME_N]] : i1
    // CHECK: scf.if %[[GO]] {
    // CHECK:   %[[R:.*]] = nvvm.mapa %[[EMPTY]], %[[DST]] : !llvm.ptr<3> -> !llvm.ptr<7>
    // CHECK:   nvvm.mbarrier.arrive %[[R]] : !llvm.ptr<7>
    pipeline.consumer.release %p, %cs : !P, !pipeline.state<2, consumer>
    gpu.return
  }
}

// -----

// TmaAsync, multicast along M and N: same row or same column.
!P = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>,
                        consumer = #pipeline.group<thread, 12>, tx_count = 1024,
                        cluster = #pipeline.cluster<1, 2, 2, 1>, multicast = mn>
// CHECK-LABEL: gpu.func @tma_async_mcast_mn
gpu.module @m {
  gpu.func @tma_async_mcast_mn(%smem: !llvm.ptr<3>) kernel {
    %p = pipeline.create storage(%smem : !llvm.ptr<3>) : !P
    %cs = pipeline.state.make : !pipeline.state<2, consumer>
    // CHECK: nvvm.cluster.wait
    // CHECK: %[[SAME_M:.*]] = arith.cmpi eq, %{{.*}}, %{{.*}} : i32
    // CHECK: %[[SAME_N:.*]] = arith.cmpi eq, %{{.*}}, %{{.*}} : i32
    // CHECK: %[[ROW_OR_COL:.*]] = arith.ori %[[SAME_M]], %[[SAME_N]] : i1
    // CHECK: arith.andi %{{.*}}, %[[ROW_OR_COL]] : i1
    // CHECK: nvvm.mapa
    pipeline.consumer.release %p, %cs : !P, !pipeline.state<2, consumer>
    gpu.return
  }
}

// -----

// TmaUmma, multicast along M and N: mask = (0b0011 << 2n) | (0b0101 << m).
!P = !pipeline.pipeline<tma_umma, stages = 2, producer = #pipeline.group<thread, 1>,
                        consumer = #pipeline.group<thread, 3>, tx_count = 1024,
                        cluster = #pipeline.cluster<1, 2, 2, 1>, multicast = mn>
// CHECK-LABEL: gpu.func @tma_umma_mcast_mn
gpu.module @m {
  gpu.func @tma_umma_mcast_mn(%smem: !llvm.ptr<3>) kernel {
    %p = pipeline.create storage(%smem : !llvm.ptr<3>) : !P
    %cs = pipeline.state.make : !pipeline.state<2, consumer>
    // CHECK: nvvm.cluster.wait
    // CHECK: %[[STAGE:.*]] = llvm.getelementptr %{{.*}}[%{{.*}}] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i64
    // CHECK: %[[EMPTY:.*]] = llvm.getelementptr %[[STAGE]][%c2_i32{{(_[0-9]+)?}}] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i64
    // CHECK: %[[RANK:.*]] = nvvm.read.ptx.sreg.cluster.ctarank : i32
    // CHECK: %[[M:.*]] = arith.remui %[[RANK]], %[[C2:.*]] : i32
    // CHECK: %[[Q:.*]] = arith.divui %[[RANK]], %[[C2]] : i32
    // CHECK: %[[N:.*]] = arith.remui %[[Q]], %[[C2]] : i32
    // CHECK: %[[SHN:.*]] = arith.muli %[[N]], %[[C2]] : i32
    // CHECK: %[[ROW:.*]] = arith.shli %[[C3:.*]], %[[SHN]] : i32
    // CHECK: %[[C5:.*]] = arith.constant 5 : i32
    // CHECK: %[[COL:.*]] = arith.shli %[[C5]], %[[M]] : i32
    // CHECK: %[[MASK32:.*]] = arith.ori %[[ROW]], %[[COL]] : i32
    // CHECK: %[[MASK:.*]] = arith.trunci %[[MASK32]] : i32 to i16
    // CHECK: %[[E:.*]] = nvvm.elect.sync -> i1
    // CHECK: scf.if %[[E]] {
    // CHECK:   nvvm.tcgen05.commit %[[EMPTY]], multicast_mask = %[[MASK]] : !llvm.ptr<3>, i16
    pipeline.consumer.release %p, %cs : !P, !pipeline.state<2, consumer>
    gpu.return
  }
}
