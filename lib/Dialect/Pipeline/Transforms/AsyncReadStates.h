//===- AsyncReadStates.h - states as (root, offset) across loops -*- C++ -*-===//
//
// Check 8's (AsyncReadChecks.cpp) names for the stage a state selects: a
// root state and an offset (advances) from it, related across loops: the
// iter args of one scf.for that start at offsets of one root and advance in
// step stay that many stages apart.
//
//===----------------------------------------------------------------------===//

#ifndef PIPELINE_MLIR_TRANSFORMS_ASYNCREADSTATES_H
#define PIPELINE_MLIR_TRANSFORMS_ASYNCREADSTATES_H

#include "ProtocolChecks.h"

#include "mlir/IR/OperationSupport.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

namespace mlir::pipeline::protocol::asyncread {

//===----------------------------------------------------------------------===//
// States as (root, offset), related across loops
//===----------------------------------------------------------------------===//

struct Canon {
  Value root;
  int64_t offset = 0;
  bool operator==(const Canon &o) const {
    return root == o.root && offset == o.offset;
  }
};

class StateCanon {
public:
  Canon get(Value state, int depth = 0) {
    if (depth > 64)
      return {state, 0};
    auto [root, offset] = getStateRoot(state);
    Canon c = getRoot(root, depth);
    c.offset += offset;
    return c;
  }

  /// The per-iteration step of loop-carried state `iterArg` when it is its
  /// own root (leader of its group) and advances by a constant; nullopt
  /// otherwise.
  std::optional<int64_t> constantStep(BlockArgument iterArg) {
    auto loop = dyn_cast<scf::ForOp>(iterArg.getOwner()->getParentOp());
    if (!loop || iterArg.getArgNumber() == 0)
      return std::nullopt;
    unsigned idx = iterArg.getArgNumber() - 1;
    Value yielded = loop.getBody()->getTerminator()->getOperand(idx);
    Canon y = get(yielded);
    Canon self = get(iterArg);
    if (y.root != self.root || self.root != iterArg)
      return std::nullopt;
    return y.offset - self.offset;
  }

  /// The same root, or identical start-state ops (same attributes, no
  /// operands): the states of one loop's iter args that start there are
  /// related (not states in general: two pipelines' states may start alike).
  static bool sameRoot(Value a, Value b) {
    if (a == b)
      return true;
    auto ma = a.getDefiningOp<StateMakeOp>(), mb = b.getDefiningOp<StateMakeOp>();
    return ma && mb && ma->getNumOperands() == 0 &&
           OperationEquivalence::isEquivalentTo(
               ma, mb, OperationEquivalence::IgnoreLocations);
  }

private:
  Canon getRoot(Value root, int depth) {
    if (auto arg = dyn_cast<BlockArgument>(root)) {
      auto loop = dyn_cast<scf::ForOp>(arg.getOwner()->getParentOp());
      if (loop && arg.getArgNumber() > 0)
        return iterArgCanon(loop, arg.getArgNumber() - 1, depth);
      return {root, 0};
    }
    if (auto loop = root.getDefiningOp<scf::ForOp>()) {
      unsigned idx = cast<OpResult>(root).getResultNumber();
      Canon in = iterArgCanon(loop, idx, depth);
      unsigned leader = cast<BlockArgument>(in.root).getArgNumber() - 1;
      return {loop.getResult(leader), in.offset};
    }
    return {root, 0};
  }

  /// Iter arg `idx` of `loop` as (leader iter arg, offset).
  Canon iterArgCanon(scf::ForOp loop, unsigned idx, int depth) {
    decideLoop(loop, depth);
    if (auto it = decided.find({loop.getOperation(), idx}); it != decided.end())
      return it->second;
    return {loop.getRegionIterArgs()[idx], 0}; // being decided
  }

  /// Relates the state iter args of `loop`, enclosing loops first: an inner
  /// loop's start states are the outer loop's iter args, and the outer
  /// loop's yields are the inner loop's results.
  void decideLoop(scf::ForOp loop, int depth) {
    if (!started.insert(loop.getOperation()).second)
      return;
    if (auto parent = loop->getParentOfType<scf::ForOp>())
      decideLoop(parent, depth + 1);
    for (unsigned idx = 0; idx < loop.getNumRegionIterArgs(); ++idx)
      decideIterArg(loop, idx, depth);
  }

  /// Tentatively relates `idx` to the first earlier leader iter arg whose
  /// initial value has the same root; keeps it only if both yields advance
  /// them in step.
  void decideIterArg(scf::ForOp loop, unsigned idx, int depth) {
    auto key = std::make_pair(loop.getOperation(), idx);
    BlockArgument self = loop.getRegionIterArgs()[idx];
    decided[key] = {self, 0};
    if (!isa<StateType>(self.getType()))
      return;
    Canon init = get(loop.getInitArgs()[idx], depth + 1);
    Operation *term = loop.getBody()->getTerminator();
    for (unsigned j = 0; j < idx; ++j) {
      BlockArgument other = loop.getRegionIterArgs()[j];
      if (!isa<StateType>(other.getType()) ||
          decided[{loop.getOperation(), j}].root != other)
        continue; // only leaders of groups
      Canon leadInit = get(loop.getInitArgs()[j], depth + 1);
      if (!sameRoot(leadInit.root, init.root))
        continue;
      int64_t d = init.offset - leadInit.offset;
      decided[key] = {other, d};
      Canon yLead = get(term->getOperand(j), depth + 1);
      Canon yThis = get(term->getOperand(idx), depth + 1);
      if (yLead.root == yThis.root && yThis.offset - yLead.offset == d)
        return;
      decided[key] = {self, 0};
      forgetNested(loop);
    }
  }

  /// Inner loops decided under a rejected assumption are decided again.
  void forgetNested(scf::ForOp loop) {
    loop.getBody()->walk([&](scf::ForOp inner) {
      started.erase(inner.getOperation());
      for (unsigned i = 0; i < inner.getNumRegionIterArgs(); ++i)
        decided.erase({inner.getOperation(), i});
    });
  }

  llvm::DenseSet<Operation *> started;
  DenseMap<std::pair<Operation *, unsigned>, Canon> decided;
};

} // namespace mlir::pipeline::protocol::asyncread

#endif // PIPELINE_MLIR_TRANSFORMS_ASYNCREADSTATES_H
