//===- PipelineToCubin.cpp - the named pass pipelines -----------*- C++ -*-===//
//
// pipeline-to-nvvm:  pipeline IR -> LLVM/NVVM dialect inside gpu.modules
//   [pipeline-verify-protocol] -> convert-pipeline-to-nvvm ->
//   gpu.module(convert-scf-to-cf, convert-gpu-to-nvvm) -> convert-nvvm-to-llvm
//   -> reconcile-unrealized-casts
// pipeline-to-cubin: nvvm-attach-target{chip, features} -> pipeline-to-nvvm
//   -> gpu-module-to-binary{format}, with 32-bit shared pointers in the
//   NVPTX back end unless short-ptr=false
//
// Both are usable from Python:
//   PassManager.parse("builtin.module(pipeline-to-cubin{chip=sm_90a})")
//
//===----------------------------------------------------------------------===//

#include "pipeline-mlir/Conversion/PipelineToNVVM/PipelineToNVVM.h"

#include "pipeline-mlir/Conversion/PipelineToNVVM/NVVMTargetCheck.h"

#include "pipeline-mlir/Dialect/Pipeline/Transforms/Passes.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"
#include "mlir/Pass/PassRegistry.h"

#include "llvm/Support/CommandLine.h"

using namespace mlir;
using namespace mlir::pipeline;

namespace {

/// PTX ISA 8.8 is the newest that LLVM 22 emits and that ptxas 13.0 accepts
/// for both sm_90a and sm_100a (tcgen05 needs >= 8.6).
constexpr const char *kDefaultFeatures = "+ptx88";

struct PipelineToNVVMOptions
    : public PassPipelineOptions<PipelineToNVVMOptions> {
  PassOptions::Option<std::string> chip{
      *this, "chip",
      llvm::cl::desc("Target chip (tcgen05 kinds need sm_100a/101a/103a)"),
      llvm::cl::init("sm_90a")};
  PassOptions::Option<bool> verifyProtocol{
      *this, "verify-protocol",
      llvm::cl::desc("Run pipeline-verify-protocol before lowering"),
      llvm::cl::init(true)};
  PassOptions::Option<bool> watchdog{
      *this, "watchdog",
      llvm::cl::desc("Bound every barrier wait and trap with a report"),
      llvm::cl::init(false)};
  PassOptions::Option<int64_t> watchdogTimeoutNs{
      *this, "watchdog-timeout-ns",
      llvm::cl::desc("Watchdog timeout per wait, in ns"),
      llvm::cl::init(2000000000)};
};

struct PipelineToCubinOptions
    : public PassPipelineOptions<PipelineToCubinOptions> {
  PassOptions::Option<std::string> chip{
      *this, "chip",
      llvm::cl::desc("Target chip (tcgen05 kinds need sm_100a/101a/103a)"),
      llvm::cl::init("sm_90a")};
  PassOptions::Option<std::string> features{
      *this, "features", llvm::cl::desc("NVVM target features (PTX version)"),
      llvm::cl::init(kDefaultFeatures)};
  PassOptions::Option<std::string> format{
      *this, "format",
      llvm::cl::desc("gpu-module-to-binary format: bin (cubin, runs "
                     "ptxas), isa (PTX), fatbin, llvm, offloading"),
      llvm::cl::init("bin")};
  PassOptions::Option<unsigned> optLevel{
      *this, "O", llvm::cl::desc("LLVM optimization level"),
      llvm::cl::init(2)};
  PassOptions::Option<bool> verifyProtocol{
      *this, "verify-protocol",
      llvm::cl::desc("Run pipeline-verify-protocol before lowering"),
      llvm::cl::init(true)};
  PassOptions::Option<bool> watchdog{
      *this, "watchdog",
      llvm::cl::desc("Bound every barrier wait and trap with a report"),
      llvm::cl::init(false)};
  PassOptions::Option<int64_t> watchdogTimeoutNs{
      *this, "watchdog-timeout-ns",
      llvm::cl::desc("Watchdog timeout per wait, in ns"),
      llvm::cl::init(2000000000)};
  PassOptions::Option<bool> shortPtr{
      *this, "short-ptr",
      llvm::cl::desc("32-bit shared/const/local pointers in the NVPTX back "
                     "end (nvptx-short-ptr, data layout p3:32:32)"),
      llvm::cl::init(true)};
  PassOptions::Option<bool> partialSpeculation{
      *this, "partial-speculation",
      llvm::cl::desc("Let LLVM's speculative-execution pass (NVPTX code "
                     "generation) hoist part of a conditional block (LLVM's "
                     "default; off: only whole blocks)"),
      llvm::cl::init(false)};
};

/// Sets LLVM's `spec-exec-max-not-hoisted` option (read by the
/// speculative-execution pass that NVPTX code generation runs before
/// instruction selection) to 0 unless `partial` is set: a conditional block
/// is then speculated only when all of it can be, i.e. when its branch goes
/// away. LLVM's default (5) also hoists the cheap part of a block that keeps
/// its branch: the constant-offset GEPs of the barrier addresses out of an
/// elected `mbarrier.init` / `mbarrier.arrive` block. Instruction selection
/// works one block at a time, so a hoisted GEP becomes an `add.s32` per
/// barrier instead of the `[%r+8]` operand it folds into in the block of its
/// use (measured in benchmarks/parity: 7 PTX instructions in a 4-stage
/// create with two init blocks; ptxas folded them back there, same SASS).
void setPartialSpeculation(bool partial) {
  auto &registered = llvm::cl::getRegisteredOptions();
  auto it = registered.find("spec-exec-max-not-hoisted");
  if (it == registered.end())
    return; // the pass is not linked in: nothing to configure
  it->second->addOccurrence(/*pos=*/0, "spec-exec-max-not-hoisted",
                            partial ? "5" : "0");
}

/// Sets the NVPTX back end's `nvptx-short-ptr` option. CuTe DSL and nvcc
/// address shared memory with 32-bit registers; with 64-bit `!llvm.ptr<3>`
/// every barrier address is a `mul.wide` + `add.s64` (two SASS integer ops
/// each) and inline-PTX `r` operands need a `cvt.u32.u64`. The option is
/// only a command-line flag of the back end (gpu-module-to-binary builds
/// the TargetMachine itself), so it is set in LLVM's option registry; it is
/// read when gpu-module-to-binary creates the TargetMachine. Every target
/// of this project (sm_90a, sm_100a) has shared windows below 4 GiB.
void setNVPTXShortPointers(bool enable) {
  auto &registered = llvm::cl::getRegisteredOptions();
  auto it = registered.find("nvptx-short-ptr");
  if (it == registered.end())
    return; // no NVPTX back end linked in: nothing to configure
  it->second->addOccurrence(/*pos=*/0, "nvptx-short-ptr",
                            enable ? "true" : "false");
}

/// A kernel's `known_block_size` is its exact block size (the gpu dialect:
/// launching it with another is undefined), so its PTX says `.reqntid`, as
/// CuTe DSL's does, instead of the `.maxntid` of upstream's gpu.func
/// lowering. ptxas then knows every warp is full and tid.x / 32 warp-uniform:
/// it drops the reconvergence code (BSSY/BSYNC, WARPSYNC) around warp-0 and
/// elected-lane branches and the shuffles of the warp index (1-3 SASS per
/// branch, measured in benchmarks/parity).
struct ExactBlockSizePass
    : PassWrapper<ExactBlockSizePass, OperationPass<gpu::GPUModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(ExactBlockSizePass)
  StringRef getArgument() const final { return "pipeline-exact-block-size"; }
  void runOnOperation() override {
    StringRef maxName = NVVM::NVVMDialect::getMaxntidAttrName();
    getOperation().walk([&](LLVM::LLVMFuncOp fn) {
      Attribute known = fn->getAttr("gpu.known_block_size");
      Attribute max = fn->getAttr(maxName);
      if (!known || known != max)
        return;
      fn->removeAttr(maxName);
      fn->setAttr(NVVM::NVVMDialect::getReqntidAttrName(), max);
    });
  }
};

/// Rejects what would make the compile abort instead of report: target
/// options upstream aborts on (NVVMTargetCheck.h; nvvm-attach-target builds
/// its `#nvvm.target` with NVVMTargetAttr::get, which asserts on an O level
/// out of range, and the verifier after it aborts on a chip shorter than
/// "sm_"), and chips the lowering does not emit code for, whether asked for
/// or already attached to a gpu.module (each target is compiled; LLVM's
/// instruction selection aborts on the lowering's sm_90 instructions for an
/// older one). Runs first, so nothing is built for a bad request.
struct CheckTargetOptionsPass
    : PassWrapper<CheckTargetOptionsPass, OperationPass<>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(CheckTargetOptionsPass)
  CheckTargetOptionsPass(std::string chip, std::string features,
                         int64_t optLevel)
      : chip(std::move(chip)), features(std::move(features)),
        optLevel(optLevel) {}
  StringRef getArgument() const final {
    return "pipeline-check-target-options";
  }
  void runOnOperation() override {
    std::string problem = nvvmTargetProblem(optLevel, "nvptx64-nvidia-cuda",
                                            chip, features);
    if (problem.empty() && !isLoweringChip(chip))
      problem = "chip \"" + chip +
                "\" is not one the pipeline lowering supports (" +
                getLoweringChipList() + ")";
    if (!problem.empty()) {
      emitError(getOperation()->getLoc())
          << "pipeline-to-cubin options: " << problem;
      return signalPassFailure();
    }
    if (failed(checkLoweringTargets(getOperation(),
                                    /*onlyWithPipelineIR=*/false)))
      return signalPassFailure();
    markAllAnalysesPreserved();
  }
  std::string chip, features;
  int64_t optLevel;
};

void buildPipelineToNVVM(OpPassManager &pm, StringRef chip,
                         bool verifyProtocol, bool watchdog,
                         int64_t watchdogTimeoutNs) {
  // tx_count left out of a create is the bytes of its copies: set it before
  // the checker compares and the lowering arms it.
  pm.addPass(createPipelineDeriveTxCount());
  if (verifyProtocol)
    pm.addPass(createPipelineVerifyProtocol());
  ConvertPipelineToNVVMOptions convert;
  convert.chip = chip.str();
  convert.watchdog = watchdog;
  convert.watchdogTimeoutNs = watchdogTimeoutNs;
  pm.addPass(createConvertPipelineToNVVM(convert));
  // Wait loops and guarded arrives are scf.while / scf.if.
  pm.addNestedPass<gpu::GPUModuleOp>(createSCFToControlFlowPass());
  // gpu.func, special registers, arith, cf, index -> LLVM/NVVM.
  pm.addNestedPass<gpu::GPUModuleOp>(createConvertGpuOpsToNVVMOps());
  pm.addNestedPass<gpu::GPUModuleOp>(std::make_unique<ExactBlockSizePass>());
  // NVVM ops without an intrinsic (PTX builder ops) -> inline PTX.
  pm.addPass(createConvertNVVMToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
}

} // namespace

void mlir::pipeline::registerPipelineToCubinPipeline() {
  // Both the C API (Python) and pipeline-opt call this; registering a
  // pipeline name twice is a fatal error in MLIR.
  static bool registered = false;
  if (registered)
    return;
  registered = true;
  PassPipelineRegistration<PipelineToNVVMOptions>(
      "pipeline-to-nvvm",
      "Lower pipeline IR in gpu.modules to LLVM/NVVM dialect IR",
      [](OpPassManager &pm, const PipelineToNVVMOptions &opts) {
        buildPipelineToNVVM(pm, opts.chip, opts.verifyProtocol, opts.watchdog,
                            opts.watchdogTimeoutNs);
      });

  PassPipelineRegistration<PipelineToCubinOptions>(
      "pipeline-to-cubin",
      "Lower pipeline IR to a gpu.binary for one chip (PTX, cubin, fatbin)",
      [](OpPassManager &pm, const PipelineToCubinOptions &opts) {
        setNVPTXShortPointers(opts.shortPtr);
        setPartialSpeculation(opts.partialSpeculation);
        pm.addPass(std::make_unique<CheckTargetOptionsPass>(
            opts.chip, opts.features, opts.optLevel));
        GpuNVVMAttachTargetOptions target;
        target.chip = opts.chip;
        target.features = opts.features;
        target.optLevel = opts.optLevel;
        pm.addPass(createGpuNVVMAttachTarget(target));
        buildPipelineToNVVM(pm, opts.chip, opts.verifyProtocol, opts.watchdog,
                            opts.watchdogTimeoutNs);
        GpuModuleToBinaryPassOptions binary;
        binary.compilationTarget = opts.format;
        pm.addPass(createGpuModuleToBinaryPass(binary));
      });
}
