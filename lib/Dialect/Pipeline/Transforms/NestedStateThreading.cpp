//===- NestedStateThreading.cpp - states through nested loops -------------===//
//
// Part of property 11 of pipeline-verify-protocol (the stage-balance check,
// StageBalance.cpp, runs it once the counts agree): state threading through
// nested loop results, counted with the polynomials of SymbolicCounts.h.
//
//===----------------------------------------------------------------------===//

#include "ProtocolChecks.h"
#include "SymbolicCounts.h"

#include "llvm/ADT/MapVector.h"

using namespace mlir;
using namespace mlir::pipeline;
using namespace mlir::pipeline::protocol;

namespace {

/// Check 2 (StateThreadingChecks.cpp) counts the advances of a loop-carried state
/// along its yield chain and the stages the body uses, as constants; it
/// leaves alone a chain that passes through a nested loop's results (the
/// persistent tile loop hands its state to the k-block loop and yields what
/// that loop returns) and uses inside a nested loop. Here both sides are
/// polynomials: a nested loop's result advances its init by the inner
/// per-iteration advances times the inner trip count, and the uses inside
/// it count times its trip count (a sum where the inner bound depends on
/// the tile). An extra or a missing advance before the k-block loop (a
/// stage skipped or reused in every tile) is then an error at the loop.
class NestedThreading {
public:
  explicit NestedThreading(Canonicalizer &canon)
      : canon(canon), atoms(canon.atoms) {}

  bool run(FunctionOpInterface fn) {
    bool failed = false;
    fn->walk([&](scf::ForOp loop) {
      for (auto [idx, arg] : llvm::enumerate(loop.getRegionIterArgs()))
        if (isa<StateType>(arg.getType()))
          failed |= checkChain(loop, idx, arg);
    });
    return failed;
  }

private:
  Canonicalizer &canon;
  AtomTable &atoms;
  /// Loop extents the trip counts assume non-negative (tripCount).
  std::vector<Poly> constraints;
  bool throughNested = false;

  struct Use {
    Poly first, second; // acquires / waits, commits / releases
    Operation *firstOp = nullptr, *secondOp = nullptr;
  };
  using Uses = llvm::MapVector<Value, Use>;

  /// Stages from `arg` to `v` along the chain; nullopt when it is not one
  /// (a fresh state, branches that advance differently, a run-time amount).
  std::optional<Poly> advances(Value v, Value arg, int depth = 0) {
    if (depth > 256)
      return std::nullopt;
    if (v == arg)
      return Poly();
    Operation *def = v.getDefiningOp();
    if (auto adv = dyn_cast_or_null<StateAdvanceOp>(def)) {
      int64_t amount = 1;
      if (adv.getAmount()) {
        std::optional<int64_t> c = getConstantInt(adv.getAmount());
        // `advance(n)` by more than one stage is a deliberate skip: the
        // ping-pong consumers of CUTLASS's GEMM each jump over the stages
        // the other warpgroup consumes, so their chains advance more than
        // they use. Who consumes the skipped stages is the role-level
        // counts' and PipelineOrder's business (and the simulator's), not
        // this chain's: leave such chains undecided.
        if (!c || *c != 1)
          return std::nullopt;
        amount = *c;
      }
      std::optional<Poly> rest = advances(adv.getState(), arg, depth + 1);
      if (!rest)
        return std::nullopt;
      return *rest + Poly::constant(amount);
    }
    if (auto ifOp = dyn_cast_or_null<scf::IfOp>(def)) {
      unsigned idx = cast<OpResult>(v).getResultNumber();
      std::optional<Poly> t =
          advances(ifOp.thenYield().getOperand(idx), arg, depth + 1);
      std::optional<Poly> e =
          ifOp.getElseRegion().empty()
              ? std::nullopt
              : advances(ifOp.elseYield().getOperand(idx), arg, depth + 1);
      if (!t || !e || *t != *e)
        return std::nullopt;
      return t;
    }
    if (auto inner = dyn_cast_or_null<scf::ForOp>(def)) {
      unsigned idx = cast<OpResult>(v).getResultNumber();
      Value innerArg = inner.getRegionIterArgs()[idx];
      std::optional<Poly> per = advances(
          inner.getBody()->getTerminator()->getOperand(idx), innerArg,
          depth + 1);
      std::optional<Poly> before =
          advances(inner.getInitArgs()[idx], arg, depth + 1);
      std::optional<Poly> n = tripCount(inner, canon, constraints);
      if (!per || !before || !n)
        return std::nullopt;
      throughNested = true;
      return *before + sumOver(canon.ivAtom(inner), *per, *n, atoms);
    }
    return std::nullopt;
  }

  /// Verbs of each pipeline on states of `chain` in one execution of
  /// `block`, extending `chain` in program order (advances, branch and
  /// loop results, a nested loop's iter_args); nullopt when a branch uses
  /// the chain differently on its two sides or another region op uses it.
  std::optional<Uses> uses(Block &block, llvm::SetVector<Value> &chain,
                           bool &nested) {
    Uses out;
    auto add = [&](const Uses &more, const Poly &times) {
      for (auto &[pipe, u] : more) {
        Use &to = out[pipe];
        to.first = to.first + multiply(u.first, times, atoms);
        to.second = to.second + multiply(u.second, times, atoms);
        if (!to.firstOp)
          to.firstOp = u.firstOp;
        if (!to.secondOp)
          to.secondOp = u.secondOp;
      }
    };
    for (Operation &op : block) {
      if (std::optional<VerbRef> verb = getVerb(&op)) {
        if (!chain.contains(verb->state))
          continue;
        Use &u = out[verb->pipeline];
        if (verb->verb == Verb::Acquire || verb->verb == Verb::Wait) {
          u.first = u.first + Poly::constant(1);
          if (!u.firstOp)
            u.firstOp = &op;
        } else if (verb->verb == Verb::Commit || verb->verb == Verb::Release) {
          u.second = u.second + Poly::constant(1);
          if (!u.secondOp)
            u.secondOp = &op;
        }
        continue;
      }
      if (auto adv = dyn_cast<StateAdvanceOp>(&op)) {
        if (chain.contains(adv.getState()))
          chain.insert(adv.getResult());
        continue;
      }
      if (auto ifOp = dyn_cast<scf::IfOp>(&op)) {
        std::optional<Uses> t =
            uses(ifOp.getThenRegion().front(), chain, nested);
        std::optional<Uses> e = Uses();
        if (!ifOp.getElseRegion().empty())
          e = uses(ifOp.getElseRegion().front(), chain, nested);
        if (!t || !e)
          return std::nullopt;
        bool same = t->size() == e->size();
        for (auto &[pipe, u] : *t) {
          auto it = e->find(pipe);
          same &= it != e->end() && it->second.first == u.first &&
                  it->second.second == u.second;
        }
        if (!same && !(isGuardIf(ifOp) && e->empty()))
          return std::nullopt;
        add(*t, Poly::constant(1));
        for (auto [i, res] : llvm::enumerate(ifOp.getResults())) {
          bool fromChain = chain.contains(ifOp.thenYield().getOperand(i));
          if (!ifOp.getElseRegion().empty())
            fromChain |= chain.contains(ifOp.elseYield().getOperand(i));
          if (fromChain)
            chain.insert(res);
        }
        continue;
      }
      if (auto inner = dyn_cast<scf::ForOp>(&op)) {
        bool carries = false;
        for (auto [i, init] : llvm::enumerate(inner.getInitArgs()))
          if (chain.contains(init)) {
            chain.insert(inner.getRegionIterArgs()[i]);
            carries = true;
          }
        bool innerNested = false;
        std::optional<Uses> body = uses(*inner.getBody(), chain, innerNested);
        if (!body)
          return std::nullopt;
        if (!body->empty()) {
          std::optional<Poly> n = tripCount(inner, canon, constraints);
          if (!n)
            return std::nullopt;
          nested = true;
          unsigned iv = canon.ivAtom(inner);
          for (auto &[pipe, u] : *body) {
            Use &to = out[pipe];
            to.first = to.first + sumOver(iv, u.first, *n, atoms);
            to.second = to.second + sumOver(iv, u.second, *n, atoms);
            if (!to.firstOp)
              to.firstOp = u.firstOp;
            if (!to.secondOp)
              to.secondOp = u.secondOp;
          }
        }
        if (carries)
          for (auto [i, init] : llvm::enumerate(inner.getInitArgs()))
            if (chain.contains(init))
              chain.insert(inner.getResult(i));
        continue;
      }
      if (op.getNumRegions() == 0)
        continue;
      bool touches = false;
      op.walk([&](Operation *in) {
        for (Value operand : in->getOperands())
          touches |= chain.contains(operand);
      });
      if (touches)
        return std::nullopt;
    }
    return out;
  }

  /// `p` summed over `loop` and every loop around it: a count of the whole
  /// kernel, free of loop variables, for findWitness.
  std::optional<Poly> closed(Poly p, scf::ForOp loop) {
    for (Operation *at = loop; at; at = at->getParentOp()) {
      auto l = dyn_cast<scf::ForOp>(at);
      if (!l)
        continue;
      std::optional<Poly> n = tripCount(l, canon, constraints);
      if (!n)
        return std::nullopt;
      p = sumOver(canon.ivAtom(l), p, *n, atoms);
    }
    if (!ivsOf(p, atoms).empty())
      return std::nullopt;
    return p;
  }

  bool checkChain(scf::ForOp loop, unsigned idx, Value arg) {
    throughNested = false;
    std::optional<Poly> adv =
        advances(loop.getBody()->getTerminator()->getOperand(idx), arg);
    llvm::SetVector<Value> chain;
    chain.insert(arg);
    bool nested = false;
    std::optional<Uses> used = uses(*loop.getBody(), chain, nested);
    // Chains check 2 decides (no nested loop on the way or around a use)
    // are its business.
    if (!adv || !used || (!throughNested && !nested))
      return false;
    for (auto &[pipe, u] : *used) {
      bool first = !u.first.isZero();
      const Poly &stages = first ? u.first : u.second;
      Operation *verbOp = first ? u.firstOp : u.secondOp;
      if (stages.isZero() || stages == *adv)
        continue;
      std::optional<Poly> a = closed(*adv, loop), b = closed(stages, loop);
      if (!a || !b || *a == *b)
        continue;
      std::optional<Witness> w = findWitness(*a, *b, constraints, atoms);
      if (!w)
        continue;
      std::optional<VerbRef> verb = getVerb(verbOp);
      InFlightDiagnostic diag = loop.emitError();
      diag << describe(pipe) << ": the state carried by this loop advances "
           << stagesOf(*adv, atoms)
           << " per iteration (through a nested loop's results) but the body "
           << (verb && verb->verb == Verb::Acquire   ? "acquires "
               : verb && verb->verb == Verb::Wait    ? "waits on "
               : verb && verb->verb == Verb::Commit  ? "commits "
                                                     : "releases ")
           << printPoly(stages, atoms) << " (over the kernel: " << w->text()
           << "): "
           << (w->a > w->b ? "stages are skipped and their barriers never "
                             "complete"
                           : "the next iteration reuses a stage still in "
                             "flight")
           << " (advance the state once per stage used, and pass the nested "
              "loop's result on)";
      diag.attachNote(verbOp->getLoc()) << "the state is used here";
      return true;
    }
    return false;
  }
};

} // namespace

bool protocol::checkNestedStateThreading(FunctionOpInterface fn,
                                         Canonicalizer &canon) {
  return NestedThreading(canon).run(fn);
}
