//===- Patterns.cpp - collects the per-family lowering patterns -*- C++ -*-===//

#include "pipeline-mlir/Conversion/PipelineToNVVM/PipelineToNVVM.h"

#include "mlir/Conversion/LLVMCommon/TypeConverter.h"
#include "mlir/IR/PatternMatch.h"

using namespace mlir;
using namespace mlir::pipeline;

void mlir::pipeline::populatePipelineToNVVMConversionPatterns(
    LLVMTypeConverter &converter, RewritePatternSet &patterns,
    const PipelineLoweringOptions &options) {}
