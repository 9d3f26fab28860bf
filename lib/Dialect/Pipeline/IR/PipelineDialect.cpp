//===- PipelineDialect.cpp - dialect registration ---------------*- C++ -*-===//

#include "pipeline-mlir/Dialect/Pipeline/IR/PipelineDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::pipeline;

#include "pipeline-mlir/Dialect/Pipeline/IR/PipelineDialect.cpp.inc"
#include "pipeline-mlir/Dialect/Pipeline/IR/PipelineEnums.cpp.inc"
#include "pipeline-mlir/Dialect/Pipeline/IR/PipelineInterfaces.cpp.inc"

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

std::optional<int64_t> mlir::pipeline::getArriveCount(Agent agent, int64_t size,
                                                       int64_t blockDim,
                                                       int64_t clusterSize) {
  switch (agent) {
  case Agent::Thread:
    return size;
  case Agent::Warp:
    return size * 32;
  case Agent::ThreadBlock:
    if (blockDim <= 0)
      return std::nullopt;
    return size * blockDim;
  case Agent::ThreadBlockCluster:
    if (blockDim <= 0)
      return std::nullopt;
    return size * clusterSize * blockDim;
  }
  return std::nullopt;
}

std::optional<int64_t> mlir::pipeline::getArriveCount(CooperativeGroupAttr group,
                                                       int64_t blockDim,
                                                       int64_t clusterSize) {
  return getArriveCount(group.getAgent(), group.getSize(), blockDim,
                        clusterSize);
}

StringRef mlir::pipeline::getCuteClassName(PipelineKind kind) {
  if (const KindTraits *traits = lookupKindTraits(kind))
    return traits->cuteClass;
  return "Pipeline";
}

Role mlir::pipeline::getStageVerbRole(StageVerb verb) {
  switch (verb) {
  case StageVerb::Acquire:
  case StageVerb::TryAcquire:
  case StageVerb::Commit:
  case StageVerb::Tail:
  case StageVerb::Barrier:
  case StageVerb::Copy:
    return Role::Producer;
  case StageVerb::Wait:
  case StageVerb::TryWait:
  case StageVerb::Release:
    return Role::Consumer;
  case StageVerb::OrderWait:
  case StageVerb::OrderArrive:
    return Role::ProducerConsumer;
  }
  llvm_unreachable("unknown stage verb");
}
