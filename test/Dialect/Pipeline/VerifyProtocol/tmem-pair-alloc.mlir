// A CTA pair's tensor memory allocation (tcgen05.alloc.cta_group::2): the
// issuing warp must make sure the peer CTA has launched and takes part in
// the pair's collective ops (PTX ISA, tcgen05.alloc; NVIDIA/cutlass#3316),
// so a cluster barrier (barrier.cluster.wait, or the pipelines' init wait
// of the cluster) lies before the alloc on every path. CTA barriers and
// mbarrier inits say nothing of the peer. Each bug has its twin; a chunk
// without expected-* lines is correct: any diagnostic fails it.
// RUN: pipeline-opt --pipeline-verify-protocol -split-input-file -verify-diagnostics %s

// The bug (CUTLASS's 2-SM tutorials before #3316): the pair allocates right
// after the CTA's barrier init, with only a CTA barrier before it; the
// cluster's init sync comes after the alloc.
!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>

gpu.module @m {
  gpu.func @pair_alloc_before_any_cluster_barrier(%slot: !llvm.ptr<3>, %t: !llvm.ptr<6>, %c: i1) kernel attributes {known_block_size = array<i32: 128, 1, 1>, known_cluster_size = array<i32: 2, 1, 1>} {
    %p = pipeline.create {defer_sync} : !P
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %c32 = arith.constant 32 : i32
    %c0 = arith.constant 0 : i32
    %c64 = arith.constant 64 : i32
    %warp = arith.divui %tid, %c32 : i32
    %mma = arith.cmpi eq, %warp, %c0 : i32
    nvvm.barrier0
    scf.if %mma {
      // expected-error @+1 {{TMEM alloc: this tcgen05.alloc.cta_group::2 allocates for a CTA pair with no cluster barrier before it on every path (rule: the issuing warp must make sure the peer CTA has launched}}
      nvvm.tcgen05.alloc %slot, %c64 {group = #nvvm.cta_group<cta_2>} : !llvm.ptr<3>, i32
      nvvm.tcgen05.relinquish_alloc_permit {group = #nvvm.cta_group<cta_2>}
    }
    nvvm.tcgen05.fence <before>
    nvvm.barrier0
    nvvm.tcgen05.fence <after>
    pipeline.init_arrive {cluster_size = 2}
    pipeline.init_wait {cluster_size = 2}
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

// The twin: the cluster's init sync first, then the alloc; bar.sync 0
// publishes the address (the pair Blackwell GEMM's order).
!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>

gpu.module @m {
  gpu.func @pair_alloc_after_cluster_init(%slot: !llvm.ptr<3>, %t: !llvm.ptr<6>, %c: i1) kernel attributes {known_block_size = array<i32: 128, 1, 1>, known_cluster_size = array<i32: 2, 1, 1>} {
    %p = pipeline.create {defer_sync} : !P
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %c32 = arith.constant 32 : i32
    %c0 = arith.constant 0 : i32
    %c64 = arith.constant 64 : i32
    %warp = arith.divui %tid, %c32 : i32
    %mma = arith.cmpi eq, %warp, %c0 : i32
    pipeline.init_arrive {cluster_size = 2}
    pipeline.init_wait {cluster_size = 2}
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

// Also correct: k.cluster_sync() (barrier.cluster arrive + wait) before the
// alloc.
!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>

gpu.module @m {
  gpu.func @pair_alloc_after_cluster_sync(%slot: !llvm.ptr<3>, %t: !llvm.ptr<6>, %c: i1) kernel attributes {known_block_size = array<i32: 128, 1, 1>, known_cluster_size = array<i32: 2, 1, 1>} {
    %p = pipeline.create {defer_sync} : !P
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %c32 = arith.constant 32 : i32
    %c0 = arith.constant 0 : i32
    %c64 = arith.constant 64 : i32
    %warp = arith.divui %tid, %c32 : i32
    %mma = arith.cmpi eq, %warp, %c0 : i32
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

// The bug: a cluster barrier only under a branch on a kernel argument: the
// path that skips it allocates with nothing known of the peer.
!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>

gpu.module @m {
  gpu.func @pair_alloc_after_a_branch_barrier(%slot: !llvm.ptr<3>, %t: !llvm.ptr<6>, %c: i1) kernel attributes {known_block_size = array<i32: 128, 1, 1>, known_cluster_size = array<i32: 2, 1, 1>} {
    %p = pipeline.create {defer_sync} : !P
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %c32 = arith.constant 32 : i32
    %c0 = arith.constant 0 : i32
    %c64 = arith.constant 64 : i32
    %warp = arith.divui %tid, %c32 : i32
    %mma = arith.cmpi eq, %warp, %c0 : i32
    scf.if %c {
      nvvm.cluster.arrive
      nvvm.cluster.wait
    }
    scf.if %mma {
      // expected-error @+1 {{TMEM alloc: this tcgen05.alloc.cta_group::2 allocates for a CTA pair with no cluster barrier before it on every path (rule: the issuing warp must make sure the peer CTA has launched}}
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

// Just on the other side: one CTA's tensor memory (cta_group::1) in a
// cluster needs no cluster barrier before its alloc.
!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>

gpu.module @m {
  gpu.func @single_alloc_without_cluster_barrier(%slot: !llvm.ptr<3>, %t: !llvm.ptr<6>, %c: i1) kernel attributes {known_block_size = array<i32: 128, 1, 1>, known_cluster_size = array<i32: 2, 1, 1>} {
    %p = pipeline.create {defer_sync} : !P
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %c32 = arith.constant 32 : i32
    %c0 = arith.constant 0 : i32
    %c64 = arith.constant 64 : i32
    %warp = arith.divui %tid, %c32 : i32
    %mma = arith.cmpi eq, %warp, %c0 : i32
    nvvm.barrier0
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
