//===- TmemChecks.h - tensor memory: alloc, fences, dealloc -----*- C++ -*-===//
//
// Private to lib/Dialect/Pipeline/Transforms. The tcgen05 (tensor memory)
// rules (TmemChecks.cpp). checkFences (FenceChecks.cpp) runs them between
// the wgmma and proxy fence checks (a consumer.release is checked for both
// families in one loop), so that a kernel's findings keep one order.
//
//===----------------------------------------------------------------------===//

#ifndef PIPELINE_MLIR_LIB_DIALECT_PIPELINE_TRANSFORMS_TMEMCHECKS_H
#define PIPELINE_MLIR_LIB_DIALECT_PIPELINE_TRANSFORMS_TMEMCHECKS_H

#include "ProtocolChecks.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

namespace mlir::pipeline::protocol {

/// The tensor-memory checks of one function; `failed` is set by any finding.
class TmemChecker {
public:
  /// `blockDim`: threads per CTA (checkAlloc and checkDealloc need it known).
  explicit TmemChecker(int64_t blockDim) : blockDim(blockDim) {}
  bool failed = false;

  /// A tcgen05.ld's registers are read only after a tcgen05.wait::ld.
  void checkWaitLoad(NVVM::Tcgen05LdOp ld);
  /// Every column allocated is deallocated (the TMEM leak).
  void checkTmemFreed(ArrayRef<NVVM::Tcgen05AllocOp> allocs,
                      ArrayRef<NVVM::Tcgen05DeallocOp> deallocs);
  /// tcgen05.fence::after_thread_sync after the consumer.wait /
  /// producer.acquire of an umma_async pipeline, before its tcgen05 ops.
  void checkTcgen05AfterSync(Operation *verb, Value pipe);
  /// tcgen05.fence::before_thread_sync after the tcgen05 ops of an
  /// umma_async stage, before its consumer.release.
  void checkTcgen05BeforeRelease(ConsumerReleaseOp release);
  /// fence_before, a CTA barrier, fence_after between a tcgen05.alloc and
  /// other warps' tcgen05 ops (`body`: the function's top-level block).
  void checkAlloc(NVVM::Tcgen05AllocOp alloc, Block &body);
  /// The same between other warps' tcgen05 ops and a tcgen05.dealloc at the
  /// end of the kernel.
  void checkDealloc(NVVM::Tcgen05DeallocOp dealloc, Block &body);
  /// A cluster barrier between a cta_group::2 tcgen05.alloc and the
  /// cta_group::2 tcgen05.dealloc after it (`body`: the top-level block).
  void checkPairDealloc(ArrayRef<NVVM::Tcgen05AllocOp> allocs,
                        NVVM::Tcgen05DeallocOp dealloc, Block &body);
  /// A cluster barrier on every path before a cta_group::2 tcgen05.alloc.
  void checkPairAlloc(NVVM::Tcgen05AllocOp alloc);
  /// tcgen05.wait::ld on every path between a tcgen05.ld and the
  /// consumer.release that hands its tensor-memory stage back.
  void checkWaitLoadBeforeRelease(ConsumerReleaseOp release);

private:
  std::optional<llvm::BitVector> threads(Operation *op);
  static bool subset(const llvm::BitVector &a, const llvm::BitVector &b);

  int64_t blockDim;
  DenseMap<Block *, std::optional<llvm::BitVector>> cache;
};

} // namespace mlir::pipeline::protocol

#endif // PIPELINE_MLIR_LIB_DIALECT_PIPELINE_TRANSFORMS_TMEMCHECKS_H
