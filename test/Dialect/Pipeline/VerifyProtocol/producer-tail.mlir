// Property 4: a producer role reaches producer.tail before it ends. An error
// where something can still arrive on the CTA after it exits (clusters,
// tcgen05 consumers, TMA stores), a warning where nothing can (one CTA,
// consumers arriving with mbarrier.arrive).
// RUN: pipeline-opt --pipeline-verify-protocol -split-input-file -verify-diagnostics %s

!T = !pipeline.pipeline<tma_async, stages = 4, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 128>, tx_count = 8192, cluster = #pipeline.cluster<1, 2, 1, 1>, multicast = m>
!ps = !pipeline.state<4, producer>
!cs = !pipeline.state<4, consumer>

func.func @loop_without_tail(%n: index, %warp: index, %desc: !llvm.ptr, %buf: !llvm.ptr<3>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %x = arith.constant 0 : i32
  %p = pipeline.create {name = "ab"} : !T
  %is_producer = arith.cmpi eq, %warp, %c0 : index
  // expected-note @+1 {{producer role region}}
  scf.if %is_producer {
    %s0 = pipeline.state.make : !ps
    // expected-error @+1 {{pipeline 'ab': producer role exits without pipeline.producer.tail: consumers in peer CTAs may still arrive on this CTA's barriers (add pipeline.producer.tail with the state the producer ends with, after the loop)}}
    %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
      // expected-note @+1 {{last pipeline.producer.acquire of this role}}
      pipeline.producer.acquire %p, %s : !T, !ps
      pipeline.copy.tma_load %p, %s, %desc[%x] to %buf {bytes = 8192 : i64} : !T, !ps, !llvm.ptr, !llvm.ptr<3>
      %s1 = pipeline.state.advance %s : !ps
      scf.yield %s1 : !ps
    }
  } else {
    %c = pipeline.state.make : !cs
    %cN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %c) -> (!cs) {
      pipeline.consumer.wait %p, %s : !T, !cs
      pipeline.consumer.release %p, %s : !T, !cs
      %s1 = pipeline.state.advance %s : !cs
      scf.yield %s1 : !cs
    }
  }
  return
}

// -----

!S = !pipeline.pipeline<tma_store, stages = 2>
!ps = !pipeline.state<2, producer>

// A TMA-store epilogue must drain its bulk groups before the CTA exits.
func.func @tma_store_without_tail(%n: index, %desc: !llvm.ptr, %src: !llvm.ptr<3>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %x = arith.constant 0 : i32
  %p = pipeline.create {name = "epi"} : !S
  %s0 = pipeline.state.make : !ps
  // expected-error @+1 {{pipeline 'epi': producer role exits without pipeline.producer.tail: TMA stores may still be reading shared memory when the CTA exits}}
  %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
    pipeline.producer.acquire %p, %s : !S, !ps
    pipeline.copy.tma_store %desc[%x, %x] from %src : !llvm.ptr, !llvm.ptr<3>
    // expected-note @+1 {{last pipeline.producer.commit of this role}}
    pipeline.producer.commit %p, %s : !S, !ps
    %s1 = pipeline.state.advance %s : !ps
    scf.yield %s1 : !ps
  }
  return
}

// -----

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>

// Straight-line producer: the finding is on its last acquire. A tail before
// the acquire does not count. One CTA, synchronous consumers: a warning.
func.func @straight_line_without_tail(%warp: index) {
  %c0 = arith.constant 0 : index
  %p = pipeline.create {name = "kv"} : !P
  %is_producer = arith.cmpi eq, %warp, %c0 : index
  // expected-note @+1 {{producer role region}}
  scf.if %is_producer {
    %s0 = pipeline.state.make : !ps
    pipeline.producer.tail %p, %s0 : !P, !ps
    // expected-warning @+2 {{pipeline 'kv': producer role exits without pipeline.producer.tail: not needed here (one CTA, consumers arrive synchronously: nothing can arrive after the CTA exits), but CuTe DSL producers end with producer_tail (add pipeline.producer.tail with the state the producer ends with)}}
    // expected-note @+1 {{last pipeline.producer.acquire of this role}}
    pipeline.producer.acquire %p, %s0 : !P, !ps
    pipeline.producer.commit %p, %s0 : !P, !ps
  } else {
    %c = pipeline.state.make : !cs
    pipeline.consumer.wait %p, %c : !P, !cs
    pipeline.consumer.release %p, %c : !P, !cs
  }
  return
}

// -----

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 32>>
!ps = !pipeline.state<2, producer>

// Correct: the tail may follow the producer's guard or role (every producer
// thread reaches it).
func.func @tail_after_guard(%n: index, %tid: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %p = pipeline.create {name = "kv"} : !P
  %s0 = pipeline.state.make : !ps
  %first = arith.cmpi eq, %tid, %c0 : index
  %sN = scf.if %first -> (!ps) {
    %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
      pipeline.producer.acquire %p, %s : !P, !ps
      pipeline.producer.commit %p, %s : !P, !ps
      %s1 = pipeline.state.advance %s : !ps
      scf.yield %s1 : !ps
    }
    scf.yield %r : !ps
  } else {
    scf.yield %s0 : !ps
  }
  pipeline.producer.tail %p, %sN : !P, !ps
  return
}

// -----

!U = !pipeline.pipeline<tma_umma, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 1>, tx_count = 4096>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>

// One CTA, but the consumer releases with tcgen05.commit, which arrives when
// the MMAs complete: an error.
func.func @tcgen05_consumer_without_tail(%n: index, %warp: index, %desc: !llvm.ptr, %buf: !llvm.ptr<3>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %x = arith.constant 0 : i32
  %p = pipeline.create {name = "ab"} : !U
  %is_producer = arith.cmpi eq, %warp, %c0 : index
  // expected-note @+1 {{producer role region}}
  scf.if %is_producer {
    %s0 = pipeline.state.make : !ps
    // expected-error @+1 {{pipeline 'ab': producer role exits without pipeline.producer.tail: the consumer's tcgen05.commit arrives when its MMAs complete, which may be after the CTA exits (add pipeline.producer.tail with the state the producer ends with, after the loop)}}
    %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
      // expected-note @+1 {{last pipeline.producer.acquire of this role}}
      pipeline.producer.acquire %p, %s : !U, !ps
      pipeline.copy.tma_load %p, %s, %desc[%x] to %buf {bytes = 4096 : i64} : !U, !ps, !llvm.ptr, !llvm.ptr<3>
      %s1 = pipeline.state.advance %s : !ps
      scf.yield %s1 : !ps
    }
  } else {
    %c = pipeline.state.make : !cs
    %cN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %c) -> (!cs) {
      pipeline.consumer.wait %p, %s : !U, !cs
      pipeline.consumer.release %p, %s : !U, !cs
      %s1 = pipeline.state.advance %s : !cs
      scf.yield %s1 : !cs
    }
  }
  return
}
