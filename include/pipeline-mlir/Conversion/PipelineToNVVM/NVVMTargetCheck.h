//===- NVVMTargetCheck.h - #nvvm.target values that cannot crash -*- C++ -*-===//
//
// Upstream MLIR 22 and LLVM's NVPTX back end trust the parameters of an
// `#nvvm.target` more than its own verifier checks them: a chip shorter than
// "sm_" aborts in NVVMTargetAttr::verifyTarget (StringRef::drop_front) while
// the parser verifies the gpu.module, a chip that is not an NVPTX processor
// ("abc", "sm_91") is read as an uninitialized number and then dies in
// instruction selection ("LLVM ERROR: Cannot select"), a feature string that
// removes the chip's PTX or SM features does the same, and a non-array
// `ptxas-cmd-options` flag fails a cast when ptxas is invoked. These checks
// reject all of that with a diagnostic first (docs/fuzzing.md).
//
//===----------------------------------------------------------------------===//

#ifndef PIPELINE_MLIR_CONVERSION_PIPELINETONVVM_NVVMTARGETCHECK_H
#define PIPELINE_MLIR_CONVERSION_PIPELINETONVVM_NVVMTARGETCHECK_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/Support/LLVM.h"

#include <string>

namespace mlir {
class Operation;

namespace pipeline {

/// Why an `#nvvm.target` with these parameters would crash upstream MLIR or
/// the NVPTX back end ("" when it cannot). `flags` and `link` may be null.
/// The message names the parameter and the rule.
std::string nvvmTargetProblem(int64_t optLevel, StringRef triple,
                              StringRef chip, StringRef features,
                              DictionaryAttr flags = {}, ArrayAttr link = {});

/// Emits an error at every op that holds an `#nvvm.target` (anywhere in its
/// attributes, gpu.module targets and gpu.object included) that
/// nvvmTargetProblem rejects; fails if there is one. Safe to call before the
/// IR is verified: it reads attributes only.
LogicalResult checkNVVMTargets(Operation *root);

} // namespace pipeline
} // namespace mlir

#endif // PIPELINE_MLIR_CONVERSION_PIPELINETONVVM_NVVMTARGETCHECK_H
