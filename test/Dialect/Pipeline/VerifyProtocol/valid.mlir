// Correct kernels: the checker must accept them and leave the IR unchanged.
// RUN: pipeline-opt %s > %t.before
// RUN: pipeline-opt --pipeline-verify-protocol %s > %t.after
// RUN: diff %t.before %t.after
// RUN: pipeline-opt --pipeline-verify-protocol=block-dim=256 %s | FileCheck %s

// With block-dim=256 the consumer roles below are 7 warps; a tma_async
// consumer group counts one signalling-lane arrive per warp (x mcast_size).
!ab = !pipeline.pipeline<tma_async, stages = 4, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 7>, tx_count = 16384>
!ps = !pipeline.state<4, producer>
!cs = !pipeline.state<4, consumer>

gpu.module @kernels {

// Warp-specialized Hopper GEMM mainloop: warp 4 loads A and B with TMA, the
// other warps wait, compute and release.
// CHECK-LABEL: gpu.func @tma_gemm
// CHECK: scf.for
// CHECK: pipeline.producer.acquire
// CHECK: nvvm.elect.sync
// CHECK: pipeline.copy.tma_load
// CHECK: pipeline.copy.tma_load
// CHECK: pipeline.producer.commit
// CHECK: pipeline.state.advance
// CHECK: pipeline.producer.tail
// CHECK: pipeline.consumer.try_wait
// CHECK: pipeline.consumer.wait
// CHECK: pipeline.consumer.release
gpu.func @tma_gemm(%desc_a: !llvm.ptr, %desc_b: !llvm.ptr, %bars: !llvm.ptr<3>,
                   %sa: !llvm.ptr<3>, %sb: !llvm.ptr<3>, %k_tiles: index) kernel {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c32 = arith.constant 32 : index
  %x = arith.constant 0 : i32
  %p = pipeline.create storage(%bars : !llvm.ptr<3>) {defer_sync, name = "ab"} : !ab
  pipeline.init_arrive
  pipeline.init_wait
  %tid = gpu.thread_id x
  %warp = arith.divui %tid, %c32 : index
  %is_producer = arith.cmpi eq, %warp, %c4 : index
  scf.if %is_producer {
    %s0 = pipeline.state.make : !ps
    %sN = scf.for %k = %c0 to %k_tiles step %c1 iter_args(%s = %s0) -> (!ps) {
      pipeline.producer.acquire %p, %s : !ab, !ps
      %elected = nvvm.elect.sync -> i1
      scf.if %elected {
        pipeline.copy.tma_load %p, %s, %desc_a[%x, %x] to %sa {bytes = 8192 : i64} : !ab, !ps, !llvm.ptr, !llvm.ptr<3>
        pipeline.copy.tma_load %p, %s, %desc_b[%x, %x] to %sb {bytes = 8192 : i64} : !ab, !ps, !llvm.ptr, !llvm.ptr<3>
      }
      pipeline.producer.commit %p, %s : !ab, !ps
      %next = pipeline.state.advance %s : !ps
      scf.yield %next : !ps
    }
    pipeline.producer.tail %p, %sN : !ab, !ps
  } else {
    %c = pipeline.state.make : !cs
    %cN = scf.for %k = %c0 to %k_tiles step %c1 iter_args(%s = %c) -> (!cs) {
      %ready = pipeline.consumer.try_wait %p, %s : !ab, !cs
      pipeline.consumer.wait %p, %s token %ready : !ab, !cs
      pipeline.consumer.release %p, %s : !ab, !cs
      %next = pipeline.state.advance %s : !cs
      scf.yield %next : !cs
    }
  }
  gpu.return
}

// CUTLASS-style consumer: a prologue loop waits on stages without releasing,
// the mainloop releases the stage it waited on k_pipe_mma_prologue
// iterations ago (a separate release state), an epilogue loop releases the
// rest. The prologue waits on min(3, k_tiles) stages, as CUTLASS's
// k_pipe_mma_prologue: with a fixed 3 and k_tiles < 3 the consumer would wait
// on stages nobody fills (stage-balance-prologue.mlir, @fixed_prologue).
// CHECK-LABEL: gpu.func @lagged_release
gpu.func @lagged_release(%desc: !llvm.ptr, %bars: !llvm.ptr<3>, %buf: !llvm.ptr<3>,
                         %k_tiles: index) kernel {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %c32 = arith.constant 32 : index
  %x = arith.constant 0 : i32
  %p = pipeline.create storage(%bars : !llvm.ptr<3>) {name = "ab"} : !ab
  %tid = gpu.thread_id x
  %warp = arith.divui %tid, %c32 : index
  %is_producer = arith.cmpi eq, %warp, %c0 : index
  scf.if %is_producer {
    %s0 = pipeline.state.make : !ps
    %sN = scf.for %k = %c0 to %k_tiles step %c1 iter_args(%s = %s0) -> (!ps) {
      pipeline.producer.acquire %p, %s : !ab, !ps
      %elected = nvvm.elect.sync -> i1
      scf.if %elected {
        pipeline.copy.tma_load %p, %s, %desc[%x, %x, %x] to %buf {bytes = 16384 : i64} : !ab, !ps, !llvm.ptr, !llvm.ptr<3>
      }
      %next = pipeline.state.advance %s : !ps
      scf.yield %next : !ps
    }
    pipeline.producer.tail %p, %sN : !ab, !ps
  } else {
    %c = pipeline.state.make : !cs
    %pro = arith.minsi %k_tiles, %c3 : index
    %read = scf.for %k = %c0 to %pro step %c1 iter_args(%s = %c) -> (!cs) {
      pipeline.consumer.wait %p, %s : !ab, !cs
      %next = pipeline.state.advance %s : !cs
      scf.yield %next : !cs
    }
    %r:2 = scf.for %k = %pro to %k_tiles step %c1 iter_args(%rd = %read, %rl = %c) -> (!cs, !cs) {
      pipeline.consumer.wait %p, %rd : !ab, !cs
      pipeline.consumer.release %p, %rl : !ab, !cs
      %rd1 = pipeline.state.advance %rd : !cs
      %rl1 = pipeline.state.advance %rl : !cs
      scf.yield %rd1, %rl1 : !cs, !cs
    }
    %done = scf.for %k = %c0 to %pro step %c1 iter_args(%s = %r#1) -> (!cs) {
      pipeline.consumer.release %p, %s : !ab, !cs
      %next = pipeline.state.advance %s : !cs
      scf.yield %next : !cs
    }
  }
  gpu.return
}

// PipelineAsync between warps: warp 0's lane 0 produces; the other seven
// warps (block-dim=256) release once per warp (elect_one), so the consumer
// group is counted in warps. The consumer releases the previous stage after waiting on the next
// one (flash-attention style), on one state chain.
// CHECK-LABEL: gpu.func @async_elect_one
// CHECK: pipeline.consumer.release {{.*}} {elect_one}
gpu.func @async_elect_one(%n: index) kernel {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %p = pipeline.create {name = "kv"} : !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 7>>
  %tid = gpu.thread_id x
  %warp = arith.divui %tid, %c32 : index
  %lane = arith.remui %tid, %c32 : index
  %is_producer = arith.cmpi eq, %warp, %c0 : index
  scf.if %is_producer {
    %lane0 = arith.cmpi eq, %lane, %c0 : index
    scf.if %lane0 {
      %s0 = pipeline.state.make : !pipeline.state<2, producer>
      %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!pipeline.state<2, producer>) {
        pipeline.producer.acquire %p, %s : !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 7>>, !pipeline.state<2, producer>
        pipeline.producer.commit %p, %s : !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 7>>, !pipeline.state<2, producer>
        %next = pipeline.state.advance %s : !pipeline.state<2, producer>
        scf.yield %next : !pipeline.state<2, producer>
      }
      pipeline.producer.tail %p, %sN : !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 7>>, !pipeline.state<2, producer>
    }
  } else {
    %c = pipeline.state.make : !pipeline.state<2, consumer>
    pipeline.consumer.wait %p, %c : !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 7>>, !pipeline.state<2, consumer>
    %n1 = arith.subi %n, %c1 : index
    %last = scf.for %i = %c0 to %n1 step %c1 iter_args(%cur = %c) -> (!pipeline.state<2, consumer>) {
      %next = pipeline.state.advance %cur : !pipeline.state<2, consumer>
      pipeline.consumer.wait %p, %next : !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 7>>, !pipeline.state<2, consumer>
      pipeline.consumer.release %p, %cur {elect_one} : !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 7>>, !pipeline.state<2, consumer>
      scf.yield %next : !pipeline.state<2, consumer>
    }
    pipeline.consumer.release %p, %last {elect_one} : !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 7>>, !pipeline.state<2, consumer>
  }
  gpu.return
}

// Blackwell persistent GEMM: a TMA warp feeds the MMA warp (tma_umma), the
// MMA warp feeds the epilogue warps (umma_async accumulator). The MMA warp
// consumes one pipeline and produces the other; tile loops carry the states
// through the k loops. The six epilogue warps (block-dim=256) release from
// every thread: 192 arrivals per phase.
// CHECK-LABEL: gpu.func @umma_persistent
gpu.func @umma_persistent(%desc: !llvm.ptr, %buf: !llvm.ptr<3>, %tiles: index, %k_tiles: index) kernel {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c32 = arith.constant 32 : index
  %x = arith.constant 0 : i32
  %ab = pipeline.create {name = "ab"} : !pipeline.pipeline<tma_umma, stages = 3, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 1>, tx_count = 32768>
  %acc = pipeline.create {name = "acc"} : !pipeline.pipeline<umma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 192>>
  %tid = gpu.thread_id x
  %warp = arith.divui %tid, %c32 : index
  %is_tma = arith.cmpi eq, %warp, %c0 : index
  %is_mma = arith.cmpi eq, %warp, %c1 : index
  scf.if %is_tma {
    %s0 = pipeline.state.make : !pipeline.state<3, producer>
    %sT = scf.for %t = %c0 to %tiles step %c1 iter_args(%st = %s0) -> (!pipeline.state<3, producer>) {
      %sK = scf.for %k = %c0 to %k_tiles step %c1 iter_args(%s = %st) -> (!pipeline.state<3, producer>) {
        pipeline.producer.acquire %ab, %s : !pipeline.pipeline<tma_umma, stages = 3, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 1>, tx_count = 32768>, !pipeline.state<3, producer>
        %elected = nvvm.elect.sync -> i1
        scf.if %elected {
          scf.for %half = %c0 to %c2 step %c1 {
            pipeline.copy.tma_load %ab, %s, %desc[%x, %x] to %buf {bytes = 16384 : i64} : !pipeline.pipeline<tma_umma, stages = 3, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 1>, tx_count = 32768>, !pipeline.state<3, producer>, !llvm.ptr, !llvm.ptr<3>
          }
        }
        %next = pipeline.state.advance %s : !pipeline.state<3, producer>
        scf.yield %next : !pipeline.state<3, producer>
      }
      scf.yield %sK : !pipeline.state<3, producer>
    }
    pipeline.producer.tail %ab, %sT : !pipeline.pipeline<tma_umma, stages = 3, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 1>, tx_count = 32768>, !pipeline.state<3, producer>
  }
  scf.if %is_mma {
    %c = pipeline.state.make : !pipeline.state<3, consumer>
    %a0 = pipeline.state.make : !pipeline.state<2, producer>
    %r:2 = scf.for %t = %c0 to %tiles step %c1 iter_args(%ct = %c, %at = %a0) -> (!pipeline.state<3, consumer>, !pipeline.state<2, producer>) {
      pipeline.producer.acquire %acc, %at : !pipeline.pipeline<umma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 192>>, !pipeline.state<2, producer>
      %cK = scf.for %k = %c0 to %k_tiles step %c1 iter_args(%s = %ct) -> (!pipeline.state<3, consumer>) {
        pipeline.consumer.wait %ab, %s : !pipeline.pipeline<tma_umma, stages = 3, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 1>, tx_count = 32768>, !pipeline.state<3, consumer>
        pipeline.consumer.release %ab, %s : !pipeline.pipeline<tma_umma, stages = 3, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 1>, tx_count = 32768>, !pipeline.state<3, consumer>
        %next = pipeline.state.advance %s : !pipeline.state<3, consumer>
        scf.yield %next : !pipeline.state<3, consumer>
      }
      pipeline.producer.commit %acc, %at : !pipeline.pipeline<umma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 192>>, !pipeline.state<2, producer>
      %at1 = pipeline.state.advance %at : !pipeline.state<2, producer>
      scf.yield %cK, %at1 : !pipeline.state<3, consumer>, !pipeline.state<2, producer>
    }
    pipeline.producer.tail %acc, %r#1 : !pipeline.pipeline<umma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 192>>, !pipeline.state<2, producer>
  }
  %is_epi = arith.cmpi uge, %warp, %c2 : index
  scf.if %is_epi {
    %e0 = pipeline.state.make : !pipeline.state<2, consumer>
    %eN = scf.for %t = %c0 to %tiles step %c1 iter_args(%s = %e0) -> (!pipeline.state<2, consumer>) {
      pipeline.consumer.wait %acc, %s : !pipeline.pipeline<umma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 192>>, !pipeline.state<2, consumer>
      pipeline.consumer.release %acc, %s : !pipeline.pipeline<umma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 192>>, !pipeline.state<2, consumer>
      %next = pipeline.state.advance %s : !pipeline.state<2, consumer>
      scf.yield %next : !pipeline.state<2, consumer>
    }
  }
  gpu.return
}

// Ampere-style multistage kernel: every thread produces with cp.async and
// consumes (one role, no warp specialization), TMA-store epilogue, and two
// math warpgroups taking turns through a PipelineOrder.
// CHECK-LABEL: gpu.func @cp_async_store_order
// CHECK: pipeline.order.wait
// CHECK: pipeline.order.arrive
gpu.func @cp_async_store_order(%desc: !llvm.ptr, %src: !llvm.ptr<3>, %n: index) kernel {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c128 = arith.constant 128 : index
  %x = arith.constant 0 : i32
  %p = pipeline.create {name = "cp"} : !pipeline.pipeline<cp_async, stages = 3, producer = #pipeline.group<thread, 256>, consumer = #pipeline.group<thread, 256>>
  %st = pipeline.create : !pipeline.pipeline<tma_store, stages = 2>
  %ord = pipeline.create : !pipeline.pipeline<order, stages = 2, producer = #pipeline.group<thread, 128>, length = 2>
  %s0 = pipeline.state.make : !pipeline.state<3, producer>
  %c0s = pipeline.state.make : !pipeline.state<3, consumer>
  %t0 = pipeline.state.make : !pipeline.state<2, producer>
  %tid = gpu.thread_id x
  %wg = arith.divui %tid, %c128 : index
  %gid = arith.index_cast %wg : index to i32
  %o0 = pipeline.order.state %ord, %gid : !pipeline.pipeline<order, stages = 2, producer = #pipeline.group<thread, 128>, length = 2> -> !pipeline.state<2, producer_consumer>
  %r:4 = scf.for %i = %c0 to %n step %c1 iter_args(%ps = %s0, %cs = %c0s, %ts = %t0, %os = %o0)
      -> (!pipeline.state<3, producer>, !pipeline.state<3, consumer>, !pipeline.state<2, producer>, !pipeline.state<2, producer_consumer>) {
    pipeline.producer.acquire %p, %ps : !pipeline.pipeline<cp_async, stages = 3, producer = #pipeline.group<thread, 256>, consumer = #pipeline.group<thread, 256>>, !pipeline.state<3, producer>
    pipeline.producer.commit %p, %ps : !pipeline.pipeline<cp_async, stages = 3, producer = #pipeline.group<thread, 256>, consumer = #pipeline.group<thread, 256>>, !pipeline.state<3, producer>
    pipeline.consumer.wait %p, %cs : !pipeline.pipeline<cp_async, stages = 3, producer = #pipeline.group<thread, 256>, consumer = #pipeline.group<thread, 256>>, !pipeline.state<3, consumer>
    pipeline.consumer.release %p, %cs : !pipeline.pipeline<cp_async, stages = 3, producer = #pipeline.group<thread, 256>, consumer = #pipeline.group<thread, 256>>, !pipeline.state<3, consumer>
    pipeline.order.wait %ord, %os, %gid : !pipeline.pipeline<order, stages = 2, producer = #pipeline.group<thread, 128>, length = 2>, !pipeline.state<2, producer_consumer>
    %os1 = pipeline.order.arrive %ord, %os, %gid : !pipeline.pipeline<order, stages = 2, producer = #pipeline.group<thread, 128>, length = 2>, !pipeline.state<2, producer_consumer>
    pipeline.producer.acquire %st, %ts : !pipeline.pipeline<tma_store, stages = 2>, !pipeline.state<2, producer>
    pipeline.copy.tma_store %desc[%x, %x] from %src : !llvm.ptr, !llvm.ptr<3>
    pipeline.producer.commit %st, %ts : !pipeline.pipeline<tma_store, stages = 2>, !pipeline.state<2, producer>
    %ps1 = pipeline.state.advance %ps : !pipeline.state<3, producer>
    %cs1 = pipeline.state.advance %cs : !pipeline.state<3, consumer>
    %ts1 = pipeline.state.advance %ts : !pipeline.state<2, producer>
    scf.yield %ps1, %cs1, %ts1, %os1 : !pipeline.state<3, producer>, !pipeline.state<3, consumer>, !pipeline.state<2, producer>, !pipeline.state<2, producer_consumer>
  }
  pipeline.producer.tail %p, %r#0 : !pipeline.pipeline<cp_async, stages = 3, producer = #pipeline.group<thread, 256>, consumer = #pipeline.group<thread, 256>>, !pipeline.state<3, producer>
  pipeline.producer.tail %st, %r#2 : !pipeline.pipeline<tma_store, stages = 2>, !pipeline.state<2, producer>
  gpu.return
}

// A cluster of 2 CTAs along M with A multicast to both: each CTA loads half
// of A (4096 bytes, landing in 2 CTAs) and all of B. Explicit start states,
// simple (packed) states, try_acquire tokens and extra_tx. The 7 consumer
// warps release on both CTAs: 14 arrivals per phase.
// CHECK-LABEL: gpu.func @multicast_cluster
gpu.func @multicast_cluster(%desc: !llvm.ptr, %buf: !llvm.ptr<3>, %n: index) kernel {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %x = arith.constant 0 : i32
  %one = arith.constant 1 : i32
  %four = arith.constant 4 : i32
  %extra = arith.constant 1024 : i32
  %mask = arith.constant 3 : i16
  %p = pipeline.create {defer_sync, name = "mc"} : !pipeline.pipeline<tma_async, stages = 4, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 14>, tx_count = 15360, cluster = #pipeline.cluster<1, 2, 1, 1>, multicast = m>
  pipeline.init_arrive {cluster_size = 2}
  pipeline.init_wait {cluster_size = 2}
  %tid = gpu.thread_id x
  %warp = arith.divui %tid, %c32 : index
  %is_producer = arith.cmpi eq, %warp, %c0 : index
  scf.if %is_producer {
    %s0 = pipeline.state.make index %x phase %one : !pipeline.state<4, producer>
    %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!pipeline.state<4, producer>) {
      %t = pipeline.producer.try_acquire %p, %s : !pipeline.pipeline<tma_async, stages = 4, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 14>, tx_count = 15360, cluster = #pipeline.cluster<1, 2, 1, 1>, multicast = m>, !pipeline.state<4, producer>
      pipeline.producer.acquire %p, %s token %t extra_tx %extra : !pipeline.pipeline<tma_async, stages = 4, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 14>, tx_count = 15360, cluster = #pipeline.cluster<1, 2, 1, 1>, multicast = m>, !pipeline.state<4, producer>
      %elected = nvvm.elect.sync -> i1
      scf.if %elected {
        pipeline.copy.tma_load %p, %s, %desc[%x, %x] to %buf multicast %mask {bytes = 4096 : i64} : !pipeline.pipeline<tma_async, stages = 4, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 14>, tx_count = 15360, cluster = #pipeline.cluster<1, 2, 1, 1>, multicast = m>, !pipeline.state<4, producer>, !llvm.ptr, !llvm.ptr<3>
        pipeline.copy.tma_load %p, %s, %desc[%x, %x] to %buf {bytes = 8192 : i64} : !pipeline.pipeline<tma_async, stages = 4, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 14>, tx_count = 15360, cluster = #pipeline.cluster<1, 2, 1, 1>, multicast = m>, !pipeline.state<4, producer>, !llvm.ptr, !llvm.ptr<3>
      }
      %next = pipeline.state.advance %s : !pipeline.state<4, producer>
      scf.yield %next : !pipeline.state<4, producer>
    }
    pipeline.producer.tail %p, %sN : !pipeline.pipeline<tma_async, stages = 4, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 14>, tx_count = 15360, cluster = #pipeline.cluster<1, 2, 1, 1>, multicast = m>, !pipeline.state<4, producer>
  } else {
    %c = pipeline.state.make index %x phase %x : !pipeline.state<4, consumer>
    %cN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %c) -> (!pipeline.state<4, consumer>) {
      pipeline.consumer.wait %p, %s : !pipeline.pipeline<tma_async, stages = 4, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 14>, tx_count = 15360, cluster = #pipeline.cluster<1, 2, 1, 1>, multicast = m>, !pipeline.state<4, consumer>
      pipeline.consumer.release %p, %s : !pipeline.pipeline<tma_async, stages = 4, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 14>, tx_count = 15360, cluster = #pipeline.cluster<1, 2, 1, 1>, multicast = m>, !pipeline.state<4, consumer>
      %next = pipeline.state.advance %s : !pipeline.state<4, consumer>
      scf.yield %next : !pipeline.state<4, consumer>
    }
  }
  // Flash-attention packed states: a producer starts at phase_index = stages.
  %sp = pipeline.state.make index %four : !pipeline.state<4, producer, simple>
  %sc = pipeline.state.make index %x : !pipeline.state<4, consumer, simple>
  gpu.return
}
}
