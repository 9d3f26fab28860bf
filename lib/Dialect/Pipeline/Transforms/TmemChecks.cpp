//===- TmemChecks.cpp - tensor memory: alloc, fences, dealloc -------------===//
//
// The tcgen05 (tensor memory) rules of pipeline-verify-protocol, run by
// checkFences (FenceChecks.cpp) beside the wgmma fences; the statically
// recognisable forms:
//  - tcgen05.wait::ld before the registers of a tcgen05.ld are read: the
//    load is asynchronous. The result is followed through pure views
//    (bitcasts, extracts) to the ops that compute with or store it; each
//    must come after a tcgen05.wait::ld in program order (in the load's
//    block, or before the use in the blocks around it). Uses outside the
//    load's block's nest are left alone.
//  - tcgen05.fence around the hand-over of a tensor-memory stage (an
//    umma_async pipeline: the MMA writes the accumulator, the epilogue reads
//    it): after the consumer.wait / producer.acquire that hands a stage over
//    and before the first tcgen05 op on it, tcgen05.fence::after_thread_sync;
//    after the last tcgen05 op and before the consumer.release that hands it
//    back, tcgen05.fence::before_thread_sync. Without them the tcgen05 ops
//    are not ordered with the mbarrier hand-over (the epilogue may read an
//    accumulator the MMA still writes, or the MMA overwrite one still read).
//  - after a tcgen05.alloc in a top-level branch, before other warps'
//    tcgen05 ops: fence_before, a CTA-wide barrier, fence_after (the
//    mirror of the dealloc's);
//  - before a tcgen05.dealloc that runs after the roles (at the function's
//    top level, or in a branch of its own there): every tcgen05 op (ld, st,
//    mma, cp, commit, shift) of other warps must be followed by
//    tcgen05.fence::before_thread_sync, then a CTA-wide barrier at top
//    level, then tcgen05.fence::after_thread_sync before the dealloc;
//    otherwise the columns are freed (and maybe allocated again) while those
//    warps still use them;
//  - a tcgen05.dealloc.cta_group::2 (a CTA pair frees its columns) after a
//    barrier.cluster.wait that follows the cta_group::2 alloc: the CTAs of
//    the pair allocate together, and one CTA's dealloc that runs before its
//    peer's alloc completed is undefined (a launch failure when the peer
//    starts late: NVIDIA/cutlass#3435). CTA barriers order only this CTA;
//  - before the consumer.release that hands a tensor-memory stage back (an
//    umma_async pipeline), a tcgen05.wait::ld on every path after each
//    tcgen05.ld of that stage: the fence::before_thread_sync orders the
//    thread's completed tcgen05 ops with the arrive, and a load still in
//    flight may read columns the next MMA overwrites (a wait only under a
//    branch, e.g. of the lanes that use the registers, leaves the others'
//    loads pending: NVIDIA/cutlass#3652);
//  - a tcgen05.alloc.cta_group::2 after a cluster barrier (barrier.cluster
//    .wait, or the cluster's init wait) on every path: the issuing warp must
//    know the peer CTA launched and takes part (PTX ISA; NVIDIA/cutlass
//    #3316). A CTA barrier before it says nothing of the peer;
//  - a kernel that runs tcgen05.alloc must give the columns back: no
//    tcgen05.dealloc in the function, or (all column counts constant, none in
//    a loop) fewer columns deallocated than allocated, leaves them allocated
//    after the CTA exits, and the next CTA's tcgen05.alloc on that SM waits
//    for them forever.
//
//===----------------------------------------------------------------------===//

#include "TmemChecks.h"

#include "SmemHandoffChecks.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/LoopLikeInterface.h"

#include "llvm/ADT/SmallPtrSet.h"

using namespace mlir;
using namespace mlir::pipeline;
using namespace mlir::pipeline::protocol;

namespace {

bool isTcgen05Use(Operation *op) {
  return isa<NVVM::Tcgen05LdOp, NVVM::Tcgen05StOp, NVVM::Tcgen05MMAOp,
             NVVM::Tcgen05MMASparseOp, NVVM::Tcgen05MMABlockScaleOp,
             NVVM::Tcgen05MMASparseBlockScaleOp, NVVM::Tcgen05MMAWsOp,
             NVVM::Tcgen05MMAWsSparseOp, NVVM::Tcgen05CpOp,
             NVVM::Tcgen05CommitOp, NVVM::Tcgen05ShiftOp>(op);
}

bool isTcgen05Fence(Operation *op, NVVM::Tcgen05FenceKind kind) {
  auto fence = dyn_cast<NVVM::Tcgen05FenceOp>(op);
  return fence && fence.getKind() == kind;
}

bool isWaitLoad(Operation *op) {
  auto wait = dyn_cast<NVVM::Tcgen05WaitOp>(op);
  return wait && wait.getKind() == NVVM::Tcgen05WaitKind::LOAD;
}


/// A tcgen05 op that reads or writes tensor memory (not a commit: it only
/// tracks the MMAs before it).
bool isTcgen05Access(Operation *op) {
  return isTcgen05Use(op) && !isa<NVVM::Tcgen05CommitOp>(op);
}

/// True when a wait::ld lies between `ld` and `user` in program order
/// (before `user` in each block around it, up to `ld`'s block), or when the
/// order is not decided (`user` outside `ld`'s nest, or before it).
bool waitBetween(Operation *ld, Operation *user) {
  auto holdsWait = [](Operation *op) {
    bool found = false;
    op->walk([&](Operation *inner) {
      if (isWaitLoad(inner))
        found = true;
    });
    return found;
  };
  Operation *cur = user;
  while (cur->getBlock() != ld->getBlock()) {
    for (Operation *prev = cur->getPrevNode(); prev; prev = prev->getPrevNode())
      if (holdsWait(prev))
        return true;
    cur = cur->getParentOp();
    if (!cur || isa<FunctionOpInterface>(cur))
      return true; // not in the load's nest: not decided
  }
  if (!ld->isBeforeInBlock(cur))
    return true; // a later iteration's use of an earlier result: not decided
  for (Operation *op = ld->getNextNode(); op && op != cur; op = op->getNextNode())
    if (holdsWait(op))
      return true;
  return false;
}

/// Pure views of a value: the registers are read by what uses them.
bool isView(Operation *op) {
  return isa<LLVM::BitcastOp, LLVM::ExtractValueOp, LLVM::ExtractElementOp,
             UnrealizedConversionCastOp>(op) ||
         op->getName().getStringRef() == "vector.extract" ||
         op->getName().getStringRef() == "vector.bitcast" ||
         op->getName().getStringRef() == "arith.bitcast";
}


/// A barrier every thread of the CTA reaches: bar.sync 0, the cluster
/// barrier, the pipelines' init sync.
bool isCtaBarrier(Operation *op) {
  return isa<gpu::BarrierOp, NVVM::Barrier0Op, NVVM::BarrierOp,
             NVVM::ClusterWaitOp>(op) ||
         op->getName().getStringRef() == "pipeline.init_wait";
}

} // namespace

//===----------------------------------------------------------------------===//
// Tcgen05.wait::ld
//===----------------------------------------------------------------------===//

void TmemChecker::checkWaitLoad(NVVM::Tcgen05LdOp ld) {
  SmallVector<Value> work{ld.getResult()};
  llvm::SmallPtrSet<Operation *, 16> seen;
  while (!work.empty()) {
    Value v = work.pop_back_val();
    for (Operation *user : v.getUsers()) {
      if (!seen.insert(user).second)
        continue;
      if (isView(user)) {
        for (Value r : user->getResults())
          work.push_back(r);
        continue;
      }
      if (waitBetween(ld, user))
        continue;
      failed = true;
      InFlightDiagnostic diag =
          user->emitError()
          << "tcgen05 wait: this op reads the registers of a tcgen05.ld "
             "with no tcgen05.wait::ld in between: the load is "
             "asynchronous and the registers may not hold the tensor "
             "memory's data yet (call tcgen05.wait_load() after "
             "load_32x32b(), before using its result)";
      diag.attachNote(ld.getLoc()) << "the tcgen05.ld";
      return; // one finding per load
    }
  }
}

//===----------------------------------------------------------------------===//
// Every TMEM column allocated is given back
//===----------------------------------------------------------------------===//

/// Tensor memory outlives nothing but its deallocation: columns a CTA
/// allocates and never deallocates stay taken after it exits, and the next
/// CTA's tcgen05.alloc on that SM blocks until they are free (forever).
/// No tcgen05.dealloc in the function is an error at each alloc; with every
/// column count a constant and no alloc or dealloc in a loop, the columns
/// deallocated must add up to those allocated.
void TmemChecker::checkTmemFreed(ArrayRef<NVVM::Tcgen05AllocOp> allocs,
                    ArrayRef<NVVM::Tcgen05DeallocOp> deallocs) {
  if (allocs.empty())
    return;
  if (deallocs.empty()) {
    for (NVVM::Tcgen05AllocOp alloc : allocs) {
      failed = true;
      alloc->emitError()
          << "TMEM leak: this tcgen05.alloc has no tcgen05.dealloc in the "
             "kernel: its columns stay allocated after the CTA exits, and "
             "the next CTA's tcgen05.alloc on this SM waits for them "
             "forever (call tmem.dealloc() with the same column count at "
             "the end of the kernel, after tcgen05.fence_before_thread_"
             "sync(), a CTA barrier and tcgen05.fence_after_thread_sync())";
    }
    return;
  }
  auto inLoop = [](Operation *op) {
    return op->getParentOfType<LoopLikeOpInterface>() != nullptr;
  };
  auto columns = [](Value n) -> std::optional<int64_t> {
    APInt v;
    if (!matchPattern(n, m_ConstantInt(&v)))
      return std::nullopt;
    return v.getSExtValue();
  };
  int64_t allocated = 0, freed = 0;
  for (NVVM::Tcgen05AllocOp alloc : allocs) {
    std::optional<int64_t> n = columns(alloc.getNCols());
    if (!n || inLoop(alloc))
      return;
    allocated += *n;
  }
  for (NVVM::Tcgen05DeallocOp dealloc : deallocs) {
    std::optional<int64_t> n = columns(dealloc.getNCols());
    if (!n || inLoop(dealloc))
      return;
    freed += *n;
  }
  if (freed >= allocated)
    return;
  failed = true;
  InFlightDiagnostic diag = allocs.front()->emitError()
                            << "TMEM leak: the kernel allocates "
                            << allocated << " tensor-memory columns and "
                            << "deallocates " << freed
                            << ": the rest stay allocated after the CTA "
                               "exits, and the next CTA's tcgen05.alloc on "
                               "this SM may wait for them forever (dealloc "
                               "every column allocated)";
  for (NVVM::Tcgen05DeallocOp dealloc : deallocs)
    diag.attachNote(dealloc.getLoc()) << "a tcgen05.dealloc";
}

//===----------------------------------------------------------------------===//
// Tcgen05 fences around a tensor-memory stage's hand-over
//===----------------------------------------------------------------------===//

/// After a consumer.wait / producer.acquire of an umma_async pipeline: a
/// tcgen05.fence::after_thread_sync before the first tcgen05 access that
/// follows in program order (in the loop body or function around it).
void TmemChecker::checkTcgen05AfterSync(Operation *verb, Value pipe) {
  for (Operation *cur = verb; cur && !isa<FunctionOpInterface>(cur);
       cur = cur->getParentOp()) {
    for (Operation *next = cur->getNextNode(); next;
         next = next->getNextNode()) {
      Operation *access = nullptr;
      bool fenced = false;
      next->walk<WalkOrder::PreOrder>([&](Operation *inner) {
        if (fenced || access)
          return WalkResult::interrupt();
        if (isTcgen05Fence(inner, NVVM::Tcgen05FenceKind::AFTER_THREAD_SYNC))
          fenced = true;
        else if (isTcgen05Access(inner))
          access = inner;
        return WalkResult::advance();
      });
      if (fenced)
        return;
      if (access) {
        failed = true;
        bool wait = isa<ConsumerWaitOp>(verb);
        InFlightDiagnostic diag =
            access->emitError()
            << "tcgen05 fence: this tcgen05 op uses the tensor memory "
               "that the "
            << (wait ? "consumer.wait" : "producer.acquire") << " of "
            << describe(pipe)
            << " hands over, with no tcgen05.fence::after_thread_sync "
               "in between: it is not ordered after the other role's "
               "tcgen05 ops on that stage (call "
               "tcgen05.fence_after_thread_sync() after "
            << (wait ? "consumer_wait" : "producer_acquire") << ")";
        diag.attachNote(verb->getLoc())
            << (wait ? "the consumer.wait" : "the producer.acquire");
        return;
      }
    }
    if (isa<LoopLikeOpInterface>(cur->getParentOp()))
      return; // the end of the loop body: the next stage's own verbs
  }
}

/// Before a consumer.release of an umma_async pipeline: after the last
/// tcgen05 access since the stage's wait, a
/// tcgen05.fence::before_thread_sync.
void TmemChecker::checkTcgen05BeforeRelease(ConsumerReleaseOp release) {
  Value pipe = release.getPipeline();
  for (Operation *cur = release; cur && !isa<FunctionOpInterface>(cur);
       cur = cur->getParentOp()) {
    for (Operation *prev = cur->getPrevNode(); prev;
         prev = prev->getPrevNode()) {
      // The latest op first: a fence after the access settles it.
      Operation *fence = nullptr, *access = nullptr;
      bool waitSeen = false;
      prev->walk([&](Operation *inner) {
        if (isTcgen05Fence(inner, NVVM::Tcgen05FenceKind::BEFORE_THREAD_SYNC))
          fence = inner;
        else if (isTcgen05Access(inner))
          access = inner;
        else if (auto w = dyn_cast<ConsumerWaitOp>(inner);
                 w && w.getPipeline() == pipe)
          waitSeen = true;
      });
      if (fence)
        return;
      if (access) {
        failed = true;
        InFlightDiagnostic diag =
            release->emitError()
            << "tcgen05 fence: this consumer.release hands the tensor "
               "memory of "
            << describe(pipe)
            << " back with no tcgen05.fence::before_thread_sync after "
               "the tcgen05 ops that used it: the next MMA may overwrite "
               "the stage before they are done (call "
               "tcgen05.fence_before_thread_sync() before "
               "consumer_release)";
        diag.attachNote(access->getLoc()) << "the tcgen05 op";
        return;
      }
      if (waitSeen)
        return;
    }
    if (isa<LoopLikeOpInterface>(cur->getParentOp()))
      return;
  }
}

//===----------------------------------------------------------------------===//
// The alloc at the start of the kernel
//===----------------------------------------------------------------------===//

/// The mirror of the dealloc: a tcgen05.alloc in a top-level branch (or
/// at top level) and other warps' tcgen05 ops in later top-level ops.
/// Between them: tcgen05.fence::before_thread_sync after the alloc, a
/// CTA-wide barrier at top level (the pipelines' init sync, or
/// k.sync_threads()), tcgen05.fence::after_thread_sync before the use.
void TmemChecker::checkAlloc(NVVM::Tcgen05AllocOp alloc, Block &body) {
  Operation *top = alloc;
  while (top->getBlock() != &body) {
    Operation *parent = top->getParentOp();
    if (!parent || !isa<scf::IfOp>(parent))
      return;
    top = parent;
  }
  std::optional<llvm::BitVector> mine = threads(alloc);
  if (!mine || mine->none())
    return;
  auto holds = [](Operation *op, auto pred) {
    bool found = false;
    op->walk([&](Operation *inner) {
      if (pred(inner))
        found = true;
    });
    return found;
  };
  auto isBefore = [](Operation *op) {
    return isTcgen05Fence(op, NVVM::Tcgen05FenceKind::BEFORE_THREAD_SYNC);
  };
  auto isAfter = [](Operation *op) {
    return isTcgen05Fence(op, NVVM::Tcgen05FenceKind::AFTER_THREAD_SYNC);
  };
  // The first other-warp tcgen05 op after the alloc's op.
  Operation *use = nullptr, *useTop = nullptr;
  for (Operation *op = top->getNextNode(); op && !use; op = op->getNextNode())
    op->walk<WalkOrder::PreOrder>([&](Operation *inner) {
      if (use || !isTcgen05Use(inner))
        return;
      std::optional<llvm::BitVector> t = threads(inner);
      if (t && !subset(*t, *mine)) {
        use = inner;
        useTop = op;
      }
    });
  if (!use)
    return;
  Operation *barrier = nullptr;
  for (Operation *op = top->getNextNode(); op != useTop && !barrier;
       op = op->getNextNode())
    if (isCtaBarrier(op))
      barrier = op;
  auto report = [&]() -> InFlightDiagnostic {
    failed = true;
    InFlightDiagnostic diag = alloc->emitError();
    diag.attachNote(use->getLoc()) << "a tcgen05 op of another warp";
    return diag;
  };
  if (!barrier) {
    report() << "TMEM alloc: other warps use the tensor memory this "
                "tcgen05.alloc allocates with no CTA barrier after it: "
                "they may run (and read its address) before the alloc "
                "(call tcgen05.fence_before_thread_sync(), then the "
                "barrier -- pipeline_init_arrive/pipeline_init_wait or "
                "k.sync_threads() -- then "
                "tcgen05.fence_after_thread_sync() after tmem.alloc())";
    return;
  }
  bool fencedBefore = false, after = false;
  top->walk<WalkOrder::PreOrder>([&](Operation *inner) {
    if (inner == alloc)
      after = true;
    else if (after && isBefore(inner))
      fencedBefore = true;
  });
  for (Operation *op = top->getNextNode(); !fencedBefore && op != barrier;
       op = op->getNextNode())
    fencedBefore = holds(op, isBefore);
  if (!fencedBefore) {
    report() << "tcgen05 fence: no tcgen05.fence::before_thread_sync "
                "between this tcgen05.alloc and the CTA barrier that "
                "publishes it to the other warps (call "
                "tcgen05.fence_before_thread_sync() after tmem.alloc(), "
                "before the barrier)";
    return;
  }
  bool fencedAfter = false;
  for (Operation *op = barrier->getNextNode(); op != useTop && !fencedAfter;
       op = op->getNextNode())
    fencedAfter = holds(op, isAfter);
  for (Operation *cur = use; cur != useTop && !fencedAfter;
       cur = cur->getParentOp())
    for (Operation *prev = cur->getPrevNode(); prev && !fencedAfter;
         prev = prev->getPrevNode())
      fencedAfter = holds(prev, isAfter);
  if (!fencedAfter)
    report() << "tcgen05 fence: other warps' tcgen05 ops follow the CTA "
                "barrier that publishes this tcgen05.alloc with no "
                "tcgen05.fence::after_thread_sync in between (call "
                "tcgen05.fence_after_thread_sync() after the barrier)";
}

//===----------------------------------------------------------------------===//
// The dealloc at the end of the kernel
//===----------------------------------------------------------------------===//

/// The common form: the roles are branches at the function's top level,
/// and the tcgen05.dealloc runs after them (at top level, or in a branch
/// of its own). Between the other warps' tcgen05 ops and the dealloc:
/// tcgen05.fence::before_thread_sync after each op, a CTA-wide barrier at
/// top level, tcgen05.fence::after_thread_sync before the dealloc. A
/// dealloc inside a role (handed over through a pipeline's mbarriers) is
/// not looked at.
void TmemChecker::checkDealloc(NVVM::Tcgen05DeallocOp dealloc, Block &body) {
  Operation *top = dealloc;
  while (top->getBlock() != &body) {
    Operation *parent = top->getParentOp();
    if (!parent || isa<FunctionOpInterface>(parent))
      return;
    if (!isa<scf::IfOp>(parent))
      return; // in a loop, ...: not the end-of-kernel form
    top = parent;
  }
  std::optional<llvm::BitVector> mine = threads(dealloc);
  if (!mine || mine->none())
    return;
  // The last top-level barrier before the dealloc's op.
  Operation *barrier = nullptr;
  for (Operation *op = top->getPrevNode(); op && !barrier; op = op->getPrevNode())
    if (isCtaBarrier(op))
      barrier = op;
  // Other warps' tcgen05 ops before the dealloc, in top-level order.
  SmallVector<Operation *> uses;
  for (Operation &op : body) {
    if (&op == top)
      break;
    op.walk([&](Operation *inner) {
      if (!isTcgen05Use(inner))
        return;
      std::optional<llvm::BitVector> t = threads(inner);
      if (t && !subset(*t, *mine))
        uses.push_back(inner);
    });
  }
  if (uses.empty())
    return;
  auto report = [&](Operation *use) -> InFlightDiagnostic {
    failed = true;
    InFlightDiagnostic diag = dealloc->emitError();
    if (use)
      diag.attachNote(use->getLoc()) << "a tcgen05 op of another warp";
    return diag;
  };
  for (Operation *use : uses) {
    Operation *useTop = use;
    while (useTop->getBlock() != &body)
      useTop = useTop->getParentOp();
    if (!barrier || !useTop->isBeforeInBlock(barrier)) {
      report(use)
          << "TMEM dealloc: this tcgen05.dealloc frees tensor memory that "
             "other warps' tcgen05 ops use, with no CTA barrier between "
             "them: the columns may be freed (and allocated again) while "
             "those warps still use them (call "
             "tcgen05.fence_before_thread_sync(), then k.sync_threads() "
             "(k.cluster_sync() for a CTA pair), then "
             "tcgen05.fence_after_thread_sync() before tmem.dealloc())";
      return;
    }
    // A fence_before after the op: later in its top-level op (pre-order),
    // or at top level before the barrier.
    bool fenced = false, after = false;
    useTop->walk<WalkOrder::PreOrder>([&](Operation *inner) {
      if (inner == use)
        after = true;
      else if (after && isTcgen05Fence(inner,
                                       NVVM::Tcgen05FenceKind::BEFORE_THREAD_SYNC))
        fenced = true;
    });
    for (Operation *op = useTop->getNextNode(); !fenced && op != barrier;
         op = op->getNextNode())
      op->walk([&](Operation *inner) {
        if (isTcgen05Fence(inner, NVVM::Tcgen05FenceKind::BEFORE_THREAD_SYNC))
          fenced = true;
      });
    if (!fenced) {
      report(use)
          << "tcgen05 fence: the CTA barrier orders this tcgen05.dealloc "
             "after other warps' tcgen05 ops, but no "
             "tcgen05.fence::before_thread_sync follows those ops before "
             "it: their tensor-memory accesses may still be in flight "
             "(call tcgen05.fence_before_thread_sync() before the "
             "barrier)";
      return;
    }
  }
  // A fence_after between the barrier and the dealloc.
  bool fencedAfter = false;
  auto scan = [&](Operation *op) {
    op->walk([&](Operation *inner) {
      if (isTcgen05Fence(inner, NVVM::Tcgen05FenceKind::AFTER_THREAD_SYNC))
        fencedAfter = true;
    });
  };
  for (Operation *op = barrier->getNextNode(); op != top; op = op->getNextNode())
    scan(op);
  for (Operation *cur = dealloc; cur != top; cur = cur->getParentOp())
    for (Operation *prev = cur->getPrevNode(); prev; prev = prev->getPrevNode())
      scan(prev);
  if (!fencedAfter)
    report(nullptr)
        << "tcgen05 fence: no tcgen05.fence::after_thread_sync between the "
           "CTA barrier that orders other warps' tcgen05 ops and this "
           "tcgen05.dealloc (call tcgen05.fence_after_thread_sync() after "
           "the barrier, before tmem.dealloc())";
}

//===----------------------------------------------------------------------===//
// A CTA pair's dealloc after a cluster barrier
//===----------------------------------------------------------------------===//

namespace {
/// The op of `body` that holds `op` through scf.if ops only (the end-of-
/// kernel form); null when a loop or another region op is in between.
Operation *topThroughIfs(Operation *op, Block &body) {
  Operation *top = op;
  while (top->getBlock() != &body) {
    Operation *parent = top->getParentOp();
    if (!parent || isa<FunctionOpInterface>(parent) || !isa<scf::IfOp>(parent))
      return nullptr;
    top = parent;
  }
  return top;
}

/// A barrier over every CTA of the cluster: barrier.cluster.wait, or the
/// pipelines' init sync of a cluster.
bool isClusterBarrier(Operation *op) {
  if (isa<NVVM::ClusterWaitOp>(op))
    return true;
  if (auto wait = dyn_cast<InitWaitOp>(op))
    return wait.getClusterSize() > 1;
  return false;
}
} // namespace

void TmemChecker::checkPairDealloc(ArrayRef<NVVM::Tcgen05AllocOp> allocs,
                                   NVVM::Tcgen05DeallocOp dealloc, Block &body) {
  if (dealloc.getGroup() != NVVM::CTAGroupKind::CTA_2)
    return;
  Operation *deallocTop = topThroughIfs(dealloc, body);
  if (!deallocTop)
    return;
  for (NVVM::Tcgen05AllocOp alloc : allocs) {
    if (alloc.getGroup() != NVVM::CTAGroupKind::CTA_2)
      continue;
    Operation *allocTop = topThroughIfs(alloc, body);
    if (!allocTop || !allocTop->isBeforeInBlock(deallocTop))
      continue;
    bool synced = false;
    auto scan = [&](Operation *op) {
      op->walk([&](Operation *inner) {
        if (isClusterBarrier(inner))
          synced = true;
      });
    };
    for (Operation *op = allocTop->getNextNode(); op != deallocTop;
         op = op->getNextNode())
      scan(op);
    // Before the dealloc inside its own branches.
    for (Operation *cur = dealloc; cur != deallocTop; cur = cur->getParentOp())
      for (Operation *prev = cur->getPrevNode(); prev; prev = prev->getPrevNode())
        scan(prev);
    if (synced)
      continue;
    failed = true;
    InFlightDiagnostic diag =
        dealloc->emitError()
        << "TMEM dealloc: this tcgen05.dealloc.cta_group::2 frees the "
           "columns of a CTA pair with no cluster barrier after the "
           "cta_group::2 tcgen05.alloc: CTA barriers order only this CTA, "
           "so it may run before the peer CTA's alloc completed (undefined: "
           "a launch failure when the peer starts late) (call "
           "k.cluster_sync() between tmem.alloc() and tmem.dealloc(), as "
           "before the dealloc at the end of the kernel)";
    diag.attachNote(alloc.getLoc()) << "the cta_group::2 tcgen05.alloc";
    return;
  }
}

//===----------------------------------------------------------------------===//
// A CTA pair's alloc after a cluster barrier
//===----------------------------------------------------------------------===//

void TmemChecker::checkPairAlloc(NVVM::Tcgen05AllocOp alloc) {
  if (alloc.getGroup() != NVVM::CTAGroupKind::CTA_2)
    return;
  // A cluster barrier on every path before the alloc: an op before it in
  // its block, or before one of the ops around it, that is (or holds at its
  // own top level) a barrier.cluster.wait or the cluster's init wait. One
  // only under a branch or in a loop before it is not on every path.
  auto isOrHolds = [](Operation *op) {
    if (isClusterBarrier(op))
      return true;
    if (op->getNumRegions() == 0 || isa<scf::IfOp, LoopLikeOpInterface>(op))
      return false;
    for (Region &region : op->getRegions())
      for (Block &block : region)
        for (Operation &inner : block)
          if (isClusterBarrier(&inner))
            return true;
    return false;
  };
  for (Operation *cur = alloc; cur && !isa<FunctionOpInterface>(cur);
       cur = cur->getParentOp())
    for (Operation *prev = cur->getPrevNode(); prev; prev = prev->getPrevNode())
      if (isOrHolds(prev))
        return;
  failed = true;
  alloc->emitError()
      << "TMEM alloc: this tcgen05.alloc.cta_group::2 allocates for a CTA "
         "pair with no cluster barrier before it on every path (rule: the "
         "issuing warp must make sure the peer CTA has launched and takes "
         "part in the pair's collective ops, PTX ISA tcgen05.alloc; a CTA "
         "barrier or mbarrier init says nothing of the peer: "
         "NVIDIA/cutlass#3316) (call k.cluster_sync(), or the pipelines' "
         "pipeline_init_arrive / pipeline_init_wait of the cluster, before "
         "tmem.alloc(), then publish the address with k.sync_threads())";
}

//===----------------------------------------------------------------------===//
// Tcgen05.wait::ld before the stage is handed back
//===----------------------------------------------------------------------===//

void TmemChecker::checkWaitLoadBeforeRelease(ConsumerReleaseOp release) {
  Value pipe = release.getPipeline();
  for (Operation *cur = release; cur && !isa<FunctionOpInterface>(cur);
       cur = cur->getParentOp()) {
    for (Operation *prev = cur->getPrevNode(); prev;
         prev = prev->getPrevNode()) {
      if (isWaitLoad(prev))
        return; // every load before it is done, on every path
      if (auto w = dyn_cast<ConsumerWaitOp>(prev); w && w.getPipeline() == pipe)
        return; // the stage's tenure starts here
      // A load nested in `prev` (a branch, an inner loop) that no later
      // wait::ld of its own block follows, or the load itself.
      Operation *pending = nullptr;
      bool waitsInside = false;
      prev->walk([&](Operation *inner) {
        if (auto w = dyn_cast<ConsumerWaitOp>(inner); w && w.getPipeline() == pipe)
          waitsInside = true;
        auto ld = dyn_cast<NVVM::Tcgen05LdOp>(inner);
        if (!ld || pending)
          return;
        bool waited = false;
        for (Operation *next = ld->getNextNode(); next && !waited;
             next = next->getNextNode())
          waited = isWaitLoad(next);
        if (!waited)
          pending = ld;
      });
      if (waitsInside)
        return; // not the simple form: the stage is re-taken in there
      if (pending) {
        failed = true;
        InFlightDiagnostic diag =
            release->emitError()
            << "tcgen05 wait: this consumer.release hands the tensor memory "
               "of "
            << describe(pipe)
            << " back while a tcgen05.ld of it may still be in flight: no "
               "tcgen05.wait::ld follows the load on every path to the "
               "release (a wait only in a branch leaves the other lanes' "
               "loads pending), and the next MMA may overwrite the columns "
               "it reads (call tcgen05.wait_load() after load_32x32b(), "
               "outside any branch, before consumer_release)";
        diag.attachNote(pending->getLoc()) << "the tcgen05.ld";
        return;
      }
    }
    if (isa<LoopLikeOpInterface>(cur->getParentOp()))
      return;
  }
}

//===----------------------------------------------------------------------===//
// Who runs an op
//===----------------------------------------------------------------------===//

// By value: a reference into the cache would dangle once it grows.
std::optional<llvm::BitVector> TmemChecker::threads(Operation *op) {
  // Every op of a block runs on the same threads.
  auto it = cache.find(op->getBlock());
  if (it != cache.end())
    return it->second;
  return cache[op->getBlock()] = threadsRunning(op, blockDim);
}

bool TmemChecker::subset(const llvm::BitVector &a, const llvm::BitVector &b) {
  llvm::BitVector rest = a;
  rest.reset(b);
  return rest.none();
}
