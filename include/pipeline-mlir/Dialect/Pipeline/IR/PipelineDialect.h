//===- PipelineDialect.h - the pipeline dialect -----------------*- C++ -*-===//
//
// Include this to use the dialect, its attributes, types and ops.
//
//===----------------------------------------------------------------------===//

#ifndef PIPELINE_MLIR_DIALECT_PIPELINE_IR_PIPELINEDIALECT_H
#define PIPELINE_MLIR_DIALECT_PIPELINE_IR_PIPELINEDIALECT_H

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMTypes.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "pipeline-mlir/Dialect/Pipeline/IR/PipelineDialect.h.inc"
#include "pipeline-mlir/Dialect/Pipeline/IR/PipelineEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "pipeline-mlir/Dialect/Pipeline/IR/PipelineAttrs.h.inc"

#define GET_TYPEDEF_CLASSES
#include "pipeline-mlir/Dialect/Pipeline/IR/PipelineTypes.h.inc"

#define GET_OP_CLASSES
#include "pipeline-mlir/Dialect/Pipeline/IR/PipelineOps.h.inc"

namespace mlir::pipeline {

/// Barrier arrive count that a cooperative group implies for a CTA of
/// `blockDim` threads in a cluster of `clusterSize` CTAs (CuTe DSL rule:
/// thread -> size, warp -> 32*size, threadblock -> size*blockDim,
/// cluster -> size*clusterSize*blockDim). Returns nullopt when the count
/// depends on blockDim and blockDim is unknown (0).
std::optional<int64_t> getArriveCount(CooperativeGroupAttr group,
                                      int64_t blockDim, int64_t clusterSize);

/// Human-readable CuTe DSL class name of a kind ("PipelineTmaAsync").
llvm::StringRef getCuteClassName(PipelineKind kind);

} // namespace mlir::pipeline

#endif // PIPELINE_MLIR_DIALECT_PIPELINE_IR_PIPELINEDIALECT_H
