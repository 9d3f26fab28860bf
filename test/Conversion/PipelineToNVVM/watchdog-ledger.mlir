// The watchdog's ledger (docs/watchdog.md, "The ledger"): with
// watchdog=true, per barrier of every pipeline, four i32 words of the shared
// array __pipeline_watchdog_ledger (entry = pipeline's first entry + barrier
// index; word 0 init count, 1 arrivals, 2 bytes announced by
// arrive.expect_tx, 3 bytes of the copies issued towards it): thread 0
// zeroes it at kernel entry, pipeline.create's thread 0 stores the init
// counts, and each verb adds what it does with an atomic add in the same
// thread and branch as its arrive or copy; in a cluster, in the CTA whose
// barrier it signals (mapa + generic atom). The dump copies the four words
// of every barrier (words 5..8 of its entry).
// Off: not one op of it.
// RUN: pipeline-opt %s --convert-pipeline-to-nvvm="watchdog=true" --cse | FileCheck %s
// RUN: pipeline-opt %s --convert-pipeline-to-nvvm --cse | FileCheck %s --check-prefix=OFF
// RUN: pipeline-opt %s --pipeline-to-cubin="chip=sm_90a format=isa watchdog=true" | %python %S/Inputs/ptx.py | FileCheck %s --check-prefix=PTX
// RUN: pipeline-opt %s --pipeline-to-cubin="chip=sm_90a format=isa" | %python %S/Inputs/ptx.py | FileCheck %s --check-prefix=PTXOFF
// A CLC pipeline: its acquire counts the arrival (in CTA r for lane r of a
// cluster) but not the 16 bytes it expects: they come from the CLC
// response, not from a copy of ours, and would read as never issued.
// RUN: pipeline-opt %S/kernels/clc_fetch_async.mlir --convert-pipeline-to-nvvm="chip=sm_100a watchdog=true" | FileCheck %s --check-prefix=CLC

!P1 = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>,
                         consumer = #pipeline.group<thread, 1>, tx_count = 4096>
!PM = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>,
                         consumer = #pipeline.group<thread, 2>, tx_count = 4096,
                         cluster = #pipeline.cluster<1, 2, 1, 1>, multicast = m>
!PS = !pipeline.state<2, producer>
!CS = !pipeline.state<2, consumer>

module attributes {gpu.container_module} {
gpu.module @one_cta {
  gpu.func @kernel(%desc: !llvm.ptr, %dst: !llvm.ptr<3>) kernel attributes {known_block_size = array<i32: 32, 1, 1>} {
    %p = pipeline.create {name = "ab"} : !P1
    %c0 = arith.constant 0 : i32
    %ps = pipeline.state.make : !PS
    pipeline.producer.acquire %p, %ps : !P1, !PS
    // One lane issues the copy (every lane that runs a copy op issues one).
    %e = nvvm.elect.sync -> i1
    scf.if %e {
      pipeline.copy.tma_load %p, %ps, %desc[%c0, %c0] to %dst {bytes = 4096 : i64}
          : !P1, !PS, !llvm.ptr, !llvm.ptr<3>
    }
    pipeline.producer.commit %p, %ps : !P1, !PS
    %cs = pipeline.state.make : !CS
    pipeline.consumer.wait %p, %cs : !P1, !CS
    pipeline.consumer.release %p, %cs : !P1, !CS
    gpu.return
  }
}
gpu.module @mcast {
  gpu.func @kernel(%desc: !llvm.ptr, %dst: !llvm.ptr<3>) kernel attributes {known_block_size = array<i32: 32, 1, 1>} {
    %p = pipeline.create {name = "mc"} : !PM
    %c0 = arith.constant 0 : i32
    %both = arith.constant 3 : i16
    %ps = pipeline.state.make : !PS
    pipeline.producer.acquire %p, %ps : !PM, !PS
    %e = nvvm.elect.sync -> i1
    scf.if %e {
      pipeline.copy.tma_load %p, %ps, %desc[%c0, %c0] to %dst multicast %both {bytes = 2048 : i64}
          : !PM, !PS, !llvm.ptr, !llvm.ptr<3>
    }
    %cs = pipeline.state.make : !CS
    pipeline.consumer.wait %p, %cs : !PM, !CS
    pipeline.consumer.release %p, %cs : !PM, !CS
    %next = pipeline.state.advance %ps : !PS
    pipeline.producer.tail %p, %next : !PM, !PS
    gpu.return
  }
}
}

// 'ab': 4 barriers (full[0..2), empty[0..2)), entries 0..3: 16 words.
// CHECK-LABEL: gpu.module @one_cta
// CHECK: llvm.mlir.global internal @__pipeline_watchdog_ledger() {addr_space = 3 : i32, alignment = 8 : i64} : !llvm.array<16 x i32>
// CHECK: gpu.func @kernel
// Entry (thread 0): the 16 words zeroed.
// CHECK: %[[C16:.*]] = arith.constant 16 : i32
// CHECK-NEXT: scf.for %[[W:.*]] = %{{.*}} to %[[C16]]
// CHECK-NEXT: llvm.mlir.addressof @__pipeline_watchdog_ledger
// CHECK-NEXT: llvm.getelementptr %{{.*}}[%[[W]]]
// CHECK-NEXT: llvm.store volatile %c0_i32
// pipeline.create (thread 0): word 0 of full[s] and of empty[s] (s + 2),
// the init count 1 of each, before the inits and the CTA sync.
// CHECK: scf.for %[[S:.*]] = %{{.*}} to %{{.*}}
// CHECK: llvm.store volatile %[[ONE:c1_i32]], %{{.*}}
// CHECK: %[[E:.*]] = arith.addi %[[S]], %c2_i32{{.*}} : i32
// CHECK: llvm.store volatile %[[ONE]], %{{.*}}
// CHECK: nvvm.mbarrier.init
// CHECK: nvvm.barrier0
// producer_acquire, in the elected lane that arms full[s]: +1 arrival
// (word 1), +4096 announced (word 2), then the arrive.expect_tx.
// CHECK: %[[TX:.*]] = arith.constant 4096 : i32
// CHECK-NEXT: nvvm.elect.sync
// CHECK-NEXT: scf.if
// CHECK: %[[A:.*]] = arith.addi %{{.*}}, %c1_i32 : i32
// CHECK-NEXT: llvm.mlir.addressof @__pipeline_watchdog_ledger
// CHECK-NEXT: llvm.getelementptr %{{.*}}[%[[A]]]
// CHECK-NEXT: llvm.atomicrmw add %{{.*}}, %c1_i32 monotonic : !llvm.ptr<3>, i32
// CHECK-NEXT: %[[X:.*]] = arith.addi %{{.*}}, %c2_i32 : i32
// CHECK-NEXT: llvm.getelementptr %{{.*}}[%[[X]]]
// CHECK-NEXT: llvm.atomicrmw add %{{.*}}, %[[TX]] monotonic : !llvm.ptr<3>, i32
// CHECK-NEXT: nvvm.mbarrier.arrive.expect_tx %{{.*}}, %[[TX]]
// tma_load: +4096 issued (word 3) after the copy, in the issuing thread.
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global
// CHECK: %[[C3:.*]] = arith.constant 3 : i32
// CHECK: %[[I:.*]] = arith.addi %{{.*}}, %[[C3]] : i32
// CHECK-NEXT: llvm.mlir.addressof @__pipeline_watchdog_ledger
// CHECK-NEXT: llvm.getelementptr %{{.*}}[%[[I]]]
// CHECK-NEXT: llvm.atomicrmw add %{{.*}}, %[[TX]] monotonic : !llvm.ptr<3>, i32
// producer_commit of a TMA pipeline arrives on nothing: nothing counted.
// CHECK-NOT: llvm.atomicrmw add
// consumer_release: +1 arrival on empty[s] = entry s + 2, by the lane that
// arrives.
// CHECK: %[[ES:.*]] = arith.addi %{{.*}}, %c2_i32 : i32
// CHECK: scf.if
// CHECK-NEXT: arith.addi %[[ES]], %c0_i32
// CHECK: llvm.atomicrmw add %{{.*}}, %c1_i32 monotonic : !llvm.ptr<3>, i32
// CHECK-NEXT: nvvm.mbarrier.arrive
// The dump: per barrier, the 4 ledger words after the probes word (words
// 69..72 for full[0], bit 2 of word 65: has a ledger).
// CHECK: llvm.func internal @__pipeline_watchdog_dump
// CHECK: %[[HAS:.*]] = arith.ori %c4_i32, %{{.*}} : i32
// CHECK-NEXT: llvm.getelementptr %arg0[65]
// CHECK-NEXT: llvm.store volatile %[[HAS]]
// CHECK-NEXT: %[[L:.*]] = llvm.mlir.addressof @__pipeline_watchdog_ledger
// CHECK-NEXT: llvm.getelementptr %[[L]][%c0_i32]
// CHECK-NEXT: llvm.load volatile
// CHECK-NEXT: llvm.getelementptr %arg0[69]
// CHECK: llvm.getelementptr %[[L]][%c3_i32]
// CHECK-NEXT: llvm.load volatile
// CHECK-NEXT: llvm.getelementptr %arg0[72]
// empty[1] (entry 3): ledger words 12..15, record words 96..99.
// CHECK: llvm.getelementptr %{{.*}}[%c15_i32]
// CHECK-NEXT: llvm.load volatile
// CHECK-NEXT: llvm.getelementptr %arg0[99]

// Cluster (1, 2, 1, 1), multicast along M: the copy's 2048 bytes land in
// both CTAs (mask 3): one generic atomic add per CTA, at the mapa address of
// the entry in that CTA; a consumer's signalling lane r arrives on CTA r's
// empty barrier and counts there.
// CHECK-LABEL: gpu.module @mcast
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global {{.*}} multicast_mask
// CHECK: %[[G0:.*]] = llvm.addrspacecast %{{.*}} : !llvm.ptr<3> to !llvm.ptr
// CHECK-NEXT: %[[R0:.*]] = nvvm.mapa %[[G0]], %c0_i32 : !llvm.ptr -> !llvm.ptr
// CHECK-NEXT: llvm.atomicrmw add %[[R0]], %c2048_i32 monotonic : !llvm.ptr, i32
// CHECK-NEXT: %[[R1:.*]] = nvvm.mapa %[[G0]], %c1_i32 : !llvm.ptr -> !llvm.ptr
// CHECK-NEXT: llvm.atomicrmw add %[[R1]], %c2048_i32 monotonic : !llvm.ptr, i32
// CHECK-NOT: nvvm.mapa %{{.*}}, %c2_i32
// CHECK: nvvm.mapa %{{.*}} : !llvm.ptr -> !llvm.ptr
// CHECK-NEXT: llvm.atomicrmw add %{{.*}}, %c1_i32 monotonic : !llvm.ptr, i32
// CHECK-NEXT: nvvm.mapa %{{.*}} : !llvm.ptr<3> -> !llvm.ptr<7>
// CHECK-NEXT: nvvm.mbarrier.arrive %{{.*}} : !llvm.ptr<7>

// OFF-NOT: __pipeline_watchdog
// OFF-NOT: llvm.atomicrmw
// OFF-NOT: mapa %{{.*}} : !llvm.ptr -> !llvm.ptr

// In the PTX, shared atomic adds for the ledger in @one_cta (acquire: 2,
// tma_load: 1, release: 1), none without the watchdog.
// PTX-LABEL: // gpu.binary @one_cta sm_90a
// PTX: .shared .align 8 .b8 __pipeline_watchdog_ledger[64];
// PTX-COUNT-4: atom.shared.add.u32
// PTX-NOT: atom.shared.add.u32
// PTX-LABEL: // gpu.binary @mcast sm_90a
// PTXOFF-NOT: __pipeline_watchdog
// PTXOFF-NOT: atom.

// CLC: llvm.atomicrmw add %{{.*}}, %c1_i32{{.*}} monotonic : !llvm.ptr<3>, i32
// CLC-NEXT: nvvm.mbarrier.arrive.expect_tx %{{.*}}, %c16_i32
// CLC: nvvm.mapa %{{.*}} : !llvm.ptr -> !llvm.ptr
// CLC-NEXT: llvm.atomicrmw add %{{.*}}, %c1_i32{{.*}} monotonic : !llvm.ptr, i32
// CLC-NEXT: nvvm.mapa %{{.*}} : !llvm.ptr<3> -> !llvm.ptr<7>
// CLC-NEXT: nvvm.mbarrier.arrive.expect_tx %{{.*}}, %c16_i32 {scope = #nvvm.mem_scope<cluster>}
// CLC-NOT: llvm.atomicrmw add %{{.*}}, %c16_i32
