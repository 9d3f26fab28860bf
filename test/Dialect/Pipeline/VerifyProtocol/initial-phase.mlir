// Property 3: states made with an explicit constant phase start where their
// role starts: producers at phase 1 (buffers start empty), consumers at 0.
// RUN: pipeline-opt --pipeline-verify-protocol -split-input-file -verify-diagnostics %s

func.func @producer_phase_zero() {
  %c0 = arith.constant 0 : i32
  // expected-note @-1 {{phase given here}}
  // expected-error @+1 {{producer state starts at phase 0: producer states start at phase 1 because buffers start empty; with phase 0 the first producer.acquire waits forever (use phase 1, or pipeline.state.make without operands)}}
  %s = pipeline.state.make index %c0 phase %c0 : !pipeline.state<4, producer>
  return
}

// -----

func.func @consumer_phase_one() {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  // expected-note @-1 {{phase given here}}
  // expected-error @+1 {{consumer state starts at phase 1: consumer states start at phase 0 because no buffer is full yet; with phase 1 the first consumer.wait returns before the producer filled the stage (use phase 0, or pipeline.state.make without operands)}}
  %s = pipeline.state.make index %c0 phase %c1 count %c0 : !pipeline.state<2, consumer>
  return
}

// -----

// flash-attention packed state: phase_index 0 is (index 0, phase 0), which a
// producer must not start at (Dao-AILab/flash-attention#1317).
func.func @simple_producer_phase_zero() {
  %c0 = arith.constant 0 : i32
  // expected-note @-1 {{phase given here}}
  // expected-error @+1 {{producer state starts at phase 0: producer states start at phase 1 because buffers start empty; with phase 0 the first producer.acquire waits forever (make the packed phase_index stages + index, or use pipeline.state.make without operands)}}
  %s = pipeline.state.make index %c0 : !pipeline.state<2, producer, simple>
  return
}

// -----

// Correct: the role's start phases, runtime phases, producer_consumer states.
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
  return
}
