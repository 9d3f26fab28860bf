// Property 14: phases decided by the loop structure. Each bug next to its
// correct twin: a start state made inside a loop (restarted every iteration
// while the barriers keep their phases), an (index, phase) pair whose phase
// flips every iteration instead of every lap of the ring (tilelang#3087),
// and one whose first iteration starts at the other side's phase.
// RUN: pipeline-opt --pipeline-verify-protocol -split-input-file -verify-diagnostics %s

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!cs = !pipeline.state<2, consumer>

// A persistent loop that makes the consumer state again for every tile: the
// k loop's run-time trip count is not provably a multiple of 2 x 2.
func.func @restarted_per_tile(%p: !P, %tiles: index, %k: index) {
  %i0 = arith.constant 0 : index
  %i1 = arith.constant 1 : index
  // expected-note @+1 {{the loop that restarts the state}}
  scf.for %t = %i0 to %tiles step %i1 {
    // expected-error @+1 {{PipelineAsync pipeline: the consumer state is made inside a loop (make_pipeline_state(PipelineUserType.Consumer, 2) runs again every iteration, back at index 0 and its start phase) while the pipeline's barriers keep their phases: one iteration walks a number of stages not provably a multiple of 2 x 2 (a run-time trip count or advance), so the next iteration's pipeline.consumer.wait reads a phase its stage no longer has (it hangs, or passes on the stage's previous contents); make the state once before the loop and carry it (k.range(..., carry=[state]))}}
    %s0 = pipeline.state.make : !cs
    %sN = scf.for %i = %i0 to %k step %i1 iter_args(%s = %s0) -> (!cs) {
      // expected-note @+1 {{pipeline.consumer.wait reads the restarted state here}}
      pipeline.consumer.wait %p, %s : !P, !cs
      pipeline.consumer.release %p, %s : !P, !cs
      %s1 = pipeline.state.advance %s : !cs
      scf.yield %s1 : !cs
    }
  }
  return
}

// -----

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!cs = !pipeline.state<2, consumer>

// The twin: the state is made once and carried across tiles.
func.func @carried_across_tiles(%p: !P, %tiles: index, %k: index) {
  %i0 = arith.constant 0 : index
  %i1 = arith.constant 1 : index
  %s0 = pipeline.state.make : !cs
  %sT = scf.for %t = %i0 to %tiles step %i1 iter_args(%st = %s0) -> (!cs) {
    %sN = scf.for %i = %i0 to %k step %i1 iter_args(%s = %st) -> (!cs) {
      pipeline.consumer.wait %p, %s : !P, !cs
      pipeline.consumer.release %p, %s : !P, !cs
      %s1 = pipeline.state.advance %s : !cs
      scf.yield %s1 : !cs
    }
    scf.yield %sN : !cs
  }
  return
}

// -----

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!ps = !pipeline.state<2, producer>

// A producer restarted per tile with 3 k-blocks of 2 stages: the second
// tile's first acquire waits on stage 0 for the parity of a phase it
// already passed.
func.func @producer_restarted_three_stages(%p: !P, %tiles: index) {
  %i0 = arith.constant 0 : index
  %i1 = arith.constant 1 : index
  %i3 = arith.constant 3 : index
  // expected-note @+1 {{the loop that restarts the state}}
  scf.for %t = %i0 to %tiles step %i1 {
    // expected-error @+1 {{the producer state is made inside a loop (make_pipeline_state(PipelineUserType.Producer, 2) runs again every iteration, back at index 0 and its start phase) while the pipeline's barriers keep their phases: one iteration walks 3 stage(s), not a multiple of 2 x 2 stages}}
    %s0 = pipeline.state.make : !ps
    %sN = scf.for %i = %i0 to %i3 step %i1 iter_args(%s = %s0) -> (!ps) {
      // expected-note @+1 {{pipeline.producer.acquire reads the restarted state here}}
      pipeline.producer.acquire %p, %s : !P, !ps
      pipeline.producer.commit %p, %s : !P, !ps
      %s1 = pipeline.state.advance %s : !ps
      scf.yield %s1 : !ps
    }
  }
  return
}

// -----

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!ps = !pipeline.state<2, producer>

// The twin: 4 k-blocks of 2 stages bring every stage back to its start
// parity, so making the state again is the same state.
func.func @producer_restarted_four_stages(%p: !P, %tiles: index) {
  %i0 = arith.constant 0 : index
  %i1 = arith.constant 1 : index
  %i4 = arith.constant 4 : index
  scf.for %t = %i0 to %tiles step %i1 {
    %s0 = pipeline.state.make : !ps
    %sN = scf.for %i = %i0 to %i4 step %i1 iter_args(%s = %s0) -> (!ps) {
      pipeline.producer.acquire %p, %s : !P, !ps
      pipeline.producer.commit %p, %s : !P, !ps
      %s1 = pipeline.state.advance %s : !ps
      scf.yield %s1 : !ps
    }
  }
  return
}

// -----

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!cs = !pipeline.state<2, consumer>

// Not restarted: an outer loop of one iteration.
func.func @one_iteration(%p: !P, %k: index) {
  %i0 = arith.constant 0 : index
  %i1 = arith.constant 1 : index
  scf.for %t = %i0 to %i1 step %i1 {
    %s0 = pipeline.state.make : !cs
    %sN = scf.for %i = %i0 to %k step %i1 iter_args(%s = %s0) -> (!cs) {
      pipeline.consumer.wait %p, %s : !P, !cs
      pipeline.consumer.release %p, %s : !P, !cs
      %s1 = pipeline.state.advance %s : !cs
      scf.yield %s1 : !cs
    }
  }
  return
}

// -----

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!cs = !pipeline.state<2, consumer>

// tilelang#3087: consumer_wait_w_index_phase(k % 2, k % 2) flips the phase
// every iteration; the ring of 2 stages wraps every 2.
func.func @phase_flips_every_iteration(%p: !P, %n: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c2 = arith.constant 2 : i32
  // expected-note @+1 {{the loop}}
  scf.for %k = %c0 to %n step %c1 : i32 {
    %idx = arith.remsi %k, %c2 : i32
    // expected-note @+1 {{phase computed here}}
    %ph = arith.remsi %k, %c2 : i32
    // expected-error @+1 {{PipelineAsync pipeline: the phase given to this state flips at iteration 1 of the loop, where the index goes from 0 to 1 of 2 stages: a stage's barrier phase flips once per lap of the ring (when the index wraps to the start), not every iteration, so pipeline.consumer.wait waits for a phase its stage is not in (it hangs, or passes on the stage's previous contents); compute the phase as (k // 2) % 2 for a loop variable counting stages from 0 (the start phase for a consumer; xor 1 for a producer), or use a PipelineState and advance() it every iteration}}
    %s = pipeline.state.make index %idx phase %ph count %c0 : !cs
    // expected-note @+1 {{pipeline.consumer.wait reads the state here}}
    pipeline.consumer.wait %p, %s : !P, !cs
    %r = pipeline.state.make index %idx phase %c0 count %c0 : !cs
    pipeline.consumer.release %p, %r : !P, !cs
  }
  return
}

// -----

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!cs = !pipeline.state<2, consumer>

// The twin: the phase flips when the index wraps, (k / 2) % 2.
func.func @phase_flips_every_lap(%p: !P, %n: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c2 = arith.constant 2 : i32
  scf.for %k = %c0 to %n step %c1 : i32 {
    %idx = arith.remsi %k, %c2 : i32
    %lap = arith.divsi %k, %c2 : i32
    %ph = arith.remsi %lap, %c2 : i32
    %s = pipeline.state.make index %idx phase %ph count %c0 : !cs
    pipeline.consumer.wait %p, %s : !P, !cs
    %r = pipeline.state.make index %idx phase %c0 count %c0 : !cs
    pipeline.consumer.release %p, %r : !P, !cs
  }
  return
}

// -----

!P = !pipeline.pipeline<async, stages = 3, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!ps = !pipeline.state<3, producer>

// A phase carried by the loop and flipped every iteration (phase ^= 1),
// with the index walking 3 stages.
func.func @carried_phase_flips(%p: !P, %n: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c3 = arith.constant 3 : i32
  // expected-note @+1 {{the loop}}
  %last = scf.for %k = %c0 to %n step %c1 iter_args(%ph = %c1) -> (i32) : i32 {
    %idx = arith.remsi %k, %c3 : i32
    // expected-error @+1 {{the phase given to this state flips at iteration 1 of the loop, where the index goes from 0 to 1 of 3 stages}}
    %s = pipeline.state.make index %idx phase %ph count %c0 : !ps
    // expected-note @+1 {{pipeline.producer.acquire reads the state here}}
    pipeline.producer.acquire %p, %s : !P, !ps
    pipeline.producer.commit %p, %s : !P, !ps
    // expected-note @+1 {{phase computed here}}
    %next = arith.xori %ph, %c1 : i32
    scf.yield %next : i32
  }
  return
}

// -----

!P = !pipeline.pipeline<async, stages = 3, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!ps = !pipeline.state<3, producer>

// The twin: the carried phase flips when the carried index wraps.
func.func @carried_phase_flips_on_wrap(%p: !P, %n: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c2 = arith.constant 2 : i32
  %r:2 = scf.for %k = %c0 to %n step %c1 iter_args(%idx = %c0, %ph = %c1) -> (i32, i32) : i32 {
    %s = pipeline.state.make index %idx phase %ph count %c0 : !ps
    pipeline.producer.acquire %p, %s : !P, !ps
    pipeline.producer.commit %p, %s : !P, !ps
    %wrap = arith.cmpi eq, %idx, %c2 : i32
    %inc = arith.addi %idx, %c1 : i32
    %nidx = arith.select %wrap, %c0, %inc : i32
    %flip = arith.xori %ph, %c1 : i32
    %nph = arith.select %wrap, %flip, %ph : i32
    scf.yield %nidx, %nph : i32, i32
  }
  return
}

// -----

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!cs = !pipeline.state<2, consumer>

// An explicit-phase consumer whose loop computes the producer's start
// parity: its first wait passes before the stage is filled.
func.func @loop_starts_at_the_wrong_parity(%p: !P, %n: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c2 = arith.constant 2 : i32
  scf.for %k = %c0 to %n step %c1 : i32 {
    %idx = arith.remsi %k, %c2 : i32
    %lap = arith.divsi %k, %c2 : i32
    %odd = arith.remsi %lap, %c2 : i32
    // expected-note @+1 {{phase computed here}}
    %ph = arith.xori %odd, %c1 : i32
    // expected-error @+1 {{PipelineAsync pipeline: in the loop's first iteration this state is (index 0, phase 1) and the consumer's first pipeline.consumer.wait on the pipeline reads it: consumer states start at phase 0 because no buffer is full yet; with phase 1 the first consumer.wait returns before the producer filled the stage (start the phase the loop computes at 0: for a loop variable k counting stages from 0, (k // 2) % 2)}}
    %s = pipeline.state.make index %idx phase %ph count %c0 : !cs
    // expected-note @+1 {{first pipeline.consumer.wait of this side on PipelineAsync pipeline reads it}}
    pipeline.consumer.wait %p, %s : !P, !cs
    %r = pipeline.state.make index %idx phase %c0 count %c0 : !cs
    pipeline.consumer.release %p, %r : !P, !cs
  }
  return
}

// -----

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!ps = !pipeline.state<2, producer>

// The twin: the same loop on the producer side, which starts at phase 1.
func.func @producer_loop_starts_at_one(%p: !P, %n: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c2 = arith.constant 2 : i32
  scf.for %k = %c0 to %n step %c1 : i32 {
    %idx = arith.remsi %k, %c2 : i32
    %lap = arith.divsi %k, %c2 : i32
    %odd = arith.remsi %lap, %c2 : i32
    %ph = arith.xori %odd, %c1 : i32
    %s = pipeline.state.make index %idx phase %ph count %c0 : !ps
    pipeline.producer.acquire %p, %s : !P, !ps
    pipeline.producer.commit %p, %s : !P, !ps
  }
  return
}

// -----

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!cs = !pipeline.state<2, consumer>

// Not decided: a wait under a branch on the loop variable may not run in the
// iterations the evaluation looks at.
func.func @conditional_wait_not_decided(%p: !P, %n: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c2 = arith.constant 2 : i32
  scf.for %k = %c0 to %n step %c1 : i32 {
    %later = arith.cmpi sgt, %k, %c0 : i32
    scf.if %later {
      %idx = arith.remsi %k, %c2 : i32
      %s = pipeline.state.make index %idx phase %idx count %c0 : !cs
      pipeline.consumer.wait %p, %s : !P, !cs
      pipeline.consumer.release %p, %s : !P, !cs
    }
  }
  return
}

// -----

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!cs = !pipeline.state<2, consumer>

// An explicit pair computed from the k loop's variable alone, inside the
// tile loop: every tile starts again at (0, 0) after 3 stages.
func.func @explicit_pair_restarted_per_tile(%p: !P, %tiles: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c2 = arith.constant 2 : i32
  %c3 = arith.constant 3 : i32
  // expected-note @+1 {{the loop whose iterations restart it}}
  scf.for %t = %c0 to %tiles step %c1 : i32 {
    scf.for %k = %c0 to %c3 step %c1 : i32 {
      %idx = arith.remsi %k, %c2 : i32
      %lap = arith.divsi %k, %c2 : i32
      %ph = arith.remsi %lap, %c2 : i32
      // expected-error @+1 {{PipelineAsync pipeline: this state's (index, phase) is computed from the inner loop's variables alone, so it starts again at the same stage and phase in every iteration of the loop around it while the barriers keep their phases: one pass of the inner loop walks 3 stage(s), not a multiple of 2 x 2 stages, so the next pass's pipeline.consumer.wait reads a phase its stage no longer has; compute the pair from a count that runs across the outer loop (index (t * k_tiles + k) % 2, phase ((t * k_tiles + k) // 2) % 2), or carry a PipelineState across it (k.range(..., carry=[state]))}}
      %s = pipeline.state.make index %idx phase %ph count %c0 : !cs
      // expected-note @+1 {{pipeline.consumer.wait reads the state here}}
      pipeline.consumer.wait %p, %s : !P, !cs
      %r = pipeline.state.make index %idx phase %c0 count %c0 : !cs
      pipeline.consumer.release %p, %r : !P, !cs
    }
  }
  return
}

// -----

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!cs = !pipeline.state<2, consumer>

// The twin: the pair is computed from a count that runs across tiles.
func.func @explicit_pair_across_tiles(%p: !P, %tiles: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c2 = arith.constant 2 : i32
  %c3 = arith.constant 3 : i32
  scf.for %t = %c0 to %tiles step %c1 : i32 {
    %base = arith.muli %t, %c3 : i32
    scf.for %k = %c0 to %c3 step %c1 : i32 {
      %n = arith.addi %base, %k : i32
      %idx = arith.remsi %n, %c2 : i32
      %lap = arith.divsi %n, %c2 : i32
      %ph = arith.remsi %lap, %c2 : i32
      %s = pipeline.state.make index %idx phase %ph count %c0 : !cs
      pipeline.consumer.wait %p, %s : !P, !cs
      %r = pipeline.state.make index %idx phase %c0 count %c0 : !cs
      pipeline.consumer.release %p, %r : !P, !cs
    }
  }
  return
}
