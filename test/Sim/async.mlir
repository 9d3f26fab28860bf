// RUN: %python -m pipeline_mlir.sim %s --seed 1 | FileCheck %s
// RUN: %python -m pipeline_mlir.sim %s --exhaustive-bound 0 | FileCheck %s --check-prefix=DFS

// PipelineAsync between a producer warp (every lane arrives: count 32) and
// two consumer warps that release with elect_one (count 2), 3 stages,
// 7 iterations, so the ring wraps twice and both parities are exercised.

// CHECK: pipeline-sim: OK: 100 schedules, 0 deadlocks (@async_pc, 1 CTA(s) x 3 warp(s); random, seed 1)
// DFS: pipeline-sim: OK: 80 schedules, 0 deadlocks (@async_pc, 1 CTA(s) x 3 warp(s); exhaustive, preemption bound 0)

!p = !pipeline.pipeline<async, stages = 3, producer = #pipeline.group<warp, 1>, consumer = #pipeline.group<thread, 2>>
!ps = !pipeline.state<3, producer>
!cs = !pipeline.state<3, consumer>

gpu.module @kernels {
  gpu.func @async_pc() kernel attributes {known_block_size = array<i32: 96, 1, 1>} {
    %c0 = arith.constant 0 : i32
    %c32 = arith.constant 32 : i32
    %lb = arith.constant 0 : index
    %ub = arith.constant 7 : index
    %one = arith.constant 1 : index
    %p = pipeline.create {name = "ab"} : !p
    %tid = gpu.thread_id x
    %tid32 = arith.index_cast %tid : index to i32
    %warp = arith.divui %tid32, %c32 : i32
    %is_producer = arith.cmpi eq, %warp, %c0 : i32
    scf.if %is_producer {
      %s0 = pipeline.state.make : !ps
      %sN = scf.for %k = %lb to %ub step %one iter_args(%s = %s0) -> (!ps) {
        pipeline.producer.acquire %p, %s : !p, !ps
        pipeline.producer.commit %p, %s : !p, !ps
        %n = pipeline.state.advance %s : !ps
        scf.yield %n : !ps
      }
      pipeline.producer.tail %p, %sN : !p, !ps
    } else {
      %s0 = pipeline.state.make : !cs
      %sN = scf.for %k = %lb to %ub step %one iter_args(%s = %s0) -> (!cs) {
        pipeline.consumer.wait %p, %s : !p, !cs
        pipeline.consumer.release %p, %s {elect_one} : !p, !cs
        %n = pipeline.state.advance %s : !cs
        scf.yield %n : !cs
      }
    }
    gpu.return
  }
}
