// RUN: not %python -m pipeline_mlir.sim %s | FileCheck %s
// RUN: not %python -m pipeline_mlir.sim %s --trip-count 3 --block-dim 64 | FileCheck %s --check-prefix=LANES

// What the simulator cannot evaluate is reported, once, as unsupported
// (exit 1) instead of being guessed: a loop bound that is a kernel argument
// without --trip-count, and a pipeline state that differs between the lanes
// of a warp.

// CHECK: pipeline-sim: unsupported: scf.for at loc("{{.*}}unsupported.mlir":[[@LINE+15]]:{{[0-9]+}}): loop bounds are not constants; pass --trip-count
// CHECK: pipeline-sim: FAILED: 1 schedules, 1 unsupported (@by_lane
// LANES: pipeline-sim: unsupported: pipeline.state.make at {{.*}}: a state operand differs between the lanes of a warp

!p = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<warp, 1>, consumer = #pipeline.group<warp, 1>>
!ps = !pipeline.state<2, producer>

gpu.module @kernels {
  gpu.func @by_lane(%n: index) kernel {
    %c2 = arith.constant 2 : i32
    %lb = arith.constant 0 : index
    %one = arith.constant 1 : index
    %p = pipeline.create {name = "ab"} : !p
    %lane = nvvm.read.ptx.sreg.laneid : i32
    %i = arith.remui %lane, %c2 : i32
    scf.for %k = %lb to %n step %one {
      %s0 = pipeline.state.make index %i phase %i : !ps
      pipeline.producer.acquire %p, %s0 : !p, !ps
    }
    gpu.return
  }
}
