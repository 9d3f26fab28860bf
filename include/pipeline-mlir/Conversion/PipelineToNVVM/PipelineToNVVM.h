//===- PipelineToNVVM.h - pipeline to NVVM conversion -----------*- C++ -*-===//

#ifndef PIPELINE_MLIR_CONVERSION_PIPELINETONVVM_PIPELINETONVVM_H
#define PIPELINE_MLIR_CONVERSION_PIPELINETONVVM_PIPELINETONVVM_H

#include "mlir/Pass/Pass.h"

namespace mlir {
class LLVMTypeConverter;
class RewritePatternSet;

namespace pipeline {

#define GEN_PASS_DECL
#include "pipeline-mlir/Conversion/PipelineToNVVM/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "pipeline-mlir/Conversion/PipelineToNVVM/Passes.h.inc"

/// Where the lowering may reuse one `elect.sync` per converged warp-role
/// region (lib/Conversion/PipelineToNVVM/ElectOnce.cpp).
struct ElectHoisting;

/// Options that change the emitted code (not which ops are legal).
struct PipelineLoweringOptions {
  std::string chip = "sm_90a";
  bool watchdog = false;
  int64_t watchdogTimeoutNs = 2000000000;
  /// Owned by the pass run; null: every verb elects its own lane.
  ElectHoisting *electHoisting = nullptr;
};

/// The chips the pipeline lowering emits code for. Its instructions
/// (elect.sync, mbarrier expect_tx and try_wait.parity, cp.async.bulk) need
/// sm_90a-class targets: on an older chip, or sm_90 at its default PTX 7.8,
/// LLVM's instruction selection aborts ("Cannot select"); tcgen05 kinds
/// need the sm_100 family. The Python compiler's SUPPORTED_CHIPS is this
/// list.
ArrayRef<StringRef> getLoweringChips();
bool isLoweringChip(StringRef chip);
/// "sm_90a, sm_100a, ...", for messages.
std::string getLoweringChipList();
/// Why the pipeline lowering cannot emit code for a gpu.module target of
/// this triple and chip ("" when it can): a chip outside getLoweringChips(),
/// or a 32-bit NVPTX triple, for which LLVM cannot select the TMA intrinsics
/// (cp.async.bulk.tensor takes 64-bit global addresses) and aborts.
std::string getLoweringTargetProblem(StringRef triple, StringRef chip);
/// Reports, at each gpu.module under `root`, every #nvvm.target with a
/// getLoweringTargetProblem (gpu-module-to-binary compiles a module for each
/// of its targets). `onlyWithPipelineIR`: skip modules without pipeline ops
/// (a plain kernel keeps whatever target it has).
LogicalResult checkLoweringTargets(Operation *root, bool onlyWithPipelineIR);

/// Adds the type conversions for !pipeline.pipeline and !pipeline.state.
void populatePipelineToNVVMTypeConversions(LLVMTypeConverter &converter);

/// Adds one pattern per pipeline op.
void populatePipelineToNVVMConversionPatterns(
    LLVMTypeConverter &converter, RewritePatternSet &patterns,
    const PipelineLoweringOptions &options);

/// Registers `pipeline-to-cubin` (and `pipeline-to-nvvm`): the whole way from
/// pipeline IR to a gpu.binary for one chip.
void registerPipelineToCubinPipeline();

} // namespace pipeline
} // namespace mlir

#endif // PIPELINE_MLIR_CONVERSION_PIPELINETONVVM_PIPELINETONVVM_H
