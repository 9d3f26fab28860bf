// RUN: not %python -m pipeline_mlir.sim %s --seed 1 > %t
// RUN: FileCheck %s < %t
// RUN: %python -m pipeline_mlir.sim %s --seed 1 --kernel with_tail | FileCheck %s --check-prefix=TAIL

// A CTA exiting while its peer still arrives on its barriers (why
// producer_tail exists): in a 2-CTA cluster whose loads are multicast, each
// consumer warp releases every stage to both CTAs, so without
// producer.tail a CTA may finish while the peer's last releases are still
// on their way to its empty barriers.

// CHECK: pipeline-sim: arrive on an exited CTA: consumer warp {{[12]}} of CTA [[PEER:[01]]] arrives on pipeline 'ab' empty barrier stage {{[01]}} of CTA {{[01]}}, but CTA {{[01]}} has already exited (missing producer_tail: a CTA must not exit while peers still signal its barriers)
// CHECK: pipeline-sim: FAILED: 100 schedules, {{[0-9]+}} exited-cta (@no_tail, 2 CTA(s) x 3 warp(s); random, seed 1)
// TAIL: pipeline-sim: OK: 100 schedules, 0 deadlocks (@with_tail, 2 CTA(s) x 3 warp(s); random, seed 1)

!p = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 4>, tx_count = 8192, cluster = #pipeline.cluster<1, 2, 1, 1>, multicast = m>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>

gpu.module @kernels {
  gpu.func @no_tail(%desc: !llvm.ptr, %smem: !llvm.ptr<3>) kernel attributes {known_block_size = array<i32: 96, 1, 1>} {
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %c32 = arith.constant 32 : i32
    %true = arith.constant true
    %mask = arith.constant 3 : i16
    %lb = arith.constant 0 : index
    %ub = arith.constant 4 : index
    %one = arith.constant 1 : index
    %p = pipeline.create {defer_sync, name = "ab"} : !p
    pipeline.init_arrive {cluster_size = 2}
    pipeline.init_wait {cluster_size = 2}
    %warp = nvvm.read.ptx.sreg.warpid : i32
    %is_producer = arith.cmpi eq, %warp, %c0 : i32
    scf.if %is_producer {
      %s0 = pipeline.state.make : !ps
      %sN = scf.for %k = %lb to %ub step %one iter_args(%s = %s0) -> (!ps) {
        pipeline.producer.acquire %p, %s : !p, !ps
        %e = nvvm.elect.sync -> i1
        scf.if %e {
          pipeline.copy.tma_load %p, %s, %desc[%c0, %c0] to %smem multicast %mask {bytes = 4096} : !p, !ps, !llvm.ptr, !llvm.ptr<3>
        }
        pipeline.producer.commit %p, %s : !p, !ps
        %nx = pipeline.state.advance %s : !ps
        scf.yield %nx : !ps
      }
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

  gpu.func @with_tail(%desc: !llvm.ptr, %smem: !llvm.ptr<3>) kernel attributes {known_block_size = array<i32: 96, 1, 1>} {
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %c32 = arith.constant 32 : i32
    %true = arith.constant true
    %mask = arith.constant 3 : i16
    %lb = arith.constant 0 : index
    %ub = arith.constant 4 : index
    %one = arith.constant 1 : index
    %p = pipeline.create {defer_sync, name = "ab"} : !p
    pipeline.init_arrive {cluster_size = 2}
    pipeline.init_wait {cluster_size = 2}
    %warp = nvvm.read.ptx.sreg.warpid : i32
    %is_producer = arith.cmpi eq, %warp, %c0 : i32
    scf.if %is_producer {
      %s0 = pipeline.state.make : !ps
      %sN = scf.for %k = %lb to %ub step %one iter_args(%s = %s0) -> (!ps) {
        pipeline.producer.acquire %p, %s : !p, !ps
        %e = nvvm.elect.sync -> i1
        scf.if %e {
          pipeline.copy.tma_load %p, %s, %desc[%c0, %c0] to %smem multicast %mask {bytes = 4096} : !p, !ps, !llvm.ptr, !llvm.ptr<3>
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
