// RUN: not %python -m pipeline_mlir.sim %s --seed 1 > %t
// RUN: FileCheck %s < %t

// Release after the last asynchronous read (sim/asyncread.py): a stage
// released while a wgmma group, a TMA store or an uncommitted tcgen05.mma
// that reads it is in flight.
// Each bug is followed by its correct twin, which must pass.

// CHECK: pipeline-sim: asynchronous read in flight: consumer warp 1 of CTA 0 runs pipeline.consumer.release on stage 0 of pipeline 'ab' at {{.*}}bug_async_read.mlir:{{[0-9]+}}:9 while nvvm.wgmma.mma_async at {{.*}}bug_async_read.mlir:{{[0-9]+}}:15 may still read that stage asynchronously: its wgmma group is committed but not retired (needs wgmma.wait_group N with N <= 0)
// CHECK: pipeline-sim: FAILED: 100 schedules, 100 async-read (@release_before_wgmma_wait
// CHECK: pipeline-sim: OK: 100 schedules, 0 deadlocks (@release_after_wgmma_wait
// CHECK: pipeline-sim: asynchronous read in flight: consumer warp 1 of CTA 0 runs pipeline.consumer.release on stage 0 of pipeline 'ab' {{.*}} its wgmma group is committed but not retired (needs wgmma.wait_group N with N <= 1)
// CHECK: pipeline-sim: FAILED: 100 schedules, 100 async-read (@lagged_release_wait_group_2
// CHECK: pipeline-sim: OK: 100 schedules, 0 deadlocks (@lagged_release_wait_group_1
// CHECK: pipeline-sim: asynchronous read in flight: consumer warp 1 of CTA 0 runs pipeline.consumer.release on stage 0 of pipeline 'ab' {{.*}} while pipeline.copy.tma_store at {{.*}} its bulk group may still read shared memory (needs cp.async.bulk.wait_group.read N with N <= 0)
// CHECK: pipeline-sim: FAILED: 100 schedules, 100 async-read (@tma_store_release_unwaited
// CHECK: pipeline-sim: OK: 100 schedules, 0 deadlocks (@tma_store_release_waited
// CHECK: pipeline-sim: asynchronous read in flight: consumer warp 1 of CTA 0 runs pipeline.consumer.release on stage 0 of pipeline 'ab' {{.*}} while nvvm.tcgen05.mma at {{.*}} may still read that stage asynchronously: no tcgen05.commit covers the tcgen05.mma, and this release is a plain mbarrier arrive
// CHECK: pipeline-sim: FAILED: 100 schedules, 100 async-read (@tcgen05_mma_plain_release
// CHECK: pipeline-sim: OK: 100 schedules, 0 deadlocks (@tcgen05_mma_umma_release

!p = !pipeline.pipeline<async, stages = 3, producer = #pipeline.group<warp, 1>, consumer = #pipeline.group<thread, 1>>
!pu = !pipeline.pipeline<async_umma, stages = 3, producer = #pipeline.group<warp, 1>, consumer = #pipeline.group<thread, 1>>
!ps = !pipeline.state<3, producer>
!cs = !pipeline.state<3, consumer>
!acc = !llvm.struct<(f32, f32, f32, f32)>

gpu.module @kernels {
  gpu.func @release_before_wgmma_wait(%base: i64, %acc0: !acc, %desc: !llvm.ptr, %ring: !llvm.ptr<3>) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    %c0 = arith.constant 0 : i32
    %lb = arith.constant 0 : index
    %ub = arith.constant 6 : index
    %one = arith.constant 1 : index
    %step = arith.constant 1024 : i64
    %p = pipeline.create {name = "ab"} : !p
    %warp = nvvm.read.ptx.sreg.warpid : i32
    %is_producer = arith.cmpi eq, %warp, %c0 : i32
    scf.if %is_producer {
      %s0 = pipeline.state.make : !ps
      %sN = scf.for %k = %lb to %ub step %one iter_args(%s = %s0) -> (!ps) {
        pipeline.producer.acquire %p, %s : !p, !ps
        pipeline.producer.commit %p, %s : !p, !ps
        %nx = pipeline.state.advance %s : !ps
        scf.yield %nx : !ps
      }
      pipeline.producer.tail %p, %sN : !p, !ps
    } else {
      %c = pipeline.state.make : !cs
      %r:2 = scf.for %k = %lb to %ub step %one iter_args(%s = %c, %acc = %acc0) -> (!cs, !acc) {
        pipeline.consumer.wait %p, %s : !p, !cs
        %idx = pipeline.state.index %s : !cs
        %idx64 = arith.extui %idx : i32 to i64
        %off = arith.muli %idx64, %step : i64
        %d = arith.addi %base, %off : i64
        nvvm.wgmma.fence.aligned
        %a1 = nvvm.wgmma.mma_async %d, %d, %acc, <m = 64, n = 8, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>] : !acc -> !acc
        nvvm.wgmma.commit.group.sync.aligned
        pipeline.consumer.release %p, %s {elect_one} : !p, !cs
        %nx = pipeline.state.advance %s : !cs
        scf.yield %nx, %a1 : !cs, !acc
      }
      nvvm.wgmma.wait.group.sync.aligned 0
    }
    gpu.return
  }

  gpu.func @release_after_wgmma_wait(%base: i64, %acc0: !acc, %desc: !llvm.ptr, %ring: !llvm.ptr<3>) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    %c0 = arith.constant 0 : i32
    %lb = arith.constant 0 : index
    %ub = arith.constant 6 : index
    %one = arith.constant 1 : index
    %step = arith.constant 1024 : i64
    %p = pipeline.create {name = "ab"} : !p
    %warp = nvvm.read.ptx.sreg.warpid : i32
    %is_producer = arith.cmpi eq, %warp, %c0 : i32
    scf.if %is_producer {
      %s0 = pipeline.state.make : !ps
      %sN = scf.for %k = %lb to %ub step %one iter_args(%s = %s0) -> (!ps) {
        pipeline.producer.acquire %p, %s : !p, !ps
        pipeline.producer.commit %p, %s : !p, !ps
        %nx = pipeline.state.advance %s : !ps
        scf.yield %nx : !ps
      }
      pipeline.producer.tail %p, %sN : !p, !ps
    } else {
      %c = pipeline.state.make : !cs
      %r:2 = scf.for %k = %lb to %ub step %one iter_args(%s = %c, %acc = %acc0) -> (!cs, !acc) {
        pipeline.consumer.wait %p, %s : !p, !cs
        %idx = pipeline.state.index %s : !cs
        %idx64 = arith.extui %idx : i32 to i64
        %off = arith.muli %idx64, %step : i64
        %d = arith.addi %base, %off : i64
        nvvm.wgmma.fence.aligned
        %a1 = nvvm.wgmma.mma_async %d, %d, %acc, <m = 64, n = 8, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>] : !acc -> !acc
        nvvm.wgmma.commit.group.sync.aligned
        nvvm.wgmma.wait.group.sync.aligned 0
        pipeline.consumer.release %p, %s {elect_one} : !p, !cs
        %nx = pipeline.state.advance %s : !cs
        scf.yield %nx, %a1 : !cs, !acc
      }
      nvvm.wgmma.wait.group.sync.aligned 0
    }
    gpu.return
  }

  gpu.func @lagged_release_wait_group_2(%base: i64, %acc0: !acc, %desc: !llvm.ptr, %ring: !llvm.ptr<3>) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    %c0 = arith.constant 0 : i32
    %lb = arith.constant 0 : index
    %ub = arith.constant 6 : index
    %one = arith.constant 1 : index
    %step = arith.constant 1024 : i64
    %p = pipeline.create {name = "ab"} : !p
    %warp = nvvm.read.ptx.sreg.warpid : i32
    %is_producer = arith.cmpi eq, %warp, %c0 : i32
    scf.if %is_producer {
      %s0 = pipeline.state.make : !ps
      %sN = scf.for %k = %lb to %ub step %one iter_args(%s = %s0) -> (!ps) {
        pipeline.producer.acquire %p, %s : !p, !ps
        pipeline.producer.commit %p, %s : !p, !ps
        %nx = pipeline.state.advance %s : !ps
        scf.yield %nx : !ps
      }
      pipeline.producer.tail %p, %sN : !p, !ps
    } else {
      %read0 = pipeline.state.make : !cs
      %release0 = pipeline.state.make : !cs
      pipeline.consumer.wait %p, %read0 : !p, !cs
      %i0 = pipeline.state.index %read0 : !cs
      %i064 = arith.extui %i0 : i32 to i64
      %o0 = arith.muli %i064, %step : i64
      %d0 = arith.addi %base, %o0 : i64
      nvvm.wgmma.fence.aligned
      %acc1 = nvvm.wgmma.mma_async %d0, %d0, %acc0, <m = 64, n = 8, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>] : !acc -> !acc
      nvvm.wgmma.commit.group.sync.aligned
      %read1 = pipeline.state.advance %read0 : !cs
      %r:3 = scf.for %k = %one to %ub step %one iter_args(%read = %read1, %release = %release0, %acc = %acc1) -> (!cs, !cs, !acc) {
        pipeline.consumer.wait %p, %read : !p, !cs
        %idx = pipeline.state.index %read : !cs
        %idx64 = arith.extui %idx : i32 to i64
        %off = arith.muli %idx64, %step : i64
        %d = arith.addi %base, %off : i64
        nvvm.wgmma.fence.aligned
        %a1 = nvvm.wgmma.mma_async %d, %d, %acc, <m = 64, n = 8, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>] : !acc -> !acc
        nvvm.wgmma.commit.group.sync.aligned
        nvvm.wgmma.wait.group.sync.aligned 2
        pipeline.consumer.release %p, %release {elect_one} : !p, !cs
        %read2 = pipeline.state.advance %read : !cs
        %release2 = pipeline.state.advance %release : !cs
        scf.yield %read2, %release2, %a1 : !cs, !cs, !acc
      }
      nvvm.wgmma.wait.group.sync.aligned 0
      pipeline.consumer.release %p, %r#1 {elect_one} : !p, !cs
    }
    gpu.return
  }

  gpu.func @lagged_release_wait_group_1(%base: i64, %acc0: !acc, %desc: !llvm.ptr, %ring: !llvm.ptr<3>) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    %c0 = arith.constant 0 : i32
    %lb = arith.constant 0 : index
    %ub = arith.constant 6 : index
    %one = arith.constant 1 : index
    %step = arith.constant 1024 : i64
    %p = pipeline.create {name = "ab"} : !p
    %warp = nvvm.read.ptx.sreg.warpid : i32
    %is_producer = arith.cmpi eq, %warp, %c0 : i32
    scf.if %is_producer {
      %s0 = pipeline.state.make : !ps
      %sN = scf.for %k = %lb to %ub step %one iter_args(%s = %s0) -> (!ps) {
        pipeline.producer.acquire %p, %s : !p, !ps
        pipeline.producer.commit %p, %s : !p, !ps
        %nx = pipeline.state.advance %s : !ps
        scf.yield %nx : !ps
      }
      pipeline.producer.tail %p, %sN : !p, !ps
    } else {
      %read0 = pipeline.state.make : !cs
      %release0 = pipeline.state.make : !cs
      pipeline.consumer.wait %p, %read0 : !p, !cs
      %i0 = pipeline.state.index %read0 : !cs
      %i064 = arith.extui %i0 : i32 to i64
      %o0 = arith.muli %i064, %step : i64
      %d0 = arith.addi %base, %o0 : i64
      nvvm.wgmma.fence.aligned
      %acc1 = nvvm.wgmma.mma_async %d0, %d0, %acc0, <m = 64, n = 8, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>] : !acc -> !acc
      nvvm.wgmma.commit.group.sync.aligned
      %read1 = pipeline.state.advance %read0 : !cs
      %r:3 = scf.for %k = %one to %ub step %one iter_args(%read = %read1, %release = %release0, %acc = %acc1) -> (!cs, !cs, !acc) {
        pipeline.consumer.wait %p, %read : !p, !cs
        %idx = pipeline.state.index %read : !cs
        %idx64 = arith.extui %idx : i32 to i64
        %off = arith.muli %idx64, %step : i64
        %d = arith.addi %base, %off : i64
        nvvm.wgmma.fence.aligned
        %a1 = nvvm.wgmma.mma_async %d, %d, %acc, <m = 64, n = 8, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>] : !acc -> !acc
        nvvm.wgmma.commit.group.sync.aligned
        nvvm.wgmma.wait.group.sync.aligned 1
        pipeline.consumer.release %p, %release {elect_one} : !p, !cs
        %read2 = pipeline.state.advance %read : !cs
        %release2 = pipeline.state.advance %release : !cs
        scf.yield %read2, %release2, %a1 : !cs, !cs, !acc
      }
      nvvm.wgmma.wait.group.sync.aligned 0
      pipeline.consumer.release %p, %r#1 {elect_one} : !p, !cs
    }
    gpu.return
  }

  gpu.func @tma_store_release_unwaited(%base: i64, %acc0: !acc, %desc: !llvm.ptr, %ring: !llvm.ptr<3>) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    %c0 = arith.constant 0 : i32
    %lb = arith.constant 0 : index
    %ub = arith.constant 6 : index
    %one = arith.constant 1 : index
    %step = arith.constant 1024 : i64
    %p = pipeline.create {name = "ab"} : !p
    %warp = nvvm.read.ptx.sreg.warpid : i32
    %is_producer = arith.cmpi eq, %warp, %c0 : i32
    scf.if %is_producer {
      %s0 = pipeline.state.make : !ps
      %sN = scf.for %k = %lb to %ub step %one iter_args(%s = %s0) -> (!ps) {
        pipeline.producer.acquire %p, %s : !p, !ps
        pipeline.producer.commit %p, %s : !p, !ps
        %nx = pipeline.state.advance %s : !ps
        scf.yield %nx : !ps
      }
      pipeline.producer.tail %p, %sN : !p, !ps
    } else {
      %c = pipeline.state.make : !cs
      %sN = scf.for %k = %lb to %ub step %one iter_args(%s = %c) -> (!cs) {
        pipeline.consumer.wait %p, %s : !p, !cs
        %idx = pipeline.state.index %s : !cs
        %src = llvm.getelementptr %ring[%idx] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, !llvm.array<1024 x i8>
        %x = arith.constant 0 : i32
        pipeline.copy.tma_store %desc[%x, %x] from %src : !llvm.ptr, !llvm.ptr<3>
        pipeline.bulk_group.commit
        pipeline.consumer.release %p, %s {elect_one} : !p, !cs
        %nx = pipeline.state.advance %s : !cs
        scf.yield %nx : !cs
      }
      pipeline.bulk_group.wait {read}
    }
    gpu.return
  }

  gpu.func @tma_store_release_waited(%base: i64, %acc0: !acc, %desc: !llvm.ptr, %ring: !llvm.ptr<3>) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    %c0 = arith.constant 0 : i32
    %lb = arith.constant 0 : index
    %ub = arith.constant 6 : index
    %one = arith.constant 1 : index
    %step = arith.constant 1024 : i64
    %p = pipeline.create {name = "ab"} : !p
    %warp = nvvm.read.ptx.sreg.warpid : i32
    %is_producer = arith.cmpi eq, %warp, %c0 : i32
    scf.if %is_producer {
      %s0 = pipeline.state.make : !ps
      %sN = scf.for %k = %lb to %ub step %one iter_args(%s = %s0) -> (!ps) {
        pipeline.producer.acquire %p, %s : !p, !ps
        pipeline.producer.commit %p, %s : !p, !ps
        %nx = pipeline.state.advance %s : !ps
        scf.yield %nx : !ps
      }
      pipeline.producer.tail %p, %sN : !p, !ps
    } else {
      %c = pipeline.state.make : !cs
      %sN = scf.for %k = %lb to %ub step %one iter_args(%s = %c) -> (!cs) {
        pipeline.consumer.wait %p, %s : !p, !cs
        %idx = pipeline.state.index %s : !cs
        %src = llvm.getelementptr %ring[%idx] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, !llvm.array<1024 x i8>
        %x = arith.constant 0 : i32
        pipeline.copy.tma_store %desc[%x, %x] from %src : !llvm.ptr, !llvm.ptr<3>
        pipeline.bulk_group.commit
        pipeline.bulk_group.wait {read}
        pipeline.consumer.release %p, %s {elect_one} : !p, !cs
        %nx = pipeline.state.advance %s : !cs
        scf.yield %nx : !cs
      }
      pipeline.bulk_group.wait {read}
    }
    gpu.return
  }

  gpu.func @tcgen05_mma_plain_release(%base: i64, %d: !llvm.ptr<6>, %idesc: i32) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    %c0 = arith.constant 0 : i32
    %lb = arith.constant 0 : index
    %ub = arith.constant 6 : index
    %one = arith.constant 1 : index
    %step = arith.constant 1024 : i64
    %true = arith.constant true
    %p = pipeline.create {name = "ab"} : !p
    %warp = nvvm.read.ptx.sreg.warpid : i32
    %is_producer = arith.cmpi eq, %warp, %c0 : i32
    scf.if %is_producer {
      %s0 = pipeline.state.make : !ps
      %sN = scf.for %k = %lb to %ub step %one iter_args(%s = %s0) -> (!ps) {
        pipeline.producer.acquire %p, %s : !p, !ps
        pipeline.producer.commit %p, %s : !p, !ps
        %nx = pipeline.state.advance %s : !ps
        scf.yield %nx : !ps
      }
      pipeline.producer.tail %p, %sN : !p, !ps
    } else {
      %c = pipeline.state.make : !cs
      %sN = scf.for %k = %lb to %ub step %one iter_args(%s = %c) -> (!cs) {
        pipeline.consumer.wait %p, %s : !p, !cs
        %idx = pipeline.state.index %s : !cs
        %idx64 = arith.extui %idx : i32 to i64
        %off = arith.muli %idx64, %step : i64
        %desc = arith.addi %base, %off : i64
        %e = nvvm.elect.sync -> i1
        scf.if %e {
          nvvm.tcgen05.mma %d, %desc, %desc, %idesc, %true {ctaGroup = #nvvm.cta_group<cta_1>, kind = #nvvm.tcgen05_mma_kind<f16>} : (!llvm.ptr<6>, i64, i64, i32, i1)
        }
        pipeline.consumer.release %p, %s {elect_one} : !p, !cs
        %nx = pipeline.state.advance %s : !cs
        scf.yield %nx : !cs
      }
    }
    gpu.return
  }

  gpu.func @tcgen05_mma_umma_release(%base: i64, %d: !llvm.ptr<6>, %idesc: i32) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    %c0 = arith.constant 0 : i32
    %lb = arith.constant 0 : index
    %ub = arith.constant 6 : index
    %one = arith.constant 1 : index
    %step = arith.constant 1024 : i64
    %true = arith.constant true
    %p = pipeline.create {name = "ab"} : !pu
    %warp = nvvm.read.ptx.sreg.warpid : i32
    %is_producer = arith.cmpi eq, %warp, %c0 : i32
    scf.if %is_producer {
      %s0 = pipeline.state.make : !ps
      %sN = scf.for %k = %lb to %ub step %one iter_args(%s = %s0) -> (!ps) {
        pipeline.producer.acquire %p, %s : !pu, !ps
        pipeline.producer.commit %p, %s : !pu, !ps
        %nx = pipeline.state.advance %s : !ps
        scf.yield %nx : !ps
      }
      pipeline.producer.tail %p, %sN : !pu, !ps
    } else {
      %c = pipeline.state.make : !cs
      %sN = scf.for %k = %lb to %ub step %one iter_args(%s = %c) -> (!cs) {
        pipeline.consumer.wait %p, %s : !pu, !cs
        %idx = pipeline.state.index %s : !cs
        %idx64 = arith.extui %idx : i32 to i64
        %off = arith.muli %idx64, %step : i64
        %desc = arith.addi %base, %off : i64
        %e = nvvm.elect.sync -> i1
        scf.if %e {
          nvvm.tcgen05.mma %d, %desc, %desc, %idesc, %true {ctaGroup = #nvvm.cta_group<cta_1>, kind = #nvvm.tcgen05_mma_kind<f16>} : (!llvm.ptr<6>, i64, i64, i32, i1)
        }
        pipeline.consumer.release %p, %s : !pu, !cs
        %nx = pipeline.state.advance %s : !cs
        scf.yield %nx : !cs
      }
    }
    gpu.return
  }
}
