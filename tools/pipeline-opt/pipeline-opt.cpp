//===- pipeline-opt.cpp - mlir-opt with the pipeline dialect ----*- C++ -*-===//
//
// Every upstream dialect, pass, extension and the GPU-to-LLVM-IR translations
// (gpu-module-to-binary needs them), plus the pipeline dialect and passes.
//
// One difference from mlir-opt: the input is verified by the first pass of
// the pipeline instead of by the parser, so that `#nvvm.target` attributes
// are checked before upstream's gpu.module verifier reads them (it aborts on
// some chips, NVVMTargetCheck.h). The diagnostics are the parser's; a file
// that fails verification still fails before any pass of the user runs.
//
//===----------------------------------------------------------------------===//

#include "pipeline-mlir/Conversion/PipelineToNVVM/NVVMTargetCheck.h"
#include "pipeline-mlir/Conversion/PipelineToNVVM/PipelineToNVVM.h"
#include "pipeline-mlir/Dialect/Pipeline/IR/PipelineDialect.h"
#include "pipeline-mlir/Dialect/Pipeline/Transforms/Passes.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/Verifier.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/ToolOutputFile.h"

using namespace mlir;

namespace {

/// The parser's verification, preceded by the `#nvvm.target` check.
struct VerifyInputPass : PassWrapper<VerifyInputPass, OperationPass<>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(VerifyInputPass)
  explicit VerifyInputPass(bool verify = true) : verify(verify) {}
  StringRef getArgument() const final { return "pipeline-opt-verify-input"; }
  StringRef getDescription() const final {
    return "Check #nvvm.target attributes, then verify (pipeline-opt runs it "
           "first, in place of the parser's verification)";
  }
  void runOnOperation() override {
    if (failed(pipeline::checkNVVMTargets(getOperation())) ||
        (verify && failed(mlir::verify(getOperation()))))
      return signalPassFailure();
    markAllAnalysesPreserved();
  }
  // With --mlir-very-unsafe-disable-verifier-on-parsing only the target
  // check runs: the pass manager's verifier would still read the targets.
  bool verify;
};

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM initLLVM(argc, argv);
  registerAllPasses();
  pipeline::registerPipelineVerifyProtocol();
  pipeline::registerConvertPipelineToNVVM();
  pipeline::registerPipelineToCubinPipeline();
  PassRegistration<VerifyInputPass>();

  DialectRegistry registry;
  registerAllDialects(registry);
  registerAllExtensions(registry);
  registerAllGPUToLLVMIRTranslations(registry);
  registry.insert<pipeline::PipelineDialect>();

  auto [inputFilename, outputFilename] = registerAndParseCLIOptions(
      argc, argv, "pipeline-mlir optimizer driver\n", registry);
  MlirOptMainConfig config = MlirOptMainConfig::createFromCLOptions();
  if (config.shouldShowDialects()) {
    llvm::outs() << "Available Dialects: ";
    llvm::interleave(registry.getDialectNames(), llvm::outs(), ",");
    llvm::outs() << "\n";
    return EXIT_SUCCESS;
  }
  if (config.shouldListPasses()) {
    printRegisteredPasses();
    return EXIT_SUCCESS;
  }

  // Verification moves from the parser to the first pass.
  MlirOptMainConfig userPipeline = config;
  bool verifyInput = config.shouldVerifyOnParsing();
  config.verifyOnParsing(false);
  config.setPassPipelineSetupFn([userPipeline,
                                 verifyInput](PassManager &pm) {
    pm.addPass(std::make_unique<VerifyInputPass>(verifyInput));
    return userPipeline.setupPassPipeline(pm);
  });

  std::string errorMessage;
  std::unique_ptr<llvm::MemoryBuffer> input =
      openInputFile(inputFilename, &errorMessage);
  if (!input) {
    llvm::errs() << errorMessage << "\n";
    return EXIT_FAILURE;
  }
  std::unique_ptr<llvm::ToolOutputFile> output =
      openOutputFile(outputFilename, &errorMessage);
  if (!output) {
    llvm::errs() << errorMessage << "\n";
    return EXIT_FAILURE;
  }
  if (failed(MlirOptMain(output->os(), std::move(input), registry, config)))
    return EXIT_FAILURE;
  output->keep();
  return EXIT_SUCCESS;
}
