// Property 16: a pipeline has no more stages than the buffers of the ring
// its stages index. The buffer a state's index selects must start inside
// the ring's shared-memory allocation: a sized shared global, or an op
// carrying `pipeline.smem_bytes` (the Python layer's smem_alloc). A chunk
// without expected-* lines is a correct twin: any diagnostic fails it.
// RUN: pipeline-opt --pipeline-verify-protocol -split-input-file -verify-diagnostics %s

!A = !pipeline.pipeline<async, stages = 4, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!ps = !pipeline.state<4, producer>

// The bug: four stages over a ring of three 4 KiB buffers. Stage 3's
// buffer starts at byte 12288, the end of the ring: the copy writes past it.
gpu.module @m {
  llvm.mlir.global internal @ring() {addr_space = 3 : i32, alignment = 128 : i64} : !llvm.array<12288 x i8>
  gpu.func @four_stages_three_buffers(%n: i32, %v: i32) kernel {
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %c4096 = arith.constant 4096 : i32
    // expected-note @+1 {{the allocation}}
    %ring = llvm.mlir.addressof @ring : !llvm.ptr<3>
    // expected-note @+1 {{pipeline 'ab' is created here}}
    %p = pipeline.create {name = "ab"} : !A
    %s0 = pipeline.state.make : !ps
    %lane = nvvm.read.ptx.sreg.laneid : i32
    %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) : i32 {
      pipeline.producer.acquire %p, %s : !A, !ps
      %idx = pipeline.state.index %s : !ps
      %off = arith.muli %idx, %c4096 : i32
      // expected-error @+1 {{pipeline 'ab': the buffer of stage 3 starts at byte 12288 of a 12288-byte shared-memory allocation (rule: a pipeline has no more stages than the buffers of the ring it indexes): the ring holds 3 buffers of 4096 bytes, so 4 stages write past it into other data and two stages share bytes (use at most 3 stages, or allocate 4 buffers)}}
      %buf = llvm.getelementptr %ring[%off] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
      %a = llvm.getelementptr %buf[%lane] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i32
      llvm.store %v, %a : i32, !llvm.ptr<3>
      pipeline.producer.commit %p, %s : !A, !ps
      %s1 = pipeline.state.advance %s : !ps
      scf.yield %s1 : !ps
    }
    pipeline.producer.tail %p, %sN : !A, !ps
    gpu.return
  }
}

// -----

!A = !pipeline.pipeline<async, stages = 3, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!ps = !pipeline.state<3, producer>

// The correct twin: three stages over the three buffers.
gpu.module @m {
  llvm.mlir.global internal @ring() {addr_space = 3 : i32, alignment = 128 : i64} : !llvm.array<12288 x i8>
  gpu.func @three_stages_three_buffers(%n: i32, %v: i32) kernel {
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %c4096 = arith.constant 4096 : i32
    %ring = llvm.mlir.addressof @ring : !llvm.ptr<3>
    %p = pipeline.create {name = "ab"} : !A
    %s0 = pipeline.state.make : !ps
    %lane = nvvm.read.ptx.sreg.laneid : i32
    %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) : i32 {
      pipeline.producer.acquire %p, %s : !A, !ps
      %idx = pipeline.state.index %s : !ps
      %off = arith.muli %idx, %c4096 : i32
      %buf = llvm.getelementptr %ring[%off] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
      %a = llvm.getelementptr %buf[%lane] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i32
      llvm.store %v, %a : i32, !llvm.ptr<3>
      pipeline.producer.commit %p, %s : !A, !ps
      %s1 = pipeline.state.advance %s : !ps
      scf.yield %s1 : !ps
    }
    pipeline.producer.tail %p, %sN : !A, !ps
    gpu.return
  }
}

// -----

!T = !pipeline.pipeline<tma_async, stages = 3, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 128>, tx_count = 8192>
!ps = !pipeline.state<3, producer>

// The bug, as the Python layer builds it: a ring of two 8 KiB buffers
// carved from dynamic shared memory (its size is the launch's; the
// allocation's pointer names its bytes) under a 3-stage TMA pipeline.
gpu.module @m {
  llvm.mlir.global external @dyn() {addr_space = 3 : i32, alignment = 1024 : i64} : !llvm.array<0 x i8>
  gpu.func @tma_ring(%n: i32, %desc: !llvm.ptr) kernel {
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %c128 = arith.constant 128 : i32
    %c8192 = arith.constant 8192 : i32
    %base = llvm.mlir.addressof @dyn : !llvm.ptr<3>
    // expected-note @+1 {{the allocation}}
    %ring = llvm.getelementptr %base[%c128] {pipeline.smem_bytes = 16384 : i64} : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
    // expected-note @+1 {{pipeline 'ab' is created here}}
    %p = pipeline.create {name = "ab"} : !T
    %s0 = pipeline.state.make : !ps
    %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) : i32 {
      pipeline.producer.acquire %p, %s : !T, !ps
      %idx = pipeline.state.index %s : !ps
      %off = arith.muli %idx, %c8192 : i32
      // expected-error @+1 {{pipeline 'ab': the buffer of stage 2 starts at byte 16384 of a 16384-byte shared-memory allocation}}
      %buf = llvm.getelementptr %ring[%off] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
      pipeline.copy.tma_load %p, %s, %desc[%c0, %i] to %buf {bytes = 8192 : i64} : !T, !ps, !llvm.ptr, !llvm.ptr<3>
      pipeline.producer.commit %p, %s : !T, !ps
      %s1 = pipeline.state.advance %s : !ps
      scf.yield %s1 : !ps
    }
    pipeline.producer.tail %p, %sN : !T, !ps
    gpu.return
  }
}

// -----

!T = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 128>, tx_count = 8192>
!ps = !pipeline.state<2, producer>

// The correct twin: two stages over the two buffers; an offset the check
// does not follow (a kernel argument) is not reported either.
gpu.module @m {
  llvm.mlir.global external @dyn() {addr_space = 3 : i32, alignment = 1024 : i64} : !llvm.array<0 x i8>
  gpu.func @tma_ring(%n: i32, %desc: !llvm.ptr, %extra: i32) kernel {
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %c128 = arith.constant 128 : i32
    %c8192 = arith.constant 8192 : i32
    %base = llvm.mlir.addressof @dyn : !llvm.ptr<3>
    %ring = llvm.getelementptr %base[%c128] {pipeline.smem_bytes = 16384 : i64} : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
    %p = pipeline.create {name = "ab"} : !T
    %s0 = pipeline.state.make : !ps
    %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) : i32 {
      pipeline.producer.acquire %p, %s : !T, !ps
      %idx = pipeline.state.index %s : !ps
      %off = arith.muli %idx, %c8192 : i32
      %buf = llvm.getelementptr %ring[%off] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
      %far = llvm.getelementptr %buf[%extra] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
      pipeline.copy.tma_load %p, %s, %desc[%c0, %i] to %buf {bytes = 8192 : i64} : !T, !ps, !llvm.ptr, !llvm.ptr<3>
      pipeline.producer.commit %p, %s : !T, !ps
      %s1 = pipeline.state.advance %s : !ps
      scf.yield %s1 : !ps
    }
    pipeline.producer.tail %p, %sN : !T, !ps
    gpu.return
  }
}
