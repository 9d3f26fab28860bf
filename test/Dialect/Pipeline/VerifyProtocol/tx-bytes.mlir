// Property 5: the copies bound to a TMA stage deliver tx_count (+ extra_tx).
// RUN: pipeline-opt --pipeline-verify-protocol -split-input-file -verify-diagnostics %s

!T = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 128>, tx_count = 16384>
!ps = !pipeline.state<2, producer>

// B's copy is missing: the full barrier waits for 8192 bytes that never come.
func.func @too_few_bytes(%n: index, %desc: !llvm.ptr, %buf: !llvm.ptr<3>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %x = arith.constant 0 : i32
  // expected-note @+1 {{pipeline 'ab' is created here}}
  %p = pipeline.create {name = "ab"} : !T
  %s0 = pipeline.state.make : !ps
  %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
    // expected-error @+1 {{pipeline 'ab': producer.acquire expects 16384 bytes (tx_count 16384) but the 1 copy bound to this stage deliver 8192: the full barrier never completes and consumers wait forever (make tx_count the bytes of one stage's copies)}}
    pipeline.producer.acquire %p, %s : !T, !ps
    %e = nvvm.elect.sync -> i1
    scf.if %e {
      // expected-note @+1 {{copy of 8192 bytes}}
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

// Too many bytes (a loop of copies and a bulk copy), and extra_tx.
func.func @too_many_bytes(%desc: !llvm.ptr, %src: !llvm.ptr<1>, %buf: !llvm.ptr<3>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %x = arith.constant 0 : i32
  %size = arith.constant 1024 : i32
  %extra = arith.constant 512 : i32
  // expected-note @+1 {{pipeline 'ab' is created here}}
  %p = pipeline.create {name = "ab"} : !T
  %s0 = pipeline.state.make : !ps
  // expected-error @+1 {{pipeline 'ab': producer.acquire expects 8704 bytes (tx_count 8192 + extra_tx 512) but the 2 copies bound to this stage deliver 9216: the phase completes before every byte landed and consumers read a partly filled stage}}
  pipeline.producer.acquire %p, %s0 extra_tx %extra : !T, !ps
  scf.for %i = %c0 to %c2 step %c1 {
    // expected-note @+1 {{copy of 4096 bytes x 2 iterations}}
    pipeline.copy.tma_load %p, %s0, %desc[%x, %x] to %buf {bytes = 4096 : i64} : !T, !ps, !llvm.ptr, !llvm.ptr<3>
  }
  // expected-note @+1 {{copy of 1024 bytes}}
  pipeline.copy.bulk %p, %s0, %src to %buf, %size : !T, !ps, !llvm.ptr<1>, !llvm.ptr<3>
  pipeline.producer.tail %p, %s0 : !T, !ps
  return
}

// -----

!M = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 128>, tx_count = 16384, cluster = #pipeline.cluster<1, 2, 1, 1>, multicast = m>
!ps = !pipeline.state<2, producer>

// A multicast copy lands in every CTA of its mask. The mask names only this
// CTA, so the peer never sends its half of A.
func.func @multicast_mask_too_small(%desc: !llvm.ptr, %buf: !llvm.ptr<3>) {
  %x = arith.constant 0 : i32
  %self = arith.constant 1 : i16
  // expected-note @+1 {{pipeline 'mc' is created here}}
  %p = pipeline.create {name = "mc"} : !M
  %s0 = pipeline.state.make : !ps
  // expected-error @+1 {{pipeline 'mc': producer.acquire expects 16384 bytes (tx_count 16384) but the 2 copies bound to this stage deliver 12288}}
  pipeline.producer.acquire %p, %s0 : !M, !ps
  // expected-note @+1 {{copy of 4096 bytes}}
  pipeline.copy.tma_load %p, %s0, %desc[%x, %x] to %buf multicast %self {bytes = 4096 : i64} : !M, !ps, !llvm.ptr, !llvm.ptr<3>
  // expected-note @+1 {{copy of 8192 bytes}}
  pipeline.copy.tma_load %p, %s0, %desc[%x, %x] to %buf {bytes = 8192 : i64} : !M, !ps, !llvm.ptr, !llvm.ptr<3>
  pipeline.producer.tail %p, %s0 : !M, !ps
  return
}

// -----

!T = !pipeline.pipeline<tma_umma, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 1>, tx_count = 4096>
!ps = !pipeline.state<2, producer>

func.func @no_copy(%n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  // expected-note @+1 {{pipeline 'ab' is created here}}
  %p = pipeline.create {name = "ab"} : !T
  %s0 = pipeline.state.make : !ps
  %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
    // expected-error @+1 {{pipeline 'ab': producer.acquire arms the full barrier for 4096 bytes but no pipeline.copy.tma_load or pipeline.copy.bulk is bound to this state: the stage never completes and consumers wait forever (issue the stage's copies with the state given to producer.acquire)}}
    pipeline.producer.acquire %p, %s : !T, !ps
    %s1 = pipeline.state.advance %s : !ps
    scf.yield %s1 : !ps
  }
  pipeline.producer.tail %p, %sN : !T, !ps
  return
}

// -----

!T = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 128>, tx_count = 16384>
!ps = !pipeline.state<2, producer>

// Correct or undecidable: copies issued through producer.barrier by other
// ops, a dynamic bulk size, and copies in if/else
// branches of the same size.
func.func @tx_unchecked_or_ok(%desc: !llvm.ptr, %src: !llvm.ptr<1>, %buf: !llvm.ptr<3>,
                              %dyn: i32, %mask: i16, %cond: i1) {
  %x = arith.constant 0 : i32
  %p = pipeline.create {name = "ab"} : !T
  %s0 = pipeline.state.make : !ps
  pipeline.producer.acquire %p, %s0 : !T, !ps
  %bar = pipeline.producer.barrier %p, %s0 : !T, !ps
  %s1 = pipeline.state.advance %s0 : !ps
  pipeline.producer.acquire %p, %s1 : !T, !ps
  pipeline.copy.bulk %p, %s1, %src to %buf, %dyn : !T, !ps, !llvm.ptr<1>, !llvm.ptr<3>
  %s2 = pipeline.state.advance %s1 : !ps
  pipeline.producer.acquire %p, %s2 : !T, !ps
  pipeline.copy.tma_load %p, %s2, %desc[%x, %x] to %buf {bytes = 16384 : i64} : !T, !ps, !llvm.ptr, !llvm.ptr<3>
  %s3 = pipeline.state.advance %s2 : !ps
  scf.if %cond {
    pipeline.producer.acquire %p, %s3 : !T, !ps
    pipeline.copy.tma_load %p, %s3, %desc[%x, %x] to %buf {bytes = 16384 : i64} : !T, !ps, !llvm.ptr, !llvm.ptr<3>
  } else {
    pipeline.producer.acquire %p, %s3 : !T, !ps
    pipeline.copy.tma_load %p, %s3, %desc[%x] to %buf {bytes = 8192 : i64} : !T, !ps, !llvm.ptr, !llvm.ptr<3>
    pipeline.copy.tma_load %p, %s3, %desc[%x] to %buf {bytes = 8192 : i64} : !T, !ps, !llvm.ptr, !llvm.ptr<3>
  }
  %s4 = pipeline.state.advance %s3 : !ps
  pipeline.producer.tail %p, %s4 : !T, !ps
  return
}

// -----

!T = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 128>, tx_count = 8192>
!ps = !pipeline.state<2, producer>

// A copy skipped under a run-time condition while acquire armed its bytes on
// every path (CUTLASS issues #2641, #1748): a warning, since the condition
// may always hold. Its twin: the acquire is under the same condition.
func.func @copy_under_runtime_condition(%n: i32, %k: i32, %desc: !llvm.ptr, %buf: !llvm.ptr<3>) {
  %x = arith.constant 0 : i32
  %p = pipeline.create {name = "ab"} : !T
  %s0 = pipeline.state.make : !ps
  // expected-note @+1 {{producer.acquire that arms the stage's bytes}}
  pipeline.producer.acquire %p, %s0 : !T, !ps
  %in = arith.cmpi slt, %k, %n : i32
  // expected-note @+1 {{condition that may skip the copy}}
  scf.if %in {
    // expected-warning @+1 {{pipeline 'ab': this copy runs only when a run-time condition holds, but producer.acquire arms the full barrier for its bytes on every path: when the condition is false the stage never completes and consumers wait forever}}
    pipeline.copy.tma_load %p, %s0, %desc[%x, %k] to %buf {bytes = 8192 : i64} : !T, !ps, !llvm.ptr, !llvm.ptr<3>
  }
  %s1 = pipeline.state.advance %s0 : !ps
  scf.if %in {
    pipeline.producer.acquire %p, %s1 : !T, !ps
    pipeline.copy.tma_load %p, %s1, %desc[%x, %k] to %buf {bytes = 8192 : i64} : !T, !ps, !llvm.ptr, !llvm.ptr<3>
  }
  pipeline.producer.tail %p, %s1 : !T, !ps
  return
}

// -----

!T = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 1>, tx_count = 4096>
!ps = !pipeline.state<2, producer>

// A copy op issues one copy per thread that runs it: the producer warp runs
// it without an elect_one guard, so 32 copies of the box land on the stage
// that tx_count arms for one.
func.func @copy_by_every_lane(%n: index, %desc: !llvm.ptr, %buf: !llvm.ptr<3>) {
  %tid = gpu.thread_id x
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %x = arith.constant 0 : i32
  // expected-note @+1 {{pipeline 'ab' is created here}}
  %p = pipeline.create {name = "ab"} : !T
  %warp = arith.divui %tid, %c32 : index
  %is_producer = arith.cmpi eq, %warp, %c1 : index
  scf.if %is_producer {
    %s0 = pipeline.state.make : !ps
    %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
      // expected-error @+1 {{pipeline 'ab': producer.acquire expects 4096 bytes (tx_count 4096) but the 1 copy bound to this stage deliver 131072: the phase completes before every byte landed and consumers read a partly filled stage (a copy op issues one copy per thread that runs it: guard it with elect_one so that one lane issues it)}}
      pipeline.producer.acquire %p, %s : !T, !ps
      // expected-note @+1 {{copy of 4096 bytes x 32 lanes that issue it (warp 1: every lane, no elect_one guard)}}
      pipeline.copy.tma_load %p, %s, %desc[%x] to %buf {bytes = 4096 : i64} : !T, !ps, !llvm.ptr, !llvm.ptr<3>
      %s1 = pipeline.state.advance %s : !ps
      scf.yield %s1 : !ps
    }
    pipeline.producer.tail %p, %sN : !T, !ps
  }
  return
}

// -----

!T = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 1>, tx_count = 4096>
!ps = !pipeline.state<2, producer>

// The correct twin: the producer warp's elected lane issues the copy.
func.func @copy_by_elected_lane(%n: index, %desc: !llvm.ptr, %buf: !llvm.ptr<3>) {
  %tid = gpu.thread_id x
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %x = arith.constant 0 : i32
  %p = pipeline.create {name = "ab"} : !T
  %warp = arith.divui %tid, %c32 : index
  %is_producer = arith.cmpi eq, %warp, %c1 : index
  scf.if %is_producer {
    %s0 = pipeline.state.make : !ps
    %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
      pipeline.producer.acquire %p, %s : !T, !ps
      %e = nvvm.elect.sync -> i1
      scf.if %e {
        pipeline.copy.tma_load %p, %s, %desc[%x] to %buf {bytes = 4096 : i64} : !T, !ps, !llvm.ptr, !llvm.ptr<3>
      }
      %s1 = pipeline.state.advance %s : !ps
      scf.yield %s1 : !ps
    }
    pipeline.producer.tail %p, %sN : !T, !ps
  }
  return
}

// -----

!T = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 1>, tx_count = 4096>
!ps = !pipeline.state<2, producer>

// Also correct: every lane issues a copy on purpose (its own 128 bytes, at
// its own coordinate), and tx_count counts all 32.
func.func @copy_per_lane_counted(%n: index, %desc: !llvm.ptr, %buf: !llvm.ptr<3>) {
  %tid = gpu.thread_id x
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %p = pipeline.create {name = "ab"} : !T
  %warp = arith.divui %tid, %c32 : index
  %is_producer = arith.cmpi eq, %warp, %c0 : index
  scf.if %is_producer {
    %lane = arith.index_cast %tid : index to i32
    %s0 = pipeline.state.make : !ps
    %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
      pipeline.producer.acquire %p, %s : !T, !ps
      pipeline.copy.tma_load %p, %s, %desc[%lane] to %buf {bytes = 128 : i64} : !T, !ps, !llvm.ptr, !llvm.ptr<3>
      %s1 = pipeline.state.advance %s : !ps
      scf.yield %s1 : !ps
    }
    pipeline.producer.tail %p, %sN : !T, !ps
  }
  return
}
