// Property 7: a store into a stage after the producer.commit that published
// it, before the next producer.acquire (PipelineAsync-style producers).
// A chunk without expected-* lines is a correct twin: any diagnostic fails it.
// RUN: pipeline-opt --pipeline-verify-protocol -split-input-file -verify-diagnostics %s

!P = !pipeline.pipeline<async, stages = 4, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!ps = !pipeline.state<4, producer>

// The bug: the second word of the stage is stored after the commit; the
// consumer may already be reading the stage.
func.func @store_after_commit(%n: index, %ring: !llvm.ptr<3>, %v: i32) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c128 = arith.constant 128 : i32
  // expected-note @+1 {{pipeline 'ring' is created here}}
  %p = pipeline.create {name = "ring"} : !P
  %s0 = pipeline.state.make : !ps
  %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
    pipeline.producer.acquire %p, %s : !P, !ps
    // expected-note @+1 {{the write's address is computed from this stage index}}
    %idx = pipeline.state.index %s : !ps
    %off = arith.muli %idx, %c128 : i32
    %stage = llvm.getelementptr %ring[%off] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
    llvm.store %v, %stage : i32, !llvm.ptr<3>
    // expected-note @+1 {{the stage is committed here}}
    pipeline.producer.commit %p, %s : !P, !ps
    %word1 = llvm.getelementptr %stage[1] : (!llvm.ptr<3>) -> !llvm.ptr<3>, i32
    // expected-error @+1 {{pipeline 'ring': llvm.store writes the stage that producer.commit already published (its address comes from the committed state's index), before the next producer.acquire: the consumers may read the stage before this write lands (silent corruption); move the write before producer.commit}}
    llvm.store %v, %word1 : i32, !llvm.ptr<3>
    %s1 = pipeline.state.advance %s : !ps
    scf.yield %s1 : !ps
  }
  pipeline.producer.tail %p, %sN : !P, !ps
  return
}

// -----

!P = !pipeline.pipeline<async, stages = 4, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!ps = !pipeline.state<4, producer>

// The correct twin: both stores before the commit.
func.func @store_before_commit(%n: index, %ring: !llvm.ptr<3>, %v: i32) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c128 = arith.constant 128 : i32
  %p = pipeline.create {name = "ring"} : !P
  %s0 = pipeline.state.make : !ps
  %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
    pipeline.producer.acquire %p, %s : !P, !ps
    %idx = pipeline.state.index %s : !ps
    %off = arith.muli %idx, %c128 : i32
    %stage = llvm.getelementptr %ring[%off] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
    llvm.store %v, %stage : i32, !llvm.ptr<3>
    %word1 = llvm.getelementptr %stage[1] : (!llvm.ptr<3>) -> !llvm.ptr<3>, i32
    llvm.store %v, %word1 : i32, !llvm.ptr<3>
    pipeline.producer.commit %p, %s : !P, !ps
    %s1 = pipeline.state.advance %s : !ps
    scf.yield %s1 : !ps
  }
  pipeline.producer.tail %p, %sN : !P, !ps
  return
}

// -----

!P = !pipeline.pipeline<async, stages = 4, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!ps = !pipeline.state<4, producer>

// Also correct: after the commit, the next stage is acquired and written
// (its index comes from the advanced state), and a store under an elect
// guard after that acquire writes the owned stage. A store after the commit
// into memory that no state index addresses is not a stage write.
func.func @next_stage_after_acquire(%ring: !llvm.ptr<3>, %out: !llvm.ptr<3>, %v: i32) {
  %c128 = arith.constant 128 : i32
  %p = pipeline.create {name = "ring"} : !P
  %s0 = pipeline.state.make : !ps
  pipeline.producer.acquire %p, %s0 : !P, !ps
  %i0 = pipeline.state.index %s0 : !ps
  %o0 = arith.muli %i0, %c128 : i32
  %a0 = llvm.getelementptr %ring[%o0] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
  llvm.store %v, %a0 : i32, !llvm.ptr<3>
  pipeline.producer.commit %p, %s0 : !P, !ps
  llvm.store %v, %out : i32, !llvm.ptr<3>
  %s1 = pipeline.state.advance %s0 : !ps
  %i1 = pipeline.state.index %s1 : !ps
  %o1 = arith.muli %i1, %c128 : i32
  %a1 = llvm.getelementptr %ring[%o1] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
  pipeline.producer.acquire %p, %s1 : !P, !ps
  %e = nvvm.elect.sync -> i1
  scf.if %e {
    llvm.store %v, %a1 : i32, !llvm.ptr<3>
  }
  pipeline.producer.commit %p, %s1 : !P, !ps
  pipeline.producer.tail %p, %s1 : !P, !ps
  return
}

// -----

!P = !pipeline.pipeline<async, stages = 4, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!ps = !pipeline.state<4, producer>

// Also correct: one state drives two pipelines in step; the store after
// pipeline 'k's commit fills pipeline 'v''s stage, which commits after it.
func.func @shared_state_other_pipeline(%kring: !llvm.ptr<3>, %vring: !llvm.ptr<3>, %x: i32) {
  %c128 = arith.constant 128 : i32
  %pk = pipeline.create {name = "k"} : !P
  %pv = pipeline.create {name = "v"} : !P
  %s0 = pipeline.state.make : !ps
  %i0 = pipeline.state.index %s0 : !ps
  %o0 = arith.muli %i0, %c128 : i32
  %ka = llvm.getelementptr %kring[%o0] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
  %va = llvm.getelementptr %vring[%o0] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
  pipeline.producer.acquire %pk, %s0 : !P, !ps
  pipeline.producer.acquire %pv, %s0 : !P, !ps
  llvm.store %x, %ka : i32, !llvm.ptr<3>
  pipeline.producer.commit %pk, %s0 : !P, !ps
  llvm.store %x, %va : i32, !llvm.ptr<3>
  pipeline.producer.commit %pv, %s0 : !P, !ps
  pipeline.producer.tail %pk, %s0 : !P, !ps
  pipeline.producer.tail %pv, %s0 : !P, !ps
  return
}

// -----

!P = !pipeline.pipeline<async, stages = 4, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!ps = !pipeline.state<4, producer>

// The bug inside a nested op: the late store sits under an elect guard after
// the commit (memref.store through a memref view counts the same way).
func.func @guarded_store_after_commit(%ring: memref<4x32xi32, 3>, %v: i32) {
  %c0 = arith.constant 0 : index
  // expected-note @+1 {{pipeline 'ring' is created here}}
  %p = pipeline.create {name = "ring"} : !P
  %s0 = pipeline.state.make : !ps
  pipeline.producer.acquire %p, %s0 : !P, !ps
  // expected-note @+1 {{the write's address is computed from this stage index}}
  %idx = pipeline.state.index %s0 : !ps
  %row = arith.index_cast %idx : i32 to index
  // expected-note @+1 {{the stage is committed here}}
  pipeline.producer.commit %p, %s0 : !P, !ps
  %e = nvvm.elect.sync -> i1
  scf.if %e {
    // expected-error @+1 {{pipeline 'ring': memref.store writes the stage that producer.commit already published}}
    memref.store %v, %ring[%row, %c0] : memref<4x32xi32, 3>
  }
  pipeline.producer.tail %p, %s0 : !P, !ps
  return
}
