// Check 9, a role that only arrives on a named barrier in a loop while
// another role syncs on it: a bar.arrive does not wait, so unless something
// in the arriving warps' loop body holds them back until the syncing side
// has passed its sync, they arrive twice in one phase and the phase
// completes on one role's arrivals. Held back: a sync on a second named
// barrier the other side arrives on (FA3's ping-pong pair), a wait on a
// stage the other side produces, an acquire of a one-stage ring the other
// side releases. Refused at the arrive otherwise. Each bug next to its twin;
// a chunk without expected-* lines is correct: any diagnostic fails it.
// RUN: pipeline-opt --pipeline-verify-protocol -split-input-file -verify-diagnostics %s

// Bug: warpgroup 0 reads the stage, arrives on barrier 1 and goes on to
// the next stage; warp 4 syncs on barrier 1 and releases. Warpgroup 0's
// wait on the next stage is not held by warp 4 (the ring has two stages
// full), so it arrives twice in one phase of barrier 1.
!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 1>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>
!acc = !llvm.struct<(f32, f32, f32, f32)>

gpu.module @m {
  gpu.func @reader_arrives_only(%n: index, %base: i64, %ring: !llvm.ptr<3>, %desc: !llvm.ptr, %x: i32) kernel attributes {known_block_size = array<i32: 192, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c0i = arith.constant 0 : i32
    %c4 = arith.constant 4 : i32
    %c5 = arith.constant 5 : i32
    %c32 = arith.constant 32 : i32
    %step = arith.constant 8192 : i64
    %p = pipeline.create {name = "tiles"} : !P
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %warp = arith.divui %tid, %c32 : i32
    %lane = arith.remui %tid, %c32 : i32
    %isp = arith.cmpi eq, %warp, %c5 : i32
    scf.if %isp {
      %s0 = pipeline.state.make : !ps
      %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
        pipeline.producer.acquire %p, %s : !P, !ps
        pipeline.producer.commit %p, %s : !P, !ps
        %sn = pipeline.state.advance %s : !ps
        scf.yield %sn : !ps
      }
      pipeline.producer.tail %p, %sN : !P, !ps
    }
    %reader = arith.cmpi ult, %warp, %c4 : i32
    scf.if %reader {
      %acc0 = llvm.mlir.undef : !acc
      %c0s = pipeline.state.make : !cs
      // expected-note @+1 {{the arriving warps' loop}}
      %cN = scf.for %i = %c0 to %n step %c1 iter_args(%c = %c0s) -> (!cs) {
        pipeline.consumer.wait %p, %c : !P, !cs
          %idx = pipeline.state.index %c : !cs
          %idx64 = arith.extui %idx : i32 to i64
          %off = arith.muli %idx64, %step : i64
          %d = arith.addi %base, %off : i64
          nvvm.wgmma.fence.aligned
          %r = nvvm.wgmma.mma_async %d, %d, %acc0, <m = 64, n = 8, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>] : !acc -> !acc
          nvvm.wgmma.commit.group.sync.aligned
          nvvm.wgmma.wait.group.sync.aligned 0
          // expected-error @+1 {{named barrier 1: warps 0-3 arrive on it in each iteration of this loop and never wait there on anything the warps that sync on it (warp 4) signal: an arrive-only role can run ahead a whole phase}}
          pipeline.named_barrier.arrive id = 1, threads = 160 {unaligned}
        %cn = pipeline.state.advance %c : !cs
        scf.yield %cn : !cs
      }
    }
    %releaser = arith.cmpi eq, %warp, %c4 : i32
    scf.if %releaser {
      %c0s = pipeline.state.make : !cs
      %cN = scf.for %i = %c0 to %n step %c1 iter_args(%c = %c0s) -> (!cs) {
          pipeline.consumer.wait %p, %c : !P, !cs
          // expected-note @+1 {{the other side syncs on it here}}
          pipeline.named_barrier.sync id = 1, threads = 160 {unaligned}
          %rel = arith.cmpi eq, %lane, %c0i : i32
          scf.if %rel {
            pipeline.consumer.release %p, %c : !P, !cs
          }
        %cn = pipeline.state.advance %c : !cs
        scf.yield %cn : !cs
      }
    }
    gpu.return
  }
}

// -----

// Twin: the ping-pong pair. Warpgroup 0 arrives on barrier 1 and then
// syncs on barrier 2, which warp 4 arrives on after its release.
!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 1>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>
!acc = !llvm.struct<(f32, f32, f32, f32)>

gpu.module @m {
  gpu.func @reader_arrives_then_syncs_on_a_second_barrier(%n: index, %base: i64, %ring: !llvm.ptr<3>, %desc: !llvm.ptr, %x: i32) kernel attributes {known_block_size = array<i32: 192, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c0i = arith.constant 0 : i32
    %c4 = arith.constant 4 : i32
    %c5 = arith.constant 5 : i32
    %c32 = arith.constant 32 : i32
    %step = arith.constant 8192 : i64
    %p = pipeline.create {name = "tiles"} : !P
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %warp = arith.divui %tid, %c32 : i32
    %lane = arith.remui %tid, %c32 : i32
    %isp = arith.cmpi eq, %warp, %c5 : i32
    scf.if %isp {
      %s0 = pipeline.state.make : !ps
      %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
        pipeline.producer.acquire %p, %s : !P, !ps
        pipeline.producer.commit %p, %s : !P, !ps
        %sn = pipeline.state.advance %s : !ps
        scf.yield %sn : !ps
      }
      pipeline.producer.tail %p, %sN : !P, !ps
    }
    %reader = arith.cmpi ult, %warp, %c4 : i32
    scf.if %reader {
      %acc0 = llvm.mlir.undef : !acc
      %c0s = pipeline.state.make : !cs
      %cN = scf.for %i = %c0 to %n step %c1 iter_args(%c = %c0s) -> (!cs) {
        pipeline.consumer.wait %p, %c : !P, !cs
          %idx = pipeline.state.index %c : !cs
          %idx64 = arith.extui %idx : i32 to i64
          %off = arith.muli %idx64, %step : i64
          %d = arith.addi %base, %off : i64
          nvvm.wgmma.fence.aligned
          %r = nvvm.wgmma.mma_async %d, %d, %acc0, <m = 64, n = 8, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>] : !acc -> !acc
          nvvm.wgmma.commit.group.sync.aligned
          nvvm.wgmma.wait.group.sync.aligned 0
          pipeline.named_barrier.arrive id = 1, threads = 160 {unaligned}
          pipeline.named_barrier.sync id = 2, threads = 160 {unaligned}
        %cn = pipeline.state.advance %c : !cs
        scf.yield %cn : !cs
      }
    }
    %releaser = arith.cmpi eq, %warp, %c4 : i32
    scf.if %releaser {
      %c0s = pipeline.state.make : !cs
      %cN = scf.for %i = %c0 to %n step %c1 iter_args(%c = %c0s) -> (!cs) {
          pipeline.consumer.wait %p, %c : !P, !cs
          pipeline.named_barrier.sync id = 1, threads = 160 {unaligned}
          %rel = arith.cmpi eq, %lane, %c0i : i32
          scf.if %rel {
            pipeline.consumer.release %p, %c : !P, !cs
          }
          pipeline.named_barrier.arrive id = 2, threads = 160 {unaligned}
        %cn = pipeline.state.advance %c : !cs
        scf.yield %cn : !cs
      }
    }
    gpu.return
  }
}

// -----

// Correct: the arriving warp waits in each iteration on a stage the
// syncing warp produces after its sync (the epilogue form: compute warps
// arrive, the load warp syncs and loads the next stage).
!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 1>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>

gpu.module @m {
  gpu.func @consumer_arrives_producer_syncs(%n: index) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c0i = arith.constant 0 : i32
    %c32 = arith.constant 32 : i32
    %p = pipeline.create {name = "tiles"} : !P
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %warp = arith.divui %tid, %c32 : i32
    %lane = arith.remui %tid, %c32 : i32
    %isp = arith.cmpi eq, %warp, %c0i : i32
    scf.if %isp {
      %s0 = pipeline.state.make : !ps
      %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
        pipeline.producer.acquire %p, %s : !P, !ps
        pipeline.producer.commit %p, %s : !P, !ps
        pipeline.named_barrier.sync id = 1, threads = 64 {unaligned}
        %sn = pipeline.state.advance %s : !ps
        scf.yield %sn : !ps
      }
      pipeline.producer.tail %p, %sN : !P, !ps
    } else {
      %c0s = pipeline.state.make : !cs
      %cN = scf.for %i = %c0 to %n step %c1 iter_args(%c = %c0s) -> (!cs) {
        pipeline.consumer.wait %p, %c : !P, !cs
        %rel = arith.cmpi eq, %lane, %c0i : i32
        scf.if %rel {
          pipeline.consumer.release %p, %c : !P, !cs
        }
        pipeline.named_barrier.arrive id = 1, threads = 64 {unaligned}
        %cn = pipeline.state.advance %c : !cs
        scf.yield %cn : !cs
      }
    }
    gpu.return
  }
}

// -----

// Bug: the arriving warp is the producer, held only by the acquire of a
// two-stage ring the syncing warp releases: it runs one stage ahead.
!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 1>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>

gpu.module @m {
  gpu.func @producer_arrives_two_stage_ring(%n: index) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c0i = arith.constant 0 : i32
    %c32 = arith.constant 32 : i32
    %p = pipeline.create {name = "tiles"} : !P
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %warp = arith.divui %tid, %c32 : i32
    %lane = arith.remui %tid, %c32 : i32
    %isp = arith.cmpi eq, %warp, %c0i : i32
    scf.if %isp {
      %s0 = pipeline.state.make : !ps
      // expected-note @+1 {{the arriving warps' loop}}
      %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
        pipeline.producer.acquire %p, %s : !P, !ps
        pipeline.producer.commit %p, %s : !P, !ps
        // expected-error @+1 {{named barrier 1: warp 0 arrive on it in each iteration of this loop and never wait there on anything the warps that sync on it (warp 1) signal: an arrive-only role can run ahead a whole phase}}
        pipeline.named_barrier.arrive id = 1, threads = 64 {unaligned}
        %sn = pipeline.state.advance %s : !ps
        scf.yield %sn : !ps
      }
      pipeline.producer.tail %p, %sN : !P, !ps
    } else {
      %c0s = pipeline.state.make : !cs
      %cN = scf.for %i = %c0 to %n step %c1 iter_args(%c = %c0s) -> (!cs) {
        pipeline.consumer.wait %p, %c : !P, !cs
        // expected-note @+1 {{the other side syncs on it here}}
        pipeline.named_barrier.sync id = 1, threads = 64 {unaligned}
        %rel = arith.cmpi eq, %lane, %c0i : i32
        scf.if %rel {
          pipeline.consumer.release %p, %c : !P, !cs
        }
        %cn = pipeline.state.advance %c : !cs
        scf.yield %cn : !cs
      }
    }
    gpu.return
  }
}

// -----

// Boundary, correct: the same with a one-stage ring: the acquire of
// iteration j waits on the release of iteration j-1, after its sync.
!P = !pipeline.pipeline<async, stages = 1, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 1>>
!ps = !pipeline.state<1, producer>
!cs = !pipeline.state<1, consumer>

gpu.module @m {
  gpu.func @producer_arrives_one_stage_ring(%n: index) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c0i = arith.constant 0 : i32
    %c32 = arith.constant 32 : i32
    %p = pipeline.create {name = "tiles"} : !P
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %warp = arith.divui %tid, %c32 : i32
    %lane = arith.remui %tid, %c32 : i32
    %isp = arith.cmpi eq, %warp, %c0i : i32
    scf.if %isp {
      %s0 = pipeline.state.make : !ps
      %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
        pipeline.producer.acquire %p, %s : !P, !ps
        pipeline.producer.commit %p, %s : !P, !ps
        pipeline.named_barrier.arrive id = 1, threads = 64 {unaligned}
        %sn = pipeline.state.advance %s : !ps
        scf.yield %sn : !ps
      }
      pipeline.producer.tail %p, %sN : !P, !ps
    } else {
      %c0s = pipeline.state.make : !cs
      %cN = scf.for %i = %c0 to %n step %c1 iter_args(%c = %c0s) -> (!cs) {
        pipeline.consumer.wait %p, %c : !P, !cs
        pipeline.named_barrier.sync id = 1, threads = 64 {unaligned}
        %rel = arith.cmpi eq, %lane, %c0i : i32
        scf.if %rel {
          pipeline.consumer.release %p, %c : !P, !cs
        }
        %cn = pipeline.state.advance %c : !cs
        scf.yield %cn : !cs
      }
    }
    gpu.return
  }
}

// -----

// Bug: as producer_arrives_two_stage_ring, the producer warps set by a
// count loaded from constant memory (`warp < %np`), the same for every
// warp: at %np = 1, the only value at which the threads meeting barrier 1
// add up to its 64, warp 0 arrives and runs one stage ahead.
!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 1>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>

gpu.module @m {
  gpu.func @producer_warps_loaded_two_stage_ring(%n: index, %cfg: !llvm.ptr<4>) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c0i = arith.constant 0 : i32
    %c32 = arith.constant 32 : i32
    %p = pipeline.create {name = "tiles"} : !P
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %warp = arith.divui %tid, %c32 : i32
    %lane = arith.remui %tid, %c32 : i32
    // expected-note @+1 {{the warps are set by this value, the same for every warp; taken as 1, at which the threads meeting the barrier add up to its count}}
    %np = llvm.load %cfg : !llvm.ptr<4> -> i32
    %isp = arith.cmpi ult, %warp, %np : i32
    scf.if %isp {
      %s0 = pipeline.state.make : !ps
      // expected-note @+1 {{the arriving warps' loop}}
      %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
        pipeline.producer.acquire %p, %s : !P, !ps
        pipeline.producer.commit %p, %s : !P, !ps
        // expected-error @+1 {{named barrier 1: warp 0 arrive on it in each iteration of this loop and never wait there on anything the warps that sync on it (warp 1) signal: an arrive-only role can run ahead a whole phase}}
        pipeline.named_barrier.arrive id = 1, threads = 64 {unaligned}
        %sn = pipeline.state.advance %s : !ps
        scf.yield %sn : !ps
      }
      pipeline.producer.tail %p, %sN : !P, !ps
    } else {
      %c0s = pipeline.state.make : !cs
      %cN = scf.for %i = %c0 to %n step %c1 iter_args(%c = %c0s) -> (!cs) {
        pipeline.consumer.wait %p, %c : !P, !cs
        // expected-note @+1 {{the other side syncs on it here}}
        pipeline.named_barrier.sync id = 1, threads = 64 {unaligned}
        %rel = arith.cmpi eq, %lane, %c0i : i32
        scf.if %rel {
          pipeline.consumer.release %p, %c : !P, !cs
        }
        %cn = pipeline.state.advance %c : !cs
        scf.yield %cn : !cs
      }
    }
    gpu.return
  }
}

// -----

// Twin: the same count from constant memory with a one-stage ring: held.
!P = !pipeline.pipeline<async, stages = 1, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 1>>
!ps = !pipeline.state<1, producer>
!cs = !pipeline.state<1, consumer>

gpu.module @m {
  gpu.func @producer_warps_loaded_one_stage_ring(%n: index, %cfg: !llvm.ptr<4>) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c0i = arith.constant 0 : i32
    %c32 = arith.constant 32 : i32
    %p = pipeline.create {name = "tiles"} : !P
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %warp = arith.divui %tid, %c32 : i32
    %lane = arith.remui %tid, %c32 : i32
    %np = llvm.load %cfg : !llvm.ptr<4> -> i32
    %isp = arith.cmpi ult, %warp, %np : i32
    scf.if %isp {
      %s0 = pipeline.state.make : !ps
      %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
        pipeline.producer.acquire %p, %s : !P, !ps
        pipeline.producer.commit %p, %s : !P, !ps
        pipeline.named_barrier.arrive id = 1, threads = 64 {unaligned}
        %sn = pipeline.state.advance %s : !ps
        scf.yield %sn : !ps
      }
      pipeline.producer.tail %p, %sN : !P, !ps
    } else {
      %c0s = pipeline.state.make : !cs
      %cN = scf.for %i = %c0 to %n step %c1 iter_args(%c = %c0s) -> (!cs) {
        pipeline.consumer.wait %p, %c : !P, !cs
        pipeline.named_barrier.sync id = 1, threads = 64 {unaligned}
        %rel = arith.cmpi eq, %lane, %c0i : i32
        scf.if %rel {
          pipeline.consumer.release %p, %c : !P, !cs
        }
        %cn = pipeline.state.advance %c : !cs
        scf.yield %cn : !cs
      }
    }
    gpu.return
  }
}

// -----

// Not proven: the count is loaded from a per-thread address (it may differ
// between warps): a warning at the arrive, not silence.
!P = !pipeline.pipeline<async, stages = 1, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 1>>
!ps = !pipeline.state<1, producer>
!cs = !pipeline.state<1, consumer>

gpu.module @m {
  gpu.func @producer_warps_loaded_per_thread(%n: index, %cfg: !llvm.ptr<1>) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c0i = arith.constant 0 : i32
    %c32 = arith.constant 32 : i32
    %p = pipeline.create {name = "tiles"} : !P
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %warp = arith.divui %tid, %c32 : i32
    %lane = arith.remui %tid, %c32 : i32
    %a = llvm.getelementptr %cfg[%tid] : (!llvm.ptr<1>, i32) -> !llvm.ptr<1>, i32
    // expected-note @+1 {{the value that sets them}}
    %np = llvm.load %a : !llvm.ptr<1> -> i32
    %isp = arith.cmpi ult, %warp, %np : i32
    scf.if %isp {
      %s0 = pipeline.state.make : !ps
      // expected-note @+1 {{the arriving warps' loop}}
      %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
        pipeline.producer.acquire %p, %s : !P, !ps
        pipeline.producer.commit %p, %s : !P, !ps
        // expected-warning @+1 {{named barrier 1: the warps that arrive on it in this loop, or those that sync on it, are set by a value that may differ between warps}}
        pipeline.named_barrier.arrive id = 1, threads = 64 {unaligned}
        %sn = pipeline.state.advance %s : !ps
        scf.yield %sn : !ps
      }
      pipeline.producer.tail %p, %sN : !P, !ps
    } else {
      %c0s = pipeline.state.make : !cs
      %cN = scf.for %i = %c0 to %n step %c1 iter_args(%c = %c0s) -> (!cs) {
        pipeline.consumer.wait %p, %c : !P, !cs
        pipeline.named_barrier.sync id = 1, threads = 64 {unaligned}
        %rel = arith.cmpi eq, %lane, %c0i : i32
        scf.if %rel {
          pipeline.consumer.release %p, %c : !P, !cs
        }
        %cn = pipeline.state.advance %c : !cs
        scf.yield %cn : !cs
      }
    }
    gpu.return
  }
}
