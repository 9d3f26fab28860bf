// Check 1 and check 8 across per-role loops whose ranges differ by a peel:
// the role that reads a stage and leaves its release to another role runs
// some iterations before (or after) its loop. The loops are related when
// the peel is explicit before the later loop: the same step and upper
// bound, constant lower bounds k steps apart, and the later loop's role
// meeting the hand-over barrier k more times before it (iteration j of
// each loop then meets the barrier in the same phase; check 8 names the
// stages with that shift). A peel after the loop that ends earlier is
// related the same way: upper bounds k steps apart, that role meeting the
// barrier k more times after its loop, straight-line (its m-th meet there
// is in the generation of the other loop's iteration trips + m), whether
// that role is the reading one or the releasing one (its releases after
// its loop checked against the other loop's last iterations). A peel
// the checker does not follow (a meet before or after the loop inside a
// branch or loop) draws a warning that
// the hand-over is not proven, naming both loops; a peel that is missing
// (the counts of meets do not account for it) is still refused.
// A chunk without expected-* lines is correct: any diagnostic fails it.
// RUN: pipeline-opt --pipeline-verify-protocol -split-input-file -verify-diagnostics %s

// Twin: warpgroup 0 runs iteration 0 before its loop (wait, wgmma retired,
// barrier 1), then loops from 1; warp 4 loops from 0.
!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 1>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>
!acc = !llvm.struct<(f32, f32, f32, f32)>

gpu.module @m {
  gpu.func @front_peel_explicit(%n: index, %base: i64, %ring: !llvm.ptr<3>, %desc: !llvm.ptr, %x: i32) kernel attributes {known_block_size = array<i32: 192, 1, 1>} {
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
      pipeline.consumer.wait %p, %c0s : !P, !cs
      nvvm.wgmma.fence.aligned
      %r0 = nvvm.wgmma.mma_async %base, %base, %acc0, <m = 64, n = 8, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>] : !acc -> !acc
      nvvm.wgmma.commit.group.sync.aligned
      nvvm.wgmma.wait.group.sync.aligned 0
      pipeline.named_barrier.sync id = 1, threads = 160 {unaligned}
      %c1s = pipeline.state.advance %c0s : !cs
      %cN = scf.for %i = %c1 to %n step %c1 iter_args(%c = %c1s) -> (!cs) {
        pipeline.consumer.wait %p, %c : !P, !cs
          %idx = pipeline.state.index %c : !cs
          %idx64 = arith.extui %idx : i32 to i64
          %off = arith.muli %idx64, %step : i64
          %d = arith.addi %base, %off : i64
          nvvm.wgmma.fence.aligned
          %r = nvvm.wgmma.mma_async %d, %d, %acc0, <m = 64, n = 8, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>] : !acc -> !acc
          nvvm.wgmma.commit.group.sync.aligned
          nvvm.wgmma.wait.group.sync.aligned 0
          pipeline.named_barrier.sync id = 1, threads = 160 {unaligned}
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
        %cn = pipeline.state.advance %c : !cs
        scf.yield %cn : !cs
      }
    }
    gpu.return
  }
}

// -----

// Bug: as above with the loop's wgmma retired after barrier 1: warp 4's
// release of the same stage (shifted by the peel) is refused.
!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 1>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>
!acc = !llvm.struct<(f32, f32, f32, f32)>

gpu.module @m {
  gpu.func @front_peel_explicit_wgmma_in_flight(%n: index, %base: i64, %ring: !llvm.ptr<3>, %desc: !llvm.ptr, %x: i32) kernel attributes {known_block_size = array<i32: 192, 1, 1>} {
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
      pipeline.consumer.wait %p, %c0s : !P, !cs
      nvvm.wgmma.fence.aligned
      %r0 = nvvm.wgmma.mma_async %base, %base, %acc0, <m = 64, n = 8, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>] : !acc -> !acc
      nvvm.wgmma.commit.group.sync.aligned
      nvvm.wgmma.wait.group.sync.aligned 0
      pipeline.named_barrier.sync id = 1, threads = 160 {unaligned}
      %c1s = pipeline.state.advance %c0s : !cs
      %cN = scf.for %i = %c1 to %n step %c1 iter_args(%c = %c1s) -> (!cs) {
        pipeline.consumer.wait %p, %c : !P, !cs
          %idx = pipeline.state.index %c : !cs
          %idx64 = arith.extui %idx : i32 to i64
          %off = arith.muli %idx64, %step : i64
          %d = arith.addi %base, %off : i64
          nvvm.wgmma.fence.aligned
          // expected-note @+1 {{the asynchronous read of that stage by the other role}}
          %r = nvvm.wgmma.mma_async %d, %d, %acc0, <m = 64, n = 8, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>] : !acc -> !acc
          nvvm.wgmma.commit.group.sync.aligned
          // expected-note @+1 {{that role's barrier, with the read still in flight}}
          pipeline.named_barrier.sync id = 1, threads = 160 {unaligned}
          nvvm.wgmma.wait.group.sync.aligned 0
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
            // expected-error @+1 {{pipeline.consumer.release by warp 4 hands back a stage of pipeline 'tiles' that another role (warps 0-3) read with nvvm.wgmma.mma_async, still in flight at named barrier 1}}
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

// Twin: warpgroup 0 loops to n - 1 and runs the last iteration after its
// loop (a tail peel: upper bounds one step apart, one more meet of barrier
// 1 after the loop, straight-line), its wgmma retired before the barrier.
!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 1>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>
!acc = !llvm.struct<(f32, f32, f32, f32)>

gpu.module @m {
  gpu.func @back_peel_explicit(%n: index, %base: i64, %ring: !llvm.ptr<3>, %desc: !llvm.ptr, %x: i32) kernel attributes {known_block_size = array<i32: 192, 1, 1>} {
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
      %n1 = arith.subi %n, %c1 : index
      %cN = scf.for %i = %c0 to %n1 step %c1 iter_args(%c = %c0s) -> (!cs) {
        pipeline.consumer.wait %p, %c : !P, !cs
          %idx = pipeline.state.index %c : !cs
          %idx64 = arith.extui %idx : i32 to i64
          %off = arith.muli %idx64, %step : i64
          %d = arith.addi %base, %off : i64
          nvvm.wgmma.fence.aligned
          %r = nvvm.wgmma.mma_async %d, %d, %acc0, <m = 64, n = 8, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>] : !acc -> !acc
          nvvm.wgmma.commit.group.sync.aligned
          nvvm.wgmma.wait.group.sync.aligned 0
          pipeline.named_barrier.sync id = 1, threads = 160 {unaligned}
        %cn = pipeline.state.advance %c : !cs
        scf.yield %cn : !cs
      }
      pipeline.consumer.wait %p, %cN : !P, !cs
      nvvm.wgmma.fence.aligned
      %ti = pipeline.state.index %cN : !cs
      %ti64 = arith.extui %ti : i32 to i64
      %toff = arith.muli %ti64, %step : i64
      %td = arith.addi %base, %toff : i64
      %rl = nvvm.wgmma.mma_async %td, %td, %acc0, <m = 64, n = 8, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>] : !acc -> !acc
      nvvm.wgmma.commit.group.sync.aligned
      nvvm.wgmma.wait.group.sync.aligned 0
      pipeline.named_barrier.sync id = 1, threads = 160 {unaligned}
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
        %cn = pipeline.state.advance %c : !cs
        scf.yield %cn : !cs
      }
    }
    gpu.return
  }
}

// -----

// Bug: as above with the tail's wgmma retired after barrier 1: warp 4's
// last release hands back the stage the tail still reads.
!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 1>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>
!acc = !llvm.struct<(f32, f32, f32, f32)>

gpu.module @m {
  gpu.func @back_peel_wgmma_in_flight(%n: index, %base: i64, %ring: !llvm.ptr<3>, %desc: !llvm.ptr, %x: i32) kernel attributes {known_block_size = array<i32: 192, 1, 1>} {
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
      %n1 = arith.subi %n, %c1 : index
      %cN = scf.for %i = %c0 to %n1 step %c1 iter_args(%c = %c0s) -> (!cs) {
        pipeline.consumer.wait %p, %c : !P, !cs
          %idx = pipeline.state.index %c : !cs
          %idx64 = arith.extui %idx : i32 to i64
          %off = arith.muli %idx64, %step : i64
          %d = arith.addi %base, %off : i64
          nvvm.wgmma.fence.aligned
          %r = nvvm.wgmma.mma_async %d, %d, %acc0, <m = 64, n = 8, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>] : !acc -> !acc
          nvvm.wgmma.commit.group.sync.aligned
          nvvm.wgmma.wait.group.sync.aligned 0
          pipeline.named_barrier.sync id = 1, threads = 160 {unaligned}
        %cn = pipeline.state.advance %c : !cs
        scf.yield %cn : !cs
      }
      pipeline.consumer.wait %p, %cN : !P, !cs
      nvvm.wgmma.fence.aligned
      %ti = pipeline.state.index %cN : !cs
      %ti64 = arith.extui %ti : i32 to i64
      %toff = arith.muli %ti64, %step : i64
      %td = arith.addi %base, %toff : i64
      // expected-note @+1 {{the asynchronous read of that stage by the other role}}
      %rl = nvvm.wgmma.mma_async %td, %td, %acc0, <m = 64, n = 8, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>] : !acc -> !acc
      nvvm.wgmma.commit.group.sync.aligned
      // expected-note @+1 {{that role's barrier, with the read still in flight}}
      pipeline.named_barrier.sync id = 1, threads = 160 {unaligned}
      nvvm.wgmma.wait.group.sync.aligned 0
    }
    %releaser = arith.cmpi eq, %warp, %c4 : i32
    scf.if %releaser {
      %c0s = pipeline.state.make : !cs
      %cN = scf.for %i = %c0 to %n step %c1 iter_args(%c = %c0s) -> (!cs) {
          pipeline.consumer.wait %p, %c : !P, !cs
          pipeline.named_barrier.sync id = 1, threads = 160 {unaligned}
          %rel = arith.cmpi eq, %lane, %c0i : i32
          scf.if %rel {
            // expected-error @+1 {{pipeline.consumer.release by warp 4 hands back a stage of pipeline 'tiles' that another role (warps 0-3) read with nvvm.wgmma.mma_async, still in flight at named barrier 1}}
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

// Not proven: the tail's meet of barrier 1 sits in a loop (of one trip)
// after the loop: not followed, a warning naming both loops.
!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 1>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>
!acc = !llvm.struct<(f32, f32, f32, f32)>

gpu.module @m {
  gpu.func @back_peel_in_branch(%n: index, %base: i64, %ring: !llvm.ptr<3>, %desc: !llvm.ptr, %x: i32) kernel attributes {known_block_size = array<i32: 192, 1, 1>} {
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
      %n1 = arith.subi %n, %c1 : index
      // expected-note @+1 {{in this loop}}
      %cN = scf.for %i = %c0 to %n1 step %c1 iter_args(%c = %c0s) -> (!cs) {
        // expected-warning @+1 {{pipeline 'tiles': this loop's waits are left to another role's loop whose range differs from it by a peel this checker does not follow}}
        pipeline.consumer.wait %p, %c : !P, !cs
          %idx = pipeline.state.index %c : !cs
          %idx64 = arith.extui %idx : i32 to i64
          %off = arith.muli %idx64, %step : i64
          %d = arith.addi %base, %off : i64
          nvvm.wgmma.fence.aligned
          %r = nvvm.wgmma.mma_async %d, %d, %acc0, <m = 64, n = 8, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>] : !acc -> !acc
          nvvm.wgmma.commit.group.sync.aligned
          nvvm.wgmma.wait.group.sync.aligned 0
          pipeline.named_barrier.sync id = 1, threads = 160 {unaligned}
        %cn = pipeline.state.advance %c : !cs
        scf.yield %cn : !cs
      }
      pipeline.consumer.wait %p, %cN : !P, !cs
      nvvm.wgmma.fence.aligned
      %ti = pipeline.state.index %cN : !cs
      %ti64 = arith.extui %ti : i32 to i64
      %toff = arith.muli %ti64, %step : i64
      %td = arith.addi %base, %toff : i64
      %rl = nvvm.wgmma.mma_async %td, %td, %acc0, <m = 64, n = 8, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>] : !acc -> !acc
      nvvm.wgmma.commit.group.sync.aligned
      nvvm.wgmma.wait.group.sync.aligned 0
      scf.for %j = %c0 to %c1 step %c1 {
        pipeline.named_barrier.sync id = 1, threads = 160 {unaligned}
      }
    }
    %releaser = arith.cmpi eq, %warp, %c4 : i32
    scf.if %releaser {
      %c0s = pipeline.state.make : !cs
      // expected-note @+1 {{the other role's loop, which releases them}}
      %cN = scf.for %i = %c0 to %n step %c1 iter_args(%c = %c0s) -> (!cs) {
          pipeline.consumer.wait %p, %c : !P, !cs
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

// Bug: warpgroup 0 loops from 1 with no iteration before its loop: barrier
// 1 and the stages are met once less than warp 4 does; refused as before.
!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 1>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>
!acc = !llvm.struct<(f32, f32, f32, f32)>

gpu.module @m {
  gpu.func @front_peel_missing(%n: index, %base: i64, %ring: !llvm.ptr<3>, %desc: !llvm.ptr, %x: i32) kernel attributes {known_block_size = array<i32: 192, 1, 1>} {
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
      // expected-note @+1 {{in this loop}}
      %cN = scf.for %i = %c1 to %n step %c1 iter_args(%c = %c0s) -> (!cs) {
        // expected-error @+1 {{pipeline 'tiles': loop body waits on 1 stage but releases 0}}
        pipeline.consumer.wait %p, %c : !P, !cs
          %idx = pipeline.state.index %c : !cs
          %idx64 = arith.extui %idx : i32 to i64
          %off = arith.muli %idx64, %step : i64
          %d = arith.addi %base, %off : i64
          nvvm.wgmma.fence.aligned
          %r = nvvm.wgmma.mma_async %d, %d, %acc0, <m = 64, n = 8, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>] : !acc -> !acc
          nvvm.wgmma.commit.group.sync.aligned
          nvvm.wgmma.wait.group.sync.aligned 0
          // expected-note @+1 {{reached by warps 0-3, max(0, %arg0 - 1) times}}
          pipeline.named_barrier.sync id = 1, threads = 160 {unaligned}
        %cn = pipeline.state.advance %c : !cs
        scf.yield %cn : !cs
      }
    }
    %releaser = arith.cmpi eq, %warp, %c4 : i32
    scf.if %releaser {
      %c0s = pipeline.state.make : !cs
      %cN = scf.for %i = %c0 to %n step %c1 iter_args(%c = %c0s) -> (!cs) {
          pipeline.consumer.wait %p, %c : !P, !cs
          // expected-error @+1 {{named barrier id 1 counts 160 threads (warps 0-4); warp 4 only syncs on it, %arg0 times, and each of its syncs needs one arrival of every warp counted, but the warps arrive %arg0 + 4 * max(0, %arg0 - 1) times in all}}
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

// Twin: the releasing role has the tail: warp 4 loops to n - 1 and
// releases the last stage after its loop (one more straight-line meet of
// barrier 1); warpgroup 0 loops to n, its wgmma retired before the
// barrier. The tail's release is checked against the other loop's last
// iteration (before: a warning that the hand-over is not proven).
!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 1>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>
!acc = !llvm.struct<(f32, f32, f32, f32)>

gpu.module @m {
  gpu.func @release_tail_explicit(%n: index, %base: i64, %ring: !llvm.ptr<3>, %desc: !llvm.ptr, %x: i32) kernel attributes {known_block_size = array<i32: 192, 1, 1>} {
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
          pipeline.named_barrier.sync id = 1, threads = 160 {unaligned}
        %cn = pipeline.state.advance %c : !cs
        scf.yield %cn : !cs
      }
    }
    %releaser = arith.cmpi eq, %warp, %c4 : i32
    scf.if %releaser {
      %c0s = pipeline.state.make : !cs
      %n1 = arith.subi %n, %c1 : index
      %cN = scf.for %i = %c0 to %n1 step %c1 iter_args(%c = %c0s) -> (!cs) {
          pipeline.consumer.wait %p, %c : !P, !cs
          pipeline.named_barrier.sync id = 1, threads = 160 {unaligned}
          %rel = arith.cmpi eq, %lane, %c0i : i32
          scf.if %rel {
            pipeline.consumer.release %p, %c : !P, !cs
          }
        %cn = pipeline.state.advance %c : !cs
        scf.yield %cn : !cs
      }
      pipeline.consumer.wait %p, %cN : !P, !cs
      pipeline.named_barrier.sync id = 1, threads = 160 {unaligned}
      %trel = arith.cmpi eq, %lane, %c0i : i32
      scf.if %trel {
        pipeline.consumer.release %p, %cN : !P, !cs
      }
    }
    gpu.return
  }
}

// -----

// Bug: as above with warpgroup 0's wgmma retired after barrier 1: the
// release in warp 4's loop and the one in its tail (the generation of the
// other loop's last iteration) are both refused (the notes, identical,
// are shown once).
!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 1>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>
!acc = !llvm.struct<(f32, f32, f32, f32)>

gpu.module @m {
  gpu.func @release_tail_wgmma_in_flight(%n: index, %base: i64, %ring: !llvm.ptr<3>, %desc: !llvm.ptr, %x: i32) kernel attributes {known_block_size = array<i32: 192, 1, 1>} {
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
          // expected-note @+1 {{the asynchronous read of that stage by the other role}}
          %r = nvvm.wgmma.mma_async %d, %d, %acc0, <m = 64, n = 8, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>] : !acc -> !acc
          nvvm.wgmma.commit.group.sync.aligned
          // expected-note @+1 {{that role's barrier, with the read still in flight}}
          pipeline.named_barrier.sync id = 1, threads = 160 {unaligned}
          nvvm.wgmma.wait.group.sync.aligned 0
        %cn = pipeline.state.advance %c : !cs
        scf.yield %cn : !cs
      }
    }
    %releaser = arith.cmpi eq, %warp, %c4 : i32
    scf.if %releaser {
      %c0s = pipeline.state.make : !cs
      %n1 = arith.subi %n, %c1 : index
      %cN = scf.for %i = %c0 to %n1 step %c1 iter_args(%c = %c0s) -> (!cs) {
          pipeline.consumer.wait %p, %c : !P, !cs
          pipeline.named_barrier.sync id = 1, threads = 160 {unaligned}
          %rel = arith.cmpi eq, %lane, %c0i : i32
          scf.if %rel {
            // expected-error @+1 {{pipeline.consumer.release by warp 4 hands back a stage of pipeline 'tiles' that another role (warps 0-3) read with nvvm.wgmma.mma_async, still in flight at named barrier 1}}
            pipeline.consumer.release %p, %c : !P, !cs
          }
        %cn = pipeline.state.advance %c : !cs
        scf.yield %cn : !cs
      }
      pipeline.consumer.wait %p, %cN : !P, !cs
      pipeline.named_barrier.sync id = 1, threads = 160 {unaligned}
      %trel = arith.cmpi eq, %lane, %c0i : i32
      scf.if %trel {
        // expected-error @+1 {{pipeline.consumer.release by warp 4 hands back a stage of pipeline 'tiles' that another role (warps 0-3) read with nvvm.wgmma.mma_async, still in flight at named barrier 1}}
        pipeline.consumer.release %p, %cN : !P, !cs
      }
    }
    gpu.return
  }
}

// -----

// Boundary: the releasing role's tail meets barrier 1 inside a loop (of
// one trip): not followed; a warning that the hand-over is not proven,
// naming both loops.
!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 1>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>
!acc = !llvm.struct<(f32, f32, f32, f32)>

gpu.module @m {
  gpu.func @release_tail_in_loop(%n: index, %base: i64, %ring: !llvm.ptr<3>, %desc: !llvm.ptr, %x: i32) kernel attributes {known_block_size = array<i32: 192, 1, 1>} {
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
      // expected-note @+1 {{in this loop}}
      %cN = scf.for %i = %c0 to %n step %c1 iter_args(%c = %c0s) -> (!cs) {
        // expected-warning @+1 {{pipeline 'tiles': this loop's waits are left to another role's loop whose range differs from it by a peel this checker does not follow}}
        pipeline.consumer.wait %p, %c : !P, !cs
          %idx = pipeline.state.index %c : !cs
          %idx64 = arith.extui %idx : i32 to i64
          %off = arith.muli %idx64, %step : i64
          %d = arith.addi %base, %off : i64
          nvvm.wgmma.fence.aligned
          %r = nvvm.wgmma.mma_async %d, %d, %acc0, <m = 64, n = 8, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>] : !acc -> !acc
          nvvm.wgmma.commit.group.sync.aligned
          nvvm.wgmma.wait.group.sync.aligned 0
          pipeline.named_barrier.sync id = 1, threads = 160 {unaligned}
        %cn = pipeline.state.advance %c : !cs
        scf.yield %cn : !cs
      }
    }
    %releaser = arith.cmpi eq, %warp, %c4 : i32
    scf.if %releaser {
      %c0s = pipeline.state.make : !cs
      %n1 = arith.subi %n, %c1 : index
      // expected-note @+1 {{the other role's loop, which releases them}}
      %cN = scf.for %i = %c0 to %n1 step %c1 iter_args(%c = %c0s) -> (!cs) {
          pipeline.consumer.wait %p, %c : !P, !cs
          pipeline.named_barrier.sync id = 1, threads = 160 {unaligned}
          %rel = arith.cmpi eq, %lane, %c0i : i32
          scf.if %rel {
            pipeline.consumer.release %p, %c : !P, !cs
          }
        %cn = pipeline.state.advance %c : !cs
        scf.yield %cn : !cs
      }
      pipeline.consumer.wait %p, %cN : !P, !cs
      scf.for %j = %c0 to %c1 step %c1 {
        pipeline.named_barrier.sync id = 1, threads = 160 {unaligned}
      }
      %trel = arith.cmpi eq, %lane, %c0i : i32
      scf.if %trel {
        pipeline.consumer.release %p, %cN : !P, !cs
      }
    }
    gpu.return
  }
}
