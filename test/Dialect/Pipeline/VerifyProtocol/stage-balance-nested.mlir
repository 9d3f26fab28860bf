// Property 11 on persistent kernels: a tile loop around
// the k-block loop, the states carried through the inner loop's results.
// When the inner bound is computed from the tile index (causal attention's
// k-block loop ends at the diagonal), each role's count is a sum over the
// tiles; the roles compute the bound with the same ops from the same
// values, so the sums are compared term by term. Each bug sits next to its
// correct twin, which must stay silent.
// RUN: pipeline-opt --pipeline-verify-protocol -split-input-file -verify-diagnostics %s
!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>

// Bug: the consumer's k-block loop ends one block past the diagonal
// (min(n, t + 2) against the producer's min(n, t + 1)).
gpu.module @k {
gpu.func @causal_off_by_one(%tiles: index, %n: index) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c32 = arith.constant 32 : index
  // expected-note @+1 {{pipeline 'ab' is created here}}
  %p = pipeline.create {name = "ab"} : !P
  %tid = gpu.thread_id x
  %w = arith.divui %tid, %c32 : index
  %is0 = arith.cmpi eq, %w, %c0 : index
  // expected-note @+2 {{the producer role}}
  // expected-note @+1 {{the consumer role}}
  scf.if %is0 {
    %s0 = pipeline.state.make : !ps
    %sT = scf.for %t = %c0 to %tiles step %c1 iter_args(%st = %s0) -> (!ps) {
      %t1 = arith.addi %t, %c1 : index
      %kb = arith.minsi %n, %t1 : index
      %sK = scf.for %i = %c0 to %kb step %c1 iter_args(%s = %st) -> (!ps) {
        pipeline.producer.acquire %p, %s : !P, !ps
        // expected-note @+1 {{the producer commits here}}
        pipeline.producer.commit %p, %s : !P, !ps
        %s1 = pipeline.state.advance %s : !ps
        scf.yield %s1 : !ps
      }
      scf.yield %sK : !ps
    }
    pipeline.producer.tail %p, %sT : !P, !ps
  } else {
    %c = pipeline.state.make : !cs
    %cT = scf.for %t = %c0 to %tiles step %c1 iter_args(%ct = %c) -> (!cs) {
      %t2 = arith.addi %t, %c2 : index
      %kb = arith.minsi %n, %t2 : index
      %cK = scf.for %i = %c0 to %kb step %c1 iter_args(%s = %ct) -> (!cs) {
        pipeline.consumer.wait %p, %s : !P, !cs
        // expected-error @+1 {{pipeline 'ab': the producer role (one warp) commits sum(%iv in [0, %arg0): min(%arg1, %iv + 1)) stages, the consumer role (one warp) releases sum(%iv in [0, %arg0): min(%arg1, %iv + 2)) (for %arg0 = 1, %arg1 = 2: 1 against 2): the consumers wait on stages nobody fills (give both roles the same loop bounds)}}
        pipeline.consumer.release %p, %s : !P, !cs
        %s1 = pipeline.state.advance %s : !cs
        scf.yield %s1 : !cs
      }
      scf.yield %cK : !cs
    }
  }
  gpu.return
}
}

// -----

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>

// Twin: both roles end at the diagonal, each computing the bound itself
// (the consumer writes min(t + 1, n): min is commutative).
gpu.module @k {
gpu.func @causal_twin(%tiles: index, %n: index) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %p = pipeline.create {name = "ab"} : !P
  %tid = gpu.thread_id x
  %w = arith.divui %tid, %c32 : index
  %is0 = arith.cmpi eq, %w, %c0 : index
  scf.if %is0 {
    %s0 = pipeline.state.make : !ps
    %sT = scf.for %t = %c0 to %tiles step %c1 iter_args(%st = %s0) -> (!ps) {
      %t1 = arith.addi %t, %c1 : index
      %kb = arith.minsi %n, %t1 : index
      %sK = scf.for %i = %c0 to %kb step %c1 iter_args(%s = %st) -> (!ps) {
        pipeline.producer.acquire %p, %s : !P, !ps
        pipeline.producer.commit %p, %s : !P, !ps
        %s1 = pipeline.state.advance %s : !ps
        scf.yield %s1 : !ps
      }
      scf.yield %sK : !ps
    }
    pipeline.producer.tail %p, %sT : !P, !ps
  } else {
    %c = pipeline.state.make : !cs
    %cT = scf.for %t = %c0 to %tiles step %c1 iter_args(%ct = %c) -> (!cs) {
      %t1 = arith.addi %c1, %t : index
      %kb = arith.minsi %t1, %n : index
      %cK = scf.for %i = %c0 to %kb step %c1 iter_args(%s = %ct) -> (!cs) {
        pipeline.consumer.wait %p, %s : !P, !cs
        pipeline.consumer.release %p, %s : !P, !cs
        %s1 = pipeline.state.advance %s : !cs
        scf.yield %s1 : !cs
      }
      scf.yield %cK : !cs
    }
  }
  gpu.return
}
}

// -----

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>

// Bug (the FA-3 consumer's shape): block 0 is peeled off the k-block loop
// (its wait and release before the loop), the loop over [1, kb(t)) waits on
// every later block and lost its release. Check 1 takes the loop for a
// prologue (the release is elsewhere in the role); over the kernel the role
// waits on sum over tiles of kb(t) stages and releases one per tile.
gpu.module @k {
gpu.func @peeled_release_dropped(%tiles: index, %n: index) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %p = pipeline.create {name = "ab"} : !P
  %tid = gpu.thread_id x
  %w = arith.divui %tid, %c32 : index
  %is0 = arith.cmpi eq, %w, %c0 : index
  // expected-note @+1 {{in this role}}
  scf.if %is0 {
    %s0 = pipeline.state.make : !ps
    %sT = scf.for %t = %c0 to %tiles step %c1 iter_args(%st = %s0) -> (!ps) {
      %t1 = arith.addi %t, %c1 : index
      %kb = arith.minsi %n, %t1 : index
      %sK = scf.for %i = %c0 to %kb step %c1 iter_args(%s = %st) -> (!ps) {
        pipeline.producer.acquire %p, %s : !P, !ps
        pipeline.producer.commit %p, %s : !P, !ps
        %s1 = pipeline.state.advance %s : !ps
        scf.yield %s1 : !ps
      }
      scf.yield %sK : !ps
    }
    pipeline.producer.tail %p, %sT : !P, !ps
  } else {
    %c = pipeline.state.make : !cs
    %cT = scf.for %t = %c0 to %tiles step %c1 iter_args(%ct = %c) -> (!cs) {
      %t1 = arith.addi %t, %c1 : index
      %kb = arith.minsi %n, %t1 : index
      // expected-note @+1 {{pipeline.consumer.wait here}}
      pipeline.consumer.wait %p, %ct : !P, !cs
      // expected-error @+1 {{pipeline 'ab': this role waits on sum(%iv in [0, %arg0): min(%arg1, %iv + 1)) stages but releases %arg0 (for %arg0 = 2, %arg1 = 2: 3 against 2); every pipeline.consumer.wait needs its pipeline.consumer.release the same number of times (check the loop bounds)}}
      pipeline.consumer.release %p, %ct : !P, !cs
      %c1st = pipeline.state.advance %ct : !cs
      %cK = scf.for %i = %c1 to %kb step %c1 iter_args(%s = %c1st) -> (!cs) {
        pipeline.consumer.wait %p, %s : !P, !cs
        %s1 = pipeline.state.advance %s : !cs
        scf.yield %s1 : !cs
      }
      scf.yield %cK : !cs
    }
  }
  gpu.return
}
}

// -----

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>

// Twin: the k-block loop releases what it waits on.
gpu.module @k {
gpu.func @peeled_twin(%tiles: index, %n: index) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %p = pipeline.create {name = "ab"} : !P
  %tid = gpu.thread_id x
  %w = arith.divui %tid, %c32 : index
  %is0 = arith.cmpi eq, %w, %c0 : index
  scf.if %is0 {
    %s0 = pipeline.state.make : !ps
    %sT = scf.for %t = %c0 to %tiles step %c1 iter_args(%st = %s0) -> (!ps) {
      %t1 = arith.addi %t, %c1 : index
      %kb = arith.minsi %n, %t1 : index
      %sK = scf.for %i = %c0 to %kb step %c1 iter_args(%s = %st) -> (!ps) {
        pipeline.producer.acquire %p, %s : !P, !ps
        pipeline.producer.commit %p, %s : !P, !ps
        %s1 = pipeline.state.advance %s : !ps
        scf.yield %s1 : !ps
      }
      scf.yield %sK : !ps
    }
    pipeline.producer.tail %p, %sT : !P, !ps
  } else {
    %c = pipeline.state.make : !cs
    %cT = scf.for %t = %c0 to %tiles step %c1 iter_args(%ct = %c) -> (!cs) {
      %t1 = arith.addi %t, %c1 : index
      %kb = arith.minsi %n, %t1 : index
      pipeline.consumer.wait %p, %ct : !P, !cs
      pipeline.consumer.release %p, %ct : !P, !cs
      %c1st = pipeline.state.advance %ct : !cs
      %cK = scf.for %i = %c1 to %kb step %c1 iter_args(%s = %c1st) -> (!cs) {
        pipeline.consumer.wait %p, %s : !P, !cs
        pipeline.consumer.release %p, %s : !P, !cs
        %s1 = pipeline.state.advance %s : !cs
        scf.yield %s1 : !cs
      }
      scf.yield %cK : !cs
    }
  }
  gpu.return
}
}

// -----

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>

// Bug: the state threaded through the k-block loop's results advances twice
// after the peeled block 0: every tile skips a stage (the counts of verbs
// agree; the stage order does not). Check 2 decides chains within one loop
// body; this one goes through the inner loop's result.
gpu.module @k {
gpu.func @nested_state_skips_a_stage(%tiles: index, %n: index) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %p = pipeline.create {name = "ab"} : !P
  %tid = gpu.thread_id x
  %w = arith.divui %tid, %c32 : index
  %is0 = arith.cmpi eq, %w, %c0 : index
  scf.if %is0 {
    %s0 = pipeline.state.make : !ps
    // expected-error @+1 {{pipeline 'ab': the state carried by this loop advances %arg1 + 1 stages per iteration (through a nested loop's results) but the body acquires %arg1 (over the kernel: for %arg0 = 1, %arg1 = 1: 2 against 1): stages are skipped and their barriers never complete (advance the state once per stage used, and pass the nested loop's result on)}}
    %sT = scf.for %t = %c0 to %tiles step %c1 iter_args(%st = %s0) -> (!ps) {
      // expected-note @+1 {{the state is used here}}
      pipeline.producer.acquire %p, %st : !P, !ps
      pipeline.producer.commit %p, %st : !P, !ps
      %a1 = pipeline.state.advance %st : !ps
      %a2 = pipeline.state.advance %a1 : !ps
      %sK = scf.for %i = %c1 to %n step %c1 iter_args(%s = %a2) -> (!ps) {
        pipeline.producer.acquire %p, %s : !P, !ps
        pipeline.producer.commit %p, %s : !P, !ps
        %s1 = pipeline.state.advance %s : !ps
        scf.yield %s1 : !ps
      }
      scf.yield %sK : !ps
    }
    pipeline.producer.tail %p, %sT : !P, !ps
  } else {
    %c = pipeline.state.make : !cs
    %cT = scf.for %t = %c0 to %tiles step %c1 iter_args(%ct = %c) -> (!cs) {
      %cK = scf.for %i = %c0 to %n step %c1 iter_args(%s = %ct) -> (!cs) {
        pipeline.consumer.wait %p, %s : !P, !cs
        pipeline.consumer.release %p, %s : !P, !cs
        %s1 = pipeline.state.advance %s : !cs
        scf.yield %s1 : !cs
      }
      scf.yield %cK : !cs
    }
  }
  gpu.return
}
}

// -----

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>

// Twin: one advance per stage, the inner loop's result carried on.
gpu.module @k {
gpu.func @nested_state_twin(%tiles: index, %n: index) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %p = pipeline.create {name = "ab"} : !P
  %tid = gpu.thread_id x
  %w = arith.divui %tid, %c32 : index
  %is0 = arith.cmpi eq, %w, %c0 : index
  scf.if %is0 {
    %s0 = pipeline.state.make : !ps
    %sT = scf.for %t = %c0 to %tiles step %c1 iter_args(%st = %s0) -> (!ps) {
      pipeline.producer.acquire %p, %st : !P, !ps
      pipeline.producer.commit %p, %st : !P, !ps
      %a1 = pipeline.state.advance %st : !ps
      %sK = scf.for %i = %c1 to %n step %c1 iter_args(%s = %a1) -> (!ps) {
        pipeline.producer.acquire %p, %s : !P, !ps
        pipeline.producer.commit %p, %s : !P, !ps
        %s1 = pipeline.state.advance %s : !ps
        scf.yield %s1 : !ps
      }
      scf.yield %sK : !ps
    }
    pipeline.producer.tail %p, %sT : !P, !ps
  } else {
    %c = pipeline.state.make : !cs
    %cT = scf.for %t = %c0 to %tiles step %c1 iter_args(%ct = %c) -> (!cs) {
      %cK = scf.for %i = %c0 to %n step %c1 iter_args(%s = %ct) -> (!cs) {
        pipeline.consumer.wait %p, %s : !P, !cs
        pipeline.consumer.release %p, %s : !P, !cs
        %s1 = pipeline.state.advance %s : !cs
        scf.yield %s1 : !cs
      }
      scf.yield %cK : !cs
    }
  }
  gpu.return
}
}
