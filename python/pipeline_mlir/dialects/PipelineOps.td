// Input of -gen-python-op-bindings / -gen-python-enum-bindings.
#ifndef PIPELINE_PYTHON_OPS_TD
#define PIPELINE_PYTHON_OPS_TD
include "pipeline-mlir/Dialect/Pipeline/IR/Pipeline.td"
#endif
