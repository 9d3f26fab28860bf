//===- PipelineToNVVMPass.cpp - the convert-pipeline-to-nvvm pass -*- C++ -*-===//

#include "pipeline-mlir/Conversion/PipelineToNVVM/PipelineToNVVM.h"

#include "pipeline-mlir/Dialect/Pipeline/IR/PipelineDialect.h"

#include "mlir/Conversion/LLVMCommon/ConversionTarget.h"
#include "mlir/Conversion/LLVMCommon/TypeConverter.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/Patterns.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Transforms/DialectConversion.h"

namespace mlir::pipeline {
#define GEN_PASS_DEF_CONVERTPIPELINETONVVM
#include "pipeline-mlir/Conversion/PipelineToNVVM/Passes.h.inc"
} // namespace mlir::pipeline

using namespace mlir;
using namespace mlir::pipeline;

namespace {
struct ConvertPipelineToNVVMPass
    : public pipeline::impl::ConvertPipelineToNVVMBase<
          ConvertPipelineToNVVMPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();

    PipelineLoweringOptions options;
    options.chip = chip;
    options.watchdog = watchdog;
    options.watchdogTimeoutNs = watchdogTimeoutNs;

    LowerToLLVMOptions llvmOptions(ctx);
    LLVMTypeConverter converter(ctx, llvmOptions);
    populatePipelineToNVVMTypeConversions(converter);

    RewritePatternSet patterns(ctx);
    populatePipelineToNVVMConversionPatterns(converter, patterns, options);

    ConversionTarget target(*ctx);
    target.addIllegalDialect<PipelineDialect>();
    target.addLegalDialect<LLVM::LLVMDialect, NVVM::NVVMDialect,
                           arith::ArithDialect, cf::ControlFlowDialect,
                           gpu::GPUDialect>();
    target.markUnknownOpDynamicallyLegal([](Operation *) { return true; });
    // Loops and branches that carry states change their types with them.
    scf::populateSCFStructuralTypeConversionsAndLegality(converter, patterns,
                                                         target);
    if (failed(applyPartialConversion(module, target, std::move(patterns))))
      signalPassFailure();
  }
};
} // namespace
