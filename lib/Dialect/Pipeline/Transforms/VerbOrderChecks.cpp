//===- VerbOrderChecks.cpp - the order of one stage's verbs ---------------===//
//
// Property 15 of pipeline-verify-protocol: in straight-line code, the verbs
// of one stage come in their protocol's order. The counts of checks 1 and
// 11 add up when two verbs of a stage are swapped or one is issued twice
// next to its original, so these slips pass every count and hang or race
// on the GPU:
// - producer.commit before the producer.acquire of its state (the commit
//   arrives on a stage the producer does not own: the consumers read a
//   buffer that is still being filled), or twice for one acquire (a second
//   arrival on the full barrier completes the next phase early);
// - consumer.release before the consumer.wait of its state (the producer
//   refills the stage the consumer is about to read), or twice for one
//   wait;
// - producer.tail twice (the second waits for releases of stages nobody
//   filled: a hang in every CTA). A PipelineTmaStore's tail, a bulk-group
//   wait, may repeat;
// - a PipelineTmaStore's copy.tma_store after the producer.commit that was
//   to close its bulk group (the next producer.acquire does not wait for
//   it: the warps overwrite the staging buffer while the store reads it),
//   and a producer.commit with no copy.tma_store since its acquire (the
//   tile is never stored; the group is empty).
//
// How: each block's ops are read in order, together with the ops of the
// `scf.if` then-branches without an else in it (a guard or a role test
// around one verb); ops under different non-guard conditions are never
// compared (two warp roles may each run the verbs of a stage). Two verbs
// are of one stage when they name the same state value or the same (root,
// offset); states made by hand from an explicit index are not compared.
// Verbs in loops, else-branches and other regions of their own
// are compared within those regions only: what runs between iterations or
// across branches is left to checks 1, 2 and 11.
//
//===----------------------------------------------------------------------===//

#include "ProtocolChecks.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "llvm/ADT/DenseSet.h"

using namespace mlir;
using namespace mlir::pipeline;
using namespace mlir::pipeline::protocol;

namespace {

/// A verb (or bulk-group op) in a block's straight-line order, with the
/// conditions of the non-guard `scf.if`s between it and the block.
struct Item {
  Operation *op;
  SmallVector<Value, 2> conditions;
};

/// True for an `scf.if` whose branches the straight-line order goes
/// through: a then-branch only (an else-branch, when present, is empty).
bool isThenOnly(scf::IfOp ifOp) {
  return ifOp.getElseRegion().empty() ||
         isEmptyBlock(&ifOp.getElseRegion().front());
}

bool isOrdered(Operation *op) {
  return getVerb(op) || isa<TmaStoreOp, BulkGroupCommitOp>(op);
}

void collect(Block &block, SmallVector<Value, 2> &conditions,
             SmallVectorImpl<Item> &items) {
  for (Operation &op : block) {
    if (isOrdered(&op)) {
      items.push_back({&op, conditions});
      continue;
    }
    auto ifOp = dyn_cast<scf::IfOp>(&op);
    if (!ifOp || !isThenOnly(ifOp))
      continue;
    bool guard = isGuardIf(ifOp);
    if (!guard)
      conditions.push_back(ifOp.getCondition());
    collect(ifOp.getThenRegion().front(), conditions, items);
    if (!guard)
      conditions.pop_back();
  }
}

/// True when a block is the start of a straight-line order (not the
/// then-branch of an scf.if its parent's order goes through).
bool startsOrder(Block &block) {
  auto ifOp = dyn_cast_or_null<scf::IfOp>(block.getParentOp());
  return !ifOp || block.getParent() != &ifOp.getThenRegion() ||
         !isThenOnly(ifOp);
}

/// True when a state is built for one verb from an explicit index (the
/// `*_w_index` verbs, a `PipelineState(...)` made by hand): identical ones
/// are folded into one value although they stand for different laps.
bool isHandMade(Value state) {
  auto make = getStateRoot(state).first.getDefiningOp<StateMakeOp>();
  return make && make.getIndex();
}

/// True when `a` and `b` name the same stage of one lap: the same state
/// value or the same root advanced by the same number of stages.
bool sameStage(Value a, Value b) {
  if (isHandMade(a) || isHandMade(b))
    return false;
  return a == b || getStateRoot(a) == getStateRoot(b);
}

/// Whether `op` holds a bulk store that joins the thread's open bulk group,
/// which a PipelineTmaStore's commit closes: a copy.tma_store, or the NVVM
/// bulk tensor store and reduce (a TMA reduce-add accumulating a tile into
/// global memory is stored through such a ring too).
bool containsTmaStore(Operation *op) {
  bool found = false;
  op->walk([&](Operation *inner) {
    if (!isa<TmaStoreOp, NVVM::CpAsyncBulkTensorReduceOp,
             NVVM::CpAsyncBulkTensorSharedCTAToGlobalOp>(inner))
      return WalkResult::advance();
    found = true;
    return WalkResult::interrupt();
  });
  return found;
}

class VerbOrder {
public:
  bool failed = false;

  void run(ArrayRef<Item> items) {
    for (size_t i = 0; i < items.size(); ++i) {
      Operation *op = items[i].op;
      if (reported.contains(op))
        continue;
      if (isa<TmaStoreOp>(op)) {
        checkStoreAfterCommit(items, i);
        continue;
      }
      std::optional<VerbRef> verb = getVerb(op);
      if (!verb)
        continue;
      switch (verb->verb) {
      case Verb::Commit:
        checkPair(items, i, *verb, Verb::Acquire);
        if (getPipelineType(verb->pipeline).getKind() == PipelineKind::TmaStore)
          checkEmptyGroup(items, i, *verb);
        break;
      case Verb::Release:
        checkPair(items, i, *verb, Verb::Wait);
        break;
      case Verb::Tail:
        checkSecondTail(items, i, *verb);
        break;
      default:
        break;
      }
    }
  }

private:
  llvm::DenseSet<Operation *> reported;

  static bool comparable(const Item &a, const Item &b) {
    return a.conditions == b.conditions;
  }

  /// The verbs of `verb`'s pipeline and stage comparable with items[i],
  /// with their positions.
  SmallVector<std::pair<size_t, VerbRef>> stageVerbs(ArrayRef<Item> items,
                                                     size_t i,
                                                     const VerbRef &verb) {
    SmallVector<std::pair<size_t, VerbRef>> out;
    for (size_t j = 0; j < items.size(); ++j) {
      if (!comparable(items[i], items[j]))
        continue;
      std::optional<VerbRef> other = getVerb(items[j].op);
      if (other && other->pipeline == verb.pipeline &&
          sameStage(other->state, verb.state))
        out.push_back({j, *other});
    }
    return out;
  }

  /// A commit (release) needs its acquire (wait) since the previous commit
  /// (release) of the stage.
  void checkPair(ArrayRef<Item> items, size_t i, const VerbRef &verb,
                 Verb opener) {
    Operation *op = items[i].op;
    Operation *openerBefore = nullptr, *closerBefore = nullptr,
              *openerAfter = nullptr;
    for (auto &[j, other] : stageVerbs(items, i, verb)) {
      if (j < i && other.verb == opener) {
        openerBefore = items[j].op;
        closerBefore = nullptr;
      } else if (j < i && other.verb == verb.verb) {
        closerBefore = items[j].op;
      } else if (j > i && other.verb == opener && !openerAfter) {
        openerAfter = items[j].op;
      }
    }
    bool producer = verb.verb == Verb::Commit;
    StringRef name = producer ? "producer.commit" : "consumer.release";
    StringRef openName = producer ? "producer.acquire" : "consumer.wait";
    if (closerBefore) {
      InFlightDiagnostic diag = op->emitError();
      diag << describe(verb.pipeline) << ": " << name
           << " a second time for one " << openName
           << " of its state (rule: each " << openName << " of a stage is "
           << "followed by exactly one " << name << "): the second "
           << (producer ? "arrival completes the stage's full barrier for "
                          "the next lap before its data is there"
                        : "arrival frees the next lap's stage before it was "
                          "read, so the producer refills it under the "
                          "consumers")
           << " (remove the extra " << name << ")";
      diag.attachNote(closerBefore->getLoc())
          << "the first " << name << " of this state";
      noteCreate(diag, verb.pipeline);
      reported.insert(op);
      failed = true;
      return;
    }
    if (openerBefore || !openerAfter)
      return;
    InFlightDiagnostic diag = op->emitError();
    diag << describe(verb.pipeline) << ": " << name << " runs before the "
         << openName << " of its state (rule: a stage's " << name
         << " follows its " << openName << "): "
         << (producer ? "the commit hands a stage the producer does not own "
                        "yet to the consumers, which read a buffer that is "
                        "still being filled"
                      : "the release hands the stage back to the producer "
                        "before the consumer waited for it, so the producer "
                        "refills the buffer the consumer is about to read")
         << " (move " << name << " after " << openName << ")";
    diag.attachNote(openerAfter->getLoc())
        << openName << " of this state, after the " << name;
    noteCreate(diag, verb.pipeline);
    reported.insert(op);
    failed = true;
  }

  void checkSecondTail(ArrayRef<Item> items, size_t i, const VerbRef &verb) {
    // A PipelineTmaStore's tail waits for the bulk groups: it may repeat.
    if (!getKindTraits(getPipelineType(verb.pipeline).getKind()).hasBarriers)
      return;
    for (size_t j = 0; j < i; ++j) {
      std::optional<VerbRef> other = getVerb(items[j].op);
      if (!other || other->verb != Verb::Tail ||
          other->pipeline != verb.pipeline || !comparable(items[i], items[j]))
        continue;
      InFlightDiagnostic diag = items[i].op->emitError();
      diag << describe(verb.pipeline)
           << ": producer.tail a second time (rule: a producer role ends with "
              "one producer.tail per pipeline): the first tail already "
              "waited for every stage in flight; the second waits for "
              "releases of stages nobody filled and hangs every CTA (remove "
              "the extra producer.tail)";
      diag.attachNote(items[j].op->getLoc()) << "the first producer.tail";
      noteCreate(diag, verb.pipeline);
      reported.insert(items[i].op);
      failed = true;
      return;
    }
  }

  /// A PipelineTmaStore's commit closes the bulk group of the copies since
  /// its acquire: none means the tile is never stored.
  void checkEmptyGroup(ArrayRef<Item> items, size_t i, const VerbRef &verb) {
    std::optional<size_t> acquire;
    for (auto &[j, other] : stageVerbs(items, i, verb)) {
      if (j >= i)
        break;
      if (other.verb == Verb::Acquire)
        acquire = j;
      else if (other.verb == Verb::Commit)
        acquire.reset();
    }
    if (!acquire)
      return;
    // A store anywhere between them counts, also one under a condition of
    // its own or in a loop.
    Operation *acq = items[*acquire].op, *commit = items[i].op;
    for (Operation *p = acq; p; p = p->getParentOp()) {
      Operation *c = p->getBlock()->findAncestorOpInBlock(*commit);
      if (!c)
        continue;
      for (Operation *x = p->getNextNode(); x && x != c->getNextNode();
           x = x->getNextNode())
        if (containsTmaStore(x))
          return;
      break;
    }
    InFlightDiagnostic diag = commit->emitError();
    diag << describe(verb.pipeline)
         << ": producer.commit closes a bulk group with no copy.tma_store "
            "since the producer.acquire of its state (rule: a "
            "PipelineTmaStore stage is acquired, stored with copy.tma_store "
            "and committed): the tile written into the staging buffer is "
            "never stored (issue the copy.tma_store between producer.acquire "
            "and producer.commit)";
    diag.attachNote(acq->getLoc()) << "producer.acquire of this state";
    noteCreate(diag, verb.pipeline);
    reported.insert(commit);
    failed = true;
  }

  /// A copy.tma_store after the commit of a PipelineTmaStore, before its
  /// next acquire, with no other bulk group open for it.
  void checkStoreAfterCommit(ArrayRef<Item> items, size_t i) {
    DenseMap<Value, Operation *> lastCommit;
    DenseSet<Value> open;
    for (size_t j = 0; j < i; ++j) {
      if (!comparable(items[i], items[j]))
        continue;
      std::optional<VerbRef> v = getVerb(items[j].op);
      if (!v ||
          getPipelineType(v->pipeline).getKind() != PipelineKind::TmaStore)
        continue;
      if (v->verb == Verb::Acquire) {
        open.insert(v->pipeline);
        lastCommit.erase(v->pipeline);
      } else if (v->verb == Verb::Commit) {
        open.erase(v->pipeline);
        lastCommit[v->pipeline] = items[j].op;
      }
    }
    if (!open.empty() || lastCommit.empty())
      return;
    // A store closed by a bulk-group commit of the user's own is not the
    // pipeline's.
    for (size_t j = i + 1; j < items.size(); ++j) {
      if (isa<BulkGroupCommitOp>(items[j].op))
        return;
      if (std::optional<VerbRef> v = getVerb(items[j].op);
          v && v->verb == Verb::Acquire && lastCommit.count(v->pipeline))
        break;
    }
    auto [pipe, commit] = *lastCommit.begin();
    InFlightDiagnostic diag = items[i].op->emitError();
    diag << describe(pipe)
         << ": copy.tma_store runs after the producer.commit that closes its "
            "stage (rule: a PipelineTmaStore stage's copy.tma_store goes "
            "between producer.acquire and producer.commit): the store joins "
            "the next bulk group, so the next producer.acquire does not wait "
            "for it and the warps overwrite the staging buffer while the "
            "store still reads it (move the copy.tma_store before "
            "producer.commit)";
    diag.attachNote(commit->getLoc()) << "producer.commit of the stage, "
                                         "before the store";
    noteCreate(diag, pipe);
    reported.insert(items[i].op);
    failed = true;
  }
};

} // namespace

LogicalResult protocol::checkVerbOrder(FunctionOpInterface fn) {
  VerbOrder order;
  fn->walk([&](Block *block) {
    if (!startsOrder(*block))
      return;
    SmallVector<Item> items;
    SmallVector<Value, 2> conditions;
    collect(*block, conditions, items);
    if (items.size() > 1)
      order.run(items);
  });
  return failure(order.failed);
}
