// RUN: not %python -m pipeline_mlir.sim %s --seed 1 > %t
// RUN: FileCheck %s < %t

// A PipelineAsync producer warp fills each stage with plain stores and
// publishes it with producer.commit. @late_store stores the stage's second
// word after the commit (and before the next acquire): whatever the
// schedule, the consumer may read the stage before that store lands. The
// store is tied to the stage by its address, computed from
// pipeline.state.index of the committed state. @stores_first is the correct
// twin: both stores before the commit.

// CHECK: pipeline-sim: commit before write: producer warp 0 of CTA 0 writes pipeline 'ring' stage 0 of CTA 0 with llvm.store at {{.*}}bug_commit_before_write.mlir:[[#@LINE+32]]:{{[0-9]+}} after its producer.commit of that stage (committed at {{.*}}bug_commit_before_write.mlir:[[#@LINE+30]]:{{[0-9]+}}) and before acquiring it again: the consumers may read the stage before the write lands (move the write before producer.commit)
// CHECK: pipeline-sim: FAILED: 100 schedules, 100 commit-before-write (@late_store
// CHECK: pipeline-sim: OK: 100 schedules, 0 deadlocks (@stores_first

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>

gpu.module @kernels {
  gpu.func @late_store(%ring: !llvm.ptr<3>) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    %c0 = arith.constant 0 : i32
    %c32 = arith.constant 32 : i32
    %c128 = arith.constant 128 : i32
    %v = arith.constant 7 : i32
    %lb = arith.constant 0 : index
    %ub = arith.constant 5 : index
    %one = arith.constant 1 : index
    %p = pipeline.create {name = "ring"} : !P
    %tid = gpu.thread_id x
    %tid32 = arith.index_cast %tid : index to i32
    %warp = arith.divui %tid32, %c32 : i32
    %is_producer = arith.cmpi eq, %warp, %c0 : i32
    scf.if %is_producer {
      %s0 = pipeline.state.make : !ps
      %sN = scf.for %k = %lb to %ub step %one iter_args(%s = %s0) -> (!ps) {
        pipeline.producer.acquire %p, %s : !P, !ps
        %idx = pipeline.state.index %s : !ps
        %off = arith.muli %idx, %c128 : i32
        %stage = llvm.getelementptr %ring[%off] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
        llvm.store %v, %stage : i32, !llvm.ptr<3>
        pipeline.producer.commit %p, %s : !P, !ps
        %word1 = llvm.getelementptr %stage[1] : (!llvm.ptr<3>) -> !llvm.ptr<3>, i32
        llvm.store %v, %word1 : i32, !llvm.ptr<3>
        %n = pipeline.state.advance %s : !ps
        scf.yield %n : !ps
      }
      pipeline.producer.tail %p, %sN : !P, !ps
    } else {
      %s0 = pipeline.state.make : !cs
      %sN = scf.for %k = %lb to %ub step %one iter_args(%s = %s0) -> (!cs) {
        pipeline.consumer.wait %p, %s : !P, !cs
        pipeline.consumer.release %p, %s : !P, !cs
        %n = pipeline.state.advance %s : !cs
        scf.yield %n : !cs
      }
    }
    gpu.return
  }

  gpu.func @stores_first(%ring: !llvm.ptr<3>) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    %c0 = arith.constant 0 : i32
    %c32 = arith.constant 32 : i32
    %c128 = arith.constant 128 : i32
    %v = arith.constant 7 : i32
    %lb = arith.constant 0 : index
    %ub = arith.constant 5 : index
    %one = arith.constant 1 : index
    %p = pipeline.create {name = "ring"} : !P
    %tid = gpu.thread_id x
    %tid32 = arith.index_cast %tid : index to i32
    %warp = arith.divui %tid32, %c32 : i32
    %is_producer = arith.cmpi eq, %warp, %c0 : i32
    scf.if %is_producer {
      %s0 = pipeline.state.make : !ps
      %sN = scf.for %k = %lb to %ub step %one iter_args(%s = %s0) -> (!ps) {
        pipeline.producer.acquire %p, %s : !P, !ps
        %idx = pipeline.state.index %s : !ps
        %off = arith.muli %idx, %c128 : i32
        %stage = llvm.getelementptr %ring[%off] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
        llvm.store %v, %stage : i32, !llvm.ptr<3>
        %word1 = llvm.getelementptr %stage[1] : (!llvm.ptr<3>) -> !llvm.ptr<3>, i32
        llvm.store %v, %word1 : i32, !llvm.ptr<3>
        pipeline.producer.commit %p, %s : !P, !ps
        %n = pipeline.state.advance %s : !ps
        scf.yield %n : !ps
      }
      pipeline.producer.tail %p, %sN : !P, !ps
    } else {
      %s0 = pipeline.state.make : !cs
      %sN = scf.for %k = %lb to %ub step %one iter_args(%s = %s0) -> (!cs) {
        pipeline.consumer.wait %p, %s : !P, !cs
        pipeline.consumer.release %p, %s : !P, !cs
        %n = pipeline.state.advance %s : !cs
        scf.yield %n : !cs
      }
    }
    gpu.return
  }
}
