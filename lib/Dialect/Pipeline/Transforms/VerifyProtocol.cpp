//===- VerifyProtocol.cpp - static pipeline protocol checks -----*- C++ -*-===//

#include "pipeline-mlir/Dialect/Pipeline/Transforms/Passes.h"

#include "pipeline-mlir/Dialect/Pipeline/IR/PipelineDialect.h"

#include "mlir/IR/BuiltinOps.h"

namespace mlir::pipeline {
#define GEN_PASS_DEF_PIPELINEVERIFYPROTOCOL
#include "pipeline-mlir/Dialect/Pipeline/Transforms/Passes.h.inc"
} // namespace mlir::pipeline

using namespace mlir;
using namespace mlir::pipeline;

namespace {
struct PipelineVerifyProtocolPass
    : public pipeline::impl::PipelineVerifyProtocolBase<
          PipelineVerifyProtocolPass> {
  using Base::Base;
  void runOnOperation() override {}
};
} // namespace
