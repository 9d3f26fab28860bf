//===- TypeConversion.cpp - pipeline types to LLVM types --------*- C++ -*-===//
//
// A pipeline value is the base address of its barrier array in shared memory;
// a state is (index, phase, count) as an LLVM struct of three i32, or one i32
// (phase_index) in the flash-attention simple form.
//
//===----------------------------------------------------------------------===//

#include "pipeline-mlir/Conversion/PipelineToNVVM/PipelineToNVVM.h"

#include "pipeline-mlir/Dialect/Pipeline/IR/PipelineDialect.h"

#include "mlir/Conversion/LLVMCommon/TypeConverter.h"

using namespace mlir;
using namespace mlir::pipeline;

void mlir::pipeline::populatePipelineToNVVMTypeConversions(
    LLVMTypeConverter &converter) {
  converter.addConversion([](PipelineType type) -> Type {
    return LLVM::LLVMPointerType::get(type.getContext(), /*addressSpace=*/3);
  });
  converter.addConversion([](StateType type) -> Type {
    auto i32 = IntegerType::get(type.getContext(), 32);
    if (type.getSimple())
      return i32;
    return LLVM::LLVMStructType::getLiteral(type.getContext(), {i32, i32, i32});
  });
}
