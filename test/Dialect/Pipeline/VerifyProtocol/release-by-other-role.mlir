// Check 1 and check 8, a release left to another role: one role waits on a
// stage and reads it asynchronously (wgmma, a TMA store), meets another
// role on a named barrier, and that role releases the stage (an FA3-style
// hand-off: the producer warpgroup's warp releases, or a consumer leaves
// its release to another role after a named barrier), as branches of one
// role split inside the loop or with a loop per role over the same range.
// Check 1 counts the pair once when the second role releases the stages
// the first waited on after a barrier both meet (id and thread count the
// same, the count both roles' threads); check 8 refuses the release when
// the first role's read of the stage was still in flight at that barrier.
// Each bug next to its twin; a chunk without expected-* lines is correct:
// any diagnostic fails it.
// RUN: pipeline-opt --pipeline-verify-protocol -split-input-file -verify-diagnostics %s

// Bug: warpgroup 0 waits on the stage, issues a wgmma on it, syncs on
// named barrier 1 (unaligned: the roles sync at their own sites) and
// retires the wgmma only after; warp 4 waits on the
// same stage, syncs on barrier 1 and releases it for both roles, with the
// wgmma maybe still reading.
!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 1>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>
!acc = !llvm.struct<(f32, f32, f32, f32)>

gpu.module @m {
  gpu.func @wgmma_retired_after_the_barrier(%n: index, %base: i64, %ring: !llvm.ptr<3>, %desc: !llvm.ptr, %x: i32) kernel attributes {known_block_size = array<i32: 192, 1, 1>} {
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
    } else {
      %acc0 = llvm.mlir.undef : !acc
      %reader = arith.cmpi ult, %warp, %c4 : i32
      %c0s = pipeline.state.make : !cs
      %cN = scf.for %i = %c0 to %n step %c1 iter_args(%c = %c0s) -> (!cs) {
        scf.if %reader {
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
        } else {
          pipeline.consumer.wait %p, %c : !P, !cs
          pipeline.named_barrier.sync id = 1, threads = 160 {unaligned}
          %rel = arith.cmpi eq, %lane, %c0i : i32
          scf.if %rel {
            // expected-error @+1 {{pipeline.consumer.release by warp 4 hands back a stage of pipeline 'tiles' that another role (warps 0-3) read with nvvm.wgmma.mma_async, still in flight at named barrier 1 that orders this release after that role: the producer may refill the stage while it is read}}
            pipeline.consumer.release %p, %c : !P, !cs
          }
        }
        %cn = pipeline.state.advance %c : !cs
        scf.yield %cn : !cs
      }
    }
    gpu.return
  }
}

// -----

// Twin: the wgmma retired before the barrier. Check 1 counts the hand-over
// once (both roles wait, warp 4 releases after the barrier both meet).
!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 1>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>
!acc = !llvm.struct<(f32, f32, f32, f32)>

gpu.module @m {
  gpu.func @wgmma_retired_before_the_barrier(%n: index, %base: i64, %ring: !llvm.ptr<3>, %desc: !llvm.ptr, %x: i32) kernel attributes {known_block_size = array<i32: 192, 1, 1>} {
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
    } else {
      %acc0 = llvm.mlir.undef : !acc
      %reader = arith.cmpi ult, %warp, %c4 : i32
      %c0s = pipeline.state.make : !cs
      %cN = scf.for %i = %c0 to %n step %c1 iter_args(%c = %c0s) -> (!cs) {
        scf.if %reader {
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
        } else {
          pipeline.consumer.wait %p, %c : !P, !cs
          pipeline.named_barrier.sync id = 1, threads = 160 {unaligned}
          %rel = arith.cmpi eq, %lane, %c0i : i32
          scf.if %rel {
            pipeline.consumer.release %p, %c : !P, !cs
          }
        }
        %cn = pipeline.state.advance %c : !cs
        scf.yield %cn : !cs
      }
    }
    gpu.return
  }
}

// -----

// Bug: the releasing role does not wait on the stage itself (the barrier
// alone orders it after warpgroup 0's wait). Its twin with the wgmma
// retired is the one above: the simulator counts a release by a warp that
// never waited on the stage as unbalanced, so the releasing role waits.
!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 1>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>
!acc = !llvm.struct<(f32, f32, f32, f32)>

gpu.module @m {
  gpu.func @releaser_without_wait_wgmma_in_flight(%n: index, %base: i64, %ring: !llvm.ptr<3>, %desc: !llvm.ptr, %x: i32) kernel attributes {known_block_size = array<i32: 192, 1, 1>} {
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
    } else {
      %acc0 = llvm.mlir.undef : !acc
      %reader = arith.cmpi ult, %warp, %c4 : i32
      %c0s = pipeline.state.make : !cs
      %cN = scf.for %i = %c0 to %n step %c1 iter_args(%c = %c0s) -> (!cs) {
        scf.if %reader {
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
        } else {
          pipeline.named_barrier.sync id = 1, threads = 160 {unaligned}
          %rel = arith.cmpi eq, %lane, %c0i : i32
          scf.if %rel {
            // expected-error @+1 {{pipeline.consumer.release by warp 4 hands back a stage of pipeline 'tiles' that another role (warps 0-3) read with nvvm.wgmma.mma_async, still in flight at named barrier 1 that orders this release after that role: the producer may refill the stage while it is read}}
            pipeline.consumer.release %p, %c : !P, !cs
          }
        }
        %cn = pipeline.state.advance %c : !cs
        scf.yield %cn : !cs
      }
    }
    gpu.return
  }
}

// -----

// Bug: thread 0 stores the stage out with a TMA store and the role meets
// the barrier with the store's reads in flight; warp 4 releases after the barrier.
!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 1>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>
!acc = !llvm.struct<(f32, f32, f32, f32)>

gpu.module @m {
  gpu.func @tma_store_unwaited_before_the_barrier(%n: index, %base: i64, %ring: !llvm.ptr<3>, %desc: !llvm.ptr, %x: i32) kernel attributes {known_block_size = array<i32: 192, 1, 1>} {
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
    } else {
      %acc0 = llvm.mlir.undef : !acc
      %reader = arith.cmpi ult, %warp, %c4 : i32
      %c0s = pipeline.state.make : !cs
      %cN = scf.for %i = %c0 to %n step %c1 iter_args(%c = %c0s) -> (!cs) {
        scf.if %reader {
          pipeline.consumer.wait %p, %c : !P, !cs
          %idx = pipeline.state.index %c : !cs
          %src = llvm.getelementptr %ring[%idx] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, !llvm.array<8192 x i8>
          %store = arith.cmpi eq, %tid, %c0i : i32
          scf.if %store {
            // expected-note @+1 {{the asynchronous read of that stage by the other role}}
            pipeline.copy.tma_store %desc[%x, %x] from %src : !llvm.ptr, !llvm.ptr<3>
            pipeline.bulk_group.commit
          }
          // expected-note @+1 {{that role's barrier, with the read still in flight}}
          pipeline.named_barrier.sync id = 1, threads = 160 {unaligned}
        } else {
          pipeline.consumer.wait %p, %c : !P, !cs
          pipeline.named_barrier.sync id = 1, threads = 160 {unaligned}
          %rel = arith.cmpi eq, %lane, %c0i : i32
          scf.if %rel {
            // expected-error @+1 {{pipeline.consumer.release by warp 4 hands back a stage of pipeline 'tiles' that another role (warp 0) read with pipeline.copy.tma_store, still in flight at named barrier 1}}
            pipeline.consumer.release %p, %c : !P, !cs
          }
        }
        %cn = pipeline.state.advance %c : !cs
        scf.yield %cn : !cs
      }
    }
    gpu.return
  }
}

// -----

// Twin: the store's reads waited for (bulk wait_group.read 0) before the
// barrier.
!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 1>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>
!acc = !llvm.struct<(f32, f32, f32, f32)>

gpu.module @m {
  gpu.func @tma_store_waited_before_the_barrier(%n: index, %base: i64, %ring: !llvm.ptr<3>, %desc: !llvm.ptr, %x: i32) kernel attributes {known_block_size = array<i32: 192, 1, 1>} {
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
    } else {
      %acc0 = llvm.mlir.undef : !acc
      %reader = arith.cmpi ult, %warp, %c4 : i32
      %c0s = pipeline.state.make : !cs
      %cN = scf.for %i = %c0 to %n step %c1 iter_args(%c = %c0s) -> (!cs) {
        scf.if %reader {
          pipeline.consumer.wait %p, %c : !P, !cs
          %idx = pipeline.state.index %c : !cs
          %src = llvm.getelementptr %ring[%idx] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, !llvm.array<8192 x i8>
          %store = arith.cmpi eq, %tid, %c0i : i32
          scf.if %store {
            pipeline.copy.tma_store %desc[%x, %x] from %src : !llvm.ptr, !llvm.ptr<3>
            pipeline.bulk_group.commit
            pipeline.bulk_group.wait {read}
          }
          pipeline.named_barrier.sync id = 1, threads = 160 {unaligned}
        } else {
          pipeline.consumer.wait %p, %c : !P, !cs
          pipeline.named_barrier.sync id = 1, threads = 160 {unaligned}
          %rel = arith.cmpi eq, %lane, %c0i : i32
          scf.if %rel {
            pipeline.consumer.release %p, %c : !P, !cs
          }
        }
        %cn = pipeline.state.advance %c : !cs
        scf.yield %cn : !cs
      }
    }
    gpu.return
  }
}

// -----

// Boundary (check 1): the same two roles with no barrier between them:
// nothing orders warp 4's release after warpgroup 0's reads, so the
// hand-over is not taken and the loop still waits on 2 stages for 1
// release.
!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 1>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>
!acc = !llvm.struct<(f32, f32, f32, f32)>

gpu.module @m {
  gpu.func @hand_over_without_a_barrier(%n: index, %base: i64, %ring: !llvm.ptr<3>, %desc: !llvm.ptr, %x: i32) kernel attributes {known_block_size = array<i32: 192, 1, 1>} {
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
    } else {
      %acc0 = llvm.mlir.undef : !acc
      %reader = arith.cmpi ult, %warp, %c4 : i32
      %c0s = pipeline.state.make : !cs
      // expected-note @+1 {{in this loop}}
      %cN = scf.for %i = %c0 to %n step %c1 iter_args(%c = %c0s) -> (!cs) {
        scf.if %reader {
          pipeline.consumer.wait %p, %c : !P, !cs
          %idx = pipeline.state.index %c : !cs
          %idx64 = arith.extui %idx : i32 to i64
          %off = arith.muli %idx64, %step : i64
          %d = arith.addi %base, %off : i64
          nvvm.wgmma.fence.aligned
          %r = nvvm.wgmma.mma_async %d, %d, %acc0, <m = 64, n = 8, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>] : !acc -> !acc
          nvvm.wgmma.commit.group.sync.aligned
          nvvm.wgmma.wait.group.sync.aligned 0
        } else {
          // expected-error @+1 {{pipeline 'tiles': loop body waits on 2 stages but releases 1}}
          pipeline.consumer.wait %p, %c : !P, !cs
          %rel = arith.cmpi eq, %lane, %c0i : i32
          scf.if %rel {
            // expected-note @+1 {{pipeline.consumer.release here}}
            pipeline.consumer.release %p, %c : !P, !cs
          }
        }
        %cn = pipeline.state.advance %c : !cs
        scf.yield %cn : !cs
      }
    }
    gpu.return
  }
}

// -----

// Bug, the roles with a loop each over the same range (the usual
// warp-specialized form): warpgroup 0 retires its wgmma after the barrier,
// warp 4 waits on the stage, syncs and releases it.
!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 1>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>
!acc = !llvm.struct<(f32, f32, f32, f32)>

gpu.module @m {
  gpu.func @own_loops_wgmma_retired_after_the_barrier(%n: index, %base: i64, %ring: !llvm.ptr<3>, %desc: !llvm.ptr, %x: i32) kernel attributes {known_block_size = array<i32: 192, 1, 1>} {
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
      %cN = scf.for %i = %c0 to %n step %c1 iter_args(%c = %c0s) -> (!cs) {
          pipeline.consumer.wait %p, %c : !P, !cs
          pipeline.named_barrier.sync id = 1, threads = 160 {unaligned}
          %rel = arith.cmpi eq, %lane, %c0i : i32
          scf.if %rel {
            // expected-error @+1 {{pipeline.consumer.release by warp 4 hands back a stage of pipeline 'tiles' that another role (warps 0-3) read with nvvm.wgmma.mma_async, still in flight at named barrier 1 that orders this release after that role: the producer may refill the stage while it is read}}
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

// Twin: the wgmma retired before the barrier. Check 1 does not report
// warpgroup 0's loop (it waits and leaves the release to warp 4's loop over
// the same range, ordered by barrier 1 in each iteration).
!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 1>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>
!acc = !llvm.struct<(f32, f32, f32, f32)>

gpu.module @m {
  gpu.func @own_loops_wgmma_retired_before_the_barrier(%n: index, %base: i64, %ring: !llvm.ptr<3>, %desc: !llvm.ptr, %x: i32) kernel attributes {known_block_size = array<i32: 192, 1, 1>} {
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

// Bug: as above, warp 4 releasing without waiting on the stage.
!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 1>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>
!acc = !llvm.struct<(f32, f32, f32, f32)>

gpu.module @m {
  gpu.func @own_loops_releaser_without_wait(%n: index, %base: i64, %ring: !llvm.ptr<3>, %desc: !llvm.ptr, %x: i32) kernel attributes {known_block_size = array<i32: 192, 1, 1>} {
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
      %cN = scf.for %i = %c0 to %n step %c1 iter_args(%c = %c0s) -> (!cs) {
          pipeline.named_barrier.sync id = 1, threads = 160 {unaligned}
          %rel = arith.cmpi eq, %lane, %c0i : i32
          scf.if %rel {
            // expected-error @+1 {{pipeline.consumer.release by warp 4 hands back a stage of pipeline 'tiles' that another role (warps 0-3) read with nvvm.wgmma.mma_async, still in flight at named barrier 1 that orders this release after that role: the producer may refill the stage while it is read}}
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

// Boundary (check 1): the same loops with no barrier between the roles:
// warpgroup 0's loop waits and nothing orders warp 4's release after it.
!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 1>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>
!acc = !llvm.struct<(f32, f32, f32, f32)>

gpu.module @m {
  gpu.func @own_loops_without_a_barrier(%n: index, %base: i64, %ring: !llvm.ptr<3>, %desc: !llvm.ptr, %x: i32) kernel attributes {known_block_size = array<i32: 192, 1, 1>} {
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
        %cn = pipeline.state.advance %c : !cs
        scf.yield %cn : !cs
      }
    }
    %releaser = arith.cmpi eq, %warp, %c4 : i32
    scf.if %releaser {
      %c0s = pipeline.state.make : !cs
      %cN = scf.for %i = %c0 to %n step %c1 iter_args(%c = %c0s) -> (!cs) {
          pipeline.consumer.wait %p, %c : !P, !cs
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
