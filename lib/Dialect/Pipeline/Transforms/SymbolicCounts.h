//===- SymbolicCounts.h - counts as polynomials of kernel values -*- C++ -*-===//
//
// Private to lib/Dialect/Pipeline/Transforms (the stage-balance check,
// StageBalance.cpp and NestedStateThreading.cpp). A count is a polynomial
// with integer coefficients over atoms: leaves (kernel arguments,
// CTA-uniform reads, values the checker does not look into), integer
// divisions of polynomials by constants, trip counts with runtime steps, 0/1
// indicators of conditions, induction variables of scf.for loops and sums
// over a loop's iterations. Atoms are deduplicated by structure, so two
// roles that each compute `(k + 63) / 64` from the same argument share one
// (SymbolicCounts.cpp). `findWitness` looks for values of the leaves that
// make two polynomials differ (CountWitnesses.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef PIPELINE_MLIR_LIB_DIALECT_PIPELINE_TRANSFORMS_SYMBOLICCOUNTS_H
#define PIPELINE_MLIR_LIB_DIALECT_PIPELINE_TRANSFORMS_SYMBOLICCOUNTS_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringMap.h"

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace mlir::pipeline::protocol {

//===----------------------------------------------------------------------===//
// Polynomials over atoms
//===----------------------------------------------------------------------===//

/// A product of atoms (ids, sorted; an indicator appears at most once).
using Monomial = std::vector<unsigned>;

struct Poly {
  std::map<Monomial, int64_t> terms;

  static Poly constant(int64_t c) {
    Poly p;
    if (c)
      p.terms[{}] = c;
    return p;
  }
  static Poly atom(unsigned id) {
    Poly p;
    p.terms[{id}] = 1;
    return p;
  }
  bool isZero() const { return terms.empty(); }
  std::optional<int64_t> getConstant() const {
    if (terms.empty())
      return 0;
    if (terms.size() == 1 && terms.begin()->first.empty())
      return terms.begin()->second;
    return std::nullopt;
  }
  void addTerm(const Monomial &m, int64_t c) {
    int64_t &slot = terms[m];
    slot += c;
    if (!slot)
      terms.erase(m);
  }
  Poly operator+(const Poly &o) const {
    Poly r = *this;
    for (auto &[m, c] : o.terms)
      r.addTerm(m, c);
    return r;
  }
  Poly operator-(const Poly &o) const { return *this + o.scaled(-1); }
  Poly scaled(int64_t k) const {
    Poly r;
    if (k)
      for (auto &[m, c] : terms)
        r.terms[m] = c * k;
    return r;
  }
  bool operator==(const Poly &o) const { return terms == o.terms; }
  bool operator!=(const Poly &o) const { return !(*this == o); }
};

/// What an atom stands for.
enum class AtomKind {
  Leaf,      // a value the checker does not look into (a kernel argument)
  FloorDiv,  // floor(inner / divisor), divisor a positive constant
  CeilDiv,   // ceil(inner / divisor)
  Rem,       // inner mod divisor
  Trips,     // ceildiv(inner, step) with a runtime step
  Indicator, // [lhs pred rhs], 0 or 1
  IvCount,   // a loop-variable condition: closed by its loop (never leaves it)
  Iv,        // an scf.for induction variable, ranging over [inner, other)
             // by `step`; keyed by its bounds, so that the producer's and
             // the consumers' tile loops over the same range share one
  Sum,       // the sum of `inner` over the values of the Iv atom `ivAtom`:
             // a loop whose body count depends on its own variable (the
             // causal k-block bound computed from the tile index)
};

struct Atom {
  AtomKind kind;
  std::string name;  // for messages
  bool thread = false; // differs between threads of a CTA
  bool loopVar = false; // depends on a loop variable or loop-carried value
  bool carried = false; // depends on a loop-carried value (not an Iv): never
                        // counted
  bool boolean = false; // an i1 leaf
  bool clipped = false; // Trips: a loop from a constant start above 0 to a
                        // run-time bound, counted max(0, extent) (tripCount)
  Poly inner, other;    // FloorDiv/CeilDiv/Rem/Trips: inner (/ other);
                        // Indicator: inner pred other
  int64_t divisor = 1;
  arith::CmpIPredicate pred = arith::CmpIPredicate::eq;
  scf::ForOp loop;      // IvCount: the loop it counts iterations of
  Poly count;           // IvCount: iterations where it holds
  Poly step;            // Iv: the loop's step
  unsigned ivAtom = 0;  // Sum: the Iv atom summed over
  /// The Iv atoms this atom's value depends on (sorted; an Iv lists itself
  /// and those of its bounds). An atom with Ivs only has a value inside
  /// their loops: each loop closes its own (a Sum) before its count leaves.
  std::vector<unsigned> ivs;
  /// Leaf of an integer arith op the polynomials do not model (min, max,
  /// select, division by a run-time value, ...): the op, `arith.minsi`, and
  /// its operands, so that witnesses evaluate it exactly (an uninterpreted
  /// value would let min(n, t + 1) and min(t + 1, n) differ).
  std::string op;
  std::vector<Poly> args;
  arith::CmpIPredicate argPred = arith::CmpIPredicate::eq; // op = arith.cmpi
};

/// Atoms of one function, deduplicated by a structural key so that two
/// roles that each compute `ceildiv(k, 64)` (or read %nctaid) share a term.
class AtomTable {
public:
  unsigned get(const std::string &key, Atom atom) {
    auto it = index.find(key);
    if (it != index.end())
      return it->second;
    atoms.push_back(std::move(atom));
    index[key] = atoms.size() - 1;
    return atoms.size() - 1;
  }
  const Atom &operator[](unsigned id) const { return atoms[id]; }
  Atom &operator[](unsigned id) { return atoms[id]; }
  size_t size() const { return atoms.size(); }

private:
  std::vector<Atom> atoms;
  llvm::StringMap<unsigned> index;
};

/// The product of two polynomials; indicators are idempotent ([c]^2 = [c]).
Poly multiply(const Poly &a, const Poly &b, const AtomTable &atoms);
/// "n - 1", "ceildiv(k, 64) * tiles".
std::string printPoly(const Poly &p, const AtomTable &atoms);
/// The Iv atoms `p` depends on (sorted, unique).
std::vector<unsigned> ivsOf(const Poly &p, const AtomTable &atoms);
/// The sum of `body` over the iterations of the loop whose induction
/// variable is the Iv atom `iv`: terms free of it are multiplied by `trips`;
/// each other monomial becomes a Sum atom (sums are linear, so equal bodies
/// written differently still share their Sum atoms).
Poly sumOver(unsigned iv, const Poly &body, const Poly &trips,
             AtomTable &atoms);
/// True when some atom of `p` satisfies `pred`.
bool polyHas(const Poly &p, const AtomTable &atoms,
             llvm::function_ref<bool(const Atom &)> pred);

/// Reads that differ between the threads of a CTA (thread, lane and warp
/// ids, elect, clocks).
bool isThreadRead(Operation *op);
/// Reads that are the same for every thread of a CTA (CTA and cluster ids
/// and sizes).
bool isCtaRead(Operation *op);

class CanonicalizerImpl;

/// Integer values as polynomials, through arith (add, sub, mul, casts,
/// division, shift and remainder by constants); anything else is a leaf.
class Canonicalizer {
public:
  explicit Canonicalizer(AtomTable &atoms);
  ~Canonicalizer();
  /// The polynomial of an integer (or index, i1) value.
  Poly get(Value v);
  /// A structural key: equal keys mean equal values in every thread that
  /// computes them.
  std::string key(Value v);
  /// floor(p / d) or ceil(p / d) for a positive constant d.
  Poly divide(const Poly &p, int64_t d, bool ceil);
  /// The Iv atom of `loop`'s induction variable.
  unsigned ivAtom(scf::ForOp loop);

  AtomTable &atoms;

private:
  std::unique_ptr<CanonicalizerImpl> impl;
};

/// Values of the leaves for which two counts differ.
struct Witness {
  int64_t a, b;
  std::string values; // "%arg0 = 3, %arg1 = 0"

  /// "for %arg0 = 3: 3 against 2" ("3 against 2" for constants).
  std::string text() const {
    std::string counts = std::to_string(a) + " against " + std::to_string(b);
    return values.empty() ? counts : "for " + values + ": " + counts;
  }
};

/// Leaf values for which `a` and `b` differ while every constraint is
/// non-negative (small values first, then random ones); nullopt when none of
/// the samples finds one. A constraint that depends on loop variables (the
/// extent of a k-block loop whose bound is computed from the tile index)
/// must hold for every iteration of those loops. Leaves that depend on a
/// loop variable (a min or max the check does not look into) take one value
/// per iteration, the same in both counts.
std::optional<Witness> findWitness(const Poly &a, const Poly &b,
                                   const std::vector<Poly> &constraints,
                                   const AtomTable &atoms);

/// The trip count of `loop` as a polynomial; nullopt when its bounds
/// depend on threads, loop-carried values or memory. Bounds computed from
/// an enclosing loop's variable (causal attention's k-block loop ends at
/// the diagonal of the tile the persistent loop is on) are counted: the
/// enclosing loop sums its body over its iterations (sumOver). A run-time
/// extent (and a run-time step less 1) is appended to `constraints`, which
/// the counts assume non-negative -- except for a loop from a constant start
/// of 2 or more to a run-time bound (`range(S, n)` after a prologue of S
/// stages), counted max(0, n - S) with no assumption, so that the values
/// of n below S stay in the comparison.
std::optional<Poly> tripCount(scf::ForOp loop, Canonicalizer &canon,
                              std::vector<Poly> &constraints);

/// "n - 1 stages", "1 stage".
std::string stagesOf(const Poly &p, const AtomTable &atoms);

/// How often one thread that runs `op` runs it over the kernel: the trip
/// counts of the loops around it, times the indicators of the branches on
/// kernel arguments and loop variables (a peeled iteration); branches on
/// the thread or CTA (roles, guards) count 1. The loop extents and
/// iteration counts assumed non-negative are appended to `constraints`.
/// nullopt when a count depends on what is not counted (memory, a while
/// loop, a loop bound computed per thread). Defined in StageCounting.cpp,
/// whose role counter it shares.
std::optional<Poly> countExecutions(Operation *op, Canonicalizer &canon,
                                    std::vector<Poly> &constraints);

/// Check 2 through nested loops (NestedStateThreading.cpp): a loop-carried
/// state whose advances pass through a nested loop's results advances once
/// per stage used, as polynomials of the trip counts; true when it reported
/// an error. Run by the stage-balance check once the counts agree.
bool checkNestedStateThreading(FunctionOpInterface fn, Canonicalizer &canon);

} // namespace mlir::pipeline::protocol

#endif // PIPELINE_MLIR_LIB_DIALECT_PIPELINE_TRANSFORMS_SYMBOLICCOUNTS_H
