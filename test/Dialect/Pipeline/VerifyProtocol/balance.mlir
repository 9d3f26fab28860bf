// Property 1: acquire/commit and wait/release balance per loop and per role.
// RUN: pipeline-opt --pipeline-verify-protocol -split-input-file -verify-diagnostics %s

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 128>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>

func.func @two_acquires_one_commit(%n: index, %warp: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %p = pipeline.create {name = "ab"} : !P
  %is_producer = arith.cmpi eq, %warp, %c0 : index
  scf.if %is_producer {
    %s0 = pipeline.state.make : !ps
    // expected-note @+1 {{in this loop}}
    %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
      pipeline.producer.acquire %p, %s : !P, !ps
      // expected-note @+1 {{pipeline.producer.commit here}}
      pipeline.producer.commit %p, %s : !P, !ps
      %s1 = pipeline.state.advance %s : !ps
      // expected-error @+1 {{pipeline 'ab': loop body acquires 2 stages but commits 1; every pipeline.producer.acquire needs a pipeline.producer.commit on the same state (add the missing pipeline.producer.commit before the state advances)}}
      pipeline.producer.acquire %p, %s1 : !P, !ps
      %s2 = pipeline.state.advance %s1 : !ps
      scf.yield %s2 : !ps
    }
    pipeline.producer.tail %p, %sN : !P, !ps
  }
  return
}

// -----

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 128>>
!cs = !pipeline.state<2, consumer>

// A consumer loop that never releases: the producer blocks after 2 stages.
func.func @wait_without_release(%n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %p = pipeline.create {name = "ab"} : !P
  %c = pipeline.state.make : !cs
  // expected-note @+1 {{in this loop}}
  %cN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %c) -> (!cs) {
    // expected-error @+1 {{pipeline 'ab': loop body waits on 1 stage but releases 0; every pipeline.consumer.wait needs a pipeline.consumer.release on the same state}}
    pipeline.consumer.wait %p, %s : !P, !cs
    %s1 = pipeline.state.advance %s : !cs
    scf.yield %s1 : !cs
  }
  return
}

// -----

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 128>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>

// Straight-line roles: the producer branch fills two stages, commits one.
func.func @straight_line_role(%warp: index) {
  %c0 = arith.constant 0 : index
  %p = pipeline.create {name = "kv"} : !P
  %is_producer = arith.cmpi eq, %warp, %c0 : index
  // expected-note @+1 {{in this role region}}
  scf.if %is_producer {
    %s0 = pipeline.state.make : !ps
    pipeline.producer.acquire %p, %s0 : !P, !ps
    // expected-note @+1 {{pipeline.producer.commit here}}
    pipeline.producer.commit %p, %s0 : !P, !ps
    %s1 = pipeline.state.advance %s0 : !ps
    // expected-error @+1 {{pipeline 'kv': this role acquires 2 stages but commits 1}}
    pipeline.producer.acquire %p, %s1 : !P, !ps
    pipeline.producer.tail %p, %s1 : !P, !ps
  } else {
    %c0s = pipeline.state.make : !cs
    pipeline.consumer.wait %p, %c0s : !P, !cs
    pipeline.consumer.release %p, %c0s : !P, !cs
  }
  return
}

// -----

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 128>>
!cs = !pipeline.state<2, consumer>

// A prologue loop may wait without releasing (the epilogue releases), but
// not on more stages than exist.
func.func @prologue_too_deep(%n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  // expected-note @+1 {{pipeline 'ab' is created here}}
  %p = pipeline.create {name = "ab"} : !P
  %c = pipeline.state.make : !cs
  // expected-error @+1 {{pipeline 'ab': this loop waits on 3 stages (3 iterations) without a consumer.release, but the pipeline has only 2 stages}}
  %r = scf.for %i = %c0 to %c3 step %c1 iter_args(%s = %c) -> (!cs) {
    pipeline.consumer.wait %p, %s : !P, !cs
    %s1 = pipeline.state.advance %s : !cs
    scf.yield %s1 : !cs
  }
  %e = scf.for %i = %c0 to %c3 step %c1 iter_args(%s = %c) -> (!cs) {
    pipeline.consumer.release %p, %s : !P, !cs
    %s1 = pipeline.state.advance %s : !cs
    scf.yield %s1 : !cs
  }
  return
}

// -----

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 128>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>

// Correct: the whole producer warp acquires, lane 0 commits (the group is
// one thread); a prologue of one stage and an epilogue of one stage around a
// lagged mainloop.
func.func @guarded_commit_and_prologue(%n: index) {
  %tid = gpu.thread_id x
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %p = pipeline.create {name = "ab"} : !P
  %warp = arith.divui %tid, %c32 : index
  %lane = arith.remui %tid, %c32 : index
  %is_producer = arith.cmpi eq, %warp, %c0 : index
  scf.if %is_producer {
    %s0 = pipeline.state.make : !ps
    %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
      pipeline.producer.acquire %p, %s : !P, !ps
      %lane0 = arith.cmpi eq, %lane, %c0 : index
      scf.if %lane0 {
        pipeline.producer.commit %p, %s : !P, !ps
      }
      %s1 = pipeline.state.advance %s : !ps
      scf.yield %s1 : !ps
    }
    pipeline.producer.tail %p, %sN : !P, !ps
  } else {
    %c = pipeline.state.make : !cs
    %pro = scf.for %i = %c0 to %c1 step %c1 iter_args(%s = %c) -> (!cs) {
      pipeline.consumer.wait %p, %s : !P, !cs
      %s1 = pipeline.state.advance %s : !cs
      scf.yield %s1 : !cs
    }
    %r:2 = scf.for %i = %c1 to %n step %c1 iter_args(%rd = %pro, %rl = %c) -> (!cs, !cs) {
      pipeline.consumer.wait %p, %rd : !P, !cs
      pipeline.consumer.release %p, %rl : !P, !cs
      %rd1 = pipeline.state.advance %rd : !cs
      %rl1 = pipeline.state.advance %rl : !cs
      scf.yield %rd1, %rl1 : !cs, !cs
    }
    pipeline.consumer.release %p, %r#1 : !P, !cs
  }
  return
}
