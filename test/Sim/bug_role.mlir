// RUN: not %python -m pipeline_mlir.sim %s --seed 1 > %t
// RUN: FileCheck %s < %t

// A consumer verb from producer threads (NVIDIA/cutlass#2126): the release
// sits after the role branch, so the producer warp runs it too (and adds
// arrivals the empty barrier does not count).

// CHECK: pipeline-sim: wrong role: producer warp 0 of CTA 0 issues consumer.release on pipeline 'ab': a consumer verb from the producer role (it used producer verbs of that pipeline before)
// CHECK: pipeline-sim: FAILED: 100 schedules, 100 role (@release_by_all

!p = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<warp, 1>, consumer = #pipeline.group<thread, 2>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>

gpu.module @kernels {
  gpu.func @release_by_all() kernel attributes {known_block_size = array<i32: 96, 1, 1>} {
    %c0 = arith.constant 0 : i32
    %lb = arith.constant 0 : index
    %ub = arith.constant 4 : index
    %one = arith.constant 1 : index
    %p = pipeline.create {name = "ab"} : !p
    %warp = nvvm.read.ptx.sreg.warpid : i32
    %is_producer = arith.cmpi eq, %warp, %c0 : i32
    %ps0 = pipeline.state.make : !ps
    %cs0 = pipeline.state.make : !cs
    %r:2 = scf.for %k = %lb to %ub step %one iter_args(%ps = %ps0, %cs = %cs0) -> (!ps, !cs) {
      scf.if %is_producer {
        pipeline.producer.acquire %p, %ps : !p, !ps
        pipeline.producer.commit %p, %ps : !p, !ps
      } else {
        pipeline.consumer.wait %p, %cs : !p, !cs
      }
      pipeline.consumer.release %p, %cs {elect_one} : !p, !cs
      %pn = pipeline.state.advance %ps : !ps
      %cn = pipeline.state.advance %cs : !cs
      scf.yield %pn, %cn : !ps, !cs
    }
    gpu.return
  }
}
