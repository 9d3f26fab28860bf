//===- CopyInsideAcquire.cpp - copies between acquire and commit ----------===//
//
// Property 12 of pipeline-verify-protocol: a copy that fills a producer's
// stage (`pipeline.copy.tma_load`, `pipeline.copy.bulk`) runs between the
// `producer.acquire` and the `producer.commit` of the state it names. Before
// the acquire the stage may still be read by the consumers of the previous
// lap (the copy overwrites it) and its full barrier is not armed with the
// stage's bytes yet (the copy's complete_tx lands on the previous phase or
// underflows the tx-count); after the commit the stage belongs to the
// consumers. Both pass every count-based check (the bytes and the verbs add
// up), which is why users meet them as intermittent corruption
// (a copy onto a stage never acquired, or "an acquire swapped after its
// tma_load": both reported by users of other pipeline libraries).
//
// How: per pipeline, the acquires and commits of the copy's stage (the same
// state value, or the same (root, offset), or identical operand-wise
// `state.make`s: a `*_w_index` verb builds its own) are placed relative to
// the copy in program order: the ancestors of both in their nearest common
// block are compared, and an acquire counts as run before the copy only when
// nothing but guards (elect, lane, thread tests) lies between it and that
// block. Reported:
// - no acquire of the stage anywhere in the function, for a state the
//   function made (a state passed in was acquired by the caller);
// - every acquire of the stage after the copy;
// - a commit of the stage after every acquire that precedes the copy, and
//   before the copy.
// Undecided (silent): an acquire under a condition or a loop of its own
// before the copy, acquires and copies in exclusive branches, and states
// that do not change between iterations of a loop around both (an acquire
// after the copy may then be the previous iteration's). The simulator is
// not involved: the copy runs either way; what breaks is the data.
//
//===----------------------------------------------------------------------===//

#include "ProtocolChecks.h"

#include "mlir/IR/OperationSupport.h"

using namespace mlir;
using namespace mlir::pipeline;
using namespace mlir::pipeline::protocol;

namespace {
/// Where an op runs relative to a copy, within one pass over their nearest
/// common block.
enum class Order {
  Before,      // always runs before it (only guards in between)
  MaybeBefore, // before it, but under a condition or a loop of its own, or
               // possibly in an earlier iteration of an enclosing loop
  After,       // after it
  Unknown      // exclusive branches
};
} // namespace

/// True when `a` and `b` name the same stage of a pipeline: the same root
/// advanced by the same number of stages. Two roots that are identical
/// `state.make` ops (same operands and attributes, as `*_w_index` verbs and
/// `PipelineState(...)` build them at each call) are one root.
static bool sameStage(Value a, Value b) {
  if (a == b)
    return true;
  auto [ra, oa] = getStateRoot(a);
  auto [rb, ob] = getStateRoot(b);
  if (oa != ob)
    return false;
  if (ra == rb)
    return true;
  auto ma = ra.getDefiningOp<StateMakeOp>();
  auto mb = rb.getDefiningOp<StateMakeOp>();
  return ma && mb &&
         OperationEquivalence::isEquivalentTo(
             ma, mb, OperationEquivalence::IgnoreLocations);
}

/// True when some loop between `block` and the function leaves `state`
/// unchanged across its iterations (the state is defined outside the loop):
/// an op after the copy in `block` may then have run in an earlier
/// iteration.
static bool stateRepeatsAcrossIterations(Block *block, Value state) {
  Operation *home = state.getParentRegion()->getParentOp();
  for (Operation *p = block->getParentOp();
       p && !isa<FunctionOpInterface>(p); p = p->getParentOp())
    if (isa<LoopLikeOpInterface>(p) && !p->isAncestor(home))
      return true;
  return false;
}

/// Where `x` runs relative to `copy` (which uses `state`).
static Order programOrder(Operation *x, Operation *copy, Value state) {
  for (Operation *cAnc = copy; cAnc && !isa<FunctionOpInterface>(cAnc);
       cAnc = cAnc->getParentOp()) {
    Block *block = cAnc->getBlock();
    Operation *xAnc = block->findAncestorOpInBlock(*x);
    if (!xAnc)
      continue;
    if (xAnc == cAnc)
      return Order::Unknown; // different regions of one op
    if (!xAnc->isBeforeInBlock(cAnc))
      return stateRepeatsAcrossIterations(block, state) ? Order::MaybeBefore
                                                        : Order::After;
    // Before in the block: certain only when nothing but guards (which pick
    // who runs it, not whether the role does) lies between x and the block.
    for (Operation *p = x->getParentOp(); p != xAnc->getParentOp() && p;
         p = p->getParentOp()) {
      auto ifOp = dyn_cast<scf::IfOp>(p);
      if (!ifOp || !isGuardIf(ifOp))
        return Order::MaybeBefore;
    }
    return Order::Before;
  }
  return Order::Unknown;
}

/// The copy's name in messages.
static StringRef copyName(Operation *copy) {
  return copy->getName().getStringRef();
}

static constexpr const char *kRule =
    "a stage's copies go between producer.acquire and producer.commit of the "
    "state they name";

LogicalResult protocol::checkCopiesInsideAcquire(FunctionOpInterface fn) {
  // Per pipeline, its acquires, commits and copies in program order.
  llvm::MapVector<Value, SmallVector<Operation *>> acquires, commits, copies;
  fn->walk([&](Operation *op) {
    std::optional<VerbRef> verb = getVerb(op);
    if (!verb)
      return;
    if (verb->verb == Verb::Acquire)
      acquires[verb->pipeline].push_back(op);
    else if (verb->verb == Verb::Commit)
      commits[verb->pipeline].push_back(op);
    else if (verb->verb == Verb::Copy)
      copies[verb->pipeline].push_back(op);
  });

  bool failed = false;
  for (auto &[pipe, pipeCopies] : copies) {
    // lookup() returns by value: keep the copies alive.
    SmallVector<Operation *> acqStore = acquires.lookup(pipe);
    SmallVector<Operation *> commitStore = commits.lookup(pipe);
    for (Operation *copy : pipeCopies) {
      Value state = getVerb(copy)->state;
      // A state passed in as a function argument was acquired by the
      // caller: nothing here can tell.
      Value root = getStateRoot(state).first;
      if (auto arg = dyn_cast<BlockArgument>(root);
          arg && isa<FunctionOpInterface>(arg.getOwner()->getParentOp()))
        continue;

      SmallVector<Operation *> before, after;
      bool undecided = false;
      for (Operation *acq : acqStore) {
        if (!sameStage(getVerb(acq)->state, state))
          continue;
        switch (programOrder(acq, copy, state)) {
        case Order::Before:
          before.push_back(acq);
          break;
        case Order::After:
          after.push_back(acq);
          break;
        default:
          undecided = true;
        }
      }
      if (undecided)
        continue;

      if (before.empty()) {
        InFlightDiagnostic diag = copy->emitError();
        diag << describe(pipe) << ": " << copyName(copy);
        if (after.empty())
          diag << " fills a stage that no producer.acquire of its state "
                  "acquired ("
               << kRule
               << "): the copy may overwrite the buffer while consumers "
                  "still read it, and its bytes land on a full barrier that "
                  "was not armed for them (call producer.acquire with this "
                  "state before the copy)";
        else
          diag << " runs before the producer.acquire of its state (" << kRule
               << "): the copy may overwrite the buffer while consumers of "
                  "the previous lap still read it, and its bytes land before "
                  "producer.acquire arms the full barrier for them (move "
                  "producer.acquire before the copy)";
        for (Operation *acq : after)
          diag.attachNote(acq->getLoc())
              << "producer.acquire of this state, after the copy";
        noteCreate(diag, pipe);
        failed = true;
        continue;
      }

      // A commit of the stage after every preceding acquire and before the
      // copy: the stage was handed to the consumers before it was filled.
      for (Operation *commit : commitStore) {
        if (!sameStage(getVerb(commit)->state, state) ||
            programOrder(commit, copy, state) != Order::Before)
          continue;
        bool reacquired = llvm::any_of(before, [&](Operation *acq) {
          return programOrder(acq, commit, state) != Order::Before;
        });
        if (reacquired)
          continue;
        InFlightDiagnostic diag = copy->emitError();
        diag << describe(pipe) << ": " << copyName(copy)
             << " runs after the producer.commit of its state (" << kRule
             << "): the commit hands the stage to the consumers, which may "
                "read it before this copy lands, and the next producer.acquire "
                "may re-arm the stage while the copy is in flight (move the "
                "copy before producer.commit)";
        diag.attachNote(commit->getLoc())
            << "producer.commit of this state, before the copy";
        noteCreate(diag, pipe);
        failed = true;
        break;
      }
    }
  }
  return failure(failed);
}
