//===- ProducerConsumerLowering.cpp - producer.* and consumer.* -----------===//
//
// CuTe DSL's pipeline methods: producers wait on empty[i]
// and fill full[i]; consumers wait on full[i] and free empty[i]. How a side
// signals depends on its op type (AsyncThread arrive, cp.async noinc arrive,
// TMA/CLC expect_tx, tcgen05.commit, bulk groups).
//
//===----------------------------------------------------------------------===//

#include "LoweringUtils.h"

#include "ElectOnce.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"

using namespace mlir;
using namespace mlir::pipeline;

namespace {

constexpr int32_t kProducerRole = kWatchdogProducer;
constexpr int32_t kConsumerRole = kWatchdogConsumer;

WaitSite makeSite(Value pipeline, int32_t role, const StateFields &f) {
  return {getWatchdogPipelineId(pipeline), role, f.index, f.phase};
}

/// Ledger slots (watchdog on) of full[index] and empty[index] of `pipeline`
/// (the value before conversion).
LedgerSlot fullSlot(const PipelineLoweringOptions &options, Value pipeline,
                    Value index) {
  return getLedgerSlot(options, pipeline, index);
}
LedgerSlot emptySlot(OpBuilder &b, Location loc,
                     const PipelineLoweringOptions &options, Value pipeline,
                     PipelineType type, Value index) {
  LedgerSlot slot = getLedgerSlot(options, pipeline, index);
  if (slot)
    slot.index = arith::AddIOp::create(b, loc, index,
                                       constI32(b, loc, type.getStages()));
  return slot;
}

/// The expect_tx half of producer_acquire for TMA/CLC producers.
void emitArmFullBarrier(OpBuilder &b, Location loc, PipelineType type,
                        Value base, Value index, Value extraTx,
                        Operation *verb,
                        const PipelineLoweringOptions &options,
                        const LedgerSlot &ledger) {
  // Watchdog on: an arrival and the announced bytes, in the ledger of the
  // CTA whose barrier is armed (`rank`, null: this one). Bytes only where
  // our copy ops deliver them (TMA kinds): a CLC response is no copy of
  // ours, and its bytes would read as "never issued".
  bool bytesFromCopies = type.getProducerOpType() == OpType::TmaLoad;
  auto count = [&](OpBuilder &nb, Location nl, Value tx, Value rank) {
    emitLedgerAdd(nb, nl, ledger, kLedgerArrivals, nb.getI32IntegerAttr(1),
                  rank);
    if (bytesFromCopies)
      emitLedgerAdd(nb, nl, ledger, kLedgerAnnounced, tx, rank);
  };
  Value tx = constI32(b, loc, type.getTxCount());
  if (extraTx)
    tx = arith::AddIOp::create(b, loc, tx, extraTx);
  Value full = fullBarrier(b, loc, base, index);
  BarrierPlan plan = getBarrierPlan(type);

  if (plan.arm == ArmTarget::EveryClusterCta) {
    // The CLC response is multicast to every CTA of the cluster, so lane r
    // of the producer warp arms CTA r's full barrier.
    int64_t ctas = type.getClusterSize();
    Value lane = laneId(b, loc);
    Value active = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                         lane, constI32(b, loc, ctas));
    emitIf(b, loc, active, [&](OpBuilder &nb, Location nl) {
      if (ctas == 1) {
        count(nb, nl, tx, Value());
        NVVM::MBarrierArriveExpectTxOp::create(nb, nl, Type(), full, tx,
                                               NVVM::MemScopeKind::CTA, false,
                                               Value());
        return;
      }
      count(nb, nl, tx, lane);
      auto clusterPtr = LLVM::LLVMPointerType::get(
          nb.getContext(),
          static_cast<unsigned>(NVVM::NVVMMemorySpace::SharedCluster));
      Value remote = NVVM::MapaOp::create(nb, nl, clusterPtr, full, lane);
      NVVM::MBarrierArriveExpectTxOp::create(nb, nl, Type(), remote, tx,
                                             NVVM::MemScopeKind::CLUSTER,
                                             false, Value());
    });
    return;
  }

  // PairLeader: the MMA consumer waits in the pair leader, so only the
  // leader arms, with the bytes of both CTAs.
  Value cond = electedLane(b, loc, verb, options);
  if (plan.arm == ArmTarget::PairLeader)
    if (Value leader = isLeaderCta(b, loc, type))
      cond = arith::AndIOp::create(b, loc, leader, cond);
  emitIf(b, loc, cond, [&](OpBuilder &nb, Location nl) {
    count(nb, nl, tx, Value());
    NVVM::MBarrierArriveExpectTxOp::create(nb, nl, Type(), full, tx,
                                           NVVM::MemScopeKind::CTA, false,
                                           Value());
  });
}

struct ProducerAcquireLowering : PipelineOpLowering<ProducerAcquireOp> {
  using PipelineOpLowering::PipelineOpLowering;

  LogicalResult
  matchAndRewrite(ProducerAcquireOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    PipelineType type = op.getPipelineType();
    if (type.getProducerOpType() == OpType::TmaStore) {
      // At most S-1 stores may still read their shared-memory source.
      NVVM::CpAsyncBulkWaitGroupOp::create(rewriter, loc,
                                           type.getStages() - 1,
                                           rewriter.getUnitAttr());
      rewriter.eraseOp(op);
      return success();
    }
    StateFields f = unpackState(rewriter, loc, adaptor.getState(),
                                op.getStateType());
    Value base = adaptor.getPipeline();
    emitWaitUnlessToken(rewriter, loc,
                        emptyBarrier(rewriter, loc, base, type, f.index),
                        f.phase, adaptor.getToken(), options,
                        makeSite(op.getPipeline(), kProducerRole, f));
    if (type.hasTxCount())
      emitArmFullBarrier(rewriter, loc, type, base, f.index,
                         adaptor.getExtraTx(), op, options,
                         fullSlot(options, op.getPipeline(), f.index));
    rewriter.eraseOp(op);
    return success();
  }
};

struct ProducerTryAcquireLowering : PipelineOpLowering<ProducerTryAcquireOp> {
  using PipelineOpLowering::PipelineOpLowering;

  LogicalResult
  matchAndRewrite(ProducerTryAcquireOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    PipelineType type = op.getPipelineType();
    StateFields f = unpackState(rewriter, loc, adaptor.getState(),
                                op.getStateType());
    Value empty =
        emptyBarrier(rewriter, loc, adaptor.getPipeline(), type, f.index);
    rewriter.replaceOp(op, emitTryWait(rewriter, loc, empty, f.phase));
    return success();
  }
};

struct ProducerCommitLowering : PipelineOpLowering<ProducerCommitOp> {
  using PipelineOpLowering::PipelineOpLowering;

  LogicalResult
  matchAndRewrite(ProducerCommitOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    PipelineType type = op.getPipelineType();
    LedgerSlot ledger;
    auto full = [&]() {
      StateFields f = unpackState(rewriter, loc, adaptor.getState(),
                                  op.getStateType());
      ledger = fullSlot(options, op.getPipeline(), f.index);
      return fullBarrier(rewriter, loc, adaptor.getPipeline(), f.index);
    };
    switch (type.getProducerOpType()) {
    case OpType::AsyncThread: {
      // AsyncUmma with a CTA pair: the MMA waits in the leader, so both
      // CTAs' producers arrive on the leader's full barrier.
      Value dst;
      if (getBarrierPlan(type).commit == ArriveTarget::PairLeader)
        dst = leaderCtaRank(rewriter, loc, type);
      Value bar = full();
      emitAsyncArrive(rewriter, loc, bar, dst, op.getElectOne(),
                      op.getSyncwarpBefore(), op, &options, ledger);
      break;
    }
    case OpType::AsyncLoad: {
      // noinc: the init count already includes these arrives.
      Value bar = full();
      NVVM::CpAsyncMBarrierArriveOp::create(rewriter, loc, bar,
                                            /*noinc=*/true);
      // One arrival per thread, when its cp.async ops complete.
      emitLedgerAdd(rewriter, loc, ledger, kLedgerArrivals,
                    rewriter.getI32IntegerAttr(1));
      break;
    }
    case OpType::TmaLoad:
    case OpType::ClcLoad:
      // The copy's (or CLC response's) complete_tx completes the phase; an
      // arrive here would count twice (docs/Rationale.md section 8).
      break;
    case OpType::TCGen05Mma: {
      Value bar = full();
      emitUmmaCommit(rewriter, loc, bar, ummaArrivalMask(rewriter, loc, type),
                     type, op, options, ledger);
      break;
    }
    case OpType::TmaStore:
      NVVM::CpAsyncBulkCommitGroupOp::create(rewriter, loc);
      break;
    }
    rewriter.eraseOp(op);
    return success();
  }
};

struct ProducerTailLowering : PipelineOpLowering<ProducerTailOp> {
  using PipelineOpLowering::PipelineOpLowering;

  LogicalResult
  matchAndRewrite(ProducerTailOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    PipelineType type = op.getPipelineType();
    if (type.getProducerOpType() == OpType::TmaStore) {
      NVVM::CpAsyncBulkWaitGroupOp::create(rewriter, loc, 0,
                                           rewriter.getUnitAttr());
      rewriter.eraseOp(op);
      return success();
    }
    StateType stateTy = op.getStateType();
    Value base = adaptor.getPipeline();
    auto waitEmpty = [&](OpBuilder &b, Location l, Value state) {
      StateFields f = unpackState(b, l, state, stateTy);
      emitWaitLoop(b, l, emptyBarrier(b, l, base, type, f.index), f.phase,
                   options, makeSite(op.getPipeline(), kProducerRole, f));
    };

    if (getKindTraits(type.getKind()).tailLeaderOnly) {
      // Only the leader's MMA produced; stages are released in order, so
      // waiting for the last one in flight covers all of them.
      auto body = [&](OpBuilder &b, Location l) {
        Value state = adaptor.getState();
        if (type.getStages() > 1)
          state = advanceState(b, l, state, stateTy,
                               constI32(b, l, type.getStages() - 1));
        waitEmpty(b, l, state);
      };
      if (Value leader = isLeaderCta(rewriter, loc, type))
        emitIf(rewriter, loc, leader, body);
      else
        body(rewriter, loc);
      rewriter.eraseOp(op);
      return success();
    }

    // Wait until every stage was released once more, so that no consumer
    // arrive is still in flight towards this CTA when it exits.
    Value state = adaptor.getState();
    if (type.getStages() <= kMaxUnrolledStages) {
      for (int64_t i = 0; i < type.getStages(); ++i) {
        waitEmpty(rewriter, loc, state);
        if (i + 1 < type.getStages())
          state = advanceState(rewriter, loc, state, stateTy, Value());
      }
      rewriter.eraseOp(op);
      return success();
    }
    // Many stages: a loop of S waits instead of S unrolled wait loops.
    auto loop = scf::ForOp::create(
        rewriter, loc, constI32(rewriter, loc, 0),
        constI32(rewriter, loc, type.getStages()), constI32(rewriter, loc, 1),
        ValueRange{state});
    {
      OpBuilder::InsertionGuard guard(rewriter);
      rewriter.setInsertionPointToStart(loop.getBody());
      Value current = loop.getRegionIterArgs().front();
      waitEmpty(rewriter, loc, current);
      Value next = advanceState(rewriter, loc, current, stateTy, Value());
      // With iter_args the builder leaves the body without a terminator.
      scf::YieldOp::create(rewriter, loc, next);
    }
    rewriter.eraseOp(op);
    return success();
  }
};

struct ProducerBarrierLowering : PipelineOpLowering<ProducerBarrierOp> {
  using PipelineOpLowering::PipelineOpLowering;

  LogicalResult
  matchAndRewrite(ProducerBarrierOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    StateFields f = unpackState(rewriter, op.getLoc(), adaptor.getState(),
                                op.getStateType());
    rewriter.replaceOp(op, fullBarrier(rewriter, op.getLoc(),
                                       adaptor.getPipeline(), f.index));
    return success();
  }
};

struct ConsumerWaitLowering : PipelineOpLowering<ConsumerWaitOp> {
  using PipelineOpLowering::PipelineOpLowering;

  LogicalResult
  matchAndRewrite(ConsumerWaitOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    StateFields f = unpackState(rewriter, loc, adaptor.getState(),
                                op.getStateType());
    emitWaitUnlessToken(rewriter, loc,
                        fullBarrier(rewriter, loc, adaptor.getPipeline(),
                                    f.index),
                        f.phase, adaptor.getToken(), options,
                        makeSite(op.getPipeline(), kConsumerRole, f));
    rewriter.eraseOp(op);
    return success();
  }
};

struct ConsumerTryWaitLowering : PipelineOpLowering<ConsumerTryWaitOp> {
  using PipelineOpLowering::PipelineOpLowering;

  LogicalResult
  matchAndRewrite(ConsumerTryWaitOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    StateFields f = unpackState(rewriter, loc, adaptor.getState(),
                                op.getStateType());
    Value full = fullBarrier(rewriter, loc, adaptor.getPipeline(), f.index);
    rewriter.replaceOp(op, emitTryWait(rewriter, loc, full, f.phase));
    return success();
  }
};

struct ConsumerReleaseLowering : PipelineOpLowering<ConsumerReleaseOp> {
  using PipelineOpLowering::PipelineOpLowering;

  LogicalResult
  matchAndRewrite(ConsumerReleaseOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    PipelineType type = op.getPipelineType();
    StateFields f = unpackState(rewriter, loc, adaptor.getState(),
                                op.getStateType());
    Value empty =
        emptyBarrier(rewriter, loc, adaptor.getPipeline(), type, f.index);
    LedgerSlot ledger = emptySlot(rewriter, loc, options, op.getPipeline(),
                                  type, f.index);
    const KindTraits &traits = getKindTraits(type.getKind());
    OpType side =
        traits.consumerOpPerRelease ? *op.getOpType() : traits.consumerOp;
    BarrierPlan plan = getBarrierPlan(type);
    bool electOneLane = op.getElectOne(), syncwarp = op.getSyncwarpBefore();
    switch (plan.releaseTarget(side)) {
    case ArriveTarget::MulticastMask:
      emitUmmaCommit(rewriter, loc, empty,
                     ummaArrivalMask(rewriter, loc, type), type, op, options,
                     ledger);
      break;
    case ArriveTarget::SignallingLanes:
      // Always through signalling lanes (lane 0 alone for one CTA), so the
      // empty barrier counts mcast_size arrivals per consumer warp.
      emitSignallingLaneRelease(rewriter, loc, type, empty, syncwarp, ledger);
      break;
    case ArriveTarget::PairLeader:
      // The MMA producer waits in the pair leader only.
      emitAsyncArrive(rewriter, loc, empty, leaderCtaRank(rewriter, loc, type),
                      electOneLane, syncwarp, op, &options, ledger);
      break;
    case ArriveTarget::ClusterCta0:
      // The CLC producer (and its empty barrier) lives in CTA 0.
      emitAsyncArrive(rewriter, loc, empty, constI32(rewriter, loc, 0),
                      electOneLane, syncwarp, op, &options, ledger);
      break;
    case ArriveTarget::Local:
    case ArriveTarget::None:
      emitAsyncArrive(rewriter, loc, empty, Value(), electOneLane, syncwarp,
                      op, &options, ledger);
      break;
    }
    rewriter.eraseOp(op);
    return success();
  }

private:
  /// PipelineTmaAsync with a cluster: in every consumer warp, lane r
  /// (r < cluster size) arrives on CTA r's empty barrier if CTA r's loads
  /// land in this CTA (it differs only along a multicast mode).
  static void emitSignallingLaneRelease(OpBuilder &b, Location loc,
                                        PipelineType type, Value empty,
                                        bool syncwarp,
                                        const LedgerSlot &ledger) {
    if (syncwarp)
      NVVM::SyncWarpOp::create(b, loc, constI32(b, loc, -1));
    int64_t ctas = type.getClusterSize();
    Value lane = laneId(b, loc);
    Value signalling = arith::CmpIOp::create(
        b, loc, arith::CmpIPredicate::ult, lane, constI32(b, loc, ctas));
    if (ctas == 1) {
      // One CTA: lane 0 of each consumer warp arrives on the local barrier.
      emitIf(b, loc, signalling, [&](OpBuilder &nb, Location nl) {
        emitAsyncArrive(nb, nl, empty, Value(), /*electOneLane=*/false,
                        /*syncwarpBefore=*/false, nullptr, nullptr, ledger);
      });
      return;
    }
    Value dst = arith::RemUIOp::create(b, loc, lane, constI32(b, loc, ctas));
    ClusterLayoutAttr layout = type.getCluster();
    CtaCoord self = ctaCoord(b, loc, layout, clusterCtaRank(b, loc));
    CtaCoord other = ctaCoord(b, loc, layout, dst);
    Value keep = sharesMulticastTile(b, loc, type, self, other,
                                     /*ignoreV=*/false);
    std::optional<int64_t> keepConst = getConstantIntValue(keep);
    Value cond = keepConst && *keepConst != 0
                     ? signalling
                     : Value(arith::AndIOp::create(b, loc, signalling, keep));
    emitIf(b, loc, cond, [&](OpBuilder &nb, Location nl) {
      emitAsyncArrive(nb, nl, empty, dst, /*electOneLane=*/false,
                      /*syncwarpBefore=*/false, nullptr, nullptr, ledger);
    });
  }
};

} // namespace

void mlir::pipeline::populateProducerConsumerLoweringPatterns(
    LLVMTypeConverter &converter, RewritePatternSet &patterns,
    const PipelineLoweringOptions &options) {
  patterns.add<ProducerAcquireLowering, ProducerTryAcquireLowering,
               ProducerCommitLowering, ProducerTailLowering,
               ProducerBarrierLowering, ConsumerWaitLowering,
               ConsumerTryWaitLowering, ConsumerReleaseLowering>(converter,
                                                                 options);
}
