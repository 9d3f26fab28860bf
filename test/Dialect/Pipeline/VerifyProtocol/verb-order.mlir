// Property 15: in straight-line code one stage's verbs come in their
// protocol's order: producer.commit after the producer.acquire of its
// state, consumer.release after the consumer.wait of its state, each once;
// one producer.tail; a PipelineTmaStore's copy.tma_store between its acquire
// and commit. Every count of these bugs adds up (a swap keeps the verbs, a
// doubled verb next to its original keeps the loop balanced for TMA
// commits, which emit nothing). A chunk without expected-* lines is a
// correct twin: any diagnostic fails it.
// RUN: pipeline-opt --pipeline-verify-protocol -split-input-file -verify-diagnostics %s

!A = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!ps = !pipeline.state<2, producer>

// The bug: the acquire moved below the commit. The commit hands the stage
// to the consumers before the producer owns it.
func.func @commit_before_acquire(%n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  // expected-note @+1 {{pipeline 'ab' is created here}}
  %p = pipeline.create {name = "ab"} : !A
  %s0 = pipeline.state.make : !ps
  %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
    // expected-error @+1 {{pipeline 'ab': producer.commit runs before the producer.acquire of its state (rule: a stage's producer.commit follows its producer.acquire): the commit hands a stage the producer does not own yet to the consumers, which read a buffer that is still being filled (move producer.commit after producer.acquire)}}
    pipeline.producer.commit %p, %s : !A, !ps
    // expected-note @+1 {{producer.acquire of this state, after the producer.commit}}
    pipeline.producer.acquire %p, %s : !A, !ps
    %s1 = pipeline.state.advance %s : !ps
    scf.yield %s1 : !ps
  }
  pipeline.producer.tail %p, %sN : !A, !ps
  return
}

// -----

!A = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!ps = !pipeline.state<2, producer>

// The correct twin: acquire, then commit (the acquire under an elect guard
// is in the same straight line).
func.func @acquire_then_commit(%n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %p = pipeline.create {name = "ab"} : !A
  %s0 = pipeline.state.make : !ps
  %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
    pipeline.producer.acquire %p, %s : !A, !ps
    pipeline.producer.commit %p, %s : !A, !ps
    %s1 = pipeline.state.advance %s : !ps
    scf.yield %s1 : !ps
  }
  pipeline.producer.tail %p, %sN : !A, !ps
  return
}

// -----

!T = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 128>, tx_count = 8192>
!ps = !pipeline.state<2, producer>

// The bug: a TMA producer's commit doubled. It emits nothing today, but
// the second commit of one acquire is a second arrival for any producer
// that signals with it.
func.func @commit_twice(%n: index, %desc: !llvm.ptr, %buf: !llvm.ptr<3>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %x = arith.constant 0 : i32
  // expected-note @+1 {{pipeline 'ab' is created here}}
  %p = pipeline.create {name = "ab"} : !T
  %s0 = pipeline.state.make : !ps
  %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
    pipeline.producer.acquire %p, %s : !T, !ps
    pipeline.copy.tma_load %p, %s, %desc[%x, %x] to %buf {bytes = 8192 : i64} : !T, !ps, !llvm.ptr, !llvm.ptr<3>
    // expected-note @+1 {{the first producer.commit of this state}}
    pipeline.producer.commit %p, %s : !T, !ps
    // expected-error @+1 {{pipeline 'ab': producer.commit a second time for one producer.acquire of its state (rule: each producer.acquire of a stage is followed by exactly one producer.commit)}}
    pipeline.producer.commit %p, %s : !T, !ps
    %s1 = pipeline.state.advance %s : !ps
    scf.yield %s1 : !ps
  }
  pipeline.producer.tail %p, %sN : !T, !ps
  return
}

// -----

!A = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!cs = !pipeline.state<2, consumer>

// The bug: the release moved above the wait. The producer may refill the
// stage the consumer is about to read.
func.func @release_before_wait(%n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  // expected-note @+1 {{pipeline 'ab' is created here}}
  %p = pipeline.create {name = "ab"} : !A
  %s0 = pipeline.state.make : !cs
  %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!cs) {
    // expected-error @+1 {{pipeline 'ab': consumer.release runs before the consumer.wait of its state (rule: a stage's consumer.release follows its consumer.wait)}}
    pipeline.consumer.release %p, %s : !A, !cs
    // expected-note @+1 {{consumer.wait of this state, after the consumer.release}}
    pipeline.consumer.wait %p, %s : !A, !cs
    %s1 = pipeline.state.advance %s : !cs
    scf.yield %s1 : !cs
  }
  return
}

// -----

!A = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!cs = !pipeline.state<2, consumer>

// The correct twin: wait, then release (one elected lane releasing is in
// the same straight line as the wait).
func.func @wait_then_release(%n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %p = pipeline.create {name = "ab"} : !A
  %s0 = pipeline.state.make : !cs
  %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!cs) {
    pipeline.consumer.wait %p, %s : !A, !cs
    %e = nvvm.elect.sync -> i1
    scf.if %e {
      pipeline.consumer.release %p, %s : !A, !cs
    }
    %s1 = pipeline.state.advance %s : !cs
    scf.yield %s1 : !cs
  }
  return
}

// -----

!A = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!ps = !pipeline.state<2, producer>

// The bug: producer.tail doubled. The first already waited for every stage
// in flight; the second waits for releases nobody will make.
func.func @tail_twice(%n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  // expected-note @+1 {{pipeline 'ab' is created here}}
  %p = pipeline.create {name = "ab"} : !A
  %s0 = pipeline.state.make : !ps
  %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
    pipeline.producer.acquire %p, %s : !A, !ps
    pipeline.producer.commit %p, %s : !A, !ps
    %s1 = pipeline.state.advance %s : !ps
    scf.yield %s1 : !ps
  }
  // expected-note @+1 {{the first producer.tail}}
  pipeline.producer.tail %p, %sN : !A, !ps
  // expected-error @+1 {{pipeline 'ab': producer.tail a second time (rule: a producer role ends with one producer.tail per pipeline)}}
  pipeline.producer.tail %p, %sN : !A, !ps
  return
}

// -----

!S = !pipeline.pipeline<tma_store, stages = 2>
!ps = !pipeline.state<2, producer>

// The correct twin of a doubled tail: a PipelineTmaStore's tail waits for
// the bulk groups and may repeat.
func.func @tma_store_tail_twice(%n: index, %desc: !llvm.ptr, %buf: !llvm.ptr<3>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %x = arith.constant 0 : i32
  %p = pipeline.create {name = "c"} : !S
  %s = pipeline.state.make : !ps
  scf.for %i = %c0 to %n step %c1 {
    pipeline.producer.acquire %p, %s : !S, !ps
    pipeline.copy.tma_store %desc[%x, %x] from %buf : !llvm.ptr, !llvm.ptr<3>
    pipeline.producer.commit %p, %s : !S, !ps
  }
  pipeline.producer.tail %p, %s : !S, !ps
  pipeline.producer.tail %p, %s : !S, !ps
  return
}

// -----

!S = !pipeline.pipeline<tma_store, stages = 2>
!ps = !pipeline.state<2, producer>

// The bug: the store moved below the commit that was to close its group.
// The next acquire does not wait for it; the buffer is rewritten under it.
func.func @tma_store_after_commit(%n: index, %desc: !llvm.ptr, %buf: !llvm.ptr<3>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %x = arith.constant 0 : i32
  // expected-note @+1 {{pipeline 'c' is created here}}
  %p = pipeline.create {name = "c"} : !S
  %s = pipeline.state.make : !ps
  %e = nvvm.elect.sync -> i1
  scf.for %i = %c0 to %n step %c1 {
    pipeline.producer.acquire %p, %s : !S, !ps
    scf.if %e {
      // expected-note @+1 {{producer.commit of the stage, before the store}}
      pipeline.producer.commit %p, %s : !S, !ps
      // expected-error @+1 {{pipeline 'c': copy.tma_store runs after the producer.commit that closes its stage (rule: a PipelineTmaStore stage's copy.tma_store goes between producer.acquire and producer.commit)}}
      pipeline.copy.tma_store %desc[%x, %x] from %buf : !llvm.ptr, !llvm.ptr<3>
    }
  }
  pipeline.producer.tail %p, %s : !S, !ps
  return
}

// -----

!S = !pipeline.pipeline<tma_store, stages = 2>
!ps = !pipeline.state<2, producer>

// The bug: the store dropped. The commit closes an empty group and the
// tile is never written out.
func.func @tma_store_missing(%n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  // expected-note @+1 {{pipeline 'c' is created here}}
  %p = pipeline.create {name = "c"} : !S
  %s = pipeline.state.make : !ps
  scf.for %i = %c0 to %n step %c1 {
    // expected-note @+1 {{producer.acquire of this state}}
    pipeline.producer.acquire %p, %s : !S, !ps
    // expected-error @+1 {{pipeline 'c': producer.commit closes a bulk group with no copy.tma_store since the producer.acquire of its state}}
    pipeline.producer.commit %p, %s : !S, !ps
  }
  pipeline.producer.tail %p, %s : !S, !ps
  return
}

// -----

!S = !pipeline.pipeline<tma_store, stages = 2>
!ps = !pipeline.state<2, producer>

// The correct twin: the stage's tile leaves by a TMA reduce-add (an fp32
// accumulator summed across CTAs, as attention's backward adds dQ), which
// joins the bulk group the commit closes like a copy.tma_store.
func.func @tma_reduce_add_counts_as_a_store(%n: index, %desc: !llvm.ptr, %buf: !llvm.ptr<3>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %x = arith.constant 0 : i32
  %p = pipeline.create {name = "c"} : !S
  %s = pipeline.state.make : !ps
  scf.for %i = %c0 to %n step %c1 {
    pipeline.producer.acquire %p, %s : !S, !ps
    nvvm.cp.async.bulk.tensor.reduce %desc, %buf, box[%x, %x] {redKind = #nvvm.tma_redux_kind<add>} : !llvm.ptr, <3>
    pipeline.producer.commit %p, %s : !S, !ps
  }
  pipeline.producer.tail %p, %s : !S, !ps
  return
}

// -----

!S = !pipeline.pipeline<tma_store, stages = 2>
!ps = !pipeline.state<2, producer>

// The correct twin: the store under a data-dependent condition of its own
// between acquire and commit still counts.
func.func @tma_store_conditional(%n: index, %desc: !llvm.ptr, %buf: !llvm.ptr<3>, %c: i1) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %x = arith.constant 0 : i32
  %p = pipeline.create {name = "c"} : !S
  %s = pipeline.state.make : !ps
  scf.for %i = %c0 to %n step %c1 {
    pipeline.producer.acquire %p, %s : !S, !ps
    scf.if %c {
      pipeline.copy.tma_store %desc[%x, %x] from %buf : !llvm.ptr, !llvm.ptr<3>
    } else {
      pipeline.copy.tma_store %desc[%x, %x] from %buf : !llvm.ptr, !llvm.ptr<3>
    }
    pipeline.producer.commit %p, %s : !S, !ps
  }
  pipeline.producer.tail %p, %s : !S, !ps
  return
}
