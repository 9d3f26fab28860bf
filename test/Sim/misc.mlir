// RUN: %python -m pipeline_mlir.sim %s --seed 2 --schedules 40 | FileCheck %s
// RUN: not %python -m pipeline_mlir.sim %s --seed 2 --schedules 40 --block-dim 96 --kernel order_named | FileCheck %s --check-prefix=BLOCK

// The other verbs: PipelineOrder with a named barrier, PipelineTmaStore's
// bulk async-groups, and PipelineCpAsync (cp.async.mbarrier.arrive.noinc
// lands asynchronously). With 3 warps, warp 2 would be group 2 of an order
// of 2 groups.

// CHECK: pipeline-sim: OK: 40 schedules, 0 deadlocks (@order_named, 1 CTA(s) x 2 warp(s); random, seed 2)
// CHECK: pipeline-sim: OK: 40 schedules, 0 deadlocks (@tma_store, 1 CTA(s) x 1 warp(s); random, seed 2)
// CHECK: pipeline-sim: OK: 40 schedules, 0 deadlocks (@cp_async, 1 CTA(s) x 2 warp(s); random, seed 2)
// BLOCK: pipeline-sim: wrong role: warp 2 of CTA 0 acts as group 2 of pipeline 'turns', which orders only 2 groups

!ord = !pipeline.pipeline<order, stages = 1, producer = #pipeline.group<warp, 1>, length = 2>
!os = !pipeline.state<1, producer_consumer>
!st = !pipeline.pipeline<tma_store, stages = 2>
!ps2 = !pipeline.state<2, producer>
!cp = !pipeline.pipeline<cp_async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<warp, 1>>
!cs2 = !pipeline.state<2, consumer>

gpu.module @kernels {
  gpu.func @order_named() kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    %lb = arith.constant 0 : index
    %ub = arith.constant 3 : index
    %one = arith.constant 1 : index
    %p = pipeline.create {name = "turns"} : !ord
    %gid = nvvm.read.ptx.sreg.warpid : i32
    %s0 = pipeline.order.state %p, %gid : !ord -> !os
    %sN = scf.for %k = %lb to %ub step %one iter_args(%s = %s0) -> (!os) {
      pipeline.order.wait %p, %s, %gid : !ord, !os
      %nx = pipeline.order.arrive %p, %s, %gid : !ord, !os
      scf.yield %nx : !os
    }
    pipeline.named_barrier.sync id = 1, threads = 64
    gpu.return
  }

  gpu.func @tma_store(%desc: !llvm.ptr, %smem: !llvm.ptr<3>) kernel attributes {known_block_size = array<i32: 32, 1, 1>} {
    %c0 = arith.constant 0 : i32
    %lb = arith.constant 0 : index
    %ub = arith.constant 5 : index
    %one = arith.constant 1 : index
    %p = pipeline.create {name = "epi"} : !st
    %s0 = pipeline.state.make : !ps2
    %e = nvvm.elect.sync -> i1
    %sN = scf.for %k = %lb to %ub step %one iter_args(%s = %s0) -> (!ps2) {
      pipeline.producer.acquire %p, %s : !st, !ps2
      scf.if %e {
        pipeline.copy.tma_store %desc[%c0, %c0] from %smem : !llvm.ptr, !llvm.ptr<3>
      }
      pipeline.producer.commit %p, %s : !st, !ps2
      %nx = pipeline.state.advance %s : !ps2
      scf.yield %nx : !ps2
    }
    pipeline.producer.tail %p, %sN : !st, !ps2
    gpu.return
  }

  gpu.func @cp_async() kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    %c0 = arith.constant 0 : i32
    %lb = arith.constant 0 : index
    %ub = arith.constant 5 : index
    %one = arith.constant 1 : index
    %p = pipeline.create {name = "cp"} : !cp
    %warp = nvvm.read.ptx.sreg.warpid : i32
    %is_producer = arith.cmpi eq, %warp, %c0 : i32
    scf.if %is_producer {
      %s0 = pipeline.state.make : !ps2
      %sN = scf.for %k = %lb to %ub step %one iter_args(%s = %s0) -> (!ps2) {
        pipeline.producer.acquire %p, %s : !cp, !ps2
        pipeline.producer.commit %p, %s : !cp, !ps2
        %nx = pipeline.state.advance %s : !ps2
        scf.yield %nx : !ps2
      }
      pipeline.producer.tail %p, %sN : !cp, !ps2
    } else {
      %s0 = pipeline.state.make : !cs2
      %sN = scf.for %k = %lb to %ub step %one iter_args(%s = %s0) -> (!cs2) {
        pipeline.consumer.wait %p, %s : !cp, !cs2
        pipeline.consumer.release %p, %s : !cp, !cs2
        %nx = pipeline.state.advance %s : !cs2
        scf.yield %nx : !cs2
      }
    }
    gpu.return
  }
}
