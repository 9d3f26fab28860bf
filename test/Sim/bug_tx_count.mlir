// RUN: not %python -m pipeline_mlir.sim %s --seed 1 > %t
// RUN: FileCheck %s < %t

// expect_tx bytes that differ from what the copies deliver.
// @over_armed: tx_count = 16384 but one 8 KiB load per stage: the full
//   barrier waits forever for 8192 more bytes.
// @under_armed: tx_count = 4096 but two 4 KiB loads per stage: the phase
//   completes when the first copy lands, so consumers read while the second
//   is still writing (commit before the copy finished, NVIDIA/cutlass
//   PR #2502), or the second copy's bytes land in the next phase.
// @whole_warp_copy: the TMA load is not under elect.sync, so each of the 32
//   lanes issues it (NVIDIA/cutlass PR #3654 has the reverse bug).

// CHECK: pipeline-sim: deadlock: {{.*}}consumer warp 1 of CTA 0 waits on pipeline 'ab' full barrier stage 0 phase 0 in consumer.wait (phase 0 (#0) has 1 of 1 arrivals, 8192 tx bytes outstanding (armed 16384, delivered 8192))
// CHECK: pipeline-sim: FAILED: 100 schedules, 100 deadlock (@over_armed
// CHECK-DAG: pipeline-sim: read before the copy finished: consumer warp {{[12]}} of CTA 0 reads pipeline 'ab' stage 0 of CTA 0 while copy.tma_load of producer warp 0 of CTA 0 into stage 0 still writes it: the full barrier completed before the data landed (commit before the copy finished)
// CHECK-DAG: pipeline-sim: tx bytes: copy.tma_load of producer warp 0 of CTA 0 into stage 0 completes 4096 tx bytes on pipeline 'ab' full barrier stage 0 of CTA 0 after phase 0 (#0) had already completed: the copies deliver more bytes than expect_tx armed for that phase
// CHECK: pipeline-sim: FAILED: 100 schedules, {{.*}}early-read{{.*}} (@under_armed
// CHECK: pipeline-sim: {{read before the copy finished|tx bytes}}: {{.*}}copy.tma_load of producer warp 0 of CTA 0 into stage 0
// CHECK: pipeline-sim: FAILED: 100 schedules, {{.*}} (@whole_warp_copy

!p = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 2>, tx_count = 16384>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>
!p2 = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 2>, tx_count = 4096>

gpu.module @kernels {
  gpu.func @over_armed(%desc: !llvm.ptr, %smem: !llvm.ptr<3>) kernel attributes {known_block_size = array<i32: 96, 1, 1>} {
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %c32 = arith.constant 32 : i32
    %true = arith.constant true
    %mask = arith.constant 3 : i16
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
        %e = nvvm.elect.sync -> i1
        scf.if %e {
          pipeline.copy.tma_load %p, %s, %desc[%c0, %c0] to %smem {bytes = 8192} : !p, !ps, !llvm.ptr, !llvm.ptr<3>
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

  gpu.func @under_armed(%desc: !llvm.ptr, %smem: !llvm.ptr<3>) kernel attributes {known_block_size = array<i32: 96, 1, 1>} {
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %c32 = arith.constant 32 : i32
    %true = arith.constant true
    %mask = arith.constant 3 : i16
    %lb = arith.constant 0 : index
    %ub = arith.constant 4 : index
    %one = arith.constant 1 : index
    %p = pipeline.create {name = "ab"} : !p2
    %warp = nvvm.read.ptx.sreg.warpid : i32
    %is_producer = arith.cmpi eq, %warp, %c0 : i32
    scf.if %is_producer {
      %s0 = pipeline.state.make : !ps
      %sN = scf.for %k = %lb to %ub step %one iter_args(%s = %s0) -> (!ps) {
        pipeline.producer.acquire %p, %s : !p2, !ps
        %e = nvvm.elect.sync -> i1
        scf.if %e {
          pipeline.copy.tma_load %p, %s, %desc[%c0, %c0] to %smem {bytes = 4096} : !p2, !ps, !llvm.ptr, !llvm.ptr<3>
          pipeline.copy.tma_load %p, %s, %desc[%c0, %c0] to %smem {bytes = 4096} : !p2, !ps, !llvm.ptr, !llvm.ptr<3>
        }
        pipeline.producer.commit %p, %s : !p2, !ps
        %nx = pipeline.state.advance %s : !ps
        scf.yield %nx : !ps
      }
      pipeline.producer.tail %p, %sN : !p2, !ps
    } else {
      %s0 = pipeline.state.make : !cs
      %sN = scf.for %k = %lb to %ub step %one iter_args(%s = %s0) -> (!cs) {
        pipeline.consumer.wait %p, %s : !p2, !cs
        pipeline.consumer.release %p, %s : !p2, !cs
        %nx = pipeline.state.advance %s : !cs
        scf.yield %nx : !cs
      }
    }
    gpu.return
  }

  gpu.func @whole_warp_copy(%desc: !llvm.ptr, %smem: !llvm.ptr<3>) kernel attributes {known_block_size = array<i32: 96, 1, 1>} {
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %c32 = arith.constant 32 : i32
    %true = arith.constant true
    %mask = arith.constant 3 : i16
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
        %e = nvvm.elect.sync -> i1
        scf.if %true {
          pipeline.copy.tma_load %p, %s, %desc[%c0, %c0] to %smem {bytes = 8192} : !p, !ps, !llvm.ptr, !llvm.ptr<3>
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
