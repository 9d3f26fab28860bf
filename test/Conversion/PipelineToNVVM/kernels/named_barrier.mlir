// NamedBarrier: warpgroup 0 signals warpgroup 1 through barrier 1, both
// meet on barrier 2 + index; unaligned forms for divergent callers.
// RUN: pipeline-opt %s --convert-pipeline-to-nvvm --cse | FileCheck %s
// RUN: pipeline-opt %s --pipeline-to-cubin="chip=sm_90a format=isa" | %python %S/../Inputs/ptx.py > %t.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx
// RUN: %if ptxas %{ pipeline-opt %s --pipeline-to-cubin="chip=sm_90a format=bin" | FileCheck %s --check-prefix=BIN90 %}
// RUN: %if ptxas %{ pipeline-opt %s --pipeline-to-cubin="chip=sm_100a format=bin" | FileCheck %s --check-prefix=BIN100 %}

module attributes {gpu.container_module} {
gpu.module @named_barrier {
  gpu.func @kernel(%k: i32) kernel {
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %c128 = arith.constant 128 : i32
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %wg = arith.divui %tid, %c128 : i32
    %first = arith.cmpi eq, %wg, %c0 : i32
    scf.for %i = %c0 to %k step %c1 : i32 {
      scf.if %first {
        pipeline.named_barrier.arrive id = 1, threads = 256
      } else {
        pipeline.named_barrier.sync id = 1, threads = 256
      }
      %c2 = arith.constant 2 : i32
      %slot = arith.remui %i, %c2 : i32
      pipeline.named_barrier.sync id = 2, threads = 256 index %slot
      pipeline.named_barrier.arrive id = 4, threads = 64 {unaligned}
      pipeline.named_barrier.sync id = 5, threads = 64 {unaligned}
    }
    gpu.return
  }
}
}

// CHECK-LABEL: gpu.module @named_barrier
// CHECK: scf.if
// CHECK:   nvvm.barrier.arrive id = %c1_i32 number_of_threads = %c256_i32{{(_[0-9]+)?}}
// CHECK: } else {
// CHECK:   nvvm.barrier id = %c1_i32 number_of_threads = %c256_i32{{(_[0-9]+)?}}
// The index operand adds to the barrier id.
// CHECK: %[[SLOT:.*]] = arith.remui
// CHECK: %[[ID2:.*]] = arith.addi %c2_i32, %[[SLOT]] : i32
// CHECK: nvvm.barrier id = %[[ID2]] number_of_threads = %c256_i32
// Unaligned: the barrier.cta intrinsics (no NVVM op in MLIR 22).
// CHECK: llvm.call_intrinsic "llvm.nvvm.barrier.cta.arrive.count"(%c4_i32, %c64_i32) : (i32, i32) -> ()
// CHECK: llvm.call_intrinsic "llvm.nvvm.barrier.cta.sync.count"(%c5_i32, %c64_i32) : (i32, i32) -> ()

// PTX-LABEL: // gpu.binary @named_barrier sm_90a
// PTX-DAG: bar.arrive 1, 256;
// PTX-DAG: bar.sync 1, 256;
// PTX-DAG: bar.sync {{%r[0-9]+}}, 256;
// PTX-DAG: barrier.arrive 4, 64;
// PTX-DAG: barrier.sync 5, 64;

// BIN90: gpu.binary @named_barrier [#gpu.object<#nvvm.target<chip = "sm_90a", features = "+ptx88">, {{.*}}bin = "\7FELF
// BIN100: gpu.binary @named_barrier [#gpu.object<#nvvm.target<chip = "sm_100a", features = "+ptx88">, {{.*}}bin = "\7FELF
