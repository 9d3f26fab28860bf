//===- HeldStageChecks.cpp - stages held at once; named-barrier branches --===//
//
// Check 18, stages held at once: a role that waits on a stage of a ring of
// S stages before it released the stage it waited on S waits earlier holds
// S + 1 stages. Its wait needs the producer to fill a stage whose previous
// fill the role itself has not released, so the producer's acquire of it
// never completes: a deadlock, whatever the trip counts (the release
// "sequenced after work that needs the next fill", FlashAttention's
// release-the-previous-stage idiom on a ring of one stage). The same holds
// for a producer that acquires S + 1 stages before committing the first
// (not on TMA load rings, whose commit is a no-op).
//
// How: per pipeline and side, the role's verbs are walked in program order
// from the function's body (each branch of an scf.if from the count before
// it, each scf.for body once from the count at its entry), counting
// wait/release (acquire/commit) as +1/-1. A wait that brings the count past
// the ring's stages is refused. A loop body or an if whose branches change
// the count differently (a lagged release under `k > 0`), a count below
// zero (a stage released by another role), or verbs inside other region ops
// end the walk: nothing is decided there.
//
// Check 9, third part: a named barrier reached, on the two branches of one
// scf.if that is not a role split (a condition on kernel arguments or the
// loop variable), with `sync` on one and only `arrive` on the other, inside
// a loop. A warp taking the arrive-only branch does not wait for the
// generation to complete; on the next iteration it arrives again, on the
// same generation, while a partner still waits in its `sync`: the counts are
// off by one warp-set per iteration (an early-exit path of a compute role,
// vllm's MLA kernel). Roles that only arrive (a producer/consumer hand-over)
// use one verb on every path and are not concerned.
//
// With it, a cluster barrier inside a warp-role branch: `barrier.cluster`
// has no thread mask, it completes once every non-exited thread of the
// cluster arrived. Warps outside the branch never arrive; when they then
// block at a CTA or cluster barrier after the role split (where the roles
// join), neither side proceeds (triton's warp-specialized partitions).
//
//===----------------------------------------------------------------------===//

#include "ProtocolChecks.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

#include "llvm/ADT/SetVector.h"

#include <map>

using namespace mlir;
using namespace mlir::pipeline;
using namespace mlir::pipeline::protocol;

namespace {

struct HeldWalker {
  Value pipe;
  bool producerSide;
  int64_t stages;
  bool failed = false;
  // The first op counted in the current window of held stages (for a note).
  SmallVector<Operation *> heldOps;

  bool mentionsPipe(Operation *root) {
    bool found = false;
    root->walk([&](Operation *op) {
      if (auto ref = getVerb(op))
        if (ref->pipeline == pipe)
          found = true;
    });
    return found;
  }

  /// Net change of the held count over `block`, or nullopt when undecided.
  std::optional<int64_t> walkBlock(Block &block, int64_t held) {
    int64_t start = held;
    for (Operation &op : block) {
      if (failed)
        return std::nullopt;
      if (auto ref = getVerb(&op)) {
        if (ref->pipeline != pipe || !ref->state)
          continue;
        Verb v = ref->verb;
        bool take = producerSide ? v == Verb::Acquire : v == Verb::Wait;
        bool give = producerSide ? v == Verb::Commit : v == Verb::Release;
        if (take) {
          ++held;
          heldOps.push_back(&op);
          if (held > stages) {
            report(&op, held);
            return std::nullopt;
          }
        } else if (give) {
          if (--held < 0)
            return std::nullopt;
          if (!heldOps.empty())
            heldOps.erase(heldOps.begin());
        }
        continue;
      }
      if (auto forOp = dyn_cast<scf::ForOp>(op)) {
        SmallVector<Operation *> saved = heldOps;
        auto net = walkBlock(*forOp.getBody(), held);
        if (!net || *net != 0)
          return std::nullopt;
        heldOps = saved;
        continue;
      }
      if (auto ifOp = dyn_cast<scf::IfOp>(op)) {
        SmallVector<Operation *> saved = heldOps;
        auto thenNet = walkBlock(ifOp.getThenRegion().front(), held);
        if (!thenNet)
          return std::nullopt;
        heldOps = saved;
        std::optional<int64_t> elseNet = 0;
        if (!ifOp.getElseRegion().empty())
          elseNet = walkBlock(ifOp.getElseRegion().front(), held);
        if (!elseNet || *elseNet != *thenNet)
          return std::nullopt;
        if (*thenNet != 0)
          return std::nullopt; // which ops are held after it is not followed
        heldOps = saved;
        continue;
      }
      if (op.getNumRegions() && mentionsPipe(&op))
        return std::nullopt;
    }
    return held - start;
  }

  void report(Operation *op, int64_t held) {
    failed = true;
    StringRef take = producerSide ? "producer_acquire" : "consumer_wait";
    StringRef give = producerSide ? "producer_commit" : "consumer_release";
    StringRef other = producerSide ? "consumer" : "producer";
    StringRef otherVerb = producerSide ? "consumer_wait" : "producer_acquire";
    InFlightDiagnostic diag = op->emitError();
    diag << describe(pipe) << ": this " << take << " makes the role hold "
         << held << " stages at once (each " << take << " not yet followed by its "
         << give << "), but the ring has " << protocol::stages(stages)
         << " (rule: a role holds at most num_stages stages of a ring): it "
         << "waits for the " << other << " to pass a stage whose previous "
         << "round this role still holds, and the " << other << "'s "
         << otherVerb << " of that stage waits for this role's " << give
         << ": a deadlock. Call " << give << " on the oldest held stage before this "
         << take << ", or create the pipeline with num_stages >= " << held;
    if (!heldOps.empty() && heldOps.front() != op)
      diag.attachNote(heldOps.front()->getLoc())
          << "the oldest stage still held was taken here";
    noteCreate(diag, pipe);
  }
};

LogicalResult checkHeldStagesImpl(FunctionOpInterface fn) {
  llvm::SetVector<Value> pipes;
  fn->walk([&](Operation *op) {
    if (auto ref = getVerb(op))
      if (ref->state && isa<PipelineType>(ref->pipeline.getType()))
        pipes.insert(ref->pipeline);
  });
  if (pipes.empty() || fn.getFunctionBody().empty())
    return success();
  bool failedAny = false;
  for (Value pipe : pipes) {
    PipelineType type = getPipelineType(pipe);
    if (type.getKind() == PipelineKind::TmaStore)
      continue;
    for (bool producerSide : {false, true}) {
      // A TMA load ring's full barrier completes by bytes (its commit is a
      // no-op): an acquire holds nothing the producer must give back.
      if (producerSide && isTmaLoadKind(type.getKind()))
        continue;
      HeldWalker walker{pipe, producerSide, type.getStages()};
      (void)walker.walkBlock(fn.getFunctionBody().front(), 0);
      failedAny |= walker.failed;
    }
  }
  return failure(failedAny);
}

struct IdVerbs {
  Operation *firstSync = nullptr;
  Operation *firstArrive = nullptr;
};

std::map<int64_t, IdVerbs> collectIds(Region &region) {
  std::map<int64_t, IdVerbs> ids;
  region.walk([&](Operation *op) {
    if (auto sync = dyn_cast<NamedBarrierSyncOp>(op)) {
      if (sync.getIndex())
        return;
      IdVerbs &v = ids[static_cast<int64_t>(sync.getBarrierId())];
      if (!v.firstSync)
        v.firstSync = op;
    } else if (auto arrive = dyn_cast<NamedBarrierArriveOp>(op)) {
      if (arrive.getIndex())
        return;
      IdVerbs &v = ids[static_cast<int64_t>(arrive.getBarrierId())];
      if (!v.firstArrive)
        v.firstArrive = op;
    }
  });
  return ids;
}

LogicalResult checkBranchVerbsImpl(FunctionOpInterface fn) {
  bool failedAny = false;
  fn->walk([&](scf::IfOp ifOp) {
    if (ifOp.getElseRegion().empty() || !ifOp->getParentOfType<scf::ForOp>())
      return;
    if (!isUniformCondition(ifOp.getCondition()) &&
        !isLoopVariableCondition(ifOp.getCondition()))
      return;
    auto thenIds = collectIds(ifOp.getThenRegion());
    auto elseIds = collectIds(ifOp.getElseRegion());
    auto compare = [&](std::map<int64_t, IdVerbs> &a,
                       std::map<int64_t, IdVerbs> &b) {
      for (auto &[id, verbs] : a) {
        if (!verbs.firstArrive || verbs.firstSync)
          continue;
        auto it = b.find(id);
        if (it == b.end() || !it->second.firstSync)
          continue;
        InFlightDiagnostic diag = verbs.firstArrive->emitError();
        diag << "named barrier " << id << ": this branch only arrives on it "
             << "(arrive) where the other branch of the same if syncs on it "
             << "(arrive_and_wait / sync), inside a loop (rule: a role "
             << "reaches a named barrier with the same verb on every path): "
             << "a warp taking this branch does not wait for the generation "
             << "to complete, loops around and arrives again on the same "
             << "generation while its partners still wait, so the barrier "
             << "completes with the wrong warps; call arrive_and_wait here as "
             << "on the other branch";
        diag.attachNote(it->second.firstSync->getLoc())
            << "the other branch syncs on it here";
        failedAny = true;
      }
    };
    compare(thenIds, elseIds);
    compare(elseIds, thenIds);
  });
  return failure(failedAny);
}

bool isBlockingAfterJoin(Operation *op) {
  if (isa<gpu::BarrierOp, NVVM::Barrier0Op, NVVM::BarrierOp, NamedBarrierSyncOp>(op))
    return true;
  return op->getName().getStringRef() == "nvvm.cluster.wait";
}

LogicalResult checkClusterBarrierInRoleImpl(FunctionOpInterface fn) {
  bool failedAny = false;
  fn->walk([&](Operation *op) {
    StringRef name = op->getName().getStringRef();
    if (name != "nvvm.cluster.arrive" && name != "nvvm.cluster.arrive.relaxed")
      return;
    // The outermost thread split around the arrive.
    scf::IfOp split;
    for (Operation *p = op->getParentOp(); p && p != fn.getOperation();
         p = p->getParentOp())
      if (auto ifOp = dyn_cast<scf::IfOp>(p))
        if (isThreadSplit(ifOp) && !isGuardIf(ifOp))
          split = ifOp;
    if (!split)
      return;
    // A blocking barrier the other warps reach after the split.
    Operation *blocking = nullptr;
    for (Operation *at = split; at && at != fn.getOperation() && !blocking;
         at = at->getParentOp()) {
      for (Operation *next = at->getNextNode(); next && !blocking;
           next = next->getNextNode()) {
        if (isBlockingAfterJoin(next))
          blocking = next;
        else
          next->walk([&](Operation *inner) {
            if (!blocking && isBlockingAfterJoin(inner))
              blocking = inner;
          });
      }
    }
    if (!blocking)
      return;
    InFlightDiagnostic diag = op->emitError();
    diag << "cluster barrier inside a warp-role branch (rule: barrier.cluster "
         << "has no thread mask, it completes when every non-exited thread of "
         << "the cluster arrived): the warps outside this branch never arrive "
         << "on it and do not exit, they wait at a barrier after the roles "
         << "join, so neither side proceeds; move the cluster barrier after "
         << "the role branches, where every warp reaches it";
    diag.attachNote(split.getLoc()) << "the warp-role branch starts here";
    diag.attachNote(blocking->getLoc())
        << "the other warps wait here without arriving on the cluster barrier";
    failedAny = true;
  });
  return failure(failedAny);
}

} // namespace

LogicalResult protocol::checkHeldStages(FunctionOpInterface fn) {
  return checkHeldStagesImpl(fn);
}

LogicalResult protocol::checkNamedBarrierBranchVerbs(FunctionOpInterface fn) {
  bool failedAny = checkBranchVerbsImpl(fn).failed();
  failedAny |= checkClusterBarrierInRoleImpl(fn).failed();
  return failure(failedAny);
}
