// RUN: %python -m pipeline_mlir.sim %s --seed 1 --trip-count 4 | FileCheck %s
// RUN: %python -m pipeline_mlir.sim %s --seed 7 --schedules 50 --trip-count 9 | FileCheck %s --check-prefix=TRIPS

// PipelineTmaAsync in one CTA: warp 0 acquires (one elected
// arrive.expect_tx(8192) per warp) and one elected lane issues two 4 KiB TMA
// loads; warps 1 and 2 consume (lane 0 of each warp releases: count 2). The
// trip count is a kernel argument, so it comes from --trip-count (default:
// the loop is rejected, see unsupported.mlir).

// CHECK: pipeline-sim: OK: 100 schedules, 0 deadlocks (@tma_1cta, 1 CTA(s) x 3 warp(s), trip count 4; random, seed 1)
// TRIPS: pipeline-sim: OK: 50 schedules, 0 deadlocks (@tma_1cta, 1 CTA(s) x 3 warp(s), trip count 9; random, seed 7)

!p = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 2>, tx_count = 8192>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>

gpu.module @kernels {
  gpu.func @tma_1cta(%desc: !llvm.ptr, %smem: !llvm.ptr<3>, %n: index) kernel attributes {known_block_size = array<i32: 96, 1, 1>} {
    %c0 = arith.constant 0 : i32
    %c32 = arith.constant 32 : i32
    %c64 = arith.constant 64 : i32
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
          pipeline.copy.tma_load %p, %s, %desc[%c0, %c0] to %smem {bytes = 4096} : !p, !ps, !llvm.ptr, !llvm.ptr<3>
          pipeline.copy.tma_load %p, %s, %desc[%c64, %c0] to %smem {bytes = 4096} : !p, !ps, !llvm.ptr, !llvm.ptr<3>
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
