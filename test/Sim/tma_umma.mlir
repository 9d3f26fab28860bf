// RUN: %python -m pipeline_mlir.sim %s --seed 1 | FileCheck %s
// RUN: %python -m pipeline_mlir.sim %s --exhaustive-bound 1 --schedules 200 | FileCheck %s --check-prefix=DFS

// sm100: PipelineTmaUmma (TMA -> tcgen05 MMA) in a 2-CTA cluster with loads
// multicast along M, plus a PipelineUmmaAsync accumulator pipeline (MMA ->
// epilogue warps). Warp 0: TMA producer; warp 1: MMA warp, consumer of "ab"
// (its tcgen05.commit arrives on the empty barriers of both CTAs once the
// MMAs finished reading: count 2) and producer of "acc" (tcgen05.commit on
// the accumulator's full barrier); warps 2, 3: epilogue (count 64).
// tcgen05.commit completions are asynchronous events here.

// CHECK: pipeline-sim: OK: 100 schedules, 0 deadlocks (@umma_2cta, 2 CTA(s) x 4 warp(s); random, seed 1)
// DFS: pipeline-sim: OK: 200 schedules, 0 deadlocks (@umma_2cta, 2 CTA(s) x 4 warp(s); exhaustive, preemption bound 1, truncated)

!ab = !pipeline.pipeline<tma_umma, stages = 3, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 2>, tx_count = 16384, cluster = #pipeline.cluster<1, 2, 1, 1>, multicast = m>
!acc = !pipeline.pipeline<umma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<warp, 2>>
!ps3 = !pipeline.state<3, producer>
!cs3 = !pipeline.state<3, consumer>
!ps2 = !pipeline.state<2, producer>
!cs2 = !pipeline.state<2, consumer>

gpu.module @kernels {
  gpu.func @umma_2cta(%desc: !llvm.ptr, %smem: !llvm.ptr<3>) kernel attributes {known_block_size = array<i32: 128, 1, 1>} {
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %c32 = arith.constant 32 : i32
    %c128 = arith.constant 128 : i32
    %mask = arith.constant 3 : i16
    %lb = arith.constant 0 : index
    %ktiles = arith.constant 4 : index
    %tiles = arith.constant 3 : index
    %one = arith.constant 1 : index
    %iters = arith.constant 12 : index
    %ab = pipeline.create {defer_sync, name = "ab"} : !ab
    %acc = pipeline.create {defer_sync, name = "acc"} : !acc
    pipeline.init_arrive {cluster_size = 2}
    pipeline.init_wait {cluster_size = 2}
    %rank = nvvm.read.ptx.sreg.cluster.ctarank : i32
    %row = arith.muli %rank, %c128 : i32
    %warp = nvvm.read.ptx.sreg.warpid : i32
    %is_tma = arith.cmpi eq, %warp, %c0 : i32
    %is_mma = arith.cmpi eq, %warp, %c1 : i32
    scf.if %is_tma {
      %e = nvvm.elect.sync -> i1
      %s0 = pipeline.state.make : !ps3
      %sN = scf.for %i = %lb to %iters step %one iter_args(%s = %s0) -> (!ps3) {
        pipeline.producer.acquire %ab, %s : !ab, !ps3
        scf.if %e {
          pipeline.copy.tma_load %ab, %s, %desc[%row, %c0] to %smem multicast %mask {bytes = 8192} : !ab, !ps3, !llvm.ptr, !llvm.ptr<3>
        }
        pipeline.producer.commit %ab, %s : !ab, !ps3
        %nx = pipeline.state.advance %s : !ps3
        scf.yield %nx : !ps3
      }
      pipeline.producer.tail %ab, %sN : !ab, !ps3
    } else {
      scf.if %is_mma {
        %a0 = pipeline.state.make : !cs3
        %c0s = pipeline.state.make : !ps2
        %aN, %cN = scf.for %t = %lb to %tiles step %one iter_args(%a = %a0, %c = %c0s) -> (!cs3, !ps2) {
          pipeline.producer.acquire %acc, %c : !acc, !ps2
          %ak = scf.for %k = %lb to %ktiles step %one iter_args(%s = %a) -> (!cs3) {
            pipeline.consumer.wait %ab, %s : !ab, !cs3
            pipeline.consumer.release %ab, %s : !ab, !cs3
            %nx = pipeline.state.advance %s : !cs3
            scf.yield %nx : !cs3
          }
          pipeline.producer.commit %acc, %c : !acc, !ps2
          %cx = pipeline.state.advance %c : !ps2
          scf.yield %ak, %cx : !cs3, !ps2
        }
        pipeline.producer.tail %acc, %cN : !acc, !ps2
      } else {
        %e0 = pipeline.state.make : !cs2
        %eN = scf.for %t = %lb to %tiles step %one iter_args(%s = %e0) -> (!cs2) {
          pipeline.consumer.wait %acc, %s : !acc, !cs2
          pipeline.consumer.release %acc, %s : !acc, !cs2
          %nx = pipeline.state.advance %s : !cs2
          scf.yield %nx : !cs2
        }
      }
    }
    gpu.return
  }
}
