//===- ArriveOnlyRoles.cpp - a role that only arrives on a named barrier --===//
//
// Property 9 of pipeline-verify-protocol, a named barrier one role arrives
// on (`bar.arrive`, pipeline.named_barrier.arrive) in each iteration of a
// loop while another role syncs on it. The arrive does not wait: unless
// something holds the arriving warps back in each iteration until the
// syncing side has passed its sync, they run ahead and arrive twice in one
// phase, and the phase completes on one role's arrivals (the syncing side
// then waits on the next phase, or releases a stage early). What holds them
// back, in the arriving warps' own loop body:
//  - a sync on another named barrier that the syncing warps arrive on or
//    sync on in their loop (the ping-pong pair of two named barriers);
//  - a wait on a stage of a pipeline the syncing warps produce (they
//    acquire, copy or commit its stages in their loop);
//  - an acquire of a one-stage pipeline the syncing warps release in their
//    loop (a deeper ring lets the arriving warps run a stage ahead);
//  - anything not followed (a block-wide barrier, a raw mbarrier wait, an
//    order wait, a call): taken as holding them.
// Arrives on an indexed barrier and syncs outside a loop are left alone.
// Sites whose warps are set by a value the same for every warp that the
// checker cannot evaluate (a kernel argument, a count loaded from constant
// memory or from global memory the kernel does not write: `warp < %n`) are
// decided for the values of it at which the threads meeting the barrier add
// up to its count; a value that may differ between warps (a load of a
// per-thread address, memory the kernel writes, anything not followed), or
// no such value, draws a warning that the hand-over is not proven.
//
//===----------------------------------------------------------------------===//

#include "ProtocolChecks.h"

#include "llvm/ADT/DenseSet.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

using namespace mlir;
using namespace mlir::pipeline;
using namespace mlir::pipeline::protocol;

namespace {

std::optional<int64_t> constantId(Operation *op) {
  if (auto s = dyn_cast<NamedBarrierSyncOp>(op))
    return s.getIndex() ? std::nullopt
                        : std::optional<int64_t>(s.getBarrierId());
  if (auto a = dyn_cast<NamedBarrierArriveOp>(op))
    return a.getIndex() ? std::nullopt
                        : std::optional<int64_t>(a.getBarrierId());
  return std::nullopt;
}

/// Whether the warps of `who` may run `op` (undecided: yes).
bool runBy(Operation *op, const llvm::BitVector &who, int64_t blockDim) {
  std::optional<Executors> ex = getExecutors(op, blockDim);
  return !ex || ex->threads.anyCommon(who);
}

/// What the syncing side does in its loops: the named barrier ids it meets,
/// the pipelines it produces and those it releases.
struct OtherSide {
  llvm::SmallDenseSet<int64_t, 4> ids;
  llvm::SmallPtrSet<void *, 4> produces, releases;
  bool anyIndexed = false;
};

OtherSide summarizeOther(ArrayRef<Operation *> syncs,
                         llvm::function_ref<std::optional<Executors>(
                             Operation *)> who,
                         int64_t blockDim) {
  OtherSide side;
  for (Operation *sync : syncs) {
    auto loop = sync->getParentOfType<scf::ForOp>();
    std::optional<Executors> ex = who(sync);
    loop.getBody()->walk([&](Operation *op) {
      if (!runBy(op, ex->threads, blockDim))
        return;
      if (isa<NamedBarrierSyncOp, NamedBarrierArriveOp>(op)) {
        if (std::optional<int64_t> id = constantId(op))
          side.ids.insert(*id);
        else
          side.anyIndexed = true;
        return;
      }
      std::optional<VerbRef> verb = getVerb(op);
      if (!verb)
        return;
      if (isa<ProducerAcquireOp, ProducerCommitOp, TmaLoadOp, BulkLoadOp>(op))
        side.produces.insert(verb->pipeline.getAsOpaquePointer());
      else if (isa<ConsumerReleaseOp>(op))
        side.releases.insert(verb->pipeline.getAsOpaquePointer());
    });
  }
  return side;
}

/// Whether `op`, run by the arriving warps, holds them back until the
/// syncing side signals (see the file comment). `metByOthers`: whether warps
/// other than the arriving ones meet a barrier id (one they alone meet is a
/// count error of its own, NamedBarrierBalance.cpp: not reported twice).
template <typename MetByOthers>
bool holdsBack(Operation *op, int64_t id, const OtherSide &other,
               MetByOthers metByOthers) {
  if (auto sync = dyn_cast<NamedBarrierSyncOp>(op)) {
    std::optional<int64_t> sid = constantId(op);
    return !sid || *sid == id || other.ids.contains(*sid) || other.anyIndexed ||
           !metByOthers(*sid);
  }
  if (auto wait = dyn_cast<ConsumerWaitOp>(op))
    return other.produces.contains(wait.getPipeline().getAsOpaquePointer());
  if (auto acq = dyn_cast<ProducerAcquireOp>(op))
    return other.releases.contains(acq.getPipeline().getAsOpaquePointer()) &&
           getPipelineType(acq.getPipeline()).getStages() == 1;
  if (isa<ConsumerTryWaitOp, ProducerTryAcquireOp, OrderWaitOp, InitWaitOp>(op))
    return true;
  if (isa<gpu::BarrierOp, NVVM::Barrier0Op, NVVM::BarrierOp,
          NVVM::ClusterWaitOp, CallOpInterface>(op))
    return true;
  // Raw mbarrier waits the checker does not tie to a side.
  StringRef name = op->getName().getStringRef();
  return name.starts_with("nvvm.mbarrier.try_wait") ||
         name.starts_with("nvvm.mbarrier.test_wait") ||
         name.starts_with("nvvm.mbarrier.wait") || isa<scf::WhileOp>(op) ||
         isa<LLVM::InlineAsmOp>(op);
}


/// What sets the warps of the sites of one barrier id when getExecutors
/// cannot: the one leaf of their conditions that is not a thread, lane or
/// warp id or a constant. `uniform`: it is the same for every warp (a kernel
/// argument, a load of a uniform address from constant memory or from
/// global memory the function does not write).
struct Unknown {
  Value value;
  bool uniform = false;
  bool several = false;
};

void collectUnknowns(Value v, Unknown &u, int depth = 0) {
  if (depth > 32 || getConstantInt(v)) {
    if (depth > 32)
      u.several = true;
    return;
  }
  Operation *def = v.getDefiningOp();
  bool leaf = !def;
  if (def) {
    StringRef name = def->getName().getStringRef();
    if (name.starts_with("nvvm.read.ptx.sreg.") ||
        isa<gpu::ThreadIdOp, gpu::LaneIdOp, gpu::SubgroupIdOp,
            NVVM::ElectSyncOp, NVVM::ShflOp>(def))
      return;
    leaf = def->getDialect()->getNamespace() != "arith";
  }
  if (!leaf) {
    for (Value in : def->getOperands())
      collectUnknowns(in, u, depth + 1);
    return;
  }
  if (u.value && u.value != v)
    u.several = true;
  u.value = v;
}

Unknown findUnknown(ArrayRef<Operation *> sites, bool noGlobalWrites) {
  Unknown u;
  for (Operation *site : sites)
    for (Operation *cur = site; cur && !isa<FunctionOpInterface>(cur);
         cur = cur->getParentOp())
      if (auto ifOp = dyn_cast<scf::IfOp>(cur->getParentOp()))
        if (!sameForEveryWarp(ifOp.getCondition(), noGlobalWrites))
          collectUnknowns(ifOp.getCondition(), u);
  if (u.value && !u.several)
    u.uniform = sameForEveryWarp(u.value, noGlobalWrites);
  return u;
}

} // namespace

LogicalResult protocol::checkArriveOnlyRoles(FunctionOpInterface fn,
                                             const Options &options) {
  int64_t blockDim = getBlockDim(fn, options);
  if (blockDim <= 0)
    return success();
  SmallVector<NamedBarrierArriveOp> arrives;
  DenseMap<int64_t, SmallVector<Operation *, 2>> syncsOf, sitesOf;
  DenseMap<int64_t, llvm::BitVector> metBy; // threads meeting each id
  llvm::DenseSet<std::pair<Operation *, int64_t>> reported;
  fn->walk([&](Operation *op) {
    std::optional<int64_t> id = constantId(op);
    if (!id)
      return;
    sitesOf[*id].push_back(op);
    // Who meets it: the executors of the op, or of the nearest op around
    // it that has them (a branch on the loop variable narrows a role, it
    // adds no warps); undecided: anyone.
    auto [it, fresh] = metBy.try_emplace(*id, llvm::BitVector(blockDim));
    (void)fresh;
    std::optional<Executors> ex;
    for (Operation *cur = op; cur && !ex && !isa<FunctionOpInterface>(cur);
         cur = cur->getParentOp())
      ex = getExecutors(cur, blockDim);
    if (ex && ex->threads.size() == it->second.size())
      it->second |= ex->threads;
    else
      it->second.set();
    if (auto a = dyn_cast<NamedBarrierArriveOp>(op)) {
      if (op->getParentOfType<scf::ForOp>())
        arrives.push_back(a);
    } else {
      syncsOf[*id].push_back(op);
    }
  });
  bool failed = false;
  bool noGlobalWrites = !writesGlobal(fn);
  auto warpsOf = [](const llvm::BitVector &threads) {
    llvm::BitVector warps((threads.size() + 31) / 32);
    for (int t : threads.set_bits())
      warps.set(t / 32);
    return warps;
  };
  for (NamedBarrierArriveOp arrive : arrives) {
    int64_t id = arrive.getBarrierId();
    auto syncs = syncsOf.find(id);
    if (syncs == syncsOf.end() ||
        llvm::any_of(syncs->second, [](Operation *s) {
          return !s->getParentOfType<scf::ForOp>();
        }))
      continue;
    auto loop = arrive->getParentOfType<scf::ForOp>();
    // One report per loop and id (an arrive doubled in the body is the
    // count check's).
    if (reported.contains({loop, id}))
      continue;
    // Who arrives and who syncs: decided, or decided for each value of the
    // one unknown that sets them at which the threads meeting the barrier
    // add up to its count.
    SmallVector<std::pair<Value, int64_t>, 2> bindings;
    auto who = [&](Operation *site, Value given, int64_t at) {
      return getWarpExecutors(site, blockDim, noGlobalWrites, given, at);
    };
    bool plain = who(arrive, Value(), 0).has_value() &&
                 llvm::all_of(syncs->second, [&](Operation *s) {
                   return who(s, Value(), 0).has_value();
                 });
    Unknown unknown;
    if (plain) {
      bindings.push_back({Value(), 0});
    } else {
      unknown = findUnknown(sitesOf[id], noGlobalWrites);
      if (unknown.value && !unknown.several && unknown.uniform) {
        for (int64_t at = 0; at <= blockDim; ++at) {
          llvm::BitVector all(blockDim);
          bool ok = true;
          for (Operation *site : sitesOf[id]) {
            std::optional<Executors> ex = who(site, unknown.value, at);
            if (!ex || ex->threads.size() != all.size()) {
              ok = false;
              break;
            }
            all |= ex->threads;
          }
          if (ok && 32 * static_cast<int64_t>(warpsOf(all).count()) ==
                        static_cast<int64_t>(arrive.getNumThreads()))
            bindings.push_back({unknown.value, at});
        }
      }
      if (bindings.empty()) {
        reported.insert({loop, id});
        InFlightDiagnostic diag = arrive.emitWarning();
        diag << "named barrier " << id
             << ": the warps that arrive on it in this loop, or those that "
                "sync on it, are set by "
             << (!unknown.value || unknown.several
                     ? "conditions this checker does not evaluate"
                     : unknown.uniform
                           ? "a value the same for every warp, but at no "
                             "value of it do the threads meeting the barrier "
                             "add up to its count"
                           : "a value that may differ between warps (read "
                             "from a per-thread address, or from memory the "
                             "kernel writes)")
             << ": whether the arriving warps can run ahead a whole phase "
                "is not proven (rule: a bar.arrive does not wait); set the "
                "roles by warp index and constants, kernel arguments or "
                "constant memory, or let the arriving warps sync";
        diag.attachNote(loop.getLoc()) << "the arriving warps' loop";
        if (unknown.value && !unknown.several)
          diag.attachNote(unknown.value.getLoc()) << "the value that sets them";
        continue;
      }
    }
    for (auto [given, at] : bindings) {
      std::optional<Executors> mine = who(arrive, given, at);
      if (!mine)
        continue;
      bool decided = true;
      llvm::BitVector theirs(mine->threads.size());
      for (Operation *sync : syncs->second) {
        std::optional<Executors> ex = who(sync, given, at);
        if (!ex || ex->threads.anyCommon(mine->threads)) {
          decided = false;
          break;
        }
        theirs |= ex->threads;
      }
      if (!decided)
        continue;
      OtherSide other = summarizeOther(
          syncs->second, [&](Operation *op) { return who(op, given, at); },
          blockDim);
      auto metByOthers = [&](int64_t sid) {
        auto it = metBy.find(sid);
        if (it == metBy.end())
          return false;
        llvm::BitVector others = it->second;
        others.reset(mine->threads);
        return others.any();
      };
      bool held = false;
      loop.getBody()->walk([&](Operation *op) {
        if (held || op == arrive.getOperation() ||
            !runBy(op, mine->threads, blockDim))
          return;
        held = holdsBack(op, id, other, metByOthers);
      });
      if (held)
        continue;
      reported.insert({loop, id});
      failed = true;
      InFlightDiagnostic diag =
          arrive.emitError()
          << "named barrier " << id << ": "
          << describeWarps(warpsOf(mine->threads))
          << " arrive on it in each iteration of this loop and never wait "
             "there on anything the warps that sync on it ("
          << describeWarps(warpsOf(theirs))
          << ") signal: an arrive-only role can run ahead a whole phase "
             "(rule: a bar.arrive does not wait, so the arriving warps may "
             "arrive twice before the other side's sync completes the "
             "phase, which then completes on one role's arrivals); hold "
             "them back in each iteration: sync on a second named barrier "
             "the other role arrives on (the ping-pong pair), or wait on a "
             "stage the other role produces";
      diag.attachNote(loop.getLoc()) << "the arriving warps' loop";
      diag.attachNote(syncs->second.front()->getLoc())
          << "the other side syncs on it here";
      if (given)
        diag.attachNote(given.getLoc())
            << "the warps are set by this value, the same for every warp; "
               "taken as "
            << at
            << ", at which the threads meeting the barrier add up to its "
               "count";
      break;
    }
  }
  return failure(failed);
}
