// RUN: %python -m pipeline_mlir.sim %s --seed 1 | FileCheck %s
// RUN: %python -m pipeline_mlir.sim %s --seed 3 --schedules 200 | FileCheck %s --check-prefix=MORE

// PipelineTmaAsync in a 2-CTA cluster, loads multicast along M (mask 0b11):
// each CTA's producer loads one 4 KiB half into both CTAs, so each stage of
// each CTA receives 8192 bytes = tx_count. Consumers (warps 1, 2 of each
// CTA) release through their signalling lanes 0 and 1 to both CTAs, so each
// empty barrier sees 2 CTAs x 2 warps = 4 arrivals (consumer = thread, 4).
// producer.tail keeps each CTA alive until the peer's last releases landed.
// The cluster shape (2 CTAs) comes from the pipeline type.

// CHECK: pipeline-sim: OK: 100 schedules, 0 deadlocks (@tma_2cta, 2 CTA(s) x 3 warp(s); random, seed 1)
// MORE: pipeline-sim: OK: 200 schedules, 0 deadlocks (@tma_2cta, 2 CTA(s) x 3 warp(s); random, seed 3)

!p = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 4>, tx_count = 8192, cluster = #pipeline.cluster<1, 2, 1, 1>, multicast = m>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>

gpu.module @kernels {
  gpu.func @tma_2cta(%desc: !llvm.ptr, %smem: !llvm.ptr<3>) kernel attributes {known_block_size = array<i32: 96, 1, 1>} {
    %c0 = arith.constant 0 : i32
    %c32 = arith.constant 32 : i32
    %c64 = arith.constant 64 : i32
    %mask = arith.constant 3 : i16
    %lb = arith.constant 0 : index
    %ub = arith.constant 5 : index
    %one = arith.constant 1 : index
    %p = pipeline.create {defer_sync, name = "ab"} : !p
    pipeline.init_arrive {cluster_size = 2}
    pipeline.init_wait {cluster_size = 2}
    %rank = nvvm.read.ptx.sreg.cluster.ctarank : i32
    %row = arith.muli %rank, %c64 : i32
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %warp = arith.divui %tid, %c32 : i32
    %is_producer = arith.cmpi eq, %warp, %c0 : i32
    scf.if %is_producer {
      %s0 = pipeline.state.make : !ps
      %sN = scf.for %k = %lb to %ub step %one iter_args(%s = %s0) -> (!ps) {
        pipeline.producer.acquire %p, %s : !p, !ps
        %e = nvvm.elect.sync -> i1
        scf.if %e {
          pipeline.copy.tma_load %p, %s, %desc[%row, %c0] to %smem multicast %mask {bytes = 4096} : !p, !ps, !llvm.ptr, !llvm.ptr<3>
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
}
