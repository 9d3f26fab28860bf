//===- StateThreadingChecks.cpp - states advanced once per stage ----------===//
//
// Property 2 of pipeline-verify-protocol: a state carried by a loop advances
// once per stage the body uses (on every path through the body), and the
// second verb of a pair uses the state of the first one (not an advanced
// one) and runs only where the first one ran.
//
//===----------------------------------------------------------------------===//

#include "ProtocolChecks.h"

#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallPtrSet.h"

using namespace mlir;
using namespace mlir::pipeline;
using namespace mlir::pipeline::protocol;

namespace {

/// Advances between the loop's block argument and the value it yields, with
/// the advance ops on the way; nullopt when the path is not a plain chain
/// (fresh state, nested loop, branches that advance differently, dynamic
/// amount).
std::optional<int64_t> countAdvances(Value v, Value arg,
                                     SmallVectorImpl<Operation *> &advances,
                                     int depth = 0) {
  if (depth > 256)
    return std::nullopt;
  if (v == arg)
    return 0;
  Operation *def = v.getDefiningOp();
  if (auto adv = dyn_cast_or_null<StateAdvanceOp>(def)) {
    int64_t amount = 1;
    if (adv.getAmount()) {
      std::optional<int64_t> c = getConstantInt(adv.getAmount());
      if (!c)
        return std::nullopt;
      amount = *c;
    }
    std::optional<int64_t> rest =
        countAdvances(adv.getState(), arg, advances, depth + 1);
    if (!rest)
      return std::nullopt;
    advances.push_back(def);
    return *rest + amount;
  }
  if (auto arrive = dyn_cast_or_null<OrderArriveOp>(def)) {
    std::optional<int64_t> rest =
        countAdvances(arrive.getState(), arg, advances, depth + 1);
    if (!rest)
      return std::nullopt;
    advances.push_back(def);
    return *rest + 1;
  }
  if (auto ifOp = dyn_cast_or_null<scf::IfOp>(def)) {
    unsigned idx = cast<OpResult>(v).getResultNumber();
    SmallVector<Operation *> thenAdv, elseAdv;
    std::optional<int64_t> t = countAdvances(ifOp.thenYield().getOperand(idx),
                                             arg, thenAdv, depth + 1);
    std::optional<int64_t> e = countAdvances(ifOp.elseYield().getOperand(idx),
                                             arg, elseAdv, depth + 1);
    if (!t || !e || *t != *e)
      return std::nullopt;
    advances.append(thenAdv);
    return t;
  }
  return std::nullopt;
}

/// Stages one op of a chain advances by (countAdvances only records ops
/// whose amount is 1 or a constant).
int64_t advanceAmount(Operation *op) {
  if (auto adv = dyn_cast<StateAdvanceOp>(op))
    if (adv.getAmount())
      return getConstantInt(adv.getAmount()).value_or(1);
  return 1;
}

/// Values of the chain that starts at `arg` inside `loop`.
llvm::SetVector<Value> chainValues(Value arg) {
  llvm::SetVector<Value> chain;
  chain.insert(arg);
  for (unsigned i = 0; i < chain.size(); ++i)
    for (OpOperand &use : chain[i].getUses()) {
      Operation *user = use.getOwner();
      if (isa<StateAdvanceOp, OrderArriveOp>(user))
        chain.insert(user->getResult(0));
      else if (auto yield = dyn_cast<scf::YieldOp>(user))
        if (auto ifOp = dyn_cast<scf::IfOp>(yield->getParentOp()))
          chain.insert(ifOp.getResult(use.getOperandNumber()));
    }
  return chain;
}

struct ChainUse {
  int64_t first = 0;                 // acquire / wait / order.wait
  int64_t second = 0;                // commit / release
  /// The same counts on the path through the branches that uses fewest
  /// stages (branches on kernel arguments, loop variables or data: each
  /// iteration takes one of them; a role split or an elect guard is not
  /// such a choice).
  int64_t minFirst = 0, minSecond = 0;
  /// The first such branch whose two sides use different numbers of stages.
  Operation *varyingIf = nullptr;
  bool nested = false;               // used inside a nested loop
  SmallVector<Operation *> ops;      // all of them, in program order
  SmallVector<Operation *> firstOps; // the first verbs only
};

/// Stages of each pipeline used per iteration, with the same branch rule
/// as the balance. One state may drive several pipelines in step
/// (flash-attention advances one state for its K and V pipelines): each
/// pipeline uses the state once per advance.
using ChainUses = llvm::MapVector<Value, ChainUse>;

void addChainUses(ChainUses &into, const ChainUses &then,
                  const ChainUses &other, scf::IfOp choice = {}) {
  llvm::SetVector<Value> pipes;
  for (auto &entry : then)
    pipes.insert(entry.first);
  for (auto &entry : other)
    pipes.insert(entry.first);
  for (Value pipe : pipes) {
    ChainUse t = then.lookup(pipe), e = other.lookup(pipe);
    ChainUse &use = into[pipe];
    use.first += std::max(t.first, e.first);
    use.second += std::max(t.second, e.second);
    if (choice) {
      use.minFirst += std::min(t.minFirst, e.minFirst);
      use.minSecond += std::min(t.minSecond, e.minSecond);
      if (!use.varyingIf &&
          (t.first != e.first || (!t.first && t.second != e.second)))
        use.varyingIf = choice;
    } else {
      use.minFirst += std::max(t.minFirst, e.minFirst);
      use.minSecond += std::max(t.minSecond, e.minSecond);
    }
    if (!use.varyingIf)
      use.varyingIf = t.varyingIf ? t.varyingIf : e.varyingIf;
    use.nested |= t.nested || e.nested;
    use.ops.append(t.ops);
    use.ops.append(e.ops);
    use.firstOps.append(t.firstOps);
    use.firstOps.append(e.firstOps);
  }
}

/// `loop`: the loop whose iterations take the branches (a branch whose
/// condition is defined outside it takes the same side in every iteration:
/// the state then is used on every iteration or on none, and is no choice
/// between paths).
ChainUses countChainUses(Block &block, const llvm::SetVector<Value> &chain,
                         scf::ForOp loop) {
  ChainUses uses;
  for (Operation &op : block) {
    if (std::optional<VerbRef> verb = getVerb(&op)) {
      if (!chain.contains(verb->state))
        continue;
      ChainUse &use = uses[verb->pipeline];
      if (verb->verb == Verb::Acquire || verb->verb == Verb::Wait ||
          verb->verb == Verb::OrderWait) {
        ++use.first;
        ++use.minFirst;
        use.ops.push_back(&op);
        use.firstOps.push_back(&op);
      } else if (verb->verb == Verb::Commit || verb->verb == Verb::Release) {
        ++use.second;
        ++use.minSecond;
        use.ops.push_back(&op);
      }
      continue;
    }
    if (auto ifOp = dyn_cast<scf::IfOp>(&op)) {
      ChainUses t = countChainUses(ifOp.getThenRegion().front(), chain, loop);
      ChainUses e;
      if (!ifOp.getElseRegion().empty())
        e = countChainUses(ifOp.getElseRegion().front(), chain, loop);
      bool choice = !isThreadSplit(ifOp) && !isGuardIf(ifOp) &&
                    !loop.isDefinedOutsideOfLoop(ifOp.getCondition());
      addChainUses(uses, t, e, choice ? ifOp : scf::IfOp());
      continue;
    }
    if (op.getNumRegions() == 0)
      continue;
    op.walk([&](Operation *inner) {
      if (auto verb = getVerb(inner); verb && chain.contains(verb->state))
        uses[verb->pipeline].nested = true;
    });
  }
  return uses;
}

} // namespace

/// The advances of a loop-carried state are the same on every path through
/// the body (countAdvances decided them), so the stages the body uses must
/// be too: a wait (acquire) under a branch on a kernel argument, loop
/// variable or data with the advance outside it (flash-attention#2258: the
/// consumer phase flipped on a tile the producer skipped) moves the state
/// past a stage nobody used whenever the branch is not taken, and the next
/// wait reads the wrong parity.
static bool checkAdvanceOnEveryPath(int64_t numAdvances,
                                    ArrayRef<Operation *> advances,
                                    const ChainUse &use) {
  int64_t fewest = use.first ? use.minFirst : use.minSecond;
  if (fewest == numAdvances || !use.varyingIf || advances.empty())
    return false;
  Operation *verbOf = use.ops.front();
  Value pipe = getVerb(verbOf)->pipeline;
  StringRef does =
      use.first ? (isa<ProducerAcquireOp>(verbOf) ? "acquires" : "waits on")
                : (isa<ProducerCommitOp>(verbOf) ? "commits" : "releases");
  InFlightDiagnostic diag = advances.back()->emitError();
  diag << describe(pipe) << ": the state advances " << stages(numAdvances)
       << " on every path through the loop body, but the body " << does
       << " " << stages(use.first ? use.first : use.second)
       << " on some paths and " << fewest
       << " on others (rule: a state advances once per stage the iteration "
          "uses, on every path): where the branch is not taken the state "
          "moves past a stage nobody "
       << (use.first
               ? (isa<ProducerAcquireOp>(verbOf) ? "acquired" : "waited on")
               : "signalled")
       << ", and the next wait reads the wrong phase (parity) of the "
          "barrier; advance the state inside the branch, next to its verbs "
          "(k.if_(cond, carry=[state]))";
  diag.attachNote(use.varyingIf->getLoc())
      << "the branch whose sides use different numbers of stages";
  diag.attachNote(verbOf->getLoc()) << "the stage is used here";
  return true;
}

/// Whether one pipeline uses a loop-carried state once per advance
/// (reports it when not).
static bool checkLoopStateUse(scf::ForOp loop, int64_t numAdvances,
                              ArrayRef<Operation *> advances,
                              const ChainUse &use) {
  if (use.nested || use.ops.empty())
    return false;
  int64_t expected = use.first ? use.first : use.second;
  if (expected == 0)
    return false;
  if (numAdvances == expected)
    return checkAdvanceOnEveryPath(numAdvances, advances, use);

  auto verbOf = use.ops.front();
  Value pipe = getVerb(verbOf)->pipeline;
  StringRef does =
      use.first ? (isa<ProducerAcquireOp>(verbOf) ? "acquires" : "waits on")
                : (isa<ProducerCommitOp>(verbOf) ? "commits" : "releases");
  if (numAdvances == 0) {
    InFlightDiagnostic diag = verbOf->emitError();
    diag << describe(pipe)
         << ": the state carried by this loop never advances: the loop waits "
            "on the same stage forever (yield `pipeline.state.advance` of the "
            "state once per stage used)";
    diag.attachNote(loop.getBody()->getTerminator()->getLoc())
        << "the loop yields the state unchanged";
    diag.attachNote(loop.getLoc()) << "state carried by this loop";
    return true;
  }
  if (numAdvances > expected) {
    // `advance by N` counts N stages in one op, so the op count and the stage
    // count differ: blame the op whose advances pass the stages used.
    Operation *extra = advances.back();
    int64_t passed = 0;
    for (Operation *adv : advances) {
      passed += advanceAmount(adv);
      if (passed > expected) {
        extra = adv;
        break;
      }
    }
    InFlightDiagnostic diag = extra->emitError();
    diag << describe(pipe) << ": state advanced "
         << (numAdvances == 2 ? std::string("twice")
                               : std::to_string(numAdvances) + " times")
         << " per iteration but the loop body " << does << " "
         << stages(expected)
         << ": the skipped stages are never filled or released and the "
            "pipeline deadlocks (advance once per stage used)";
    for (Operation *adv : advances)
      if (adv != extra)
        diag.attachNote(adv->getLoc()) << "the state also advances here";
    diag.attachNote(verbOf->getLoc()) << "the stage is used here";
    return true;
  }
  // The first stage the advances do not cover.
  ArrayRef<Operation *> pairStarts = use.first ? use.firstOps : use.ops;
  // Advances may sum to a negative count (`advance by -3`): clamp to the
  // first verb.
  Operation *uncovered = pairStarts[std::clamp<int64_t>(
      numAdvances, 0, static_cast<int64_t>(pairStarts.size()) - 1)];
  InFlightDiagnostic diag = uncovered->emitError();
  diag << describe(pipe) << ": state advanced " << stages(numAdvances)
       << " per iteration but the loop body " << does << " " << stages(expected)
       << ": the next iteration reuses a stage that is still in flight "
          "(advance the state after each stage)";
  for (Operation *adv : advances)
    diag.attachNote(adv->getLoc()) << "the state advances here";
  return true;
}

static bool checkLoopState(scf::ForOp loop, unsigned idx) {
  Value arg = loop.getRegionIterArgs()[idx];
  Value yielded = loop.getYieldedValues()[idx];
  SmallVector<Operation *> advances;
  std::optional<int64_t> numAdvances = countAdvances(yielded, arg, advances);
  if (!numAdvances)
    return false;
  // One report per carried state: the first pipeline that disagrees.
  for (auto &[pipe, use] :
       countChainUses(*loop.getBody(), chainValues(arg), loop))
    if (checkLoopStateUse(loop, *numAdvances, advances, use))
      return true;
  return false;
}

/// The second verb of a pair (or a copy) that uses a state advanced past the
/// first verb's state signals a stage nobody acquired.
static bool checkSameState(Operation *op, const VerbRef &verb,
                           ArrayRef<Operation *> firstVerbs,
                           DominanceInfo &domInfo) {
  auto [root, offset] = getStateRoot(verb.state);
  Operation *closest = nullptr;
  int64_t distance = 0;
  for (Operation *first : firstVerbs) {
    VerbRef fv = *getVerb(first);
    if (fv.pipeline != verb.pipeline || !domInfo.properlyDominates(first, op))
      continue;
    auto [firstRoot, firstOffset] = getStateRoot(fv.state);
    if (firstRoot != root)
      continue;
    if (firstOffset == offset)
      return false;
    int64_t d = offset - firstOffset;
    if (d > 0 && (!closest || d < distance)) {
      closest = first;
      distance = d;
    }
  }
  if (!closest)
    return false;
  bool release = verb.verb == Verb::Release;
  StringRef firstName = release ? "consumer.wait" : "producer.acquire";
  InFlightDiagnostic diag = op->emitError();
  diag << describe(verb.pipeline) << ": " << op->getName()
       << " uses a state advanced " << stages(distance) << " past its pipeline."
       << firstName << ": it "
       << (verb.verb == Verb::Copy ? "completes the barrier of" : "signals")
       << " a stage that was not " << (release ? "waited on" : "acquired")
       << "; pass the state given to pipeline." << firstName
       << " and advance after the pair";
  diag.attachNote(closest->getLoc()) << "pipeline." << firstName << " here";
  if (Operation *def = verb.state.getDefiningOp())
    diag.attachNote(def->getLoc()) << "state advanced here";
  return true;
}

/// Whether `region` holds a first verb (acquire / wait, or their try forms)
/// of `pipe` on the stage `key` names.
static bool holdsFirstVerb(Region &region, Value pipe,
                           std::pair<Value, int64_t> key) {
  bool found = false;
  region.walk([&](Operation *inner) {
    std::optional<VerbRef> v = getVerb(inner);
    if (v && v->pipeline == pipe &&
        (v->verb == Verb::Acquire || v->verb == Verb::TryAcquire ||
         v->verb == Verb::Wait || v->verb == Verb::TryWait) &&
        getStateRoot(v->state) == key)
      found = true;
  });
  return found;
}

/// The second verb of a pair on a path where its first verb did not run: a
/// commit (release) whose acquire (wait) of the same stage sits inside a
/// branch that the commit follows, on paths where that branch's other side
/// acquires nothing (pytorch/helion#3621: the tail dq_empty wait skipped for
/// 1-step tiles, its slot refilled and signalled anyway). Where the branch
/// is not taken, the commit signals a stage that was never acquired: the
/// producer overwrites a stage its consumer may still hold (a release: the
/// stage is handed back before anything waited for its data). Branches
/// that split roles or guard lanes are left alone (the others' threads do
/// not run the verb at all), as is a second verb under a branch on the same
/// condition.
static bool checkFirstVerbOnEveryPath(Operation *op, const VerbRef &verb,
                                      ArrayRef<Operation *> firstVerbs,
                                      DominanceInfo &domInfo,
                                      llvm::SmallPtrSetImpl<Operation *> &ifs) {
  std::pair<Value, int64_t> key = getStateRoot(verb.state);
  SmallVector<Operation *> same;
  for (Operation *first : firstVerbs) {
    VerbRef fv = *getVerb(first);
    if (fv.pipeline != verb.pipeline || getStateRoot(fv.state) != key)
      continue;
    if (domInfo.properlyDominates(first, op))
      return false;
    same.push_back(first);
  }
  // The conditions of the branches around the second verb.
  llvm::SmallPtrSet<Value, 4> opConds;
  for (auto ifOp = op->getParentOfType<scf::IfOp>(); ifOp;
       ifOp = ifOp->getParentOfType<scf::IfOp>())
    opConds.insert(ifOp.getCondition());
  for (Operation *first : same) {
    // The branches between the first verb and the block they share with the
    // second; anything else on the way (a loop, another region op) leaves
    // the pair to the other checks.
    SmallVector<std::pair<scf::IfOp, Region *>> branches;
    Operation *child = first;
    bool onlyIfs = true;
    for (Operation *p = first->getParentOp(); p && !p->isAncestor(op);
         child = p, p = p->getParentOp()) {
      auto ifOp = dyn_cast<scf::IfOp>(p);
      if (!ifOp) {
        onlyIfs = false;
        break;
      }
      branches.push_back({ifOp, child->getParentRegion()});
    }
    if (!onlyIfs || branches.empty())
      continue;
    scf::IfOp outer = branches.back().first;
    Operation *later = outer->getBlock()->findAncestorOpInBlock(*op);
    if (!later || !outer->isBeforeInBlock(later))
      continue;
    for (auto [ifOp, region] : branches) {
      if (isThreadSplit(ifOp) || isGuardIf(ifOp) ||
          opConds.contains(ifOp.getCondition()))
        continue;
      Region &other = region == &ifOp.getThenRegion() ? ifOp.getElseRegion()
                                                      : ifOp.getThenRegion();
      if (!other.empty() && holdsFirstVerb(other, verb.pipeline, key))
        continue;
      bool release = verb.verb == Verb::Release;
      StringRef firstName = release ? "consumer_wait" : "producer_acquire";
      StringRef secondName = release ? "consumer_release" : "producer_commit";
      InFlightDiagnostic diag = ifOp->emitError();
      diag << describe(verb.pipeline) << ": the " << firstName
           << " of a stage runs only on one side of this branch, but its "
           << secondName
           << " runs after the branch on every path (rule: the second verb "
              "of a pair runs only where its first verb ran): where the "
              "other side is taken, "
           << (release ? "the release hands back a stage nothing waited "
                         "on, and the producer refills it while its data "
                         "may not even have arrived"
                       : "the commit signals a stage that was never "
                         "acquired, and the producer refills it while its "
                         "consumer may still read it")
           << "; " << (release ? "wait" : "acquire")
           << " on every path, or move the " << secondName
           << " and the state's advance into the branch";
      diag.attachNote(first->getLoc())
          << "the " << firstName << ", on one side only";
      diag.attachNote(op->getLoc())
          << "the " << secondName << " of that stage, on every path";
      ifs.insert(ifOp);
      return true;
    }
  }
  return false;
}

/// The every-path rule of checkAdvanceOnEveryPath where the loop's advances
/// cannot be counted (its state runs through a nested loop, as a tile loop
/// around its steps does): a branch that can differ between iterations, one
/// side of which waits on (acquires) more stages of a state than the other,
/// the state not yielded by the branch but advanced after it in the loop
/// body (a peeled tail's pair under `steps > 1`, its advance on every path:
/// the tiles that skip the tail move the state past a stage nobody used).
static bool checkAdvancePastBranch(scf::IfOp ifOp) {
  if (isThreadSplit(ifOp) || isGuardIf(ifOp))
    return false;
  auto loop = dyn_cast<scf::ForOp>(ifOp->getParentOp());
  if (!loop || loop.isDefinedOutsideOfLoop(ifOp.getCondition()))
    return false;
  auto isFirst = [](Verb v) { return v == Verb::Acquire || v == Verb::Wait; };
  auto count = [&](Region &region, Value state, Value pipe) {
    int64_t n = 0;
    if (!region.empty())
      region.walk([&](Operation *inner) {
        std::optional<VerbRef> v = getVerb(inner);
        if (v && v->state == state && v->pipeline == pipe && isFirst(v->verb))
          ++n;
      });
    return n;
  };
  llvm::DenseSet<std::pair<Value, Value>> seen;
  bool reported = false;
  ifOp->walk([&](Operation *inner) {
    std::optional<VerbRef> v = getVerb(inner);
    if (reported || !v || !isFirst(v->verb) ||
        ifOp->isAncestor(v->state.getParentRegion()->getParentOp()) ||
        !seen.insert({v->state, v->pipeline}).second)
      return;
    // A try form before the branch (try_wait, then a wait where it failed)
    // is the same stage on both paths.
    for (Operation *user : v->state.getUsers())
      if (isa<ProducerTryAcquireOp, ConsumerTryWaitOp>(user) &&
          user->getBlock() == ifOp->getBlock() && user->isBeforeInBlock(ifOp))
        return;
    int64_t t = count(ifOp.getThenRegion(), v->state, v->pipeline);
    int64_t e = count(ifOp.getElseRegion(), v->state, v->pipeline);
    if (t == e)
      return;
    Operation *advance = nullptr;
    for (Operation *user : v->state.getUsers())
      if (isa<StateAdvanceOp>(user) && user->getBlock() == ifOp->getBlock() &&
          ifOp->isBeforeInBlock(user) &&
          (!advance || user->isBeforeInBlock(advance)))
        advance = user;
    if (!advance)
      return;
    bool acquire = v->verb == Verb::Acquire;
    InFlightDiagnostic diag = advance->emitError();
    diag << describe(v->pipeline)
         << ": the state advances here on every path after a branch that "
         << (acquire ? "acquires " : "waits on ") << stages(std::max(t, e))
         << " on one side and " << std::min(t, e)
         << " on the other (rule: a state advances once per stage the "
            "iteration uses, on every path): where the branch is not taken "
            "the state moves past a stage nobody "
         << (acquire ? "acquired" : "waited on")
         << ", and the next wait reads the wrong phase (parity) of the "
            "barrier; advance the state inside the branch, next to its verbs "
            "(k.if_(cond, carry=[state]))";
    diag.attachNote(ifOp->getLoc())
        << "the branch whose sides use different numbers of stages";
    diag.attachNote(inner->getLoc()) << "the stage is used here";
    reported = true;
  });
  return reported;
}

LogicalResult protocol::checkStateThreading(FunctionOpInterface fn,
                                            DominanceInfo &domInfo) {
  bool failed = false;
  llvm::SmallPtrSet<Operation *, 4> reportedLoops, reportedIfs;
  fn->walk([&](scf::ForOp loop) {
    for (auto [idx, arg] : llvm::enumerate(loop.getRegionIterArgs()))
      if (isa<StateType>(arg.getType()) && checkLoopState(loop, idx)) {
        failed = true;
        reportedLoops.insert(loop);
      }
  });

  SmallVector<Operation *> acquires, waits, anyAcquires, anyWaits;
  fn->walk([&](Operation *op) {
    if (isa<ProducerAcquireOp>(op))
      acquires.push_back(op);
    else if (isa<ConsumerWaitOp>(op))
      waits.push_back(op);
    if (isa<ProducerAcquireOp, ProducerTryAcquireOp>(op))
      anyAcquires.push_back(op);
    else if (isa<ConsumerWaitOp, ConsumerTryWaitOp>(op))
      anyWaits.push_back(op);
  });
  fn->walk([&](Operation *op) {
    std::optional<VerbRef> verb = getVerb(op);
    if (!verb)
      return;
    bool bad = false;
    if (verb->verb == Verb::Commit || verb->verb == Verb::Copy)
      bad = checkSameState(op, *verb, acquires, domInfo);
    else if (verb->verb == Verb::Release)
      bad = checkSameState(op, *verb, waits, domInfo);
    if (!bad && verb->verb == Verb::Commit)
      bad = checkFirstVerbOnEveryPath(op, *verb, anyAcquires, domInfo,
                                      reportedIfs);
    else if (!bad && verb->verb == Verb::Release)
      bad = checkFirstVerbOnEveryPath(op, *verb, anyWaits, domInfo,
                                      reportedIfs);
    failed |= bad;
  });
  // The every-path rule where checkLoopState could not count the advances.
  fn->walk([&](scf::IfOp ifOp) {
    if (!reportedIfs.contains(ifOp) &&
        !reportedLoops.contains(ifOp->getParentOp()))
      failed |= checkAdvancePastBranch(ifOp);
  });
  return failure(failed);
}
