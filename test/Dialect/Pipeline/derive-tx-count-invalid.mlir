// pipeline-derive-tx-count refuses what it cannot count, at the op to fix.
// RUN: pipeline-opt --pipeline-derive-tx-count -split-input-file -verify-diagnostics %s


!T = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 128>>
!ps = !pipeline.state<2, producer>

// A peeled first stage loads A and B, the next one only A.
func.func @productions_differ(%desc: !llvm.ptr, %buf: !llvm.ptr<3>) {
  %x = arith.constant 0 : i32
  // expected-note @+1 {{pipeline 'ab' is created here}}
  %p = pipeline.create {name = "ab"} : !T
  %s0 = pipeline.state.make : !ps
  // expected-note @+1 {{the first production, 16384 bytes}}
  pipeline.producer.acquire %p, %s0 : !T, !ps
  pipeline.copy.tma_load %p, %s0, %desc[%x, %x] to %buf {bytes = 8192 : i64} : !T, !ps, !llvm.ptr, !llvm.ptr<3>
  pipeline.copy.tma_load %p, %s0, %desc[%x, %x] to %buf {bytes = 8192 : i64} : !T, !ps, !llvm.ptr, !llvm.ptr<3>
  pipeline.producer.commit %p, %s0 : !T, !ps
  %s1 = pipeline.state.advance %s0 : !ps
  // expected-error @+1 {{pipeline 'ab': this production's copies deliver 8192 bytes per stage but the first production delivered 16384, which became the derived tx_count}}
  pipeline.producer.acquire %p, %s1 : !T, !ps
  // expected-note @+1 {{copy of 8192 bytes}}
  pipeline.copy.tma_load %p, %s1, %desc[%x, %x] to %buf {bytes = 8192 : i64} : !T, !ps, !llvm.ptr, !llvm.ptr<3>
  pipeline.producer.commit %p, %s1 : !T, !ps
  pipeline.producer.tail %p, %s1 : !T, !ps
  return
}

// -----

!T = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 128>>
!ps = !pipeline.state<2, producer>

// No copy: nothing to derive from.
func.func @no_copy() {
  // expected-error @+1 {{pipeline 'ab' was created without tx_count and no tma_load or bulk copy is bound to a producer.acquire of it, so its tx_count cannot be derived (give tx_count to create)}}
  %p = pipeline.create {name = "ab"} : !T
  %s0 = pipeline.state.make : !ps
  pipeline.producer.acquire %p, %s0 : !T, !ps
  pipeline.producer.commit %p, %s0 : !T, !ps
  pipeline.producer.tail %p, %s0 : !T, !ps
  return
}

// -----

!T = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 128>, cluster = #pipeline.cluster<1, 2, 1, 1>, multicast = m>
!ps = !pipeline.state<2, producer>

// A run-time multicast mask: the receivers are unknown.
func.func @runtime_mask(%desc: !llvm.ptr, %buf: !llvm.ptr<3>, %mask: i16) {
  %x = arith.constant 0 : i32
  // expected-note @+1 {{is created here}}
  %p = pipeline.create {name = "ab"} : !T
  %s0 = pipeline.state.make : !ps
  pipeline.producer.acquire %p, %s0 : !T, !ps
  // expected-error @+1 {{pipeline 'ab': tx_count cannot be derived from this copy: its bytes, multicast mask or trip count is only known at run time}}
  pipeline.copy.tma_load %p, %s0, %desc[%x, %x] to %buf multicast %mask {bytes = 8192 : i64} : !T, !ps, !llvm.ptr, !llvm.ptr<3>
  pipeline.producer.commit %p, %s0 : !T, !ps
  pipeline.producer.tail %p, %s0 : !T, !ps
  return
}

// -----

!T = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 128>>
!ps = !pipeline.state<2, producer>

// A copy of one's own on the stage's barrier handle (here in a helper
// function) lands bytes the derivation cannot see: refused at that op, not
// silently left out of the tx_count (the twin, a handle next to the
// tma_load and used by no copy, is in derive-tx-count.mlir).
func.func private @my_copy(!llvm.ptr<3>)
func.func @copy_through_the_barrier_handle(%desc: !llvm.ptr, %buf: !llvm.ptr<3>) {
  %x = arith.constant 0 : i32
  // expected-note @+1 {{pipeline 'ab' is created here}}
  %p = pipeline.create {name = "ab"} : !T
  %s0 = pipeline.state.make : !ps
  pipeline.producer.acquire %p, %s0 : !T, !ps
  pipeline.copy.tma_load %p, %s0, %desc[%x, %x] to %buf {bytes = 8192 : i64} : !T, !ps, !llvm.ptr, !llvm.ptr<3>
  %bar = pipeline.producer.barrier %p, %s0 : !T, !ps
  // expected-error @+1 {{pipeline 'ab': func.call receives the stage's full barrier from producer_get_barrier(state) and may deliver bytes to it that tx_count cannot be derived from (rule: a derived tx_count counts only the tma_load / bulk_copy of the state): issue the copy with tma_load(state, ...) or bulk_copy(state, ...), or give tx_count to create}}
  func.call @my_copy(%bar) : (!llvm.ptr<3>) -> ()
  pipeline.producer.commit %p, %s0 : !T, !ps
  pipeline.producer.tail %p, %s0 : !T, !ps
  return
}

// -----

!T = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 1>>
!ps = !pipeline.state<2, producer>

// The producer warp runs the copy without an elect_one guard: 32 copies of
// the box. Deriving 32 x its bytes would hide the mistake (and send 32
// times the traffic): refused at the copy.
func.func @copy_by_every_lane(%n: index, %desc: !llvm.ptr, %buf: !llvm.ptr<3>) {
  %tid = gpu.thread_id x
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %x = arith.constant 0 : i32
  // expected-note @+1 {{pipeline 'ab' is created here}}
  %p = pipeline.create {name = "ab"} : !T
  %warp = arith.divui %tid, %c32 : index
  %is_producer = arith.cmpi eq, %warp, %c0 : index
  scf.if %is_producer {
    %s0 = pipeline.state.make : !ps
    %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
      pipeline.producer.acquire %p, %s : !T, !ps
      // expected-error @+1 {{pipeline 'ab': tx_count is not derived from this copy: every lane of warp 0 issues it (32 copies of 4096 bytes into the same stage); guard it with elect_one so that one lane issues it (or give tx_count to create if every lane's copy is meant)}}
      pipeline.copy.tma_load %p, %s, %desc[%x] to %buf {bytes = 4096 : i64} : !T, !ps, !llvm.ptr, !llvm.ptr<3>
      %s1 = pipeline.state.advance %s : !ps
      scf.yield %s1 : !ps
    }
    pipeline.producer.tail %p, %sN : !T, !ps
  }
  return
}
