//===- SmemHandoffChecks.h - staging buffers of bulk stores -----*- C++ -*-===//
//
// Private to lib/Dialect/Pipeline/Transforms. The checks on shared memory
// that bulk (TMA) stores read: how many staging buffers a PipelineTmaStore
// rotates through (TmaStoreBufferChecks.cpp), and the hand-over of a tile
// written by several warps to the one thread that stores it
// (SmemHandoffChecks.cpp). Declared here rather than in ProtocolChecks.h so
// that each family of checks keeps its own header.
//
//===----------------------------------------------------------------------===//

#ifndef PIPELINE_MLIR_LIB_DIALECT_PIPELINE_TRANSFORMS_SMEMHANDOFFCHECKS_H
#define PIPELINE_MLIR_LIB_DIALECT_PIPELINE_TRANSFORMS_SMEMHANDOFFCHECKS_H

#include "ProtocolChecks.h"

namespace mlir::pipeline::protocol {

/// An ordinary write to shared memory (llvm.store / memref.store /
/// vector.store into address space 3, nvvm.stmatrix): the generic-proxy
/// writes an epilogue fills a staging tile with.
bool isSharedMemoryWrite(Operation *op);

/// A bulk store from shared memory to global memory (`pipeline.copy.tma_store`,
/// `nvvm.cp.async.bulk[.tensor].global.shared.cta`, a TMA reduction), and
/// its shared-memory source operand.
bool isBulkStore(Operation *op);
Value bulkStoreSource(Operation *op);

/// The threads of a 1-D block of `blockDim` threads that run `op`, from the
/// thread conditions of the scf.ifs around it (evalForThread); conditions
/// the same for every thread (kernel arguments, loop variables) do not
/// narrow it. nullopt when a condition is neither.
std::optional<llvm::BitVector> threadsRunning(Operation *op, int64_t blockDim);

/// Staging buffers: a PipelineTmaStore has no more stages than the staging
/// buffers its stores read in turn (TmaStoreBufferChecks.cpp).
LogicalResult checkTmaStoreBuffers(FunctionOpInterface fn,
                                   const Options &options);

/// Shared-memory hand-over: a shared-memory tile written by several warps with ordinary
/// stores and stored by one thread with a bulk (TMA) store is handed over
/// through a barrier in both directions (SmemHandoffChecks.cpp).
LogicalResult checkSmemHandoff(FunctionOpInterface fn, const Options &options);

/// Tensor-core fences: wgmma.fence before a warp's first wgmma.mma_async,
/// tcgen05.wait::ld before a tcgen05.ld's registers are read, and the
/// fence_before / barrier / fence_after between other warps' tcgen05 ops and
/// a tcgen05.dealloc (FenceChecks.cpp; the tcgen05 rules in TmemChecks.cpp).
LogicalResult checkFences(FunctionOpInterface fn, const Options &options);

} // namespace mlir::pipeline::protocol

#endif // PIPELINE_MLIR_LIB_DIALECT_PIPELINE_TRANSFORMS_SMEMHANDOFFCHECKS_H
