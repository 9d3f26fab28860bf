// Tensor memory is given back: a kernel that runs tcgen05.alloc and never
// tcgen05.dealloc (or deallocates fewer columns than it allocated) leaves
// the columns taken after the CTA exits, and the next CTA's tcgen05.alloc on
// that SM waits for them forever. Each bug has its twin. (The checker looks
// at functions with pipeline ops: each kernel here creates one.)
// RUN: pipeline-opt --pipeline-verify-protocol -split-input-file -verify-diagnostics %s

!P = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 4>, tx_count = 1024>

// The Blackwell GEMM's start with its end's dealloc dropped.
gpu.module @m {
  gpu.func @alloc_never_freed(%slot: !llvm.ptr<3>, %t: !llvm.ptr<6>, %out: !llvm.ptr<3>) kernel attributes {known_block_size = array<i32: 160, 1, 1>} {
    %p = pipeline.create : !P
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %c32 = arith.constant 32 : i32
    %c4 = arith.constant 4 : i32
    %c512 = arith.constant 512 : i32
    %warp = arith.divui %tid, %c32 : i32
    %mma = arith.cmpi eq, %warp, %c4 : i32
    scf.if %mma {
      // expected-error @+1 {{TMEM leak: this tcgen05.alloc has no tcgen05.dealloc in the kernel: its columns stay allocated after the CTA exits, and the next CTA's tcgen05.alloc on this SM waits for them forever (call tmem.dealloc() with the same column count at the end of the kernel, after tcgen05.fence_before_thread_sync(), a CTA barrier and tcgen05.fence_after_thread_sync())}}
      nvvm.tcgen05.alloc %slot, %c512 : !llvm.ptr<3>, i32
      nvvm.tcgen05.relinquish_alloc_permit
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
    gpu.return
  }
}

// -----

!P = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 4>, tx_count = 1024>

// Half the columns given back.
gpu.module @m {
  gpu.func @alloc_half_freed(%slot: !llvm.ptr<3>, %t: !llvm.ptr<6>, %out: !llvm.ptr<3>) kernel attributes {known_block_size = array<i32: 160, 1, 1>} {
    %p = pipeline.create : !P
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %c32 = arith.constant 32 : i32
    %c4 = arith.constant 4 : i32
    %c256 = arith.constant 256 : i32
    %c512 = arith.constant 512 : i32
    %warp = arith.divui %tid, %c32 : i32
    %mma = arith.cmpi eq, %warp, %c4 : i32
    scf.if %mma {
      // expected-error @+1 {{TMEM leak: the kernel allocates 512 tensor-memory columns and deallocates 256: the rest stay allocated after the CTA exits}}
      nvvm.tcgen05.alloc %slot, %c512 : !llvm.ptr<3>, i32
      nvvm.tcgen05.relinquish_alloc_permit
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
      // expected-note @+1 {{a tcgen05.dealloc}}
      nvvm.tcgen05.dealloc %t, %c256 : !llvm.ptr<6>, i32
    }
    gpu.return
  }
}

// -----

!P = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 4>, tx_count = 1024>

// The twin: every column allocated is deallocated at the end (the Blackwell
// GEMM).
gpu.module @m {
  gpu.func @alloc_freed(%slot: !llvm.ptr<3>, %t: !llvm.ptr<6>, %out: !llvm.ptr<3>) kernel attributes {known_block_size = array<i32: 160, 1, 1>} {
    %p = pipeline.create : !P
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %c32 = arith.constant 32 : i32
    %c4 = arith.constant 4 : i32
    %c512 = arith.constant 512 : i32
    %warp = arith.divui %tid, %c32 : i32
    %mma = arith.cmpi eq, %warp, %c4 : i32
    scf.if %mma {
      nvvm.tcgen05.alloc %slot, %c512 : !llvm.ptr<3>, i32
      nvvm.tcgen05.relinquish_alloc_permit
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
