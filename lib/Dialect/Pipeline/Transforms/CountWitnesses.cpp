//===- CountWitnesses.cpp - values for which two counts differ -----------===//
//
// findWitness (SymbolicCounts.h): values of the leaves of two polynomials,
// small ones first and then random ones, for which they differ while every
// constraint (a loop extent, an iteration count) holds -- for every
// iteration of the loops a constraint depends on. Leaves that stand for an
// integer arith op the polynomials do not model (min, max, select, ...) are
// evaluated exactly on their operands (evalArith).
//
//===----------------------------------------------------------------------===//

#include "SymbolicCounts.h"

#include "llvm/Support/MathExtras.h"

#include <functional>
#include <random>

using namespace mlir;
using namespace mlir::pipeline;
using namespace mlir::pipeline::protocol;


static bool compare(arith::CmpIPredicate pred, int64_t x, int64_t y) {
  using P = arith::CmpIPredicate;
  switch (pred) {
  case P::eq: return x == y;
  case P::ne: return x != y;
  case P::slt: case P::ult: return x < y;
  case P::sle: case P::ule: return x <= y;
  case P::sgt: case P::ugt: return x > y;
  case P::sge: case P::uge: return x >= y;
  }
  return false;
}

/// The value of an evaluable op (isEvaluable) on operand values; nullopt on
/// a division by zero.
static std::optional<int64_t> evalArith(const Atom &a, ArrayRef<int64_t> x) {
  StringRef op = a.op;
  if (op == "arith.select")
    return x[0] ? x[1] : x[2];
  if (op == "arith.cmpi")
    return compare(a.argPred, x[0], x[1]) ? 1 : 0;
  if (op == "arith.maxsi" || op == "arith.maxui")
    return std::max(x[0], x[1]);
  if (op == "arith.minsi" || op == "arith.minui")
    return std::min(x[0], x[1]);
  if (op == "arith.andi")
    return x[0] & x[1];
  if (op == "arith.ori")
    return x[0] | x[1];
  if (op == "arith.xori")
    return x[0] ^ x[1];
  if (x[1] == 0)
    return std::nullopt;
  if (op == "arith.divsi" || op == "arith.divui")
    return x[0] / x[1];
  if (op == "arith.floordivsi")
    return llvm::divideFloorSigned(x[0], x[1]);
  if (op == "arith.ceildivsi" || op == "arith.ceildivui")
    return llvm::divideCeilSigned(x[0], x[1]);
  if (op == "arith.remsi" || op == "arith.remui")
    return x[0] % x[1];
  return std::nullopt;
}


namespace {
//===----------------------------------------------------------------------===//
// Witnesses: values of the leaves for which two counts differ
//===----------------------------------------------------------------------===//

class Evaluator {
public:
  Evaluator(const AtomTable &atoms, std::mt19937_64 &rng, bool small,
            std::optional<int64_t> fixed)
      : atoms(atoms), rng(rng), small(small), fixed(fixed),
        values(atoms.size()), bound(atoms.size()) {}

  /// Whether `c >= 0` for every iteration of the loops whose variables it
  /// depends on (outer loops first: an inner loop's bounds may depend on
  /// them); nullopt when it cannot be evaluated.
  std::optional<bool> holds(const Poly &c) {
    std::optional<unsigned> next;
    for (unsigned iv : ivsOf(c, atoms)) {
      if (bound[iv])
        continue;
      // Outermost free loop: its bounds need no other free variable.
      bool outermost = llvm::all_of(atoms[iv].ivs, [&](unsigned o) {
        return o == iv || bound[o].has_value();
      });
      if (outermost) {
        next = iv;
        break;
      }
    }
    if (!next) {
      if (!ivsOf(c, atoms).empty() &&
          llvm::any_of(ivsOf(c, atoms), [&](unsigned o) { return !bound[o]; }))
        return std::nullopt;
      std::optional<int64_t> v = eval(c);
      if (!v)
        return std::nullopt;
      return *v >= 0;
    }
    std::optional<bool> all = true;
    forEachIteration(*next, [&]() {
      std::optional<bool> h = holds(c);
      if (!h || !*h)
        all = h;
      return all.has_value() && *all;
    }, all);
    return all;
  }

  std::optional<int64_t> eval(const Poly &p) {
    int64_t sum = 0;
    for (auto &[m, c] : p.terms) {
      int64_t prod = c;
      for (unsigned id : m) {
        std::optional<int64_t> x = atom(id);
        if (!x)
          return std::nullopt;
        prod *= *x;
      }
      sum += prod;
    }
    return sum;
  }

  /// The leaves given values, for the message.
  std::vector<std::pair<unsigned, int64_t>> leaves;

private:
  const AtomTable &atoms;
  std::mt19937_64 &rng;
  bool small;
  std::optional<int64_t> fixed;
  std::vector<std::optional<int64_t>> values;
  /// Values of the Iv atoms in the sum (or the constraint) being evaluated.
  std::vector<std::optional<int64_t>> bound;
  /// Values of atoms that depend on loop variables, per iteration: a leaf
  /// the check does not look into (`max(ceildiv(min(...), 128), 1)` of the
  /// tile index) is a function of them, the same in both counts.
  std::map<std::pair<unsigned, std::vector<int64_t>>, int64_t> perIteration;
  /// Iterations all sums of one sample may enumerate (a sample past it is
  /// skipped: 600 samples must stay cheap next to a compile).
  int64_t budget = 1 << 12;

  /// Runs `body` with the Iv atom `iv` bound to each value of its loop
  /// (until `body` returns false); `failed` is cleared (nullopt) when the
  /// bounds cannot be evaluated or the budget runs out.
  template <typename T>
  void forEachIteration(unsigned iv, llvm::function_ref<bool()> body,
                        std::optional<T> &failed) {
    const Atom &v = atoms[iv];
    std::optional<int64_t> lb = eval(v.inner), ub = eval(v.other),
                           st = eval(v.step);
    if (!lb || !ub || !st || *st <= 0) {
      failed = std::nullopt;
      return;
    }
    std::optional<int64_t> saved = bound[iv];
    for (int64_t x = *lb; x < *ub; x += *st) {
      if (--budget < 0) {
        failed = std::nullopt;
        break;
      }
      bound[iv] = x;
      if (!body())
        break;
    }
    bound[iv] = saved;
  }

  std::optional<int64_t> atom(unsigned id) {
    const Atom &a = atoms[id];
    if (a.kind == AtomKind::Iv)
      return bound[id];
    std::vector<int64_t> at;
    if (!a.ivs.empty()) {
      for (unsigned iv : a.ivs) {
        if (!bound[iv])
          return std::nullopt;
        at.push_back(*bound[iv]);
      }
      auto it = perIteration.find({id, at});
      if (it != perIteration.end())
        return it->second;
    } else if (values[id]) {
      return values[id];
    }
    std::optional<int64_t> r;
    switch (a.kind) {
    case AtomKind::Leaf: {
      if (!a.op.empty()) {
        SmallVector<int64_t> x;
        for (const Poly &arg : a.args) {
          std::optional<int64_t> v = eval(arg);
          if (!v)
            return std::nullopt;
          x.push_back(*v);
        }
        r = evalArith(a, x);
        if (!r)
          return std::nullopt;
        break;
      }
      // The first samples give every leaf one small value (the message
      // reads best with `n = 2`); then random ones, small and larger.
      int64_t hi = a.boolean ? 1 : small ? 8 : 300;
      if (fixed) {
        // Sample i gives the k-th leaf digit k of i in base 4 (base 2 for
        // an i1): every small combination of the first leaves comes early.
        unsigned ordinal = leaves.size();
        int64_t digit = a.boolean ? (*fixed >> ordinal) & 1
                                  : (*fixed >> (2 * ordinal)) & 3;
        static constexpr int64_t kSmall[] = {1, 2, 3, 0};
        r = a.boolean ? 1 - digit : kSmall[digit];
      } else {
        r = std::uniform_int_distribution<int64_t>(0, hi)(rng);
      }
      if (!a.ivs.empty()) {
        // A function of the loop variables: one value per iteration (small
        // ones in the first samples, as for the leaves).
        r = std::uniform_int_distribution<int64_t>(0, fixed ? 3 : hi)(rng);
        break;
      }
      leaves.push_back({id, *r});
      break;
    }
    case AtomKind::FloorDiv:
    case AtomKind::CeilDiv:
    case AtomKind::Rem: {
      std::optional<int64_t> x = eval(a.inner);
      if (!x)
        return std::nullopt;
      r = a.kind == AtomKind::FloorDiv  ? llvm::divideFloorSigned(*x, a.divisor)
          : a.kind == AtomKind::CeilDiv ? llvm::divideCeilSigned(*x, a.divisor)
                                        : *x % a.divisor;
      break;
    }
    case AtomKind::Trips: {
      std::optional<int64_t> x = eval(a.inner), s = eval(a.other);
      if (!x || !s || *s <= 0)
        return std::nullopt;
      r = llvm::divideCeilSigned(std::max<int64_t>(*x, 0), *s);
      break;
    }
    case AtomKind::Indicator: {
      std::optional<int64_t> x = eval(a.inner), y = eval(a.other);
      if (!x || !y)
        return std::nullopt;
      using P = arith::CmpIPredicate;
      bool holds = false;
      switch (a.pred) {
      case P::eq: holds = *x == *y; break;
      case P::ne: holds = *x != *y; break;
      case P::slt: case P::ult: holds = *x < *y; break;
      case P::sle: case P::ule: holds = *x <= *y; break;
      case P::sgt: case P::ugt: holds = *x > *y; break;
      case P::sge: case P::uge: holds = *x >= *y; break;
      }
      r = holds ? 1 : 0;
      break;
    }
    case AtomKind::IvCount:
      return std::nullopt; // closed by its loop; never reaches a count
    case AtomKind::Iv:
      return bound[id]; // handled above
    case AtomKind::Sum: {
      std::optional<int64_t> sum = 0;
      forEachIteration(a.ivAtom, [&]() {
        std::optional<int64_t> x = eval(a.inner);
        if (!x) {
          sum = std::nullopt;
          return false;
        }
        *sum += *x;
        return true;
      }, sum);
      r = sum;
      break;
    }
    }
    if (!r)
      return std::nullopt;
    if (!a.ivs.empty())
      perIteration[{id, at}] = *r;
    else
      values[id] = r;
    return r;
  }
};
} // namespace

std::optional<Witness> protocol::findWitness(const Poly &a, const Poly &b,
                                   const std::vector<Poly> &constraints,
                                   const AtomTable &atoms) {
  std::mt19937_64 rng(0x5eed);
  for (int i = 0; i < 600; ++i) {
    Evaluator ev(atoms, rng, /*small=*/i < 500,
                 i < 256 ? std::optional<int64_t>(i) : std::nullopt);
    std::optional<int64_t> x = ev.eval(a), y = ev.eval(b);
    if (!x || !y || *x == *y)
      continue;
    bool ok = true;
    for (const Poly &c : constraints) {
      std::optional<bool> h = ev.holds(c);
      if (!h || !*h) {
        ok = false;
        break;
      }
    }
    if (!ok)
      continue;
    Witness w{*x, *y, ""};
    auto leaves = ev.leaves;
    llvm::sort(leaves, [&](auto &l, auto &r) {
      return atoms[l.first].name < atoms[r.first].name;
    });
    // Only the leaves of the two counts (constraints may add others).
    for (auto &[id, val] : leaves) {
      bool inCounts = false;
      std::function<bool(const Poly &)> uses = [&](const Poly &p) {
        for (auto &[m, c] : p.terms)
          for (unsigned x : m) {
            const Atom &at = atoms[x];
            if (x == id || uses(at.inner) || uses(at.other) ||
                (at.kind == AtomKind::Sum && uses(Poly::atom(at.ivAtom))) ||
                llvm::any_of(at.args, uses))
              return true;
          }
        return false;
      };
      inCounts = uses(a) || uses(b);
      if (!inCounts)
        continue;
      if (!w.values.empty())
        w.values += ", ";
      w.values += atoms[id].name + " = " + std::to_string(val);
    }
    return w;
  }
  return std::nullopt;
}
