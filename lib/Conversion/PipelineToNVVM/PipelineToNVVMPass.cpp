//===- PipelineToNVVMPass.cpp - convert-pipeline-to-nvvm -------*- C++ -*-===//

#include "pipeline-mlir/Conversion/PipelineToNVVM/PipelineToNVVM.h"

#include "ElectOnce.h"
#include "LoweringUtils.h"
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

/// tcgen05 (UMMA) exists only on the sm_100 family's arch-specific targets.
bool chipHasTcgen05(StringRef chip) {
  return chip == "sm_100a" || chip == "sm_101a" || chip == "sm_103a";
}

/// Rejects tcgen05 pipelines on chips without tcgen05 before anything is
/// rewritten, with the op that introduces the pipeline as the location.
LogicalResult checkTcgen05Targets(ModuleOp module,
                                  const PipelineLoweringOptions &options) {
  bool ok = true;
  auto check = [&](Operation *op, PipelineType type) {
    if (!type.needsTcgen05())
      return;
    std::string chip = getChipFor(op, options);
    if (chipHasTcgen05(chip))
      return;
    op->emitError() << getCuteClassName(type.getKind())
                    << " uses tcgen05 and needs sm_100a; chip is " << chip;
    ok = false;
  };
  module.walk([&](Operation *op) {
    if (auto create = dyn_cast<CreateOp>(op)) {
      check(op, create.getType());
      return;
    }
    // Pipelines that come in as block arguments have no create.
    if (!isa<PipelineDialect>(op->getDialect()))
      return;
    for (Value operand : op->getOperands())
      if (auto type = dyn_cast<PipelineType>(operand.getType()))
        if (isa<BlockArgument>(operand))
          check(op, type);
  });
  return success(ok);
}

/// Numbers the pipelines for the watchdog report and records their names as
/// the module attribute `pipeline.watchdog_names`.
void assignWatchdogIds(ModuleOp module) {
  Builder b(module.getContext());
  SmallVector<Attribute> names;
  module.walk([&](CreateOp create) {
    std::string name;
    if (std::optional<StringRef> given = create.getName()) {
      name = given->str();
    } else {
      llvm::raw_string_ostream os(name);
      os << "pipeline@" << create.getLoc();
    }
    create->setAttr("pipeline.watchdog_id",
                    b.getI32IntegerAttr(static_cast<int32_t>(names.size())));
    names.push_back(b.getStringAttr(name));
  });
  module->setAttr("pipeline.watchdog_names", b.getArrayAttr(names));
}

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

    if (failed(checkTcgen05Targets(module, options)))
      return signalPassFailure();
    if (options.watchdog) {
      if (failed(checkWatchdogSymbols(module)))
        return signalPassFailure();
      assignWatchdogIds(module);
    }

    // Decided on the pipeline IR, before any region is rewritten.
    ElectHoisting hoisting;
    if (electOnce) {
      analyzeElectHoisting(module, hoisting);
      options.electHoisting = &hoisting;
    }

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
      return signalPassFailure();
    // The names go into each gpu.module with a bounded wait, where the
    // runner can read them (the module attribute stays for compile-time
    // tools such as the GPU bundle builder).
    if (options.watchdog)
      addWatchdogNames(module, module->getAttrOfType<ArrayAttr>(
                                   "pipeline.watchdog_names"));
  }
};
} // namespace
