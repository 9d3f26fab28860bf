//===- RoleHandOver.cpp - a stage release left to another role -------------===//
//
// What check 1 (BalanceChecks.cpp) asks of two roles before it counts one
// role's releases for the other's waits: a named barrier both meet between
// the last wait of the one and the first release of the other, and, for
// roles with a loop each, loops over the same range. Check 8's reads of one
// role name the other's stages under the same range rule
// (AsyncReadChecks.cpp).
//
//===----------------------------------------------------------------------===//

#include "ProtocolChecks.h"

using namespace mlir;
using namespace mlir::pipeline;
using namespace mlir::pipeline::protocol;

/// The named barrier (no index) that `op`'s block, or a block around it up
/// to `within`, holds after (`after`) or before `op`, at its own level: a
/// sync, or (after only) an arrive.
static Operation *barrierBeside(Operation *op, Block &within, bool after) {
  for (Operation *cur = op; cur && cur->getBlock();
       cur = cur->getParentOp()) {
    for (Operation *o = after ? cur->getNextNode() : cur->getPrevNode(); o;
         o = after ? o->getNextNode() : o->getPrevNode()) {
      if (auto sync = dyn_cast<NamedBarrierSyncOp>(o); sync && !sync.getIndex())
        return o;
      if (auto arrive = dyn_cast<NamedBarrierArriveOp>(o);
          after && arrive && !arrive.getIndex())
        return o;
    }
    if (cur->getBlock() == &within)
      break;
  }
  return nullptr;
}

/// A consumer role (`hand`) that waits on stages and leaves their release
/// to another role (`rel`, which waits on the same stages and releases
/// them): the two are ordered by one named barrier when `hand` arrives or
/// syncs on it after its last wait, `rel` syncs on it (blocking) before its
/// first release, with the same id and thread count, and that count is the
/// two roles' threads. Then `rel`'s releases end both holds.
bool protocol::handsOverAtBarrier(Block &hand, Block &rel, Value pipe, Operation *anchor) {
  Operation *lastWait = nullptr, *firstRelease = nullptr;
  hand.walk([&](ConsumerWaitOp w) {
    if (w.getPipeline() == pipe)
      lastWait = w;
  });
  rel.walk([&](ConsumerReleaseOp r) {
    if (r.getPipeline() == pipe && !firstRelease)
      firstRelease = r;
  });
  if (!lastWait || !firstRelease)
    return false;
  Operation *handBar = barrierBeside(lastWait, hand, /*after=*/true);
  Operation *relBar = barrierBeside(firstRelease, rel, /*after=*/false);
  if (!handBar || !relBar)
    return false;
  auto idOf = [](Operation *op) {
    if (auto s = dyn_cast<NamedBarrierSyncOp>(op))
      return std::make_pair(s.getBarrierId(), s.getNumThreads());
    auto a = cast<NamedBarrierArriveOp>(op);
    return std::make_pair(a.getBarrierId(), a.getNumThreads());
  };
  if (idOf(handBar) != idOf(relBar))
    return false;
  auto fn = anchor->getParentOfType<FunctionOpInterface>();
  int64_t blockDim = fn ? getBlockDim(fn, Options{}) : 0;
  if (blockDim <= 0)
    return false;
  std::optional<Executors> a = getExecutors(handBar, blockDim);
  std::optional<Executors> b = getExecutors(relBar, blockDim);
  if (!a || !b || !a->wholeWarps || !b->wholeWarps ||
      a->threads.anyCommon(b->threads))
    return false;
  llvm::BitVector both = a->threads;
  both |= b->threads;
  return static_cast<uint64_t>(both.count()) == idOf(relBar).second;
}

/// Two loops over the same range: equal bounds and step (the same values
/// or equal constants).
bool protocol::sameLoopRange(scf::ForOp a, scf::ForOp b) {
  auto same = [](Value x, Value y) {
    if (x == y)
      return true;
    std::optional<int64_t> cx = getConstantInt(x), cy = getConstantInt(y);
    return cx && cy && *cx == *cy;
  };
  return same(a.getLowerBound(), b.getLowerBound()) &&
         same(a.getUpperBound(), b.getUpperBound()) &&
         same(a.getStep(), b.getStep());
}
