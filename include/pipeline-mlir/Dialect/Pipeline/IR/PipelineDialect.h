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

namespace mlir::pipeline {

/// Pipeline ops lower to device code (thread-id reads, mbarrier.init,
/// arithmetic on states), which only a function body can hold: an op placed
/// directly in a module would be lowered into the module body and break the
/// lowering later, blaming the module. Every pipeline op carries this trait.
LogicalResult verifyInsideFunction(Operation *op);

template <typename ConcreteType>
class InsideFunction : public OpTrait::TraitBase<ConcreteType, InsideFunction> {
public:
  static LogicalResult verifyTrait(Operation *op) {
    return verifyInsideFunction(op);
  }
};

/// Largest shared memory of one CTA on sm_90/sm_100: 227 KiB (228 KiB per SM
/// less 1 KiB the system reserves; ptxas: "0x38c00 max"). Every pipeline's
/// barriers must fit in it.
inline constexpr int64_t kMaxSharedMemoryBytes = 227 * 1024;
/// An mbarrier is 8 bytes.
inline constexpr int64_t kMbarrierBytes = 8;
/// Stages whose 2 * stages mbarriers fit in shared memory (14528). A state of
/// more stages could never index a real pipeline either.
inline constexpr int64_t kMaxStages =
    kMaxSharedMemoryBytes / (2 * kMbarrierBytes);
/// mbarrier pending/expected arrival counts are 20-bit (PTX ISA, mbarrier
/// contents): no cooperative group may imply more arrivals.
inline constexpr int64_t kMaxArriveCount = (1 << 20) - 1;

/// The verbs that act on one stage of a pipeline (StageVerbOpInterface).
enum class StageVerb {
  Acquire,
  TryAcquire,
  Commit,
  Tail,
  Barrier,
  Copy, // copy.tma_load / copy.bulk bound to a stage
  Wait,
  TryWait,
  Release,
  OrderWait,
  OrderArrive,
};

/// The side a verb is for: producer verbs and copies are the producer's,
/// wait/release the consumer's; the order verbs are producer_consumer.
Role getStageVerbRole(StageVerb verb);

} // namespace mlir::pipeline

#include "pipeline-mlir/Dialect/Pipeline/IR/PipelineInterfaces.h.inc"

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
std::optional<int64_t> getArriveCount(Agent agent, int64_t size,
                                      int64_t blockDim, int64_t clusterSize);

/// Human-readable CuTe DSL class name of a kind ("PipelineTmaAsync").
llvm::StringRef getCuteClassName(PipelineKind kind);

} // namespace mlir::pipeline

#include "pipeline-mlir/Dialect/Pipeline/IR/KindTraits.h"

#endif // PIPELINE_MLIR_DIALECT_PIPELINE_IR_PIPELINEDIALECT_H
