// Messages name a kernel's arguments as the kernel was written: the Python
// Kernel records each parameter's name in the gpu.func's arg_attrs
// (`{pipeline.name = "k_tiles"}`), and the checker's counts read
// "k_tiles - 1" rather than "%arg0 - 1". Arguments
// without a name keep "%argN".
// RUN: pipeline-opt --pipeline-verify-protocol -split-input-file -verify-diagnostics %s
!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>

// The consumer loop stops one stage early; the bound is named.
gpu.module @k {
gpu.func @named(%n: index {pipeline.name = "k_tiles"}) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
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
      // expected-error @+1 {{pipeline 'ab': the producer role (one warp) commits k_tiles stages, the consumer role (one warp) releases k_tiles - 1 (for k_tiles = 1: 1 against 0)}}
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

// Two arguments, the second unnamed: each is printed its own way.
gpu.module @k {
gpu.func @partly_named(%n: index {pipeline.name = "k_tiles"}, %flag: i32) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %z = arith.constant 0 : i32
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
    %on = arith.cmpi ne, %flag, %z : i32
    scf.if %on {
      %c = pipeline.state.make : !cs
      %cN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %c) -> (!cs) {
        pipeline.consumer.wait %p, %s : !P, !cs
        // expected-error @+1 {{releases [%arg1 ne 0] * k_tiles (for %arg1 = 0, k_tiles = 1: 1 against 0)}}
        pipeline.consumer.release %p, %s : !P, !cs
        %s1 = pipeline.state.advance %s : !cs
        scf.yield %s1 : !cs
      }
    }
  }
  gpu.return
}
}
