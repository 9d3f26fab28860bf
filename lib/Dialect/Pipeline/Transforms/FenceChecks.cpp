//===- FenceChecks.cpp - wgmma and proxy ordering fences ------------------===//
//
// Ordering fences of the tensor-core instructions (pipeline-verify-protocol),
// the statically recognisable forms:
//  - wgmma.fence before the first wgmma.mma_async of each warp: until then
//    the tensor cores may read accumulator / A registers before the warp's
//    earlier writes to them land. Walked per thread: a fence counts for the
//    threads that run it (thread conditions of the scf.ifs around it), paths
//    that are not thread splits keep only what both fenced, and a loop is
//    taken to run at least once.
//  - wgmma.fence between an op that writes an MMA's accumulator or register
//    A fragment and that MMA: the operand is followed back on SSA (through
//    insert/extractvalue, casts, scf.if and scf.for results and iter_args)
//    to the ops that compute it; a wgmma result chained into the next MMA
//    is ordered by the hardware, constants and undef have no place in
//    program order (the back end materializes them), anything else (the
//    accumulator rescaled, P converted for P V) needs a wgmma.fence after
//    it and before the MMA in program order, around a loop's back edge too.
//  - a fence.proxy.async.shared::cta between the ordinary load of a
//    clc_fetch_async response and its consumer.release (the next
//    try_cancel writes the buffer through the async proxy).
//
// The tensor-memory (tcgen05) rules -- tcgen05.wait::ld, the tcgen05 fences
// around an umma_async stage's hand-over, after the alloc and before the
// dealloc, and the columns given back -- are in TmemChecks.cpp; checkFences
// runs both families.
//
//===----------------------------------------------------------------------===//

#include "SmemHandoffChecks.h"
#include "TmemChecks.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Interfaces/CallInterfaces.h"
#include "mlir/Interfaces/LoopLikeInterface.h"

#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/SmallPtrSet.h"

using namespace mlir;
using namespace mlir::pipeline;
using namespace mlir::pipeline::protocol;

namespace {

bool isWgmmaMma(Operation *op) {
  if (isa<NVVM::WgmmaMmaAsyncOp>(op))
    return true;
  auto inlineAsm = dyn_cast<LLVM::InlineAsmOp>(op);
  return inlineAsm && inlineAsm.getAsmString().contains("wgmma.mma_async");
}

bool isWgmmaFence(Operation *op) {
  if (isa<NVVM::WgmmaFenceAlignedOp>(op))
    return true;
  auto inlineAsm = dyn_cast<LLVM::InlineAsmOp>(op);
  return inlineAsm && inlineAsm.getAsmString().contains("wgmma.fence");
}

bool holdsOp(Operation *op, llvm::function_ref<bool(Operation *)> pred) {
  bool found = false;
  op->walk([&](Operation *inner) {
    if (!found && pred(inner))
      found = true;
  });
  return found;
}

/// The operands of a wgmma that are its accumulator or register A
/// fragment: the inouts of nvvm.wgmma.mma_async; of an inline-asm wgmma,
/// the inputs tied to an output (the accumulator) and the "r" / "f"
/// register inputs (A), not the descriptors ("l") or immediates ("n").
SmallVector<Value> wgmmaRegisterOperands(Operation *op) {
  if (auto mma = dyn_cast<NVVM::WgmmaMmaAsyncOp>(op))
    return {mma.getInouts()};
  SmallVector<Value> out;
  auto inlineAsm = dyn_cast<LLVM::InlineAsmOp>(op);
  if (!inlineAsm)
    return out;
  SmallVector<StringRef> constraints;
  inlineAsm.getConstraints().split(constraints, ',');
  unsigned input = 0;
  for (StringRef c : constraints) {
    c = c.trim();
    if (c.starts_with("=") || c.starts_with("~"))
      continue;
    if (input >= inlineAsm.getNumOperands())
      break;
    Value v = inlineAsm.getOperand(input++);
    if (!c.empty() && (llvm::isDigit(c.front()) || c == "r" || c == "f"))
      out.push_back(v);
  }
  return out;
}

/// `fence.proxy.async[.shared::cta]`, or a call (it may fence).
bool isProxyFenceOrCall(Operation *op) {
  if (auto fence = dyn_cast<NVVM::FenceProxyOp>(op))
    return fence.getKind() == NVVM::ProxyKind::async ||
           fence.getKind() == NVVM::ProxyKind::async_shared;
  if (auto inlineAsm = dyn_cast<LLVM::InlineAsmOp>(op))
    return inlineAsm.getAsmString().contains("fence.proxy.async");
  return isa<CallOpInterface>(op);
}

bool isSharedLoad(Operation *op) {
  auto load = dyn_cast<LLVM::LoadOp>(op);
  auto ptr = load ? dyn_cast<LLVM::LLVMPointerType>(load.getAddr().getType())
                  : LLVM::LLVMPointerType();
  return ptr && ptr.getAddressSpace() == 3;
}


class Checker {
public:
  explicit Checker(int64_t blockDim) : blockDim(blockDim) {}
  bool failed = false;

  // --- the CLC response: proxy fence before its release ---------------------
  /// A clc_fetch_async stage is read with an ordinary load (the generic
  /// proxy); the release lets the scheduler's next try_cancel write the
  /// buffer through the async proxy. Between the last load since the
  /// stage's wait and the release (in the release's block, ops nested in
  /// it included) a proxy fence must order them.
  void checkClcRelease(ConsumerReleaseOp release) {
    if (getPipelineType(release.getPipeline()).getKind() !=
        PipelineKind::ClcFetchAsync)
      return;
    for (Operation *op = release->getPrevNode(); op; op = op->getPrevNode()) {
      if (auto wait = dyn_cast<ConsumerWaitOp>(op);
          wait && wait.getPipeline() == release.getPipeline())
        return;
      // The latest op first: a fence after the load settles it.
      Operation *fence = nullptr, *load = nullptr;
      op->walk([&](Operation *inner) {
        if (isProxyFenceOrCall(inner))
          fence = inner;
        else if (isSharedLoad(inner))
          load = inner;
      });
      if (fence)
        return;
      if (!load)
        continue;
      failed = true;
      InFlightDiagnostic diag =
          release->emitError()
          << "proxy fence: the response of " << describe(release.getPipeline())
          << " was read with an ordinary load (the generic proxy), and this consumer_release lets the next try_cancel "
             "write the buffer through the async proxy with no "
             "fence.proxy.async.shared::cta in between (call "
             "fence_view_async_shared() after reading the response, before "
             "consumer_release)";
      diag.attachNote(load->getLoc()) << "the response read here";
      return;
    }
  }


  // --- wgmma.fence after register writes between MMAs -----------------------
  /// The ops whose results the register operand `v` of an MMA is computed
  /// from, other than wgmma results (ordered by the hardware), constants and
  /// undef (no place in program order).
  void registerWriters(Value v, SmallVectorImpl<Operation *> &writers,
                       llvm::SmallPtrSetImpl<void *> &seen) {
    if (!seen.insert(v.getAsOpaquePointer()).second || seen.size() > 4096)
      return;
    if (auto arg = dyn_cast<BlockArgument>(v)) {
      auto loop = dyn_cast<scf::ForOp>(arg.getOwner()->getParentOp());
      if (!loop || arg.getArgNumber() == 0)
        return; // a kernel argument, an induction variable: not decided
      unsigned i = arg.getArgNumber() - 1;
      registerWriters(loop.getInitArgs()[i], writers, seen);
      registerWriters(loop.getBody()->getTerminator()->getOperand(i), writers,
                      seen);
      return;
    }
    Operation *def = v.getDefiningOp();
    if (isWgmmaMma(def) ||
        isa<LLVM::UndefOp, LLVM::PoisonOp, LLVM::ZeroOp, LLVM::ConstantOp>(
            def) ||
        def->hasTrait<OpTrait::ConstantLike>())
      return;
    if (isa<LLVM::InsertValueOp, LLVM::ExtractValueOp, LLVM::BitcastOp,
            UnrealizedConversionCastOp>(def)) {
      for (Value operand : def->getOperands())
        registerWriters(operand, writers, seen);
      return;
    }
    auto result = cast<OpResult>(v);
    if (auto ifOp = dyn_cast<scf::IfOp>(def)) {
      for (Region &r : ifOp->getRegions())
        if (!r.empty())
          registerWriters(
              r.front().getTerminator()->getOperand(result.getResultNumber()),
              writers, seen);
      return;
    }
    if (auto loop = dyn_cast<scf::ForOp>(def)) {
      unsigned i = result.getResultNumber();
      registerWriters(loop.getInitArgs()[i], writers, seen);
      registerWriters(loop.getBody()->getTerminator()->getOperand(i), writers,
                      seen);
      return;
    }
    writers.push_back(def);
  }

  /// A wgmma.fence after `writer` within `ancestor` (which holds it), in
  /// program order: later in its block, then after each op around it.
  bool fenceAfterWithin(Operation *writer, Operation *ancestor) {
    for (Operation *cur = writer; cur && cur != ancestor;
         cur = cur->getParentOp())
      for (Operation *next = cur->getNextNode(); next;
           next = next->getNextNode())
        if (holdsFence(next))
          return true;
    return false;
  }

  bool holdsFence(Operation *op) {
    auto it = fenceCache.find(op);
    if (it != fenceCache.end())
      return it->second;
    return fenceCache[op] = holdsOp(op, isWgmmaFence);
  }

  /// A wgmma.fence runs after `writer` and before `mma` in program order
  /// (around the back edge of a loop holding both, when `writer` comes
  /// after `mma` in its body). True when the order is not decided.
  bool fencedBetween(Operation *writer, Operation *mma) {
    for (Operation *cur = mma;;) {
      for (Operation *prev = cur->getPrevNode(); prev;
           prev = prev->getPrevNode()) {
        if (prev == writer)
          return false;
        if (prev->isAncestor(writer))
          return fenceAfterWithin(writer, prev);
        if (holdsFence(prev))
          return true;
      }
      Operation *parent = cur->getParentOp();
      if (!parent || isa<FunctionOpInterface>(parent))
        return true; // the writer is in no block around the MMA
      if (isa<LoopLikeOpInterface>(parent) && parent->isAncestor(writer))
        return fenceAfterWithin(writer, parent); // the back edge
      if (!isa<scf::IfOp, scf::ForOp>(parent))
        return true;
      cur = parent;
    }
  }

  void checkRegisterFence(Operation *mma) {
    SmallVector<Operation *> writers;
    llvm::SmallPtrSet<void *, 32> seen;
    for (Value operand : wgmmaRegisterOperands(mma))
      registerWriters(operand, writers, seen);
    llvm::SmallPtrSet<Operation *, 32> checked;
    {
      for (Operation *writer : writers) {
        if (!checked.insert(writer).second)
          continue;
        if (fencedBetween(writer, mma))
          continue;
        failed = true;
        InFlightDiagnostic diag =
            mma->emitError()
            << "wgmma fence: this wgmma.mma_async reads registers (its "
               "accumulator or A fragment) that an op wrote with no "
               "wgmma.fence in between: the tensor cores may read them "
               "before that write lands (call wgmma.fence() -- "
               "warpgroup_arrive -- after the last write to the "
               "accumulator or A fragment, before the MMA)";
        diag.attachNote(writer->getLoc()) << "the register write";
        reported.insert(mma); // one finding per MMA
        return;
      }
    }
  }

  // --- the walk: wgmma.fence ---------------------------------------------
  struct State {
    llvm::BitVector wgmmaFenced;
    // Threads with a wgmma.fence since their last read of an MMA's
    // registers (all of them at the start: nothing was read).
    llvm::BitVector fencedSinceRead;
    void meet(const State &o) {
      wgmmaFenced &= o.wgmmaFenced;
      fencedSinceRead &= o.fencedSinceRead;
    }
  };

  void run(Block &body) {
    State s;
    s.wgmmaFenced = llvm::BitVector(blockDim);
    s.fencedSinceRead = llvm::BitVector(blockDim, true);
    markRegisterReaders(body);
    walk(body, s);
  }

  /// The ops that read an MMA's result registers: its results followed
  /// through views (extract/insertvalue, casts) and loop and branch
  /// carries to the first other op (softmax on S, the rescale of O, an
  /// epilogue's store). Another MMA chained on them is not a reader.
  void markRegisterReaders(Block &body) {
    SmallVector<Value> work;
    llvm::SmallPtrSet<void *, 32> seen;
    body.getParentOp()->walk([&](Operation *op) {
      if (isWgmmaMma(op))
        for (Value r : op->getResults())
          work.push_back(r);
    });
    auto push = [&](Value v) {
      if (seen.insert(v.getAsOpaquePointer()).second)
        work.push_back(v);
    };
    while (!work.empty() && seen.size() < 65536) {
      Value v = work.pop_back_val();
      for (OpOperand &use : v.getUses()) {
        Operation *user = use.getOwner();
        unsigned idx = use.getOperandNumber();
        if (isWgmmaMma(user))
          continue;
        if (isa<LLVM::ExtractValueOp, LLVM::InsertValueOp, LLVM::BitcastOp,
                UnrealizedConversionCastOp>(user)) {
          for (Value r : user->getResults())
            push(r);
          continue;
        }
        if (isa<scf::YieldOp>(user)) {
          Operation *parent = user->getParentOp();
          if (auto loop = dyn_cast<scf::ForOp>(parent)) {
            push(loop.getRegionIterArgs()[idx]);
            push(loop->getResult(idx));
          } else if (isa<scf::IfOp>(parent)) {
            push(parent->getResult(idx));
          }
          continue;
        }
        if (auto loop = dyn_cast<scf::ForOp>(user)) {
          if (idx >= loop.getNumControlOperands()) {
            unsigned i = idx - loop.getNumControlOperands();
            push(loop.getRegionIterArgs()[i]);
            push(loop->getResult(i));
          }
          continue;
        }
        registerReaders.insert(user);
      }
    }
  }

private:
  // By value: a reference into the cache would dangle once it grows.
  std::optional<llvm::BitVector> threads(Operation *op) {
    // Every op of a block runs on the same threads.
    auto it = cache.find(op->getBlock());
    if (it != cache.end())
      return it->second;
    return cache[op->getBlock()] = threadsRunning(op, blockDim);
  }
  llvm::BitVector threadsOrAll(Operation *op) {
    std::optional<llvm::BitVector> t = threads(op);
    return t ? *t : llvm::BitVector(blockDim, true);
  }

  static bool subset(const llvm::BitVector &a, const llvm::BitVector &b) {
    llvm::BitVector rest = a;
    rest.reset(b);
    return rest.none();
  }

  void visitWgmma(Operation *op, State &s) {
    std::optional<llvm::BitVector> t = threads(op);
    if (!t || t->none())
      return;
    if (!subset(*t, s.wgmmaFenced)) {
      reportFirst(op, *t, s);
      return;
    }
    if (subset(*t, s.fencedSinceRead))
      return;
    // One finding per unfenced start: the MMAs after it are not reported.
    s.fencedSinceRead |= *t;
    if (!reported.insert(op).second)
      return;
    failed = true;
    op->emitError()
        << "wgmma fence: this wgmma.mma_async may follow ops that read "
           "earlier MMAs' registers (the softmax of S, the rescale of O, an "
           "epilogue) with no wgmma.fence in between: the tensor cores may "
           "write those registers before the reads are done (call "
           "wgmma.fence() -- warpgroup_arrive -- before each batch of MMAs, "
           "after the register reads)";
  }

  void reportFirst(Operation *op, const llvm::BitVector &t, State &s) {
    llvm::BitVector missing = t;
    missing.reset(s.wgmmaFenced);
    // One finding per unfenced start: the MMAs after it are not reported.
    s.wgmmaFenced |= t;
    s.fencedSinceRead |= t;
    if (!reported.insert(op).second)
      return;
    llvm::BitVector warps((blockDim + 31) / 32);
    for (int i = missing.find_first(); i >= 0; i = missing.find_next(i))
      warps.set(i / 32);
    failed = true;
    op->emitError()
        << "wgmma fence: this wgmma.mma_async may be the first of "
        << describeWarps(warps)
        << " with no wgmma.fence before it on some path: the tensor cores "
           "may read the accumulator and A registers before the warps' "
           "earlier writes to them land (call wgmma.fence() -- "
           "warpgroup_arrive -- before the warpgroup's first MMA)";
  }

  void visit(Operation *op, State &s) {
    if (isWgmmaFence(op)) {
      llvm::BitVector t = threadsOrAll(op);
      s.wgmmaFenced |= t;
      s.fencedSinceRead |= t;
      return;
    }
    if (registerReaders.contains(op))
      s.fencedSinceRead.reset(threadsOrAll(op));
    if (isWgmmaMma(op)) {
      visitWgmma(op, s);
      return;
    }
    if (auto ifOp = dyn_cast<scf::IfOp>(op)) {
      if (isThreadSplit(ifOp)) {
        // A thread split: each op acts for its own threads.
        walk(*ifOp.thenBlock(), s);
        if (ifOp.elseBlock())
          walk(*ifOp.elseBlock(), s);
        return;
      }
      State t = s;
      walk(*ifOp.thenBlock(), t);
      if (ifOp.elseBlock())
        walk(*ifOp.elseBlock(), s);
      s.meet(t);
      return;
    }
    if (op->getNumRegions() && isa<LoopLikeOpInterface>(op)) {
      // Run at least once; the second pass sees what one iteration leaves
      // to the next.
      State first = s;
      walkRegions(op, first);
      walkRegions(op, first);
      s = first;
      return;
    }
    walkRegions(op, s);
  }

  void walkRegions(Operation *op, State &s) {
    for (Region &region : op->getRegions())
      for (Block &block : region)
        walk(block, s);
  }
  void walk(Block &block, State &s) {
    for (Operation &op : block)
      visit(&op, s);
  }

  int64_t blockDim;
  DenseMap<Operation *, bool> fenceCache;
  llvm::SmallPtrSet<Operation *, 32> registerReaders;
  DenseMap<Block *, std::optional<llvm::BitVector>> cache;
  llvm::SmallPtrSet<Operation *, 8> reported;
};

} // namespace

LogicalResult protocol::checkFences(FunctionOpInterface fn,
                                    const Options &options) {
  if (fn.isExternal())
    return success();
  int64_t blockDim = getBlockDim(fn, options);
  bool walkNeeded = false;
  SmallVector<NVVM::Tcgen05LdOp> loads;
  SmallVector<NVVM::Tcgen05DeallocOp> deallocs;
  SmallVector<ConsumerReleaseOp> releases;
  SmallVector<NVVM::Tcgen05AllocOp> allocs;
  SmallVector<Operation *> mmas;
  SmallVector<std::pair<Operation *, Value>> tmemSyncs;
  auto isTmemStage = [](Value pipe) {
    return getPipelineType(pipe).getKind() == PipelineKind::UmmaAsync;
  };
  fn->walk([&](Operation *op) {
    if (isWgmmaMma(op))
      mmas.push_back(op);
    if (auto w = dyn_cast<ConsumerWaitOp>(op); w && isTmemStage(w.getPipeline()))
      tmemSyncs.push_back({op, w.getPipeline()});
    if (auto a = dyn_cast<ProducerAcquireOp>(op);
        a && isTmemStage(a.getPipeline()))
      tmemSyncs.push_back({op, a.getPipeline()});
    if (auto a = dyn_cast<NVVM::Tcgen05AllocOp>(op))
      allocs.push_back(a);
    if (auto rel = dyn_cast<ConsumerReleaseOp>(op))
      releases.push_back(rel);
    if (auto ld = dyn_cast<NVVM::Tcgen05LdOp>(op))
      loads.push_back(ld);
    if (auto d = dyn_cast<NVVM::Tcgen05DeallocOp>(op))
      deallocs.push_back(d);
    walkNeeded |= isWgmmaMma(op);
  });
  Checker checker(blockDim);
  TmemChecker tmem(blockDim);
  tmem.checkTmemFreed(allocs, deallocs);
  for (NVVM::Tcgen05LdOp ld : loads)
    tmem.checkWaitLoad(ld);
  for (ConsumerReleaseOp rel : releases) {
    checker.checkClcRelease(rel);
    if (isTmemStage(rel.getPipeline())) {
      tmem.checkTcgen05BeforeRelease(rel);
      tmem.checkWaitLoadBeforeRelease(rel);
    }
  }
  for (auto [verb, pipe] : tmemSyncs)
    tmem.checkTcgen05AfterSync(verb, pipe);
  for (Operation *mma : mmas)
    checker.checkRegisterFence(mma);
  // Who runs what needs a block of known size.
  if (blockDim > 0 && blockDim % 32 == 0 && blockDim <= 1024) {
    if (walkNeeded)
      checker.run(fn.getFunctionBody().front());
    for (NVVM::Tcgen05DeallocOp d : deallocs) {
      tmem.checkDealloc(d, fn.getFunctionBody().front());
      tmem.checkPairDealloc(allocs, d, fn.getFunctionBody().front());
    }
    for (NVVM::Tcgen05AllocOp a : allocs)
      tmem.checkAlloc(a, fn.getFunctionBody().front());
  }
  // After the dealloc's (a pair kernel without any cluster barrier draws
  // the dealloc's error first, at the dealloc).
  for (NVVM::Tcgen05AllocOp a : allocs)
    tmem.checkPairAlloc(a);
  return failure(checker.failed || tmem.failed);
}
