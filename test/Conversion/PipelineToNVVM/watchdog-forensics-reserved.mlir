// The forensic dump's symbols are the pass's own: a module that already
// defines one is refused with the watchdog on (it would be reused with
// another meaning); without the watchdog the name is the user's.
// RUN: not pipeline-opt %s --convert-pipeline-to-nvvm="watchdog=true" 2>&1 | FileCheck %s
// RUN: pipeline-opt %s --convert-pipeline-to-nvvm | FileCheck %s --check-prefix=OFF

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<warp, 1>,
                        consumer = #pipeline.group<warp, 1>>
module attributes {gpu.container_module} {
gpu.module @wd {
  // CHECK: error: '__pipeline_watchdog_warps' is reserved for the pipeline watchdog's forensic dump; rename this symbol
  llvm.mlir.global internal @__pipeline_watchdog_warps() {addr_space = 3 : i32} : !llvm.array<32 x i32>
  // CHECK: error: '__pipeline_watchdog_dump' is reserved for the pipeline watchdog's forensic dump; rename this symbol
  llvm.func @__pipeline_watchdog_dump(!llvm.ptr)
  gpu.func @kernel() kernel {
    %p = pipeline.create {name = "ab"} : !P
    %cs = pipeline.state.make : !pipeline.state<2, consumer>
    pipeline.consumer.wait %p, %cs : !P, !pipeline.state<2, consumer>
    pipeline.consumer.release %p, %cs : !P, !pipeline.state<2, consumer>
    gpu.return
  }
}
}

// OFF: llvm.mlir.global internal @__pipeline_watchdog_warps()
// OFF: llvm.func @__pipeline_watchdog_dump(!llvm.ptr)
