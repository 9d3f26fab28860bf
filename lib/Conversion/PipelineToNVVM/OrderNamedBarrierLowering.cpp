//===- OrderNamedBarrierLowering.cpp - PipelineOrder and NamedBarrier -----===//
//
// PipelineOrder: `length` groups take turns; barrier index*length + g holds
// group g's turn for stage `index`. wait = try_wait loop on it with the
// state's phase; arrive = mbarrier.arrive on the next group's barrier, then
// advance.
//
// NamedBarrier: bar.arrive / bar.sync id, n (aligned), or the unaligned
// barrier.cta.arrive / barrier.cta.sync forms.
//
//===----------------------------------------------------------------------===//

#include "LoweringUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

using namespace mlir;
using namespace mlir::pipeline;

namespace {

/// Barrier `index * length + group` of an order pipeline.
Value orderBarrier(OpBuilder &b, Location loc, Value base, PipelineType type,
                   Value index, Value group) {
  Value slot = arith::AddIOp::create(
      b, loc,
      arith::MulIOp::create(b, loc, index, constI32(b, loc, type.getLength())),
      group);
  return barrierAt(b, loc, base, slot);
}

struct OrderWaitLowering : PipelineOpLowering<OrderWaitOp> {
  using PipelineOpLowering::PipelineOpLowering;

  LogicalResult
  matchAndRewrite(OrderWaitOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    PipelineType type = op.getPipelineType();
    StateFields f = unpackState(rewriter, loc, adaptor.getState(),
                                op.getStateType());
    Value bar = orderBarrier(rewriter, loc, adaptor.getPipeline(), type,
                             f.index, adaptor.getGroupId());
    WaitSite site{getWatchdogPipelineId(op.getPipeline()), kWatchdogOrder,
                  f.index, f.phase};
    emitWaitLoop(rewriter, loc, bar, f.phase, options, site);
    rewriter.eraseOp(op);
    return success();
  }
};

struct OrderArriveLowering : PipelineOpLowering<OrderArriveOp> {
  using PipelineOpLowering::PipelineOpLowering;

  LogicalResult
  matchAndRewrite(OrderArriveOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    PipelineType type = op.getPipelineType();
    StateType stateTy = op.getStateType();
    StateFields f = unpackState(rewriter, loc, adaptor.getState(), stateTy);
    Value next = arith::RemUIOp::create(
        rewriter, loc,
        arith::AddIOp::create(rewriter, loc, adaptor.getGroupId(),
                              constI32(rewriter, loc, 1)),
        constI32(rewriter, loc, type.getLength()));
    Value bar = orderBarrier(rewriter, loc, adaptor.getPipeline(), type,
                             f.index, next);
    // Watchdog on: the barrier's ledger slot, numbered as orderBarrier does.
    LedgerSlot ledger =
        getLedgerSlot(options, op.getPipeline(), f.index);
    if (ledger)
      ledger.index = arith::AddIOp::create(
          rewriter, loc,
          arith::MulIOp::create(rewriter, loc, f.index,
                                constI32(rewriter, loc, type.getLength())),
          next);
    emitAsyncArrive(rewriter, loc, bar, Value(), /*electOneLane=*/false,
                    /*syncwarpBefore=*/false, nullptr, nullptr, ledger);
    rewriter.replaceOp(op, advanceState(rewriter, loc, adaptor.getState(),
                                        stateTy, Value()));
    return success();
  }
};

/// Barrier id (+ index for arrive_w_index) and thread count.
template <typename OpTy>
std::pair<Value, Value> namedBarrierOperands(OpBuilder &b, OpTy op,
                                             Value index) {
  Location loc = op.getLoc();
  Value id = constI32(b, loc, op.getBarrierId());
  if (index)
    id = arith::AddIOp::create(b, loc, id, index);
  return {id, constI32(b, loc, op.getNumThreads())};
}

/// MLIR 22 has no NVVM op for the unaligned barrier.cta forms, so they are
/// called as the LLVM NVPTX intrinsics (no inline PTX needed).
void callBarrierIntrinsic(OpBuilder &b, Location loc, StringRef name, Value id,
                          Value threads) {
  LLVM::CallIntrinsicOp::create(b, loc, b.getStringAttr(name),
                                ValueRange{id, threads});
}

struct NamedBarrierArriveLowering : PipelineOpLowering<NamedBarrierArriveOp> {
  using PipelineOpLowering::PipelineOpLowering;

  LogicalResult
  matchAndRewrite(NamedBarrierArriveOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    auto [id, threads] = namedBarrierOperands(rewriter, op, adaptor.getIndex());
    if (op.getUnaligned())
      callBarrierIntrinsic(rewriter, op.getLoc(),
                           "llvm.nvvm.barrier.cta.arrive.count", id, threads);
    else
      NVVM::BarrierArriveOp::create(rewriter, op.getLoc(), id, threads);
    rewriter.eraseOp(op);
    return success();
  }
};

struct NamedBarrierSyncLowering : PipelineOpLowering<NamedBarrierSyncOp> {
  using PipelineOpLowering::PipelineOpLowering;

  LogicalResult
  matchAndRewrite(NamedBarrierSyncOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    auto [id, threads] = namedBarrierOperands(rewriter, op, adaptor.getIndex());
    if (op.getUnaligned())
      callBarrierIntrinsic(rewriter, op.getLoc(),
                           "llvm.nvvm.barrier.cta.sync.count", id, threads);
    else
      NVVM::BarrierOp::create(rewriter, op.getLoc(), Type(), id, threads,
                              NVVM::BarrierReductionAttr(), Value());
    rewriter.eraseOp(op);
    return success();
  }
};

} // namespace

void mlir::pipeline::populateOrderNamedBarrierLoweringPatterns(
    LLVMTypeConverter &converter, RewritePatternSet &patterns,
    const PipelineLoweringOptions &options) {
  patterns.add<OrderWaitLowering, OrderArriveLowering,
               NamedBarrierArriveLowering, NamedBarrierSyncLowering>(converter,
                                                                     options);
}
