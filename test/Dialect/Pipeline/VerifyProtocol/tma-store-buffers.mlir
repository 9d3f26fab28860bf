// Staging buffers: a PipelineTmaStore's producer.acquire returns once at most
// `stages - 1` bulk groups still read shared memory, so the buffer rewritten
// next must not be one that the `stages - 1` previous stores read: a ring of
// B staging buffers serves at most B stages. Each bug has its correct twin.
// RUN: pipeline-opt --pipeline-verify-protocol -split-input-file -verify-diagnostics %s

!S3 = !pipeline.pipeline<tma_store, stages = 3>
!S2 = !pipeline.pipeline<tma_store, stages = 2>
!ps3 = !pipeline.state<3, producer>
!ps2 = !pipeline.state<2, producer>

// Three stages over two buffers (`t % 2`): the acquire of tile t lets the
// stores of tiles t-1 and t-2 run on, and tile t-2 read the buffer tile t
// rewrites.
gpu.module @m {
  llvm.mlir.global external @smem() {addr_space = 3 : i32, alignment = 1024 : i64} : !llvm.array<0 x i8>
  gpu.func @three_stages_two_buffers(%desc: !llvm.ptr, %n: i32) kernel attributes {known_block_size = array<i32: 128, 1, 1>} {
    %base = llvm.mlir.addressof @smem : !llvm.ptr<3>
    // expected-error @+1 {{pipeline 'c' has 3 stages but its tma_stores read 2 staging buffers in turn (a store's source address is read again 2 commits later): producer_acquire() only waits until at most 2 bulk groups still read shared memory, so it returns while the store of 2 commits before still reads the buffer about to be rewritten (staging buffers: a PipelineTmaStore needs at least as many buffers as stages; create it with num_stages=2, or stage through 3 buffers: index the buffer by the tile counter modulo 3)}}
    %p = pipeline.create {name = "c"} : !S3
    %s = pipeline.state.make : !ps3
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %c2 = arith.constant 2 : i32
    %c512 = arith.constant 512 : i32
    %is0 = arith.cmpi eq, %tid, %c0 : i32
    scf.for %t = %c0 to %n step %c1 : i32 {
      %slot = arith.remsi %t, %c2 : i32
      %off = arith.muli %slot, %c512 : i32
      %buf = llvm.getelementptr %base[%off] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
      scf.if %is0 {
        pipeline.producer.acquire %p, %s : !S3, !ps3
      }
      pipeline.named_barrier.sync id = 1, threads = 128
      %a = llvm.getelementptr %buf[%tid] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i32
      llvm.store %t, %a : i32, !llvm.ptr<3>
      nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
      pipeline.named_barrier.sync id = 1, threads = 128
      scf.if %is0 {
        // expected-note @+2 {{this store reads the buffer}}
        // expected-note @+1 {{and this one reads the same buffer 2 commits later, while up to 2 earlier groups may be in flight}}
        pipeline.copy.tma_store %desc[%c0, %t] from %buf : !llvm.ptr, <3>
        pipeline.producer.commit %p, %s : !S3, !ps3
      }
    }
    scf.if %is0 {
      pipeline.producer.tail %p, %s : !S3, !ps3
    }
    gpu.return
  }
}

// -----

!S3 = !pipeline.pipeline<tma_store, stages = 3>
!S2 = !pipeline.pipeline<tma_store, stages = 2>
!ps3 = !pipeline.state<3, producer>
!ps2 = !pipeline.state<2, producer>

// The twin: three buffers (`t % 3`) for three stages.
gpu.module @m {
  llvm.mlir.global external @smem() {addr_space = 3 : i32, alignment = 1024 : i64} : !llvm.array<0 x i8>
  gpu.func @three_stages_three_buffers(%desc: !llvm.ptr, %n: i32) kernel attributes {known_block_size = array<i32: 128, 1, 1>} {
    %base = llvm.mlir.addressof @smem : !llvm.ptr<3>
    %p = pipeline.create {name = "c"} : !S3
    %s = pipeline.state.make : !ps3
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %c3 = arith.constant 3 : i32
    %c512 = arith.constant 512 : i32
    %is0 = arith.cmpi eq, %tid, %c0 : i32
    scf.for %t = %c0 to %n step %c1 : i32 {
      %slot = arith.remsi %t, %c3 : i32
      %off = arith.muli %slot, %c512 : i32
      %buf = llvm.getelementptr %base[%off] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
      scf.if %is0 {
        pipeline.producer.acquire %p, %s : !S3, !ps3
      }
      pipeline.named_barrier.sync id = 1, threads = 128
      %a = llvm.getelementptr %buf[%tid] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i32
      llvm.store %t, %a : i32, !llvm.ptr<3>
      nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
      pipeline.named_barrier.sync id = 1, threads = 128
      scf.if %is0 {
        pipeline.copy.tma_store %desc[%c0, %t] from %buf : !llvm.ptr, <3>
        pipeline.producer.commit %p, %s : !S3, !ps3
      }
    }
    scf.if %is0 {
      pipeline.producer.tail %p, %s : !S3, !ps3
    }
    gpu.return
  }
}

// -----

!S3 = !pipeline.pipeline<tma_store, stages = 3>
!S2 = !pipeline.pipeline<tma_store, stages = 2>
!ps3 = !pipeline.state<3, producer>
!ps2 = !pipeline.state<2, producer>

// Buffers indexed by the state of a loop-carried ring with fewer stages
// than the store pipeline (the mainloop's 2-stage state driving a 3-stage
// store pipeline): the address repeats every 2 commits.
gpu.module @m {
  llvm.mlir.global external @smem() {addr_space = 3 : i32, alignment = 1024 : i64} : !llvm.array<0 x i8>
  gpu.func @state_indexed_ring(%desc: !llvm.ptr, %n: i32) kernel attributes {known_block_size = array<i32: 128, 1, 1>} {
    %base = llvm.mlir.addressof @smem : !llvm.ptr<3>
    // expected-error @+1 {{pipeline 'c' has 3 stages but its tma_stores read 2 staging buffers in turn}}
    %p = pipeline.create {name = "c"} : !S3
    %s = pipeline.state.make : !ps3
    %ring = pipeline.state.make : !ps2
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %c512 = arith.constant 512 : i32
    %is0 = arith.cmpi eq, %tid, %c0 : i32
    %last = scf.for %t = %c0 to %n step %c1 iter_args(%r = %ring) -> (!ps2) : i32 {
      %slot = pipeline.state.index %r : !ps2
      %off = arith.muli %slot, %c512 : i32
      %buf = llvm.getelementptr %base[%off] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
      scf.if %is0 {
        pipeline.producer.acquire %p, %s : !S3, !ps3
      }
      pipeline.named_barrier.sync id = 1, threads = 128
      %a = llvm.getelementptr %buf[%tid] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i32
      llvm.store %t, %a : i32, !llvm.ptr<3>
      nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
      pipeline.named_barrier.sync id = 1, threads = 128
      scf.if %is0 {
        // expected-note @+2 {{this store reads the buffer}}
        // expected-note @+1 {{and this one reads the same buffer}}
        pipeline.copy.tma_store %desc[%c0, %t] from %buf : !llvm.ptr, <3>
        pipeline.producer.commit %p, %s : !S3, !ps3
      }
      %next = pipeline.state.advance %r : !ps2
      scf.yield %next : !ps2
    }
    scf.if %is0 {
      pipeline.producer.tail %p, %s : !S3, !ps3
    }
    gpu.return
  }
}

// -----

!S3 = !pipeline.pipeline<tma_store, stages = 3>
!S2 = !pipeline.pipeline<tma_store, stages = 2>
!ps3 = !pipeline.state<3, producer>
!ps2 = !pipeline.state<2, producer>

// The twin: a state of the store pipeline's own stage count indexes the
// buffers (a ring of 3 for 3 stages).
gpu.module @m {
  llvm.mlir.global external @smem() {addr_space = 3 : i32, alignment = 1024 : i64} : !llvm.array<0 x i8>
  gpu.func @state_indexed_ring_twin(%desc: !llvm.ptr, %n: i32) kernel attributes {known_block_size = array<i32: 128, 1, 1>} {
    %base = llvm.mlir.addressof @smem : !llvm.ptr<3>
    %p = pipeline.create {name = "c"} : !S3
    %s = pipeline.state.make : !ps3
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %c512 = arith.constant 512 : i32
    %is0 = arith.cmpi eq, %tid, %c0 : i32
    %last = scf.for %t = %c0 to %n step %c1 iter_args(%r = %s) -> (!ps3) : i32 {
      %slot = pipeline.state.index %r : !ps3
      %off = arith.muli %slot, %c512 : i32
      %buf = llvm.getelementptr %base[%off] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
      scf.if %is0 {
        pipeline.producer.acquire %p, %r : !S3, !ps3
      }
      pipeline.named_barrier.sync id = 1, threads = 128
      %a = llvm.getelementptr %buf[%tid] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i32
      llvm.store %t, %a : i32, !llvm.ptr<3>
      nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
      pipeline.named_barrier.sync id = 1, threads = 128
      scf.if %is0 {
        pipeline.copy.tma_store %desc[%c0, %t] from %buf : !llvm.ptr, <3>
        pipeline.producer.commit %p, %r : !S3, !ps3
      }
      %next = pipeline.state.advance %r : !ps3
      scf.yield %next : !ps3
    }
    scf.if %is0 {
      pipeline.producer.tail %p, %last : !S3, !ps3
    }
    gpu.return
  }
}

// -----

!S3 = !pipeline.pipeline<tma_store, stages = 3>
!S2 = !pipeline.pipeline<tma_store, stages = 2>
!ps3 = !pipeline.state<3, producer>
!ps2 = !pipeline.state<2, producer>

// Two epilogue passes per tile through one buffer, each its own bulk group:
// with 2 stages the second pass rewrites the buffer while the first pass's
// store still reads it.
gpu.module @m {
  llvm.mlir.global external @smem() {addr_space = 3 : i32, alignment = 1024 : i64} : !llvm.array<0 x i8>
  gpu.func @two_passes_one_buffer(%desc: !llvm.ptr, %n: i32) kernel attributes {known_block_size = array<i32: 128, 1, 1>} {
    %base = llvm.mlir.addressof @smem : !llvm.ptr<3>
    // expected-error @+1 {{pipeline 'c' has 2 stages but its tma_stores read 1 staging buffer in turn (a store's source address is read again 1 commit later)}}
    %p = pipeline.create {name = "c"} : !S2
    %s = pipeline.state.make : !ps2
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %c64 = arith.constant 64 : i32
    %is0 = arith.cmpi eq, %tid, %c0 : i32
    %a = llvm.getelementptr %base[%tid] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i32
    scf.for %t = %c0 to %n step %c1 : i32 {
      scf.if %is0 {
        pipeline.producer.acquire %p, %s : !S2, !ps2
      }
      pipeline.named_barrier.sync id = 1, threads = 128
      llvm.store %t, %a : i32, !llvm.ptr<3>
      nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
      pipeline.named_barrier.sync id = 1, threads = 128
      scf.if %is0 {
        // expected-note @+1 {{this store reads the buffer}}
        pipeline.copy.tma_store %desc[%c0, %t] from %base : !llvm.ptr, <3>
        pipeline.producer.commit %p, %s : !S2, !ps2
      }
      scf.if %is0 {
        pipeline.producer.acquire %p, %s : !S2, !ps2
      }
      pipeline.named_barrier.sync id = 1, threads = 128
      llvm.store %t, %a : i32, !llvm.ptr<3>
      nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
      pipeline.named_barrier.sync id = 1, threads = 128
      scf.if %is0 {
        // expected-note @+1 {{and this one reads the same buffer 1 commit later}}
        pipeline.copy.tma_store %desc[%c64, %t] from %base : !llvm.ptr, <3>
        pipeline.producer.commit %p, %s : !S2, !ps2
      }
    }
    scf.if %is0 {
      pipeline.producer.tail %p, %s : !S2, !ps2
    }
    gpu.return
  }
}

// -----

!S3 = !pipeline.pipeline<tma_store, stages = 3>
!S2 = !pipeline.pipeline<tma_store, stages = 2>
!ps3 = !pipeline.state<3, producer>
!ps2 = !pipeline.state<2, producer>

// The twin: one stage (each acquire waits for every earlier store), as the
// Hopper GEMM's multi-pass epilogue does.
!S1 = !pipeline.pipeline<tma_store, stages = 1>
!ps1 = !pipeline.state<1, producer>
gpu.module @m {
  llvm.mlir.global external @smem() {addr_space = 3 : i32, alignment = 1024 : i64} : !llvm.array<0 x i8>
  gpu.func @two_passes_one_stage(%desc: !llvm.ptr, %n: i32) kernel attributes {known_block_size = array<i32: 128, 1, 1>} {
    %base = llvm.mlir.addressof @smem : !llvm.ptr<3>
    %p = pipeline.create {name = "c"} : !S1
    %s = pipeline.state.make : !ps1
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %c64 = arith.constant 64 : i32
    %is0 = arith.cmpi eq, %tid, %c0 : i32
    %a = llvm.getelementptr %base[%tid] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i32
    scf.for %t = %c0 to %n step %c1 : i32 {
      scf.if %is0 {
        pipeline.producer.acquire %p, %s : !S1, !ps1
      }
      pipeline.named_barrier.sync id = 1, threads = 128
      llvm.store %t, %a : i32, !llvm.ptr<3>
      nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
      pipeline.named_barrier.sync id = 1, threads = 128
      scf.if %is0 {
        pipeline.copy.tma_store %desc[%c0, %t] from %base : !llvm.ptr, <3>
        pipeline.producer.commit %p, %s : !S1, !ps1
      }
      scf.if %is0 {
        pipeline.producer.acquire %p, %s : !S1, !ps1
      }
      pipeline.named_barrier.sync id = 1, threads = 128
      llvm.store %t, %a : i32, !llvm.ptr<3>
      nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
      pipeline.named_barrier.sync id = 1, threads = 128
      scf.if %is0 {
        pipeline.copy.tma_store %desc[%c64, %t] from %base : !llvm.ptr, <3>
        pipeline.producer.commit %p, %s : !S1, !ps1
      }
    }
    scf.if %is0 {
      pipeline.producer.tail %p, %s : !S1, !ps1
    }
    gpu.return
  }
}

// -----

!S = !pipeline.pipeline<tma_store, stages = 2>
!ps = !pipeline.state<2, producer>

// The refill (deepseek-ai/DeepEP#657): two buffers, two stages; after the
// acquire each iteration refills the buffer of the next tile, (t + 1) % 2,
// which the store of tile t - 1 read, and that store's group is the one
// the acquire (at most one group still reading) leaves in flight.
gpu.module @m {
  llvm.mlir.global external @smem() {addr_space = 3 : i32, alignment = 1024 : i64} : !llvm.array<0 x i8>
  gpu.func @refill_next_buffer_two_stages(%desc: !llvm.ptr, %n: i32) kernel attributes {known_block_size = array<i32: 128, 1, 1>} {
    %base = llvm.mlir.addressof @smem : !llvm.ptr<3>
    // expected-note @+1 {{the pipeline is created here}}
    %p = pipeline.create {name = "c"} : !S
    %s = pipeline.state.make : !ps
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %cb = arith.constant 2 : i32
    %ca = arith.constant 1 : i32
    %c512 = arith.constant 512 : i32
    %is0 = arith.cmpi eq, %tid, %c0 : i32
    scf.for %t = %c0 to %n step %c1 : i32 {
      scf.if %is0 {
        pipeline.producer.acquire %p, %s : !S, !ps
      }
      pipeline.named_barrier.sync id = 1, threads = 128
      // Prefetch tile t + 1 into its buffer.
      %next = arith.addi %t, %ca : i32
      %nslot = arith.remsi %next, %cb : i32
      %noff = arith.muli %nslot, %c512 : i32
      %nbuf = llvm.getelementptr %base[%noff] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
      %a = llvm.getelementptr %nbuf[%tid] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i32
      // expected-error @+1 {{pipeline 'c': this write refills the staging buffer that the tma_store 1 commit before still reads: producer_acquire() only waits until at most 1 bulk group still read shared memory, and that store's group is one of them}}
      llvm.store %t, %a : i32, !llvm.ptr<3>
      nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
      pipeline.named_barrier.sync id = 1, threads = 128
      %slot = arith.remsi %t, %cb : i32
      %off = arith.muli %slot, %c512 : i32
      %buf = llvm.getelementptr %base[%off] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
      scf.if %is0 {
        // expected-note @+1 {{this store reads the buffer}}
        pipeline.copy.tma_store %desc[%c0, %t] from %buf : !llvm.ptr, <3>
        pipeline.producer.commit %p, %s : !S, !ps
      }
    }
    scf.if %is0 {
      pipeline.producer.tail %p, %s : !S, !ps
    }
    gpu.return
  }
}

// -----

!S = !pipeline.pipeline<tma_store, stages = 1>
!ps = !pipeline.state<1, producer>

// The twin: one stage, so the acquire waits for every group to finish
// reading before the refill.
gpu.module @m {
  llvm.mlir.global external @smem() {addr_space = 3 : i32, alignment = 1024 : i64} : !llvm.array<0 x i8>
  gpu.func @refill_next_buffer_one_stage(%desc: !llvm.ptr, %n: i32) kernel attributes {known_block_size = array<i32: 128, 1, 1>} {
    %base = llvm.mlir.addressof @smem : !llvm.ptr<3>
    %p = pipeline.create {name = "c"} : !S
    %s = pipeline.state.make : !ps
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %cb = arith.constant 2 : i32
    %ca = arith.constant 1 : i32
    %c512 = arith.constant 512 : i32
    %is0 = arith.cmpi eq, %tid, %c0 : i32
    scf.for %t = %c0 to %n step %c1 : i32 {
      scf.if %is0 {
        pipeline.producer.acquire %p, %s : !S, !ps
      }
      pipeline.named_barrier.sync id = 1, threads = 128
      // Prefetch tile t + 1 into its buffer.
      %next = arith.addi %t, %ca : i32
      %nslot = arith.remsi %next, %cb : i32
      %noff = arith.muli %nslot, %c512 : i32
      %nbuf = llvm.getelementptr %base[%noff] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
      %a = llvm.getelementptr %nbuf[%tid] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i32
      llvm.store %t, %a : i32, !llvm.ptr<3>
      nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
      pipeline.named_barrier.sync id = 1, threads = 128
      %slot = arith.remsi %t, %cb : i32
      %off = arith.muli %slot, %c512 : i32
      %buf = llvm.getelementptr %base[%off] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
      scf.if %is0 {
        pipeline.copy.tma_store %desc[%c0, %t] from %buf : !llvm.ptr, <3>
        pipeline.producer.commit %p, %s : !S, !ps
      }
    }
    scf.if %is0 {
      pipeline.producer.tail %p, %s : !S, !ps
    }
    gpu.return
  }
}

// -----

!S = !pipeline.pipeline<tma_store, stages = 2>
!ps = !pipeline.state<2, producer>

// Just on the other side: three buffers, two stages; the buffer refilled,
// (t + 1) % 3, was read by the store of tile t - 2, which the acquire
// has retired (it leaves only tile t - 1's in flight).
gpu.module @m {
  llvm.mlir.global external @smem() {addr_space = 3 : i32, alignment = 1024 : i64} : !llvm.array<0 x i8>
  gpu.func @refill_next_of_three_buffers_two_stages(%desc: !llvm.ptr, %n: i32) kernel attributes {known_block_size = array<i32: 128, 1, 1>} {
    %base = llvm.mlir.addressof @smem : !llvm.ptr<3>
    %p = pipeline.create {name = "c"} : !S
    %s = pipeline.state.make : !ps
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %cb = arith.constant 3 : i32
    %ca = arith.constant 1 : i32
    %c512 = arith.constant 512 : i32
    %is0 = arith.cmpi eq, %tid, %c0 : i32
    scf.for %t = %c0 to %n step %c1 : i32 {
      scf.if %is0 {
        pipeline.producer.acquire %p, %s : !S, !ps
      }
      pipeline.named_barrier.sync id = 1, threads = 128
      // Prefetch tile t + 1 into its buffer.
      %next = arith.addi %t, %ca : i32
      %nslot = arith.remsi %next, %cb : i32
      %noff = arith.muli %nslot, %c512 : i32
      %nbuf = llvm.getelementptr %base[%noff] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
      %a = llvm.getelementptr %nbuf[%tid] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i32
      llvm.store %t, %a : i32, !llvm.ptr<3>
      nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
      pipeline.named_barrier.sync id = 1, threads = 128
      %slot = arith.remsi %t, %cb : i32
      %off = arith.muli %slot, %c512 : i32
      %buf = llvm.getelementptr %base[%off] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
      scf.if %is0 {
        pipeline.copy.tma_store %desc[%c0, %t] from %buf : !llvm.ptr, <3>
        pipeline.producer.commit %p, %s : !S, !ps
      }
    }
    scf.if %is0 {
      pipeline.producer.tail %p, %s : !S, !ps
    }
    gpu.return
  }
}
