// Shared-memory hand-over and proxy fence: when several warps write a tile
// with ordinary stores and one thread stores it with TMA, a barrier over
// those warps must separate the writes from the store, and the store's
// wait from the next writes; a fence.proxy.async.shared::cta must separate
// the writes from the store. Each bug has its correct twin.
// RUN: pipeline-opt --pipeline-verify-protocol -split-input-file -verify-diagnostics %s

!S = !pipeline.pipeline<tma_store, stages = 2>
!ps = !pipeline.state<2, producer>

// The epilogue of examples/tma_store_epilogue.py: acquire, sync, write,
// fence, sync, store. Accepted.
gpu.module @m {
  llvm.mlir.global external @smem() {addr_space = 3 : i32, alignment = 1024 : i64} : !llvm.array<0 x i8>
  gpu.func @correct(%desc: !llvm.ptr, %n: i32) kernel attributes {known_block_size = array<i32: 128, 1, 1>} {
    %base = llvm.mlir.addressof @smem : !llvm.ptr<3>
    %p = pipeline.create {name = "c"} : !S
    %s = pipeline.state.make : !ps
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %c2 = arith.constant 2 : i32
    %c32 = arith.constant 32 : i32
    %c512 = arith.constant 512 : i32
    %warp = arith.divui %tid, %c32 : i32
    %w0 = arith.cmpi eq, %warp, %c0 : i32
    scf.for %t = %c0 to %n step %c1 : i32 {
      %slot = arith.remsi %t, %c2 : i32
      %off = arith.muli %slot, %c512 : i32
      %buf = llvm.getelementptr %base[%off] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
      scf.if %w0 {
        %e = nvvm.elect.sync -> i1
        scf.if %e {
          pipeline.producer.acquire %p, %s : !S, !ps
        }
      }
      pipeline.named_barrier.sync id = 1, threads = 128
      %a = llvm.getelementptr %buf[%tid] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i32
      llvm.store %t, %a : i32, !llvm.ptr<3>
      nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
      pipeline.named_barrier.sync id = 1, threads = 128
      scf.if %w0 {
        %e = nvvm.elect.sync -> i1
        scf.if %e {
          pipeline.copy.tma_store %desc[%c0, %t] from %buf : !llvm.ptr, <3>
          pipeline.producer.commit %p, %s : !S, !ps
        }
      }
    }
    scf.if %w0 {
      %e = nvvm.elect.sync -> i1
      scf.if %e {
        pipeline.producer.tail %p, %s : !S, !ps
      }
    }
    gpu.return
  }
}

// -----

!S = !pipeline.pipeline<tma_store, stages = 2>
!ps = !pipeline.state<2, producer>

// The sync between the writes and the store dropped: warp 0's elected
// thread may store the tile before warps 1-3 wrote their part.
gpu.module @m {
  llvm.mlir.global external @smem() {addr_space = 3 : i32, alignment = 1024 : i64} : !llvm.array<0 x i8>
  gpu.func @no_sync_before_store(%desc: !llvm.ptr, %n: i32) kernel attributes {known_block_size = array<i32: 128, 1, 1>} {
    %base = llvm.mlir.addressof @smem : !llvm.ptr<3>
    %p = pipeline.create {name = "c"} : !S
    %s = pipeline.state.make : !ps
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %c2 = arith.constant 2 : i32
    %c32 = arith.constant 32 : i32
    %c512 = arith.constant 512 : i32
    %warp = arith.divui %tid, %c32 : i32
    %w0 = arith.cmpi eq, %warp, %c0 : i32
    scf.for %t = %c0 to %n step %c1 : i32 {
      %slot = arith.remsi %t, %c2 : i32
      %off = arith.muli %slot, %c512 : i32
      %buf = llvm.getelementptr %base[%off] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
      scf.if %w0 {
        %e = nvvm.elect.sync -> i1
        scf.if %e {
          pipeline.producer.acquire %p, %s : !S, !ps
        }
      }
      pipeline.named_barrier.sync id = 1, threads = 128
      %a = llvm.getelementptr %buf[%tid] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i32
      // expected-note @+1 {{written here by warps 0-3, with no barrier after it before the store}}
      llvm.store %t, %a : i32, !llvm.ptr<3>
      nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
      scf.if %w0 {
        %e = nvvm.elect.sync -> i1
        scf.if %e {
          // expected-error @+1 {{shared-memory hand-over: this TMA store reads shared memory that warps 0-3 write with ordinary stores, and on some path no barrier separates those writes from the store: it may read the tile before the other warps wrote it (call arrive_and_wait() on a NamedBarrier over the writing warps, or sync the CTA, after their stores and fence_view_async_shared(), before the tma_store)}}
          pipeline.copy.tma_store %desc[%c0, %t] from %buf : !llvm.ptr, <3>
          pipeline.producer.commit %p, %s : !S, !ps
        }
      }
    }
    scf.if %w0 {
      %e = nvvm.elect.sync -> i1
      scf.if %e {
        pipeline.producer.tail %p, %s : !S, !ps
      }
    }
    gpu.return
  }
}

// -----

!S = !pipeline.pipeline<tma_store, stages = 2>
!ps = !pipeline.state<2, producer>

// The sync between producer_acquire and the writes dropped: the wait runs
// on warp 0's elected thread only, and warps 1-3 overwrite the buffer
// while the store of two tiles ago still reads it.
gpu.module @m {
  llvm.mlir.global external @smem() {addr_space = 3 : i32, alignment = 1024 : i64} : !llvm.array<0 x i8>
  gpu.func @no_sync_after_acquire(%desc: !llvm.ptr, %n: i32) kernel attributes {known_block_size = array<i32: 128, 1, 1>} {
    %base = llvm.mlir.addressof @smem : !llvm.ptr<3>
    %p = pipeline.create {name = "c"} : !S
    %s = pipeline.state.make : !ps
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %c2 = arith.constant 2 : i32
    %c32 = arith.constant 32 : i32
    %c512 = arith.constant 512 : i32
    %warp = arith.divui %tid, %c32 : i32
    %w0 = arith.cmpi eq, %warp, %c0 : i32
    scf.for %t = %c0 to %n step %c1 : i32 {
      %slot = arith.remsi %t, %c2 : i32
      %off = arith.muli %slot, %c512 : i32
      %buf = llvm.getelementptr %base[%off] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
      scf.if %w0 {
        %e = nvvm.elect.sync -> i1
        scf.if %e {
          pipeline.producer.acquire %p, %s : !S, !ps
        }
      }
      %a = llvm.getelementptr %buf[%tid] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i32
      // expected-error @+1 {{shared-memory hand-over: warps 0-3 write shared memory that an earlier TMA store may still be reading: its wait (producer_acquire() of the PipelineTmaStore, cp.async.bulk.wait_group.read) runs on the storing thread only, and no barrier after it tells the other warps the buffer is free (call arrive_and_wait() on a NamedBarrier over the writing warps after producer_acquire(), before these stores)}}
      llvm.store %t, %a : i32, !llvm.ptr<3>
      nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
      pipeline.named_barrier.sync id = 1, threads = 128
      scf.if %w0 {
        %e = nvvm.elect.sync -> i1
        scf.if %e {
          // expected-note @+1 {{the TMA store that may still read the buffer}}
          pipeline.copy.tma_store %desc[%c0, %t] from %buf : !llvm.ptr, <3>
          pipeline.producer.commit %p, %s : !S, !ps
        }
      }
    }
    scf.if %w0 {
      %e = nvvm.elect.sync -> i1
      scf.if %e {
        pipeline.producer.tail %p, %s : !S, !ps
      }
    }
    gpu.return
  }
}

// -----

!S = !pipeline.pipeline<tma_store, stages = 2>
!ps = !pipeline.state<2, producer>

// One warp writes and stores its own tile: not the multi-warp hand-over
// (no barrier between the warps is needed). Accepted.
gpu.module @m {
  llvm.mlir.global external @smem() {addr_space = 3 : i32, alignment = 1024 : i64} : !llvm.array<0 x i8>
  gpu.func @one_warp_writes(%desc: !llvm.ptr, %n: i32) kernel attributes {known_block_size = array<i32: 128, 1, 1>} {
    %base = llvm.mlir.addressof @smem : !llvm.ptr<3>
    %p = pipeline.create {name = "c"} : !S
    %s = pipeline.state.make : !ps
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %c2 = arith.constant 2 : i32
    %c32 = arith.constant 32 : i32
    %c512 = arith.constant 512 : i32
    %warp = arith.divui %tid, %c32 : i32
    %w0 = arith.cmpi eq, %warp, %c0 : i32
    scf.for %t = %c0 to %n step %c1 : i32 {
      %slot = arith.remsi %t, %c2 : i32
      %off = arith.muli %slot, %c512 : i32
      %buf = llvm.getelementptr %base[%off] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
      scf.if %w0 {
        %e = nvvm.elect.sync -> i1
        scf.if %e {
          pipeline.producer.acquire %p, %s : !S, !ps
        }
      }
      %a = llvm.getelementptr %buf[%tid] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i32
      scf.if %w0 {
        llvm.store %t, %a : i32, !llvm.ptr<3>
        nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
      }
      scf.if %w0 {
        %e = nvvm.elect.sync -> i1
        scf.if %e {
          pipeline.copy.tma_store %desc[%c0, %t] from %buf : !llvm.ptr, <3>
          pipeline.producer.commit %p, %s : !S, !ps
        }
      }
    }
    scf.if %w0 {
      %e = nvvm.elect.sync -> i1
      scf.if %e {
        pipeline.producer.tail %p, %s : !S, !ps
      }
    }
    gpu.return
  }
}

// -----

!S = !pipeline.pipeline<tma_store, stages = 2>
!ps = !pipeline.state<2, producer>

// Proxy fence: fence_view_async_shared() dropped: the TMA store (async
// proxy) may not see the warps' generic-proxy writes.
gpu.module @m {
  llvm.mlir.global external @smem() {addr_space = 3 : i32, alignment = 1024 : i64} : !llvm.array<0 x i8>
  gpu.func @no_proxy_fence(%desc: !llvm.ptr, %n: i32) kernel attributes {known_block_size = array<i32: 128, 1, 1>} {
    %base = llvm.mlir.addressof @smem : !llvm.ptr<3>
    %p = pipeline.create {name = "c"} : !S
    %s = pipeline.state.make : !ps
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %c2 = arith.constant 2 : i32
    %c32 = arith.constant 32 : i32
    %c512 = arith.constant 512 : i32
    %warp = arith.divui %tid, %c32 : i32
    %w0 = arith.cmpi eq, %warp, %c0 : i32
    scf.for %t = %c0 to %n step %c1 : i32 {
      %slot = arith.remsi %t, %c2 : i32
      %off = arith.muli %slot, %c512 : i32
      %buf = llvm.getelementptr %base[%off] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
      scf.if %w0 {
        %e = nvvm.elect.sync -> i1
        scf.if %e {
          pipeline.producer.acquire %p, %s : !S, !ps
        }
      }
      pipeline.named_barrier.sync id = 1, threads = 128
      %a = llvm.getelementptr %buf[%tid] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i32
      // expected-note @+1 {{written here, with no proxy fence after it before the store}}
      llvm.store %t, %a : i32, !llvm.ptr<3>
      pipeline.named_barrier.sync id = 1, threads = 128
      scf.if %w0 {
        %e = nvvm.elect.sync -> i1
        scf.if %e {
          // expected-error @+1 {{proxy fence: this TMA store reads shared memory through the async proxy that warps 0-3 wrote with ordinary stores (the generic proxy), and on some path no fence.proxy.async.shared::cta lies between the writes and the store: the TMA unit may read stale data (call fence_view_async_shared() after the stores, before the barrier that hands the tile to the storing thread)}}
          pipeline.copy.tma_store %desc[%c0, %t] from %buf : !llvm.ptr, <3>
          pipeline.producer.commit %p, %s : !S, !ps
        }
      }
    }
    scf.if %w0 {
      %e = nvvm.elect.sync -> i1
      scf.if %e {
        pipeline.producer.tail %p, %s : !S, !ps
      }
    }
    gpu.return
  }
}

// -----

!S = !pipeline.pipeline<tma_store, stages = 2>
!ps = !pipeline.state<2, producer>

// One warp writes and stores its own tile without the fence: no hand-over
// barrier is needed, the proxy fence is.
gpu.module @m {
  llvm.mlir.global external @smem() {addr_space = 3 : i32, alignment = 1024 : i64} : !llvm.array<0 x i8>
  gpu.func @one_warp_no_proxy_fence(%desc: !llvm.ptr, %n: i32) kernel attributes {known_block_size = array<i32: 128, 1, 1>} {
    %base = llvm.mlir.addressof @smem : !llvm.ptr<3>
    %p = pipeline.create {name = "c"} : !S
    %s = pipeline.state.make : !ps
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %c2 = arith.constant 2 : i32
    %c32 = arith.constant 32 : i32
    %c512 = arith.constant 512 : i32
    %warp = arith.divui %tid, %c32 : i32
    %w0 = arith.cmpi eq, %warp, %c0 : i32
    scf.for %t = %c0 to %n step %c1 : i32 {
      %slot = arith.remsi %t, %c2 : i32
      %off = arith.muli %slot, %c512 : i32
      %buf = llvm.getelementptr %base[%off] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
      scf.if %w0 {
        %e = nvvm.elect.sync -> i1
        scf.if %e {
          pipeline.producer.acquire %p, %s : !S, !ps
        }
      }
      %a = llvm.getelementptr %buf[%tid] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i32
      scf.if %w0 {
        // expected-note @+1 {{written here, with no proxy fence after it before the store}}
        llvm.store %t, %a : i32, !llvm.ptr<3>
      }
      scf.if %w0 {
        %e = nvvm.elect.sync -> i1
        scf.if %e {
          // expected-error @+1 {{proxy fence: this TMA store reads shared memory through the async proxy that warp 0 wrote with ordinary stores (the generic proxy), and on some path no fence.proxy.async.shared::cta lies between the writes and the store: the TMA unit may read stale data (call fence_view_async_shared() after the stores, before the barrier that hands the tile to the storing thread)}}
          pipeline.copy.tma_store %desc[%c0, %t] from %buf : !llvm.ptr, <3>
          pipeline.producer.commit %p, %s : !S, !ps
        }
      }
    }
    scf.if %w0 {
      %e = nvvm.elect.sync -> i1
      scf.if %e {
        pipeline.producer.tail %p, %s : !S, !ps
      }
    }
    gpu.return
  }
}

// -----

!S = !pipeline.pipeline<tma_store, stages = 2>
!ps = !pipeline.state<2, producer>

// The same without a known block size: warp 0 and its elected lane are
// closed sets, decided for any block.
gpu.module @m {
  llvm.mlir.global external @smem() {addr_space = 3 : i32, alignment = 1024 : i64} : !llvm.array<0 x i8>
  gpu.func @one_warp_no_proxy_fence_any_block(%desc: !llvm.ptr, %n: i32) kernel {
    %base = llvm.mlir.addressof @smem : !llvm.ptr<3>
    %p = pipeline.create {name = "c"} : !S
    %s = pipeline.state.make : !ps
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %c2 = arith.constant 2 : i32
    %c32 = arith.constant 32 : i32
    %c512 = arith.constant 512 : i32
    %warp = arith.divui %tid, %c32 : i32
    %w0 = arith.cmpi eq, %warp, %c0 : i32
    scf.for %t = %c0 to %n step %c1 : i32 {
      %slot = arith.remsi %t, %c2 : i32
      %off = arith.muli %slot, %c512 : i32
      %buf = llvm.getelementptr %base[%off] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
      scf.if %w0 {
        %e = nvvm.elect.sync -> i1
        scf.if %e {
          pipeline.producer.acquire %p, %s : !S, !ps
        }
      }
      %a = llvm.getelementptr %buf[%tid] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i32
      scf.if %w0 {
        // expected-note @+1 {{written here, with no proxy fence after it before the store}}
        llvm.store %t, %a : i32, !llvm.ptr<3>
      }
      scf.if %w0 {
        %e = nvvm.elect.sync -> i1
        scf.if %e {
          // expected-error @+1 {{proxy fence: this TMA store reads shared memory through the async proxy that warp 0 wrote with ordinary stores (the generic proxy), and on some path no fence.proxy.async.shared::cta lies between the writes and the store: the TMA unit may read stale data (call fence_view_async_shared() after the stores, before the barrier that hands the tile to the storing thread)}}
          pipeline.copy.tma_store %desc[%c0, %t] from %buf : !llvm.ptr, <3>
          pipeline.producer.commit %p, %s : !S, !ps
        }
      }
    }
    scf.if %w0 {
      %e = nvvm.elect.sync -> i1
      scf.if %e {
        pipeline.producer.tail %p, %s : !S, !ps
      }
    }
    gpu.return
  }
}

// -----

!S = !pipeline.pipeline<tma_store, stages = 2>
!ps = !pipeline.state<2, producer>

// Its twin: the fence between the writes and the store.
gpu.module @m {
  llvm.mlir.global external @smem() {addr_space = 3 : i32, alignment = 1024 : i64} : !llvm.array<0 x i8>
  gpu.func @one_warp_proxy_fence_any_block(%desc: !llvm.ptr, %n: i32) kernel {
    %base = llvm.mlir.addressof @smem : !llvm.ptr<3>
    %p = pipeline.create {name = "c"} : !S
    %s = pipeline.state.make : !ps
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %c2 = arith.constant 2 : i32
    %c32 = arith.constant 32 : i32
    %c512 = arith.constant 512 : i32
    %warp = arith.divui %tid, %c32 : i32
    %w0 = arith.cmpi eq, %warp, %c0 : i32
    scf.for %t = %c0 to %n step %c1 : i32 {
      %slot = arith.remsi %t, %c2 : i32
      %off = arith.muli %slot, %c512 : i32
      %buf = llvm.getelementptr %base[%off] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
      scf.if %w0 {
        %e = nvvm.elect.sync -> i1
        scf.if %e {
          pipeline.producer.acquire %p, %s : !S, !ps
        }
      }
      %a = llvm.getelementptr %buf[%tid] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i32
      scf.if %w0 {
        llvm.store %t, %a : i32, !llvm.ptr<3>
        nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
      }
      scf.if %w0 {
        %e = nvvm.elect.sync -> i1
        scf.if %e {
          pipeline.copy.tma_store %desc[%c0, %t] from %buf : !llvm.ptr, <3>
          pipeline.producer.commit %p, %s : !S, !ps
        }
      }
    }
    scf.if %w0 {
      %e = nvvm.elect.sync -> i1
      scf.if %e {
        pipeline.producer.tail %p, %s : !S, !ps
      }
    }
    gpu.return
  }
}

// -----

!S = !pipeline.pipeline<tma_store, stages = 2>
!ps = !pipeline.state<2, producer>

// The storing thread fences after the barrier, before its store: accepted
// (the check does not ask which thread fences).
gpu.module @m {
  llvm.mlir.global external @smem() {addr_space = 3 : i32, alignment = 1024 : i64} : !llvm.array<0 x i8>
  gpu.func @storer_fences_after_the_barrier(%desc: !llvm.ptr, %n: i32) kernel attributes {known_block_size = array<i32: 128, 1, 1>} {
    %base = llvm.mlir.addressof @smem : !llvm.ptr<3>
    %p = pipeline.create {name = "c"} : !S
    %s = pipeline.state.make : !ps
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %c2 = arith.constant 2 : i32
    %c32 = arith.constant 32 : i32
    %c512 = arith.constant 512 : i32
    %warp = arith.divui %tid, %c32 : i32
    %w0 = arith.cmpi eq, %warp, %c0 : i32
    scf.for %t = %c0 to %n step %c1 : i32 {
      %slot = arith.remsi %t, %c2 : i32
      %off = arith.muli %slot, %c512 : i32
      %buf = llvm.getelementptr %base[%off] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
      scf.if %w0 {
        %e = nvvm.elect.sync -> i1
        scf.if %e {
          pipeline.producer.acquire %p, %s : !S, !ps
        }
      }
      pipeline.named_barrier.sync id = 1, threads = 128
      %a = llvm.getelementptr %buf[%tid] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i32
      llvm.store %t, %a : i32, !llvm.ptr<3>
      pipeline.named_barrier.sync id = 1, threads = 128
      scf.if %w0 {
        %e = nvvm.elect.sync -> i1
        scf.if %e {
          nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
          pipeline.copy.tma_store %desc[%c0, %t] from %buf : !llvm.ptr, <3>
          pipeline.producer.commit %p, %s : !S, !ps
        }
      }
    }
    scf.if %w0 {
      %e = nvvm.elect.sync -> i1
      scf.if %e {
        pipeline.producer.tail %p, %s : !S, !ps
      }
    }
    gpu.return
  }
}
