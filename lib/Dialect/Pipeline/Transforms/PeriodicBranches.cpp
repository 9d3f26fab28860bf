//===- PeriodicBranches.cpp - verbs on every m-th iteration ---------------===//
//
// Property 1 (balance) for a branch on the loop's own iteration. Check 1
// counts a loop body structurally; a verb under an scf.if on the induction
// variable it leaves uncounted, since a peeled first or last iteration
// (`if i == 0`, `if i + 1 < n`) is compensated outside the loop. A
// condition that repeats every m iterations is different: `if i % 2 == 0:
// release` releases on half the iterations of a loop that waits on every
// one, whatever the trip count, so the held stages grow with it and the
// pipeline stalls once all are held; nothing outside the loop can make up
// for a shortfall that grows with the trip count.
//
// Decided here: a loop with a run-time trip count and a constant,
// non-negative start and a constant step; scf.ifs directly in its body whose condition is a
// function of `(a * i + b) % m` terms (constants a, b, m, through arith
// ops), so that it repeats every m iterations (the lcm of the m's, at most
// 64). The condition is evaluated for one period of iterations (the
// checker's evaluator, evalWithValue, with the induction variable given);
// each
// pipeline side's opening and closing verbs (acquire / commit, wait /
// release, order wait / arrive) are counted over that period, the branches
// weighted by the iterations that take them, the rest of the body once per
// iteration. Unequal counts are an error on the branch's verb. A body with
// any other branch that is not a thread guard (a uniform or non-periodic
// loop-variable condition), or with the side's verbs in a nested loop, is
// left to check 1 and the simulator.
//
//===----------------------------------------------------------------------===//

#include "ProtocolChecks.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

#include "llvm/ADT/MapVector.h"

#include <numeric>

using namespace mlir;
using namespace mlir::pipeline;
using namespace mlir::pipeline::protocol;

namespace {

constexpr int64_t kMaxPeriod = 64;

/// Whether `v` is `a * iv + b` with constants a, b (through casts).
bool isAffineInIv(Value v, Value iv, int depth = 0) {
  if (v == iv || getConstantInt(v))
    return true;
  Operation *def = v.getDefiningOp();
  if (!def || depth > 16)
    return false;
  if (isa<arith::IndexCastOp, arith::IndexCastUIOp, arith::ExtSIOp,
          arith::ExtUIOp>(def))
    return isAffineInIv(def->getOperand(0), iv, depth + 1);
  if (isa<arith::AddIOp, arith::SubIOp>(def))
    return isAffineInIv(def->getOperand(0), iv, depth + 1) &&
           isAffineInIv(def->getOperand(1), iv, depth + 1);
  if (isa<arith::MulIOp>(def))
    return (getConstantInt(def->getOperand(0)) &&
            isAffineInIv(def->getOperand(1), iv, depth + 1)) ||
           (getConstantInt(def->getOperand(1)) &&
            isAffineInIv(def->getOperand(0), iv, depth + 1));
  return false;
}

/// The period in iterations of `v`, a function of `iv` only through
/// remainders of affine terms by constants: 1 when it does not depend on
/// `iv`, nullopt when it depends on it otherwise, or on anything but
/// constants and `iv` (kernel arguments, thread ids, memory).
std::optional<int64_t> periodOf(Value v, Value iv, int depth = 0) {
  if (getConstantInt(v))
    return 1;
  if (v == iv || depth > 32)
    return std::nullopt;
  Operation *def = v.getDefiningOp();
  if (!def || !isa<arith::ArithDialect>(def->getDialect()) ||
      def->getNumRegions() != 0)
    return std::nullopt;
  if (isa<arith::RemSIOp, arith::RemUIOp>(def)) {
    std::optional<int64_t> m = getConstantInt(def->getOperand(1));
    if (m && *m > 0 && isAffineInIv(def->getOperand(0), iv))
      return *m;
  }
  int64_t period = 1;
  for (Value operand : def->getOperands()) {
    std::optional<int64_t> p = periodOf(operand, iv, depth + 1);
    if (!p)
      return std::nullopt;
    period = std::lcm(period, *p);
    if (period > kMaxPeriod)
      return std::nullopt;
  }
  return period;
}

/// Opening and closing verbs of one pipeline side over one period.
struct Tally {
  int64_t open = 0;
  int64_t close = 0;
  bool unknown = false;
  /// A verb under a periodic branch, to report at.
  Operation *branchVerb = nullptr;
};

/// Adds `times` x the side verbs in `region` (at any depth, thread guards
/// included) to `into`; a verb in a loop nested in `region` makes its side
/// unknown.
void tallyRegion(Region &region, scf::ForOp loop, int64_t times,
                 llvm::MapVector<PairKey, Tally> &into, bool periodic) {
  region.walk([&](Operation *op) {
    std::optional<std::pair<PairKey, bool>> half = classifyPairVerb(op);
    if (!half)
      return;
    Tally &tally = into[half->first];
    if (op->getParentOfType<LoopLikeOpInterface>() != loop) {
      tally.unknown = true;
      return;
    }
    (half->second ? tally.open : tally.close) += times;
    if (periodic && !tally.branchVerb)
      tally.branchVerb = op;
  });
}

/// A periodic branch of the body: its scf.if, the period and how many of
/// its iterations take the then branch.
struct PeriodicIf {
  scf::IfOp ifOp;
  int64_t period;
  int64_t taken;
};

std::string describeCondition(const PeriodicIf &p) {
  return std::to_string(p.taken) + " of every " + std::to_string(p.period) +
         " iterations";
}

} // namespace

LogicalResult protocol::checkPeriodicBranches(FunctionOpInterface fn) {
  bool failed = false;
  fn->walk([&](scf::ForOp loop) {
    if (getConstantTripCount(loop))
      return;
    std::optional<int64_t> lb = getConstantInt(loop.getLowerBound());
    std::optional<int64_t> step = getConstantInt(loop.getStep());
    // Non-negative iterations: the evaluation's signed and unsigned
    // orders and remainders agree there.
    if (!lb || !step || *lb < 0 || *step <= 0)
      return;
    Value iv = loop.getInductionVar();
    Block *body = loop.getBody();

    // The periodic branches, and the period of the body.
    SmallVector<PeriodicIf> periodic;
    int64_t period = 1;
    for (Operation &op : *body) {
      auto ifOp = dyn_cast<scf::IfOp>(&op);
      if (!ifOp)
        continue;
      std::optional<int64_t> p = periodOf(ifOp.getCondition(), iv);
      if (!p || *p == 1)
        continue;
      int64_t taken = 0;
      for (int64_t k = 0; k < *p; ++k) {
        std::optional<int64_t> c =
            evalWithValue(ifOp.getCondition(), iv, *lb + k * *step);
        if (!c) {
          taken = -1;
          break;
        }
        taken += *c != 0;
      }
      if (taken <= 0 || taken == *p)
        continue;
      periodic.push_back({ifOp, *p, taken});
      period = std::lcm(period, *p);
    }
    if (periodic.empty() || period > kMaxPeriod)
      return;

    // Each side's verbs over one period of the body.
    llvm::MapVector<PairKey, Tally> tallies;
    for (Operation &op : *body) {
      auto ifOp = dyn_cast<scf::IfOp>(&op);
      auto branch = llvm::find_if(
          periodic, [&](const PeriodicIf &p) { return p.ifOp == ifOp; });
      if (ifOp && branch != periodic.end()) {
        int64_t cycles = period / branch->period;
        tallyRegion(ifOp.getThenRegion(), loop, cycles * branch->taken,
                    tallies, /*periodic=*/true);
        tallyRegion(ifOp.getElseRegion(), loop,
                    cycles * (branch->period - branch->taken), tallies,
                    /*periodic=*/true);
        continue;
      }
      llvm::MapVector<PairKey, Tally> here;
      for (Region &region : op.getRegions())
        tallyRegion(region, loop, period, here, /*periodic=*/false);
      if (std::optional<std::pair<PairKey, bool>> half = classifyPairVerb(&op))
        (half->second ? here[half->first].open : here[half->first].close) +=
            period;
      // Another branch on data or on the iteration: its side is not
      // decided here.
      bool undecided = ifOp && (isUniformCondition(ifOp.getCondition()) ||
                                isLoopVariableCondition(ifOp.getCondition()));
      for (auto &[key, tally] : here) {
        Tally &dst = tallies[key];
        dst.open += tally.open;
        dst.close += tally.close;
        dst.unknown |= tally.unknown || undecided;
      }
    }

    for (auto &[key, tally] : tallies) {
      if (tally.unknown || !tally.branchVerb || tally.open == tally.close)
        continue;
      PeriodicIf branch = *llvm::find_if(
          periodic, [&, &verb = tally.branchVerb](const PeriodicIf &p) {
            return p.ifOp->isAncestor(verb);
          });
      bool consumer = key.second == kConsumerSide;
      bool order = !consumer && getPipelineType(key.first).getKind() ==
                                    PipelineKind::Order;
      PairWords words = wordsFor(key);
      bool shortOfClosing = tally.open > tally.close;
      StringRef fix = consumer ? (shortOfClosing ? "release" : "wait on")
                      : order  ? (shortOfClosing ? "hand on" : "wait for")
                               : (shortOfClosing ? "commit" : "acquire");
      InFlightDiagnostic diag = tally.branchVerb->emitError();
      diag << describe(key.first) << ": " << tally.branchVerb->getName()
           << " runs on " << describeCondition(branch)
           << " (its scf.if's condition repeats every " << branch.period
           << " iterations), and the loop's trip count is only known at run "
              "time: every "
           << period << " iterations the loop " << words.firstDoes << " "
           << stages(tally.open) << " but " << words.secondDoes << " "
           << tally.close
           << ", so the difference grows with the trip count and the "
              "pipeline stalls (balance them over each period: "
           << fix << " on the iterations that take the branch as many stages "
              "as the period needs, or " << fix << " on every iteration)";
      diag.attachNote(branch.ifOp.getLoc())
          << "the branch on the iteration is here";
      diag.attachNote(loop.getLoc()) << "in this loop";
      noteCreate(diag, key.first);
      failed = true;
    }
  });
  return failure(failed);
}
