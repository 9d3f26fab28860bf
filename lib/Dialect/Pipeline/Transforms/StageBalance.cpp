//===- StageBalance.cpp - stage counts compared across roles --------------===//
//
// Property 11 of pipeline-verify-protocol. Check 1 balances the verbs of
// each loop body and role; it does not compare roles with each other. A
// producer that runs `n` iterations while its consumer runs `n - 1` (or a
// consumer loop over `k_blocks` against a producer loop over
// `k_blocks + 1`) passes it and hangs on the GPU in the producer's tail.
//
// Here, for every pipeline, each role's stage count over the whole kernel is
// a polynomial over the kernel's values: kernel arguments and the values
// computed from them with arith ops (`ceildiv(k, 64)` is one term), CTA ids
// and other CTA-uniform reads. A loop multiplies its body by
// `ceildiv(ub - lb, step)`; a branch on a kernel argument multiplies each
// side by the condition's indicator ([c] and 1 - [c]); a branch on the loop
// variable (a peeled first or last iteration: `i == 0`, `i + 1 < n`, any
// `a * i + b <cmp> c` in a loop of constant step) counts the iterations that
// take it.
// A loop from a constant start of 2 or more to a run-time bound (after a
// prologue of S stages) runs max(0, n - S) times, not n - S: with n < S the
// prologue's stages are more than the consumer takes (tripCount). The roles of a side must cover the other side's stages: every
// role all of them (cooperative consumers) or together all of them (roles
// that split the stages). Two counts that differ as polynomials are tested
// on values of the leaves for which every loop counted runs (ub >= lb): a
// disagreement there is an error naming both counts and the values; counts
// that differ only outside those values, or that depend on what cannot be
// counted (thread ids, memory, scf.while), are left alone (a remark with
// `stage-balance-remarks`).
//
// Counting is per CTA. Conditions on the thread or the CTA (warp index, CTA
// rank: the 2-CTA MMA role that runs in the pair leader only) split roles,
// as everywhere in the checker; the kind table decides which kinds have a
// consumer to compare with, and the clc_fetch_async producer, whose stages
// serve every CTA of the cluster from CTA 0, is not compared.
//
// Once the counts agree, a state that passes through a nested loop's
// results is checked to advance once per stage used, with the same
// polynomials (NestedStateThreading.cpp).
//
//===----------------------------------------------------------------------===//

#include "ProtocolChecks.h"
#include "SymbolicCounts.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/MathExtras.h"

#include <algorithm>
#include <map>
#include <random>

using namespace mlir;
using namespace mlir::pipeline;
using namespace mlir::pipeline::protocol;

namespace {

//===----------------------------------------------------------------------===//
// Conditions
//===----------------------------------------------------------------------===//

/// What an scf.if condition depends on, for counting.
enum class CondKind {
  Guard,    // elect / lane / thread guard inside a role: its then branch
  Role,     // splits threads or CTAs: each branch is a role of its own
  Uniform,  // kernel arguments and constants: an indicator
  LoopVar,  // a loop variable (peeled iterations)
  Data,     // memory, loop-carried values: not counted
};

struct Sources {
  bool thread = false, cta = false, loopVar = false, data = false;
};

void collect(Value v, Sources &s, int depth) {
  if (depth > 64) {
    s.data = true;
    return;
  }
  if (getConstantInt(v))
    return;
  if (auto arg = dyn_cast<BlockArgument>(v)) {
    Operation *owner = arg.getOwner()->getParentOp();
    if (auto gpuFn = dyn_cast_or_null<gpu::GPUFuncOp>(owner);
        gpuFn && gpuFn.isKernel())
      return;
    if (isa_and_nonnull<FunctionOpInterface>(owner)) {
      s.thread = true; // a helper's argument may be a thread id
      return;
    }
    if (auto loop = dyn_cast_or_null<scf::ForOp>(owner);
        loop && arg == loop.getInductionVar()) {
      s.loopVar = true;
      return;
    }
    s.data = true;
    return;
  }
  Operation *def = v.getDefiningOp();
  if (isThreadRead(def)) {
    s.thread = true;
    return;
  }
  if (isCtaRead(def)) {
    s.cta = true;
    return;
  }
  if (def->getName().getStringRef() == "nvvm.shfl.sync") {
    // The warp-index broadcast: a thread value.
    s.thread = true;
    return;
  }
  if (!isa<arith::ArithDialect>(def->getDialect()) ||
      def->getNumRegions() != 0) {
    s.data = true;
    return;
  }
  for (Value operand : def->getOperands())
    collect(operand, s, depth + 1);
}

CondKind classify(scf::IfOp ifOp) {
  if (isGuardIf(ifOp))
    return CondKind::Guard;
  Sources s;
  collect(ifOp.getCondition(), s, 0);
  if (s.thread || s.cta)
    return CondKind::Role;
  if (s.data)
    return CondKind::Data;
  if (s.loopVar)
    return CondKind::LoopVar;
  return CondKind::Uniform;
}

//===----------------------------------------------------------------------===//
// Counting one role
//===----------------------------------------------------------------------===//

enum VerbSlot { kAcquire = 0, kCommit, kWait, kRelease, kNumSlots };

struct Counts {
  std::array<Poly, kNumSlots> v;
  /// Set when a count depends on something not counted: the op and why.
  Operation *unknownAt = nullptr;
  std::string why;

  bool isZero() const {
    return !unknownAt && llvm::all_of(v, [](const Poly &p) { return p.isZero(); });
  }
  void markUnknown(Operation *op, StringRef reason) {
    if (!unknownAt) {
      unknownAt = op;
      why = reason.str();
    }
  }
  void add(const Counts &o) {
    for (int i = 0; i < kNumSlots; ++i)
      v[i] = v[i] + o.v[i];
    if (o.unknownAt)
      markUnknown(o.unknownAt, o.why);
  }
  Counts times(const Poly &k, const AtomTable &atoms) const {
    Counts r = *this;
    for (Poly &p : r.v)
      p = multiply(p, k, atoms);
    return r;
  }
};

class RoleCounter {
public:
  RoleCounter(Value pipe, Canonicalizer &canon)
      : pipe(pipe), canon(canon), atoms(canon.atoms) {}

  /// Loop extents (ub - lb) the counts assume non-negative, and iteration
  /// counts of loop-variable branches (0 <= count <= trips).
  std::vector<Poly> constraints;

  /// The counts of one execution of `block`, not entering other roles.
  Counts count(Block &block) {
    Counts c;
    for (Operation &op : block) {
      if (auto verb = getVerb(&op)) {
        if (verb->pipeline != pipe)
          continue;
        int slot = slotOf(verb->verb);
        if (slot >= 0)
          c.v[slot] = c.v[slot] + Poly::constant(1);
        continue;
      }
      if (auto loop = dyn_cast<scf::ForOp>(&op)) {
        Counts body = count(*loop.getBody());
        if (!body.isZero())
          c.add(closeLoop(body, loop));
        continue;
      }
      if (auto ifOp = dyn_cast<scf::IfOp>(&op)) {
        c.add(countIf(ifOp));
        continue;
      }
      if (op.getNumRegions() == 0)
        continue;
      bool uses = false;
      op.walk([&](Operation *inner) {
        if (auto verb = getVerb(inner); verb && verb->pipeline == pipe)
          uses = true;
      });
      if (uses)
        c.markUnknown(&op, ("a '" + op.getName().getStringRef() +
                            "' whose trip count is not known")
                               .str());
    }
    return c;
  }

  /// `c` (counted inside `block`) times what the ops around `block` up to
  /// the function multiply it by: loops, and branches that are not roles.
  Counts placed(Counts c, Block *block) {
    while (block) {
      Operation *parent = block->getParentOp();
      if (!parent || isa<FunctionOpInterface>(parent))
        break;
      if (auto loop = dyn_cast<scf::ForOp>(parent)) {
        c = closeLoop(c, loop);
      } else if (auto ifOp = dyn_cast<scf::IfOp>(parent)) {
        bool inThen = block->getParent() == &ifOp.getThenRegion();
        switch (classify(ifOp)) {
        case CondKind::Guard:
        case CondKind::Role:
          break;
        case CondKind::Uniform:
        case CondKind::LoopVar: {
          std::optional<Poly> ind = indicator(ifOp, inThen);
          if (!ind)
            c.markUnknown(ifOp, "a branch on a loop variable that is not "
                                "`iv <cmp> bound` of its loop");
          else
            c = c.times(*ind, atoms);
          break;
        }
        case CondKind::Data:
          c.markUnknown(ifOp, "a branch on a value read from memory or "
                              "carried by a loop");
          break;
        }
      } else {
        c.markUnknown(parent, ("a '" + parent->getName().getStringRef() +
                               "' whose trip count is not known")
                                  .str());
      }
      block = parent->getBlock();
    }
    return c;
  }

private:
  Value pipe;
  Canonicalizer &canon;
  AtomTable &atoms;

  static int slotOf(Verb v) {
    switch (v) {
    case Verb::Acquire:
      return kAcquire;
    case Verb::Commit:
      return kCommit;
    case Verb::Wait:
      return kWait;
    case Verb::Release:
      return kRelease;
    default:
      return -1;
    }
  }

  Counts countIf(scf::IfOp ifOp) {
    CondKind kind = classify(ifOp);
    if (kind == CondKind::Role)
      return {}; // other roles, counted on their own
    Counts t = count(ifOp.getThenRegion().front());
    Counts e;
    if (!ifOp.getElseRegion().empty())
      e = count(ifOp.getElseRegion().front());
    if (kind == CondKind::Guard)
      return t;
    bool same = !t.unknownAt && !e.unknownAt && t.v == e.v;
    if (same)
      return t;
    if (kind == CondKind::Data) {
      Counts r;
      r.markUnknown(ifOp, "a branch on a value read from memory or carried "
                          "by a loop, whose branches count differently");
      return r;
    }
    std::optional<Poly> ind = indicator(ifOp, /*inThen=*/true);
    if (!ind) {
      Counts r;
      r.markUnknown(ifOp, "a branch on a loop variable that is not "
                          "`iv <cmp> bound` of its loop");
      return r;
    }
    Counts r = t.times(*ind, atoms);
    r.add(e.times(Poly::constant(1) - *ind, atoms));
    return r;
  }

  /// [cond] (or 1 - [cond] for the else branch) as a polynomial.
  std::optional<Poly> indicator(scf::IfOp ifOp, bool inThen) {
    Value cond = ifOp.getCondition();
    std::optional<Poly> ind;
    if (classify(ifOp) == CondKind::LoopVar)
      ind = loopIndicator(ifOp);
    else
      ind = uniformIndicator(cond);
    if (!ind)
      return std::nullopt;
    return inThen ? *ind : Poly::constant(1) - *ind;
  }

  Poly uniformIndicator(Value cond) {
    auto cmp = cond.getDefiningOp<arith::CmpIOp>();
    if (!cmp)
      return canon.get(cond); // an i1 argument or pure i1 value: a 0/1 leaf
    Poly lhs = canon.get(cmp.getLhs()), rhs = canon.get(cmp.getRhs());
    std::string key = "cmp" + std::to_string(int(cmp.getPredicate())) +
                      canon.key(cmp.getLhs()) + canon.key(cmp.getRhs());
    Atom a{AtomKind::Indicator, ""};
    a.inner = lhs;
    a.other = rhs;
    a.pred = cmp.getPredicate();
    a.name = "[" + printPoly(lhs, atoms) + " " +
             arith::stringifyCmpIPredicate(cmp.getPredicate()).str() + " " +
             printPoly(rhs, atoms) + "]";
    return Poly::atom(atoms.get(key, a));
  }

  /// `a * iv + b <pred> c` for the innermost loop around the branch whose
  /// variable the condition reads (a constant step; b and c not depending
  /// on loop variables): `t + 1 < n` is `t < n - 1`, `n > t` is `t < n`;
  /// other a and steps: scaledLoopIndicator. The iterations that take the
  /// then branch, as an atom its loop closes.
  std::optional<Poly> loopIndicator(scf::IfOp ifOp) {
    auto cmp = ifOp.getCondition().getDefiningOp<arith::CmpIOp>();
    if (!cmp)
      return std::nullopt;
    arith::CmpIPredicate pred = cmp.getPredicate();
    // The condition as `diff pred 0`.
    Poly diff = canon.get(cmp.getLhs()) - canon.get(cmp.getRhs());
    scf::ForOp loop;
    unsigned iv = 0;
    int64_t coeff = 0;
    for (Operation *p = ifOp->getParentOp(); p; p = p->getParentOp()) {
      auto l = dyn_cast<scf::ForOp>(p);
      if (!l)
        continue;
      unsigned id = canon.ivAtom(l);
      if (auto it = diff.terms.find(Monomial{id}); it != diff.terms.end()) {
        loop = l;
        iv = id;
        coeff = it->second;
        break;
      }
    }
    std::optional<int64_t> step =
        loop ? getConstantInt(loop.getStep()) : std::nullopt;
    if (!loop || !step || *step <= 0)
      return std::nullopt;
    if ((coeff != 1 && coeff != -1) || *step != 1)
      return scaledLoopIndicator(ifOp, loop, diff, iv, coeff, *step, pred);
    Poly rest = diff - Poly::atom(iv).scaled(coeff);
    // a = 1: iv pred -rest; a = -1: rest pred iv, i.e. iv swapped-pred rest.
    Poly bound = coeff == 1 ? rest.scaled(-1) : rest;
    if (coeff == -1)
      pred = swapSides(pred);
    Poly lb = canon.get(loop.getLowerBound());
    Poly ub = canon.get(loop.getUpperBound());
    for (const Poly *p : {&bound, &lb, &ub})
      if (polyHas(*p, atoms, [](const Atom &x) { return x.loopVar || x.thread; }))
        return std::nullopt;
    // Iterations iv in [lb, ub) with `iv pred bound`, for a bound inside the
    // range (the counts then hold; the constraints record that).
    using P = arith::CmpIPredicate;
    Poly one = Poly::constant(1), n;
    switch (pred) {
    case P::eq:
      n = one;
      break;
    case P::ne:
      n = ub - lb - one;
      break;
    case P::sgt:
    case P::ugt:
      n = ub - bound - one;
      break;
    case P::sge:
    case P::uge:
      n = ub - bound;
      break;
    case P::slt:
    case P::ult:
      n = bound - lb;
      break;
    case P::sle:
    case P::ule:
      n = bound - lb + one;
      break;
    }
    // Bounds known at build time: count the iterations exactly (the bound
    // may lie outside [lb, ub), where the formulas above go negative or past
    // the trip count, and the constraints would then hold for no values).
    std::optional<int64_t> cb = bound.getConstant(), cl = lb.getConstant(),
                           cu = ub.getConstant();
    if (cb && cl && cu) {
      n = Poly::constant(countConstantIterations(*cl, *cu, pred, *cb));
    } else {
      constraints.push_back(n);
      constraints.push_back(ub - lb - n);
    }
    std::string key = "iv" + std::to_string(reinterpret_cast<uintptr_t>(
                                 ifOp.getCondition().getAsOpaquePointer()));
    Atom a{AtomKind::IvCount, "[" + printPoly(n, atoms) + " iterations]"};
    a.loop = loop;
    a.count = n;
    return Poly::atom(atoms.get(key, a));
  }

  /// `a * iv + rest <pred> 0` in a loop of constant step s, for any a != 0:
  /// `2 * i + 1 < n`, or `i + 1 < n` in `range(0, n, 2)`. The condition is
  /// `a' * iv < R` or its negation; `iv < ceildiv(R, a')` for a' > 0,
  /// `iv >= floordiv(-R, -a') + 1` for a' < 0; with iv = lb + s * j, the
  /// iterations below a bound B are ceildiv(B - lb, s). Constant bounds are
  /// counted by running the loop; eq / ne are counted there only.
  std::optional<Poly> scaledLoopIndicator(scf::IfOp ifOp, scf::ForOp loop,
                                          const Poly &diff, unsigned iv,
                                          int64_t coeff, int64_t step,
                                          arith::CmpIPredicate pred) {
    using P = arith::CmpIPredicate;
    Poly rest = diff - Poly::atom(iv).scaled(coeff);
    Poly lb = canon.get(loop.getLowerBound());
    Poly ub = canon.get(loop.getUpperBound());
    for (const Poly *p : {&rest, &lb, &ub})
      if (polyHas(*p, atoms, [](const Atom &x) { return x.loopVar || x.thread; }))
        return std::nullopt;
    Poly n;
    std::optional<int64_t> cr = rest.getConstant(), cl = lb.getConstant(),
                           cu = ub.getConstant();
    if (cr && cl && cu) {
      if ((*cu - *cl) / step > (int64_t(1) << 16))
        return std::nullopt;
      int64_t count = 0;
      for (int64_t x = *cl; x < *cu; x += step) {
        int64_t v = coeff * x + *cr;
        bool holds = false;
        switch (pred) {
        case P::eq: holds = v == 0; break;
        case P::ne: holds = v != 0; break;
        case P::slt: case P::ult: holds = v < 0; break;
        case P::sle: case P::ule: holds = v <= 0; break;
        case P::sgt: case P::ugt: holds = v > 0; break;
        case P::sge: case P::uge: holds = v >= 0; break;
        }
        count += holds;
      }
      n = Poly::constant(count);
    } else {
      int64_t a;
      Poly r;
      switch (pred) {
      case P::slt: case P::ult: a = coeff; r = rest.scaled(-1); break;
      case P::sle: case P::ule:
        a = coeff; r = rest.scaled(-1) + Poly::constant(1); break;
      case P::sgt: case P::ugt: a = -coeff; r = rest; break;
      case P::sge: case P::uge:
        a = -coeff; r = rest + Poly::constant(1); break;
      default:
        return std::nullopt;
      }
      // a * iv < r: iv < bound (a > 0), or iv >= bound (a < 0).
      bool below = a > 0;
      Poly bound = below ? canon.divide(r, a, /*ceil=*/true)
                         : canon.divide(r.scaled(-1), -a, /*ceil=*/false) +
                               Poly::constant(1);
      Poly first = canon.divide(bound - lb, step, /*ceil=*/true);
      Poly trips = canon.divide(ub - lb, step, /*ceil=*/true);
      n = below ? first : trips - first;
      constraints.push_back(n);
      constraints.push_back(trips - n);
    }
    std::string key = "iv" + std::to_string(reinterpret_cast<uintptr_t>(
                                 ifOp.getCondition().getAsOpaquePointer()));
    Atom a{AtomKind::IvCount, "[" + printPoly(n, atoms) + " iterations]"};
    a.loop = loop;
    a.count = n;
    return Poly::atom(atoms.get(key, a));
  }

  /// How many iv in [lb, ub) (step 1) satisfy `iv pred bound`.
  static int64_t countConstantIterations(int64_t lb, int64_t ub,
                                         arith::CmpIPredicate pred,
                                         int64_t bound) {
    using P = arith::CmpIPredicate;
    // The iterations in [from, to), clipped to the loop's range.
    auto span = [&](int64_t from, int64_t to) {
      return std::max<int64_t>(0, std::min(to, ub) - std::max(from, lb));
    };
    int64_t all = span(lb, ub), eq = span(bound, bound + 1);
    switch (pred) {
    case P::eq: return eq;
    case P::ne: return all - eq;
    case P::sgt: case P::ugt: return span(bound + 1, ub);
    case P::sge: case P::uge: return span(bound, ub);
    case P::slt: case P::ult: return span(lb, bound);
    case P::sle: case P::ule: return span(lb, bound + 1);
    }
    return all;
  }

  static arith::CmpIPredicate swapSides(arith::CmpIPredicate pred) {
    using P = arith::CmpIPredicate;
    switch (pred) {
    case P::slt: return P::sgt;
    case P::sgt: return P::slt;
    case P::sle: return P::sge;
    case P::sge: return P::sle;
    case P::ult: return P::ugt;
    case P::ugt: return P::ult;
    case P::ule: return P::uge;
    case P::uge: return P::ule;
    default: return pred;
    }
  }

public:
  /// For an op under a branch on its loop's variable (below `role`): "holds
  /// on n - 1 of the loop's n iterations"; empty when there is none or its
  /// count is not known.
  std::string loopBranchText(Operation *op, Block *role) {
    for (Block *block = op->getBlock(); block && block != role;) {
      Operation *parent = block->getParentOp();
      if (!parent)
        break;
      if (auto ifOp = dyn_cast<scf::IfOp>(parent);
          ifOp && classify(ifOp) == CondKind::LoopVar) {
        bool inThen = block->getParent() == &ifOp.getThenRegion();
        std::optional<Poly> ind = indicator(ifOp, inThen);
        std::optional<unsigned> id;
        for (auto &[m, c] : ind ? ind->terms : Poly().terms)
          for (unsigned x : m)
            if (atoms[x].kind == AtomKind::IvCount)
              id = x;
        if (!id)
          return "";
        std::optional<Poly> n = trips(atoms[*id].loop);
        if (!n)
          return "";
        Poly taken = inThen ? atoms[*id].count : *n - atoms[*id].count;
        // A count known at build time (`i >= 2` in a one-trip loop) says
        // nothing the counts do not.
        if (taken.getConstant() && n->getConstant())
          return "";
        return "holds on " +
               printPoly(taken, atoms) + " of the loop's " +
               printPoly(*n, atoms) + " iterations";
      }
      block = parent->getBlock();
    }
    return "";
  }

  /// The trip count of `loop` (tripCount, SymbolicCounts.h), its extent
  /// kept in this counter's constraints.
  std::optional<Poly> trips(scf::ForOp loop) {
    return tripCount(loop, canon, constraints);
  }

private:
  /// Sums the body counts over the iterations of `loop`.
  Counts closeLoop(const Counts &body, scf::ForOp loop) {
    Counts r;
    if (body.unknownAt)
      r.markUnknown(body.unknownAt, body.why);
    std::optional<Poly> n = trips(loop);
    if (!n) {
      r.markUnknown(loop, "a loop whose bounds depend on the thread, a "
                          "loop-carried value or memory");
      return r;
    }
    unsigned iv = canon.ivAtom(loop);
    auto dependsOnIv = [&](const Monomial &m) {
      return llvm::any_of(
          m, [&](unsigned id) { return llvm::is_contained(atoms[id].ivs, iv); });
    };
    for (int i = 0; i < kNumSlots; ++i) {
      for (auto &[m, c] : body.v[i].terms) {
        Monomial rest;
        std::optional<unsigned> ivAtom;
        bool twice = false;
        for (unsigned id : m) {
          if (atoms[id].kind == AtomKind::IvCount && atoms[id].loop == loop) {
            twice |= ivAtom.has_value();
            ivAtom = id;
          } else {
            rest.push_back(id);
          }
        }
        if (twice) {
          r.markUnknown(loop, "two branches on the variable of one loop, "
                              "nested");
          continue;
        }
        Poly term;
        term.terms[rest] = c;
        if (ivAtom && dependsOnIv(rest)) {
          r.markUnknown(loop, "a branch on the variable of a loop whose body "
                              "count also depends on it");
          continue;
        }
        // A body count that depends on the loop's own variable (an inner
        // loop bounded by a function of it) is a sum over the iterations;
        // sumOver multiplies the rest by the trip count.
        r.v[i] = r.v[i] + (ivAtom ? multiply(term, atoms[*ivAtom].count, atoms)
                                  : sumOver(iv, term, *n, atoms));
      }
    }
    return r;
  }
};

//===----------------------------------------------------------------------===//
// Roles and the comparison
//===----------------------------------------------------------------------===//

/// The role region of `op`: the nearest branch of an scf.if on the thread
/// or CTA, else the function body.
Block *roleBlockOf(Operation *op) {
  Block *block = op->getBlock();
  while (block) {
    Operation *parent = block->getParentOp();
    if (!parent || isa<FunctionOpInterface>(parent))
      return block;
    if (auto ifOp = dyn_cast<scf::IfOp>(parent);
        ifOp && classify(ifOp) == CondKind::Role)
      return block;
    block = parent->getBlock();
  }
  return block;
}

struct RoleCount {
  Block *block;
  Operation *firstOp[kNumSlots] = {};
  Counts counts;
  int64_t warps = 0; // 0: unknown
};

std::string describeRole(const RoleCount &r, StringRef side) {
  std::string s = ("the " + side + " role").str();
  if (r.warps == 1)
    s += " (one warp)";
  else if (r.warps > 1)
    s += " (" + std::to_string(r.warps) + " warps)";
  return s;
}

class PipelineBalance {
public:
  PipelineBalance(Value pipe, Canonicalizer &canon, int64_t blockDim,
                  bool remarks)
      : pipe(pipe), canon(canon), atoms(canon.atoms), counter(pipe, canon),
        blockDim(blockDim), remarks(remarks) {}

  bool run(ArrayRef<Operation *> verbs) {
    PipelineType type = getPipelineType(pipe);
    llvm::MapVector<Block *, RoleCount> roles;
    for (Operation *op : verbs) {
      Block *role = roleBlockOf(op);
      RoleCount &r = roles[role];
      r.block = role;
      int slot = slotOf(getVerb(op)->verb);
      if (slot >= 0 && !r.firstOp[slot])
        r.firstOp[slot] = op;
    }
    for (auto &[block, r] : roles) {
      r.counts = counter.placed(counter.count(*block), block);
      // Who runs the role: the role splits above its block (an op directly
      // in it sees no guard or uniform branch of its own).
      if (std::optional<Executors> who = getExecutors(&block->back(), blockDim))
        r.warps = who->warps;
    }

    bool tmaLoads = isTmaLoadKind(type.getKind());
    SmallVector<RoleCount *> producers, consumers;
    for (auto &[block, r] : roles) {
      // Which verb stands for a role's stages: a TMA producer's commit is
      // a no-op (the copies fill the stage), its acquire arms the barrier.
      int p = r.firstOp[kCommit] && !tmaLoads ? kCommit
              : r.firstOp[kAcquire]          ? kAcquire
                                             : -1;
      int c = r.firstOp[kRelease] ? kRelease : r.firstOp[kWait] ? kWait : -1;
      if (p >= 0) {
        producerSlot[&r] = p;
        producers.push_back(&r);
      }
      if (c >= 0) {
        consumerSlot[&r] = c;
        consumers.push_back(&r);
      }
    }

    bool failed = false;
    // Within a role: the two halves of a pair.
    for (auto &[block, r] : roles) {
      if (r.counts.unknownAt)
        continue;
      if (!tmaLoads && r.firstOp[kAcquire] && r.firstOp[kCommit])
        failed |= compareInRole(r, kAcquire, kCommit);
      if (r.firstOp[kWait] && r.firstOp[kRelease])
        failed |= compareInRole(r, kWait, kRelease);
    }
    if (failed || producers.empty() || consumers.empty())
      return failed;
    // A role that both produces and consumes (a test of state fragments, a
    // producer_consumer state) is not a producer/consumer pair to compare.
    for (RoleCount *r : producers)
      if (llvm::is_contained(consumers, r))
        return false;

    for (RoleCount *r : producers)
      if (r->counts.unknownAt)
        return remark(*r);
    for (RoleCount *r : consumers)
      if (r->counts.unknownAt)
        return remark(*r);
    return compareSides(producers, consumers);
  }

private:
  Value pipe;
  Canonicalizer &canon;
  AtomTable &atoms;
  RoleCounter counter;
  int64_t blockDim;
  bool remarks;
  llvm::DenseMap<RoleCount *, int> producerSlot, consumerSlot;

  static int slotOf(Verb v) {
    switch (v) {
    case Verb::Acquire: return kAcquire;
    case Verb::Commit: return kCommit;
    case Verb::Wait: return kWait;
    case Verb::Release: return kRelease;
    default: return -1;
    }
  }

  static StringRef does(int slot) {
    switch (slot) {
    case kAcquire: return "acquires";
    case kCommit: return "commits";
    case kWait: return "waits on";
    default: return "releases";
    }
  }

  void noteRole(InFlightDiagnostic &diag, const RoleCount &r, StringRef what) {
    Operation *owner = r.block->getParentOp();
    if (owner && !isa<FunctionOpInterface>(owner))
      diag.attachNote(owner->getLoc()) << what;
  }

  bool compareInRole(RoleCount &r, int first, int second) {
    const Poly &a = r.counts.v[first], &b = r.counts.v[second];
    if (a == b)
      return false;
    std::optional<Witness> w =
        findWitness(a, b, counter.constraints, atoms);
    if (!w)
      return false;
    InFlightDiagnostic diag = r.firstOp[second]->emitError();
    diag << describe(pipe) << ": this role " << does(first) << " " << stagesOf(a, atoms) << " but "
         << does(second) << " " << printPoly(b, atoms) << " ("
         << w->text() << "); every pipeline." << (first == kAcquire ? "producer.acquire"
                                                        : "consumer.wait")
         << " needs its pipeline."
         << (first == kAcquire ? "producer.commit" : "consumer.release")
         << " the same number of times";
    // A verb under a branch on the loop variable (`t + 1 < n`, an epilogue
    // peeled by hand): say on how many iterations the branch holds.
    std::string branch;
    Operation *under = nullptr;
    for (int slot : {second, first})
      if (branch.empty()) {
        branch = counter.loopBranchText(r.firstOp[slot], r.block);
        under = r.firstOp[slot];
      }
    if (!branch.empty())
      diag << ": the pipeline."
           << (under == r.firstOp[second]
                   ? (first == kAcquire ? "producer.commit here"
                                        : "consumer.release here")
                   : (first == kAcquire ? "producer.acquire (noted)"
                                        : "consumer.wait (noted)"))
           << " sits in a branch on the loop variable that " << branch
           << " (move it out of the branch, or run it after the loop for "
              "the iterations the branch skips)";
    else
      diag << " (check the loop bounds)";
    diag.attachNote(r.firstOp[first]->getLoc())
        << "pipeline." << (first == kAcquire ? "producer.acquire"
                                             : "consumer.wait")
        << " here";
    noteRole(diag, r, "in this role");
    return true;
  }

  bool remark(const RoleCount &r) {
    if (!remarks)
      return false;
    InFlightDiagnostic diag = r.counts.unknownAt->emitRemark();
    diag << describe(pipe)
         << ": the stage counts of its roles are not compared: they depend "
            "on "
         << r.counts.why;
    return false;
  }

  /// The candidate stage counts of one side: with one role its count; with
  /// several, every role covers every stage (all counts equal) or the roles
  /// split the stages (their sum).
  SmallVector<Poly> candidates(ArrayRef<RoleCount *> side,
                               const llvm::DenseMap<RoleCount *, int> &slots) {
    SmallVector<Poly> out;
    Poly sum;
    bool allEqual = true;
    for (RoleCount *r : side) {
      const Poly &p = r->counts.v[slots.lookup(r)];
      sum = sum + p;
      allEqual &= p == side.front()->counts.v[slots.lookup(side.front())];
    }
    if (allEqual)
      out.push_back(side.front()->counts.v[slots.lookup(side.front())]);
    if (side.size() > 1)
      out.push_back(sum);
    return out;
  }

  bool compareSides(ArrayRef<RoleCount *> producers,
                    ArrayRef<RoleCount *> consumers) {
    SmallVector<Poly> ps = candidates(producers, producerSlot);
    SmallVector<Poly> cs = candidates(consumers, consumerSlot);
    for (const Poly &p : ps)
      for (const Poly &c : cs)
        if (p == c)
          return false;
    // Every pairing must provably disagree.
    std::optional<Witness> first;
    for (const Poly &p : ps)
      for (const Poly &c : cs) {
        std::optional<Witness> w =
            findWitness(p, c, counter.constraints, atoms);
        if (!w) {
          if (remarks) {
            Operation *at = consumers.front()->firstOp
                [consumerSlot.lookup(consumers.front())];
            at->emitRemark()
                << describe(pipe) << ": the producer's "
                << stagesOf(p, atoms) << " and the consumer's "
                << printPoly(c, atoms)
                << " differ as expressions, but no launch values were found "
                   "for which every loop runs and they differ; not compared";
          }
          return false;
        }
        if (!first)
          first = w;
      }

    // The role to blame: a consumer role whose count differs from the
    // producer's (the producer when there are several of each).
    RoleCount *prod = producers.front();
    const Poly &p = prod->counts.v[producerSlot.lookup(prod)];
    RoleCount *blame = consumers.front();
    for (RoleCount *r : consumers)
      if (r->counts.v[consumerSlot.lookup(r)] != p) {
        blame = r;
        break;
      }
    int ps_ = producerSlot.lookup(prod), cs_ = consumerSlot.lookup(blame);
    const Poly &c = blame->counts.v[cs_];
    std::optional<Witness> w = findWitness(p, c, counter.constraints, atoms);
    if (!w)
      w = first;
    // A producer count with a loop from a constant start (an unguarded
    // prologue before `range(S, n)`) that the consumer's lacks: the error
    // goes on the producer's first verb, the prologue the user must guard.
    auto hasClip = [&](const Poly &q) {
      return polyHas(q, atoms, [](const Atom &a) { return a.clipped; });
    };
    bool atProducer = hasClip(p) && !hasClip(c);
    Operation *at = atProducer ? prod->firstOp[ps_] : blame->firstOp[cs_];
    InFlightDiagnostic diag = at->emitError();
    diag << describe(pipe) << ": " << describeRole(*prod, "producer") << " "
         << does(ps_) << " " << stagesOf(p, atoms) << ", "
         << describeRole(*blame, "consumer") << " " << does(cs_) << " "
         << printPoly(c, atoms);
    if (w)
      diag << " (" << w->text() << ")";
    if (consumers.size() > 1 || producers.size() > 1)
      diag << "; with " << producers.size() << " producer and "
           << consumers.size()
           << " consumer roles, neither does every role cover every stage "
              "nor do the roles together";
    diag << ": "
         << (w && w->a > w->b
                 ? "the producer fills stages nobody consumes and waits "
                   "forever for them to come back"
                 : "the consumers wait on stages nobody fills");
    // A loop from a constant start (`range(S, n)` after a prologue of S
    // stages) runs max(0, n - S) times: the prologue counts in full below.
    const Atom *clip = nullptr;
    for (const Poly *q : {&p, &c})
      for (auto &[m, k] : q->terms)
        for (unsigned id : m)
          if (atoms[id].clipped && !clip)
            clip = &atoms[id];
    if (clip)
      diag << " (a loop from a constant start runs " << clip->name
           << " times: when the trip count is below that start, the stages "
              "before the loop, a prologue, still all run; guard each "
              "prologue step with the trip count, `if n > i`)";
    else
      diag << " (give both roles the same loop bounds)";
    if (atProducer)
      diag.attachNote(blame->firstOp[cs_]->getLoc())
          << "the consumer " << does(cs_) << " here";
    else
      diag.attachNote(prod->firstOp[ps_]->getLoc())
          << "the producer " << does(ps_) << " here";
    noteRole(diag, *blame, "the consumer role");
    noteRole(diag, *prod, "the producer role");
    noteCreate(diag, pipe);
    return true;
  }
};

//===----------------------------------------------------------------------===//
// Roles per CTA of a cluster
//===----------------------------------------------------------------------===//

/// CTAs per cluster from the gpu.func's known_cluster_size (1 when absent).
int64_t clusterSizeOf(FunctionOpInterface fn) {
  auto sizes = fn->getAttrOfType<DenseI32ArrayAttr>("known_cluster_size");
  if (!sizes)
    return 1;
  int64_t n = 1;
  for (int32_t d : sizes.asArrayRef())
    n *= std::max<int32_t>(d, 1);
  return n;
}

/// What an scf.if condition reads, for evaluating it per CTA rank: the
/// %cluster_ctarank reads, and whether anything else than constants and
/// arith ops (thread ids, kernel arguments, memory) goes into it.
void rankSources(Value v, llvm::SmallPtrSetImpl<Operation *> &ranks,
                 bool &other, int depth) {
  if (depth > 32) {
    other = true;
    return;
  }
  if (getConstantInt(v))
    return;
  Operation *def = v.getDefiningOp();
  if (!def) {
    other = true;
    return;
  }
  if (def->getName().getStringRef() == "nvvm.read.ptx.sreg.cluster.ctarank") {
    ranks.insert(def);
    return;
  }
  if (!isa<arith::ArithDialect>(def->getDialect()) ||
      def->getNumRegions() != 0) {
    other = true;
    return;
  }
  for (Value operand : def->getOperands())
    rankSources(operand, ranks, other, depth + 1);
}

/// The CTA ranks of the cluster in which `op` may run (`may`) and in which
/// it surely runs when its role runs at all (`sure`), from the scf.if
/// conditions around it that read the CTA rank: a condition of the rank
/// alone is evaluated for each rank; one that mixes the rank with thread
/// ids or data is not decided (every rank may run it, none surely does).
/// Conditions that do not read the rank (warp roles, kernel arguments)
/// leave both sets alone.
struct RankSets {
  llvm::BitVector may, sure;
  /// The outermost branch that decides the rank, and the ranks it keeps.
  scf::IfOp guard;
};

RankSets ranksOf(Operation *op, int64_t cluster) {
  RankSets r{llvm::BitVector(cluster, true), llvm::BitVector(cluster, true),
             {}};
  for (Block *block = op->getBlock(); block;) {
    Operation *parent = block->getParentOp();
    if (!parent || isa<FunctionOpInterface>(parent))
      break;
    if (auto ifOp = dyn_cast<scf::IfOp>(parent)) {
      llvm::SmallPtrSet<Operation *, 2> reads;
      bool other = false;
      rankSources(ifOp.getCondition(), reads, other, 0);
      bool inThen = block->getParent() == &ifOp.getThenRegion();
      if (!reads.empty()) {
        if (other || reads.size() > 1) {
          r.sure.reset();
        } else {
          Value rank = (*reads.begin())->getResult(0);
          llvm::BitVector taken(cluster);
          bool decided = true;
          for (int64_t c = 0; c < cluster && decided; ++c) {
            std::optional<int64_t> v =
                evalWithValue(ifOp.getCondition(), rank, c);
            if (!v)
              decided = false;
            else if ((*v != 0) == inThen)
              taken.set(c);
          }
          if (!decided) {
            r.sure.reset();
          } else {
            r.may &= taken;
            r.sure &= taken;
            r.guard = ifOp;
          }
        }
      }
    }
    block = parent->getBlock();
  }
  return r;
}

/// "CTA 1", "CTAs 0, 2".
std::string describeRanks(const llvm::BitVector &ranks) {
  std::string out;
  for (int c : ranks.set_bits())
    out += (out.empty() ? "" : ", ") + std::to_string(c);
  return (ranks.count() == 1 ? "CTA " : "CTAs ") + out;
}

/// Property 11 per CTA of a cluster: a ring of its own in every CTA (no
/// multicast, no CTA pair: each CTA's producer fills its own stages and its
/// consumers release them there) needs a producer in every CTA where a
/// consumer waits. A producer role put under `cluster_cta_rank() == 0` (as
/// a multicast leader would be) leaves the other CTAs' consumers waiting on
/// stages nobody fills; the other way round, a consumer role under a rank
/// branch leaves the other CTAs' producers filling stages nobody releases.
/// True when it reported an error.
bool checkRolesPerCta(Value pipe, ArrayRef<Operation *> verbs,
                      FunctionOpInterface fn) {
  int64_t cluster = clusterSizeOf(fn);
  if (cluster <= 1 || cluster > 16)
    return false;
  BarrierPlan plan = getBarrierPlan(getPipelineType(pipe));
  bool local = plan.multicastPeers == 1 && plan.ctaPair == 1 &&
               plan.release == ArriveTarget::Local &&
               (plan.commit == ArriveTarget::Local ||
                plan.commit == ArriveTarget::None) &&
               (plan.arm == ArmTarget::Local || plan.arm == ArmTarget::None);
  if (!local)
    return false;
  llvm::BitVector producers(cluster);
  Operation *producerOp = nullptr;
  scf::IfOp producerGuard;
  for (Operation *op : verbs)
    if (isProducerVerb(getVerb(op)->verb)) {
      RankSets r = ranksOf(op, cluster);
      producers |= r.may;
      if (!producerOp) {
        producerOp = op;
        producerGuard = r.guard;
      }
    }
  if (!producerOp)
    return false;
  for (Operation *op : verbs) {
    Verb v = getVerb(op)->verb;
    if (v != Verb::Wait && v != Verb::Release)
      continue;
    llvm::BitVector orphan = ranksOf(op, cluster).sure;
    orphan.reset(producers);
    if (orphan.none())
      continue;
    Operation *at = producerGuard ? producerGuard.getOperation() : op;
    InFlightDiagnostic diag = at->emitError();
    diag << describe(pipe) << ": its producer role runs in "
         << describeRanks(producers) << " of the cluster of " << cluster
         << " only";
    if (producerGuard)
      diag << " (this branch on the CTA rank)";
    diag << ", but the ring is per CTA (not multicast) and its consumers "
            "also wait in "
         << describeRanks(orphan)
         << ": they wait on stages nobody fills in their CTA (run the "
            "producer in every CTA whose consumers use the ring, or "
            "multicast the loads to them)";
    diag.attachNote(op->getLoc())
        << "the consumer waits here, in every CTA of the cluster";
    if (producerGuard)
      diag.attachNote(producerOp->getLoc()) << "the producer";
    noteCreate(diag, pipe);
    return true;
  }
  // The other direction: a producer that surely runs in a CTA where no
  // consumer may release (the consumer role put under a rank branch) fills
  // the ring there once and then waits on stages nobody frees; its
  // producer_tail never completes either.
  llvm::BitVector consumers(cluster);
  Operation *consumerOp = nullptr;
  scf::IfOp consumerGuard;
  for (Operation *op : verbs) {
    Verb v = getVerb(op)->verb;
    if (v != Verb::Wait && v != Verb::Release)
      continue;
    RankSets r = ranksOf(op, cluster);
    consumers |= r.may;
    if (!consumerOp) {
      consumerOp = op;
      consumerGuard = r.guard;
    }
  }
  if (!consumerOp)
    return false;
  for (Operation *op : verbs) {
    Verb v = getVerb(op)->verb;
    if (v != Verb::Acquire && v != Verb::Commit)
      continue;
    llvm::BitVector orphan = ranksOf(op, cluster).sure;
    orphan.reset(consumers);
    if (orphan.none())
      continue;
    Operation *at = consumerGuard ? consumerGuard.getOperation() : op;
    InFlightDiagnostic diag = at->emitError();
    diag << describe(pipe) << ": its consumer role runs in "
         << describeRanks(consumers) << " of the cluster of " << cluster
         << " only";
    if (consumerGuard)
      diag << " (this branch on the CTA rank)";
    diag << ", but the ring is per CTA (not multicast) and its producer "
            "also fills it in "
         << describeRanks(orphan)
         << ": nobody releases the stages there, so the producer's "
            "producer_acquire waits once the ring is full and its "
            "producer_tail never completes (run the consumer in every CTA "
            "whose producer fills the ring, or the producer only where a "
            "consumer waits)";
    diag.attachNote(op->getLoc())
        << "the producer acquires here, in every CTA of the cluster";
    if (consumerGuard)
      diag.attachNote(consumerOp->getLoc()) << "the consumer";
    noteCreate(diag, pipe);
    return true;
  }
  return false;
}

} // namespace

std::optional<Poly>
protocol::countExecutions(Operation *op, Canonicalizer &canon,
                          std::vector<Poly> &constraints) {
  // The counter's pipeline is not consulted when placing a count.
  RoleCounter counter(Value(), canon);
  Counts once;
  once.v[kAcquire] = Poly::constant(1);
  Counts c = counter.placed(once, op->getBlock());
  if (c.unknownAt)
    return std::nullopt;
  constraints.insert(constraints.end(), counter.constraints.begin(),
                     counter.constraints.end());
  return c.v[kAcquire];
}

LogicalResult protocol::checkStageBalance(FunctionOpInterface fn,
                                          const Options &options) {
  llvm::MapVector<Value, SmallVector<Operation *>> verbs;
  fn->walk([&](Operation *op) {
    std::optional<VerbRef> verb = getVerb(op);
    if (!verb || !verb->pipeline.getDefiningOp<CreateOp>())
      return; // a helper's pipeline argument: the caller's business
    verbs[verb->pipeline].push_back(op);
  });
  AtomTable atoms;
  Canonicalizer canon(atoms);
  int64_t blockDim = getBlockDim(fn, options);
  bool failed = false;
  for (auto &[pipe, ops] : verbs) {
    const KindTraits &traits = getKindTraits(getPipelineType(pipe).getKind());
    // No consumer side to compare (tma_store, order), or a producer that
    // serves every CTA of the cluster from one (clc_fetch_async).
    if (!traits.hasBarriers || !traits.hasConsumerGroup ||
        traits.arm == ArmTarget::EveryClusterCta)
      continue;
    PipelineBalance balance(pipe, canon, blockDim, options.stageBalanceRemarks);
    failed |= balance.run(ops);
    failed |= checkRolesPerCta(pipe, ops, fn);
  }
  // A state that advances wrongly through a nested loop breaks the stage
  // order with every count right (an extra advance before the k-block
  // loop); a dropped or doubled verb is reported by the counts above, at
  // the verb, and not a second time here.
  if (!failed)
    failed |= checkNestedStateThreading(fn, canon);
  return failure(failed);
}
