// RUN: not %python -m pipeline_mlir.sim %s | FileCheck %s
// RUN: not %python -m pipeline_mlir.sim %s --trip-count 3 --block-dim 64 | FileCheck %s --check-prefix=LANES
// RUN: %python -m pipeline_mlir.sim %s --arg 0=0 | FileCheck %s --check-prefix=ZERO
// RUN: not %python -m pipeline_mlir.sim %s --arg 0=1 | FileCheck %s --check-prefix=ONE

// What the simulator cannot evaluate is reported, once, as unsupported
// (exit 1) instead of being guessed: a pipeline state that differs between
// the lanes of a warp. A bound that is an integer kernel argument is not a
// reason: the simulator chooses its value (and says so), then meets the
// lanes. Nor is a loop bound read from memory: the buffer is filled from a
// seeded random fill (or --arg POS=V,...), and a finding names the loop that
// branched on memory and the values read (here the producer acquires
// without committing once the loaded bound is 1).

// CHECK: pipeline-sim: note: @by_lane: chose argument 0 = 4 (not given with --arg)
// CHECK: pipeline-sim: unsupported: pipeline.state.make at {{.*}}: a state operand differs between the lanes of a warp
// CHECK: pipeline-sim: FAILED: 1 schedules, 1 unsupported (@by_lane
// CHECK: pipeline-sim: unbalanced: producer warp {{[0-9]+}} of CTA 0 finished with pipeline 'ab' stage 0 of CTA 0 acquired but never committed
// CHECK: pipeline-sim: note: scf.for at {{.*}}unsupported.mlir:{{[0-9]+}}:{{[0-9]+}} branches on memory (loaded at {{.*}}unsupported.mlir:{{[0-9]+}}:{{[0-9]+}})
// CHECK: pipeline-sim: note: memory read from argument 0 (random fill, seed 0
// CHECK: pipeline-sim: FAILED: {{[0-9]+}} schedules, {{[0-9]+}} unbalanced (@from_memory
// A single value given for a buffer is what every element reads: a loaded
// bound of 0 runs no acquire, of 1 one acquire without its commit.
// ZERO: pipeline-sim: OK: {{[0-9]+}} schedules, 0 deadlocks (@from_memory
// ONE: pipeline-sim: note: memory read from argument 0 (given; byte offset=value): +0=1
// ONE: pipeline-sim: FAILED: [[N:[0-9]+]] schedules, [[N]] unbalanced (@from_memory
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
  gpu.func @from_memory(%ptr: !llvm.ptr<1>) kernel {
    %lb = arith.constant 0 : index
    %one = arith.constant 1 : index
    %p = pipeline.create {name = "ab"} : !p
    %n32 = llvm.load %ptr : !llvm.ptr<1> -> i32
    %n = arith.index_cast %n32 : i32 to index
    %s0 = pipeline.state.make : !ps
    scf.for %k = %lb to %n step %one {
      pipeline.producer.acquire %p, %s0 : !p, !ps
    }
    gpu.return
  }
}
