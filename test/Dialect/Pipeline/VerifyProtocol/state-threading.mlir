// Property 2: a state carried by a loop advances once per stage used, and
// the second verb of a pair (and a stage's copies) use the first verb's state.
// RUN: pipeline-opt --pipeline-verify-protocol -split-input-file -verify-diagnostics %s

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 128>>
!cs = !pipeline.state<2, consumer>

func.func @never_advances(%n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %p = pipeline.create {name = "ab"} : !P
  %c = pipeline.state.make : !cs
  // expected-note @+1 {{state carried by this loop}}
  %cN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %c) -> (!cs) {
    // expected-error @+1 {{pipeline 'ab': the state carried by this loop never advances: the loop waits on the same stage forever (yield `pipeline.state.advance` of the state once per stage used)}}
    pipeline.consumer.wait %p, %s : !P, !cs
    pipeline.consumer.release %p, %s : !P, !cs
    // expected-note @+1 {{the loop yields the state unchanged}}
    scf.yield %s : !cs
  }
  return
}

// -----

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 128>>
!ps = !pipeline.state<2, producer>

func.func @advanced_twice(%n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %p = pipeline.create {name = "ab"} : !P
  %s0 = pipeline.state.make : !ps
  %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
    // expected-note @+1 {{the stage is used here}}
    pipeline.producer.acquire %p, %s : !P, !ps
    pipeline.producer.commit %p, %s : !P, !ps
    // expected-note @+1 {{the state also advances here}}
    %s1 = pipeline.state.advance %s : !ps
    // expected-error @+1 {{pipeline 'ab': state advanced twice per iteration but the loop body acquires 1 stage: the skipped stages are never filled or released and the pipeline deadlocks (advance once per stage used)}}
    %s2 = pipeline.state.advance %s1 : !ps
    scf.yield %s2 : !ps
  }
  pipeline.producer.tail %p, %sN : !P, !ps
  return
}

// -----

!P = !pipeline.pipeline<async, stages = 4, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 128>>
!cs = !pipeline.state<4, consumer>

// Two stages per iteration on the same state: the second pair reuses the
// first pair's stage.
func.func @advanced_too_little(%n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %p = pipeline.create {name = "kv"} : !P
  %c = pipeline.state.make : !cs
  %cN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %c) -> (!cs) {
    pipeline.consumer.wait %p, %s : !P, !cs
    pipeline.consumer.release %p, %s : !P, !cs
    // expected-error @+1 {{pipeline 'kv': state advanced 1 stage per iteration but the loop body waits on 2 stages: the next iteration reuses a stage that is still in flight}}
    pipeline.consumer.wait %p, %s : !P, !cs
    pipeline.consumer.release %p, %s : !P, !cs
    // expected-note @+1 {{the state advances here}}
    %s1 = pipeline.state.advance %s : !cs
    scf.yield %s1 : !cs
  }
  return
}

// -----

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 128>>
!ps = !pipeline.state<2, producer>

// Advancing before the commit signals the next stage's full barrier.
func.func @commit_after_advance(%n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %p = pipeline.create {name = "ab"} : !P
  %s0 = pipeline.state.make : !ps
  %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
    // expected-note @+1 {{pipeline.producer.acquire here}}
    pipeline.producer.acquire %p, %s : !P, !ps
    // expected-note @+1 {{state advanced here}}
    %s1 = pipeline.state.advance %s : !ps
    // expected-error @+1 {{pipeline 'ab': pipeline.producer.commit uses a state advanced 1 stage past its pipeline.producer.acquire: it signals a stage that was not acquired; pass the state given to pipeline.producer.acquire and advance after the pair}}
    pipeline.producer.commit %p, %s1 : !P, !ps
    scf.yield %s1 : !ps
  }
  pipeline.producer.tail %p, %sN : !P, !ps
  return
}

// -----

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 128>>
!cs = !pipeline.state<2, consumer>

func.func @release_after_advance(%n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %p = pipeline.create {name = "ab"} : !P
  %c = pipeline.state.make : !cs
  %cN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %c) -> (!cs) {
    // expected-note @+1 {{pipeline.consumer.wait here}}
    pipeline.consumer.wait %p, %s : !P, !cs
    // expected-note @+1 {{state advanced here}}
    %s1 = pipeline.state.advance %s : !cs
    // expected-error @+1 {{pipeline.consumer.release uses a state advanced 1 stage past its pipeline.consumer.wait: it signals a stage that was not waited on}}
    pipeline.consumer.release %p, %s1 : !P, !cs
    scf.yield %s1 : !cs
  }
  return
}

// -----

!T = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 128>, tx_count = 4096>
!ps = !pipeline.state<2, producer>

// The copy completes the next stage's barrier; the acquired stage gets no
// bytes.
func.func @copy_after_advance(%n: index, %desc: !llvm.ptr, %buf: !llvm.ptr<3>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %x = arith.constant 0 : i32
  // expected-note @+1 {{pipeline 'ab' is created here}}
  %p = pipeline.create {name = "ab"} : !T
  %s0 = pipeline.state.make : !ps
  %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
    // expected-error @+2 {{pipeline 'ab': producer.acquire arms the full barrier for 4096 bytes but no pipeline.copy.tma_load or pipeline.copy.bulk is bound to this state}}
    // expected-note @+1 {{pipeline.producer.acquire here}}
    pipeline.producer.acquire %p, %s : !T, !ps
    // expected-note @+1 {{state advanced here}}
    %s1 = pipeline.state.advance %s : !ps
    // expected-error @+1 {{pipeline.copy.tma_load uses a state advanced 1 stage past its pipeline.producer.acquire: it completes the barrier of a stage that was not acquired}}
    pipeline.copy.tma_load %p, %s1, %desc[%x] to %buf {bytes = 4096 : i64} : !T, !ps, !llvm.ptr, !llvm.ptr<3>
    scf.yield %s1 : !ps
  }
  pipeline.producer.tail %p, %sN : !T, !ps
  return
}

// -----

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 128>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>

// Correct: advance in both branches of an scf.if, advance by a constant 2
// for two stages, and a state only passed through a loop that does not use
// it.
func.func @threading_ok(%n: index, %cond: i1) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %two = arith.constant 2 : i32
  %p = pipeline.create {name = "ab"} : !P
  %s0 = pipeline.state.make : !ps
  %c = pipeline.state.make : !cs
  %r:2 = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0, %keep = %c) -> (!ps, !cs) {
    pipeline.producer.acquire %p, %s : !P, !ps
    pipeline.producer.commit %p, %s : !P, !ps
    %s1 = scf.if %cond -> (!ps) {
      %a = pipeline.state.advance %s : !ps
      scf.yield %a : !ps
    } else {
      %b = pipeline.state.advance %s by %two : !ps
      %b1 = pipeline.state.advance %b by %two : !ps
      %one = arith.constant -3 : i32
      %b2 = pipeline.state.advance %b1 by %one : !ps
      scf.yield %b2 : !ps
    }
    scf.yield %s1, %keep : !ps, !cs
  }
  %cN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %r#1) -> (!cs) {
    pipeline.consumer.wait %p, %s : !P, !cs
    %t = pipeline.state.advance %s : !cs
    pipeline.consumer.wait %p, %t : !P, !cs
    pipeline.consumer.release %p, %s : !P, !cs
    pipeline.consumer.release %p, %t : !P, !cs
    %u = pipeline.state.advance %s by %two : !cs
    scf.yield %u : !cs
  }
  // The same stage reached by two different advance ops is the same stage.
  %w0 = pipeline.state.make : !cs
  %w1 = pipeline.state.advance %w0 : !cs
  pipeline.consumer.wait %p, %w0 : !P, !cs
  pipeline.consumer.wait %p, %w1 : !P, !cs
  pipeline.consumer.release %p, %w0 : !P, !cs
  %w1_again = pipeline.state.advance %w0 : !cs
  pipeline.consumer.release %p, %w1_again : !P, !cs
  pipeline.producer.tail %p, %r#0 : !P, !ps
  return
}

// -----

!P = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 4>, tx_count = 8192>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>

// Correct: one state drives two pipelines in step (flash-attention's K and V
// pipelines advance together): each pipeline uses the state once per
// advance.
func.func @one_state_two_pipelines(%n: index, %warp: index, %desc: !llvm.ptr, %buf: !llvm.ptr<3>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %x = arith.constant 0 : i32
  %k = pipeline.create {name = "k"} : !P
  %v = pipeline.create {name = "v"} : !P
  %is_producer = arith.cmpi eq, %warp, %c0 : index
  scf.if %is_producer {
    %s0 = pipeline.state.make : !ps
    %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
      pipeline.producer.acquire %k, %s : !P, !ps
      pipeline.copy.tma_load %k, %s, %desc[%x] to %buf {bytes = 8192 : i64} : !P, !ps, !llvm.ptr, !llvm.ptr<3>
      pipeline.producer.acquire %v, %s : !P, !ps
      pipeline.copy.tma_load %v, %s, %desc[%x] to %buf {bytes = 8192 : i64} : !P, !ps, !llvm.ptr, !llvm.ptr<3>
      %s1 = pipeline.state.advance %s : !ps
      scf.yield %s1 : !ps
    }
    pipeline.producer.tail %k, %sN : !P, !ps
    pipeline.producer.tail %v, %sN : !P, !ps
  } else {
    %c = pipeline.state.make : !cs
    %cN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %c) -> (!cs) {
      pipeline.consumer.wait %k, %s : !P, !cs
      pipeline.consumer.wait %v, %s : !P, !cs
      pipeline.consumer.release %k, %s : !P, !cs
      pipeline.consumer.release %v, %s : !P, !cs
      %s1 = pipeline.state.advance %s : !cs
      scf.yield %s1 : !cs
    }
  }
  return
}

// -----

!P = !pipeline.pipeline<async, stages = 4, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!cs = !pipeline.state<4, consumer>

// The bug twin: one state, two pipelines, but pipeline 'v' uses two stages
// per iteration while the state advances once: the second wait on 'v' reuses
// the first one's stage.
func.func @one_state_two_pipelines_one_reused(%n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %k = pipeline.create {name = "k"} : !P
  %v = pipeline.create {name = "v"} : !P
  %c = pipeline.state.make : !cs
  %cN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %c) -> (!cs) {
    pipeline.consumer.wait %k, %s : !P, !cs
    pipeline.consumer.release %k, %s : !P, !cs
    pipeline.consumer.wait %v, %s : !P, !cs
    pipeline.consumer.release %v, %s : !P, !cs
    // expected-error @+1 {{pipeline 'v': state advanced 1 stage per iteration but the loop body waits on 2 stages: the next iteration reuses a stage that is still in flight (advance the state after each stage)}}
    pipeline.consumer.wait %v, %s : !P, !cs
    pipeline.consumer.release %v, %s : !P, !cs
    // expected-note @+1 {{the state advances here}}
    %s1 = pipeline.state.advance %s : !cs
    scf.yield %s1 : !cs
  }
  return
}
