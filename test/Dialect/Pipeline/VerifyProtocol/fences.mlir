// Tensor-core fences: wgmma.fence before a warp's first wgmma.mma_async,
// tcgen05.wait::ld before a tcgen05.ld's registers are read, and
// fence_before / CTA barrier / fence_after between other warps' tcgen05 ops
// and the tcgen05.dealloc at the end of the kernel. Each bug has its twin.
// RUN: pipeline-opt --pipeline-verify-protocol -split-input-file -verify-diagnostics %s

!acc = !llvm.struct<(f32, f32, f32, f32)>
!P = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 4>, tx_count = 1024>

// No wgmma.fence before the warpgroup's first MMA.
gpu.module @m {
  gpu.func @wgmma_without_fence(%a: i64, %b: i64, %acc0: !acc) kernel attributes {known_block_size = array<i32: 128, 1, 1>} {
    %p = pipeline.create : !P
    // expected-error @+1 {{wgmma fence: this wgmma.mma_async may be the first of warps 0-3 with no wgmma.fence before it on some path: the tensor cores may read the accumulator and A registers before the warps' earlier writes to them land (call wgmma.fence() -- warpgroup_arrive -- before the warpgroup's first MMA)}}
    %d = nvvm.wgmma.mma_async %a, %b, %acc0, <m = 64, n = 8, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>] : !acc -> !acc
    nvvm.wgmma.commit.group.sync.aligned
    nvvm.wgmma.wait.group.sync.aligned 0
    gpu.return
  }
}

// -----

!acc = !llvm.struct<(f32, f32, f32, f32)>
!P = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 4>, tx_count = 1024>

// The twin: the fence comes first; later MMAs of the loop need no other.
gpu.module @m {
  gpu.func @wgmma_with_fence(%a: i64, %b: i64, %acc0: !acc, %n: i32) kernel attributes {known_block_size = array<i32: 128, 1, 1>} {
    %p = pipeline.create : !P
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    nvvm.wgmma.fence.aligned
    %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %acc0) -> (!acc) : i32 {
      %d = nvvm.wgmma.mma_async %a, %b, %acc, <m = 64, n = 8, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>] : !acc -> !acc
      nvvm.wgmma.commit.group.sync.aligned
      nvvm.wgmma.wait.group.sync.aligned 0
      scf.yield %d : !acc
    }
    gpu.return
  }
}

// -----

!P = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 4>, tx_count = 1024>

// tcgen05.ld's registers read before tcgen05.wait::ld.
gpu.module @m {
  gpu.func @read_before_wait(%t: !llvm.ptr<6>, %out: !llvm.ptr<3>) kernel attributes {known_block_size = array<i32: 128, 1, 1>} {
    %p = pipeline.create : !P
    // expected-note @+1 {{the tcgen05.ld}}
    %v = nvvm.tcgen05.ld %t {shape = #nvvm.tcgen05_ldst_shape<shape_32x32b>} : vector<4xi32>
    %c0 = arith.constant 0 : i32
    %x = llvm.extractelement %v[%c0 : i32] : vector<4xi32>
    // expected-error @+1 {{tcgen05 wait: this op reads the registers of a tcgen05.ld with no tcgen05.wait::ld in between: the load is asynchronous and the registers may not hold the tensor memory's data yet (call tcgen05.wait_load() after load_32x32b(), before using its result)}}
    llvm.store %x, %out : i32, !llvm.ptr<3>
    nvvm.tcgen05.wait <load>
    gpu.return
  }
}

// -----

!P = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 4>, tx_count = 1024>

// The twin: the extract (a view) may come before the wait; the store after.
gpu.module @m {
  gpu.func @read_after_wait(%t: !llvm.ptr<6>, %out: !llvm.ptr<3>) kernel attributes {known_block_size = array<i32: 128, 1, 1>} {
    %p = pipeline.create : !P
    %v = nvvm.tcgen05.ld %t {shape = #nvvm.tcgen05_ldst_shape<shape_32x32b>} : vector<4xi32>
    %c0 = arith.constant 0 : i32
    %x = llvm.extractelement %v[%c0 : i32] : vector<4xi32>
    nvvm.tcgen05.wait <load>
    llvm.store %x, %out : i32, !llvm.ptr<3>
    gpu.return
  }
}

// -----

!P = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 4>, tx_count = 1024>

// Warps 0-3 read TMEM; warp 4 frees it with no barrier in between.
gpu.module @m {
  gpu.func @dealloc_without_barrier(%t: !llvm.ptr<6>, %out: !llvm.ptr<3>) kernel attributes {known_block_size = array<i32: 160, 1, 1>} {
    %p = pipeline.create : !P
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %c32 = arith.constant 32 : i32
    %c4 = arith.constant 4 : i32
    %c512 = arith.constant 512 : i32
    %warp = arith.divui %tid, %c32 : i32
    %epi = arith.cmpi slt, %warp, %c4 : i32
    scf.if %epi {
      // expected-note @+1 {{a tcgen05 op of another warp}}
      %v = nvvm.tcgen05.ld %t {shape = #nvvm.tcgen05_ldst_shape<shape_32x32b>} : vector<4xi32>
      nvvm.tcgen05.wait <load>
      %c0 = arith.constant 0 : i32
      %x = llvm.extractelement %v[%c0 : i32] : vector<4xi32>
      llvm.store %x, %out : i32, !llvm.ptr<3>
      nvvm.tcgen05.fence <before>
    }
    %mma = arith.cmpi eq, %warp, %c4 : i32
    scf.if %mma {
      nvvm.tcgen05.fence <after>
      // expected-error @+1 {{TMEM dealloc: this tcgen05.dealloc frees tensor memory that other warps' tcgen05 ops use, with no CTA barrier between them}}
      nvvm.tcgen05.dealloc %t, %c512 : !llvm.ptr<6>, i32
    }
    gpu.return
  }
}

// -----

!P = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 4>, tx_count = 1024>

// The barrier is there, the fences around it are not.
gpu.module @m {
  gpu.func @dealloc_without_fences(%t: !llvm.ptr<6>, %out: !llvm.ptr<3>) kernel attributes {known_block_size = array<i32: 160, 1, 1>} {
    %p = pipeline.create : !P
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %c32 = arith.constant 32 : i32
    %c4 = arith.constant 4 : i32
    %c512 = arith.constant 512 : i32
    %warp = arith.divui %tid, %c32 : i32
    %epi = arith.cmpi slt, %warp, %c4 : i32
    scf.if %epi {
      // expected-note @+1 {{a tcgen05 op of another warp}}
      %v = nvvm.tcgen05.ld %t {shape = #nvvm.tcgen05_ldst_shape<shape_32x32b>} : vector<4xi32>
      nvvm.tcgen05.wait <load>
      %c0 = arith.constant 0 : i32
      %x = llvm.extractelement %v[%c0 : i32] : vector<4xi32>
      llvm.store %x, %out : i32, !llvm.ptr<3>
    }
    nvvm.barrier0
    %mma = arith.cmpi eq, %warp, %c4 : i32
    scf.if %mma {
      // expected-error @+1 {{tcgen05 fence: the CTA barrier orders this tcgen05.dealloc after other warps' tcgen05 ops, but no tcgen05.fence::before_thread_sync follows those ops before it}}
      nvvm.tcgen05.dealloc %t, %c512 : !llvm.ptr<6>, i32
    }
    gpu.return
  }
}

// -----

!P = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 4>, tx_count = 1024>

// fence_before and the barrier, no fence_after.
gpu.module @m {
  gpu.func @dealloc_without_fence_after(%t: !llvm.ptr<6>, %out: !llvm.ptr<3>) kernel attributes {known_block_size = array<i32: 160, 1, 1>} {
    %p = pipeline.create : !P
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %c32 = arith.constant 32 : i32
    %c4 = arith.constant 4 : i32
    %c512 = arith.constant 512 : i32
    %warp = arith.divui %tid, %c32 : i32
    %epi = arith.cmpi slt, %warp, %c4 : i32
    scf.if %epi {
      %v = nvvm.tcgen05.ld %t {shape = #nvvm.tcgen05_ldst_shape<shape_32x32b>} : vector<4xi32>
      nvvm.tcgen05.wait <load>
      %c0 = arith.constant 0 : i32
      %x = llvm.extractelement %v[%c0 : i32] : vector<4xi32>
      llvm.store %x, %out : i32, !llvm.ptr<3>
    }
    nvvm.tcgen05.fence <before>
    nvvm.barrier0
    %mma = arith.cmpi eq, %warp, %c4 : i32
    scf.if %mma {
      // expected-error @+1 {{tcgen05 fence: no tcgen05.fence::after_thread_sync between the CTA barrier that orders other warps' tcgen05 ops and this tcgen05.dealloc (call tcgen05.fence_after_thread_sync() after the barrier, before tmem.dealloc())}}
      nvvm.tcgen05.dealloc %t, %c512 : !llvm.ptr<6>, i32
    }
    gpu.return
  }
}

// -----

!P = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 4>, tx_count = 1024>

// The twin: fence_before, barrier, fence_after, dealloc (the Blackwell
// GEMM's end).
gpu.module @m {
  gpu.func @dealloc_correct(%t: !llvm.ptr<6>, %out: !llvm.ptr<3>) kernel attributes {known_block_size = array<i32: 160, 1, 1>} {
    %p = pipeline.create : !P
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %c32 = arith.constant 32 : i32
    %c4 = arith.constant 4 : i32
    %c512 = arith.constant 512 : i32
    %warp = arith.divui %tid, %c32 : i32
    %epi = arith.cmpi slt, %warp, %c4 : i32
    scf.if %epi {
      %v = nvvm.tcgen05.ld %t {shape = #nvvm.tcgen05_ldst_shape<shape_32x32b>} : vector<4xi32>
      nvvm.tcgen05.wait <load>
      %c0 = arith.constant 0 : i32
      %x = llvm.extractelement %v[%c0 : i32] : vector<4xi32>
      llvm.store %x, %out : i32, !llvm.ptr<3>
    }
    nvvm.tcgen05.fence <before>
    nvvm.barrier0
    %mma = arith.cmpi eq, %warp, %c4 : i32
    scf.if %mma {
      nvvm.tcgen05.fence <after>
      nvvm.tcgen05.dealloc %t, %c512 : !llvm.ptr<6>, i32
    }
    gpu.return
  }
}

// -----

!C = !pipeline.pipeline<clc_fetch_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 32>, tx_count = 16>
!cs = !pipeline.state<2, consumer>

// A CLC response read with an ordinary load and released with no proxy
// fence: the next try_cancel (async proxy) may overwrite it first.
func.func @clc_release_without_fence(%resp: !llvm.ptr<3>, %out: !llvm.ptr<3>) {
  %p = pipeline.create {name = "clc"} : !C
  %s = pipeline.state.make : !cs
  pipeline.consumer.wait %p, %s : !C, !cs
  // expected-note @+1 {{the response read here}}
  %r = llvm.load %resp {alignment = 16 : i64} : !llvm.ptr<3> -> i128
  %ok = nvvm.clusterlaunchcontrol.query.cancel query = is_canceled, %r : i1
  // expected-error @+1 {{proxy fence: the response of pipeline 'clc' was read with an ordinary load (the generic proxy), and this consumer_release lets the next try_cancel write the buffer through the async proxy with no fence.proxy.async.shared::cta in between (call fence_view_async_shared() after reading the response, before consumer_release)}}
  pipeline.consumer.release %p, %s : !C, !cs
  return
}

// -----

!C = !pipeline.pipeline<clc_fetch_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 32>, tx_count = 16>
!cs = !pipeline.state<2, consumer>

// The twin: the fence between the read and the release (ClcTileScheduler).
func.func @clc_release_with_fence(%resp: !llvm.ptr<3>, %out: !llvm.ptr<3>) {
  %p = pipeline.create {name = "clc"} : !C
  %s = pipeline.state.make : !cs
  pipeline.consumer.wait %p, %s : !C, !cs
  %r = llvm.load %resp {alignment = 16 : i64} : !llvm.ptr<3> -> i128
  %ok = nvvm.clusterlaunchcontrol.query.cancel query = is_canceled, %r : i1
  nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
  pipeline.consumer.release %p, %s : !C, !cs
  return
}

// -----

!P = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 4>, tx_count = 1024>

// Warp 4 allocates TMEM; the barrier publishes it with no fence before it.
gpu.module @m {
  gpu.func @alloc_without_fence_before(%slot: !llvm.ptr<3>, %t: !llvm.ptr<6>, %out: !llvm.ptr<3>) kernel attributes {known_block_size = array<i32: 160, 1, 1>} {
    %p = pipeline.create : !P
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %c32 = arith.constant 32 : i32
    %c4 = arith.constant 4 : i32
    %c512 = arith.constant 512 : i32
    %warp = arith.divui %tid, %c32 : i32
    %mma = arith.cmpi eq, %warp, %c4 : i32
    scf.if %mma {
      // expected-error @+1 {{tcgen05 fence: no tcgen05.fence::before_thread_sync between this tcgen05.alloc and the CTA barrier that publishes it to the other warps (call tcgen05.fence_before_thread_sync() after tmem.alloc(), before the barrier)}}
      nvvm.tcgen05.alloc %slot, %c512 : !llvm.ptr<3>, i32
    }
    nvvm.barrier0
    nvvm.tcgen05.fence <after>
    %epi = arith.cmpi slt, %warp, %c4 : i32
    scf.if %epi {
      // expected-note @+1 {{a tcgen05 op of another warp}}
      %v = nvvm.tcgen05.ld %t {shape = #nvvm.tcgen05_ldst_shape<shape_32x32b>} : vector<4xi32>
      nvvm.tcgen05.wait <load>
      %c0 = arith.constant 0 : i32
      %x = llvm.extractelement %v[%c0 : i32] : vector<4xi32>
      llvm.store %x, %out : i32, !llvm.ptr<3>
    }
    nvvm.tcgen05.fence <before>
    nvvm.barrier0
    scf.if %mma {
      nvvm.tcgen05.fence <after>
      nvvm.tcgen05.dealloc %t, %c512 : !llvm.ptr<6>, i32
    }
    gpu.return
  }
}

// -----

!P = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 4>, tx_count = 1024>

// The twin: fence_before, barrier, fence_after (the Blackwell GEMM's start).
gpu.module @m {
  gpu.func @alloc_correct(%slot: !llvm.ptr<3>, %t: !llvm.ptr<6>, %out: !llvm.ptr<3>) kernel attributes {known_block_size = array<i32: 160, 1, 1>} {
    %p = pipeline.create : !P
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %c32 = arith.constant 32 : i32
    %c4 = arith.constant 4 : i32
    %c512 = arith.constant 512 : i32
    %warp = arith.divui %tid, %c32 : i32
    %mma = arith.cmpi eq, %warp, %c4 : i32
    scf.if %mma {
      nvvm.tcgen05.alloc %slot, %c512 : !llvm.ptr<3>, i32
    }
    nvvm.tcgen05.fence <before>
    nvvm.barrier0
    nvvm.tcgen05.fence <after>
    %epi = arith.cmpi slt, %warp, %c4 : i32
    scf.if %epi {
      %v = nvvm.tcgen05.ld %t {shape = #nvvm.tcgen05_ldst_shape<shape_32x32b>} : vector<4xi32>
      nvvm.tcgen05.wait <load>
      %c0 = arith.constant 0 : i32
      %x = llvm.extractelement %v[%c0 : i32] : vector<4xi32>
      llvm.store %x, %out : i32, !llvm.ptr<3>
    }
    nvvm.tcgen05.fence <before>
    nvvm.barrier0
    scf.if %mma {
      nvvm.tcgen05.fence <after>
      nvvm.tcgen05.dealloc %t, %c512 : !llvm.ptr<6>, i32
    }
    gpu.return
  }
}
