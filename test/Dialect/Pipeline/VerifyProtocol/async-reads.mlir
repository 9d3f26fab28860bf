// Property 8: a stage is released (or re-acquired) only after the
// asynchronous readers of its buffer are done: wgmma groups retired by
// wgmma.wait_group, tcgen05.mma covered by a tcgen05.commit, bulk stores
// waited with cp.async.bulk.wait_group.read. Each bug has its correct twin.
// RUN: pipeline-opt --pipeline-verify-protocol -split-input-file -verify-diagnostics %s

!P = !pipeline.pipeline<tma_async, stages = 4, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 4>, tx_count = 1024>
!cs = !pipeline.state<4, consumer>
!acc = !llvm.struct<(f32, f32, f32, f32)>

// The wgmma group is committed but not waited for: the producer may refill
// the stage while the tensor cores still read it.
func.func @release_before_wgmma_wait(%n: index, %base: i64, %acc0: !acc) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %step = arith.constant 1024 : i64
  %p = pipeline.create {name = "ab"} : !P
  %c = pipeline.state.make : !cs
  %r:2 = scf.for %i = %c0 to %n step %c1 iter_args(%s = %c, %acc = %acc0) -> (!cs, !acc) {
    pipeline.consumer.wait %p, %s : !P, !cs
    %idx = pipeline.state.index %s : !cs
    %idx64 = arith.extui %idx : i32 to i64
    %off = arith.muli %idx64, %step : i64
    %desc = arith.addi %base, %off : i64
    nvvm.wgmma.fence.aligned
    // expected-note @+1 {{the asynchronous read of that stage, still in flight at the release}}
    %d = nvvm.wgmma.mma_async %desc, %desc, %acc, <m = 64, n = 8, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>] : !acc -> !acc
    nvvm.wgmma.commit.group.sync.aligned
    // expected-error @+1 {{pipeline.consumer.release hands back a stage of pipeline 'ab' while nvvm.wgmma.mma_async may still read it asynchronously: its wgmma group is committed but not retired; add nvvm.wgmma.wait.group.sync.aligned N with N <= 0}}
    pipeline.consumer.release %p, %s : !P, !cs
    %s1 = pipeline.state.advance %s : !cs
    scf.yield %s1, %d : !cs, !acc
  }
  return
}

// -----

!P = !pipeline.pipeline<tma_async, stages = 4, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 4>, tx_count = 1024>
!cs = !pipeline.state<4, consumer>
!acc = !llvm.struct<(f32, f32, f32, f32)>

// Twin: wait_group 0 retires the group before the release.
func.func @release_after_wgmma_wait(%n: index, %base: i64, %acc0: !acc) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %step = arith.constant 1024 : i64
  %p = pipeline.create {name = "ab"} : !P
  %c = pipeline.state.make : !cs
  %r:2 = scf.for %i = %c0 to %n step %c1 iter_args(%s = %c, %acc = %acc0) -> (!cs, !acc) {
    pipeline.consumer.wait %p, %s : !P, !cs
    %idx = pipeline.state.index %s : !cs
    %idx64 = arith.extui %idx : i32 to i64
    %off = arith.muli %idx64, %step : i64
    %desc = arith.addi %base, %off : i64
    nvvm.wgmma.fence.aligned
    %d = nvvm.wgmma.mma_async %desc, %desc, %acc, <m = 64, n = 8, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>] : !acc -> !acc
    nvvm.wgmma.commit.group.sync.aligned
    nvvm.wgmma.wait.group.sync.aligned 0
    pipeline.consumer.release %p, %s : !P, !cs
    %s1 = pipeline.state.advance %s : !cs
    scf.yield %s1, %d : !cs, !acc
  }
  return
}

// -----

!P = !pipeline.pipeline<tma_async, stages = 4, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 4>, tx_count = 1024>
!cs = !pipeline.state<4, consumer>
!acc = !llvm.struct<(f32, f32, f32, f32)>

// The Hopper GEMM's order with a lagging `release` state (one behind
// `read`), but wait_group 2: the group of the previous k-block, which reads
// the stage being released, may still be in flight.
func.func @lagged_release_wait_group_too_large(%n: index, %base: i64, %acc0: !acc) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %step = arith.constant 1024 : i64
  %p = pipeline.create {name = "ab"} : !P
  %read0 = pipeline.state.make : !cs
  %release0 = pipeline.state.make : !cs
  pipeline.consumer.wait %p, %read0 : !P, !cs
  %i0 = pipeline.state.index %read0 : !cs
  %i064 = arith.extui %i0 : i32 to i64
  %o0 = arith.muli %i064, %step : i64
  %d0 = arith.addi %base, %o0 : i64
  nvvm.wgmma.fence.aligned
  // expected-note @+1 {{the asynchronous read of that stage, still in flight at the release}}
  %acc1 = nvvm.wgmma.mma_async %d0, %d0, %acc0, <m = 64, n = 8, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>] : !acc -> !acc
  nvvm.wgmma.commit.group.sync.aligned
  %read1 = pipeline.state.advance %read0 : !cs
  %r:3 = scf.for %i = %c1 to %n step %c1 iter_args(%read = %read1, %release = %release0, %acc = %acc1) -> (!cs, !cs, !acc) {
    pipeline.consumer.wait %p, %read : !P, !cs
    %idx = pipeline.state.index %read : !cs
    %idx64 = arith.extui %idx : i32 to i64
    %off = arith.muli %idx64, %step : i64
    %desc = arith.addi %base, %off : i64
    nvvm.wgmma.fence.aligned
    %d = nvvm.wgmma.mma_async %desc, %desc, %acc, <m = 64, n = 8, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>] : !acc -> !acc
    nvvm.wgmma.commit.group.sync.aligned
    nvvm.wgmma.wait.group.sync.aligned 2
    // expected-error @+1 {{may still read it asynchronously: its wgmma group is committed but not retired; add nvvm.wgmma.wait.group.sync.aligned N with N <= 1}}
    pipeline.consumer.release %p, %release : !P, !cs
    %read2 = pipeline.state.advance %read : !cs
    %release2 = pipeline.state.advance %release : !cs
    scf.yield %read2, %release2, %d : !cs, !cs, !acc
  }
  nvvm.wgmma.wait.group.sync.aligned 0
  pipeline.consumer.release %p, %r#1 : !P, !cs
  return
}

// -----

!P = !pipeline.pipeline<tma_async, stages = 4, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 4>, tx_count = 1024>
!cs = !pipeline.state<4, consumer>
!acc = !llvm.struct<(f32, f32, f32, f32)>

// Twin: wait_group 1 leaves only the group just issued (it reads `read`,
// one stage ahead of `release`) in flight.
func.func @lagged_release_wait_group_one(%n: index, %base: i64, %acc0: !acc) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %step = arith.constant 1024 : i64
  %p = pipeline.create {name = "ab"} : !P
  %read0 = pipeline.state.make : !cs
  %release0 = pipeline.state.make : !cs
  pipeline.consumer.wait %p, %read0 : !P, !cs
  %i0 = pipeline.state.index %read0 : !cs
  %i064 = arith.extui %i0 : i32 to i64
  %o0 = arith.muli %i064, %step : i64
  %d0 = arith.addi %base, %o0 : i64
  nvvm.wgmma.fence.aligned
  %acc1 = nvvm.wgmma.mma_async %d0, %d0, %acc0, <m = 64, n = 8, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>] : !acc -> !acc
  nvvm.wgmma.commit.group.sync.aligned
  %read1 = pipeline.state.advance %read0 : !cs
  %r:3 = scf.for %i = %c1 to %n step %c1 iter_args(%read = %read1, %release = %release0, %acc = %acc1) -> (!cs, !cs, !acc) {
    pipeline.consumer.wait %p, %read : !P, !cs
    %idx = pipeline.state.index %read : !cs
    %idx64 = arith.extui %idx : i32 to i64
    %off = arith.muli %idx64, %step : i64
    %desc = arith.addi %base, %off : i64
    nvvm.wgmma.fence.aligned
    %d = nvvm.wgmma.mma_async %desc, %desc, %acc, <m = 64, n = 8, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>] : !acc -> !acc
    nvvm.wgmma.commit.group.sync.aligned
    nvvm.wgmma.wait.group.sync.aligned 1
    pipeline.consumer.release %p, %release : !P, !cs
    %read2 = pipeline.state.advance %read : !cs
    %release2 = pipeline.state.advance %release : !cs
    scf.yield %read2, %release2, %d : !cs, !cs, !acc
  }
  nvvm.wgmma.wait.group.sync.aligned 0
  pipeline.consumer.release %p, %r#1 : !P, !cs
  return
}

// -----

!P = !pipeline.pipeline<tma_async, stages = 4, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 4>, tx_count = 1024>
!cs = !pipeline.state<4, consumer>
!acc = !llvm.struct<(f32, f32, f32, f32)>

// Release between the wgmma and its commit: not even committed.
func.func @release_before_wgmma_commit(%base: i64, %acc: !acc) {
  %step = arith.constant 1024 : i64
  %p = pipeline.create {name = "ab"} : !P
  %s = pipeline.state.make : !cs
  pipeline.consumer.wait %p, %s : !P, !cs
  %idx = pipeline.state.index %s : !cs
  %idx64 = arith.extui %idx : i32 to i64
  %off = arith.muli %idx64, %step : i64
  %desc = arith.addi %base, %off : i64
  nvvm.wgmma.fence.aligned
  // expected-note @+1 {{still in flight at the release}}
  %d = nvvm.wgmma.mma_async %desc, %desc, %acc, <m = 64, n = 8, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>] : !acc -> !acc
  // expected-error @+1 {{the wgmma is not even committed}}
  pipeline.consumer.release %p, %s : !P, !cs
  nvvm.wgmma.commit.group.sync.aligned
  nvvm.wgmma.wait.group.sync.aligned 0
  return
}

// -----

!P = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 1>, tx_count = 1024>
!cs = !pipeline.state<2, consumer>

// tcgen05.mma from a stage of a pipeline whose release is a plain mbarrier
// arrive (tma_async): nothing tracks the MMA's reads.
func.func @tcgen05_mma_plain_release(%d: !llvm.ptr<6>, %base: i64, %idesc: i32, %acc: i1) {
  %step = arith.constant 1024 : i64
  %p = pipeline.create {name = "ab"} : !P
  %s = pipeline.state.make : !cs
  pipeline.consumer.wait %p, %s : !P, !cs
  %idx = pipeline.state.index %s : !cs
  %idx64 = arith.extui %idx : i32 to i64
  %off = arith.muli %idx64, %step : i64
  %desc = arith.addi %base, %off : i64
  // expected-note @+1 {{still in flight at the release}}
  nvvm.tcgen05.mma %d, %desc, %desc, %idesc, %acc {ctaGroup = #nvvm.cta_group<cta_1>, kind = #nvvm.tcgen05_mma_kind<f16>} : (!llvm.ptr<6>, i64, i64, i32, i1)
  // expected-error @+1 {{the tcgen05.mma is not covered by a tcgen05.commit and this op is a plain mbarrier arrive}}
  pipeline.consumer.release %p, %s : !P, !cs
  return
}

// -----

!P = !pipeline.pipeline<tma_umma, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 1>, tx_count = 1024>
!cs = !pipeline.state<2, consumer>

// Twin: a tma_umma consumer's release is the tcgen05.commit of the MMAs.
func.func @tcgen05_mma_umma_release(%d: !llvm.ptr<6>, %base: i64, %idesc: i32, %acc: i1) {
  %step = arith.constant 1024 : i64
  %p = pipeline.create {name = "ab"} : !P
  %s = pipeline.state.make : !cs
  pipeline.consumer.wait %p, %s : !P, !cs
  %idx = pipeline.state.index %s : !cs
  %idx64 = arith.extui %idx : i32 to i64
  %off = arith.muli %idx64, %step : i64
  %desc = arith.addi %base, %off : i64
  nvvm.tcgen05.mma %d, %desc, %desc, %idesc, %acc {ctaGroup = #nvvm.cta_group<cta_1>, kind = #nvvm.tcgen05_mma_kind<f16>} : (!llvm.ptr<6>, i64, i64, i32, i1)
  pipeline.consumer.release %p, %s : !P, !cs
  return
}

// -----

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 1>>
!cs = !pipeline.state<2, consumer>

// A TMA store from the stage, committed but released without waiting for
// its reads.
func.func @tma_store_release_unwaited(%desc: !llvm.ptr, %ring: !llvm.ptr<3>, %x: i32) {
  %p = pipeline.create {name = "st"} : !P
  %s = pipeline.state.make : !cs
  pipeline.consumer.wait %p, %s : !P, !cs
  %idx = pipeline.state.index %s : !cs
  %src = llvm.getelementptr %ring[%idx] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, !llvm.array<1024 x i8>
  // expected-note @+1 {{still in flight at the release}}
  pipeline.copy.tma_store %desc[%x, %x] from %src : !llvm.ptr, !llvm.ptr<3>
  pipeline.bulk_group.commit
  // expected-error @+1 {{its bulk group is committed but may still be reading shared memory; add cp.async.bulk.wait_group.read N (pipeline.bulk_group.wait {read, pending = N}) with N <= 0}}
  pipeline.consumer.release %p, %s : !P, !cs
  pipeline.bulk_group.wait {read}
  return
}

// -----

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 1>>
!cs = !pipeline.state<2, consumer>

// Twin: wait_group.read 0 first.
func.func @tma_store_release_waited(%desc: !llvm.ptr, %ring: !llvm.ptr<3>, %x: i32) {
  %p = pipeline.create {name = "st"} : !P
  %s = pipeline.state.make : !cs
  pipeline.consumer.wait %p, %s : !P, !cs
  %idx = pipeline.state.index %s : !cs
  %src = llvm.getelementptr %ring[%idx] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, !llvm.array<1024 x i8>
  pipeline.copy.tma_store %desc[%x, %x] from %src : !llvm.ptr, !llvm.ptr<3>
  pipeline.bulk_group.commit
  pipeline.bulk_group.wait {read}
  pipeline.consumer.release %p, %s : !P, !cs
  return
}

// -----

!P = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 1>, tx_count = 1024>
!Q = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 1>, tx_count = 1024>
!cs = !pipeline.state<2, consumer>
!acc = !llvm.struct<(f32, f32, f32, f32)>

// Limit, no false positive: the in-flight wgmma reads a stage of pipeline
// 'k' (its state chain is used with 'k' only); releasing the same index of
// 'v' is fine even though both states start from identical state.make ops.
func.func @other_pipeline_same_index(%base: i64, %acc: !acc) {
  %step = arith.constant 1024 : i64
  %k = pipeline.create {name = "k"} : !P
  %v = pipeline.create {name = "v"} : !Q
  %sk = pipeline.state.make : !cs
  %sv = pipeline.state.make : !cs
  pipeline.consumer.wait %k, %sk : !P, !cs
  pipeline.consumer.wait %v, %sv : !Q, !cs
  %idx = pipeline.state.index %sk : !cs
  %idx64 = arith.extui %idx : i32 to i64
  %off = arith.muli %idx64, %step : i64
  %desc = arith.addi %base, %off : i64
  %d = nvvm.wgmma.mma_async %desc, %desc, %acc, <m = 64, n = 8, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>] : !acc -> !acc
  nvvm.wgmma.commit.group.sync.aligned
  pipeline.consumer.release %v, %sv : !Q, !cs
  nvvm.wgmma.wait.group.sync.aligned 0
  pipeline.consumer.release %k, %sk : !P, !cs
  return
}

// -----

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 1>>
!cs = !pipeline.state<2, consumer>

// No false positive: one elected thread stores from the stage and waits for
// the store's reads in its own guarded branch before the release.
func.func @elected_store_waited_in_the_guard(%desc: !llvm.ptr, %ring: !llvm.ptr<3>, %x: i32) {
  %p = pipeline.create {name = "st"} : !P
  %s = pipeline.state.make : !cs
  pipeline.consumer.wait %p, %s : !P, !cs
  %idx = pipeline.state.index %s : !cs
  %src = llvm.getelementptr %ring[%idx] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, !llvm.array<1024 x i8>
  %e = nvvm.elect.sync -> i1
  scf.if %e {
    pipeline.copy.tma_store %desc[%x, %x] from %src : !llvm.ptr, !llvm.ptr<3>
    pipeline.bulk_group.commit
  }
  %e2 = nvvm.elect.sync -> i1
  scf.if %e2 {
    pipeline.bulk_group.wait {read}
  }
  pipeline.consumer.release %p, %s {elect_one} : !P, !cs
  return
}

// -----

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 1>>
!cs = !pipeline.state<2, consumer>

// Its bug twin: the elected thread stores and commits, nobody waits.
func.func @elected_store_never_waited(%desc: !llvm.ptr, %ring: !llvm.ptr<3>, %x: i32) {
  %p = pipeline.create {name = "st"} : !P
  %s = pipeline.state.make : !cs
  pipeline.consumer.wait %p, %s : !P, !cs
  %idx = pipeline.state.index %s : !cs
  %src = llvm.getelementptr %ring[%idx] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, !llvm.array<1024 x i8>
  %e = nvvm.elect.sync -> i1
  scf.if %e {
    // expected-note @+1 {{still in flight at the release}}
    pipeline.copy.tma_store %desc[%x, %x] from %src : !llvm.ptr, !llvm.ptr<3>
    pipeline.bulk_group.commit
  }
  // expected-error @+1 {{its bulk group is committed but may still be reading shared memory}}
  pipeline.consumer.release %p, %s {elect_one} : !P, !cs
  return
}

// -----

!P = !pipeline.pipeline<tma_async, stages = 4, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 4>, tx_count = 1024>
!cs = !pipeline.state<4, consumer>
!acc = !llvm.struct<(f32, f32, f32, f32)>

// The register-A wgmma (WarpgroupMma.mma_rs: A in registers, one inline-asm
// instruction, as attention's P V) reads its B descriptor's stage
// asynchronously too: releasing it before the group retires is the same bug.
func.func @register_a_wgmma_release_before_wait(%n: index, %base: i64, %acc0: !acc, %a: i32) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %one = arith.constant 1 : i32
  %step = arith.constant 1024 : i64
  %p = pipeline.create {name = "v"} : !P
  %c = pipeline.state.make : !cs
  %r:2 = scf.for %i = %c0 to %n step %c1 iter_args(%s = %c, %acc = %acc0) -> (!cs, !acc) {
    pipeline.consumer.wait %p, %s : !P, !cs
    %idx = pipeline.state.index %s : !cs
    %idx64 = arith.extui %idx : i32 to i64
    %off = arith.muli %idx64, %step : i64
    %desc = arith.addi %base, %off : i64
    %v0 = llvm.extractvalue %acc[0] : !acc
    %v1 = llvm.extractvalue %acc[1] : !acc
    %v2 = llvm.extractvalue %acc[2] : !acc
    %v3 = llvm.extractvalue %acc[3] : !acc
    nvvm.wgmma.fence.aligned
    // expected-note @+1 {{the asynchronous read of that stage, still in flight at the release}}
    %d = llvm.inline_asm has_side_effects "{\0A.reg .pred p;\0Asetp.ne.b32 p, $12, 0;\0Awgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {$0, $1, $2, $3}, {$8, $9, $10, $11}, $12, p, 1, 1, 1;\0A}\0A", "=f,=f,=f,=f,0,1,2,3,r,r,r,r,l,n" %v0, %v1, %v2, %v3, %a, %a, %a, %a, %desc, %one : (f32, f32, f32, f32, i32, i32, i32, i32, i64, i32) -> !acc
    nvvm.wgmma.commit.group.sync.aligned
    // expected-error @+1 {{pipeline.consumer.release hands back a stage of pipeline 'v' while wgmma.mma_async with A in registers (llvm.inline_asm) may still read it asynchronously}}
    pipeline.consumer.release %p, %s : !P, !cs
    %s1 = pipeline.state.advance %s : !cs
    scf.yield %s1, %d : !cs, !acc
  }
  return
}

// -----

!P = !pipeline.pipeline<tma_async, stages = 4, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 4>, tx_count = 1024>
!cs = !pipeline.state<4, consumer>
!acc = !llvm.struct<(f32, f32, f32, f32)>

// Twin: wait_group 0 retires the register-A wgmma before the release.
func.func @register_a_wgmma_release_after_wait(%n: index, %base: i64, %acc0: !acc, %a: i32) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %one = arith.constant 1 : i32
  %step = arith.constant 1024 : i64
  %p = pipeline.create {name = "v"} : !P
  %c = pipeline.state.make : !cs
  %r:2 = scf.for %i = %c0 to %n step %c1 iter_args(%s = %c, %acc = %acc0) -> (!cs, !acc) {
    pipeline.consumer.wait %p, %s : !P, !cs
    %idx = pipeline.state.index %s : !cs
    %idx64 = arith.extui %idx : i32 to i64
    %off = arith.muli %idx64, %step : i64
    %desc = arith.addi %base, %off : i64
    %v0 = llvm.extractvalue %acc[0] : !acc
    %v1 = llvm.extractvalue %acc[1] : !acc
    %v2 = llvm.extractvalue %acc[2] : !acc
    %v3 = llvm.extractvalue %acc[3] : !acc
    nvvm.wgmma.fence.aligned
    %d = llvm.inline_asm has_side_effects "{\0A.reg .pred p;\0Asetp.ne.b32 p, $12, 0;\0Awgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {$0, $1, $2, $3}, {$8, $9, $10, $11}, $12, p, 1, 1, 1;\0A}\0A", "=f,=f,=f,=f,0,1,2,3,r,r,r,r,l,n" %v0, %v1, %v2, %v3, %a, %a, %a, %a, %desc, %one : (f32, f32, f32, f32, i32, i32, i32, i32, i64, i32) -> !acc
    nvvm.wgmma.commit.group.sync.aligned
    nvvm.wgmma.wait.group.sync.aligned 0
    pipeline.consumer.release %p, %s : !P, !cs
    %s1 = pipeline.state.advance %s : !cs
    scf.yield %s1, %d : !cs, !acc
  }
  return
}

// -----

!P = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 1>, tx_count = 1024>
!ps = !pipeline.state<2, producer>

llvm.mlir.global internal @ring() {addr_space = 3 : i32} : !llvm.array<2048 x i8>
llvm.mlir.global internal @cbuf() {addr_space = 3 : i32} : !llvm.array<1024 x i8>

// A refill under the same thread's bulk store (uccl-project/mKernel#18):
// the ring's first buffer also holds the output tile, TMA-stored at the
// end of each iteration; the next iteration's load refills the ring with
// no wait for the store's reads (the copies cycle through every stage, so
// one of them overwrites the buffer the store still reads).
func.func @refill_under_own_store(%desc: !llvm.ptr, %out: !llvm.ptr, %n: index, %x: i32) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %bytes = arith.constant 1024 : i32
  %p = pipeline.create {name = "ring"} : !P
  %ring = llvm.mlir.addressof @ring : !llvm.ptr<3>
  %cbuf = llvm.mlir.addressof @cbuf : !llvm.ptr<3>
  %s0 = pipeline.state.make : !ps
  %sN = scf.for %t = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
    pipeline.producer.acquire %p, %s : !P, !ps
    %i = pipeline.state.index %s : !ps
    %off = arith.muli %i, %bytes : i32
    %dst = llvm.getelementptr %ring[%off] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
    // expected-error @+1 {{pipeline.copy.tma_load refills a stage of pipeline 'ring' whose buffer a bulk store issued by this thread may still read}}
    pipeline.copy.tma_load %p, %s, %desc[%x, %x] to %dst {bytes = 1024 : i64} : !P, !ps, !llvm.ptr, !llvm.ptr<3>
    // expected-note @+1 {{the bulk store of that buffer, still in flight at the copy}}
    pipeline.copy.tma_store %out[%x, %x] from %ring : !llvm.ptr, !llvm.ptr<3>
    pipeline.bulk_group.commit
    %next = pipeline.state.advance %s : !ps
    scf.yield %next : !ps
  }
  pipeline.bulk_group.wait {read}
  pipeline.producer.tail %p, %sN : !P, !ps
  return
}

// -----

!P = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 1>, tx_count = 1024>
!ps = !pipeline.state<2, producer>

llvm.mlir.global internal @ring() {addr_space = 3 : i32} : !llvm.array<2048 x i8>
llvm.mlir.global internal @cbuf() {addr_space = 3 : i32} : !llvm.array<1024 x i8>

// Twin: the store's reads waited for before the first copy of the
// iteration.
func.func @refill_after_own_store_waited(%desc: !llvm.ptr, %out: !llvm.ptr, %n: index, %x: i32) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %bytes = arith.constant 1024 : i32
  %p = pipeline.create {name = "ring"} : !P
  %ring = llvm.mlir.addressof @ring : !llvm.ptr<3>
  %cbuf = llvm.mlir.addressof @cbuf : !llvm.ptr<3>
  %s0 = pipeline.state.make : !ps
  %sN = scf.for %t = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
    pipeline.bulk_group.wait {read}
    pipeline.producer.acquire %p, %s : !P, !ps
    %i = pipeline.state.index %s : !ps
    %off = arith.muli %i, %bytes : i32
    %dst = llvm.getelementptr %ring[%off] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
    pipeline.copy.tma_load %p, %s, %desc[%x, %x] to %dst {bytes = 1024 : i64} : !P, !ps, !llvm.ptr, !llvm.ptr<3>
    pipeline.copy.tma_store %out[%x, %x] from %ring : !llvm.ptr, !llvm.ptr<3>
    pipeline.bulk_group.commit
    %next = pipeline.state.advance %s : !ps
    scf.yield %next : !ps
  }
  pipeline.bulk_group.wait {read}
  pipeline.producer.tail %p, %sN : !P, !ps
  return
}

// -----

!P = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 1>, tx_count = 1024>
!ps = !pipeline.state<2, producer>

llvm.mlir.global internal @ring() {addr_space = 3 : i32} : !llvm.array<2048 x i8>
llvm.mlir.global internal @cbuf() {addr_space = 3 : i32} : !llvm.array<1024 x i8>

// Boundary, correct: the store reads another allocation (a C staging
// buffer): the copies into the ring do not overwrite it.
func.func @refill_beside_other_buffer_store(%desc: !llvm.ptr, %out: !llvm.ptr, %n: index, %x: i32) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %bytes = arith.constant 1024 : i32
  %p = pipeline.create {name = "ring"} : !P
  %ring = llvm.mlir.addressof @ring : !llvm.ptr<3>
  %cbuf = llvm.mlir.addressof @cbuf : !llvm.ptr<3>
  %s0 = pipeline.state.make : !ps
  %sN = scf.for %t = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
    pipeline.producer.acquire %p, %s : !P, !ps
    %i = pipeline.state.index %s : !ps
    %off = arith.muli %i, %bytes : i32
    %dst = llvm.getelementptr %ring[%off] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
    pipeline.copy.tma_load %p, %s, %desc[%x, %x] to %dst {bytes = 1024 : i64} : !P, !ps, !llvm.ptr, !llvm.ptr<3>
    pipeline.copy.tma_store %out[%x, %x] from %cbuf : !llvm.ptr, !llvm.ptr<3>
    pipeline.bulk_group.commit
    %next = pipeline.state.advance %s : !ps
    scf.yield %next : !ps
  }
  pipeline.bulk_group.wait {read}
  pipeline.producer.tail %p, %sN : !P, !ps
  return
}

// -----

!P = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 1>, tx_count = 1024>
!ps = !pipeline.state<2, producer>

llvm.mlir.global internal @ring() {addr_space = 3 : i32} : !llvm.array<3072 x i8>

// Boundary, correct: one allocation holds the two stages (bytes 0 to 2047)
// and, after them, the output tile the store reads (from byte 2048; a
// tensor store's box is taken to run to the allocation's end): the copies
// into the stages write no byte of it, adjacent as they are.
func.func @refill_beside_store_in_same_allocation(%desc: !llvm.ptr, %out: !llvm.ptr, %n: index, %x: i32) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %bytes = arith.constant 1024 : i32
  %p = pipeline.create {name = "ring"} : !P
  %ring = llvm.mlir.addressof @ring : !llvm.ptr<3>
  %ctile = llvm.getelementptr %ring[2048] : (!llvm.ptr<3>) -> !llvm.ptr<3>, i8
  %s0 = pipeline.state.make : !ps
  %sN = scf.for %t = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
    pipeline.producer.acquire %p, %s : !P, !ps
    %i = pipeline.state.index %s : !ps
    %off = arith.muli %i, %bytes : i32
    %dst = llvm.getelementptr %ring[%off] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
    pipeline.copy.tma_load %p, %s, %desc[%x, %x] to %dst {bytes = 1024 : i64} : !P, !ps, !llvm.ptr, !llvm.ptr<3>
    pipeline.copy.tma_store %out[%x, %x] from %ctile : !llvm.ptr, !llvm.ptr<3>
    pipeline.bulk_group.commit
    %next = pipeline.state.advance %s : !ps
    scf.yield %next : !ps
  }
  pipeline.bulk_group.wait {read}
  pipeline.producer.tail %p, %sN : !P, !ps
  return
}

// -----

!P = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 1>, tx_count = 1024>
!ps = !pipeline.state<2, producer>

llvm.mlir.global internal @ring() {addr_space = 3 : i32} : !llvm.array<3072 x i8>

// Bug: the output tile starts one byte inside the second stage (byte
// 2047): the copy into that stage overwrites a byte the store may still
// read.
func.func @refill_one_byte_into_store(%desc: !llvm.ptr, %out: !llvm.ptr, %n: index, %x: i32) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %bytes = arith.constant 1024 : i32
  %p = pipeline.create {name = "ring"} : !P
  %ring = llvm.mlir.addressof @ring : !llvm.ptr<3>
  %ctile = llvm.getelementptr %ring[2047] : (!llvm.ptr<3>) -> !llvm.ptr<3>, i8
  %s0 = pipeline.state.make : !ps
  %sN = scf.for %t = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
    pipeline.producer.acquire %p, %s : !P, !ps
    %i = pipeline.state.index %s : !ps
    %off = arith.muli %i, %bytes : i32
    %dst = llvm.getelementptr %ring[%off] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
    // expected-error @+1 {{pipeline.copy.tma_load refills a stage of pipeline 'ring' whose buffer a bulk store issued by this thread may still read}}
    pipeline.copy.tma_load %p, %s, %desc[%x, %x] to %dst {bytes = 1024 : i64} : !P, !ps, !llvm.ptr, !llvm.ptr<3>
    // expected-note @+1 {{the bulk store of that buffer, still in flight at the copy}}
    pipeline.copy.tma_store %out[%x, %x] from %ctile : !llvm.ptr, !llvm.ptr<3>
    pipeline.bulk_group.commit
    %next = pipeline.state.advance %s : !ps
    scf.yield %next : !ps
  }
  pipeline.bulk_group.wait {read}
  pipeline.producer.tail %p, %sN : !P, !ps
  return
}

// -----

!P = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 1>, tx_count = 1024>
!ps = !pipeline.state<2, producer>

llvm.mlir.global internal @ring() {addr_space = 3 : i32} : !llvm.array<3072 x i8>

// Boundary, correct: the output tile sits before the stages (bytes 0 to
// 1023, the stages from byte 1024) and a bulk copy of exactly its 1024
// bytes stores it: adjacent to the first stage, not in it.
func.func @refill_after_sized_store_before_stages(%desc: !llvm.ptr, %out: !llvm.ptr<1>, %n: index, %x: i32) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %bytes = arith.constant 1024 : i32
  %p = pipeline.create {name = "ring"} : !P
  %ring = llvm.mlir.addressof @ring : !llvm.ptr<3>
  %stages = llvm.getelementptr %ring[1024] : (!llvm.ptr<3>) -> !llvm.ptr<3>, i8
  %s0 = pipeline.state.make : !ps
  %sN = scf.for %t = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
    pipeline.producer.acquire %p, %s : !P, !ps
    %i = pipeline.state.index %s : !ps
    %off = arith.muli %i, %bytes : i32
    %dst = llvm.getelementptr %stages[%off] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
    pipeline.copy.tma_load %p, %s, %desc[%x, %x] to %dst {bytes = 1024 : i64} : !P, !ps, !llvm.ptr, !llvm.ptr<3>
    nvvm.cp.async.bulk.global.shared.cta %out, %ring, %bytes : !llvm.ptr<1>, !llvm.ptr<3>
    pipeline.bulk_group.commit
    %next = pipeline.state.advance %s : !ps
    scf.yield %next : !ps
  }
  pipeline.bulk_group.wait {read}
  pipeline.producer.tail %p, %sN : !P, !ps
  return
}

// -----

!P = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 1>, tx_count = 1024>
!ps = !pipeline.state<2, producer>

llvm.mlir.global internal @ring() {addr_space = 3 : i32} : !llvm.array<3072 x i8>

// Bug: the same bulk copy stores 1025 bytes: its last byte is the first
// stage's first, which the copy into that stage overwrites.
func.func @refill_under_sized_store_one_byte_long(%desc: !llvm.ptr, %out: !llvm.ptr<1>, %n: index, %x: i32) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %bytes = arith.constant 1024 : i32
  %long = arith.constant 1025 : i32
  %p = pipeline.create {name = "ring"} : !P
  %ring = llvm.mlir.addressof @ring : !llvm.ptr<3>
  %stages = llvm.getelementptr %ring[1024] : (!llvm.ptr<3>) -> !llvm.ptr<3>, i8
  %s0 = pipeline.state.make : !ps
  %sN = scf.for %t = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
    pipeline.producer.acquire %p, %s : !P, !ps
    %i = pipeline.state.index %s : !ps
    %off = arith.muli %i, %bytes : i32
    %dst = llvm.getelementptr %stages[%off] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
    // expected-error @+1 {{pipeline.copy.tma_load refills a stage of pipeline 'ring' whose buffer a bulk store issued by this thread may still read}}
    pipeline.copy.tma_load %p, %s, %desc[%x, %x] to %dst {bytes = 1024 : i64} : !P, !ps, !llvm.ptr, !llvm.ptr<3>
    // expected-note @+1 {{the bulk store of that buffer, still in flight at the copy}}
    nvvm.cp.async.bulk.global.shared.cta %out, %ring, %long : !llvm.ptr<1>, !llvm.ptr<3>
    pipeline.bulk_group.commit
    %next = pipeline.state.advance %s : !ps
    scf.yield %next : !ps
  }
  pipeline.bulk_group.wait {read}
  pipeline.producer.tail %p, %sN : !P, !ps
  return
}
