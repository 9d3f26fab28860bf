//===- BarrierLowering.cpp - pipeline.create and init_arrive/init_wait ----===//
//
// MbarrierArray construction, as CuTe DSL's pipelines create it: warp 0
// elects one thread that runs one mbarrier.init per barrier with the arrive
// count its side implies; all threads then fence the inits
// (fence.mbarrier_init.release.cluster) and synchronize the CTA (bar.sync 0)
// or the cluster (barrier.cluster.arrive.relaxed + wait) unless the sync is
// deferred to pipeline.init_arrive / init_wait.
//
//===----------------------------------------------------------------------===//

#include "LoweringUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

using namespace mlir;
using namespace mlir::pipeline;

namespace {

/// count * num / den (rounded up), folded when the count is static.
Value scaleCount(OpBuilder &b, Location loc, Value count, int64_t num,
                 int64_t den = 1) {
  if (std::optional<int64_t> c = getConstantIntValue(count))
    return constI32(b, loc, (*c * num + den - 1) / den);
  if (den != 1)
    count = arith::DivUIOp::create(
        b, loc, arith::AddIOp::create(b, loc, count, constI32(b, loc, den - 1)),
        constI32(b, loc, den));
  return arith::MulIOp::create(b, loc, count, constI32(b, loc, num));
}

/// Arrive counts of the full and empty barriers of one stage.
struct InitCounts {
  Value full, empty;
};

InitCounts computeInitCounts(OpBuilder &b, Location loc, PipelineType type) {
  // The groups' counts (dynamic for threadblock / cluster groups), times the
  // plan's 2-CTA factor: with a pair, both CTAs' producers arrive on the
  // leader's full barrier (async_umma) or both CTAs' epilogue threads
  // release the leader's stage (umma_async). As in CuTe DSL, a tma_async
  // consumer group already counts its signalling-lane arrivals
  // (CooperativeGroup(Agent.Thread, mcast_size * consumer_warps)).
  BarrierPlan plan = getBarrierPlan(type);
  InitCounts counts;
  counts.full = groupArriveCount(b, loc, type.getProducer(), type);
  if (plan.fullScale != 1)
    counts.full = scaleCount(b, loc, counts.full, plan.fullScale);
  if (!plan.numEmpty)
    return counts;
  counts.empty = groupArriveCount(b, loc, type.getConsumer(), type);
  if (plan.emptyScale != 1)
    counts.empty = scaleCount(b, loc, counts.empty, plan.emptyScale);
  return counts;
}

/// A fresh `llvm.mlir.global internal` of `numBarriers` i64 in shared memory,
/// named after the pipeline and unique in the enclosing symbol table.
Value createBarrierStorage(ConversionPatternRewriter &rewriter, CreateOp op,
                           int64_t numBarriers) {
  Location loc = op.getLoc();
  Operation *symbolTable = op->getParentWithTrait<OpTrait::SymbolTable>();
  std::string stem = "__pipeline_barriers";
  if (std::optional<StringRef> name = op.getName()) {
    stem += "_";
    for (char c : *name)
      stem += llvm::isAlnum(c) ? c : '_';
  }
  std::string symbol = stem;
  for (unsigned i = 0; SymbolTable::lookupSymbolIn(symbolTable, symbol); ++i)
    symbol = stem + "_" + std::to_string(i);

  auto arrayTy = LLVM::LLVMArrayType::get(rewriter.getI64Type(), numBarriers);
  unsigned shared = static_cast<unsigned>(NVVM::NVVMMemorySpace::Shared);
  {
    OpBuilder::InsertionGuard guard(rewriter);
    rewriter.setInsertionPointToStart(&symbolTable->getRegion(0).front());
    LLVM::GlobalOp::create(rewriter, loc, arrayTy, /*isConstant=*/false,
                           LLVM::Linkage::Internal, symbol,
                           /*value=*/Attribute(), /*alignment=*/8, shared);
  }
  auto ptrTy = LLVM::LLVMPointerType::get(rewriter.getContext(), shared);
  return LLVM::AddressOfOp::create(rewriter, loc, ptrTy, symbol);
}

/// CTA (bar.sync 0) or cluster (relaxed arrive + wait) synchronization that
/// publishes the initialized barriers.
void emitInitSync(OpBuilder &b, Location loc, int64_t clusterSize) {
  if (clusterSize > 1) {
    NVVM::ClusterArriveRelaxedOp::create(b, loc, UnitAttr());
    NVVM::ClusterWaitOp::create(b, loc, UnitAttr());
    return;
  }
  NVVM::Barrier0Op::create(b, loc);
}

/// A deferred create whose inits the next create's fence covers: the next
/// op with memory effects in the block is another create that initializes
/// barriers. fence.mbarrier_init orders all earlier mbarrier.init of the
/// thread, and nothing in between can arrive on or wait for a barrier, so
/// one fence per group of creates is enough (CuTe DSL: one per kernel).
bool fenceCoveredByNextCreate(CreateOp op) {
  if (!op.getDeferSync())
    return false; // its own sync must follow its own fence
  for (Operation *next = op->getNextNode(); next; next = next->getNextNode()) {
    if (auto create = dyn_cast<CreateOp>(next))
      return create.getType().hasBarriers();
    if (!isMemoryEffectFree(next))
      return false;
  }
  return false;
}

struct CreateLowering : PipelineOpLowering<CreateOp> {
  using PipelineOpLowering::PipelineOpLowering;

  LogicalResult
  matchAndRewrite(CreateOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    PipelineType type = op.getType();
    auto ptrTy = LLVM::LLVMPointerType::get(
        rewriter.getContext(),
        static_cast<unsigned>(NVVM::NVVMMemorySpace::Shared));
    // PipelineTmaStore synchronizes through bulk groups: no barriers, and no
    // code. Its value is never dereferenced.
    if (!type.hasBarriers()) {
      rewriter.replaceOpWithNewOp<LLVM::ZeroOp>(op, ptrTy);
      return success();
    }

    int64_t numBarriers = type.getNumBarriers();
    Value base = adaptor.getBarrierStorage()
                     ? adaptor.getBarrierStorage()
                     : createBarrierStorage(rewriter, op, numBarriers);

    InitCounts counts = computeInitCounts(rewriter, loc, type);
    if (options.watchdog)
      emitWatchdogPipeEntry(rewriter, loc, op, base, counts.full,
                            counts.empty);
    Value warp0 =
        arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::eq,
                              warpIndex(rewriter, loc),
                              constI32(rewriter, loc, 0));
    int64_t stages = type.getStages();
    // No empty barriers: PipelineOrder, whose barriers all count the
    // producer group (the kind table gives it no empty count).
    bool order = !counts.empty;
    std::optional<int64_t> fullCount = getConstantIntValue(counts.full);
    std::optional<int64_t> emptyCount =
        order ? std::nullopt : getConstantIntValue(counts.empty);
    bool sameCount = !order && (counts.full == counts.empty ||
                                (fullCount && emptyCount &&
                                 *fullCount == *emptyCount));
    emitIf(rewriter, loc, warp0, [&](OpBuilder &b, Location l) {
      if (numBarriers <= 2 * kMaxUnrolledStages) {
        // Barriers [from, to) by one elected lane. Order: every barrier
        // counts the producer group; otherwise full barriers are [0, S) and
        // empty ones [S, 2S).
        auto initRange = [&](int64_t from, int64_t to) {
          emitIf(b, l, electOne(b, l), [&](OpBuilder &eb, Location el) {
            for (int64_t i = from; i < to; ++i) {
              Value count = (order || i < stages) ? counts.full : counts.empty;
              Value bar = barrierAt(eb, el, base, constI32(eb, el, i));
              NVVM::MBarrierInitOp::create(eb, el, bar, count, Value());
            }
          });
        };
        // With two counts, one elected block per group (as CuTe DSL): ptxas
        // makes each straight-line code, where one block holding both counts
        // stays a branch with reconvergence (measured, TmaAsync create: 30
        // SASS instead of 32). With one count a single block is shorter (28
        // instead of 29).
        if (order || sameCount) {
          initRange(0, numBarriers);
        } else {
          initRange(0, stages);
          initRange(stages, numBarriers);
        }
        return;
      }
      emitIf(b, l, electOne(b, l), [&](OpBuilder &eb, Location el) {
        // Many barriers: one loop over the full barriers [0, S) that also
        // initializes empty barrier i + S (order: one loop over all).
        int64_t trips = order ? numBarriers : stages;
        auto loop = scf::ForOp::create(eb, el, constI32(eb, el, 0),
                                       constI32(eb, el, trips),
                                       constI32(eb, el, 1));
        OpBuilder::InsertionGuard guard(eb);
        eb.setInsertionPoint(loop.getBody()->getTerminator());
        Value i = loop.getInductionVar();
        NVVM::MBarrierInitOp::create(eb, el, barrierAt(eb, el, base, i),
                                     counts.full, Value());
        if (!order) {
          Value empty = arith::AddIOp::create(eb, el, i,
                                              constI32(eb, el, stages));
          NVVM::MBarrierInitOp::create(eb, el, barrierAt(eb, el, base, empty),
                                       counts.empty, Value());
        }
      });
    });
    // Inits must be visible to the async proxy and to the cluster before
    // any arrive, also when the sync itself is deferred.
    if (!fenceCoveredByNextCreate(op))
      NVVM::FenceMbarrierInitOp::create(rewriter, loc);
    if (!op.getDeferSync())
      emitInitSync(rewriter, loc, type.getClusterSize());
    rewriter.replaceOp(op, base);
    return success();
  }
};

struct InitArriveLowering : PipelineOpLowering<InitArriveOp> {
  using PipelineOpLowering::PipelineOpLowering;

  LogicalResult
  matchAndRewrite(InitArriveOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    // One CTA: the CTA barrier in init_wait does all the work.
    if (op.getClusterSize() > 1) {
      if (op.getRelaxed())
        NVVM::ClusterArriveRelaxedOp::create(rewriter, op.getLoc(),
                                             UnitAttr());
      else
        NVVM::ClusterArriveOp::create(rewriter, op.getLoc(), UnitAttr());
    }
    rewriter.eraseOp(op);
    return success();
  }
};

struct InitWaitLowering : PipelineOpLowering<InitWaitOp> {
  using PipelineOpLowering::PipelineOpLowering;

  LogicalResult
  matchAndRewrite(InitWaitOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    if (op.getClusterSize() > 1)
      NVVM::ClusterWaitOp::create(rewriter, op.getLoc(), UnitAttr());
    else
      NVVM::Barrier0Op::create(rewriter, op.getLoc());
    rewriter.eraseOp(op);
    return success();
  }
};

} // namespace

void mlir::pipeline::populateBarrierLoweringPatterns(
    LLVMTypeConverter &converter, RewritePatternSet &patterns,
    const PipelineLoweringOptions &options) {
  patterns.add<CreateLowering, InitArriveLowering, InitWaitLowering>(
      converter, options);
}
