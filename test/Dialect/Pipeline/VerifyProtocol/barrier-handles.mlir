// Property 13: a pipeline's barriers are driven only by its verbs. An
// arrive of one's own on the full barrier that producer.barrier
// (producer_get_barrier) hands out is one arrival too many per phase
// (cutlass#2364); so is re-initializing it. Second part
// (the last two chunks): a pipeline created with defer_sync is used only
// after the post-init sync.
// A chunk without expected-* lines is a correct twin: any diagnostic fails it.
// RUN: pipeline-opt --pipeline-verify-protocol -split-input-file -verify-diagnostics %s

!T = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 128>, tx_count = 8192>
!ps = !pipeline.state<2, producer>

// The bug: the producer arrives on the stage's full barrier by hand after
// its copy; producer.acquire already arrived (arrive.expect_tx), so each
// phase gets two arrivals for a count of one.
func.func @second_arrive_per_phase(%n: index, %desc: !llvm.ptr, %buf: !llvm.ptr<3>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %x = arith.constant 0 : i32
  // expected-note @+1 {{pipeline 'ab' is created here}}
  %p = pipeline.create {name = "ab"} : !T
  %s0 = pipeline.state.make : !ps
  %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
    pipeline.producer.acquire %p, %s : !T, !ps
    %e = nvvm.elect.sync -> i1
    scf.if %e {
      pipeline.copy.tma_load %p, %s, %desc[%x, %x] to %buf {bytes = 8192 : i64} : !T, !ps, !llvm.ptr, !llvm.ptr<3>
      // expected-note @+1 {{the barrier handle is taken here}}
      %bar = pipeline.producer.barrier %p, %s : !T, !ps
      // expected-error @+1 {{pipeline 'ab': nvvm.mbarrier.arrive on the stage's full barrier from producer.barrier (rule: a pipeline's barriers are driven only by its verbs): producer.acquire already arrives on it once per phase (arrive.expect_tx), so this is a second arrival per phase: the phase completes before the stage's bytes land, or the count underflows into the next phase (drop the arrive: the copies complete the stage; for more bytes pass extra_tx to producer.acquire)}}
      %t = nvvm.mbarrier.arrive %bar : !llvm.ptr<3> -> i64
    }
    pipeline.producer.commit %p, %s : !T, !ps
    %s1 = pipeline.state.advance %s : !ps
    scf.yield %s1 : !ps
  }
  pipeline.producer.tail %p, %sN : !T, !ps
  return
}

// -----

!T = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 128>, tx_count = 8192>
!ps = !pipeline.state<2, producer>

// The correct twin: the handle only tells a copy issued by other means
// (a raw bulk copy) which barrier completes its bytes.
func.func @handle_for_a_copy(%n: index, %src: !llvm.ptr<1>, %buf: !llvm.ptr<7>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %size = arith.constant 8192 : i32
  %p = pipeline.create {name = "ab"} : !T
  %s0 = pipeline.state.make : !ps
  %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
    pipeline.producer.acquire %p, %s : !T, !ps
    %e = nvvm.elect.sync -> i1
    scf.if %e {
      %bar = pipeline.producer.barrier %p, %s : !T, !ps
      nvvm.cp.async.bulk.shared.cluster.global %buf, %src, %bar, %size : !llvm.ptr<7>, <1>
    }
    pipeline.producer.commit %p, %s : !T, !ps
    %s1 = pipeline.state.advance %s : !ps
    scf.yield %s1 : !ps
  }
  pipeline.producer.tail %p, %sN : !T, !ps
  return
}

// -----

!A = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!ps = !pipeline.state<2, producer>

// An AsyncThread producer that arrives by hand on top of producer.commit
// (through mapa: the same barrier seen from the cluster), and one that
// initializes the barrier again.
func.func @async_producer_by_hand(%r: i32, %c: i32) {
  // expected-note @+1 {{pipeline 'ring' is created here}}
  %p = pipeline.create {name = "ring"} : !A
  %s0 = pipeline.state.make : !ps
  pipeline.producer.acquire %p, %s0 : !A, !ps
  // expected-note @+1 {{the barrier handle is taken here}}
  %bar = pipeline.producer.barrier %p, %s0 : !A, !ps
  %remote = nvvm.mapa %bar, %r : !llvm.ptr<3> -> !llvm.ptr<7>
  // expected-error @+1 {{pipeline 'ring': nvvm.mbarrier.arrive on the stage's full barrier from producer.barrier (rule: a pipeline's barriers are driven only by its verbs): producer.commit already gives each phase its arrivals, so this is one arrival too many per phase: the phase completes before the stage is full, or the count underflows into the next phase (drop the arrive and publish the stage with producer.commit)}}
  nvvm.mbarrier.arrive %remote : !llvm.ptr<7>
  // expected-error @+1 {{pipeline 'ring': nvvm.mbarrier.init on the stage's full barrier from producer.barrier (rule: a pipeline's barriers are driven only by its verbs): pipeline.create already initialized it; initializing it again restarts its phase under the waiters (drop this op)}}
  nvvm.mbarrier.init %bar, %c : !llvm.ptr<3>, i32
  pipeline.producer.commit %p, %s0 : !A, !ps
  %s1 = pipeline.state.advance %s0 : !ps
  pipeline.producer.tail %p, %s1 : !A, !ps
  return
}

// -----

// Property 13, second part: a pipeline created with defer_sync is used only after the
// post-init sync (pipeline.init_arrive / pipeline.init_wait).

!A = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>

// The bug: the producer arms the first stage before the sync that makes the
// barriers' init visible (the init_wait comes too late, after the acquire).
gpu.module @kernels {
gpu.func @acquire_before_init_wait(%n: index) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  // expected-note @+1 {{pipeline 'ring' is created here}}
  %p = pipeline.create {defer_sync, name = "ring"} : !A
  %tid = gpu.thread_id x
  %warp = arith.divui %tid, %c32 : index
  %is_producer = arith.cmpi eq, %warp, %c0 : index
  scf.if %is_producer {
    %s0 = pipeline.state.make : !ps
    // expected-error @+1 {{pipeline 'ring': pipeline.producer.acquire uses a pipeline created with defer_sync before any pipeline.init_wait (rule: a deferred create's barriers are initialized by one thread and become visible to the others only through the post-init sync): this thread may arrive on or wait at a barrier whose init it has not seen, so the arrive is lost or the init wipes it and the phase never completes (call pipeline.init_arrive and pipeline.init_wait after the creates and before the first use, or drop defer_sync)}}
    pipeline.producer.acquire %p, %s0 : !A, !ps
    pipeline.init_arrive
    pipeline.init_wait
    pipeline.producer.commit %p, %s0 : !A, !ps
    %sN = scf.for %k = %c1 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
      %next = pipeline.state.advance %s : !ps
      pipeline.producer.acquire %p, %next : !A, !ps
      pipeline.producer.commit %p, %next : !A, !ps
      scf.yield %next : !ps
    }
    %t = pipeline.state.advance %sN : !ps
    pipeline.producer.tail %p, %t : !A, !ps
  } else {
    pipeline.init_arrive
    pipeline.init_wait
    %c = pipeline.state.make : !cs
    %cN = scf.for %k = %c0 to %n step %c1 iter_args(%s = %c) -> (!cs) {
      pipeline.consumer.wait %p, %s : !A, !cs
      pipeline.consumer.release %p, %s : !A, !cs
      %next = pipeline.state.advance %s : !cs
      scf.yield %next : !cs
    }
  }
  gpu.return
}
}

// -----

!A = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>

// The correct twin: init_arrive and init_wait right after the create, before
// any role runs; a second pipeline created without defer_sync ends with a CTA
// sync of its own, which also covers the first one.
gpu.module @kernels {
gpu.func @init_wait_first(%n: index) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %p = pipeline.create {defer_sync, name = "ring"} : !A
  pipeline.init_arrive
  pipeline.init_wait
  %q = pipeline.create {defer_sync, name = "ring2"} : !A
  %r = pipeline.create {name = "ring3"} : !A
  %tid = gpu.thread_id x
  %warp = arith.divui %tid, %c32 : index
  %is_producer = arith.cmpi eq, %warp, %c0 : index
  scf.if %is_producer {
    %s0 = pipeline.state.make : !ps
    %sN = scf.for %k = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
      pipeline.producer.acquire %p, %s : !A, !ps
      pipeline.producer.commit %p, %s : !A, !ps
      pipeline.producer.acquire %q, %s : !A, !ps
      pipeline.producer.commit %q, %s : !A, !ps
      %next = pipeline.state.advance %s : !ps
      scf.yield %next : !ps
    }
    pipeline.producer.tail %p, %sN : !A, !ps
    pipeline.producer.tail %q, %sN : !A, !ps
  } else {
    %c = pipeline.state.make : !cs
    %cN = scf.for %k = %c0 to %n step %c1 iter_args(%s = %c) -> (!cs) {
      pipeline.consumer.wait %p, %s : !A, !cs
      pipeline.consumer.release %p, %s : !A, !cs
      pipeline.consumer.wait %q, %s : !A, !cs
      pipeline.consumer.release %q, %s : !A, !cs
      %next = pipeline.state.advance %s : !cs
      scf.yield %next : !cs
    }
  }
  gpu.return
}
}
