//===- AsyncReadChecks.cpp - release after the last asynchronous read -----===//
//
// Property 8 of pipeline-verify-protocol: a stage may be handed back
// (consumer.release) or re-acquired by its producer (producer.acquire) only
// after every asynchronous reader of its buffer issued by the same threads
// has finished reading:
//  - wgmma: a committed group is retired by `wgmma.wait_group N` once N or
//    fewer groups were committed after it; an uncommitted wgmma by nothing;
//  - tcgen05.mma: its reads are tracked once a tcgen05.commit covers it (a
//    release of an MMA-consumer kind is that commit); before, nothing does;
//  - bulk / TMA stores: a committed bulk group is done reading once
//    `cp.async.bulk.wait_group[.read] N` (or a tma_store pipeline's
//    producer.acquire / tail) leaves at most N newer groups pending.
//
// How an asynchronous op is tied to a stage: its shared-memory operand (the
// wgmma / tcgen05 smem descriptors, the bulk store's source) is computed
// from `pipeline.state.index %s` through pure arithmetic; the op then reads
// the stage of state %s, in every pipeline whose verbs use a state of the
// same chain as %s. Two states name the same stage when they are the same
// root advanced by offsets equal modulo the stage count. Roots are related
// across loops: states carried by one scf.for that start at offsets d1, d2
// of one root and advance in step stay d1 - d2 apart (the Hopper GEMM's
// `read` and `release`; identical operand-free `pipeline.state.make` ops
// count as one start there, and only there: two pipelines may start alike).
// Anything else (data-dependent indices, states passed through memory,
// scf.while carries) ties to no stage, and the check stays silent.
//
// A release by another warp of the role: when the threads that release a
// stage are fewer warps than the ones that read it (thread 0 releases for a
// warpgroup whose four warps each issued a wgmma on the stage, one lane of
// another warp bulk-stores it out), the release ends the readers' holds
// too, and it is ordered after their work only up to the last barrier of
// the role the releasing thread met. So what was in flight at that barrier
// (the role's program is every warp's) must not read the stage: a read
// retired after the barrier, in its own warp, is retired too late.
//
// A release by another role: where the branches of a warp-role split meet
// on one named barrier (one role arrives or syncs on it, the other syncs on
// it and then releases a stage the first role read), the release is
// ordered after the first role's work only up to that barrier: a wgmma or
// bulk-store read of the stage in flight there (committed, not retired by a
// wait_group before the barrier) may still read it when the producer
// refills it. The roles are the branches of one warp-role split, or sibling
// role splits of one block (each sees what the others had in flight at
// their named barriers). Tied to a stage as above where the roles branch
// inside the loop that carries the state; where each role has its own loop,
// a read in one loop names a stage of the other when both loops run over
// the same range and their states start alike (identical operand-free
// state.make ops, as for one loop's iter args) and advance by the same
// step: the two meet the barrier once per iteration.
//
//===----------------------------------------------------------------------===//

#include "AsyncReadStates.h"
#include "ProtocolChecks.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/IR/OperationSupport.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallPtrSet.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::pipeline;
using namespace mlir::pipeline::protocol;
using namespace mlir::pipeline::protocol::asyncread;

namespace {
/// The name a finding gives an asynchronous reader: the op's, except for a
/// wgmma written as inline asm (A from registers, which the NVVM op cannot
/// express), named by its instruction.
std::string readerName(Operation *op) {
  if (isa<LLVM::InlineAsmOp>(op))
    return "wgmma.mma_async with A in registers (llvm.inline_asm)";
  return op->getName().getStringRef().str();
}
} // namespace

namespace {

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

static void keepNewest(SmallVector<Group, 2> &groups, int64_t n) {
  // The group count is an i32 immediate the op verifiers leave unchecked: a
  // negative one retires nothing we can model, so treat it as 0 (the fuzzer
  // found `wait.group -1` asserting in erase).
  n = std::max<int64_t>(n, 0);
  if (static_cast<int64_t>(groups.size()) > n)
    groups.erase(groups.begin(), groups.end() - n);
}

/// The merge of two control-flow paths: per queue, the longer one (the
/// path that leaves more in flight).
static InFlight mergePaths(const InFlight &a, const InFlight &b) {
  InFlight m = a;
  if (b.wgmma.size() > m.wgmma.size())
    m.wgmma = b.wgmma;
  if (b.wgmmaOpen.size() > m.wgmmaOpen.size())
    m.wgmmaOpen = b.wgmmaOpen;
  if (b.tcgen05.size() > m.tcgen05.size())
    m.tcgen05 = b.tcgen05;
  if (b.bulk.size() > m.bulk.size())
    m.bulk = b.bulk;
  if (b.bulkOpen.size() > m.bulkOpen.size())
    m.bulkOpen = b.bulkOpen;
  if (b.atBarrier.size() > m.atBarrier.size() || !m.barrier) {
    m.atBarrier = b.atBarrier;
    m.barrier = b.barrier;
  }
  return m;
}

/// A release that is itself a tcgen05.commit (MMA consumers; the
/// UmmaAsync producer's commit): it covers every earlier tcgen05.mma.
static bool isTcgen05Commit(Operation *op) {
  if (auto rel = dyn_cast<ConsumerReleaseOp>(op)) {
    PipelineKind kind = getPipelineType(rel.getPipeline()).getKind();
    if (std::optional<OpType> t = rel.getOpType())
      return *t == OpType::TCGen05Mma;
    return kind == PipelineKind::TmaUmma || kind == PipelineKind::AsyncUmma;
  }
  if (auto commit = dyn_cast<ProducerCommitOp>(op))
    return getPipelineType(commit.getPipeline()).getKind() ==
           PipelineKind::UmmaAsync;
  return isa<NVVM::Tcgen05CommitOp>(op);
}

/// A barrier every warp of a role meets (a named barrier's arrive or sync,
/// the block-wide bar.sync 0): the point another warp's work is ordered
/// before.
static bool isRoleBarrier(Operation *op) {
  return isa<NamedBarrierSyncOp, NamedBarrierArriveOp, gpu::BarrierOp,
             NVVM::Barrier0Op, NVVM::BarrierOp>(op);
}

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
  // --- which stages an op reads ---------------------------------------------
  void readsOf(Operation *op, ValueRange operands, Reader kind, Group &out) {
    SmallVector<Value> work(operands.begin(), operands.end());
    llvm::SmallPtrSet<Operation *, 16> seen;
    while (!work.empty() && seen.size() < 256) {
      Value v = work.pop_back_val();
      Operation *def = v.getDefiningOp();
      if (!def || !seen.insert(def).second)
        continue;
      if (auto index = dyn_cast<StateIndexOp>(def)) {
        Read r{op, kind, canon.get(index.getState()), {}};
        r.pipes = pipesOfRoot.lookup(r.stage.root);
        out.push_back(r);
        continue;
      }
      // Follow pure, region-free arithmetic only (an accumulator chain
      // through earlier MMAs or memory does not name a stage).
      if (def->getNumRegions() || !isMemoryEffectFree(def) ||
          isa<PipelineDialect>(def->getDialect()))
        continue;
      for (Value in : def->getOperands())
        work.push_back(in);
    }
  }

  // --- the check at a release / acquire -------------------------------------
  void checkHandBack(Operation *op, const VerbRef &verb, InFlight &f) {
    Canon s = canon.get(verb.state);
    int64_t stages = getPipelineType(verb.pipeline).getStages();
    bool tcCommit = isTcgen05Commit(op);
    auto sameStage = [&](const Read &r) {
      if (!r.stage.root || r.stage.root != s.root)
        return false;
      if (!llvm::is_contained(r.pipes, verb.pipeline))
        return false;
      int64_t d = r.stage.offset - s.offset;
      return ((d % stages) + stages) % stages == 0;
    };
    auto report = [&](const Read &r, const std::string &why) {
      // One error per hand-back: the oldest read in flight (the others of
      // its group read the same stage for the same reason).
      if (!reported.insert(op).second)
        return;
      failedAny = true;
      InFlightDiagnostic diag =
          op->emitError()
          << op->getName() << " hands back a stage of " << describe(verb.pipeline)
          << " while " << readerName(r.op)
          << " may still read it asynchronously: " << why;
      diag.attachNote(r.op->getLoc())
          << "the asynchronous read of that stage, still in flight at the "
          << (isa<ProducerAcquireOp, ProducerTryAcquireOp>(op) ? "acquire"
                                                                : "release");
    };
    for (size_t g = 0; g < f.wgmma.size(); ++g)
      for (Read &r : f.wgmma[g])
        if (sameStage(r)) {
          int64_t newer = f.wgmma.size() - 1 - g;
          report(r, "its wgmma group is committed but not retired; add "
                    "nvvm.wgmma.wait.group.sync.aligned N with N <= " +
                        std::to_string(newer) +
                        " (the groups committed after it) before this op");
        }
    for (Read &r : f.wgmmaOpen)
      if (sameStage(r))
        report(r, "the wgmma is not even committed; commit its group "
                  "(nvvm.wgmma.commit.group.sync.aligned) and wait for it "
                  "(nvvm.wgmma.wait.group.sync.aligned) before this op");
    if (!tcCommit)
      for (Read &r : f.tcgen05)
        if (sameStage(r))
          report(r, "the tcgen05.mma is not covered by a tcgen05.commit and "
                    "this op is a plain mbarrier arrive; release through the "
                    "MMA (an MMA-consumer pipeline's release is the "
                    "tcgen05.commit) or wait for a tcgen05.commit first");
    for (size_t g = 0; g < f.bulk.size(); ++g)
      for (Read &r : f.bulk[g])
        if (sameStage(r)) {
          int64_t newer = f.bulk.size() - 1 - g;
          report(r, "its bulk group is committed but may still be reading "
                    "shared memory; add cp.async.bulk.wait_group.read N "
                    "(pipeline.bulk_group.wait {read, pending = N}) with N "
                    "<= " + std::to_string(newer) + " before this op");
        }
    for (Read &r : f.bulkOpen)
      if (sameStage(r))
        report(r, "the bulk store's group is not committed; commit it and "
                  "wait for its reads (cp.async.bulk.wait_group.read) before "
                  "this op");
    if (verb.verb == Verb::Release && !reported.contains(op))
      checkOtherWarps(op, verb, f, sameStage);
    if (verb.verb == Verb::Release && !reported.contains(op))
      checkOtherRole(op, verb, f, sameStage);
    if (tcCommit)
      f.tcgen05.clear();
  }

  /// The warps that execute `op` (nullopt: not decided).
  std::optional<llvm::BitVector> warpsOf(Operation *op) {
    if (blockDim <= 0 || blockDim % 32 || blockDim > 1024)
      return std::nullopt;
    std::optional<Executors> who = getExecutors(op, blockDim);
    if (!who)
      return std::nullopt;
    llvm::BitVector warps(blockDim / 32);
    for (int64_t w = 0; w < blockDim / 32; ++w)
      for (int64_t t = 32 * w; t < 32 * w + 32; ++t)
        if (who->threads.test(t)) {
          warps.set(w);
          break;
        }
    return warps;
  }

  /// A release by fewer warps than read the stage: the other warps' reads
  /// of it must be retired before the last role barrier on the way.
  template <typename SameStage>
  void checkOtherWarps(Operation *op, const VerbRef &verb, InFlight &f,
                       SameStage sameStage) {
    if (!f.barrier || f.atBarrier.empty())
      return;
    std::optional<llvm::BitVector> releasers = warpsOf(op);
    if (!releasers || releasers->none())
      return;
    for (Read &r : f.atBarrier) {
      if (!sameStage(r))
        continue;
      std::optional<llvm::BitVector> readers = warpsOf(r.op);
      if (!readers)
        continue;
      llvm::BitVector others = *readers;
      others.reset(*releasers);
      if (others.none())
        continue; // each reading warp releases its own hold (above)
      reported.insert(op);
      failedAny = true;
      bool wgmma = r.kind == Reader::Wgmma;
      InFlightDiagnostic diag =
          op->emitError()
          << op->getName() << " by " << describeWarps(*releasers)
          << " hands back a stage of " << describe(verb.pipeline)
          << " for " << describeWarps(others)
          << " too (the release ends their hold), while their "
          << readerName(r.op)
          << " may still read it asynchronously: it is retired only after "
             "the barrier that orders this release after those warps "
             "(rule: a stage's reads by every warp whose hold a release "
             "ends are retired before the point the release is ordered "
             "after); retire it in its own warp before that barrier ("
          << (wgmma ? "nvvm.wgmma.wait.group.sync.aligned"
                    : "cp.async.bulk.wait_group.read, "
                      "pipeline.bulk_group.wait {read}")
          << "), or let each warp release its own hold (one elected thread "
             "per warp, a consumer group that counts those warps)";
      diag.attachNote(r.op->getLoc())
          << "the asynchronous read of that stage by "
          << describeWarps(others);
      diag.attachNote(f.barrier->getLoc())
          << "the barrier this release is ordered after, with the read "
             "still in flight";
      return;
    }
  }

  /// A release after a named barrier that another role's loop meets with
  /// reads in flight, where the two loops' ranges are not related (not the
  /// same, not an explicit peel): the hand-over is not proven, said once
  /// per pair of loops (a warning: the checker cannot tell which stage the
  /// reads name).
  void warnUnproven(Operation *op, const InFlight::AtNamed &n) {
    auto mine = op->getParentOfType<scf::ForOp>();
    if (mine && warned.insert({mine, n.loop}).second)
      warnHandOverNotProven(op, namedBarrierId(n.barrier)->first, n.loop, mine);
  }

  /// A release ordered after another role's work by the named barrier it
  /// last synced on: that role's reads of the stage must be retired before
  /// the barrier.
  template <typename SameStage>
  void checkOtherRole(Operation *op, const VerbRef &verb, InFlight &f,
                      SameStage sameStage) {
    if (!f.barrier || f.handed.empty() || !isa<NamedBarrierSyncOp>(f.barrier))
      return;
    std::optional<std::pair<int64_t, int64_t>> id = namedBarrierId(f.barrier);
    if (!id)
      return;
    std::optional<llvm::BitVector> releasers = warpsOf(op);
    for (InFlight::AtNamed &n : f.handed) {
      if (n.unproven && namedBarrierId(n.barrier) == id) {
        warnUnproven(op, n);
        continue;
      }
      if (n.loop || namedBarrierId(n.barrier) != id)
        continue;
      for (Read &r : n.reads) {
        if (!sameStage(r))
          continue;
        std::optional<llvm::BitVector> readers = warpsOf(r.op);
        if (releasers && readers) {
          llvm::BitVector others = *readers;
          others.reset(*releasers);
          if (others.none())
            continue;
        }
        reported.insert(op);
        failedAny = true;
        bool wgmma = r.kind == Reader::Wgmma;
        InFlightDiagnostic diag =
            op->emitError()
            << op->getName()
            << (releasers ? " by " + describeWarps(*releasers) : std::string())
            << " hands back a stage of " << describe(verb.pipeline)
            << " that another role"
            << (readers ? " (" + describeWarps(*readers) + ")" : std::string())
            << " read with " << readerName(r.op)
            << ", still in flight at named barrier " << id->first
            << " that orders this release after that role: the producer may "
               "refill the stage while it is read (rule: a release by another "
               "role is ordered after the reading role's work only up to the "
               "barrier both meet; its asynchronous reads of the stage are "
               "retired before that barrier); retire it in the reading role "
               "before its named_barrier arrive ("
            << (wgmma ? "nvvm.wgmma.wait.group.sync.aligned 0"
                      : "cp.async.bulk.wait_group.read 0, "
                        "pipeline.bulk_group.wait {read}")
            << ")";
        diag.attachNote(r.op->getLoc())
            << "the asynchronous read of that stage by the other role";
        diag.attachNote(n.barrier->getLoc())
            << "that role's barrier, with the read still in flight";
        return;
      }
    }
  }

  // --- walking the function in program order -------------------------------
  static bool isRoleIf(Operation *op) {
    auto ifOp = dyn_cast<scf::IfOp>(op);
    return ifOp && isThreadSplit(ifOp) && !isGuardIf(ifOp);
  }

  void walk(Block &block, InFlight &f) {
    int roleIfs = 0;
    for (Operation &op : block)
      roleIfs += isRoleIf(&op);
    if (roleIfs < 2) {
      for (Operation &op : block)
        visit(&op, f);
      return;
    }
    // Sibling role branches run concurrently: each one's releases are also
    // checked against what the others had in flight at their named
    // barriers (a second pass, with those handed over).
    InFlight start = f;
    DenseMap<Operation *, SmallVector<InFlight::AtNamed, 2>> met;
    for (Operation &op : block) {
      size_t before = f.named.size();
      visit(&op, f);
      if (isRoleIf(&op) && f.named.size() > before)
        met[&op].append(f.named.begin() + before, f.named.end());
    }
    if (met.empty())
      return;
    InFlight again = start;
    for (Operation &op : block) {
      if (!isRoleIf(&op)) {
        visit(&op, again);
        continue;
      }
      size_t handed = again.handed.size();
      for (auto &[other, entries] : met)
        if (other != &op)
          again.handed.append(entries.begin(), entries.end());
      visit(&op, again);
      again.handed.resize(handed);
    }
  }

  void visit(Operation *op, InFlight &f) {
    if (auto mma = dyn_cast<NVVM::WgmmaMmaAsyncOp>(op)) {
      readsOf(op, {mma.getDescriptorA(), mma.getDescriptorB()}, Reader::Wgmma,
              f.wgmmaOpen);
      return;
    }
    // A wgmma with A in registers has no NVVM op: kernels issue it as a
    // small llvm.inline_asm block. Its shared-memory operands are its
    // 64-bit matrix descriptors (the registers are 32-bit).
    if (auto inlineAsm = dyn_cast<LLVM::InlineAsmOp>(op)) {
      if (inlineAsm.getAsmString().contains("wgmma.mma_async")) {
        SmallVector<Value> descriptors;
        for (Value v : inlineAsm.getOperands())
          if (v.getType().isInteger(64))
            descriptors.push_back(v);
        readsOf(op, descriptors, Reader::Wgmma, f.wgmmaOpen);
        return;
      }
    }
    if (isa<NVVM::WgmmaGroupSyncAlignedOp>(op)) {
      f.wgmma.push_back(f.wgmmaOpen);
      f.wgmmaOpen.clear();
      return;
    }
    if (auto wait = dyn_cast<NVVM::WgmmaWaitGroupSyncOp>(op)) {
      keepNewest(f.wgmma, wait.getGroup());
      return;
    }
    if (auto mma = dyn_cast<NVVM::Tcgen05MMAOp>(op)) {
      readsOf(op, {mma.getMatrixA(), mma.getMatrixB()}, Reader::Tcgen05,
              f.tcgen05);
      return;
    }
    if (auto store = dyn_cast<TmaStoreOp>(op)) {
      readsOf(op, store.getSrc(), Reader::BulkStore, f.bulkOpen);
      return;
    }
    if (isa<NVVM::CpAsyncBulkTensorSharedCTAToGlobalOp,
            NVVM::CpAsyncBulkSharedCTAToGlobalOp>(op)) {
      readsOf(op, op->getOperands(), Reader::BulkStore, f.bulkOpen);
      return;
    }
    if (isa<BulkGroupCommitOp, NVVM::CpAsyncBulkCommitGroupOp>(op)) {
      f.bulk.push_back(f.bulkOpen);
      f.bulkOpen.clear();
      return;
    }
    if (auto wait = dyn_cast<BulkGroupWaitOp>(op)) {
      keepNewest(f.bulk, wait.getPending());
      return;
    }
    if (auto wait = dyn_cast<NVVM::CpAsyncBulkWaitGroupOp>(op)) {
      keepNewest(f.bulk, wait.getGroup());
      return;
    }
    if (isRoleBarrier(op)) {
      if (!guardDepth) {
        f.snapshotAt(op);
        if (namedBarrierId(op))
          f.named.push_back({op, f.atBarrier});
      }
      return;
    }
    if (std::optional<VerbRef> verb = getVerb(op)) {
      PipelineType type = getPipelineType(verb->pipeline);
      if (type.getKind() == PipelineKind::TmaStore) {
        // PipelineTmaStore: commit = commit_group, acquire = wait_group.read
        // (stages - 1), tail = wait_group 0.
        if (verb->verb == Verb::Commit) {
          f.bulk.push_back(f.bulkOpen);
          f.bulkOpen.clear();
        } else if (verb->verb == Verb::Acquire) {
          keepNewest(f.bulk, type.getStages() - 1);
        } else if (verb->verb == Verb::Tail) {
          keepNewest(f.bulk, 0);
        }
        return;
      }
      if (verb->verb == Verb::Release || verb->verb == Verb::Acquire ||
          verb->verb == Verb::TryAcquire)
        checkHandBack(op, *verb, f);
      else if (isTcgen05Commit(op))
        f.tcgen05.clear();
      return;
    }
    if (isa<NVVM::Tcgen05CommitOp>(op)) {
      f.tcgen05.clear();
      return;
    }
    if (auto ifOp = dyn_cast<scf::IfOp>(op)) {
      InFlight t = f;
      bool guard = isGuardIf(ifOp);
      guardDepth += guard;
      walk(*ifOp.thenBlock(), t);
      guardDepth -= guard;
      if (guard) {
        // The threads that pass the guard issued (or retired) what the
        // branch did; the others issued nothing in it. Follow the former.
        f = t;
        return;
      }
      InFlight e = f;
      if (ifOp.elseBlock())
        walk(*ifOp.elseBlock(), e);
      if (ifOp.elseBlock() && isThreadSplit(ifOp)) {
        // Two roles: each branch's releases against what the other had in
        // flight at its named barriers (the then branch again, with the
        // else branch's; a hand-back is reported once).
        size_t before = f.named.size();
        InFlight e2 = f;
        e2.handed.append(t.named.begin() + before, t.named.end());
        if (e2.handed.size() > f.handed.size())
          walk(*ifOp.elseBlock(), e2);
        InFlight t2 = f;
        t2.handed.append(e.named.begin() + before, e.named.end());
        if (t2.handed.size() > f.handed.size())
          walk(*ifOp.thenBlock(), t2);
      }
      auto handed = f.handed;
      size_t before = f.named.size();
      auto named = f.named;
      named.append(t.named.begin() + std::min(before, t.named.size()), t.named.end());
      named.append(e.named.begin() + std::min(before, e.named.size()), e.named.end());
      f = mergePaths(t, e);
      f.handed = handed;
      f.named = named;
      return;
    }
    if (auto loop = dyn_cast<scf::ForOp>(op)) {
      visitLoop(loop, f);
      return;
    }
    for (Region &region : op->getRegions())
      for (Block &block : region)
        walk(block, f);
  }

  /// Rewrites the stages of what is in flight with `fn` (a root the loop
  /// boundary makes unnameable becomes null).
  template <typename Fn> static void remap(InFlight &f, Fn fn) {
    f.forEach([&](Read &r) {
      if (r.stage.root)
        r.stage = fn(r.stage);
    });
  }

  void visitLoop(scf::ForOp loop, InFlight &f) {
    Block *body = loop.getBody();
    // Another role's loop over the same range met its named barriers in
    // step with this one: its reads name this loop's stages where a leader
    // iter arg here starts alike and advances by the same step. Other
    // loops' entries are dropped here.
    auto outerHanded = f.handed;
    {
      InFlight &g = f;
      SmallVector<InFlight::AtNamed, 2> kept;
      for (InFlight::AtNamed &n : g.handed) {
        if (!n.loop) {
          kept.push_back(n);
          continue;
        }
        auto other = dyn_cast<scf::ForOp>(n.loop);
        if (!other || other == loop || n.unproven)
          continue;
        // The same range, or a peel made explicit before the later loop:
        // `other` starts `shift` iterations after this loop.
        LoopRelation rel = relateLoops(loop, other, n.barrier);
        if (rel.kind != LoopRelation::Related) {
          InFlight::AtNamed in = n;
          in.unproven = true;
          kept.push_back(in);
          continue;
        }
        InFlight::AtNamed in = n;
        in.loop = nullptr;
        for (Read &r : in.reads) {
          Canon mapped{};
          for (BlockArgument arg : loop.getRegionIterArgs()) {
            if (!isa<StateType>(arg.getType()) || canon.get(arg).root != arg)
              continue;
            Canon init = canon.get(loop.getInitArgs()[arg.getArgNumber() - 1]);
            if (r.stage.root && StateCanon::sameRoot(init.root, r.stage.root) &&
                canon.constantStep(arg) == n.step) {
              mapped = Canon{init.root, r.stage.offset - rel.shift * n.step};
              break;
            }
          }
          r.stage = mapped;
        }
        kept.push_back(in);
      }
      g.handed = kept;
    }
    // Into the first iteration: a root that a leader iter arg starts from
    // is that iter arg at an offset.
    InFlight entry = f;
    remap(entry, [&](Canon c) {
      for (BlockArgument arg : loop.getRegionIterArgs()) {
        if (!isa<StateType>(arg.getType()) || canon.get(arg).root != arg)
          continue;
        Canon init = canon.get(loop.getInitArgs()[arg.getArgNumber() - 1]);
        if (StateCanon::sameRoot(init.root, c.root))
          return Canon{arg, c.offset - init.offset};
      }
      return c;
    });
    // Three passes reach the steady state of what one iteration leaves to
    // the next (the queues are bounded by the waits in the body).
    InFlight exit;
    auto outerNamed = f.named;
    // What the other roles had in flight at their barriers is the same in
    // every iteration (it is not carried from one to the next).
    auto iterHanded = entry.handed;
    SmallVector<InFlight::AtNamed, 2> lastNamed;
    for (int pass = 0; pass < 3; ++pass) {
      exit = entry;
      walk(*body, exit);
      lastNamed = exit.named;
      InFlight next = exit;
      next.named = entry.named; // a named barrier's reads stay in its trip
      remap(next, [&](Canon c) -> Canon {
        if (auto arg = dyn_cast<BlockArgument>(c.root);
            arg && arg.getOwner() == body) {
          if (std::optional<int64_t> step = canon.constantStep(arg))
            return {arg, c.offset - *step};
          return {};
        }
        if (loop->isAncestor(c.root.getParentBlock()->getParentOp()))
          return {};
        return c;
      });
      next.handed = iterHanded;
      entry = next;
    }
    // Out of the loop: the last iteration's leader iter arg is the loop
    // result less one step.
    remap(exit, [&](Canon c) -> Canon {
      if (auto arg = dyn_cast<BlockArgument>(c.root);
          arg && arg.getOwner() == body) {
        if (std::optional<int64_t> step = canon.constantStep(arg))
          return {loop.getResult(arg.getArgNumber() - 1), c.offset - *step};
        return {};
      }
      if (loop->isAncestor(c.root.getParentBlock()->getParentOp()))
        return {};
      return c;
    });
    // The named barriers met in each iteration, for another role's loop
    // over the same range: the reads' stages as (start state, offset) of a
    // leader iter arg that advances by a constant step.
    for (size_t i = std::min(outerNamed.size(), lastNamed.size());
         i < lastNamed.size(); ++i) {
      InFlight::AtNamed out = lastNamed[i];
      out.loop = loop;
      out.step = 0;
      bool any = false;
      for (Read &r : out.reads) {
        auto arg = dyn_cast_or_null<BlockArgument>(r.stage.root);
        std::optional<int64_t> step =
            arg && arg.getOwner() == body ? canon.constantStep(arg)
                                          : std::nullopt;
        if (!step || (any && *step != out.step)) {
          r.stage = {};
          continue;
        }
        Canon init = canon.get(loop.getInitArgs()[arg.getArgNumber() - 1]);
        r.stage = {init.root, r.stage.offset + init.offset};
        out.step = *step;
        any = true;
      }
      if (any)
        outerNamed.push_back(out);
    }
    exit.named = outerNamed;
    exit.handed = outerHanded;
    // (A loop that may run zero times is taken to run at least once.)
    f = exit;
  }

  StateCanon canon;
  DenseMap<Value, SmallVector<Value, 2>> pipesOfRoot;
  llvm::DenseSet<Operation *> reported;
  llvm::DenseSet<std::pair<Operation *, Operation *>> warned;
  int64_t blockDim;
  int guardDepth = 0; // inside an elect / lane / thread guard's branch
};

} // namespace

LogicalResult protocol::checkAsyncReads(FunctionOpInterface fn,
                                        const Options &options) {
  if (fn.isExternal())
    return success();
  Checker checker(fn, getBlockDim(fn, options));
  checker.run(fn.getFunctionBody().front());
  return failure(checker.failedAny);
}
