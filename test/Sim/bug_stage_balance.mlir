// RUN: not %python -m pipeline_mlir.sim %s --kernel off_by_one | FileCheck %s
// RUN: %python -m pipeline_mlir.sim %s --kernel twin | FileCheck %s --check-prefix=TWIN
// RUN: not %python -m pipeline_mlir.sim %s --kernel off_by_one --arg 0=1 | FileCheck %s --check-prefix=ONE

// A consumer loop one stage shorter than its producer's, both bounded by the
// kernel argument %n: with no --arg the simulator chooses %n (4) and finds
// the producer's tail waiting for the stage nobody releases (pipeline-verify-
// protocol's stage-balance check reports the same kernel statically). The
// twin, whose consumer runs from 1 to %n + 1, passes every choice. With
// --arg 0=1 the counts are 1 and 0 and the hang shows as well.

// CHECK: pipeline-sim: note: @off_by_one: chose argument 0 = 4 (not given with --arg)
// CHECK: pipeline-sim: deadlock: producer warp 0 of CTA 0 waits on pipeline 'ab' empty barrier {{.*}} in producer.tail
// CHECK: pipeline-sim: FAILED: 100 schedules, 100 deadlock (@off_by_one

// TWIN: pipeline-sim: note: @twin: chose argument 0 = 4 (not given with --arg)
// TWIN: pipeline-sim: note: @twin: chose argument 0 = 5 (not given with --arg)
// TWIN: pipeline-sim: note: @twin: chose argument 0 = 1 (not given with --arg)
// TWIN: pipeline-sim: OK: 100 schedules, 0 deadlocks (@twin

// ONE-NOT: chose
// ONE: pipeline-sim: deadlock: producer warp 0 of CTA 0 waits on pipeline 'ab' empty barrier stage 0 phase 0 in producer.tail

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>
gpu.module @kernels {
gpu.func @off_by_one(%n: i32) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c32 = arith.constant 32 : index
  %p = pipeline.create {name = "ab"} : !P
  %tid = gpu.thread_id x
  %w = arith.divui %tid, %c32 : index
  %w32 = arith.index_cast %w : index to i32
  %is0 = arith.cmpi eq, %w32, %c0 : i32
  scf.if %is0 {
    %s0 = pipeline.state.make : !ps
    %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) : i32 {
      pipeline.producer.acquire %p, %s : !P, !ps
      pipeline.producer.commit %p, %s : !P, !ps
      %s1 = pipeline.state.advance %s : !ps
      scf.yield %s1 : !ps
    }
    pipeline.producer.tail %p, %sN : !P, !ps
  } else {
    %nm1 = arith.subi %n, %c1 : i32
    %c = pipeline.state.make : !cs
    %cN = scf.for %i = %c0 to %nm1 step %c1 iter_args(%s = %c) -> (!cs) : i32 {
      pipeline.consumer.wait %p, %s : !P, !cs
      pipeline.consumer.release %p, %s : !P, !cs
      %s1 = pipeline.state.advance %s : !cs
      scf.yield %s1 : !cs
    }
  }
  gpu.return
}
gpu.func @twin(%n: i32) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c32 = arith.constant 32 : index
  %p = pipeline.create {name = "ab"} : !P
  %tid = gpu.thread_id x
  %w = arith.divui %tid, %c32 : index
  %w32 = arith.index_cast %w : index to i32
  %is0 = arith.cmpi eq, %w32, %c0 : i32
  scf.if %is0 {
    %s0 = pipeline.state.make : !ps
    %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) : i32 {
      pipeline.producer.acquire %p, %s : !P, !ps
      pipeline.producer.commit %p, %s : !P, !ps
      %s1 = pipeline.state.advance %s : !ps
      scf.yield %s1 : !ps
    }
    pipeline.producer.tail %p, %sN : !P, !ps
  } else {
    %np1 = arith.addi %n, %c1 : i32
    %c = pipeline.state.make : !cs
    %cN = scf.for %i = %c1 to %np1 step %c1 iter_args(%s = %c) -> (!cs) : i32 {
      pipeline.consumer.wait %p, %s : !P, !cs
      pipeline.consumer.release %p, %s : !P, !cs
      %s1 = pipeline.state.advance %s : !cs
      scf.yield %s1 : !cs
    }
  }
  gpu.return
}
}
