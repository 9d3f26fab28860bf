//===- pipeline-opt.cpp - mlir-opt with the pipeline dialect ----*- C++ -*-===//
//
// Every upstream dialect, pass, extension and the GPU-to-LLVM-IR translations
// (gpu-module-to-binary needs them), plus the pipeline dialect and passes.
//
// Two differences from mlir-opt, both so that `#nvvm.target` values upstream
// aborts on (NVVMTargetCheck.h) get a diagnostic instead:
// - the input is verified by the first pass of the pipeline instead of by
//   the parser, after the `#nvvm.target` check (upstream's gpu.module
//   verifier aborts on some chips). The diagnostics are the parser's; a file
//   that fails verification still fails before any pass of the user runs.
// - the options of `nvvm-attach-target` passes are checked by the same rules
//   before the pipeline runs.
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

#include "llvm/ADT/StringMap.h"
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

/// `key=value` pairs of a pass as the pass manager prints it
/// ("nvvm-attach-target{O=5 chip=P4 fast=false ...}"); a value with spaces
/// is printed in braces.
llvm::StringMap<std::string> printedOptions(Pass &pass) {
  std::string text;
  llvm::raw_string_ostream os(text);
  pass.printAsTextualPipeline(os);
  llvm::StringMap<std::string> options;
  StringRef rest = StringRef(text).split('{').second;
  rest.consume_back("}");
  while (!(rest = rest.ltrim()).empty()) {
    auto [key, tail] = rest.split('=');
    StringRef value;
    if (tail.consume_front("{")) {
      size_t end = tail.find('}');
      value = tail.take_front(end);
      rest = end == StringRef::npos ? "" : tail.drop_front(end + 1);
    } else {
      std::tie(value, rest) = tail.split(' ');
    }
    options[key.trim()] = value.str();
  }
  return options;
}

/// Upstream's nvvm-attach-target builds its #nvvm.target with
/// NVVMTargetAttr::get, which asserts on O out of range, and the verifier
/// after it aborts on a chip shorter than "sm_": check its options (the
/// same rules as for attributes in the input) before anything runs.
LogicalResult checkAttachTargetOptions(PassManager &pm) {
  StringRef previous;
  for (Pass &pass : pm.getPasses()) {
    // pipeline-to-cubin checks the options it gives nvvm-attach-target in
    // the pass just before it, with a message that names its own options.
    bool checked = previous == "pipeline-check-target-options";
    previous = pass.getArgument();
    if (pass.getArgument() != "nvvm-attach-target" || checked)
      continue;
    llvm::StringMap<std::string> options = printedOptions(pass);
    int64_t optLevel = 2;
    if (StringRef(options.lookup("O")).getAsInteger(10, optLevel))
      optLevel = -1;
    std::string problem = pipeline::nvvmTargetProblem(
        optLevel, options.lookup("triple"), options.lookup("chip"),
        options.lookup("features"));
    if (!problem.empty()) {
      llvm::errs() << "pipeline-opt: nvvm-attach-target options: " << problem
                   << "\n";
      return failure();
    }
  }
  return success();
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM initLLVM(argc, argv);
  registerAllPasses();
  pipeline::registerPipelineVerifyProtocol();
  pipeline::registerPipelineDeriveTxCount();
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
    if (failed(userPipeline.setupPassPipeline(pm)))
      return failure();
    return checkAttachTargetOptions(pm);
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
