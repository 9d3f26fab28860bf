// RUN: not %python -m pipeline_mlir.sim %s --seed 1 > %t
// RUN: FileCheck %s < %t

// Wrong arrive counts (NVIDIA/cutlass#2404, #2418), one pipeline type each:
// @consumer_warps: consumer = (warp, 2) means 64 arrivals, but a
//   PipelineTmaAsync consumer warp releases from one signalling lane: 2 come.
// @producer_warp: producer = (thread, 32): a TMA producer must count 1 (one elected
//   arrive.expect_tx per phase), not the 32 threads of its warp.
// @too_small: a PipelineAsync empty barrier counting 1 while two consumer
//   warps release: each phase completes twice per round.

// CHECK: pipeline-sim: deadlock: producer warp 0 of CTA 0 waits on pipeline 'ab' empty barrier stage 0 phase 0 in producer.acquire (phase 0 (#0) has 2 of 64 arrivals)
// CHECK: pipeline-sim: note: @consumer_warps, schedule 0
// CHECK: pipeline-sim: FAILED: 100 schedules, 100 deadlock (@consumer_warps
// CHECK: pipeline-sim: deadlock: {{.*}}consumer warp 1 of CTA 0 waits on pipeline 'ab' full barrier stage 0 phase 0 in consumer.wait (phase 0 (#0) has 1 of 32 arrivals, 0 tx bytes outstanding (armed 8192, delivered 8192))
// CHECK: pipeline-sim: FAILED: 100 schedules, 100 deadlock (@producer_warp
// CHECK: pipeline-sim: phase overrun: producer warp 0 of CTA 0 waits on pipeline 'ab' empty barrier stage {{[01]}} of CTA 0 for phase 0 (#0), but phases #0 and #1 have both completed: the barrier's phase advanced by 2 while this waiter still expected the old parity
// CHECK: pipeline-sim: FAILED: 100 schedules, {{.*}}overrun{{.*}} (@too_small

!p = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<warp, 2>, tx_count = 8192>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>
!p2 = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 2>, tx_count = 8192>
!p3 = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<warp, 1>, consumer = #pipeline.group<thread, 1>>

gpu.module @kernels {
  gpu.func @consumer_warps(%desc: !llvm.ptr, %smem: !llvm.ptr<3>) kernel attributes {known_block_size = array<i32: 96, 1, 1>} {
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %c32 = arith.constant 32 : i32
    %mask = arith.constant 3 : i16
    %lb = arith.constant 0 : index
    %ub = arith.constant 4 : index
    %one = arith.constant 1 : index
    %p = pipeline.create {name = "ab"} : !p
    %warp = nvvm.read.ptx.sreg.warpid : i32
    %is_producer = arith.cmpi eq, %warp, %c0 : i32
    scf.if %is_producer {
      %s0 = pipeline.state.make : !ps
      %sN = scf.for %k = %lb to %ub step %one iter_args(%s = %s0) -> (!ps) {
        pipeline.producer.acquire %p, %s : !p, !ps
        %e = nvvm.elect.sync -> i1
        scf.if %e {
          pipeline.copy.tma_load %p, %s, %desc[%c0, %c0] to %smem {bytes = 8192} : !p, !ps, !llvm.ptr, !llvm.ptr<3>
        }
        pipeline.producer.commit %p, %s : !p, !ps
        %nx = pipeline.state.advance %s : !ps
        scf.yield %nx : !ps
      }
      pipeline.producer.tail %p, %sN : !p, !ps
    } else {
      %s0 = pipeline.state.make : !cs
      %sN = scf.for %k = %lb to %ub step %one iter_args(%s = %s0) -> (!cs) {
        pipeline.consumer.wait %p, %s : !p, !cs
        pipeline.consumer.release %p, %s : !p, !cs
        %nx = pipeline.state.advance %s : !cs
        scf.yield %nx : !cs
      }
    }
    gpu.return
  }

  gpu.func @producer_warp(%desc: !llvm.ptr, %smem: !llvm.ptr<3>) kernel attributes {known_block_size = array<i32: 96, 1, 1>} {
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %c32 = arith.constant 32 : i32
    %mask = arith.constant 3 : i16
    %lb = arith.constant 0 : index
    %ub = arith.constant 4 : index
    %one = arith.constant 1 : index
    %p = pipeline.create {name = "ab"} : !p2
    %warp = nvvm.read.ptx.sreg.warpid : i32
    %is_producer = arith.cmpi eq, %warp, %c0 : i32
    scf.if %is_producer {
      %s0 = pipeline.state.make : !ps
      %sN = scf.for %k = %lb to %ub step %one iter_args(%s = %s0) -> (!ps) {
        pipeline.producer.acquire %p, %s : !p2, !ps
        %e = nvvm.elect.sync -> i1
        scf.if %e {
          pipeline.copy.tma_load %p, %s, %desc[%c0, %c0] to %smem {bytes = 8192} : !p2, !ps, !llvm.ptr, !llvm.ptr<3>
        }
        pipeline.producer.commit %p, %s : !p2, !ps
        %nx = pipeline.state.advance %s : !ps
        scf.yield %nx : !ps
      }
      pipeline.producer.tail %p, %sN : !p2, !ps
    } else {
      %s0 = pipeline.state.make : !cs
      %sN = scf.for %k = %lb to %ub step %one iter_args(%s = %s0) -> (!cs) {
        pipeline.consumer.wait %p, %s : !p2, !cs
        pipeline.consumer.release %p, %s : !p2, !cs
        %nx = pipeline.state.advance %s : !cs
        scf.yield %nx : !cs
      }
    }
    gpu.return
  }

  gpu.func @too_small() kernel attributes {known_block_size = array<i32: 96, 1, 1>} {
    %c0 = arith.constant 0 : i32
    %lb = arith.constant 0 : index
    %ub = arith.constant 4 : index
    %one = arith.constant 1 : index
    %p = pipeline.create {name = "ab"} : !p3
    %warp = nvvm.read.ptx.sreg.warpid : i32
    %is_producer = arith.cmpi eq, %warp, %c0 : i32
    scf.if %is_producer {
      %s0 = pipeline.state.make : !ps
      %sN = scf.for %k = %lb to %ub step %one iter_args(%s = %s0) -> (!ps) {
        pipeline.producer.acquire %p, %s : !p3, !ps
        pipeline.producer.commit %p, %s : !p3, !ps
        %nx = pipeline.state.advance %s : !ps
        scf.yield %nx : !ps
      }
      pipeline.producer.tail %p, %sN : !p3, !ps
    } else {
      %s0 = pipeline.state.make : !cs
      %sN = scf.for %k = %lb to %ub step %one iter_args(%s = %s0) -> (!cs) {
        pipeline.consumer.wait %p, %s : !p3, !cs
        pipeline.consumer.release %p, %s {elect_one} : !p3, !cs
        %nx = pipeline.state.advance %s : !cs
        scf.yield %nx : !cs
      }
    }
    gpu.return
  }
}
