// Property 11, stage balance across roles: the stages a producer role
// acquires (a non-TMA one: commits) over the whole kernel must equal the
// stages its consumer roles release, as polynomials of the kernel's
// arguments and loop bounds (docs/VerifyProtocol.md). Each bug sits next to
// its correct twin, which must stay silent.
// RUN: pipeline-opt --pipeline-verify-protocol -split-input-file -verify-diagnostics %s
!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>

// Bug: the consumer loop stops one stage early (an off-by-one bound).
gpu.module @k {
gpu.func @off_by_one(%n: index) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
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
    %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
      pipeline.producer.acquire %p, %s : !P, !ps
      // expected-note @+1 {{the producer commits here}}
      pipeline.producer.commit %p, %s : !P, !ps
      %s1 = pipeline.state.advance %s : !ps
      scf.yield %s1 : !ps
    }
    pipeline.producer.tail %p, %sN : !P, !ps
  } else {
    %nm1 = arith.subi %n, %c1 : index
    %c = pipeline.state.make : !cs
    %cN = scf.for %i = %c0 to %nm1 step %c1 iter_args(%s = %c) -> (!cs) {
      pipeline.consumer.wait %p, %s : !P, !cs
      // expected-error @+1 {{pipeline 'ab': the producer role (one warp) commits %arg0 stages, the consumer role (one warp) releases %arg0 - 1 (for %arg0 = 1: 1 against 0): the producer fills stages nobody consumes and waits forever for them to come back (give both roles the same loop bounds)}}
      pipeline.consumer.release %p, %s : !P, !cs
      %s1 = pipeline.state.advance %s : !cs
      scf.yield %s1 : !cs
    }
  }
  gpu.return
}
}

// -----

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>

// Twin: the consumer counts from 1 to n + 1: n stages as well.
gpu.module @k {
gpu.func @off_by_one_twin(%n: index) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
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
    %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
      pipeline.producer.acquire %p, %s : !P, !ps
      pipeline.producer.commit %p, %s : !P, !ps
      %s1 = pipeline.state.advance %s : !ps
      scf.yield %s1 : !ps
    }
    pipeline.producer.tail %p, %sN : !P, !ps
  } else {
    %np1 = arith.addi %n, %c1 : index
    %c = pipeline.state.make : !cs
    %cN = scf.for %i = %c1 to %np1 step %c1 iter_args(%s = %c) -> (!cs) {
      pipeline.consumer.wait %p, %s : !P, !cs
      pipeline.consumer.release %p, %s : !P, !cs
      %s1 = pipeline.state.advance %s : !cs
      scf.yield %s1 : !cs
    }
  }
  gpu.return
}
}

// -----

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>

// Bug: the consumer loop steps by 2 over the producer's range: half the stages.
gpu.module @k {
gpu.func @half_range(%n: index) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
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
    %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
      pipeline.producer.acquire %p, %s : !P, !ps
      // expected-note @+1 {{the producer commits here}}
      pipeline.producer.commit %p, %s : !P, !ps
      %s1 = pipeline.state.advance %s : !ps
      scf.yield %s1 : !ps
    }
    pipeline.producer.tail %p, %sN : !P, !ps
  } else {
    %c = pipeline.state.make : !cs
    %cN = scf.for %i = %c0 to %n step %c2 iter_args(%s = %c) -> (!cs) {
      pipeline.consumer.wait %p, %s : !P, !cs
      // expected-error @+1 {{pipeline 'ab': the producer role (one warp) commits %arg0 stages, the consumer role (one warp) releases ceildiv(%arg0, 2) (for %arg0 = 2: 2 against 1)}}
      pipeline.consumer.release %p, %s : !P, !cs
      %s1 = pipeline.state.advance %s : !cs
      scf.yield %s1 : !cs
    }
  }
  gpu.return
}
}

// -----

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>

// Twin: the consumer steps by 2 over twice the producer's range.
gpu.module @k {
gpu.func @half_range_twin(%n: index) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c32 = arith.constant 32 : index
  %p = pipeline.create {name = "ab"} : !P
  %tid = gpu.thread_id x
  %w = arith.divui %tid, %c32 : index
  %is0 = arith.cmpi eq, %w, %c0 : index
  %h = arith.divui %n, %c2 : index
  scf.if %is0 {
    %s0 = pipeline.state.make : !ps
    %sN = scf.for %i = %c0 to %h step %c1 iter_args(%s = %s0) -> (!ps) {
      pipeline.producer.acquire %p, %s : !P, !ps
      pipeline.producer.commit %p, %s : !P, !ps
      %s1 = pipeline.state.advance %s : !ps
      scf.yield %s1 : !ps
    }
    pipeline.producer.tail %p, %sN : !P, !ps
  } else {
    %n2 = arith.muli %h, %c2 : index
    %c = pipeline.state.make : !cs
    %cN = scf.for %i = %c0 to %n2 step %c2 iter_args(%s = %c) -> (!cs) {
      pipeline.consumer.wait %p, %s : !P, !cs
      pipeline.consumer.release %p, %s : !P, !cs
      %s1 = pipeline.state.advance %s : !cs
      scf.yield %s1 : !cs
    }
  }
  gpu.return
}
}

// -----

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>

// Bug: nested loops whose products differ (the consumer's inner loop runs
// over the tiles instead of the k-blocks).
gpu.module @k {
gpu.func @nested_product(%tiles: index, %k: index) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
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
    %sN = scf.for %t = %c0 to %tiles step %c1 iter_args(%st = %s0) -> (!ps) {
      %sK = scf.for %i = %c0 to %k step %c1 iter_args(%s = %st) -> (!ps) {
        pipeline.producer.acquire %p, %s : !P, !ps
          // expected-note @+1 {{the producer commits here}}
        pipeline.producer.commit %p, %s : !P, !ps
        %s1 = pipeline.state.advance %s : !ps
        scf.yield %s1 : !ps
      }
      scf.yield %sK : !ps
    }
    pipeline.producer.tail %p, %sN : !P, !ps
  } else {
    %c = pipeline.state.make : !cs
    %cN = scf.for %t = %c0 to %tiles step %c1 iter_args(%st = %c) -> (!cs) {
      %cK = scf.for %i = %c0 to %tiles step %c1 iter_args(%s = %st) -> (!cs) {
        pipeline.consumer.wait %p, %s : !P, !cs
        // expected-error @+1 {{pipeline 'ab': the producer role (one warp) commits %arg0 * %arg1 stages, the consumer role (one warp) releases %arg0 * %arg0 (for %arg0 = 1, %arg1 = 2: 2 against 1)}}
        pipeline.consumer.release %p, %s : !P, !cs
        %s1 = pipeline.state.advance %s : !cs
        scf.yield %s1 : !cs
      }
      scf.yield %cK : !cs
    }
  }
  gpu.return
}
}

// -----

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>

// Twin: the consumer swaps the loops: the same product.
gpu.module @k {
gpu.func @nested_product_twin(%tiles: index, %k: index) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
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
    %sN = scf.for %t = %c0 to %tiles step %c1 iter_args(%st = %s0) -> (!ps) {
      %sK = scf.for %i = %c0 to %k step %c1 iter_args(%s = %st) -> (!ps) {
        pipeline.producer.acquire %p, %s : !P, !ps
        pipeline.producer.commit %p, %s : !P, !ps
        %s1 = pipeline.state.advance %s : !ps
        scf.yield %s1 : !ps
      }
      scf.yield %sK : !ps
    }
    pipeline.producer.tail %p, %sN : !P, !ps
  } else {
    %c = pipeline.state.make : !cs
    %cN = scf.for %t = %c0 to %k step %c1 iter_args(%st = %c) -> (!cs) {
      %cK = scf.for %i = %c0 to %tiles step %c1 iter_args(%s = %st) -> (!cs) {
        pipeline.consumer.wait %p, %s : !P, !cs
        pipeline.consumer.release %p, %s : !P, !cs
        %s1 = pipeline.state.advance %s : !cs
        scf.yield %s1 : !cs
      }
      scf.yield %cK : !cs
    }
  }
  gpu.return
}
}

// -----

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>

// Bug: the consumer runs only when %flag holds; the producer always runs.
gpu.module @k {
gpu.func @unshared_condition(%n: index, %flag: i1) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
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
    %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
      pipeline.producer.acquire %p, %s : !P, !ps
      // expected-note @+1 {{the producer commits here}}
      pipeline.producer.commit %p, %s : !P, !ps
      %s1 = pipeline.state.advance %s : !ps
      scf.yield %s1 : !ps
    }
    pipeline.producer.tail %p, %sN : !P, !ps
  } else {
    scf.if %flag {
      %c = pipeline.state.make : !cs
      %cN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %c) -> (!cs) {
        pipeline.consumer.wait %p, %s : !P, !cs
        // expected-error @+1 {{pipeline 'ab': the producer role (one warp) commits %arg0 stages, the consumer role (one warp) releases %arg0 * %arg1 (for %arg0 = 3, %arg1 = 0: 3 against 0)}}
        pipeline.consumer.release %p, %s : !P, !cs
        %s1 = pipeline.state.advance %s : !cs
        scf.yield %s1 : !cs
      }
    }
  }
  gpu.return
}
}

// -----

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>

// Twin: the same condition guards both roles (it encloses the role split).
gpu.module @k {
gpu.func @shared_condition(%n: index, %flag: i1) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %p = pipeline.create {name = "ab"} : !P
  %tid = gpu.thread_id x
  %w = arith.divui %tid, %c32 : index
  %is0 = arith.cmpi eq, %w, %c0 : index
  scf.if %flag {
    scf.if %is0 {
      %s0 = pipeline.state.make : !ps
      %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
        pipeline.producer.acquire %p, %s : !P, !ps
        pipeline.producer.commit %p, %s : !P, !ps
        %s1 = pipeline.state.advance %s : !ps
        scf.yield %s1 : !ps
      }
      pipeline.producer.tail %p, %sN : !P, !ps
    } else {
      %c = pipeline.state.make : !cs
      %cN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %c) -> (!cs) {
        pipeline.consumer.wait %p, %s : !P, !cs
        pipeline.consumer.release %p, %s : !P, !cs
        %s1 = pipeline.state.advance %s : !cs
        scf.yield %s1 : !cs
      }
    }
  }
  gpu.return
}
}

// -----

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>

// Twin: each role tests the same condition of the kernel's arguments (computed
// twice: compared by structure).
gpu.module @k {
gpu.func @same_condition_in_each_role(%n: index, %m: index) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c32 = arith.constant 32 : index
  %p = pipeline.create {name = "ab"} : !P
  %tid = gpu.thread_id x
  %w = arith.divui %tid, %c32 : index
  %is0 = arith.cmpi eq, %w, %c0 : index
  scf.if %is0 {
    %big = arith.cmpi sgt, %n, %m : index
    scf.if %big {
      %s0 = pipeline.state.make : !ps
      %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
        pipeline.producer.acquire %p, %s : !P, !ps
        pipeline.producer.commit %p, %s : !P, !ps
        %s1 = pipeline.state.advance %s : !ps
        scf.yield %s1 : !ps
      }
      pipeline.producer.tail %p, %sN : !P, !ps
    }
  } else {
    %big2 = arith.cmpi sgt, %n, %m : index
    scf.if %big2 {
      %c = pipeline.state.make : !cs
      %cN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %c) -> (!cs) {
        pipeline.consumer.wait %p, %s : !P, !cs
        pipeline.consumer.release %p, %s : !P, !cs
        %s1 = pipeline.state.advance %s : !cs
        scf.yield %s1 : !cs
      }
    }
  }
  gpu.return
}
}
