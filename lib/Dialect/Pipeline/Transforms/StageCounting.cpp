//===- StageCounting.cpp - stage counts of one role -----------------------===//
//
// The role counter of property 11 (StageCounting.h): each verb of one
// pipeline in one role counted as a polynomial over the kernel's values. A
// loop multiplies its body by `ceildiv(ub - lb, step)`; a branch on a kernel
// argument multiplies each side by the condition's indicator ([c] and
// 1 - [c]); a branch on the loop variable (a peeled first or last
// iteration: `i == 0`, `i + 1 < n`, any `a * iv + b <cmp> c` in a loop of
// constant step) counts the iterations that take it. What cannot be counted
// (thread ids, memory, scf.while) marks the count unknown, with the op and
// why.
//
//===----------------------------------------------------------------------===//

#include "StageCounting.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::pipeline;
using namespace mlir::pipeline::protocol;

//===----------------------------------------------------------------------===//
// Conditions
//===----------------------------------------------------------------------===//

namespace {

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

} // namespace

CondKind protocol::classify(scf::IfOp ifOp) {
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

Counts RoleCounter::count(Block &block) {
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
Counts RoleCounter::placed(Counts c, Block *block) {
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


int RoleCounter::slotOf(Verb v) {
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

Counts RoleCounter::countIf(scf::IfOp ifOp) {
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
std::optional<Poly> RoleCounter::indicator(scf::IfOp ifOp, bool inThen) {
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

Poly RoleCounter::uniformIndicator(Value cond) {
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
std::optional<Poly> RoleCounter::loopIndicator(scf::IfOp ifOp) {
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
std::optional<Poly>
RoleCounter::scaledLoopIndicator(scf::IfOp ifOp, scf::ForOp loop,
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
int64_t RoleCounter::countConstantIterations(int64_t lb, int64_t ub,
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

arith::CmpIPredicate RoleCounter::swapSides(arith::CmpIPredicate pred) {
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

/// For an op under a branch on its loop's variable (below `role`): "holds
/// on n - 1 of the loop's n iterations"; empty when there is none or its
/// count is not known.
std::string RoleCounter::loopBranchText(Operation *op, Block *role) {
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
std::optional<Poly> RoleCounter::trips(scf::ForOp loop) {
  return tripCount(loop, canon, constraints);
}

/// Sums the body counts over the iterations of `loop`.
Counts RoleCounter::closeLoop(const Counts &body, scf::ForOp loop) {
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
