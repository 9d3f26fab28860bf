//===- PipelineToCubin.cpp - the named pass pipeline ------------*- C++ -*-===//

#include "pipeline-mlir/Conversion/PipelineToNVVM/PipelineToNVVM.h"

#include "pipeline-mlir/Dialect/Pipeline/Transforms/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"

using namespace mlir;
using namespace mlir::pipeline;

void mlir::pipeline::registerPipelineToCubinPipeline() {}
