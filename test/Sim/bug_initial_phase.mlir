// RUN: not %python -m pipeline_mlir.sim %s --seed 1 > %t
// RUN: FileCheck %s < %t

// Wrong initial phases (Dao-AILab/flash-attention#1317).
// @producer_phase0: a producer state built as (index 0, phase 0) waits for
//   consumers that wait for it.
// @consumer_phase1: a consumer state built as (index 0, phase 1) passes its
//   first wait on a fresh full barrier and reads an empty buffer.

// CHECK: pipeline-sim: deadlock: producer warp 0 of CTA 0 waits on pipeline 'ab' empty barrier stage 0 phase 0 in producer.acquire (phase 0 (#0) has 0 of 2 arrivals); consumer warp 1 of CTA 0 waits on pipeline 'ab' full barrier stage 0 phase 0 in consumer.wait (phase 0 (#0) has 0 of 1 arrivals); consumer warp 2 of CTA 0 waits on pipeline 'ab' full barrier stage 0 phase 0 in consumer.wait
// CHECK: pipeline-sim: FAILED: 100 schedules, 100 deadlock (@producer_phase0
// CHECK: pipeline-sim: wrong initial phase: consumer warp {{[12]}} of CTA 0 passes consumer.wait on pipeline 'ab' full barrier stage 0 phase 1 before any phase of it completed: a consumer state must start at phase 0 (wrong initial phase)
// CHECK: pipeline-sim: FAILED: 100 schedules, 100 initial-phase (@consumer_phase1

!p = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 2>, tx_count = 8192>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>

gpu.module @kernels {
  gpu.func @producer_phase0(%desc: !llvm.ptr, %smem: !llvm.ptr<3>) kernel attributes {known_block_size = array<i32: 96, 1, 1>} {
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %c32 = arith.constant 32 : i32
    %true = arith.constant true
    %mask = arith.constant 3 : i16
    %lb = arith.constant 0 : index
    %ub = arith.constant 4 : index
    %one = arith.constant 1 : index
    %p = pipeline.create {name = "ab"} : !p
    %warp = nvvm.read.ptx.sreg.warpid : i32
    %is_producer = arith.cmpi eq, %warp, %c0 : i32
    scf.if %is_producer {
      %s0 = pipeline.state.make index %c0 phase %c0 : !ps
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

  gpu.func @consumer_phase1(%desc: !llvm.ptr, %smem: !llvm.ptr<3>) kernel attributes {known_block_size = array<i32: 96, 1, 1>} {
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %c32 = arith.constant 32 : i32
    %true = arith.constant true
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
      %s0 = pipeline.state.make index %c0 phase %c1 : !cs
      %sN = scf.for %k = %lb to %ub step %one iter_args(%s = %s0) -> (!cs) {
        pipeline.consumer.wait %p, %s : !p, !cs
        pipeline.consumer.release %p, %s : !p, !cs
        %nx = pipeline.state.advance %s : !cs
        scf.yield %nx : !cs
      }
    }
    gpu.return
  }
}
