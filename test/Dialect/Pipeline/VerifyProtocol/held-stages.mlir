// Check 18, stages held at once: a role that waits on (or, on a ring whose
// commit arrives, acquires) a stage while it still holds num_stages others
// needs a fill the other side cannot make before this role releases: a
// deadlock (FlashAttention's release-the-previous-stage idiom on a ring of
// one stage). Check 9, third part: a named barrier synced on one branch of
// a non-role if inside a loop and only arrived on by the other (an
// early-exit path that laps the barrier); a cluster barrier inside a
// warp-role branch while the other warps wait at a CTA barrier after the
// roles join. Each bug sits next to its correct twin, which must stay
// silent.
// RUN: pipeline-opt --pipeline-verify-protocol -split-input-file -verify-diagnostics %s
!P = !pipeline.pipeline<async, stages = 1, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!ps = !pipeline.state<1, producer>
!cs = !pipeline.state<1, consumer>

// Bug: the consumer waits on stage i + 1 before releasing stage i, on a
// ring of one stage.
gpu.module @k {
gpu.func @release_previous_one_stage(%n: index) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  // expected-note @+1 {{pipeline 'q' is created here}}
  %p = pipeline.create {name = "q"} : !P
  %tid = gpu.thread_id x
  %w = arith.divui %tid, %c32 : index
  %is0 = arith.cmpi eq, %w, %c0 : index
  %n1 = arith.addi %n, %c1 : index
  scf.if %is0 {
    %s0 = pipeline.state.make : !ps
    %sN = scf.for %i = %c0 to %n1 step %c1 iter_args(%s = %s0) -> (!ps) {
      pipeline.producer.acquire %p, %s : !P, !ps
      pipeline.producer.commit %p, %s : !P, !ps
      %sn = pipeline.state.advance %s : !ps
      scf.yield %sn : !ps
    }
    pipeline.producer.tail %p, %sN : !P, !ps
  } else {
    %c = pipeline.state.make : !cs
    %prev = pipeline.state.make : !cs
    // expected-note @+1 {{the oldest stage still held was taken here}}
    pipeline.consumer.wait %p, %c : !P, !cs
    %c1s = pipeline.state.advance %c : !cs
    %r:2 = scf.for %i = %c0 to %n step %c1 iter_args(%s = %c1s, %q = %prev) -> (!cs, !cs) {
      // expected-error @+1 {{pipeline 'q': this consumer_wait makes the role hold 2 stages at once (each consumer_wait not yet followed by its consumer_release), but the ring has 1 stage (rule: a role holds at most num_stages stages of a ring)}}
      pipeline.consumer.wait %p, %s : !P, !cs
      pipeline.consumer.release %p, %q : !P, !cs
      %sn = pipeline.state.advance %s : !cs
      %qn = pipeline.state.advance %q : !cs
      scf.yield %sn, %qn : !cs, !cs
    }
    pipeline.consumer.release %p, %r#1 : !P, !cs
  }
  gpu.return
}
}

// -----

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>

// Twin: the same idiom on a ring of two stages.
gpu.module @k {
gpu.func @release_previous_two_stages(%n: index) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %p = pipeline.create {name = "q"} : !P
  %tid = gpu.thread_id x
  %w = arith.divui %tid, %c32 : index
  %is0 = arith.cmpi eq, %w, %c0 : index
  %n1 = arith.addi %n, %c1 : index
  scf.if %is0 {
    %s0 = pipeline.state.make : !ps
    %sN = scf.for %i = %c0 to %n1 step %c1 iter_args(%s = %s0) -> (!ps) {
      pipeline.producer.acquire %p, %s : !P, !ps
      pipeline.producer.commit %p, %s : !P, !ps
      %sn = pipeline.state.advance %s : !ps
      scf.yield %sn : !ps
    }
    pipeline.producer.tail %p, %sN : !P, !ps
  } else {
    %c = pipeline.state.make : !cs
    %prev = pipeline.state.make : !cs
    pipeline.consumer.wait %p, %c : !P, !cs
    %c1s = pipeline.state.advance %c : !cs
    %r:2 = scf.for %i = %c0 to %n step %c1 iter_args(%s = %c1s, %q = %prev) -> (!cs, !cs) {
      pipeline.consumer.wait %p, %s : !P, !cs
      pipeline.consumer.release %p, %q : !P, !cs
      %sn = pipeline.state.advance %s : !cs
      %qn = pipeline.state.advance %q : !cs
      scf.yield %sn, %qn : !cs, !cs
    }
    pipeline.consumer.release %p, %r#1 : !P, !cs
  }
  gpu.return
}
}

// -----

// Bug: per tile, the compute warps sync with the load warp on barrier 3,
// but with no k-blocks they only arrive and loop around. (The two roles
// sync at their own sites: unaligned, as check 19 asks.)
gpu.module @k {
gpu.func @arrive_on_empty_tile(%tiles: index, %k: index) kernel attributes {known_block_size = array<i32: 160, 1, 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %tid = gpu.thread_id x
  %w = arith.divui %tid, %c32 : index
  %is0 = arith.cmpi eq, %w, %c0 : index
  %p = pipeline.create {name = "unused"} : !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
  scf.if %is0 {
    scf.for %t = %c0 to %tiles step %c1 {
      pipeline.named_barrier.sync id = 3, threads = 160 {unaligned}
    }
  } else {
    scf.for %t = %c0 to %tiles step %c1 {
      %work = arith.cmpi sgt, %k, %c0 : index
      scf.if %work {
        // expected-note @+1 {{the other branch syncs on it here}}
        pipeline.named_barrier.sync id = 3, threads = 160 {unaligned}
      } else {
        // expected-error @+1 {{named barrier 3: this branch only arrives on it (arrive) where the other branch of the same if syncs on it (arrive_and_wait / sync), inside a loop (rule: a role reaches a named barrier with the same verb on every path)}}
        pipeline.named_barrier.arrive id = 3, threads = 160 {unaligned}
      }
    }
  }
  gpu.return
}
}

// -----

// Twin: both paths sync; and a hand-over where one role only arrives and
// the other only syncs (one verb per path) stays silent.
gpu.module @k {
gpu.func @sync_on_both_paths(%tiles: index, %k: index) kernel attributes {known_block_size = array<i32: 160, 1, 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %tid = gpu.thread_id x
  %w = arith.divui %tid, %c32 : index
  %is0 = arith.cmpi eq, %w, %c0 : index
  %p = pipeline.create {name = "unused"} : !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
  scf.if %is0 {
    scf.for %t = %c0 to %tiles step %c1 {
      pipeline.named_barrier.sync id = 3, threads = 160 {unaligned}
      pipeline.named_barrier.arrive id = 4, threads = 160
    }
  } else {
    scf.for %t = %c0 to %tiles step %c1 {
      %work = arith.cmpi sgt, %k, %c0 : index
      scf.if %work {
        pipeline.named_barrier.sync id = 3, threads = 160 {unaligned}
      } else {
        pipeline.named_barrier.sync id = 3, threads = 160 {unaligned}
      }
      pipeline.named_barrier.sync id = 4, threads = 160
    }
  }
  gpu.return
}
}

// -----

// Bug: the consumer warp syncs the cluster inside its role; the producer
// warp waits at bar.sync 0 where the roles join.
gpu.module @k {
gpu.func @cluster_sync_in_role() kernel attributes {known_block_size = array<i32: 64, 1, 1>, known_cluster_size = array<i32: 2, 1, 1>} {
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %p = pipeline.create {name = "unused"} : !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
  %tid = gpu.thread_id x
  %w = arith.divui %tid, %c32 : index
  %is1 = arith.cmpi eq, %w, %c1 : index
  // expected-note @+1 {{the warp-role branch starts here}}
  scf.if %is1 {
    // expected-error @+1 {{cluster barrier inside a warp-role branch (rule: barrier.cluster has no thread mask, it completes when every non-exited thread of the cluster arrived)}}
    nvvm.cluster.arrive
    nvvm.cluster.wait
  }
  // expected-note @+1 {{the other warps wait here without arriving on the cluster barrier}}
  nvvm.barrier0
  gpu.return
}
}

// -----

// Twin: the cluster barrier after the join, where every warp reaches it.
gpu.module @k {
gpu.func @cluster_sync_after_join() kernel attributes {known_block_size = array<i32: 64, 1, 1>, known_cluster_size = array<i32: 2, 1, 1>} {
  %p = pipeline.create {name = "unused"} : !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
  nvvm.barrier0
  nvvm.cluster.arrive
  nvvm.cluster.wait
  gpu.return
}
}
