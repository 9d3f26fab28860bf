//===- CopyLowering.cpp - TMA / bulk copies and bulk groups ---------------===//
//
// copy.tma_load  -> cp.async.bulk.tensor.Nd.shared::cluster.global
//                   .mbarrier::complete_tx::bytes[.multicast::cluster]
//                   [.cta_group::2] on the stage's full barrier
// copy.bulk      -> cp.async.bulk.shared::cluster.global.mbarrier::...
// copy.tma_store -> cp.async.bulk.tensor.Nd.global.shared::cta.bulk_group
// bulk_group.*   -> cp.async.bulk.commit_group / wait_group[.read]
//
// Copies are issued by every thread that executes them: callers elect the
// issuing thread (as with CuTe DSL's TMA copies inside the producer warp).
//
//===----------------------------------------------------------------------===//

#include "LoweringUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

using namespace mlir;
using namespace mlir::pipeline;

namespace {

/// The TMA descriptor operand of the NVVM ops is a generic pointer.
Value toGeneric(OpBuilder &b, Location loc, Value ptr) {
  auto ptrTy = cast<LLVM::LLVMPointerType>(ptr.getType());
  if (ptrTy.getAddressSpace() == 0)
    return ptr;
  return LLVM::AddrSpaceCastOp::create(
      b, loc, LLVM::LLVMPointerType::get(b.getContext()), ptr);
}

/// Destinations are named in the shared::cluster window; this CTA's
/// shared::cta addresses are valid there with the same value (PTX ISA,
/// state spaces), so the address is reinterpreted as a 32-bit integer
/// rather than cast: NVPTX lowers an addrspacecast 3 -> 7 through the
/// generic window (cvt + cvta.shared + cvta.to.shared::cluster + cvt, four
/// instructions that ptxas keeps). With 32-bit shared pointers the two
/// casts below are no-ops; with 64-bit ones a truncation and a zero
/// extension of an address below 4 GiB.
Value toSharedCluster(OpBuilder &b, Location loc, Value ptr) {
  Value bits = LLVM::PtrToIntOp::create(b, loc, b.getI32Type(), ptr);
  return LLVM::IntToPtrOp::create(
      b, loc,
      LLVM::LLVMPointerType::get(
          b.getContext(),
          static_cast<unsigned>(NVVM::NVVMMemorySpace::SharedCluster)),
      bits);
}

/// With 2-CTA MMA both CTAs' loads complete on the pair leader's full
/// barrier. The leader's shared address differs from the peer's only in the
/// CTA-pair bit (bit 24), which CUTLASS clears the same way
/// (Sm100MmaPeerBitMask) for the `.cta_group::2` TMA form.
Value leaderBarrier(OpBuilder &b, Location loc, Value barrier) {
  Value addr = LLVM::PtrToIntOp::create(b, loc, b.getI64Type(), barrier);
  Value mask = arith::ConstantIntOp::create(b, loc, b.getI64Type(),
                                            ~(int64_t(1) << 24));
  Value leader = arith::AndIOp::create(b, loc, addr, mask);
  return LLVM::IntToPtrOp::create(b, loc, barrier.getType(), leader);
}

/// Watchdog on: `bytes` (i32) issued towards full[index] of `pipeline`, in
/// the ledger of each CTA whose barrier the copy signals: every CTA of the
/// multicast `mask` (may be null: this CTA), or with a CTA pair its leader.
void countIssued(OpBuilder &b, Location loc,
                 const PipelineLoweringOptions &options, Value pipeline,
                 PipelineType type, Value index, OpFoldResult bytes,
                 Value mask) {
  LedgerSlot slot = getLedgerSlot(options, pipeline, index);
  if (!slot)
    return;
  if (mask) {
    emitLedgerAddMasked(b, loc, slot, kLedgerIssued, bytes, mask,
                        /*toPairLeader=*/type.getCtaGroup() == 2);
    return;
  }
  emitLedgerAdd(b, loc, slot, kLedgerIssued, bytes,
                type.getCtaGroup() == 2 ? leaderCtaRank(b, loc, type)
                                        : Value());
}

struct TmaLoadLowering : PipelineOpLowering<TmaLoadOp> {
  using PipelineOpLowering::PipelineOpLowering;

  LogicalResult
  matchAndRewrite(TmaLoadOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    PipelineType type = op.getPipelineType();
    StateFields f = unpackState(rewriter, loc, adaptor.getState(),
                                op.getStateType());
    Value bar = fullBarrier(rewriter, loc, adaptor.getPipeline(), f.index);
    NVVM::CTAGroupKindAttr group;
    if (type.getCtaGroup() == 2) {
      bar = leaderBarrier(rewriter, loc, bar);
      group = NVVM::CTAGroupKindAttr::get(rewriter.getContext(),
                                          NVVM::CTAGroupKind::CTA_2);
    }
    NVVM::CpAsyncBulkTensorGlobalToSharedClusterOp::create(
        rewriter, loc, toSharedCluster(rewriter, loc, adaptor.getDst()),
        toGeneric(rewriter, loc, adaptor.getDesc()), adaptor.getCoordinates(),
        bar, /*im2colOffsets=*/ValueRange{}, adaptor.getMulticastMask(),
        /*l2CacheHint=*/Value(), NVVM::TMALoadMode::TILE,
        /*isCTAOnly=*/false, group, /*predicate=*/Value());
    countIssued(rewriter, loc, options, op.getPipeline(), type, f.index,
                rewriter.getI32IntegerAttr(op.getBytes()),
                adaptor.getMulticastMask());
    rewriter.eraseOp(op);
    return success();
  }
};

struct BulkLoadLowering : PipelineOpLowering<BulkLoadOp> {
  using PipelineOpLowering::PipelineOpLowering;

  LogicalResult
  matchAndRewrite(BulkLoadOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    PipelineType type = op.getPipelineType();
    StateFields f = unpackState(rewriter, loc, adaptor.getState(),
                                op.getStateType());
    Value bar = fullBarrier(rewriter, loc, adaptor.getPipeline(), f.index);
    if (type.getCtaGroup() == 2)
      bar = leaderBarrier(rewriter, loc, bar);
    NVVM::CpAsyncBulkGlobalToSharedClusterOp::create(
        rewriter, loc, toSharedCluster(rewriter, loc, adaptor.getDst()),
        adaptor.getSrc(), bar, adaptor.getSize(), /*multicastMask=*/Value(),
        /*l2CacheHint=*/Value());
    countIssued(rewriter, loc, options, op.getPipeline(), type, f.index,
                adaptor.getSize(), /*mask=*/Value());
    rewriter.eraseOp(op);
    return success();
  }
};

struct TmaStoreLowering : PipelineOpLowering<TmaStoreOp> {
  using PipelineOpLowering::PipelineOpLowering;

  LogicalResult
  matchAndRewrite(TmaStoreOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    NVVM::CpAsyncBulkTensorSharedCTAToGlobalOp::create(
        rewriter, loc, toGeneric(rewriter, loc, adaptor.getDesc()),
        adaptor.getSrc(), adaptor.getCoordinates(), /*l2CacheHint=*/Value(),
        NVVM::TMAStoreMode::TILE, /*predicate=*/Value());
    rewriter.eraseOp(op);
    return success();
  }
};

struct BulkGroupCommitLowering : PipelineOpLowering<BulkGroupCommitOp> {
  using PipelineOpLowering::PipelineOpLowering;

  LogicalResult
  matchAndRewrite(BulkGroupCommitOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOpWithNewOp<NVVM::CpAsyncBulkCommitGroupOp>(op);
    return success();
  }
};

struct BulkGroupWaitLowering : PipelineOpLowering<BulkGroupWaitOp> {
  using PipelineOpLowering::PipelineOpLowering;

  LogicalResult
  matchAndRewrite(BulkGroupWaitOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOpWithNewOp<NVVM::CpAsyncBulkWaitGroupOp>(
        op, static_cast<uint32_t>(op.getPending()),
        op.getRead() ? rewriter.getUnitAttr() : UnitAttr());
    return success();
  }
};

} // namespace

void mlir::pipeline::populateCopyLoweringPatterns(
    LLVMTypeConverter &converter, RewritePatternSet &patterns,
    const PipelineLoweringOptions &options) {
  patterns.add<TmaLoadLowering, BulkLoadLowering, TmaStoreLowering,
               BulkGroupCommitLowering, BulkGroupWaitLowering>(converter,
                                                               options);
}
