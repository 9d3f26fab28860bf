//===- RoleHandOver.cpp - a stage release left to another role -------------===//
//
// What check 1 (BalanceChecks.cpp) asks of two roles before it counts one
// role's releases for the other's waits: a named barrier both meet between
// the last wait of the one and the first release of the other, and, for
// roles with a loop each, loops over the same range. Check 8's reads of one
// role name the other's stages under the same range rule
// (AsyncReadHandBack.cpp).
//
//===----------------------------------------------------------------------===//

#include "ProtocolChecks.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

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
bool protocol::handsOverAtBarrier(Block &hand, Block &rel, Value pipe,
                                  Operation *anchor, Operation **barrier) {
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
  if (static_cast<uint64_t>(both.count()) != idOf(relBar).second)
    return false;
  if (barrier)
    *barrier = relBar;
  return true;
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

std::optional<std::pair<int64_t, int64_t>>
protocol::namedBarrierId(Operation *op) {
  if (auto s = dyn_cast<NamedBarrierSyncOp>(op); s && !s.getIndex())
    return std::make_pair<int64_t, int64_t>(s.getBarrierId(), s.getNumThreads());
  if (auto a = dyn_cast<NamedBarrierArriveOp>(op); a && !a.getIndex())
    return std::make_pair<int64_t, int64_t>(a.getBarrierId(), a.getNumThreads());
  return std::nullopt;
}

/// How many times the role of `loop` meets the named barrier `id` before
/// (`after`: after) the loop, straight-line (the ops on that side of it in
/// its block and in the blocks around it, up to its role block); nullopt
/// when a meet sits in a loop or branch there (not counted). `upTo`: count
/// only the meets before that op (after the loop), the op itself or an op
/// around it ending the count.
static std::optional<int64_t>
meetsBeside(scf::ForOp loop, std::pair<int64_t, int64_t> id, bool after,
            Operation *upTo = nullptr) {
  Block *role = getRoleBlock(loop);
  int64_t count = 0;
  for (Operation *cur = loop; cur && cur->getBlock();
       cur = cur->getParentOp()) {
    for (Operation *o = after ? cur->getNextNode() : cur->getPrevNode(); o;
         o = after ? o->getNextNode() : o->getPrevNode()) {
      if (upTo && (o == upTo || o->isAncestor(upTo)))
        return count;
      if (namedBarrierId(o) == id) {
        ++count;
        continue;
      }
      bool nested = false;
      o->walk([&](Operation *in) {
        if (in != o && namedBarrierId(in) == id)
          nested = true;
      });
      if (nested)
        return std::nullopt;
    }
    if (cur->getBlock() == role || isa<FunctionOpInterface>(cur->getParentOp()))
      break;
  }
  return upTo ? std::nullopt : std::optional<int64_t>(count);
}

static std::optional<int64_t>
meetsBefore(scf::ForOp loop, std::pair<int64_t, int64_t> id) {
  return meetsBeside(loop, id, /*after=*/false);
}

std::optional<int64_t> protocol::meetIndexAfter(scf::ForOp loop,
                                                Operation *barrier) {
  std::optional<std::pair<int64_t, int64_t>> id = namedBarrierId(barrier);
  if (!id)
    return std::nullopt;
  return meetsBeside(loop, *id, /*after=*/true, barrier);
}

/// `y - x` when it is a constant: both constants, or one the other plus
/// or minus a constant (arith.addi / arith.subi).
static std::optional<int64_t> constantDiff(Value x, Value y) {
  if (x == y)
    return 0;
  std::optional<int64_t> cx = getConstantInt(x), cy = getConstantInt(y);
  if (cx && cy)
    return *cy - *cx;
  auto offsetOf = [](Value v, Value base) -> std::optional<int64_t> {
    if (auto add = v.getDefiningOp<arith::AddIOp>()) {
      if (add.getLhs() == base)
        return getConstantInt(add.getRhs());
      if (add.getRhs() == base)
        return getConstantInt(add.getLhs());
    }
    if (auto sub = v.getDefiningOp<arith::SubIOp>(); sub && sub.getLhs() == base)
      if (std::optional<int64_t> c = getConstantInt(sub.getRhs()))
        return -*c;
    return std::nullopt;
  };
  if (std::optional<int64_t> d = offsetOf(y, x))
    return d;
  if (std::optional<int64_t> d = offsetOf(x, y))
    return -*d;
  return std::nullopt;
}

/// How two roles' loops relate (see LoopRelation).
LoopRelation protocol::relateLoops(scf::ForOp a, scf::ForOp b,
                                   Operation *barrier) {
  if (sameLoopRange(a, b))
    return {LoopRelation::Related, 0, 0};
  std::optional<int64_t> step = getConstantInt(a.getStep());
  std::optional<int64_t> dStep = constantDiff(a.getStep(), b.getStep());
  std::optional<int64_t> dLow = constantDiff(a.getLowerBound(), b.getLowerBound());
  std::optional<int64_t> dUp = constantDiff(a.getUpperBound(), b.getUpperBound());
  if (!dStep || *dStep != 0 || !dLow || !dUp)
    return {LoopRelation::Unrelated, 0, 0};
  if (!step || *step <= 0 || *dLow % *step || *dUp % *step)
    return {LoopRelation::Unrelated, 0, 0};
  int64_t k = *dLow / *step, tail = *dUp / *step;
  std::optional<std::pair<int64_t, int64_t>> id =
      barrier ? namedBarrierId(barrier) : std::nullopt;
  if (!id)
    return {LoopRelation::NotProven, 0, 0};
  // A peel before the later loop: the later role meets the barrier k more
  // times before its loop. A peel after the loop that ends earlier: that
  // role meets it `tail` more times after its loop, straight-line.
  std::optional<int64_t> ma = meetsBefore(a, *id), mb = meetsBefore(b, *id);
  if (!ma || !mb)
    return {LoopRelation::NotProven, 0, 0};
  if (*mb - *ma != k)
    return {LoopRelation::Unrelated, 0, 0};
  if (tail != 0) {
    std::optional<int64_t> ta = meetsBeside(a, *id, /*after=*/true),
                           tb = meetsBeside(b, *id, /*after=*/true);
    if (!ta || !tb)
      return {LoopRelation::NotProven, 0, 0};
    if (*ta - *tb != tail)
      return {LoopRelation::Unrelated, 0, 0};
  }
  return {LoopRelation::Related, k, tail};
}

void protocol::warnHandOverNotProven(Operation *release, int64_t id,
                                     Operation *otherLoop, scf::ForOp mine) {
  InFlightDiagnostic diag =
      release->emitWarning()
      << release->getName() << " after named barrier " << id
      << ": the hand-over from another role's loop, whose asynchronous reads "
         "are in flight at that barrier, is not proven: the two loops' ranges "
         "differ other than by peels this checker follows (the same step; "
         "lower bounds k steps apart and k more meets of this barrier before "
         "the later loop; upper bounds k steps apart and k more meets after "
         "the loop that ends earlier, straight-line, in either role), so "
         "the release is not checked against those reads; give both loops "
         "the same range or peel the iterations explicitly";
  diag.attachNote(otherLoop->getLoc()) << "the other role's loop";
  diag.attachNote(mine.getLoc()) << "this release's loop";
}

void protocol::warnHandOverNotProven(scf::ForOp loop, scf::ForOp other,
                                     Value pipe) {
  Operation *wait = nullptr;
  loop.getBody()->walk([&](ConsumerWaitOp w) {
    if (!wait && w.getPipeline() == pipe)
      wait = w;
  });
  InFlightDiagnostic diag =
      (wait ? wait : loop.getOperation())->emitWarning();
  diag << describe(pipe)
       << ": this loop's waits are left to another role's loop whose range "
          "differs from it by a peel this checker does not follow (a meet "
          "of the hand-over barrier before or after a loop inside a branch "
          "or loop): the hand-over is not proven; peel explicitly, "
          "straight-line, or give both loops the same range";
  diag.attachNote(loop.getLoc()) << "in this loop";
  diag.attachNote(other.getLoc())
      << "the other role's loop, which releases them";
}
