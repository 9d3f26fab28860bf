//===- Passes.h - pipeline dialect passes -----------------------*- C++ -*-===//
//
// Kept light on purpose: only mlir/Pass/Pass.h, no dialect headers.
//
//===----------------------------------------------------------------------===//

#ifndef PIPELINE_MLIR_DIALECT_PIPELINE_TRANSFORMS_PASSES_H
#define PIPELINE_MLIR_DIALECT_PIPELINE_TRANSFORMS_PASSES_H

#include "mlir/Pass/Pass.h"

namespace mlir::pipeline {

#define GEN_PASS_DECL
#include "pipeline-mlir/Dialect/Pipeline/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "pipeline-mlir/Dialect/Pipeline/Transforms/Passes.h.inc"

} // namespace mlir::pipeline

#endif // PIPELINE_MLIR_DIALECT_PIPELINE_TRANSFORMS_PASSES_H
