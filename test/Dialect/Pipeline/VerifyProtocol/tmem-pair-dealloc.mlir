// A CTA pair's tensor memory (tcgen05.alloc / dealloc .cta_group::2): one
// CTA's dealloc must not run before its peer's alloc completed, so a
// cluster barrier lies between the cta_group::2 alloc and the dealloc (CTA
// barriers order only one CTA; a late peer makes the dealloc undefined, a
// launch failure: NVIDIA/cutlass#3435). Each pair chunk starts with the
// cluster barrier a cta_group::2 alloc needs before it (tmem-pair-alloc.mlir).
// That barrier does not satisfy the dealloc rule (the first bug has it and
// is refused): it orders the pair's arrival at their allocs, not the
// completion of the peer's, and an alloc may block waiting for columns.
// Each bug has its twin; a chunk
// without expected-* lines is correct: any diagnostic fails it.
// RUN: pipeline-opt --pipeline-verify-protocol -split-input-file -verify-diagnostics %s

// The bug: only CTA barriers between the pair's alloc and its dealloc.
!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>

gpu.module @m {
  gpu.func @pair_dealloc_after_cta_barriers(%slot: !llvm.ptr<3>, %t: !llvm.ptr<6>, %out: !llvm.ptr<3>) kernel attributes {known_block_size = array<i32: 128, 1, 1>, known_cluster_size = array<i32: 2, 1, 1>} {
    %p = pipeline.create : !P
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %c32 = arith.constant 32 : i32
    %c0 = arith.constant 0 : i32
    %c64 = arith.constant 64 : i32
    %warp = arith.divui %tid, %c32 : i32
    %mma = arith.cmpi eq, %warp, %c0 : i32
    // The peer CTA known to have started (the cta_group::2 alloc's rule).
    nvvm.cluster.arrive
    nvvm.cluster.wait
    scf.if %mma {
      // expected-note @+1 {{the cta_group::2 tcgen05.alloc}}
      nvvm.tcgen05.alloc %slot, %c64 {group = #nvvm.cta_group<cta_2>} : !llvm.ptr<3>, i32
      nvvm.tcgen05.relinquish_alloc_permit {group = #nvvm.cta_group<cta_2>}
    }
    nvvm.tcgen05.fence <before>
    nvvm.barrier0
    nvvm.tcgen05.fence <after>
    nvvm.tcgen05.fence <before>
    nvvm.barrier0
    scf.if %mma {
      nvvm.tcgen05.fence <after>
      // expected-error @+1 {{TMEM dealloc: this tcgen05.dealloc.cta_group::2 frees the columns of a CTA pair with no cluster barrier after the cta_group::2 tcgen05.alloc: CTA barriers order only this CTA, so it may run before the peer CTA's alloc completed}}
      nvvm.tcgen05.dealloc %t, %c64 {group = #nvvm.cta_group<cta_2>} : !llvm.ptr<6>, i32
    }
    gpu.return
  }
}

// -----

// The twin: the cluster barrier before the dealloc (the pair GEMM's end).
!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>

gpu.module @m {
  gpu.func @pair_dealloc_after_cluster_barrier(%slot: !llvm.ptr<3>, %t: !llvm.ptr<6>, %out: !llvm.ptr<3>) kernel attributes {known_block_size = array<i32: 128, 1, 1>, known_cluster_size = array<i32: 2, 1, 1>} {
    %p = pipeline.create : !P
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %c32 = arith.constant 32 : i32
    %c0 = arith.constant 0 : i32
    %c64 = arith.constant 64 : i32
    %warp = arith.divui %tid, %c32 : i32
    %mma = arith.cmpi eq, %warp, %c0 : i32
    // The peer CTA known to have started (the cta_group::2 alloc's rule).
    nvvm.cluster.arrive
    nvvm.cluster.wait
    scf.if %mma {
      nvvm.tcgen05.alloc %slot, %c64 {group = #nvvm.cta_group<cta_2>} : !llvm.ptr<3>, i32
      nvvm.tcgen05.relinquish_alloc_permit {group = #nvvm.cta_group<cta_2>}
    }
    nvvm.tcgen05.fence <before>
    nvvm.barrier0
    nvvm.tcgen05.fence <after>
    nvvm.tcgen05.fence <before>
    nvvm.cluster.arrive
    nvvm.cluster.wait
    scf.if %mma {
      nvvm.tcgen05.fence <after>
      nvvm.tcgen05.dealloc %t, %c64 {group = #nvvm.cta_group<cta_2>} : !llvm.ptr<6>, i32
    }
    gpu.return
  }
}

// -----

// Also correct: the pipelines' init sync of the cluster after the alloc,
// then CTA barriers only (the peer's alloc completed before that sync).
!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>

gpu.module @m {
  gpu.func @pair_alloc_before_cluster_init(%slot: !llvm.ptr<3>, %t: !llvm.ptr<6>, %out: !llvm.ptr<3>) kernel attributes {known_block_size = array<i32: 128, 1, 1>, known_cluster_size = array<i32: 2, 1, 1>} {
    %p = pipeline.create : !P
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %c32 = arith.constant 32 : i32
    %c0 = arith.constant 0 : i32
    %c64 = arith.constant 64 : i32
    %warp = arith.divui %tid, %c32 : i32
    %mma = arith.cmpi eq, %warp, %c0 : i32
    // The peer CTA known to have started (the cta_group::2 alloc's rule).
    nvvm.cluster.arrive
    nvvm.cluster.wait
    scf.if %mma {
      nvvm.tcgen05.alloc %slot, %c64 {group = #nvvm.cta_group<cta_2>} : !llvm.ptr<3>, i32
      nvvm.tcgen05.relinquish_alloc_permit {group = #nvvm.cta_group<cta_2>}
    }
    nvvm.tcgen05.fence <before>
    nvvm.barrier0
    nvvm.tcgen05.fence <after>
    pipeline.init_arrive {cluster_size = 2}
    pipeline.init_wait {cluster_size = 2}
    nvvm.tcgen05.fence <before>
    nvvm.barrier0
    scf.if %mma {
      nvvm.tcgen05.fence <after>
      nvvm.tcgen05.dealloc %t, %c64 {group = #nvvm.cta_group<cta_2>} : !llvm.ptr<6>, i32
    }
    gpu.return
  }
}

// -----

// Just on the other side: one CTA's tensor memory (cta_group::1) needs
// only the CTA barrier.
!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>

gpu.module @m {
  gpu.func @single_dealloc_after_cta_barrier(%slot: !llvm.ptr<3>, %t: !llvm.ptr<6>, %out: !llvm.ptr<3>) kernel attributes {known_block_size = array<i32: 128, 1, 1>, known_cluster_size = array<i32: 2, 1, 1>} {
    %p = pipeline.create : !P
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %c32 = arith.constant 32 : i32
    %c0 = arith.constant 0 : i32
    %c64 = arith.constant 64 : i32
    %warp = arith.divui %tid, %c32 : i32
    %mma = arith.cmpi eq, %warp, %c0 : i32
    scf.if %mma {
      nvvm.tcgen05.alloc %slot, %c64 : !llvm.ptr<3>, i32
      nvvm.tcgen05.relinquish_alloc_permit
    }
    nvvm.tcgen05.fence <before>
    nvvm.barrier0
    nvvm.tcgen05.fence <after>
    nvvm.tcgen05.fence <before>
    nvvm.barrier0
    scf.if %mma {
      nvvm.tcgen05.fence <after>
      nvvm.tcgen05.dealloc %t, %c64 : !llvm.ptr<6>, i32
    }
    gpu.return
  }
}
