//===- Passes.td - pipeline conversion passes ---------------*- tablegen -*-===//

#ifndef PIPELINE_CONVERSION_PASSES_TD
#define PIPELINE_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertPipelineToNVVM : Pass<"convert-pipeline-to-nvvm", "ModuleOp"> {
  let summary = "Lower pipeline ops to NVVM and LLVM dialect ops";
  let description = [{
    Emits exactly the instruction sequences of CuTe DSL's pipelines
    (shared/reference/pipeline-semantics.md): mbarrier init/arrive/expect_tx/
    try_wait, tcgen05.commit, cp.async.bulk[.tensor], mapa + shared::cluster
    arrives, fence.mbarrier_init, cluster barriers, elect.sync, named
    barriers. Pipeline values become `!llvm.ptr<3>` (the barrier array),
    states `!llvm.struct<(i32, i32, i32)>` (index, phase, count) or one i32
    for the simple form.
  }];
  let dependentDialects = [
    "::mlir::LLVM::LLVMDialect", "::mlir::NVVM::NVVMDialect",
    "::mlir::arith::ArithDialect", "::mlir::scf::SCFDialect",
    "::mlir::cf::ControlFlowDialect", "::mlir::gpu::GPUDialect"
  ];
  let options = [
    Option<"chip", "chip", "std::string", /*default=*/"\"sm_90a\"",
           "Target chip; tcgen05 kinds are rejected unless it is sm_100a/sm_101a">,
    Option<"watchdog", "watchdog", "bool", /*default=*/"false",
           "Bound every barrier wait by the global timer and trap with a report">,
    Option<"watchdogTimeoutNs", "watchdog-timeout-ns", "int64_t",
           /*default=*/"2000000000", "Watchdog timeout per wait, in ns">
  ];
}

#endif // PIPELINE_CONVERSION_PASSES_TD
