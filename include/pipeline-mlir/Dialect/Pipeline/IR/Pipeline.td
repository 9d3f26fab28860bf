//===- Pipeline.td - umbrella for the pipeline dialect ------*- tablegen -*-===//
//
// The `pipeline` dialect: CuTe DSL producer/consumer pipelines as IR.
//
//===----------------------------------------------------------------------===//

#ifndef PIPELINE_TD
#define PIPELINE_TD

include "pipeline-mlir/Dialect/Pipeline/IR/PipelineDialect.td"
include "pipeline-mlir/Dialect/Pipeline/IR/PipelineAttrs.td"
include "pipeline-mlir/Dialect/Pipeline/IR/PipelineTypes.td"
include "pipeline-mlir/Dialect/Pipeline/IR/PipelineOps.td"

#endif // PIPELINE_TD
