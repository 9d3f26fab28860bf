//===- LoweringUtils.cpp - helpers shared by the pipeline lowerings -------===//
//
// Thread/CTA queries, barrier addressing, the wait loop, arrives, and the
// (index, phase, count) arithmetic of pipeline states.
//
//===----------------------------------------------------------------------===//

#include "LoweringUtils.h"

#include "ElectOnce.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/TargetParser/Triple.h"

using namespace mlir;
using namespace mlir::pipeline;

//===----------------------------------------------------------------------===//
// Constants and special registers
//===----------------------------------------------------------------------===//

Value mlir::pipeline::constI32(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIntOp::create(b, loc, b.getI32Type(), v);
}

Value mlir::pipeline::constI16(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIntOp::create(b, loc, b.getI16Type(), v);
}

Value mlir::pipeline::constI1(OpBuilder &b, Location loc, bool v) {
  return arith::ConstantIntOp::create(b, loc, b.getI1Type(), v);
}

Value mlir::pipeline::linearThreadId(OpBuilder &b, Location loc) {
  Type i32 = b.getI32Type();
  Value tx = NVVM::ThreadIdXOp::create(b, loc, i32);
  Value ty = NVVM::ThreadIdYOp::create(b, loc, i32);
  Value tz = NVVM::ThreadIdZOp::create(b, loc, i32);
  Value nx = NVVM::BlockDimXOp::create(b, loc, i32);
  Value ny = NVVM::BlockDimYOp::create(b, loc, i32);
  Value yz = arith::AddIOp::create(b, loc, ty,
                                   arith::MulIOp::create(b, loc, ny, tz));
  return arith::AddIOp::create(b, loc, tx,
                               arith::MulIOp::create(b, loc, nx, yz));
}

std::optional<std::array<int64_t, 3>>
mlir::pipeline::knownBlockSize(Operation *at) {
  if (!at)
    return std::nullopt;
  auto func = dyn_cast<gpu::GPUFuncOp>(at);
  if (!func)
    func = at->getParentOfType<gpu::GPUFuncOp>();
  if (!func)
    return std::nullopt;
  std::optional<ArrayRef<int32_t>> known = func.getKnownBlockSize();
  if (!known || known->size() != 3)
    return std::nullopt;
  return std::array<int64_t, 3>{(*known)[0], (*known)[1], (*known)[2]};
}

/// The known block size of the function the builder inserts into.
static std::optional<std::array<int64_t, 3>> knownBlockSizeAt(OpBuilder &b) {
  Block *block = b.getInsertionBlock();
  return knownBlockSize(block ? block->getParentOp() : nullptr);
}

Value mlir::pipeline::warpIndex(OpBuilder &b, Location loc) {
  // In a 1-D block the linear id is tid.x: no tid.y/z, ntid or mad.
  std::optional<std::array<int64_t, 3>> known = knownBlockSizeAt(b);
  Value tid = known && (*known)[1] == 1 && (*known)[2] == 1
                  ? Value(NVVM::ThreadIdXOp::create(b, loc, b.getI32Type()))
                  : linearThreadId(b, loc);
  return arith::DivUIOp::create(b, loc, tid, constI32(b, loc, 32));
}

Value mlir::pipeline::laneId(OpBuilder &b, Location loc) {
  return NVVM::LaneIdOp::create(b, loc, b.getI32Type());
}

Value mlir::pipeline::blockSize(OpBuilder &b, Location loc) {
  if (std::optional<std::array<int64_t, 3>> known = knownBlockSizeAt(b))
    return constI32(b, loc, (*known)[0] * (*known)[1] * (*known)[2]);
  Type i32 = b.getI32Type();
  Value nx = NVVM::BlockDimXOp::create(b, loc, i32);
  Value ny = NVVM::BlockDimYOp::create(b, loc, i32);
  Value nz = NVVM::BlockDimZOp::create(b, loc, i32);
  return arith::MulIOp::create(b, loc, nx,
                               arith::MulIOp::create(b, loc, ny, nz));
}

Value mlir::pipeline::clusterCtaRank(OpBuilder &b, Location loc) {
  return NVVM::ClusterId::create(b, loc, b.getI32Type());
}

Value mlir::pipeline::electOne(OpBuilder &b, Location loc) {
  return NVVM::ElectSyncOp::create(b, loc, b.getI1Type(), Value());
}

Value mlir::pipeline::isLeaderCta(OpBuilder &b, Location loc,
                                  PipelineType type) {
  ClusterLayoutAttr layout = type.getCluster();
  if (!layout || layout.getV() == 1)
    return Value();
  // Ranks are laid out V fastest, so the pair leader has rank % V == 0.
  Value rem = arith::RemUIOp::create(b, loc, clusterCtaRank(b, loc),
                                     constI32(b, loc, layout.getV()));
  return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, rem,
                               constI32(b, loc, 0));
}

void mlir::pipeline::emitIf(OpBuilder &b, Location loc, Value cond,
                            function_ref<void(OpBuilder &, Location)> body) {
  // Build the body once the scf.if is in the IR (not from a body-builder
  // callback), so that helpers can look at enclosing ops and symbol tables.
  auto ifOp = scf::IfOp::create(b, loc, TypeRange{}, cond,
                                /*withElseRegion=*/false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
  body(b, loc);
}

Operation *mlir::pipeline::enclosingSymbolTable(Operation *op) {
  while (op && !op->hasTrait<OpTrait::SymbolTable>())
    op = op->getParentOp();
  return op;
}

LLVM::GlobalOp mlir::pipeline::getOrCreateSharedArray(
    OpBuilder &b, Location loc, Operation *symbolTable, StringRef name,
    Type elem, int64_t n) {
  if (auto existing = dyn_cast_or_null<LLVM::GlobalOp>(
          SymbolTable::lookupSymbolIn(symbolTable, name)))
    return existing;
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&symbolTable->getRegion(0).front());
  return LLVM::GlobalOp::create(
      b, loc, LLVM::LLVMArrayType::get(elem, std::max<int64_t>(n, 1)),
      /*isConstant=*/false, LLVM::Linkage::Internal, name, Attribute(),
      /*alignment=*/8, static_cast<unsigned>(NVVM::NVVMMemorySpace::Shared));
}

Value mlir::pipeline::sharedElement(OpBuilder &b, Location loc,
                                   LLVM::GlobalOp global, Type elem,
                                   Value index) {
  Value base = LLVM::AddressOfOp::create(b, loc, global);
  return LLVM::GEPOp::create(b, loc, base.getType(), elem, base,
                             ArrayRef<LLVM::GEPArg>{index});
}

ArrayRef<StringRef> mlir::pipeline::getLoweringChips() {
  static const StringRef chips[] = {"sm_90a", "sm_100a", "sm_101a",
                                    "sm_103a"};
  return chips;
}

bool mlir::pipeline::isLoweringChip(StringRef chip) {
  return llvm::is_contained(getLoweringChips(), chip);
}

std::string mlir::pipeline::getLoweringChipList() {
  return llvm::join(getLoweringChips(), ", ");
}

std::string mlir::pipeline::getLoweringTargetProblem(StringRef triple,
                                                     StringRef chip) {
  if (!isLoweringChip(chip))
    return ("chip " + chip + ", which the pipeline lowering does not support "
            "(its instructions need one of " + getLoweringChipList() + ")")
        .str();
  if (!llvm::Triple(triple).isArch64Bit())
    return ("triple " + triple + " (32-bit NVPTX), which the pipeline "
            "lowering does not support (TMA copies take 64-bit global "
            "addresses: use nvptx64-nvidia-cuda)")
        .str();
  return "";
}

LogicalResult mlir::pipeline::checkLoweringTargets(Operation *root,
                                                   bool onlyWithPipelineIR) {
  bool ok = true;
  root->walk([&](gpu::GPUModuleOp gpuModule) {
    ArrayAttr targets = gpuModule.getTargetsAttr();
    if (!targets)
      return;
    auto isPipelineOp = [](Operation *op) {
      return isa<PipelineDialect>(op->getDialect()) ? WalkResult::interrupt()
                                                    : WalkResult::advance();
    };
    if (onlyWithPipelineIR && !gpuModule.walk(isPipelineOp).wasInterrupted())
      return;
    for (Attribute target : targets) {
      auto nvvm = dyn_cast<NVVM::NVVMTargetAttr>(target);
      if (!nvvm)
        continue;
      std::string problem =
          getLoweringTargetProblem(nvvm.getTriple(), nvvm.getChip());
      if (problem.empty())
        continue;
      emitError(gpuModule.getLoc())
          << "gpu.module @" << gpuModule.getName() << " targets " << problem;
      ok = false;
    }
  });
  return success(ok);
}

std::string mlir::pipeline::getChipFor(Operation *op,
                                       const PipelineLoweringOptions &options) {
  if (auto gpuModule = op->getParentOfType<gpu::GPUModuleOp>()) {
    if (ArrayAttr targets = gpuModule.getTargetsAttr()) {
      for (Attribute target : targets)
        if (auto nvvm = dyn_cast<NVVM::NVVMTargetAttr>(target))
          return nvvm.getChip().str();
    }
  }
  return options.chip;
}

//===----------------------------------------------------------------------===//
// Barriers
//===----------------------------------------------------------------------===//

Value mlir::pipeline::barrierAt(OpBuilder &b, Location loc, Value base,
                                Value index) {
  auto ptrTy = cast<LLVM::LLVMPointerType>(base.getType());
  return LLVM::GEPOp::create(b, loc, ptrTy, b.getI64Type(), base,
                             ArrayRef<LLVM::GEPArg>{index});
}

Value mlir::pipeline::fullBarrier(OpBuilder &b, Location loc, Value base,
                                  Value index) {
  return barrierAt(b, loc, base, index);
}

Value mlir::pipeline::emptyBarrier(OpBuilder &b, Location loc, Value base,
                                   PipelineType type, Value index) {
  // &full[index] + S, constant part last: a verb that touches both barriers
  // (acquire + arm, wait + release) computes `base + index * 8` once, and
  // ptxas folds `+ 8 * S` into the SASS address immediate. The form
  // `base + sext(index + S) * 8` recomputes the product for each barrier.
  return barrierAt(b, loc, barrierAt(b, loc, base, index),
                   constI32(b, loc, type.getStages()));
}

Value mlir::pipeline::groupArriveCount(OpBuilder &b, Location loc,
                                       CooperativeGroupAttr group,
                                       PipelineType type) {
  int64_t size = group.getSize();
  switch (group.getAgent()) {
  case Agent::Thread:
    return constI32(b, loc, size);
  case Agent::Warp:
    return constI32(b, loc, 32 * size);
  case Agent::ThreadBlock:
    return arith::MulIOp::create(b, loc, constI32(b, loc, size),
                                 blockSize(b, loc));
  case Agent::ThreadBlockCluster: {
    // The static cluster shape when the type has one, else the launch's.
    Value ctas = type.getCluster()
                     ? constI32(b, loc, type.getClusterSize())
                     : Value(NVVM::ClusterDim::create(b, loc, b.getI32Type()));
    Value perCta = arith::MulIOp::create(b, loc, constI32(b, loc, size),
                                         blockSize(b, loc));
    return arith::MulIOp::create(b, loc, perCta, ctas);
  }
  }
  llvm_unreachable("unknown agent");
}

Value mlir::pipeline::emitTryWait(OpBuilder &b, Location loc, Value barrier,
                                  Value phase) {
  return NVVM::MBarrierTryWaitOp::create(b, loc, b.getI1Type(), barrier, phase,
                                         /*ticks=*/Value());
}

void mlir::pipeline::emitWaitLoop(OpBuilder &b, Location loc, Value barrier,
                                  Value phase,
                                  const PipelineLoweringOptions &options,
                                  const WaitSite &site) {
  Value ticks = constI32(b, loc, kTryWaitSuspendTimeHint);
  if (!options.watchdog) {
    // The upstream blocking wait: convert-nvvm-to-llvm turns it into CuTe
    // DSL's loop (`try_wait P, [bar], phase, hint; @P bra DONE; bra LOOP`)
    // with the hint as an immediate. The scf.while below, through the
    // intrinsic, costs a `mov` of the hint and an inverted back edge, which
    // ptxas expands into 2-3 more SASS instructions per wait (measured in
    // docs/benchmarks.md section 3).
    NVVM::MBarrierTryWaitParityOp::create(b, loc, barrier, phase, ticks);
    return;
  }
  // The watchdog measures from the first try and checks after every failed
  // one, so it needs the loop in IR.
  WatchdogGlobals globals = getOrCreateWatchdogGlobals(b, loc);
  // The wait table says what this warp waits on if the dump runs now.
  emitWatchdogWaitMark(b, loc, globals, site, /*waiting=*/true);
  Value start = NVVM::GlobalTimerOp::create(b, loc, b.getI64Type());
  auto loop = scf::WhileOp::create(b, loc, TypeRange{}, ValueRange{});
  {
    OpBuilder::InsertionGuard guard(b);
    b.createBlock(&loop.getBefore());
    Value done = NVVM::MBarrierTryWaitOp::create(b, loc, b.getI1Type(), barrier,
                                                 phase, ticks);
    Value notDone =
        arith::XOrIOp::create(b, loc, done, constI1(b, loc, true));
    emitIf(b, loc, notDone, [&](OpBuilder &nb, Location nl) {
      emitWatchdogCheck(nb, nl, start, globals, options, site);
    });
    scf::ConditionOp::create(b, loc, notDone, ValueRange{});
    b.createBlock(&loop.getAfter());
    scf::YieldOp::create(b, loc);
  }
  emitWatchdogWaitMark(b, loc, globals, site, /*waiting=*/false);
}

void mlir::pipeline::emitWaitUnlessToken(OpBuilder &b, Location loc,
                                         Value barrier, Value phase,
                                         Value token,
                                         const PipelineLoweringOptions &options,
                                         const WaitSite &site) {
  if (!token) {
    emitWaitLoop(b, loc, barrier, phase, options, site);
    return;
  }
  Value mustWait = arith::XOrIOp::create(b, loc, token, constI1(b, loc, true));
  emitIf(b, loc, mustWait, [&](OpBuilder &nb, Location nl) {
    emitWaitLoop(nb, nl, barrier, phase, options, site);
  });
}

void mlir::pipeline::emitAsyncArrive(OpBuilder &b, Location loc, Value barrier,
                                     Value dstRank, bool electOneLane,
                                     bool syncwarpBefore, Operation *verb,
                                     const PipelineLoweringOptions *options,
                                     const LedgerSlot &ledger) {
  auto arrive = [&](OpBuilder &nb, Location nl) {
    // Watchdog on: one arrival in the ledger of the CTA it lands in.
    emitLedgerAdd(nb, nl, ledger, kLedgerArrivals, nb.getI32IntegerAttr(1),
                  dstRank);
    if (!dstRank) {
      NVVM::MBarrierArriveOp::create(nb, nl, nb.getI64Type(), barrier,
                                     /*count=*/Value());
      return;
    }
    // A barrier of another CTA: named by its shared::cluster address (the
    // form whose absence makes a remote arrive land on the wrong CTA), with the
    // default .release.cta semantics, as CuTe DSL and CUTLASS emit
    // (`mbarrier.arrive.shared::cluster.b64`). A
    // consumer releases a stage after its reads of it have completed, so
    // nothing needs a cluster-scope release; `.release.cluster` costs a
    // memory barrier per arrive, measured as 69% of the warp stalls and
    // 0.65x cuBLAS of the 2-CTA multicast Hopper GEMM (docs/gemm.md).
    auto clusterPtr = LLVM::LLVMPointerType::get(
        nb.getContext(),
        static_cast<unsigned>(NVVM::NVVMMemorySpace::SharedCluster));
    Value remote = NVVM::MapaOp::create(nb, nl, clusterPtr, barrier, dstRank);
    NVVM::MBarrierArriveOp::create(nb, nl, Type(), remote, /*count=*/Value(),
                                   NVVM::MemScopeKind::CTA);
  };
  if (!electOneLane) {
    arrive(b, loc);
    return;
  }
  if (syncwarpBefore)
    NVVM::SyncWarpOp::create(b, loc, constI32(b, loc, -1));
  Value elected = options ? electedLane(b, loc, verb, *options)
                          : electOne(b, loc);
  emitIf(b, loc, elected, arrive);
}

void mlir::pipeline::emitUmmaCommit(OpBuilder &b, Location loc, Value barrier,
                                    Value mask, PipelineType type,
                                    Operation *verb,
                                    const PipelineLoweringOptions &options,
                                    const LedgerSlot &ledger) {
  // The CTA group always comes from the type, also without a mask (CuTe DSL
  // 4.8.1 drops cta_group::2 there; docs/Rationale.md section 8).
  auto group = type.getCtaGroup() == 2 ? NVVM::CTAGroupKind::CTA_2
                                       : NVVM::CTAGroupKind::CTA_1;
  emitIf(b, loc, electedLane(b, loc, verb, options), [&](OpBuilder &nb,
                                                          Location nl) {
    NVVM::Tcgen05CommitOp::create(nb, nl, barrier, mask, group);
    // Watchdog on: the commit's arrival (when the MMAs complete) lands in
    // every CTA of the mask, or in this one.
    if (mask)
      emitLedgerAddMasked(nb, nl, ledger, kLedgerArrivals,
                          nb.getI32IntegerAttr(1), mask);
    else
      emitLedgerAdd(nb, nl, ledger, kLedgerArrivals, nb.getI32IntegerAttr(1));
  });
}

//===----------------------------------------------------------------------===//
// Pipeline state
//===----------------------------------------------------------------------===//

StateFields mlir::pipeline::unpackState(OpBuilder &b, Location loc, Value state,
                                        StateType type) {
  int64_t stages = type.getStages();
  if (!type.getSimple()) {
    return {LLVM::ExtractValueOp::create(b, loc, state, ArrayRef<int64_t>{0}),
            LLVM::ExtractValueOp::create(b, loc, state, ArrayRef<int64_t>{1}),
            LLVM::ExtractValueOp::create(b, loc, state, ArrayRef<int64_t>{2})};
  }
  // PipelineStateSimple: one phase_index; index = pi % S, phase = low bit of
  // pi / S. The count is the number of advances from the role's start.
  Value one = constI32(b, loc, 1);
  int64_t start = type.getRole() == Role::Producer ? stages : 0;
  Value count = arith::SubIOp::create(b, loc, state, constI32(b, loc, start));
  if (stages == 1)
    return {constI32(b, loc, 0), arith::AndIOp::create(b, loc, state, one),
            count};
  Value s = constI32(b, loc, stages);
  Value index = arith::RemUIOp::create(b, loc, state, s);
  Value phase = arith::AndIOp::create(
      b, loc, arith::DivUIOp::create(b, loc, state, s), one);
  return {index, phase, count};
}

Value mlir::pipeline::packState(OpBuilder &b, Location loc, Value index,
                                Value phase, Value count) {
  Type i32 = b.getI32Type();
  auto structTy =
      LLVM::LLVMStructType::getLiteral(b.getContext(), {i32, i32, i32});
  Value s = LLVM::PoisonOp::create(b, loc, structTy);
  s = LLVM::InsertValueOp::create(b, loc, s, index, ArrayRef<int64_t>{0});
  s = LLVM::InsertValueOp::create(b, loc, s, phase, ArrayRef<int64_t>{1});
  return LLVM::InsertValueOp::create(b, loc, s, count, ArrayRef<int64_t>{2});
}

Value mlir::pipeline::advanceState(OpBuilder &b, Location loc, Value state,
                                   StateType type, Value amount) {
  int64_t stages = type.getStages();
  Value one = constI32(b, loc, 1);
  if (type.getSimple()) {
    // One stage: the packed value only toggles its parity.
    if (stages == 1 && !amount)
      return arith::XOrIOp::create(b, loc, state, one);
    return arith::AddIOp::create(b, loc, state, amount ? amount : one);
  }
  StateFields f = unpackState(b, loc, state, type);
  Value s = constI32(b, loc, stages);
  Value index, phase;
  if (!amount) {
    // index + 1; on wrap-around index = 0 and the phase flips.
    Value next = arith::AddIOp::create(b, loc, f.index, one);
    Value wrap =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, next, s);
    index = arith::SelectOp::create(b, loc, wrap, constI32(b, loc, 0), next);
    phase = arith::SelectOp::create(
        b, loc, wrap, arith::XOrIOp::create(b, loc, f.phase, one), f.phase);
  } else {
    // index += n; phase ^= (index / S) & 1; index %= S.
    Value next = arith::AddIOp::create(b, loc, f.index, amount);
    Value laps = arith::DivUIOp::create(b, loc, next, s);
    phase = arith::XOrIOp::create(b, loc, f.phase,
                                  arith::AndIOp::create(b, loc, laps, one));
    index = arith::RemUIOp::create(b, loc, next, s);
  }
  Value count =
      arith::AddIOp::create(b, loc, f.count, amount ? amount : one);
  return packState(b, loc, index, phase, count);
}
