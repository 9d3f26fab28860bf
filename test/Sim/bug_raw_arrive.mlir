// RUN: not %python -m pipeline_mlir.sim %s --seed 1 --trip-count 4 > %t
// RUN: FileCheck %s < %t

// Barriers driven by hand next to a pipeline (cutlass#2364).
// @second_arrive: the elected producer lane arrives by hand
// on the stage's full barrier (producer_get_barrier's handle) after its
// copy; producer.acquire already arrived with arrive.expect_tx, so the
// phase gets two arrivals for a count of one. The simulator counts the raw
// arrive as an arrival (pipeline-verify-protocol rejects it statically,
// check 13). @handle_only is the correct twin: the handle is taken and
// nothing arrives on it by hand.

// CHECK: pipeline-sim: arrive count: producer warp 0 of CTA 0 (nvvm.mbarrier.arrive by hand at {{.*}}bug_raw_arrive.mlir:[[#@LINE+26]]:{{[0-9]+}}) arrives 1 time(s) on pipeline 'ab' full barrier stage 0 of CTA 0 in phase 0 (#0), which expects only 0 more of its 1 arrivals
// CHECK: pipeline-sim: FAILED: {{.*}}(@second_arrive
// CHECK: pipeline-sim: OK: {{.*}}(@handle_only

!p = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 2>, tx_count = 8192>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>

gpu.module @kernels {
  gpu.func @second_arrive(%desc: !llvm.ptr, %smem: !llvm.ptr<3>, %n: index) kernel attributes {known_block_size = array<i32: 96, 1, 1>} {
    %c0 = arith.constant 0 : i32
    %c32 = arith.constant 32 : i32
    %lb = arith.constant 0 : index
    %one = arith.constant 1 : index
    %p = pipeline.create {name = "ab"} : !p
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %warp = arith.divui %tid, %c32 : i32
    %is_producer = arith.cmpi eq, %warp, %c0 : i32
    scf.if %is_producer {
      %s0 = pipeline.state.make : !ps
      %sN = scf.for %k = %lb to %n step %one iter_args(%s = %s0) -> (!ps) {
        pipeline.producer.acquire %p, %s : !p, !ps
        %e = nvvm.elect.sync -> i1
        scf.if %e {
          pipeline.copy.tma_load %p, %s, %desc[%c0, %c0] to %smem {bytes = 8192} : !p, !ps, !llvm.ptr, !llvm.ptr<3>
          %bar = pipeline.producer.barrier %p, %s : !p, !ps
          %t = nvvm.mbarrier.arrive %bar : !llvm.ptr<3> -> i64
        }
        pipeline.producer.commit %p, %s : !p, !ps
        %nx = pipeline.state.advance %s : !ps
        scf.yield %nx : !ps
      }
      pipeline.producer.tail %p, %sN : !p, !ps
    } else {
      %s0 = pipeline.state.make : !cs
      %sN = scf.for %k = %lb to %n step %one iter_args(%s = %s0) -> (!cs) {
        pipeline.consumer.wait %p, %s : !p, !cs
        pipeline.consumer.release %p, %s : !p, !cs
        %nx = pipeline.state.advance %s : !cs
        scf.yield %nx : !cs
      }
    }
    gpu.return
  }

  gpu.func @handle_only(%desc: !llvm.ptr, %smem: !llvm.ptr<3>, %n: index) kernel attributes {known_block_size = array<i32: 96, 1, 1>} {
    %c0 = arith.constant 0 : i32
    %c32 = arith.constant 32 : i32
    %lb = arith.constant 0 : index
    %one = arith.constant 1 : index
    %p = pipeline.create {name = "ab"} : !p
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %warp = arith.divui %tid, %c32 : i32
    %is_producer = arith.cmpi eq, %warp, %c0 : i32
    scf.if %is_producer {
      %s0 = pipeline.state.make : !ps
      %sN = scf.for %k = %lb to %n step %one iter_args(%s = %s0) -> (!ps) {
        pipeline.producer.acquire %p, %s : !p, !ps
        %e = nvvm.elect.sync -> i1
        scf.if %e {
          pipeline.copy.tma_load %p, %s, %desc[%c0, %c0] to %smem {bytes = 8192} : !p, !ps, !llvm.ptr, !llvm.ptr<3>
          %bar = pipeline.producer.barrier %p, %s : !p, !ps
        }
        pipeline.producer.commit %p, %s : !p, !ps
        %nx = pipeline.state.advance %s : !ps
        scf.yield %nx : !ps
      }
      pipeline.producer.tail %p, %sN : !p, !ps
    } else {
      %s0 = pipeline.state.make : !cs
      %sN = scf.for %k = %lb to %n step %one iter_args(%s = %s0) -> (!cs) {
        pipeline.consumer.wait %p, %s : !p, !cs
        pipeline.consumer.release %p, %s : !p, !cs
        %nx = pipeline.state.advance %s : !cs
        scf.yield %nx : !cs
      }
    }
    gpu.return
  }
}
