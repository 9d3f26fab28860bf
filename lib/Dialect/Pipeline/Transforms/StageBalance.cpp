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
// prologue's stages are more than the consumer takes (tripCount); so does a
// loop from 1 with no verb before it in its block (no peeled first
// iteration) whose extent can go negative (`range(1, n)`). The roles of a
// side must cover the other side's stages: every role all of them
// (cooperative consumers) or together all of them (roles that split the
// stages). Two counts that differ as polynomials are tested
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
// The counting is StageCounting.cpp's; the rule per CTA of a cluster is
// StageBalanceCluster.cpp's. Once the counts agree, a state that passes
// through a nested loop's results is checked to advance once per stage
// used, with the same polynomials (NestedStateThreading.cpp).
//
//===----------------------------------------------------------------------===//

#include "StageCounting.h"

#include "llvm/ADT/MapVector.h"

using namespace mlir;
using namespace mlir::pipeline;
using namespace mlir::pipeline::protocol;

namespace {

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
    diag << describe(pipe) << ": this role " << does(first) << " "
         << stagesOf(a, atoms) << " but " << does(second) << " "
         << printPoly(b, atoms) << " (" << w->text() << "); every pipeline."
         << (first == kAcquire ? "producer.acquire" : "consumer.wait")
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
              "outside the loop (a prologue before it, a last iteration "
              "peeled after it) still all run; guard each of them with the "
              "trip count, `if n > i`)";
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

} // namespace

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
