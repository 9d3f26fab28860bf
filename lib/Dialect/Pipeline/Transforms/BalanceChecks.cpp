//===- BalanceChecks.cpp - verbs balanced per loop body and role ---------===//
//
// Property 1 of pipeline-verify-protocol: every producer.acquire has a
// producer.commit and every consumer.wait a consumer.release, per loop body
// and per role (property 2, state threading, is StateThreadingChecks.cpp).
//
// Counting is structural. An scf.if whose branches do the same thing counts
// once; a one-sided scf.if (an elect guard around a commit) counts its then
// branch; branches that differ (warp roles) add up. A nested loop that is
// balanced per iteration adds nothing; an unbalanced one adds its count
// times its constant trip count, or makes the count unknown (and unchecked).
//
// A release left to another role: where one role branch waits on stages
// and releases none, and the other waits on as many and releases them after
// a named barrier both meet (the first arrives or syncs after its last wait,
// the second syncs before its first release, one id and thread count, the
// count being both roles' threads), the second role's releases end both
// holds and the pair counts once (an FA3-style hand-off; whether a read of
// the first role is still in flight at that barrier is check 8's). The same
// for two roles with a loop each over the same range: the loop that waits
// and does not release, and the other role's loop that releases as many
// per iteration after the barrier, are not reported.
//
// Loops that only hold one half of a pair are legal when the other half is
// elsewhere in the role: the CUTLASS mainloop waits on a few stages in a
// prologue loop and releases them in an epilogue loop. Those are checked at
// the level of the role, when trip counts are constant.
//
//===----------------------------------------------------------------------===//

#include "ProtocolChecks.h"

#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"
#include <algorithm>

using namespace mlir;
using namespace mlir::pipeline;
using namespace mlir::pipeline::protocol;

std::optional<std::pair<PairKey, bool>>
protocol::classifyPairVerb(Operation *op) {
  std::optional<VerbRef> verb = getVerb(op);
  if (!verb)
    return std::nullopt;
  PipelineKind kind = getPipelineType(verb->pipeline).getKind();
  switch (verb->verb) {
  case Verb::Acquire:
  case Verb::Commit:
    // TMA commits are no-ops (the copies complete the stage: checked by the
    // TX-bytes property); the CLC producer's inherited commit is a known
    // peer bug, so its use is not demanded either.
    if (isTmaLoadKind(kind) || kind == PipelineKind::ClcFetchAsync)
      return std::nullopt;
    return std::make_pair(PairKey{verb->pipeline, kProducerSide},
                          verb->verb == Verb::Acquire);
  case Verb::OrderWait:
  case Verb::OrderArrive:
    return std::make_pair(PairKey{verb->pipeline, kProducerSide},
                          verb->verb == Verb::OrderWait);
  case Verb::Wait:
  case Verb::Release:
    return std::make_pair(PairKey{verb->pipeline, kConsumerSide},
                          verb->verb == Verb::Wait);
  default:
    return std::nullopt;
  }
}

PairWords protocol::wordsFor(const PairKey &key) {
  if (key.second == kConsumerSide)
    return {"consumer.wait", "consumer.release", "waits on", "releases"};
  if (getPipelineType(key.first).getKind() == PipelineKind::Order)
    return {"order.wait", "order.arrive", "waits for its turn on", "hands on"};
  return {"producer.acquire", "producer.commit", "acquires", "commits"};
}

std::string protocol::stages(int64_t n) {
  return std::to_string(n) + (n == 1 ? " stage" : " stages");
}

namespace {

struct PairCount {
  int64_t first = 0;
  int64_t second = 0;
  bool unknown = false;
  SmallVector<Operation *> firstOps;
  SmallVector<Operation *> secondOps;

  bool balanced() const { return !unknown && first == second; }
  void add(const PairCount &other, int64_t times = 1) {
    first += times * other.first;
    second += times * other.second;
    unknown |= other.unknown;
    firstOps.append(other.firstOps);
    secondOps.append(other.secondOps);
  }
};

using Summary = llvm::MapVector<PairKey, PairCount>;

Summary summarize(Block &block);

/// An scf.if: equal branches count once, a one-sided if counts its then
/// branch, different branches (roles) add up; branches that differ on a
/// condition that is not a thread split (kernel arguments, loop variables)
/// make the count unknown.
void addIf(Summary &into, scf::IfOp ifOp) {
  Summary thenSum = summarize(ifOp.getThenRegion().front());
  bool noElse = ifOp.getElseRegion().empty() ||
                isEmptyBlock(&ifOp.getElseRegion().front());
  Summary elseSum;
  if (!noElse)
    elseSum = summarize(ifOp.getElseRegion().front());
  llvm::SetVector<PairKey> keys;
  for (auto &entry : thenSum)
    keys.insert(entry.first);
  for (auto &entry : elseSum)
    keys.insert(entry.first);
  for (const PairKey &key : keys) {
    PairCount t = thenSum.lookup(key), e = elseSum.lookup(key);
    PairCount &dst = into[key];
    if (t.first - t.second != e.first - e.second &&
        (isUniformCondition(ifOp.getCondition()) ||
         isLoopVariableCondition(ifOp.getCondition()))) {
      // Not a role split: which branch runs is data (reported by
      // checkUniformBranches) or the iteration (a peeled first or last
      // iteration): not counted.
      dst.unknown = true;
      dst.firstOps.append(t.firstOps);
      dst.firstOps.append(e.firstOps);
      dst.secondOps.append(t.secondOps);
      dst.secondOps.append(e.secondOps);
    } else if (noElse) {
      dst.add(t);
    } else if (t.first == e.first && t.second == e.second) {
      dst.first += t.first;
      dst.second += t.second;
      dst.unknown |= t.unknown || e.unknown;
      dst.firstOps.append(t.firstOps);
      dst.firstOps.append(e.firstOps);
      dst.secondOps.append(t.secondOps);
      dst.secondOps.append(e.secondOps);
    } else if (key.second == kConsumerSide && !t.unknown && !e.unknown &&
               ((t.second == 0 && t.first > 0 && e.first == t.first &&
                 e.second == e.first && !noElse &&
                 handsOverAtBarrier(ifOp.getThenRegion().front(),
                           ifOp.getElseRegion().front(), key.first, ifOp)) ||
                (e.second == 0 && e.first > 0 && t.first == e.first &&
                 t.second == t.first && !noElse &&
                 handsOverAtBarrier(ifOp.getElseRegion().front(),
                           ifOp.getThenRegion().front(), key.first, ifOp)))) {
      // One role hands its waits' release to the other, which waits on and
      // releases the same stages after a barrier both meet: those releases
      // end both roles' holds (the arrive count is one role's).
      dst.add(t.second ? t : e);
      for (Operation *op : (t.second ? e : t).firstOps)
        dst.firstOps.push_back(op);
    } else {
      dst.add(t);
      dst.add(e);
    }
  }
}

/// A loop adds nothing when balanced per iteration, its trip count times its
/// body otherwise (unknown without a constant trip count).
void addLoop(Summary &into, Summary body, std::optional<int64_t> trips) {
  for (auto &[key, count] : body) {
    if (count.balanced())
      continue;
    PairCount &dst = into[key];
    if (trips) {
      dst.add(count, *trips);
    } else {
      dst.unknown = true;
      dst.firstOps.append(count.firstOps);
      dst.secondOps.append(count.secondOps);
    }
  }
}

Summary summarize(Block &block) {
  Summary sum;
  for (Operation &op : block) {
    if (auto pair = classifyPairVerb(&op)) {
      PairCount &count = sum[pair->first];
      if (pair->second) {
        ++count.first;
        count.firstOps.push_back(&op);
      } else {
        ++count.second;
        count.secondOps.push_back(&op);
      }
      continue;
    }
    if (auto ifOp = dyn_cast<scf::IfOp>(&op)) {
      addIf(sum, ifOp);
      continue;
    }
    if (auto loop = dyn_cast<scf::ForOp>(&op)) {
      addLoop(sum, summarize(*loop.getBody()), getConstantTripCount(loop));
      continue;
    }
    // Any other region op: a loop of unknown trip count if it is loop-like,
    // straight-line code otherwise (execute_region, ...).
    bool loopLike = isa<LoopLikeOpInterface>(&op);
    for (Region &region : op.getRegions())
      for (Block &inner : region) {
        if (loopLike)
          addLoop(sum, summarize(inner), std::nullopt);
        else
          for (auto &[key, count] : summarize(inner))
            sum[key].add(count);
      }
  }
  return sum;
}

/// Reports an unbalanced pair of `unit` ("loop body", "role") on the op in
/// excess, with notes on the other half and on `where`.
void reportImbalance(const PairKey &key, const PairCount &count, StringRef unit,
                     Operation *where, StringRef whereNote) {
  PairWords w = wordsFor(key);
  bool missingSecond = count.first > count.second;
  Operation *culprit =
      missingSecond ? count.firstOps.back() : count.secondOps.back();
  InFlightDiagnostic diag = culprit->emitError();
  diag << describe(key.first) << ": " << unit << " " << w.firstDoes << " "
       << stages(count.first) << " but " << w.secondDoes << " " << count.second
       << "; every pipeline." << w.firstVerb << " needs a pipeline."
       << w.secondVerb << " on the same state";
  if (missingSecond)
    diag << " (add the missing pipeline." << w.secondVerb
         << " before the state advances)";
  else
    diag << " (remove the extra pipeline." << w.secondVerb
         << ": it signals a stage that no " << w.firstVerb << " took)";
  for (Operation *other : missingSecond ? count.secondOps : count.firstOps)
    diag.attachNote(other->getLoc())
        << "pipeline." << (missingSecond ? w.secondVerb : w.firstVerb)
        << " here";
  if (where)
    diag.attachNote(where->getLoc()) << whereNote;
}

/// True when some op of `block` (at any depth) is the half of `key` that is
/// missing from a one-sided loop.
bool hasHalfIn(Block *block, const PairKey &key, bool wantFirst) {
  bool found = false;
  block->walk([&](Operation *op) {
    if (auto pair = classifyPairVerb(op);
        pair && pair->first == key && pair->second == wantFirst)
      found = true;
  });
  return found;
}

/// An scf.if whose condition is the same for every thread (a kernel
/// argument, not a warp-role split) must do the same with each pipeline in
/// both branches: a consumer.release in the then branch only leaves the
/// stage held whenever the condition is false.
bool checkUniformBranches(scf::IfOp ifOp, llvm::DenseSet<PairKey> &reported) {
  Summary thenSum = summarize(ifOp.getThenRegion().front());
  Summary elseSum;
  if (!ifOp.getElseRegion().empty())
    elseSum = summarize(ifOp.getElseRegion().front());
  llvm::SetVector<PairKey> keys;
  for (auto &entry : thenSum)
    keys.insert(entry.first);
  for (auto &entry : elseSum)
    keys.insert(entry.first);
  bool failed = false;
  for (const PairKey &key : keys) {
    PairCount t = thenSum.lookup(key), e = elseSum.lookup(key);
    if (t.unknown || e.unknown || reported.contains(key) ||
        t.first - t.second == e.first - e.second)
      continue;
    PairWords w = wordsFor(key);
    // The branch that leaves a pair open, and which half it has in excess.
    bool thenOpen = t.first - t.second != 0;
    const PairCount &open = thenOpen ? t : e;
    bool excessFirst = open.first > open.second;
    Operation *culprit =
        excessFirst ? open.firstOps.back() : open.secondOps.back();
    StringRef verb = excessFirst ? w.firstVerb : w.secondVerb;
    StringRef other = thenOpen ? "else" : "then";
    InFlightDiagnostic diag = culprit->emitError();
    diag << describe(key.first) << ": pipeline." << verb << " in the "
         << (thenOpen ? "then" : "else")
         << " branch of an scf.if has no match in the " << other
         << " branch; the condition is the same for every thread (not a "
            "warp-role split), so whenever the "
         << other << " branch runs that pipeline." << verb
         << " does not happen and the pipeline deadlocks (do it in both "
            "branches, or move it out of the scf.if)";
    diag.attachNote(ifOp.getLoc()) << "branches on a uniform condition here";
    reported.insert(key);
    failed = true;
  }
  return failed;
}

/// A loop of one role whose body waits on a consumer side's stages and
/// releases none, and a loop of another role over the same range (or one
/// that differs by an explicit peel: relateLoops) whose
/// body releases as many (waiting on them too, or not), ordered in each
/// iteration by one named barrier (handsOver): the second loop's releases
/// end both roles' holds. `loop`, with `count` its body's, is either one.
bool handedAcrossLoops(scf::ForOp loop, const PairKey &key,
                       const PairCount &count) {
  if (key.second != kConsumerSide || count.unknown)
    return false;
  bool hands = count.first > 0 && count.second == 0;
  bool releasesOnly = count.first == 0 && count.second > 0;
  if (!hands && !releasesOnly)
    return false;
  auto fn = loop->getParentOfType<FunctionOpInterface>();
  if (!fn)
    return false;
  Block *role = getRoleBlock(loop);
  bool found = false;
  fn->walk([&](scf::ForOp other) {
    if (found || other == loop || other->isAncestor(loop) ||
        loop->isAncestor(other) || getRoleBlock(other) == role)
      return;
    PairCount oc = summarize(*other.getBody()).lookup(key);
    if (oc.unknown)
      return;
    Operation *barrier = nullptr;
    if (hands && oc.second == count.first &&
        (oc.first == 0 || oc.first == oc.second))
      found = handsOverAtBarrier(*loop.getBody(), *other.getBody(), key.first,
                                 loop, &barrier);
    else if (releasesOnly && oc.first == count.second && oc.second == 0)
      found = handsOverAtBarrier(*other.getBody(), *loop.getBody(), key.first,
                                 loop, &barrier);
    // The same range, or one that differs by a peel made explicit before
    // the later loop (the peeled iterations meet the barrier there); a
    // peel not followed is said, not refused.
    if (!found)
      return;
    LoopRelation rel = relateLoops(loop, other, barrier);
    found = rel.kind != LoopRelation::Unrelated;
    if (rel.kind == LoopRelation::NotProven && hands)
      warnHandOverNotProven(loop, other, key.first);
  });
  return found;
}

} // namespace

LogicalResult protocol::checkBalance(FunctionOpInterface fn) {
  bool failed = false;
  llvm::DenseSet<PairKey> reported;

  // Branches on a condition that does not split threads: both decided.
  fn->walk([&](scf::IfOp ifOp) {
    if (isUniformCondition(ifOp.getCondition()))
      failed |= checkUniformBranches(ifOp, reported);
  });

  // Loop bodies, innermost first.
  fn->walk([&](scf::ForOp loop) {
    Summary body = summarize(*loop.getBody());
    for (auto &[key, count] : body) {
      if (count.balanced() || reported.contains(key))
        continue;
      int64_t numStages = getPipelineType(key.first).getStages();
      bool oneSided = count.first == 0 || count.second == 0;
      if (oneSided &&
          hasHalfIn(getRoleBlock(loop), key, /*wantFirst=*/count.first == 0)) {
        // Prologue / epilogue loop: the other half is elsewhere in the
        // role. It can still hold more stages than exist.
        std::optional<int64_t> trips = getConstantTripCount(loop);
        int64_t held = trips ? *trips * (count.first + count.second) : 0;
        if (held <= numStages)
          continue;
        PairWords w = wordsFor(key);
        InFlightDiagnostic diag = loop.emitError();
        diag << describe(key.first) << ": this loop "
             << (count.first ? w.firstDoes : w.secondDoes) << " "
             << stages(held) << " (" << *trips << " iterations) without a "
             << (count.first ? w.secondVerb : w.firstVerb)
             << ", but the pipeline has only " << stages(numStages)
             << ": the stage after the last one never comes back (bound the "
                "loop by the number of stages)";
        noteCreate(diag, key.first);
        failed = true;
        reported.insert(key);
        continue;
      }
      if (count.unknown || handedAcrossLoops(loop, key, count))
        continue;
      reportImbalance(key, count, "loop body", loop, "in this loop");
      failed = true;
      reported.insert(key);
    }
  });

  // The function body, through branches: catches straight-line roles and
  // prologue/epilogue loops that do not add up.
  for (Region &region : fn->getRegions())
    for (Block &block : region)
      for (auto &[key, count] : summarize(block)) {
        // A helper function that takes the pipeline as an argument may do
        // one half of a pair for its caller.
        if (count.balanced() || count.unknown || reported.contains(key) ||
            !key.first.getDefiningOp())
          continue;
        Operation *culprit = count.first > count.second
                                 ? count.firstOps.back()
                                 : count.secondOps.back();
        Block *role = getRoleBlock(culprit);
        bool branch = isa<scf::IfOp>(getRoleOwner(role));
        reportImbalance(key, count, branch ? "this role" : "the function",
                        branch ? getRoleOwner(role) : nullptr,
                        "in this role region");
        failed = true;
        reported.insert(key);
      }
  return failure(failed);
}
