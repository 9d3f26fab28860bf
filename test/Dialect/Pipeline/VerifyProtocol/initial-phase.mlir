// Property 3: a state made as its side's start state (constant phase, index 0,
// count 0 or none) whose phase the first wait of that side reads starts where
// the role starts: producers at phase 1 (buffers start empty), consumers at 0.
// States past the start (count > 0, index > 0, a later wait of the side) and
// states whose phase nobody reads (commit / release only) are positions, not
// starts.
// RUN: pipeline-opt --pipeline-verify-protocol -split-input-file -verify-diagnostics %s

!P = !pipeline.pipeline<async, stages = 4, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!ps = !pipeline.state<4, producer>

func.func @producer_phase_zero() {
  %p = pipeline.create {name = "kv"} : !P
  %c0 = arith.constant 0 : i32
  // expected-note @-1 {{phase given here}}
  // expected-error @+1 {{producer state starts at phase 0: producer states start at phase 1 because buffers start empty; with phase 0 the first producer.acquire waits forever (use phase 1, or pipeline.state.make without operands; a state resumed mid-stream gives its count)}}
  %s = pipeline.state.make index %c0 phase %c0 : !ps
  // expected-note @+1 {{first pipeline.producer.acquire of this side on pipeline 'kv' reads it}}
  pipeline.producer.acquire %p, %s : !P, !ps
  pipeline.producer.commit %p, %s : !P, !ps
  pipeline.producer.tail %p, %s : !P, !ps
  return
}

// -----

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!cs = !pipeline.state<2, consumer>

// Through a loop carry: the first iteration's wait reads the start phase.
func.func @consumer_phase_one(%n: index) {
  %i0 = arith.constant 0 : index
  %i1 = arith.constant 1 : index
  %p = pipeline.create {name = "kv"} : !P
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  // expected-note @-1 {{phase given here}}
  // expected-error @+1 {{consumer state starts at phase 1: consumer states start at phase 0 because no buffer is full yet; with phase 1 the first consumer.wait returns before the producer filled the stage (use phase 0, or pipeline.state.make without operands; a state resumed mid-stream gives its count)}}
  %s0 = pipeline.state.make index %c0 phase %c1 count %c0 : !cs
  %sN = scf.for %i = %i0 to %n step %i1 iter_args(%s = %s0) -> (!cs) {
    // expected-note @+1 {{first pipeline.consumer.wait of this side on pipeline 'kv' reads it}}
    pipeline.consumer.wait %p, %s : !P, !cs
    pipeline.consumer.release %p, %s : !P, !cs
    %s1 = pipeline.state.advance %s : !cs
    scf.yield %s1 : !cs
  }
  return
}

// -----

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!ps = !pipeline.state<2, producer, simple>

// flash-attention packed state: phase_index 0 is (index 0, phase 0), below the
// producer's start phase_index `stages` (Dao-AILab/flash-attention#1317).
func.func @simple_producer_phase_zero() {
  %p = pipeline.create {name = "kv"} : !P
  %c0 = arith.constant 0 : i32
  // expected-note @-1 {{phase given here}}
  // expected-error @+1 {{producer state starts at phase 0: producer states start at phase 1 because buffers start empty; with phase 0 the first producer.acquire waits forever (make the packed phase_index stages + index, or use pipeline.state.make without operands)}}
  %s = pipeline.state.make index %c0 : !ps
  // expected-note @+1 {{first pipeline.producer.acquire of this side on pipeline 'kv' reads it}}
  pipeline.producer.acquire %p, %s : !P, !ps
  pipeline.producer.commit %p, %s : !P, !ps
  pipeline.producer.tail %p, %s : !P, !ps
  return
}

// -----

// Correct: the role's start phases, runtime phases, producer_consumer states,
// states nobody waits on.
func.func @phases_ok(%dyn: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c2 = arith.constant 2 : i32
  %c3 = arith.constant 3 : i32
  %a = pipeline.state.make index %c3 phase %c1 : !pipeline.state<4, producer>
  %b = pipeline.state.make index %c1 phase %c0 : !pipeline.state<4, consumer>
  %c = pipeline.state.make index %c0 phase %dyn : !pipeline.state<4, producer>
  %d = pipeline.state.make index %c0 phase %c0 : !pipeline.state<4, producer_consumer>
  %e = pipeline.state.make index %c2 : !pipeline.state<2, producer, simple>
  %f = pipeline.state.make index %c1 : !pipeline.state<2, consumer, simple>
  %g = pipeline.state.make : !pipeline.state<4, producer>
  %h = pipeline.state.make index %c0 phase %c0 : !pipeline.state<4, producer>
  return
}

// -----

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>

// Correct: flash-attention's (index, phase) verbs, as the builders emit them
// (PipelineState(stages, 0, index, phase) per call). producer_commit_w_index
// and consumer_release_w_index make phase-0 states whose phase nothing
// reads; the third acquire, a lap later, waits on phase 0 of stage 0
// legitimately; so does the consumer's second lap at phase 1.
func.func @w_index_phase_unrolled() {
  %p = pipeline.create {name = "kv"} : !P
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %a0 = pipeline.state.make index %c0 phase %c1 count %c0 : !ps
  pipeline.producer.acquire %p, %a0 : !P, !ps
  %m0 = pipeline.state.make index %c0 phase %c0 count %c0 : !ps
  pipeline.producer.commit %p, %m0 : !P, !ps
  %a1 = pipeline.state.make index %c1 phase %c1 count %c0 : !ps
  pipeline.producer.acquire %p, %a1 : !P, !ps
  %m1 = pipeline.state.make index %c1 phase %c0 count %c0 : !ps
  pipeline.producer.commit %p, %m1 : !P, !ps
  %a2 = pipeline.state.make index %c0 phase %c0 count %c0 : !ps
  pipeline.producer.acquire %p, %a2 : !P, !ps
  pipeline.producer.commit %p, %m0 : !P, !ps
  pipeline.producer.tail %p, %a1 : !P, !ps
  %w0 = pipeline.state.make index %c0 phase %c0 count %c0 : !cs
  pipeline.consumer.wait %p, %w0 : !P, !cs
  pipeline.consumer.release %p, %w0 : !P, !cs
  %w1 = pipeline.state.make index %c0 phase %c1 count %c0 : !cs
  pipeline.consumer.wait %p, %w1 : !P, !cs
  pipeline.consumer.release %p, %w1 : !P, !cs
  return
}

// -----

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>
!ss = !pipeline.state<2, consumer, simple>

// Correct: states resumed mid-stream, PipelineState(stages, count, index,
// phase) with count > 0 (or a runtime count), and a packed consumer state one
// lap in.
func.func @resumed_mid_stream(%count: i32) {
  %p = pipeline.create {name = "kv"} : !P
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c2 = arith.constant 2 : i32
  %c4 = arith.constant 4 : i32
  %s = pipeline.state.make index %c0 phase %c0 count %c4 : !ps
  pipeline.producer.acquire %p, %s : !P, !ps
  pipeline.producer.commit %p, %s : !P, !ps
  pipeline.producer.tail %p, %s : !P, !ps
  %c = pipeline.state.make index %c0 phase %c1 count %count : !cs
  pipeline.consumer.wait %p, %c : !P, !cs
  pipeline.consumer.release %p, %c : !P, !cs
  %q = pipeline.state.make index %c2 : !ss
  pipeline.consumer.wait %p, %q : !P, !ss
  pipeline.consumer.release %p, %q : !P, !ss
  return
}

// -----

!P = !pipeline.pipeline<async, stages = 4, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!pcs = !pipeline.state<4, producer_consumer>

// `PipelineState(4, 0, 0, 0)` as the producer's start state: a
// producer_consumer state takes its side from the first wait that reads it.
func.func @producer_consumer_state_as_producer_start() {
  %p = pipeline.create {name = "kv"} : !P
  %c0 = arith.constant 0 : i32
  // expected-note @-1 {{phase given here}}
  // expected-error @+1 {{producer_consumer state starts at phase 0 and the first producer.acquire on this pipeline reads it: producer states start at phase 1 because buffers start empty; with phase 0 the first producer.acquire waits forever (make the producer's start state with pipeline.state.make : !pipeline.state<4, producer>)}}
  %s = pipeline.state.make index %c0 phase %c0 count %c0 : !pcs
  // expected-note @+1 {{first pipeline.producer.acquire of this side on pipeline 'kv' reads it}}
  pipeline.producer.acquire %p, %s : !P, !pcs
  pipeline.producer.commit %p, %s : !P, !pcs
  pipeline.producer.tail %p, %s : !P, !pcs
  return
}

// -----

!P = !pipeline.pipeline<async, stages = 4, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!pcs = !pipeline.state<4, producer_consumer>

// The twin: the same state starts a consumer (phase 0 is right there), and a
// producer_consumer state at phase 1 starts a producer.
func.func @producer_consumer_states_at_their_start(%n: index) {
  %p = pipeline.create {name = "kv"} : !P
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c = pipeline.state.make index %c0 phase %c0 count %c0 : !pcs
  pipeline.consumer.wait %p, %c : !P, !pcs
  pipeline.consumer.release %p, %c : !P, !pcs
  %s = pipeline.state.make index %c0 phase %c1 count %c0 : !pcs
  pipeline.producer.acquire %p, %s : !P, !pcs
  pipeline.producer.commit %p, %s : !P, !pcs
  pipeline.producer.tail %p, %s : !P, !pcs
  return
}
