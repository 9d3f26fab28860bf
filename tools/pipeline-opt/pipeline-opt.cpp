//===- pipeline-opt.cpp - mlir-opt with the pipeline dialect ----*- C++ -*-===//
//
// Every upstream dialect, pass, extension and the GPU-to-LLVM-IR translations
// (gpu-module-to-binary needs them), plus the pipeline dialect and passes.
//
//===----------------------------------------------------------------------===//

#include "pipeline-mlir/Conversion/PipelineToNVVM/PipelineToNVVM.h"
#include "pipeline-mlir/Dialect/Pipeline/IR/PipelineDialect.h"
#include "pipeline-mlir/Dialect/Pipeline/Transforms/Passes.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::registerAllPasses();
  mlir::pipeline::registerPipelineVerifyProtocol();
  mlir::pipeline::registerConvertPipelineToNVVM();
  mlir::pipeline::registerPipelineToCubinPipeline();

  mlir::DialectRegistry registry;
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  mlir::registerAllGPUToLLVMIRTranslations(registry);
  registry.insert<mlir::pipeline::PipelineDialect>();

  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "pipeline-mlir optimizer driver\n", registry));
}
