// Property 11, stage balance, with trip counts known at build time
// (tilelang#2566: a single-iteration warp-specialized loop hangs). A loop whose constant upper bound is at or below its lower bound
// runs 0 times, and a branch on the loop variable of a constant loop takes
// the iterations that satisfy it, none when its bound lies outside the
// range. Counting `ceildiv(ub - lb, step)` and the peeled-iteration formulas
// as if every loop ran made these counts negative and the comparison
// silent. Each bug sits next to its correct twin, which must stay silent.
// RUN: pipeline-opt --pipeline-verify-protocol -split-input-file -verify-diagnostics %s
!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>

// Bug: the producer fills both stages before its main loop over
// [stages, k_tiles); with k_tiles = 1 the main loop runs 0 times, not -1,
// and the producer commits 2 stages to a consumer that takes 1.
gpu.module @k {
gpu.func @prologue_past_one_tile() kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c32 = arith.constant 32 : index
  // expected-note @+1 {{pipeline 'ab' is created here}}
  %p = pipeline.create {name = "ab"} : !P
  %tid = gpu.thread_id x
  %w = arith.divui %tid, %c32 : index
  %is0 = arith.cmpi eq, %w, %c0 : index
  // expected-note @+2 {{the producer role}}
  // expected-note @+1 {{the consumer role}}
  scf.if %is0 {
    %s0 = pipeline.state.make : !ps
    %s1 = scf.for %i = %c0 to %c2 step %c1 iter_args(%s = %s0) -> (!ps) {
      pipeline.producer.acquire %p, %s : !P, !ps
      // expected-note @+1 {{the producer commits here}}
      pipeline.producer.commit %p, %s : !P, !ps
      %n = pipeline.state.advance %s : !ps
      scf.yield %n : !ps
    }
    %sN = scf.for %i = %c2 to %c1 step %c1 iter_args(%s = %s1) -> (!ps) {
      pipeline.producer.acquire %p, %s : !P, !ps
      pipeline.producer.commit %p, %s : !P, !ps
      %n = pipeline.state.advance %s : !ps
      scf.yield %n : !ps
    }
    pipeline.producer.tail %p, %sN : !P, !ps
  } else {
    %c = pipeline.state.make : !cs
    %cN = scf.for %i = %c0 to %c1 step %c1 iter_args(%s = %c) -> (!cs) {
      pipeline.consumer.wait %p, %s : !P, !cs
      // expected-error @+1 {{pipeline 'ab': the producer role (one warp) commits 2 stages, the consumer role (one warp) releases 1 (2 against 1): the producer fills stages nobody consumes and waits forever for them to come back (give both roles the same loop bounds)}}
      pipeline.consumer.release %p, %s : !P, !cs
      %n = pipeline.state.advance %s : !cs
      scf.yield %n : !cs
    }
  }
  gpu.return
}
}

// -----

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>

// Twin: the prologue fills min(stages, k_tiles) = 1 stage (CUTLASS's
// prefetch count), the main loop [1, 1) none.
gpu.module @k {
gpu.func @prologue_one_tile() kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %p = pipeline.create {name = "ab"} : !P
  %tid = gpu.thread_id x
  %w = arith.divui %tid, %c32 : index
  %is0 = arith.cmpi eq, %w, %c0 : index
  scf.if %is0 {
    %s0 = pipeline.state.make : !ps
    %s1 = scf.for %i = %c0 to %c1 step %c1 iter_args(%s = %s0) -> (!ps) {
      pipeline.producer.acquire %p, %s : !P, !ps
      pipeline.producer.commit %p, %s : !P, !ps
      %n = pipeline.state.advance %s : !ps
      scf.yield %n : !ps
    }
    %sN = scf.for %i = %c1 to %c1 step %c1 iter_args(%s = %s1) -> (!ps) {
      pipeline.producer.acquire %p, %s : !P, !ps
      pipeline.producer.commit %p, %s : !P, !ps
      %n = pipeline.state.advance %s : !ps
      scf.yield %n : !ps
    }
    pipeline.producer.tail %p, %sN : !P, !ps
  } else {
    %c = pipeline.state.make : !cs
    %cN = scf.for %i = %c0 to %c1 step %c1 iter_args(%s = %c) -> (!cs) {
      pipeline.consumer.wait %p, %s : !P, !cs
      pipeline.consumer.release %p, %s : !P, !cs
      %n = pipeline.state.advance %s : !cs
      scf.yield %n : !cs
    }
  }
  gpu.return
}
}

// -----

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>

// Bug: a consumer whose release lags its wait by 2 stages (`if k >= 2:
// release k - 2`, then the last 2 released after the loop) over 1 tile: the
// branch is never taken (0 iterations, not 1 - 2) and the epilogue releases
// 2 stages after 1 wait, one of them never filled.
gpu.module @k {
gpu.func @lagging_release_one_tile() kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c32 = arith.constant 32 : index
  %p = pipeline.create {name = "ab"} : !P
  %tid = gpu.thread_id x
  %w = arith.divui %tid, %c32 : index
  %is0 = arith.cmpi eq, %w, %c0 : index
  // expected-note @+1 {{in this role}}
  scf.if %is0 {
    %s0 = pipeline.state.make : !ps
    %sN = scf.for %i = %c0 to %c1 step %c1 iter_args(%s = %s0) -> (!ps) {
      pipeline.producer.acquire %p, %s : !P, !ps
      pipeline.producer.commit %p, %s : !P, !ps
      %n = pipeline.state.advance %s : !ps
      scf.yield %n : !ps
    }
    pipeline.producer.tail %p, %sN : !P, !ps
  } else {
    %c = pipeline.state.make : !cs
    %wN, %rN = scf.for %i = %c0 to %c1 step %c1 iter_args(%ws = %c, %rs = %c) -> (!cs, !cs) {
      // expected-note @+1 {{pipeline.consumer.wait here}}
      pipeline.consumer.wait %p, %ws : !P, !cs
      %lag = arith.cmpi sge, %i, %c2 : index
      %r1 = scf.if %lag -> (!cs) {
        // expected-error @+1 {{pipeline 'ab': this role waits on 1 stage but releases 2 (1 against 2); every pipeline.consumer.wait needs its pipeline.consumer.release the same number of times (check the loop bounds)}}
        pipeline.consumer.release %p, %rs : !P, !cs
        %rn = pipeline.state.advance %rs : !cs
        scf.yield %rn : !cs
      } else {
        scf.yield %rs : !cs
      }
      %wn = pipeline.state.advance %ws : !cs
      scf.yield %wn, %r1 : !cs, !cs
    }
    %rE = scf.for %j = %c0 to %c2 step %c1 iter_args(%rs = %rN) -> (!cs) {
      pipeline.consumer.release %p, %rs : !P, !cs
      %rn = pipeline.state.advance %rs : !cs
      scf.yield %rn : !cs
    }
  }
  gpu.return
}
}

// -----

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>

// Twin: the epilogue releases min(2, k_tiles) = 1 stage.
gpu.module @k {
gpu.func @lagging_release_one_tile_twin() kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c32 = arith.constant 32 : index
  %p = pipeline.create {name = "ab"} : !P
  %tid = gpu.thread_id x
  %w = arith.divui %tid, %c32 : index
  %is0 = arith.cmpi eq, %w, %c0 : index
  scf.if %is0 {
    %s0 = pipeline.state.make : !ps
    %sN = scf.for %i = %c0 to %c1 step %c1 iter_args(%s = %s0) -> (!ps) {
      pipeline.producer.acquire %p, %s : !P, !ps
      pipeline.producer.commit %p, %s : !P, !ps
      %n = pipeline.state.advance %s : !ps
      scf.yield %n : !ps
    }
    pipeline.producer.tail %p, %sN : !P, !ps
  } else {
    %c = pipeline.state.make : !cs
    %wN, %rN = scf.for %i = %c0 to %c1 step %c1 iter_args(%ws = %c, %rs = %c) -> (!cs, !cs) {
      pipeline.consumer.wait %p, %ws : !P, !cs
      %lag = arith.cmpi sge, %i, %c2 : index
      %r1 = scf.if %lag -> (!cs) {
        pipeline.consumer.release %p, %rs : !P, !cs
        %rn = pipeline.state.advance %rs : !cs
        scf.yield %rn : !cs
      } else {
        scf.yield %rs : !cs
      }
      %wn = pipeline.state.advance %ws : !cs
      scf.yield %wn, %r1 : !cs, !cs
    }
    %rE = scf.for %j = %c0 to %c1 step %c1 iter_args(%rs = %rN) -> (!cs) {
      pipeline.consumer.release %p, %rs : !P, !cs
      %rn = pipeline.state.advance %rs : !cs
      scf.yield %rn : !cs
    }
  }
  gpu.return
}
}
