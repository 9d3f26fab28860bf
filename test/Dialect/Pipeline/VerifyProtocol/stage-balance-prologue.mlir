// Property 11, stage balance across roles, for the two shapes a user writes
// around a loop of run-time trip count n (docs/VerifyProtocol.md):
// - a prologue of S stages before `for i in [S, n)`: the loop runs
//   max(0, n - S) times, so the role handles max(S, n) stages, which is n
//   only when n >= S; the count keeps the max (a loop from 2 or more to a
//   run-time bound), and the correct prologue guards each step with `n > i`;
// - a verb under a branch on the loop variable, `i + 1 < n` (an epilogue
//   peeled by hand): the branch holds on n - 1 iterations of the loop's n
//   (any `a * i + b <cmp> c`, in a loop of constant step, is counted: in
//   `range(0, n, 2)`, `i + 1 < n` holds on ceildiv(n - 1, 2) iterations).
// - a loop from 1 with nothing peeled before it runs max(0, n - 1) times
//   (after a peeled first iteration it is n - 1: the kernel assumes n >= 1).
// Each bug sits next to its correct twin, which must stay silent.
// RUN: pipeline-opt --pipeline-verify-protocol -split-input-file -verify-diagnostics %s
!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>

// Bug: the producer fills both stages in a prologue, then the rest in
// [2, n): with n = 1 it fills 2 stages for a consumer that takes 1.
gpu.module @k {
gpu.func @fixed_prologue(%n: index) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
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
    pipeline.producer.acquire %p, %s0 : !P, !ps
    // expected-error @+1 {{pipeline 'ab': the producer role (one warp) commits max(0, %arg0 - 2) + 2 stages, the consumer role (one warp) releases %arg0 (for %arg0 = 1: 2 against 1): the producer fills stages nobody consumes and waits forever for them to come back (a loop from a constant start runs max(0, %arg0 - 2) times: when the trip count is below that start, the stages outside the loop (a prologue before it, a last iteration peeled after it) still all run; guard each of them with the trip count, `if n > i`)}}
    pipeline.producer.commit %p, %s0 : !P, !ps
    %s1 = pipeline.state.advance %s0 : !ps
    pipeline.producer.acquire %p, %s1 : !P, !ps
    pipeline.producer.commit %p, %s1 : !P, !ps
    %s2 = pipeline.state.advance %s1 : !ps
    %sN = scf.for %i = %c2 to %n step %c1 iter_args(%s = %s2) -> (!ps) {
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
      // expected-note @+1 {{the consumer releases here}}
      pipeline.consumer.release %p, %s : !P, !cs
      %sn = pipeline.state.advance %s : !cs
      scf.yield %sn : !cs
    }
  }
  gpu.return
}
}

// -----

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>

// Twin: each prologue step runs only when the trip count reaches it
// (`n > 0`, `n > 1`): [n > 0] + [n > 1] + max(0, n - 2) = n for every n.
gpu.module @k {
gpu.func @guarded_prologue(%n: index) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c32 = arith.constant 32 : index
  %p = pipeline.create {name = "ab"} : !P
  %tid = gpu.thread_id x
  %w = arith.divui %tid, %c32 : index
  %is0 = arith.cmpi eq, %w, %c0 : index
  scf.if %is0 {
    %s0 = pipeline.state.make : !ps
    %g0 = arith.cmpi sgt, %n, %c0 : index
    %s1 = scf.if %g0 -> (!ps) {
      pipeline.producer.acquire %p, %s0 : !P, !ps
      pipeline.producer.commit %p, %s0 : !P, !ps
      %a = pipeline.state.advance %s0 : !ps
      scf.yield %a : !ps
    } else {
      scf.yield %s0 : !ps
    }
    %g1 = arith.cmpi sgt, %n, %c1 : index
    %s2 = scf.if %g1 -> (!ps) {
      pipeline.producer.acquire %p, %s1 : !P, !ps
      pipeline.producer.commit %p, %s1 : !P, !ps
      %a = pipeline.state.advance %s1 : !ps
      scf.yield %a : !ps
    } else {
      scf.yield %s1 : !ps
    }
    %sN = scf.for %i = %c2 to %n step %c1 iter_args(%s = %s2) -> (!ps) {
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

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>

// Bug: the commit sits under `i + 1 < n`, true on n - 1 of the n trips:
// the last stage is acquired and never committed.
gpu.module @k {
gpu.func @commit_in_peeled_branch(%n: index) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
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
    %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
      // expected-note @+1 {{pipeline.producer.acquire here}}
      pipeline.producer.acquire %p, %s : !P, !ps
      %i1 = arith.addi %i, %c1 : index
      %more = arith.cmpi slt, %i1, %n : index
      scf.if %more {
        // expected-error @+1 {{pipeline 'ab': this role acquires %arg0 stages but commits %arg0 - 1 (for %arg0 = 1: 1 against 0); every pipeline.producer.acquire needs its pipeline.producer.commit the same number of times: the pipeline.producer.commit here sits in a branch on the loop variable that holds on %arg0 - 1 of the loop's %arg0 iterations (move it out of the branch, or run it after the loop for the iterations the branch skips)}}
        pipeline.producer.commit %p, %s : !P, !ps
      }
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

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>

// Twin: the same branch (written `n > i + 1`) commits the first n - 1
// stages; the last one is committed after the loop, on the state the loop
// left one stage behind: n acquires, n - 1 + 1 commits.
gpu.module @k {
gpu.func @peeled_commit_after_loop(%n: index) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %p = pipeline.create {name = "ab"} : !P
  %tid = gpu.thread_id x
  %w = arith.divui %tid, %c32 : index
  %is0 = arith.cmpi eq, %w, %c0 : index
  scf.if %is0 {
    %s0 = pipeline.state.make : !ps
    %nm1 = arith.subi %n, %c1 : index
    %sN = scf.for %i = %c0 to %nm1 step %c1 iter_args(%s = %s0) -> (!ps) {
      pipeline.producer.acquire %p, %s : !P, !ps
      %i1 = arith.addi %i, %c1 : index
      %more = arith.cmpi sgt, %n, %i1 : index
      scf.if %more {
        pipeline.producer.commit %p, %s : !P, !ps
      }
      %sn = pipeline.state.advance %s : !ps
      scf.yield %sn : !ps
    }
    pipeline.producer.acquire %p, %sN : !P, !ps
    pipeline.producer.commit %p, %sN : !P, !ps
    %sL = pipeline.state.advance %sN : !ps
    pipeline.producer.tail %p, %sL : !P, !ps
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

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>

// Bug: a consumer unrolled by two, its second stage under `i + 2 < n`:
// for even n the last iteration skips a stage the producer filled.
gpu.module @k {
gpu.func @unrolled_by_two_skips_last(%n: index) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
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
    %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
      pipeline.producer.acquire %p, %s : !P, !ps
      // expected-note @+1 {{the producer commits here}}
      pipeline.producer.commit %p, %s : !P, !ps
      %sn = pipeline.state.advance %s : !ps
      scf.yield %sn : !ps
    }
    pipeline.producer.tail %p, %sN : !P, !ps
  } else {
    %c = pipeline.state.make : !cs
    %cN = scf.for %i = %c0 to %n step %c2 iter_args(%s = %c) -> (!cs) {
      pipeline.consumer.wait %p, %s : !P, !cs
      // expected-error @+1 {{pipeline 'ab': the producer role (one warp) commits %arg0 stages, the consumer role (one warp) releases ceildiv(%arg0 - 2, 2) + ceildiv(%arg0, 2) (for %arg0 = 2: 2 against 1): the producer fills stages nobody consumes and waits forever for them to come back (give both roles the same loop bounds)}}
      pipeline.consumer.release %p, %s : !P, !cs
      %s1 = pipeline.state.advance %s : !cs
      %next = arith.addi %i, %c2 : index
      %more = arith.cmpi slt, %next, %n : index
      %s2 = scf.if %more -> (!cs) {
        pipeline.consumer.wait %p, %s1 : !P, !cs
        pipeline.consumer.release %p, %s1 : !P, !cs
        %a = pipeline.state.advance %s1 : !cs
        scf.yield %a : !cs
      } else {
        scf.yield %s1 : !cs
      }
      scf.yield %s2 : !cs
    }
  }
  gpu.return
}
}

// -----

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>

// Twin: the second stage under `i + 1 < n`: ceildiv(n, 2) + ceildiv(n - 1, 2)
// = n for every n.
gpu.module @k {
gpu.func @unrolled_by_two_guarded(%n: index) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c32 = arith.constant 32 : index
  %p = pipeline.create {name = "ab"} : !P
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
    %cN = scf.for %i = %c0 to %n step %c2 iter_args(%s = %c) -> (!cs) {
      pipeline.consumer.wait %p, %s : !P, !cs
      pipeline.consumer.release %p, %s : !P, !cs
      %s1 = pipeline.state.advance %s : !cs
      %next = arith.addi %i, %c1 : index
      %more = arith.cmpi slt, %next, %n : index
      %s2 = scf.if %more -> (!cs) {
        pipeline.consumer.wait %p, %s1 : !P, !cs
        pipeline.consumer.release %p, %s1 : !P, !cs
        %a = pipeline.state.advance %s1 : !cs
        scf.yield %a : !cs
      } else {
        scf.yield %s1 : !cs
      }
      scf.yield %s2 : !cs
    }
  }
  gpu.return
}
}

// -----

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>

// Bug: the producer runs its k-loop from 1 with nothing peeled before it,
// then one last stage after it: max(0, n - 1) + 1 stages, n only when
// n >= 1; with n = 0 it fills a stage nobody consumes. (A loop from 1 is
// counted n - 1 only after a peeled first iteration, which promises n >= 1.)
gpu.module @k {
gpu.func @loop_from_1_then_last(%n: index) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
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
    %s1 = scf.for %i = %c1 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
      pipeline.producer.acquire %p, %s : !P, !ps
      // expected-error @+1 {{pipeline 'ab': the producer role (one warp) commits max(0, %arg0 - 1) + 1 stages, the consumer role (one warp) releases %arg0 (for %arg0 = 0: 1 against 0): the producer fills stages nobody consumes and waits forever for them to come back (a loop from a constant start runs max(0, %arg0 - 1) times: when the trip count is below that start, the stages outside the loop (a prologue before it, a last iteration peeled after it) still all run; guard each of them with the trip count, `if n > i`)}}
      pipeline.producer.commit %p, %s : !P, !ps
      %sn = pipeline.state.advance %s : !ps
      scf.yield %sn : !ps
    }
    pipeline.producer.acquire %p, %s1 : !P, !ps
    pipeline.producer.commit %p, %s1 : !P, !ps
    %sN = pipeline.state.advance %s1 : !ps
    pipeline.producer.tail %p, %sN : !P, !ps
  } else {
    %c = pipeline.state.make : !cs
    %cN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %c) -> (!cs) {
      pipeline.consumer.wait %p, %s : !P, !cs
      // expected-note @+1 {{the consumer releases here}}
      pipeline.consumer.release %p, %s : !P, !cs
      %sn = pipeline.state.advance %s : !cs
      scf.yield %sn : !cs
    }
  }
  gpu.return
}
}

// -----

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>

// Twin: the last stage runs only when there is one (n > 0).
gpu.module @k {
gpu.func @loop_from_1_then_guarded_last(%n: index) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %p = pipeline.create {name = "ab"} : !P
  %tid = gpu.thread_id x
  %w = arith.divui %tid, %c32 : index
  %is0 = arith.cmpi eq, %w, %c0 : index
  scf.if %is0 {
    %s0 = pipeline.state.make : !ps
    %s1 = scf.for %i = %c1 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
      pipeline.producer.acquire %p, %s : !P, !ps
      pipeline.producer.commit %p, %s : !P, !ps
      %sn = pipeline.state.advance %s : !ps
      scf.yield %sn : !ps
    }
    %any = arith.cmpi sgt, %n, %c0 : index
    %sN = scf.if %any -> (!ps) {
      pipeline.producer.acquire %p, %s1 : !P, !ps
      pipeline.producer.commit %p, %s1 : !P, !ps
      %sl = pipeline.state.advance %s1 : !ps
      scf.yield %sl : !ps
    } else {
      scf.yield %s1 : !ps
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

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>

// Boundary: a peeled first iteration before the loop from 1, unconditional
// (FlashAttention's mainloop from k-block 1): the kernel assumes n >= 1,
// and 1 + (n - 1) is n there.
gpu.module @k {
gpu.func @peeled_first_then_loop_from_1(%n: index) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %p = pipeline.create {name = "ab"} : !P
  %tid = gpu.thread_id x
  %w = arith.divui %tid, %c32 : index
  %is0 = arith.cmpi eq, %w, %c0 : index
  scf.if %is0 {
    %s0 = pipeline.state.make : !ps
    pipeline.producer.acquire %p, %s0 : !P, !ps
    pipeline.producer.commit %p, %s0 : !P, !ps
    %sp = pipeline.state.advance %s0 : !ps
    %sN = scf.for %i = %c1 to %n step %c1 iter_args(%s = %sp) -> (!ps) {
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

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>

// Bug: the loop from 1 of @loop_from_1_then_last, after a verb of another
// ring ('q', one stage handed over before the k-loop): that verb peels
// nothing of ring 'ab', so its loop still runs max(0, n - 1) times.
gpu.module @k {
gpu.func @loop_from_1_after_another_rings_verb(%n: index) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  // expected-note @+1 {{pipeline 'ab' is created here}}
  %p = pipeline.create {name = "ab"} : !P
  %q = pipeline.create {name = "q"} : !P
  %tid = gpu.thread_id x
  %w = arith.divui %tid, %c32 : index
  %is0 = arith.cmpi eq, %w, %c0 : index
  // expected-note @+2 {{the producer role}}
  // expected-note @+1 {{the consumer role}}
  scf.if %is0 {
    %q0 = pipeline.state.make : !ps
    pipeline.producer.acquire %q, %q0 : !P, !ps
    pipeline.producer.commit %q, %q0 : !P, !ps
    %q1 = pipeline.state.advance %q0 : !ps
    %s0 = pipeline.state.make : !ps
    %s1 = scf.for %i = %c1 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
      pipeline.producer.acquire %p, %s : !P, !ps
      // expected-error @+1 {{pipeline 'ab': the producer role (one warp) commits max(0, %arg0 - 1) + 1 stages, the consumer role (one warp) releases %arg0 (for %arg0 = 0: 1 against 0)}}
      pipeline.producer.commit %p, %s : !P, !ps
      %sn = pipeline.state.advance %s : !ps
      scf.yield %sn : !ps
    }
    pipeline.producer.acquire %p, %s1 : !P, !ps
    pipeline.producer.commit %p, %s1 : !P, !ps
    %sN = pipeline.state.advance %s1 : !ps
    pipeline.producer.tail %p, %sN : !P, !ps
    pipeline.producer.tail %q, %q1 : !P, !ps
  } else {
    %r0 = pipeline.state.make : !cs
    pipeline.consumer.wait %q, %r0 : !P, !cs
    pipeline.consumer.release %q, %r0 : !P, !cs
    %c = pipeline.state.make : !cs
    %cN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %c) -> (!cs) {
      pipeline.consumer.wait %p, %s : !P, !cs
      // expected-note @+1 {{the consumer releases here}}
      pipeline.consumer.release %p, %s : !P, !cs
      %sn = pipeline.state.advance %s : !cs
      scf.yield %sn : !cs
    }
  }
  gpu.return
}
}

// -----

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>

// Twin: ring 'ab''s own first iteration peeled before its loop from 1 (the
// other ring's verb before it too); the kernel assumes n >= 1.
gpu.module @k {
gpu.func @loop_from_1_after_own_peel(%n: index) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %p = pipeline.create {name = "ab"} : !P
  %q = pipeline.create {name = "q"} : !P
  %tid = gpu.thread_id x
  %w = arith.divui %tid, %c32 : index
  %is0 = arith.cmpi eq, %w, %c0 : index
  scf.if %is0 {
    %q0 = pipeline.state.make : !ps
    pipeline.producer.acquire %q, %q0 : !P, !ps
    pipeline.producer.commit %q, %q0 : !P, !ps
    %q1 = pipeline.state.advance %q0 : !ps
    %s0 = pipeline.state.make : !ps
    pipeline.producer.acquire %p, %s0 : !P, !ps
    pipeline.producer.commit %p, %s0 : !P, !ps
    %sp = pipeline.state.advance %s0 : !ps
    %sN = scf.for %i = %c1 to %n step %c1 iter_args(%s = %sp) -> (!ps) {
      pipeline.producer.acquire %p, %s : !P, !ps
      pipeline.producer.commit %p, %s : !P, !ps
      %sn = pipeline.state.advance %s : !ps
      scf.yield %sn : !ps
    }
    pipeline.producer.tail %p, %sN : !P, !ps
    pipeline.producer.tail %q, %q1 : !P, !ps
  } else {
    %r0 = pipeline.state.make : !cs
    pipeline.consumer.wait %q, %r0 : !P, !cs
    pipeline.consumer.release %q, %r0 : !P, !cs
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
