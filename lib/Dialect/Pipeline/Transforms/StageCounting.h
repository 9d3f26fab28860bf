//===- StageCounting.h - stage counts of one role, as polynomials -*- C++ -*-===//
//
// Private to lib/Dialect/Pipeline/Transforms. The role counter of property
// 11 (StageCounting.cpp): how many times each verb of one pipeline runs in
// one role, as a polynomial over the kernel's values (SymbolicCounts.h).
// StageBalance.cpp compares the roles' counts; countExecutions (declared in
// SymbolicCounts.h) places a single op with the same counter.
//
//===----------------------------------------------------------------------===//

#ifndef PIPELINE_MLIR_LIB_DIALECT_PIPELINE_TRANSFORMS_STAGECOUNTING_H
#define PIPELINE_MLIR_LIB_DIALECT_PIPELINE_TRANSFORMS_STAGECOUNTING_H

#include "ProtocolChecks.h"
#include "SymbolicCounts.h"

#include <array>

namespace mlir::pipeline::protocol {

/// What an scf.if condition depends on, for counting.
enum class CondKind {
  Guard,    // elect / lane / thread guard inside a role: its then branch
  Role,     // splits threads or CTAs: each branch is a role of its own
  Uniform,  // kernel arguments and constants: an indicator
  LoopVar,  // a loop variable (peeled iterations)
  Data,     // memory, loop-carried values: not counted
};

/// How a branch's condition counts (see CondKind).
CondKind classify(scf::IfOp ifOp);

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

/// Counts the verbs of one pipeline in one role.
class RoleCounter {
public:
  RoleCounter(Value pipe, Canonicalizer &canon)
      : pipe(pipe), canon(canon), atoms(canon.atoms) {}

  /// Loop extents (ub - lb) the counts assume non-negative, and iteration
  /// counts of loop-variable branches (0 <= count <= trips).
  std::vector<Poly> constraints;

  /// The counts of one execution of `block`, not entering other roles.
  Counts count(Block &block);

  /// `c` (counted inside `block`) times what the ops around `block` up to
  /// the function multiply it by: loops, and branches that are not roles.
  Counts placed(Counts c, Block *block);

  /// For an op under a branch on its loop's variable (below `role`): "holds
  /// on n - 1 of the loop's n iterations"; empty when there is none or its
  /// count is not known.
  std::string loopBranchText(Operation *op, Block *role);

  /// The trip count of `loop` (tripCount, SymbolicCounts.h), its extent
  /// kept in this counter's constraints.
  std::optional<Poly> trips(scf::ForOp loop);

private:
  Value pipe;
  Canonicalizer &canon;
  AtomTable &atoms;

  static int slotOf(Verb v);
  Counts countIf(scf::IfOp ifOp);
  std::optional<Poly> indicator(scf::IfOp ifOp, bool inThen);
  Poly uniformIndicator(Value cond);
  std::optional<Poly> loopIndicator(scf::IfOp ifOp);
  std::optional<Poly> scaledLoopIndicator(scf::IfOp ifOp, scf::ForOp loop,
                                          const Poly &diff, unsigned iv,
                                          int64_t coeff, int64_t step,
                                          arith::CmpIPredicate pred);
  static int64_t countConstantIterations(int64_t lb, int64_t ub,
                                         arith::CmpIPredicate pred,
                                         int64_t bound);
  static arith::CmpIPredicate swapSides(arith::CmpIPredicate pred);
  Counts closeLoop(const Counts &body, scf::ForOp loop);
};

/// Property 11 per CTA of a cluster (StageBalanceCluster.cpp): a ring of
/// its own in every CTA needs a producer in every CTA where a consumer
/// waits, and a consumer in every CTA where its producer fills it. True
/// when it reported an error.
bool checkRolesPerCta(Value pipe, ArrayRef<Operation *> verbs,
                      FunctionOpInterface fn);

} // namespace mlir::pipeline::protocol

#endif // PIPELINE_MLIR_LIB_DIALECT_PIPELINE_TRANSFORMS_STAGECOUNTING_H
