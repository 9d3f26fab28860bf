// Property 1 for a branch on the loop's own iteration that repeats every m
// iterations (`i % m == r`), in a loop whose trip count is only known at
// run time: over each period, the pairs must add up. A chunk without
// expected-* lines is a correct twin: any diagnostic fails it.
// RUN: pipeline-opt --pipeline-verify-protocol -split-input-file -verify-diagnostics %s

!P = !pipeline.pipeline<async, stages = 4, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!cs = !pipeline.state<4, consumer>

// The bug: the consumer waits on every iteration and releases on even ones
// only (it meant to release two stages there).
func.func @release_on_even_iterations(%n: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c2 = arith.constant 2 : i32
  // expected-note @+1 {{pipeline 'ring' is created here}}
  %p = pipeline.create {name = "ring"} : !P
  %s0 = pipeline.state.make : !cs
  // expected-note @+1 {{in this loop}}
  %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!cs) : i32 {
    pipeline.consumer.wait %p, %s : !P, !cs
    %r = arith.remsi %i, %c2 : i32
    %even = arith.cmpi eq, %r, %c0 : i32
    // expected-note @+1 {{the branch on the iteration is here}}
    scf.if %even {
      // expected-error @+1 {{pipeline 'ring': pipeline.consumer.release runs on 1 of every 2 iterations (its scf.if's condition repeats every 2 iterations), and the loop's trip count is only known at run time: every 2 iterations the loop waits on 2 stages but releases 1, so the difference grows with the trip count and the pipeline stalls (balance them over each period: release on the iterations that take the branch as many stages as the period needs, or release on every iteration)}}
      pipeline.consumer.release %p, %s : !P, !cs
    }
    %s1 = pipeline.state.advance %s : !cs
    scf.yield %s1 : !cs
  }
  return
}

// -----

!P = !pipeline.pipeline<async, stages = 4, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!ps = !pipeline.state<4, producer>

// The producer's side, over a period of 4 (an offset iteration variable):
// the commit is skipped whenever (i + 1) % 4 == 0.
func.func @commit_on_three_of_four(%n: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c4 = arith.constant 4 : i32
  // expected-note @+1 {{pipeline 'ring' is created here}}
  %p = pipeline.create {name = "ring"} : !P
  %s0 = pipeline.state.make : !ps
  // expected-note @+1 {{in this loop}}
  %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) : i32 {
    pipeline.producer.acquire %p, %s : !P, !ps
    %j = arith.addi %i, %c1 : i32
    %r = arith.remui %j, %c4 : i32
    %keep = arith.cmpi ne, %r, %c0 : i32
    // expected-note @+1 {{the branch on the iteration is here}}
    scf.if %keep {
      // expected-error @+1 {{every 4 iterations the loop acquires 4 stages but commits 3}}
      pipeline.producer.commit %p, %s : !P, !ps
    }
    %s1 = pipeline.state.advance %s : !ps
    scf.yield %s1 : !ps
  }
  pipeline.producer.tail %p, %sN : !P, !ps
  return
}

// -----

!P = !pipeline.pipeline<async, stages = 4, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!cs = !pipeline.state<4, consumer>

// The correct twin: what the bug meant. Two stages per two iterations,
// both released on the odd one (the even one's state is carried along).
func.func @release_two_on_odd_iterations(%n: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c2 = arith.constant 2 : i32
  %p = pipeline.create {name = "ring"} : !P
  %s0 = pipeline.state.make : !cs
  %sN:2 = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0, %prev = %s0) -> (!cs, !cs) : i32 {
    pipeline.consumer.wait %p, %s : !P, !cs
    %r = arith.remsi %i, %c2 : i32
    %odd = arith.cmpi eq, %r, %c1 : i32
    scf.if %odd {
      pipeline.consumer.release %p, %prev : !P, !cs
      pipeline.consumer.release %p, %s : !P, !cs
    }
    %s1 = pipeline.state.advance %s : !cs
    scf.yield %s1, %s : !cs, !cs
  }
  return
}

// -----

!P = !pipeline.pipeline<async, stages = 4, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!cs = !pipeline.state<4, consumer>

// Also correct, and left to the other checks: a peeled iteration (the
// previous stage released from the second iteration on, the last one after
// the loop) is not periodic; a periodic branch without verbs counts nothing.
func.func @release_previous_from_the_second(%n: i32, %buf: !llvm.ptr<3>, %v: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c8 = arith.constant 8 : i32
  %p = pipeline.create {name = "ring"} : !P
  %s0 = pipeline.state.make : !cs
  %sN:2 = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0, %prev = %s0) -> (!cs, !cs) : i32 {
    pipeline.consumer.wait %p, %s : !P, !cs
    %later = arith.cmpi sgt, %i, %c0 : i32
    scf.if %later {
      pipeline.consumer.release %p, %prev : !P, !cs
    }
    %r = arith.remsi %i, %c8 : i32
    %first = arith.cmpi eq, %r, %c0 : i32
    scf.if %first {
      llvm.store %v, %buf : i32, !llvm.ptr<3>
    }
    %s1 = pipeline.state.advance %s : !cs
    scf.yield %s1, %s : !cs, !cs
  }
  pipeline.consumer.release %p, %sN#1 : !P, !cs
  return
}
