//===- BarrierHandleChecks.cpp - raw arrives on a pipeline's barrier ------===//
//
// Property 13 of pipeline-verify-protocol: `pipeline.producer.barrier`
// (`producer_get_barrier(state)`) hands out the address of a stage's full
// barrier so that a copy issued by other means can complete its bytes on it.
// The pipeline's own verbs already give every phase of that barrier its full
// arrival count: a TMA producer's `producer.acquire` arrives with
// `arrive.expect_tx`, an AsyncThread / cp.async / UMMA producer's
// `producer.commit` arrives (or commits). An arrive of the user's own on the
// handle (`mbarrier.arrive[.expect_tx|.nocomplete]`, `arrive_drop`,
// `cp.async.mbarrier.arrive`, `tcgen05.commit`, possibly through `mapa` to
// the peer CTA's copy) is therefore one arrival too many per phase: the
// phase completes before the stage is full, or the pending count underflows
// into the next phase (cutlass#2364). A user who wants the
// arrive instead of the verb drops the verb, which check 1 reports; so the
// rule is simply that a pipeline's barriers are driven by its verbs.
//
// `mbarrier.init` / `inval` on the handle re-initialize a barrier that
// pipeline.create initialized (its phase restarts at 0 under the waiters):
// reported the same way. Other uses (a copy's completion barrier, a
// `clusterlaunchcontrol.try_cancel`, a wait or an `expect_tx` without an
// arrival) are left alone; the Python builders warn about every barrier
// driven by hand (UncheckedBarrierWarning).
//
// Property 13, second part (the other half of class 6): a `pipeline.create {defer_sync}`
// initializes its barriers from one thread and leaves the fence-and-sync
// that makes them visible to `pipeline.init_arrive` / `pipeline.init_wait`.
// A verb that no such sync (init_wait, a CTA or cluster barrier, or a later
// create without defer_sync, which ends with one) dominates may arrive on
// or wait at a barrier whose init this thread has not seen: the arrive is
// lost or the init wipes it, and the phase never completes. Functions that
// call others are skipped (the sync may be in the callee).
//
//===----------------------------------------------------------------------===//

#include "ProtocolChecks.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Interfaces/CallInterfaces.h"

#include "llvm/ADT/StringSwitch.h"

using namespace mlir;
using namespace mlir::pipeline;
using namespace mlir::pipeline::protocol;

namespace {
enum class RawUse { None, Arrive, Init };
} // namespace

static RawUse classifyRawOp(Operation *op) {
  return llvm::StringSwitch<RawUse>(op->getName().getStringRef())
      .Cases("nvvm.mbarrier.arrive", "nvvm.mbarrier.arrive.shared",
             "nvvm.mbarrier.arrive.expect_tx",
             "nvvm.mbarrier.arrive.expect_tx.shared", RawUse::Arrive)
      .Cases("nvvm.mbarrier.arrive.nocomplete",
             "nvvm.mbarrier.arrive.nocomplete.shared",
             "nvvm.mbarrier.arrive_drop", "nvvm.mbarrier.arrive_drop.expect_tx",
             "nvvm.mbarrier.arrive_drop.nocomplete", RawUse::Arrive)
      .Cases("nvvm.cp.async.mbarrier.arrive",
             "nvvm.cp.async.mbarrier.arrive.shared", "nvvm.tcgen05.commit",
             RawUse::Arrive)
      .Cases("nvvm.mbarrier.init", "nvvm.mbarrier.init.shared",
             "nvvm.mbarrier.inval", "nvvm.mbarrier.inval.shared", RawUse::Init)
      .Default(RawUse::None);
}

/// The producer.barrier whose handle `v` is, through address-space and
/// pointer casts and `mapa` (the same barrier in a peer CTA).
static ProducerBarrierOp getBarrierHandle(Value v) {
  for (int steps = 0; steps < 16 && v; ++steps) {
    Operation *def = v.getDefiningOp();
    if (!def)
      return {};
    if (auto bar = dyn_cast<ProducerBarrierOp>(def))
      return bar;
    StringRef name = def->getName().getStringRef();
    if (isa<LLVM::AddrSpaceCastOp, LLVM::BitcastOp>(def) ||
        name == "nvvm.mapa" || name == "builtin.unrealized_conversion_cast") {
      v = def->getOperand(0);
      continue;
    }
    return {};
  }
  return {};
}

LogicalResult protocol::checkBarrierHandles(FunctionOpInterface fn) {
  bool failed = false;
  fn->walk([&](Operation *op) {
    RawUse use = classifyRawOp(op);
    if (use == RawUse::None || op->getNumOperands() == 0)
      return;
    // Every one of these ops takes the barrier address first.
    ProducerBarrierOp handle = getBarrierHandle(op->getOperand(0));
    if (!handle)
      return;
    Value pipe = handle.getPipeline();
    PipelineType type = getPipelineType(pipe);
    // Raw ops built from Python carry no location of their own (only the
    // builders attach the user's line); the handle's op has one.
    bool unknownLoc = isa<UnknownLoc>(op->getLoc());
    InFlightDiagnostic diag =
        emitError(unknownLoc ? handle->getLoc() : op->getLoc());
    diag << describe(pipe) << ": " << op->getName()
         << " on the stage's full barrier from producer.barrier (rule: a "
            "pipeline's barriers are driven only by its verbs): ";
    if (use == RawUse::Init)
      diag << "pipeline.create already initialized it; initializing it again "
              "restarts its phase under the waiters (drop this op)";
    else if (isTmaLoadKind(type.getKind()))
      diag << "producer.acquire already arrives on it once per phase "
              "(arrive.expect_tx), so this is a second arrival per phase: "
              "the phase completes before the stage's bytes land, or the "
              "count underflows into the next phase (drop the arrive: the "
              "copies complete the stage; for more bytes pass extra_tx to "
              "producer.acquire)";
    else
      diag << "producer.commit already gives each phase its arrivals, so "
              "this is one arrival too many per phase: the phase completes "
              "before the stage is full, or the count underflows into the "
              "next phase (drop the arrive and publish the stage with "
              "producer.commit)";
    if (!unknownLoc)
      diag.attachNote(handle->getLoc()) << "the barrier handle is taken here";
    noteCreate(diag, pipe);
    failed = true;
  });
  return failure(failed);
}

/// True when `op` makes a deferred create's barrier inits visible to the
/// threads that pass it.
static bool isPostInitSync(Operation *op) {
  if (isa<InitWaitOp>(op))
    return true;
  if (auto create = dyn_cast<CreateOp>(op))
    return !create.getDeferSync();
  StringRef name = op->getName().getStringRef();
  if (name == "nvvm.barrier")
    return op->getNumOperands() == 0; // bar.sync 0 with every thread
  return name == "gpu.barrier" || name == "nvvm.barrier0" ||
         name == "nvvm.cluster.wait";
}

LogicalResult protocol::checkDeferredInit(FunctionOpInterface fn,
                                          DominanceInfo &domInfo) {
  SmallVector<CreateOp> deferred;
  SmallVector<Operation *> syncs;
  bool calls = false;
  fn->walk([&](Operation *op) {
    if (auto create = dyn_cast<CreateOp>(op); create && create.getDeferSync())
      deferred.push_back(create);
    if (isPostInitSync(op))
      syncs.push_back(op);
    if (isa<CallOpInterface>(op))
      calls = true;
  });
  if (deferred.empty() || calls)
    return success();

  bool failed = false;
  for (CreateOp create : deferred) {
    Value pipe = create.getResult();
    // The first uncovered use in program order: one report per pipeline.
    Operation *first = nullptr;
    fn->walk([&](Operation *op) {
      if (first)
        return WalkResult::interrupt();
      std::optional<VerbRef> verb = getVerb(op);
      if (!verb || verb->pipeline != pipe)
        return WalkResult::advance();
      bool covered = llvm::any_of(syncs, [&](Operation *sync) {
        return sync != create.getOperation() &&
               domInfo.properlyDominates(create.getOperation(), sync) &&
               domInfo.properlyDominates(sync, op);
      });
      if (!covered)
        first = op;
      return WalkResult::advance();
    });
    if (!first)
      continue;
    InFlightDiagnostic diag = first->emitError();
    diag << describe(pipe) << ": " << first->getName()
         << " uses a pipeline created with defer_sync before any "
            "pipeline.init_wait (rule: a deferred create's barriers are "
            "initialized by one thread and become visible to the others only "
            "through the post-init sync): this thread may arrive on or wait "
            "at a barrier whose init it has not seen, so the arrive is lost "
            "or the init wipes it and the phase never completes (call "
            "pipeline.init_arrive and pipeline.init_wait after the creates "
            "and before the first use, or drop defer_sync)";
    noteCreate(diag, pipe);
    failed = true;
  }
  return failure(failed);
}

LogicalResult protocol::checkInitSyncPairs(FunctionOpInterface fn) {
  SmallVector<Operation *> syncs;
  fn->walk([&](Operation *op) {
    if (auto a = dyn_cast<InitArriveOp>(op); a && a.getClusterSize() > 1)
      syncs.push_back(op);
    if (auto w = dyn_cast<InitWaitOp>(op); w && w.getClusterSize() > 1)
      syncs.push_back(op);
  });
  // Straight-line code only: a pair split across branches or loops is not
  // decided here.
  if (syncs.empty() || llvm::any_of(syncs, [&](Operation *op) {
        return op->getBlock() != syncs.front()->getBlock();
      }))
    return success();
  static constexpr const char *kFix =
      "(call pipeline.init_arrive once, then pipeline.init_wait once, after "
      "the pipelines are created and before their first use)";
  Operation *pending = nullptr;
  for (Operation *op : syncs) {
    if (isa<InitArriveOp>(op)) {
      if (pending) {
        InFlightDiagnostic diag = op->emitError();
        diag << "pipeline.init_arrive a second time before pipeline.init_wait "
                "(rule: one cluster arrive, then one cluster wait): the "
                "extra arrive counts toward the next phase of the cluster "
                "barrier, so a later cluster barrier completes before every "
                "CTA reached it "
             << kFix;
        diag.attachNote(pending->getLoc()) << "the first pipeline.init_arrive";
        return failure();
      }
      pending = op;
      continue;
    }
    if (!pending) {
      op->emitError()
          << "pipeline.init_wait with no pipeline.init_arrive before it "
             "(rule: one cluster arrive, then one cluster wait): this "
             "thread never arrived on the cluster barrier it waits for, so "
             "the wait hangs or completes on a phase that started without "
             "it, and a peer CTA's barriers may still be uninitialized when "
             "it multicasts into them "
          << kFix;
      return failure();
    }
    pending = nullptr;
  }
  return success();
}
