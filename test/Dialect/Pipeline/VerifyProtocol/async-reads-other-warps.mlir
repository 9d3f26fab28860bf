// Check 8, a release by another warp of the role: a stage released by fewer
// warps than read it (thread 0 releases for a warpgroup) ends the other
// warps' holds too, so their asynchronous reads of it (wgmma, bulk stores)
// must be retired before the role barrier the release is ordered after.
// Each bug next to its twin, and a kernel just on the other side of the
// rule (each warp releases its own hold).
// RUN: pipeline-opt --pipeline-verify-protocol -split-input-file -verify-diagnostics %s

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 1>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>
!acc = !llvm.struct<(f32, f32, f32, f32)>

// Bug (the simulator's "asynchronous read at another warp's release"):
// warps 0-3 each issue a wgmma on the stage, meet on named barrier 1, and
// thread 0 releases the stage for all of them; each warp retires its wgmma
// only after the barrier, so warps 1-3 may still be reading when thread 0's
// release lets the producer refill the stage.
gpu.module @m {
  gpu.func @wgmma_retired_after_the_barrier(%n: index, %base: i64, %ring: !llvm.ptr<3>, %desc: !llvm.ptr, %x: i32) kernel attributes {known_block_size = array<i32: 160, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c0i = arith.constant 0 : i32
    %c4 = arith.constant 4 : i32
    %c32 = arith.constant 32 : i32
    %step = arith.constant 8192 : i64
    %p = pipeline.create {name = "tiles"} : !P
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %warp = arith.divui %tid, %c32 : i32
    %lane = arith.remui %tid, %c32 : i32
    %isp = arith.cmpi eq, %warp, %c4 : i32
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
    %isc = arith.cmpi ult, %warp, %c4 : i32
    scf.if %isc {
      %acc0 = llvm.mlir.undef : !acc
      %c0s = pipeline.state.make : !cs
      %cN = scf.for %i = %c0 to %n step %c1 iter_args(%c = %c0s) -> (!cs) {
        pipeline.consumer.wait %p, %c : !P, !cs
        %idx = pipeline.state.index %c : !cs
        %idx64 = arith.extui %idx : i32 to i64
        %off = arith.muli %idx64, %step : i64
        %d = arith.addi %base, %off : i64
        nvvm.wgmma.fence.aligned
        // expected-note @+1 {{the asynchronous read of that stage by warps 1-3}}
        %r = nvvm.wgmma.mma_async %d, %d, %acc0, <m = 64, n = 8, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>] : !acc -> !acc
        nvvm.wgmma.commit.group.sync.aligned
        // expected-note @+1 {{the barrier this release is ordered after, with the read still in flight}}
        pipeline.named_barrier.sync id = 1, threads = 128
        nvvm.wgmma.wait.group.sync.aligned 0
        %rel = arith.cmpi eq, %tid, %c0i : i32
        scf.if %rel {
          // expected-error @+1 {{pipeline.consumer.release by warp 0 hands back a stage of pipeline 'tiles' for warps 1-3 too (the release ends their hold), while their nvvm.wgmma.mma_async may still read it asynchronously: it is retired only after the barrier that orders this release after those warps}}
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

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 1>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>
!acc = !llvm.struct<(f32, f32, f32, f32)>

// Twin: each warp retires its wgmma before the barrier.
gpu.module @m {
  gpu.func @wgmma_retired_before_the_barrier(%n: index, %base: i64, %ring: !llvm.ptr<3>, %desc: !llvm.ptr, %x: i32) kernel attributes {known_block_size = array<i32: 160, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c0i = arith.constant 0 : i32
    %c4 = arith.constant 4 : i32
    %c32 = arith.constant 32 : i32
    %step = arith.constant 8192 : i64
    %p = pipeline.create {name = "tiles"} : !P
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %warp = arith.divui %tid, %c32 : i32
    %lane = arith.remui %tid, %c32 : i32
    %isp = arith.cmpi eq, %warp, %c4 : i32
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
    %isc = arith.cmpi ult, %warp, %c4 : i32
    scf.if %isc {
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
        pipeline.named_barrier.sync id = 1, threads = 128
        %rel = arith.cmpi eq, %tid, %c0i : i32
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

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 4>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>
!acc = !llvm.struct<(f32, f32, f32, f32)>

// Boundary: the wgmma retired after the barrier, but each warp releases its
// own hold (lane 0 of each warp, a consumer group of 4): every release is
// ordered after its own warp's wait (check 8's own case), none ends another
// warp's hold.
gpu.module @m {
  gpu.func @wgmma_each_warp_releases(%n: index, %base: i64, %ring: !llvm.ptr<3>, %desc: !llvm.ptr, %x: i32) kernel attributes {known_block_size = array<i32: 160, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c0i = arith.constant 0 : i32
    %c4 = arith.constant 4 : i32
    %c32 = arith.constant 32 : i32
    %step = arith.constant 8192 : i64
    %p = pipeline.create {name = "tiles"} : !P
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %warp = arith.divui %tid, %c32 : i32
    %lane = arith.remui %tid, %c32 : i32
    %isp = arith.cmpi eq, %warp, %c4 : i32
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
    %isc = arith.cmpi ult, %warp, %c4 : i32
    scf.if %isc {
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
        pipeline.named_barrier.sync id = 1, threads = 128
        nvvm.wgmma.wait.group.sync.aligned 0
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

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 1>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>
!acc = !llvm.struct<(f32, f32, f32, f32)>

// Bug: thread 32 (warp 1) bulk-stores the stage out and waits for its
// reads only after the barrier; thread 0 releases the stage for the role.
gpu.module @m {
  gpu.func @bulk_store_retired_after_the_barrier(%n: index, %base: i64, %ring: !llvm.ptr<3>, %desc: !llvm.ptr, %x: i32) kernel attributes {known_block_size = array<i32: 160, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c0i = arith.constant 0 : i32
    %c4 = arith.constant 4 : i32
    %c32 = arith.constant 32 : i32
    %step = arith.constant 8192 : i64
    %p = pipeline.create {name = "tiles"} : !P
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %warp = arith.divui %tid, %c32 : i32
    %lane = arith.remui %tid, %c32 : i32
    %isp = arith.cmpi eq, %warp, %c4 : i32
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
    %isc = arith.cmpi ult, %warp, %c4 : i32
    scf.if %isc {
      %acc0 = llvm.mlir.undef : !acc
      %c0s = pipeline.state.make : !cs
      %cN = scf.for %i = %c0 to %n step %c1 iter_args(%c = %c0s) -> (!cs) {
        pipeline.consumer.wait %p, %c : !P, !cs
        %idx = pipeline.state.index %c : !cs
        %src = llvm.getelementptr %ring[%idx] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, !llvm.array<8192 x i8>
        %storer = arith.constant 32 : i32
        %store = arith.cmpi eq, %tid, %storer : i32
        scf.if %store {
          // expected-note @+1 {{the asynchronous read of that stage by warp 1}}
          pipeline.copy.tma_store %desc[%x, %x] from %src : !llvm.ptr, !llvm.ptr<3>
          pipeline.bulk_group.commit
        }
        // expected-note @+1 {{the barrier this release is ordered after, with the read still in flight}}
        pipeline.named_barrier.sync id = 1, threads = 128
        scf.if %store {
          pipeline.bulk_group.wait {read}
        }
        %rel = arith.cmpi eq, %tid, %c0i : i32
        scf.if %rel {
          // expected-error @+1 {{pipeline.consumer.release by warp 0 hands back a stage of pipeline 'tiles' for warp 1 too (the release ends their hold), while their pipeline.copy.tma_store may still read it asynchronously: it is retired only after the barrier that orders this release after those warps (rule: a stage's reads by every warp whose hold a release ends are retired before the point the release is ordered after); retire it in its own warp before that barrier (cp.async.bulk.wait_group.read, pipeline.bulk_group.wait {read})}}
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

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 1>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>
!acc = !llvm.struct<(f32, f32, f32, f32)>

// Twin: the storing thread waits for the store's reads before the barrier.
gpu.module @m {
  gpu.func @bulk_store_retired_before_the_barrier(%n: index, %base: i64, %ring: !llvm.ptr<3>, %desc: !llvm.ptr, %x: i32) kernel attributes {known_block_size = array<i32: 160, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c0i = arith.constant 0 : i32
    %c4 = arith.constant 4 : i32
    %c32 = arith.constant 32 : i32
    %step = arith.constant 8192 : i64
    %p = pipeline.create {name = "tiles"} : !P
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %warp = arith.divui %tid, %c32 : i32
    %lane = arith.remui %tid, %c32 : i32
    %isp = arith.cmpi eq, %warp, %c4 : i32
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
    %isc = arith.cmpi ult, %warp, %c4 : i32
    scf.if %isc {
      %acc0 = llvm.mlir.undef : !acc
      %c0s = pipeline.state.make : !cs
      %cN = scf.for %i = %c0 to %n step %c1 iter_args(%c = %c0s) -> (!cs) {
        pipeline.consumer.wait %p, %c : !P, !cs
        %idx = pipeline.state.index %c : !cs
        %src = llvm.getelementptr %ring[%idx] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, !llvm.array<8192 x i8>
        %storer = arith.constant 32 : i32
        %store = arith.cmpi eq, %tid, %storer : i32
        scf.if %store {
          pipeline.copy.tma_store %desc[%x, %x] from %src : !llvm.ptr, !llvm.ptr<3>
          pipeline.bulk_group.commit
          pipeline.bulk_group.wait {read}
        }
        pipeline.named_barrier.sync id = 1, threads = 128
        %rel = arith.cmpi eq, %tid, %c0i : i32
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
