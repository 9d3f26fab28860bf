// The watchdog's globals are part of the runner contract: a module that
// already uses one of the names with another type is refused (instead of
// the runner writing a pointer over the user's data). Without the watchdog
// the name is the user's.
// RUN: not pipeline-opt %s --convert-pipeline-to-nvvm="watchdog=true" 2>&1 | FileCheck %s
// RUN: pipeline-opt %s --convert-pipeline-to-nvvm | FileCheck %s --check-prefix=OFF

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<warp, 1>,
                        consumer = #pipeline.group<warp, 1>>
module attributes {gpu.container_module} {
gpu.module @wd {
  // CHECK: error: '__pipeline_watchdog_buffer' is reserved for the pipeline watchdog: it must be an llvm.mlir.global of type 'i64' in address space 1
  llvm.mlir.global external @__pipeline_watchdog_buffer(0 : i32) {addr_space = 1 : i32} : i32
  gpu.func @kernel() kernel {
    %p = pipeline.create {name = "ab"} : !P
    %cs = pipeline.state.make : !pipeline.state<2, consumer>
    pipeline.consumer.wait %p, %cs : !P, !pipeline.state<2, consumer>
    pipeline.consumer.release %p, %cs : !P, !pipeline.state<2, consumer>
    gpu.return
  }
}
}

// OFF: llvm.mlir.global external @__pipeline_watchdog_buffer(0 : i32)
// OFF-NOT: __pipeline_watchdog_claim
