//===- Patterns.cpp - collects the per-family lowering patterns -*- C++ -*-===//

#include "LoweringUtils.h"

#include "mlir/Conversion/LLVMCommon/TypeConverter.h"
#include "mlir/IR/PatternMatch.h"

using namespace mlir;
using namespace mlir::pipeline;

void mlir::pipeline::populatePipelineToNVVMConversionPatterns(
    LLVMTypeConverter &converter, RewritePatternSet &patterns,
    const PipelineLoweringOptions &options) {
  populateStateLoweringPatterns(converter, patterns, options);
  populateBarrierLoweringPatterns(converter, patterns, options);
  populateProducerConsumerLoweringPatterns(converter, patterns, options);
  populateCopyLoweringPatterns(converter, patterns, options);
  populateOrderNamedBarrierLoweringPatterns(converter, patterns, options);
}
