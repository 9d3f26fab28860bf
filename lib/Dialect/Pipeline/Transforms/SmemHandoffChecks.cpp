//===- SmemHandoffChecks.cpp - shared-memory tiles handed to bulk stores --===//
//
// Shared-memory hand-over (pipeline-verify-protocol). The epilogue idiom:
// the warps of a role write a tile into shared memory with ordinary stores,
// and one thread of them issues the bulk (TMA) store that reads it. Nothing
// but a barrier orders the other warps' writes before that thread's store,
// and nothing but a barrier tells the other warps that the previous store
// has finished reading (its wait, `producer_acquire()` of the
// PipelineTmaStore / `cp.async.bulk.wait_group.read`, runs on the storing
// thread only). Dropping or moving either `arrive_and_wait()` of the
// epilogue's NamedBarrier is a silent race: the store reads a half-written
// tile, or the warps overwrite a tile the store is still reading.
//
// The check walks each function in program order, tracking
//  - writes that no barrier has followed yet (per write op, with the
//    threads that execute it), and
//  - bulk stores that no barrier has followed after their wait,
// and reports
//  - a bulk store executed by some of a write's threads (fewer of them: the
//    elected storer) when that write, executed by two or more warps, reaches
//    the store with no barrier in between on some path;
//  - a write executed by two or more warps, the storer among them, when a
//    bulk store reaches it without a wait followed by a barrier.
// The same walk checks the proxy fence (a TMA store reads through the async
// proxy; ordinary stores write through the generic proxy, and only a
// `fence.proxy.async.shared::cta` between them makes the writes visible to
// it): a bulk store executed by some of a write's threads, reached by the
// write with no proxy fence in between on some path, is reported whatever
// the number of warps (any thread's fence counts).
// Who executes an op comes from the thread conditions of the scf.ifs
// around it, evaluated per thread of a block of known size (`block-dim` or
// `known_block_size`); without one, per thread of the largest block, where
// only ops run by a closed set of threads (`warp == 0`, a lane of it) are
// decided. Branches on thread
// ids are walked one after the other (each op acts for its own threads);
// other branches are paths, merged by keeping what either leaves pending;
// loop bodies are walked twice so that one iteration's stores meet the
// next iteration's writes. Precise on purpose: a barrier is any
// `named_barrier.sync` / `arrive`, CTA barrier (`gpu.barrier`,
// `nvvm.barrier0`, `nvvm.barrier`), mbarrier wait of a pipeline (they
// synchronise with other threads) or call (unknown); writes and stores whose
// addresses come from different shared-memory globals are unrelated.
//
//===----------------------------------------------------------------------===//

#include "SmemHandoffChecks.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Interfaces/CallInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallPtrSet.h"

using namespace mlir;
using namespace mlir::pipeline;
using namespace mlir::pipeline::protocol;

namespace {

/// What is pending at a point of the walk.
struct State {
  /// Multi-warp writes to shared memory no barrier has followed.
  llvm::SmallSetVector<Operation *, 8> unsynced;
  /// Writes to shared memory (generic proxy) no proxy fence has followed.
  llvm::SmallSetVector<Operation *, 8> unfenced;
  /// Bulk stores not yet handed back to the writers: true once their wait
  /// ran (a barrier after it then retires them).
  llvm::MapVector<Operation *, bool> stores;

  void merge(const State &o) {
    unsynced.insert(o.unsynced.begin(), o.unsynced.end());
    unfenced.insert(o.unfenced.begin(), o.unfenced.end());
    for (auto [op, waited] : o.stores) {
      auto it = stores.find(op);
      if (it == stores.end())
        stores.insert({op, waited});
      else
        it->second = it->second && waited;
    }
  }
};

/// The shared-memory address operand of a write.
Value writtenAddress(Operation *op) {
  if (auto st = dyn_cast<LLVM::StoreOp>(op))
    return st.getAddr();
  if (isa<NVVM::StMatrixOp>(op))
    return op->getOperand(0);
  if (op->getNumOperands() >= 2)
    return op->getOperand(1); // memref.store / vector.store
  return {};
}

class Checker {
public:
  Checker(FunctionOpInterface fn, int64_t blockDim, bool openEnded)
      : blockDim(blockDim), openEnded(openEnded) {}

  void run(Block &body) {
    State s;
    walk(body, s);
  }

  bool failed = false;

private:
  // --- who executes an op --------------------------------------------------

  /// The threads that run `op`, from the thread conditions of the scf.ifs
  /// around it; conditions the same for every thread (kernel arguments, loop
  /// variables) do not narrow it. nullopt when a condition is neither.
  // By value: a reference into the cache would dangle once it grows.
  std::optional<llvm::BitVector> threadsOf(Operation *op) {
    // Every op of a block runs on the same threads: one evaluation per
    // block (an epilogue has hundreds of stores in a few blocks).
    auto it = threadCache.find(op->getBlock());
    if (it != threadCache.end())
      return it->second;
    std::optional<llvm::BitVector> result = threadsRunning(op, blockDim);
    if (openEnded && result && result->test(blockDim - 1))
      result = std::nullopt;
    return threadCache[op->getBlock()] = std::move(result);
  }

  static int64_t warpCount(const llvm::BitVector &threads) {
    int64_t warps = 0;
    for (int64_t w = 0; w * 32 < static_cast<int64_t>(threads.size()); ++w)
      for (int64_t l = 0; l < 32 && w * 32 + l < static_cast<int64_t>(threads.size()); ++l)
        if (threads.test(w * 32 + l)) {
          ++warps;
          break;
        }
    return warps;
  }

  /// The storer runs the write too (it is one of the warps that fill the
  /// tile), and fewer threads store than write.
  static bool storerAmongWriters(const llvm::BitVector &store,
                                 const llvm::BitVector &write) {
    llvm::BitVector rest = store;
    rest.reset(write);
    return rest.none() && store.count() < write.count();
  }

  // --- which shared memory ---------------------------------------------------

  /// The shared-memory globals an address is computed from (through pure
  /// ops); empty when it comes from anything else (an argument, a load).
  llvm::SmallPtrSet<const void *, 2> rootsOf(Value addr) {
    auto it = rootCache.find(addr);
    if (it != rootCache.end())
      return it->second;
    llvm::SmallPtrSet<const void *, 2> roots;
    bool opaque = false;
    SmallVector<Value> work{addr};
    llvm::SmallPtrSet<Operation *, 32> seen;
    while (!work.empty() && seen.size() < 256) {
      Value v = work.pop_back_val();
      Operation *def = v.getDefiningOp();
      if (!def) {
        opaque = true;
        continue;
      }
      if (!seen.insert(def).second)
        continue;
      if (auto addressOf = dyn_cast<LLVM::AddressOfOp>(def)) {
        roots.insert(addressOf.getGlobalNameAttr().getAsOpaquePointer());
        continue;
      }
      if (def->getNumRegions()) {
        opaque = true;
        continue;
      }
      for (Value in : def->getOperands())
        work.push_back(in);
    }
    if (opaque)
      roots.clear();
    return rootCache[addr] = roots;
  }

  /// False only when both addresses are known to come from different
  /// shared-memory globals.
  bool mayAlias(Value a, Value b) {
    llvm::SmallPtrSet<const void *, 2> ra = rootsOf(a), rb = rootsOf(b);
    if (ra.empty() || rb.empty())
      return true;
    for (const void *r : ra)
      if (rb.contains(r))
        return true;
    return false;
  }

  // --- the ops ---------------------------------------------------------------

  /// Orders the writes of the threads that reach it before what follows in
  /// every one of them.
  static bool isBarrier(Operation *op) {
    if (isa<NamedBarrierSyncOp, NamedBarrierArriveOp, gpu::BarrierOp,
            NVVM::Barrier0Op, NVVM::BarrierOp, NVVM::BarrierArriveOp,
            CallOpInterface>(op))
      return true;
    // An mbarrier wait synchronises with the threads that arrived.
    if (std::optional<VerbRef> v = getVerb(op)) {
      if (getPipelineType(v->pipeline).getKind() == PipelineKind::TmaStore)
        return false;
      return v->verb == Verb::Wait || v->verb == Verb::Acquire ||
             v->verb == Verb::OrderWait;
    }
    return false;
  }

  /// Waits until bulk stores of the executing thread stopped reading.
  static bool isBulkWait(Operation *op) {
    if (isa<BulkGroupWaitOp, NVVM::CpAsyncBulkWaitGroupOp>(op))
      return true;
    if (std::optional<VerbRef> v = getVerb(op))
      return getPipelineType(v->pipeline).getKind() == PipelineKind::TmaStore &&
             (v->verb == Verb::Acquire || v->verb == Verb::Tail);
    return false;
  }

  void visitStore(Operation *op, State &s) {
    std::optional<llvm::BitVector> storer = threadsOf(op);
    if (!storer || storer->none())
      return;
    Value src = bulkStoreSource(op);
    for (Operation *w : s.unsynced) {
      std::optional<llvm::BitVector> writers = threadsOf(w);
      if (!writers || !storerAmongWriters(*storer, *writers) ||
          !mayAlias(writtenAddress(w), src))
        continue;
      // One finding per unsynchronised write (the stores of one group
      // read the tile for the same reason).
      if (!reported.insert(op).second || !reported.insert(w).second)
        break;
      failed = true;
      InFlightDiagnostic diag =
          op->emitError()
          << "shared-memory hand-over: this TMA store reads shared memory "
             "that "
          << describeWarps(warpsOf(*writers))
          << " write with ordinary stores, and on some path no barrier "
             "separates those writes from the store: it may read the tile "
             "before the other warps wrote it (call arrive_and_wait() on a "
             "NamedBarrier over the writing warps, or sync the CTA, after "
             "their stores and fence_view_async_shared(), before the "
             "tma_store)";
      diag.attachNote(w->getLoc())
          << "written here by " << describeWarps(warpsOf(*writers))
          << ", with no barrier after it before the store";
      break;
    }
    checkFence(op, *storer, src, s);
    s.stores.insert({op, false});
  }

  /// Proxy fence: the TMA store reads through the async proxy; ordinary
  /// stores write through the generic proxy, and only a
  /// `fence.proxy.async.shared::cta` between them makes the writes visible
  /// to it.
  void checkFence(Operation *op, const llvm::BitVector &storer, Value src,
                  State &s) {
    for (Operation *w : s.unfenced) {
      std::optional<llvm::BitVector> writers = threadsOf(w);
      if (!writers)
        continue;
      llvm::BitVector rest = storer;
      rest.reset(*writers);
      if (!rest.none() || !mayAlias(writtenAddress(w), src))
        continue;
      if (!fenceReported.insert(op).second || !fenceReported.insert(w).second)
        break;
      failed = true;
      InFlightDiagnostic diag =
          op->emitError()
          << "proxy fence: this TMA store reads shared memory through the "
             "async proxy that "
          << describeWarps(warpsOf(*writers))
          << " wrote with ordinary stores (the generic proxy), and on some "
             "path no fence.proxy.async.shared::cta lies between the writes "
             "and the store: the TMA unit may read stale data (call "
             "fence_view_async_shared() after the stores, before the "
             "barrier that hands the tile to the storing thread)";
      diag.attachNote(w->getLoc())
          << "written here, with no proxy fence after it before the store";
      break;
    }
  }

  /// `fence.proxy.async[.shared::cta]` (the NVVM op, or inline assembly
  /// holding it).
  static bool isProxyFence(Operation *op) {
    if (auto fence = dyn_cast<NVVM::FenceProxyOp>(op))
      return fence.getKind() == NVVM::ProxyKind::async ||
             fence.getKind() == NVVM::ProxyKind::async_shared;
    if (auto inlineAsm = dyn_cast<LLVM::InlineAsmOp>(op))
      return inlineAsm.getAsmString().contains("fence.proxy.async");
    return false;
  }

  void visitWrite(Operation *op, State &s) {
    std::optional<llvm::BitVector> writers = threadsOf(op);
    if (!writers || writers->none())
      return;
    s.unfenced.insert(op);
    if (warpCount(*writers) < 2)
      return;
    Value addr = writtenAddress(op);
    for (auto [st, waited] : s.stores) {
      std::optional<llvm::BitVector> storer = threadsOf(st);
      if (!storer || !storerAmongWriters(*storer, *writers) ||
          !mayAlias(addr, bulkStoreSource(st)))
        continue;
      // One finding per store still in flight (an epilogue writes its
      // tile with many stores).
      if (!reported.insert(op).second || !reported.insert(st).second)
        break;
      failed = true;
      InFlightDiagnostic diag = op->emitError();
      diag << "shared-memory hand-over: "
           << describeWarps(warpsOf(*writers))
           << " write shared memory that an earlier TMA store may still be "
              "reading: ";
      if (waited)
        diag << "its wait (producer_acquire() of the PipelineTmaStore, "
                "cp.async.bulk.wait_group.read) runs on the storing thread "
                "only, and no barrier after it tells the other warps the "
                "buffer is free (call arrive_and_wait() on a NamedBarrier "
                "over the writing warps after producer_acquire(), before "
                "these stores)";
      else
        diag << "nothing waits for the store to finish reading before these "
                "stores (call producer_acquire() of the PipelineTmaStore -- "
                "cp.async.bulk.wait_group.read -- on the storing thread, then "
                "arrive_and_wait() on a NamedBarrier over the writing warps, "
                "before these stores)";
      diag.attachNote(st->getLoc())
          << "the TMA store that may still read the buffer";
      break;
    }
    s.unsynced.insert(op);
  }

  void visit(Operation *op, State &s) {
    if (isBulkStore(op)) {
      visitStore(op, s);
      return;
    }
    if (isSharedMemoryWrite(op)) {
      visitWrite(op, s);
      return;
    }
    if (isBulkWait(op)) {
      std::optional<llvm::BitVector> waiter = threadsOf(op);
      for (auto &[st, waited] : s.stores) {
        std::optional<llvm::BitVector> storer = threadsOf(st);
        if (!waiter || !storer) {
          waited = true; // not decided: assume the storer waits
          continue;
        }
        llvm::BitVector rest = *storer;
        rest.reset(*waiter);
        if (rest.none())
          waited = true;
      }
      return;
    }
    if (isProxyFence(op)) {
      // Any thread's fence: lenient where the PTX memory model is subtle
      // (a fence by the storing thread after the barrier).
      s.unfenced.clear();
      return;
    }
    if (isa<CallOpInterface>(op))
      s.unfenced.clear(); // may fence
    if (isBarrier(op)) {
      s.unsynced.clear();
      s.stores.remove_if([](const auto &entry) { return entry.second; });
      return;
    }
    if (auto ifOp = dyn_cast<scf::IfOp>(op)) {
      if (isThreadSplit(ifOp)) {
        // Different threads: each op acts for its own threads.
        walk(*ifOp.thenBlock(), s);
        if (ifOp.elseBlock())
          walk(*ifOp.elseBlock(), s);
        return;
      }
      State t = s;
      walk(*ifOp.thenBlock(), t);
      if (ifOp.elseBlock())
        walk(*ifOp.elseBlock(), s);
      s.merge(t);
      return;
    }
    if (op->getNumRegions() && isa<LoopLikeOpInterface>(op)) {
      // Twice through the body: the second pass starts from what one
      // iteration leaves to the next. A loop may also run zero times.
      State entry = s;
      State first = s;
      walkRegions(op, first);
      State second = entry;
      second.merge(first);
      walkRegions(op, second);
      s = entry;
      s.merge(second);
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

  static llvm::BitVector warpsOf(const llvm::BitVector &threads) {
    llvm::BitVector warps((threads.size() + 31) / 32);
    for (int t = threads.find_first(); t >= 0; t = threads.find_next(t))
      warps.set(t / 32);
    return warps;
  }

  int64_t blockDim;
  /// The block size is not known: blockDim is the largest block's.
  bool openEnded;
  DenseMap<Block *, std::optional<llvm::BitVector>> threadCache;
  DenseMap<Value, llvm::SmallPtrSet<const void *, 2>> rootCache;
  llvm::SmallPtrSet<Operation *, 8> reported, fenceReported;
};

} // namespace

std::optional<llvm::BitVector> protocol::threadsRunning(Operation *op,
                                                       int64_t blockDim) {
  std::optional<llvm::BitVector> result = llvm::BitVector(blockDim, true);
  for (Operation *cur = op; result && cur->getParentOp() &&
                            !isa<FunctionOpInterface>(cur->getParentOp());
       cur = cur->getParentOp()) {
    auto ifOp = dyn_cast<scf::IfOp>(cur->getParentOp());
    if (!ifOp || isUniformCondition(ifOp.getCondition()) ||
        isLoopVariableCondition(ifOp.getCondition()))
      continue;
    bool inThen = cur->getParentRegion() == &ifOp.getThenRegion();
    for (int64_t tid = 0; tid < blockDim && result; ++tid) {
      std::optional<int64_t> c = evalForThread(ifOp.getCondition(), tid);
      if (!c)
        result = std::nullopt;
      else if (static_cast<bool>(*c) != inThen)
        result->reset(tid);
    }
  }
  return result;
}

LogicalResult protocol::checkSmemHandoff(FunctionOpInterface fn,
                                         const Options &options) {
  if (fn.isExternal())
    return success();
  int64_t blockDim = getBlockDim(fn, options);
  // Without a block size, the largest block is evaluated and an op whose
  // threads reach its last warp (`warp >= 1`, no condition at all) is not
  // decided: closed sets (`warp == 0`, a lane of it) do not depend on it.
  bool openEnded = blockDim <= 0;
  if (openEnded)
    blockDim = 1024;
  else if (blockDim % 32 != 0 || blockDim > 1024)
    return success();
  // Only functions with both halves of the idiom.
  bool stores = false, writes = false;
  fn->walk([&](Operation *op) {
    stores |= isBulkStore(op);
    writes |= isSharedMemoryWrite(op);
  });
  if (!stores || !writes)
    return success();
  Checker checker(fn, blockDim, openEnded);
  checker.run(fn.getFunctionBody().front());
  return failure(checker.failed);
}
