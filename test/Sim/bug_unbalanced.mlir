// RUN: not %python -m pipeline_mlir.sim %s --seed 1 > %t
// RUN: FileCheck %s < %t

// Unbalanced verbs in a PipelineAsync.
// @commit_twice: two producer.commit per acquire.
// @no_commit: producer.acquire without producer.commit: the consumers never
//   see a full stage.
// @release_twice: a consumer releases twice per wait.

// CHECK: pipeline-sim: unbalanced: producer warp 0 of CTA 0 runs producer.commit on pipeline 'ab' stage 0 of CTA 0 without acquiring it (unbalanced producer.acquire / producer.commit)
// CHECK: pipeline-sim: FAILED: 100 schedules, 100 unbalanced (@commit_twice
// CHECK: pipeline-sim: deadlock: producer warp 0 of CTA 0 waits on pipeline 'ab' empty barrier stage 0 phase 0 in producer.acquire (phase 0 (#0) has 0 of 2 arrivals); consumer warp 1 of CTA 0 waits on pipeline 'ab' full barrier stage 0 phase 0 in consumer.wait (phase 0 (#0) has 0 of 32 arrivals)
// Each waiting warp at its op's line in this file:
// CHECK: pipeline-sim: note: producer warp 0 of CTA 0 at {{.*}}bug_unbalanced.mlir:66:9
// CHECK: pipeline-sim: note: consumer warp 1 of CTA 0 at {{.*}}bug_unbalanced.mlir:74:9
// CHECK: pipeline-sim: FAILED: 100 schedules, 100 deadlock (@no_commit
// CHECK: pipeline-sim: unbalanced: consumer warp {{[12]}} of CTA 0 releases pipeline 'ab' stage 0 of CTA 0 without waiting on it first (unbalanced consumer.wait / consumer.release)
// CHECK: pipeline-sim: FAILED: 100 schedules, 100 unbalanced (@release_twice

!p = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<warp, 1>, consumer = #pipeline.group<thread, 2>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>

gpu.module @kernels {
  gpu.func @commit_twice() kernel attributes {known_block_size = array<i32: 96, 1, 1>} {
    %c0 = arith.constant 0 : i32
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
        pipeline.producer.commit %p, %s : !p, !ps
        pipeline.producer.commit %p, %s : !p, !ps
        %nx = pipeline.state.advance %s : !ps
        scf.yield %nx : !ps
      }
      pipeline.producer.tail %p, %sN : !p, !ps
    } else {
      %s0 = pipeline.state.make : !cs
      %sN = scf.for %k = %lb to %ub step %one iter_args(%s = %s0) -> (!cs) {
        pipeline.consumer.wait %p, %s : !p, !cs
        pipeline.consumer.release %p, %s {elect_one} : !p, !cs
        %nx = pipeline.state.advance %s : !cs
        scf.yield %nx : !cs
      }
    }
    gpu.return
  }

  gpu.func @no_commit() kernel attributes {known_block_size = array<i32: 96, 1, 1>} {
    %c0 = arith.constant 0 : i32
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
        %nx = pipeline.state.advance %s : !ps
        scf.yield %nx : !ps
      }
      pipeline.producer.tail %p, %sN : !p, !ps
    } else {
      %s0 = pipeline.state.make : !cs
      %sN = scf.for %k = %lb to %ub step %one iter_args(%s = %s0) -> (!cs) {
        pipeline.consumer.wait %p, %s : !p, !cs
        pipeline.consumer.release %p, %s {elect_one} : !p, !cs
        %nx = pipeline.state.advance %s : !cs
        scf.yield %nx : !cs
      }
    }
    gpu.return
  }

  gpu.func @release_twice() kernel attributes {known_block_size = array<i32: 96, 1, 1>} {
    %c0 = arith.constant 0 : i32
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
        pipeline.producer.commit %p, %s : !p, !ps
        %nx = pipeline.state.advance %s : !ps
        scf.yield %nx : !ps
      }
      pipeline.producer.tail %p, %sN : !p, !ps
    } else {
      %s0 = pipeline.state.make : !cs
      %sN = scf.for %k = %lb to %ub step %one iter_args(%s = %s0) -> (!cs) {
        pipeline.consumer.wait %p, %s : !p, !cs
        pipeline.consumer.release %p, %s {elect_one} : !p, !cs
        pipeline.consumer.release %p, %s {elect_one} : !p, !cs
        %nx = pipeline.state.advance %s : !cs
        scf.yield %nx : !cs
      }
    }
    gpu.return
  }
}
