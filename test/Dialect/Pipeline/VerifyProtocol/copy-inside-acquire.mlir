// Property 12: a stage's copies (copy.tma_load, copy.bulk) run between the
// producer.acquire and the producer.commit of the state they name (a copy
// onto a stage never acquired; an acquire swapped after its copy). Every count adds up in these bugs: the bytes of the
// copies equal tx_count and acquires equal commits; only the order is wrong.
// A chunk without expected-* lines is a correct twin: any diagnostic fails it.
// RUN: pipeline-opt --pipeline-verify-protocol -split-input-file -verify-diagnostics %s

!T = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 128>, tx_count = 8192>
!ps = !pipeline.state<2, producer>

// The bug (class 14): the acquire swapped after its tma_load. The copy may
// overwrite a stage the consumers still read, and its bytes land before
// the full barrier is armed for them.
func.func @acquire_after_copy(%n: index, %desc: !llvm.ptr, %buf: !llvm.ptr<3>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %x = arith.constant 0 : i32
  // expected-note @+1 {{pipeline 'ab' is created here}}
  %p = pipeline.create {name = "ab"} : !T
  %s0 = pipeline.state.make : !ps
  %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
    %e = nvvm.elect.sync -> i1
    scf.if %e {
      // expected-error @+1 {{pipeline 'ab': pipeline.copy.tma_load runs before the producer.acquire of its state (a stage's copies go between producer.acquire and producer.commit of the state they name): the copy may overwrite the buffer while consumers of the previous lap still read it, and its bytes land before producer.acquire arms the full barrier for them (move producer.acquire before the copy)}}
      pipeline.copy.tma_load %p, %s, %desc[%x, %x] to %buf {bytes = 8192 : i64} : !T, !ps, !llvm.ptr, !llvm.ptr<3>
    }
    // expected-note @+1 {{producer.acquire of this state, after the copy}}
    pipeline.producer.acquire %p, %s : !T, !ps
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

// The correct twin: acquire, the elected copy, commit.
func.func @acquire_then_copy(%n: index, %desc: !llvm.ptr, %buf: !llvm.ptr<3>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %x = arith.constant 0 : i32
  %p = pipeline.create {name = "ab"} : !T
  %s0 = pipeline.state.make : !ps
  %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
    pipeline.producer.acquire %p, %s : !T, !ps
    %e = nvvm.elect.sync -> i1
    scf.if %e {
      pipeline.copy.tma_load %p, %s, %desc[%x, %x] to %buf {bytes = 8192 : i64} : !T, !ps, !llvm.ptr, !llvm.ptr<3>
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

// The bug (class 2): a prologue fills the first stage with no acquire at
// all. Every count adds up (one commit per copy, 8192 bytes per stage), but
// the copy may overwrite the buffer while the consumers still read it, and
// its bytes land on a full barrier that nobody armed for them.
func.func @copy_never_acquired(%desc: !llvm.ptr, %src: !llvm.ptr<1>, %buf: !llvm.ptr<3>) {
  %x = arith.constant 0 : i32
  %size = arith.constant 8192 : i32
  // expected-note @+1 {{pipeline 'ab' is created here}}
  %p = pipeline.create {name = "ab"} : !T
  %s0 = pipeline.state.make : !ps
  // expected-error @+1 {{pipeline 'ab': pipeline.copy.bulk fills a stage that no producer.acquire of its state acquired (a stage's copies go between producer.acquire and producer.commit of the state they name): the copy may overwrite the buffer while consumers still read it, and its bytes land on a full barrier that was not armed for them (call producer.acquire with this state before the copy)}}
  pipeline.copy.bulk %p, %s0, %src to %buf, %size : !T, !ps, !llvm.ptr<1>, !llvm.ptr<3>
  pipeline.producer.commit %p, %s0 : !T, !ps
  %s1 = pipeline.state.advance %s0 : !ps
  pipeline.producer.acquire %p, %s1 : !T, !ps
  pipeline.copy.tma_load %p, %s1, %desc[%x, %x] to %buf {bytes = 8192 : i64} : !T, !ps, !llvm.ptr, !llvm.ptr<3>
  pipeline.producer.commit %p, %s1 : !T, !ps
  %s2 = pipeline.state.advance %s1 : !ps
  pipeline.producer.tail %p, %s2 : !T, !ps
  return
}

// -----

!T = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 128>, tx_count = 8192>
!ps = !pipeline.state<2, producer>

// The correct twin: each stage acquired before its copies (the first
// stage's in an inner loop of constant trip count, the second's under an
// elect guard, which picks who runs it, not whether).
func.func @every_copy_acquired(%desc: !llvm.ptr, %src: !llvm.ptr<1>, %buf: !llvm.ptr<3>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %x = arith.constant 0 : i32
  %size = arith.constant 4096 : i32
  %p = pipeline.create {name = "ab"} : !T
  %s0 = pipeline.state.make : !ps
  pipeline.producer.acquire %p, %s0 : !T, !ps
  scf.for %i = %c0 to %c2 step %c1 {
    pipeline.copy.bulk %p, %s0, %src to %buf, %size : !T, !ps, !llvm.ptr<1>, !llvm.ptr<3>
  }
  pipeline.producer.commit %p, %s0 : !T, !ps
  %s1 = pipeline.state.advance %s0 : !ps
  pipeline.producer.acquire %p, %s1 : !T, !ps
  %e = nvvm.elect.sync -> i1
  scf.if %e {
    pipeline.copy.tma_load %p, %s1, %desc[%x, %x] to %buf {bytes = 8192 : i64} : !T, !ps, !llvm.ptr, !llvm.ptr<3>
  }
  pipeline.producer.commit %p, %s1 : !T, !ps
  %s2 = pipeline.state.advance %s1 : !ps
  pipeline.producer.tail %p, %s2 : !T, !ps
  return
}

// -----

!T = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 128>, tx_count = 8192>
!ps = !pipeline.state<2, producer>

// The bug: half of the stage is copied after the commit that handed the
// stage to the consumers.
func.func @copy_after_commit(%n: index, %desc: !llvm.ptr, %buf: !llvm.ptr<3>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %x = arith.constant 0 : i32
  // expected-note @+1 {{pipeline 'ab' is created here}}
  %p = pipeline.create {name = "ab"} : !T
  %s0 = pipeline.state.make : !ps
  %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
    pipeline.producer.acquire %p, %s : !T, !ps
    pipeline.copy.tma_load %p, %s, %desc[%x, %x] to %buf {bytes = 4096 : i64} : !T, !ps, !llvm.ptr, !llvm.ptr<3>
    // expected-note @+1 {{producer.commit of this state, before the copy}}
    pipeline.producer.commit %p, %s : !T, !ps
    // expected-error @+1 {{pipeline 'ab': pipeline.copy.tma_load runs after the producer.commit of its state (a stage's copies go between producer.acquire and producer.commit of the state they name): the commit hands the stage to the consumers, which may read it before this copy lands, and the next producer.acquire may re-arm the stage while the copy is in flight (move the copy before producer.commit)}}
    pipeline.copy.tma_load %p, %s, %desc[%x, %x] to %buf {bytes = 4096 : i64} : !T, !ps, !llvm.ptr, !llvm.ptr<3>
    %s1 = pipeline.state.advance %s : !ps
    scf.yield %s1 : !ps
  }
  pipeline.producer.tail %p, %sN : !T, !ps
  return
}

// -----

!T = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 128>, tx_count = 8192>
!ps = !pipeline.state<2, producer>

// The correct twin: both halves before the commit.
func.func @both_copies_before_commit(%n: index, %desc: !llvm.ptr, %buf: !llvm.ptr<3>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %x = arith.constant 0 : i32
  %p = pipeline.create {name = "ab"} : !T
  %s0 = pipeline.state.make : !ps
  %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
    pipeline.producer.acquire %p, %s : !T, !ps
    pipeline.copy.tma_load %p, %s, %desc[%x, %x] to %buf {bytes = 4096 : i64} : !T, !ps, !llvm.ptr, !llvm.ptr<3>
    pipeline.copy.tma_load %p, %s, %desc[%x, %x] to %buf {bytes = 4096 : i64} : !T, !ps, !llvm.ptr, !llvm.ptr<3>
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

// Not decided (no diagnostic): a state passed in (the caller acquired it),
// and an acquire under a run-time condition of its own before the copy.
func.func @helper_copies(%p: !T, %s: !ps, %desc: !llvm.ptr, %buf: !llvm.ptr<3>) {
  %x = arith.constant 0 : i32
  pipeline.copy.tma_load %p, %s, %desc[%x, %x] to %buf {bytes = 8192 : i64} : !T, !ps, !llvm.ptr, !llvm.ptr<3>
  return
}

func.func @conditional_acquire(%c: i1, %desc: !llvm.ptr, %buf: !llvm.ptr<3>) {
  %x = arith.constant 0 : i32
  %p = pipeline.create {name = "ab"} : !T
  %s0 = pipeline.state.make : !ps
  scf.if %c {
    pipeline.producer.acquire %p, %s0 : !T, !ps
  }
  scf.if %c {
    pipeline.copy.tma_load %p, %s0, %desc[%x, %x] to %buf {bytes = 8192 : i64} : !T, !ps, !llvm.ptr, !llvm.ptr<3>
    pipeline.producer.commit %p, %s0 : !T, !ps
  }
  pipeline.producer.tail %p, %s0 : !T, !ps
  return
}
