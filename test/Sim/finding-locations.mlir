// RUN: not %python -m pipeline_mlir.sim %s --seed 1 --schedules 40 > %t
// RUN: FileCheck %s < %t

// Every finding names the user's lines, also where a builder or a pass
// wrapped the op's location (a call site, a name):
// @consumer_phase1: a consumer state made at phase 1 passes its first wait
//   (wrong initial phase); the wait's location is a call site whose callee
//   is the user's line.
// @no_init_sync: defer_sync and no init sync: a consumer waits on a barrier
//   warp 0 has not initialized yet; the finding names the wait (a named
//   location) and the create.

// CHECK: pipeline-sim: wrong initial phase: consumer warp 1 of CTA 0 passes consumer.wait
// CHECK-NEXT: pipeline-sim: note: consumer warp 1 of CTA 0 at kernel.py:41:9
// CHECK: pipeline-sim: FAILED: {{.*}} initial-phase (@consumer_phase1
// CHECK: pipeline-sim: uninitialized barrier: consumer warp 1 of CTA 0 uses pipeline 'ab' full barrier stage 0 of CTA 0 before warp 0 of CTA 0 initialized it
// CHECK-NEXT: pipeline-sim: note: consumer warp 1 of CTA 0 at kernel.py:77:13
// CHECK-NEXT: pipeline-sim: note: pipeline 'ab' created at {{.*}}finding-locations.mlir:[[@LINE+43]]:{{[0-9]+}}
// CHECK: pipeline-sim: FAILED: {{.*}} uninitialized (@no_init_sync

!p = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>

gpu.module @kernels {
  gpu.func @consumer_phase1() kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
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
      %s0 = pipeline.state.make index %c0 phase %c1 : !cs
      %sN = scf.for %k = %lb to %ub step %one iter_args(%s = %s0) -> (!cs) {
        pipeline.consumer.wait %p, %s : !p, !cs loc(callsite("kernel.py":41:9 at "caller.py":3:1))
        pipeline.consumer.release %p, %s : !p, !cs
        %nx = pipeline.state.advance %s : !cs
        scf.yield %nx : !cs
      }
    }
    gpu.return
  }

  gpu.func @no_init_sync() kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    %c0 = arith.constant 0 : i32
    %lb = arith.constant 0 : index
    %ub = arith.constant 4 : index
    %one = arith.constant 1 : index
    %p = pipeline.create {defer_sync, name = "ab"} : !p
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
        pipeline.consumer.wait %p, %s : !p, !cs loc("wait"("kernel.py":77:13))
        pipeline.consumer.release %p, %s : !p, !cs
        %nx = pipeline.state.advance %s : !cs
        scf.yield %nx : !cs
      }
    }
    gpu.return
  }
}
