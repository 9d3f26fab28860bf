//===- AsyncReadChecker.h - check 8's reads in flight, walker -*- C++ -*-===//
//
// Check 8 (AsyncReadChecks.cpp, AsyncReadHandBack.cpp): the asynchronous
// reads of stages a path leaves in flight, and the walker that follows them
// in program order and checks each hand-back.
//
//===----------------------------------------------------------------------===//

#ifndef PIPELINE_MLIR_TRANSFORMS_ASYNCREADCHECKER_H
#define PIPELINE_MLIR_TRANSFORMS_ASYNCREADCHECKER_H

#include "AsyncReadStates.h"
#include "ProtocolChecks.h"

#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLFunctionalExtras.h"

namespace mlir::pipeline::protocol::asyncread {

//===----------------------------------------------------------------------===//
// Asynchronous readers and what is in flight
//===----------------------------------------------------------------------===//

enum class Reader { Wgmma, Tcgen05, BulkStore };

struct Read {
  Operation *op;
  Reader kind;
  Canon stage;                   // root null: no longer nameable
  SmallVector<Value, 2> pipes;   // pipelines whose verbs use this state chain
};

using Group = SmallVector<Read, 4>;

struct InFlight {
  SmallVector<Group, 2> wgmma;      // committed groups, oldest first
  Group wgmmaOpen;               // issued, not yet committed
  Group tcgen05;                 // issued, not covered by a tcgen05.commit
  SmallVector<Group, 2> bulk;       // committed bulk groups, oldest first
  Group bulkOpen;
  // The wgmma and bulk-store reads in flight at the last barrier of the
  // role (named barrier, bar.sync 0) on this path, and that barrier.
  Group atBarrier;
  Operation *barrier = nullptr;
  // The reads in flight at each named barrier (no index) this path met, and
  // (`handed`) those another role branch met, for the release by another
  // role: the barrier op and what was in flight there.
  struct AtNamed {
    Operation *barrier;
    Group reads;
    // Set: met in each iteration of this loop (another role's), the reads'
    // stages as (start state, offset) of a state advancing by `step`; they
    // name a stage only in a loop over the same range (see visitLoop).
    Operation *loop = nullptr;
    int64_t step = 0;
    // Set: met in each iteration of `loop` (another role's), whose range
    // differs from the receiving loop's other than by an explicit peel; a
    // release after this barrier there is not checked against its reads
    // (a warning says so).
    bool unproven = false;
    // Set: met in each iteration of another role's loop that ends later
    // than this role's loop `tailOf`, whose releases after it (a peeled
    // tail, straight-line) meet those last iterations; the reads' stages
    // as (a result of `tailOf`, offset) at its first meet after it, one
    // `step` more at each later meet (see visitLoop, checkOtherRole).
    Operation *tailOf = nullptr;
    int64_t tailMeets = 0;
  };
  SmallVector<AtNamed, 2> named;
  SmallVector<AtNamed, 2> handed;

  template <typename Fn> void forEach(Fn fn) {
    for (Group &g : wgmma)
      for (Read &r : g)
        fn(r);
    for (Read &r : wgmmaOpen)
      fn(r);
    for (Read &r : tcgen05)
      fn(r);
    for (Group &g : bulk)
      for (Read &r : g)
        fn(r);
    for (Read &r : bulkOpen)
      fn(r);
    for (Read &r : atBarrier)
      fn(r);
    for (AtNamed &n : named)
      for (Read &r : n.reads)
        fn(r);
    for (AtNamed &n : handed)
      for (Read &r : n.reads)
        fn(r);
  }

  /// What is in flight now, as the snapshot taken at a barrier.
  void snapshotAt(Operation *op) {
    atBarrier.clear();
    for (Group &g : wgmma)
      atBarrier.append(g.begin(), g.end());
    atBarrier.append(wgmmaOpen.begin(), wgmmaOpen.end());
    for (Group &g : bulk)
      atBarrier.append(g.begin(), g.end());
    atBarrier.append(bulkOpen.begin(), bulkOpen.end());
    barrier = op;
  }
};

/// A release that is itself a tcgen05.commit (MMA consumers; the
/// UmmaAsync producer's commit): it covers every earlier tcgen05.mma.
bool isTcgen05Commit(Operation *op);

class Checker {
public:
  Checker(FunctionOpInterface fn, int64_t blockDim) : blockDim(blockDim) {
    fn->walk([&](Operation *op) {
      if (std::optional<VerbRef> v = getVerb(op)) {
        Value root = canon.get(v->state).root;
        auto &list = pipesOfRoot[root];
        if (!llvm::is_contained(list, v->pipeline))
          list.push_back(v->pipeline);
      }
    });
  }

  void run(Block &body) {
    InFlight f;
    walk(body, f);
  }

  bool failedAny = false;

private:
  using SameStageFn = llvm::function_ref<bool(const Read &)>;

  // Which stages an op reads (AsyncReadChecks.cpp).
  void readsOf(Operation *op, ValueRange operands, Reader kind, Group &out);
  void readsOfStates(Operation *op, ValueRange operands, Reader kind,
                     Group &out);

  // The check at a release / acquire (AsyncReadHandBack.cpp).
  void checkHandBack(Operation *op, const VerbRef &verb, InFlight &f);
  void checkRefill(Operation *op, const VerbRef &verb, InFlight &f);
  std::optional<llvm::BitVector> warpsOf(Operation *op);
  void checkOtherWarps(Operation *op, const VerbRef &verb, InFlight &f,
                       SameStageFn sameStage);
  void warnUnproven(Operation *op, const InFlight::AtNamed &n);
  void checkOtherRole(Operation *op, const VerbRef &verb, InFlight &f,
                      SameStageFn sameStage);

  // Walking the function in program order (AsyncReadChecks.cpp).
  static bool isRoleIf(Operation *op);
  void walk(Block &block, InFlight &f);
  void visit(Operation *op, InFlight &f);
  void visitLoop(scf::ForOp loop, InFlight &f);
  InFlight::AtNamed mapTail(scf::ForOp loop, const InFlight::AtNamed &n);

  StateCanon canon;
  DenseMap<Value, SmallVector<Value, 2>> pipesOfRoot;
  llvm::DenseSet<Operation *> reported;
  llvm::DenseSet<std::pair<Operation *, Operation *>> warned;
  int64_t blockDim;
  int guardDepth = 0; // inside an elect / lane / thread guard's branch
};

} // namespace mlir::pipeline::protocol::asyncread

#endif // PIPELINE_MLIR_TRANSFORMS_ASYNCREADCHECKER_H
