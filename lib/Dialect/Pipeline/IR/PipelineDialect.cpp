//===- PipelineDialect.cpp - dialect registration ---------------*- C++ -*-===//

#include "pipeline-mlir/Dialect/Pipeline/IR/PipelineDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::pipeline;

#include "pipeline-mlir/Dialect/Pipeline/IR/PipelineDialect.cpp.inc"
#include "pipeline-mlir/Dialect/Pipeline/IR/PipelineEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "pipeline-mlir/Dialect/Pipeline/IR/PipelineAttrs.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "pipeline-mlir/Dialect/Pipeline/IR/PipelineTypes.cpp.inc"

void PipelineDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "pipeline-mlir/Dialect/Pipeline/IR/PipelineAttrs.cpp.inc"
      >();
  addTypes<
#define GET_TYPEDEF_LIST
#include "pipeline-mlir/Dialect/Pipeline/IR/PipelineTypes.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "pipeline-mlir/Dialect/Pipeline/IR/PipelineOps.cpp.inc"
      >();
}

std::optional<int64_t> mlir::pipeline::getArriveCount(CooperativeGroupAttr group,
                                                       int64_t blockDim,
                                                       int64_t clusterSize) {
  switch (group.getAgent()) {
  case Agent::Thread:
    return group.getSize();
  case Agent::Warp:
    return group.getSize() * 32;
  case Agent::ThreadBlock:
    if (blockDim <= 0)
      return std::nullopt;
    return group.getSize() * blockDim;
  case Agent::ThreadBlockCluster:
    if (blockDim <= 0)
      return std::nullopt;
    return group.getSize() * clusterSize * blockDim;
  }
  return std::nullopt;
}

StringRef mlir::pipeline::getCuteClassName(PipelineKind kind) {
  switch (kind) {
  case PipelineKind::Async:
    return "PipelineAsync";
  case PipelineKind::CpAsync:
    return "PipelineCpAsync";
  case PipelineKind::TmaAsync:
    return "PipelineTmaAsync";
  case PipelineKind::TmaStore:
    return "PipelineTmaStore";
  case PipelineKind::Order:
    return "PipelineOrder";
  case PipelineKind::TmaUmma:
    return "PipelineTmaUmma";
  case PipelineKind::AsyncUmma:
    return "PipelineAsyncUmma";
  case PipelineKind::UmmaAsync:
    return "PipelineUmmaAsync";
  case PipelineKind::TmaMultiConsumersAsync:
    return "PipelineTmaMultiConsumersAsync";
  case PipelineKind::ClcFetchAsync:
    return "PipelineClcFetchAsync";
  }
  return "Pipeline";
}
