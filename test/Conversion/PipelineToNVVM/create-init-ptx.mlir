// A create whose full and empty barriers count differently (TmaAsync: 1
// and 4), then warp 0's role branch with one verb, as the PTX shows them.
//
// - One elected block per barrier group, each barrier's address folded into
//   its init ([%r+8] ...). pipeline-to-cubin sets LLVM's
//   spec-exec-max-not-hoisted to 0: otherwise the speculative-execution pass
//   of NVPTX code generation hoists the address GEPs (but not the inits) out
//   of each elected block, and instruction selection, one block at a time,
//   emits one add.s32 per barrier (the second run, partial-speculation=true,
//   which is LLVM's default).
// - The role branch tests warp 0 as tid.x / 32 (the kernel layer's warp_idx
//   in a 1-D block): LLVM folds it to the create's tid.x < 32, one setp for
//   both.
// RUN: pipeline-opt %s --pipeline-to-cubin="chip=sm_90a format=isa verify-protocol=false" | %python %S/Inputs/ptx.py | FileCheck %s
// RUN: pipeline-opt %s --pipeline-to-cubin="chip=sm_90a format=isa verify-protocol=false partial-speculation=true" | %python %S/Inputs/ptx.py | FileCheck %s --check-prefix=PARTIAL

!P = !pipeline.pipeline<tma_async, stages = 4, producer = #pipeline.group<thread, 1>,
                        consumer = #pipeline.group<thread, 4>, tx_count = 4096>
!PS = !pipeline.state<4, producer>

// CHECK: setp.gt.u32 [[NOT_WARP0:%p[0-9]+]], %r{{[0-9]+}}, 31;
// CHECK-NEXT: @[[NOT_WARP0]] bra
// CHECK-NOT: add.s32
// CHECK: elect.sync
// CHECK-NOT: add.s32
// CHECK: mbarrier.init.shared.b64 [[[BASE:%r[0-9]+]]], [[ONE:%r[0-9]+]];
// CHECK-NEXT: mbarrier.init.shared.b64 [[[BASE]]+8], [[ONE]];
// CHECK-NEXT: mbarrier.init.shared.b64 [[[BASE]]+16], [[ONE]];
// CHECK-NEXT: mbarrier.init.shared.b64 [[[BASE]]+24], [[ONE]];
// CHECK: elect.sync
// CHECK-NOT: add.s32
// CHECK: mbarrier.init.shared.b64 [[[BASE]]+32], [[FOUR:%r[0-9]+]];
// CHECK-NEXT: mbarrier.init.shared.b64 [[[BASE]]+40], [[FOUR]];
// CHECK-NEXT: mbarrier.init.shared.b64 [[[BASE]]+48], [[FOUR]];
// CHECK-NEXT: mbarrier.init.shared.b64 [[[BASE]]+56], [[FOUR]];
// CHECK: fence.mbarrier_init.release.cluster;
// CHECK-NEXT: bar.sync 0;
// The role branch: the create's predicate again, no second compare.
// CHECK-NEXT: @[[NOT_WARP0]] bra
// CHECK-NOT: setp
// CHECK: mbarrier.try_wait.parity.shared.b64
// CHECK: mbarrier.arrive.expect_tx.shared.b64

// PARTIAL: elect.sync
// PARTIAL: add.s32
// PARTIAL: mbarrier.init.shared.b64
// PARTIAL: elect.sync
// PARTIAL: add.s32
// PARTIAL: mbarrier.init.shared.b64

module attributes {gpu.container_module} {
gpu.module @create_init {
  gpu.func @create_init(%smem: !llvm.ptr<3>, %index: i32, %phase: i32) kernel
      attributes {known_block_size = array<i32: 64, 1, 1>} {
    %p = pipeline.create storage(%smem : !llvm.ptr<3>) : !P
    %c0 = arith.constant 0 : i32
    %c32 = arith.constant 32 : i32
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %warp = arith.divsi %tid, %c32 : i32
    %is0 = arith.cmpi eq, %warp, %c0 : i32
    scf.if %is0 {
      %s = pipeline.state.make index %index phase %phase : !PS
      pipeline.producer.acquire %p, %s : !P, !PS
    }
    gpu.return
  }
}
}
