// Property 6, who releases a stage against who waits on it: every warp of a
// consumer role that waits on a stage must itself release it (each thread,
// or an elected lane per warp with a group counting the warps), or the role
// must synchronise (a named barrier over its warps) before one thread
// releases for all. Else a releasing warp may run a lap of the ring ahead:
// the producer refills the stage, its phase completes again, and a warp
// still polling the old parity waits for a phase that does not come back
// (docs/VerifyProtocol.md). The barrier counts only between a wait and the
// release (one after the release, at the loop's end, does not). Each bug
// sits next to its correct twins, which must stay silent.
// RUN: pipeline-opt --pipeline-verify-protocol -split-input-file -verify-diagnostics %s
!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 1>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>

// Bug: four consumer warps wait on each stage; thread 32 (lane 0 of warp 1)
// releases it for all of them, with a group of 1 (the count matches).
gpu.module @k {
gpu.func @one_thread_releases_for_four_warps(%n: index) kernel attributes {known_block_size = array<i32: 160, 1, 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  // expected-note @+1 {{pipeline 'ring' is created here}}
  %p = pipeline.create {name = "ring"} : !P
  %tid = gpu.thread_id x
  %w = arith.divui %tid, %c32 : index
  %is0 = arith.cmpi eq, %w, %c0 : index
  scf.if %is0 {
    %s0 = pipeline.state.make : !ps
    %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
      pipeline.producer.acquire %p, %s : !P, !ps
      pipeline.producer.commit %p, %s : !P, !ps
      %sn = pipeline.state.advance %s : !ps
      scf.yield %sn : !ps
    }
    pipeline.producer.tail %p, %sN : !P, !ps
  } else {
    %c = pipeline.state.make : !cs
    %cN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %c) -> (!cs) {
      // expected-note @+1 {{the role waits here}}
      pipeline.consumer.wait %p, %s : !P, !cs
      %c32i = arith.constant 32 : index
      %leader = arith.cmpi eq, %tid, %c32i : index
      scf.if %leader {
        // expected-error @+1 {{pipeline 'ring': warps 1-4 wait on each stage but only warp 1 releases it (warps 2-4 never arrive): a releasing warp can run a lap of the ring ahead and the producer refill the stage while warps 2-4 still poll its old phase, which does not come back; every warp that waits on a stage must release it (each thread, or an elected lane per warp with a consumer group counting the warps), or the role must synchronise (a named barrier over its warps) before one thread releases for all}}
        pipeline.consumer.release %p, %s : !P, !cs
      }
      %sn = pipeline.state.advance %s : !cs
      scf.yield %sn : !cs
    }
  }
  gpu.return
}
}

// -----

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 128>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>

// Twin: every thread of the four warps releases (a group of 128).
gpu.module @k {
gpu.func @every_thread_releases(%n: index) kernel attributes {known_block_size = array<i32: 160, 1, 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %p = pipeline.create {name = "ring"} : !P
  %tid = gpu.thread_id x
  %w = arith.divui %tid, %c32 : index
  %is0 = arith.cmpi eq, %w, %c0 : index
  scf.if %is0 {
    %s0 = pipeline.state.make : !ps
    %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
      pipeline.producer.acquire %p, %s : !P, !ps
      pipeline.producer.commit %p, %s : !P, !ps
      %sn = pipeline.state.advance %s : !ps
      scf.yield %sn : !ps
    }
    pipeline.producer.tail %p, %sN : !P, !ps
  } else {
    %c = pipeline.state.make : !cs
    %cN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %c) -> (!cs) {
      pipeline.consumer.wait %p, %s : !P, !cs
      pipeline.consumer.release %p, %s : !P, !cs
      %sn = pipeline.state.advance %s : !cs
      scf.yield %sn : !cs
    }
  }
  gpu.return
}
}

// -----

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 4>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>

// Twin: an elected lane of each warp releases after its own warp's wait (a
// group of 4: one arrival per warp).
gpu.module @k {
gpu.func @one_lane_per_warp_releases(%n: index) kernel attributes {known_block_size = array<i32: 160, 1, 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %p = pipeline.create {name = "ring"} : !P
  %tid = gpu.thread_id x
  %w = arith.divui %tid, %c32 : index
  %is0 = arith.cmpi eq, %w, %c0 : index
  scf.if %is0 {
    %s0 = pipeline.state.make : !ps
    %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
      pipeline.producer.acquire %p, %s : !P, !ps
      pipeline.producer.commit %p, %s : !P, !ps
      %sn = pipeline.state.advance %s : !ps
      scf.yield %sn : !ps
    }
    pipeline.producer.tail %p, %sN : !P, !ps
  } else {
    %c = pipeline.state.make : !cs
    %cN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %c) -> (!cs) {
      pipeline.consumer.wait %p, %s : !P, !cs
      pipeline.consumer.release %p, %s {elect_one} : !P, !cs
      %sn = pipeline.state.advance %s : !cs
      scf.yield %sn : !cs
    }
  }
  gpu.return
}
}

// -----

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 1>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>

// Twin: the role synchronises (a named barrier over its 128 threads) after
// every warp's wait, and thread 32 then releases for all (a group of 1).
gpu.module @k {
gpu.func @one_thread_releases_after_role_barrier(%n: index) kernel attributes {known_block_size = array<i32: 160, 1, 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %p = pipeline.create {name = "ring"} : !P
  %tid = gpu.thread_id x
  %w = arith.divui %tid, %c32 : index
  %is0 = arith.cmpi eq, %w, %c0 : index
  scf.if %is0 {
    %s0 = pipeline.state.make : !ps
    %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
      pipeline.producer.acquire %p, %s : !P, !ps
      pipeline.producer.commit %p, %s : !P, !ps
      %sn = pipeline.state.advance %s : !ps
      scf.yield %sn : !ps
    }
    pipeline.producer.tail %p, %sN : !P, !ps
  } else {
    %c = pipeline.state.make : !cs
    %cN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %c) -> (!cs) {
      pipeline.consumer.wait %p, %s : !P, !cs
      pipeline.named_barrier.sync id = 1, threads = 128
      %c32i = arith.constant 32 : index
      %leader = arith.cmpi eq, %tid, %c32i : index
      scf.if %leader {
        pipeline.consumer.release %p, %s : !P, !cs
      }
      %sn = pipeline.state.advance %s : !cs
      scf.yield %sn : !cs
    }
  }
  gpu.return
}
}

// -----

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 1>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>

// Bug: the role's barrier sits after the release (at the loop's end), not
// between the other warps' wait and the release: thread 32 releases while
// warps 2-4 may still poll the stage's phase.
gpu.module @k {
gpu.func @role_barrier_after_release(%n: index) kernel attributes {known_block_size = array<i32: 160, 1, 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  // expected-note @+1 {{pipeline 'ring' is created here}}
  %p = pipeline.create {name = "ring"} : !P
  %tid = gpu.thread_id x
  %w = arith.divui %tid, %c32 : index
  %is0 = arith.cmpi eq, %w, %c0 : index
  scf.if %is0 {
    %s0 = pipeline.state.make : !ps
    %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
      pipeline.producer.acquire %p, %s : !P, !ps
      pipeline.producer.commit %p, %s : !P, !ps
      %sn = pipeline.state.advance %s : !ps
      scf.yield %sn : !ps
    }
    pipeline.producer.tail %p, %sN : !P, !ps
  } else {
    %c = pipeline.state.make : !cs
    %cN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %c) -> (!cs) {
      // expected-note @+1 {{the role waits here}}
      pipeline.consumer.wait %p, %s : !P, !cs
      %c32i = arith.constant 32 : index
      %leader = arith.cmpi eq, %tid, %c32i : index
      scf.if %leader {
        // expected-error @+1 {{pipeline 'ring': warps 1-4 wait on each stage but only warp 1 releases it (warps 2-4 never arrive)}}
        pipeline.consumer.release %p, %s : !P, !cs
      }
      pipeline.named_barrier.sync id = 1, threads = 128
      %sn = pipeline.state.advance %s : !cs
      scf.yield %sn : !cs
    }
  }
  gpu.return
}
}
