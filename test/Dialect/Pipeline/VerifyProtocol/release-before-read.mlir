// Property 7, the consumer's side: a load from a stage after the
// consumer.release that handed it back to the producer, before the next
// consumer.wait. A chunk without expected-* lines is a correct twin: any
// diagnostic fails it.
// RUN: pipeline-opt --pipeline-verify-protocol -split-input-file -verify-diagnostics %s

!P = !pipeline.pipeline<async, stages = 4, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!cs = !pipeline.state<4, consumer>

// The bug: the load moved below the release; the producer may be
// refilling the stage under it.
func.func @load_after_release(%n: index, %ring: !llvm.ptr<3>, %out: !llvm.ptr<1>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c128 = arith.constant 128 : i32
  // expected-note @+1 {{pipeline 'ring' is created here}}
  %p = pipeline.create {name = "ring"} : !P
  %s0 = pipeline.state.make : !cs
  %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!cs) {
    pipeline.consumer.wait %p, %s : !P, !cs
    // expected-note @+1 {{the read's address is computed from this stage index}}
    %idx = pipeline.state.index %s : !cs
    %off = arith.muli %idx, %c128 : i32
    %stage = llvm.getelementptr %ring[%off] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
    // expected-note @+1 {{the stage is released here}}
    pipeline.consumer.release %p, %s : !P, !cs
    // expected-error @+1 {{pipeline 'ring': llvm.load reads the stage that consumer.release already handed back to the producer (its address comes from the released state's index), before the next consumer.wait: the producer may be refilling the stage under this read (silent corruption); move the read before consumer.release}}
    %v = llvm.load %stage : !llvm.ptr<3> -> i32
    llvm.store %v, %out : i32, !llvm.ptr<1>
    %s1 = pipeline.state.advance %s : !cs
    scf.yield %s1 : !cs
  }
  return
}

// -----

!P = !pipeline.pipeline<async, stages = 4, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!cs = !pipeline.state<4, consumer>

// The bug, under a guard: the read after the release sits in an scf.if.
func.func @guarded_load_after_release(%n: index, %ring: !llvm.ptr<3>, %out: !llvm.ptr<1>, %c: i1) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c128 = arith.constant 128 : i32
  // expected-note @+1 {{pipeline 'ring' is created here}}
  %p = pipeline.create {name = "ring"} : !P
  %s0 = pipeline.state.make : !cs
  %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!cs) {
    pipeline.consumer.wait %p, %s : !P, !cs
    // expected-note @+1 {{the read's address is computed from this stage index}}
    %idx = pipeline.state.index %s : !cs
    %off = arith.muli %idx, %c128 : i32
    %stage = llvm.getelementptr %ring[%off] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
    %v = llvm.load %stage : !llvm.ptr<3> -> i32
    // expected-note @+1 {{the stage is released here}}
    pipeline.consumer.release %p, %s : !P, !cs
    scf.if %c {
      %w1 = llvm.getelementptr %stage[1] : (!llvm.ptr<3>) -> !llvm.ptr<3>, i32
      // expected-error @+1 {{llvm.load reads the stage that consumer.release already handed back}}
      %w = llvm.load %w1 : !llvm.ptr<3> -> i32
      llvm.store %w, %out : i32, !llvm.ptr<1>
    }
    llvm.store %v, %out : i32, !llvm.ptr<1>
    %s1 = pipeline.state.advance %s : !cs
    scf.yield %s1 : !cs
  }
  return
}

// -----

!P = !pipeline.pipeline<async, stages = 4, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!cs = !pipeline.state<4, consumer>

// The correct twin: every read before the release.
func.func @load_before_release(%n: index, %ring: !llvm.ptr<3>, %out: !llvm.ptr<1>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c128 = arith.constant 128 : i32
  %p = pipeline.create {name = "ring"} : !P
  %s0 = pipeline.state.make : !cs
  %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!cs) {
    pipeline.consumer.wait %p, %s : !P, !cs
    %idx = pipeline.state.index %s : !cs
    %off = arith.muli %idx, %c128 : i32
    %stage = llvm.getelementptr %ring[%off] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
    %v = llvm.load %stage : !llvm.ptr<3> -> i32
    pipeline.consumer.release %p, %s : !P, !cs
    llvm.store %v, %out : i32, !llvm.ptr<1>
    %s1 = pipeline.state.advance %s : !cs
    scf.yield %s1 : !cs
  }
  return
}

// -----

!P = !pipeline.pipeline<async, stages = 4, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!cs = !pipeline.state<4, consumer>

// Also correct: FlashAttention's idiom. Wait on this stage, release the
// previous one, then read this one: the read's stage is not the released
// one (another offset of the state). And after the next wait, a read from
// the advanced state's stage is the held stage's.
func.func @release_previous_then_read(%n: index, %ring: !llvm.ptr<3>, %out: !llvm.ptr<1>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c128 = arith.constant 128 : i32
  %p = pipeline.create {name = "ring"} : !P
  %s0 = pipeline.state.make : !cs
  pipeline.consumer.wait %p, %s0 : !P, !cs
  %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!cs) {
    %s1 = pipeline.state.advance %s : !cs
    pipeline.consumer.wait %p, %s1 : !P, !cs
    pipeline.consumer.release %p, %s : !P, !cs
    %idx = pipeline.state.index %s1 : !cs
    %off = arith.muli %idx, %c128 : i32
    %stage = llvm.getelementptr %ring[%off] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
    %v = llvm.load %stage : !llvm.ptr<3> -> i32
    llvm.store %v, %out : i32, !llvm.ptr<1>
    scf.yield %s1 : !cs
  }
  pipeline.consumer.release %p, %sN : !P, !cs
  return
}

// -----

!P = !pipeline.pipeline<async, stages = 4, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!cs = !pipeline.state<4, consumer>

// Also correct: one state drives two pipelines (K and V rings). K's stage is
// released first; the read after it is V's buffer, whose stage V's
// pipeline releases later in the block.
func.func @shared_state_other_ring(%n: index, %k: !llvm.ptr<3>, %vr: !llvm.ptr<3>, %out: !llvm.ptr<1>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c128 = arith.constant 128 : i32
  %pk = pipeline.create {name = "k"} : !P
  %pv = pipeline.create {name = "v"} : !P
  %s0 = pipeline.state.make : !cs
  %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!cs) {
    pipeline.consumer.wait %pk, %s : !P, !cs
    pipeline.consumer.wait %pv, %s : !P, !cs
    %idx = pipeline.state.index %s : !cs
    %off = arith.muli %idx, %c128 : i32
    %kst = llvm.getelementptr %k[%off] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
    %a = llvm.load %kst : !llvm.ptr<3> -> i32
    pipeline.consumer.release %pk, %s : !P, !cs
    %vst = llvm.getelementptr %vr[%off] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
    %b = llvm.load %vst : !llvm.ptr<3> -> i32
    pipeline.consumer.release %pv, %s : !P, !cs
    %c = arith.addi %a, %b : i32
    llvm.store %c, %out : i32, !llvm.ptr<1>
    %s1 = pipeline.state.advance %s : !cs
    scf.yield %s1 : !cs
  }
  return
}

// -----

!P = !pipeline.pipeline<async, stages = 4, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 1>>
!cs = !pipeline.state<4, consumer>

// The bug, with the release under a lane guard (tile-ai/tilelang#2410):
// lane 0 hands the slot back, then every lane reads it after the guard.
func.func @load_after_guarded_release(%n: index, %ring: !llvm.ptr<3>, %out: !llvm.ptr<1>, %lane0: i1) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : i32
  // expected-note @+1 {{pipeline 'slots' is created here}}
  %p = pipeline.create {name = "slots"} : !P
  %s0 = pipeline.state.make : !cs
  %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!cs) {
    pipeline.consumer.wait %p, %s : !P, !cs
    // expected-note @+1 {{the read's address is computed from this stage index}}
    %idx = pipeline.state.index %s : !cs
    %off = arith.muli %idx, %c4 : i32
    %slot = llvm.getelementptr %ring[%off] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
    scf.if %lane0 {
      // expected-note @+1 {{the stage is released here}}
      pipeline.consumer.release %p, %s : !P, !cs
    }
    // expected-error @+1 {{pipeline 'slots': llvm.load reads the stage that consumer.release already handed back to the producer}}
    %v = llvm.load %slot : !llvm.ptr<3> -> i32
    llvm.store %v, %out : i32, !llvm.ptr<1>
    %s1 = pipeline.state.advance %s : !cs
    scf.yield %s1 : !cs
  }
  return
}

// -----

!P = !pipeline.pipeline<async, stages = 4, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 1>>
!cs = !pipeline.state<4, consumer>

// The twin: every lane reads the slot, then lane 0 releases it.
func.func @load_before_guarded_release(%n: index, %ring: !llvm.ptr<3>, %out: !llvm.ptr<1>, %lane0: i1) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : i32
  %p = pipeline.create {name = "slots"} : !P
  %s0 = pipeline.state.make : !cs
  %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!cs) {
    pipeline.consumer.wait %p, %s : !P, !cs
    %idx = pipeline.state.index %s : !cs
    %off = arith.muli %idx, %c4 : i32
    %slot = llvm.getelementptr %ring[%off] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
    %v = llvm.load %slot : !llvm.ptr<3> -> i32
    scf.if %lane0 {
      pipeline.consumer.release %p, %s : !P, !cs
    }
    llvm.store %v, %out : i32, !llvm.ptr<1>
    %s1 = pipeline.state.advance %s : !cs
    scf.yield %s1 : !cs
  }
  return
}

// -----

!P = !pipeline.pipeline<async, stages = 4, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 1>>
!cs = !pipeline.state<4, consumer>

// Just on the other side: unrolled by two, the read after the guard is
// the next stage's (its address comes from the advanced state), not the
// stage lane 0 released.
func.func @next_stage_after_guarded_release(%n: index, %ring: !llvm.ptr<3>, %out: !llvm.ptr<1>, %lane0: i1) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : i32
  %p = pipeline.create {name = "slots"} : !P
  %s0 = pipeline.state.make : !cs
  %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!cs) {
    pipeline.consumer.wait %p, %s : !P, !cs
    %idx = pipeline.state.index %s : !cs
    %off = arith.muli %idx, %c4 : i32
    %slot = llvm.getelementptr %ring[%off] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
    %v = llvm.load %slot : !llvm.ptr<3> -> i32
    scf.if %lane0 {
      pipeline.consumer.release %p, %s : !P, !cs
    }
    %t = pipeline.state.advance %s : !cs
    %idx2 = pipeline.state.index %t : !cs
    %off2 = arith.muli %idx2, %c4 : i32
    %slot2 = llvm.getelementptr %ring[%off2] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
    pipeline.consumer.wait %p, %t : !P, !cs
    %w = llvm.load %slot2 : !llvm.ptr<3> -> i32
    scf.if %lane0 {
      pipeline.consumer.release %p, %t : !P, !cs
    }
    %sum = arith.addi %v, %w : i32
    llvm.store %sum, %out : i32, !llvm.ptr<1>
    %s1 = pipeline.state.advance %t : !cs
    scf.yield %s1 : !cs
  }
  return
}
