//===- NamedBarrierChecks.cpp - named barrier ids and thread counts -------===//
//
// Property 9 of pipeline-verify-protocol. The CTA has 16 hardware barriers;
// `bar.sync id, n` completes once n threads (counted per warp) arrived on
// id. So, in one kernel:
//  - id 0 is the block-wide barrier of __syncthreads (gpu.barrier,
//    nvvm.barrier0, the CTA sync that ends pipeline.create): a named barrier
//    on id 0 next to one of those collides with it;
//  - one id has one thread count: two ops on one id with different counts
//    are two barriers sharing an id;
//  - the warps that reach an id are the warps it counts: more threads than
//    the count means two roles share the id (each phase completes with a mix
//    of both: the one-launch-in-dozens hang), fewer means it never completes.
//
// Who reaches an op is found by evaluating, for every thread of the block
// (1-D blocks of known size: `block-dim=` or the gpu.func's
// known_block_size), the scf.if conditions around it and the barrier index
// (`id + index`, `arrive_w_index`), built from thread / lane / warp ids and
// constants with arith ops (nvvm.shfl.sync idx from a constant lane,
// elect.sync = lane 0). Ops behind a condition that depends on anything
// else (kernel arguments, CTA rank, loop variables, memory) are left out of
// the count, and an id reached by such an op gets no count check.
//
//===----------------------------------------------------------------------===//

#include "ProtocolChecks.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/MapVector.h"

using namespace mlir;
using namespace mlir::pipeline;
using namespace mlir::pipeline::protocol;

namespace {

/// Whether thread `tid` executes `op`, as far as the scf.if branches around
/// it tell (loops are taken to run); nullopt when a condition is not
/// decidable from the thread id.
std::optional<bool> executes(Operation *op, int64_t tid) {
  for (Operation *child = op, *parent = op->getParentOp(); parent;
       child = parent, parent = parent->getParentOp()) {
    if (isa<FunctionOpInterface>(parent))
      return true;
    auto ifOp = dyn_cast<scf::IfOp>(parent);
    if (!ifOp)
      continue;
    std::optional<int64_t> c = evalForThread(ifOp.getCondition(), tid);
    if (!c)
      return std::nullopt;
    bool inThen = child->getParentRegion() == &ifOp.getThenRegion();
    if (static_cast<bool>(*c) != inThen)
      return false;
  }
  return true;
}

struct Use {
  Operation *op;
  int64_t threads;
  llvm::BitVector warps; // warps that reach the op on this id
};

struct IdUses {
  SmallVector<Use> uses;
  bool complete = true; // every op that may use the id is counted
};

int64_t barrierThreads(Operation *op) {
  return op->getAttrOfType<IntegerAttr>("num_threads").getInt();
}

int64_t barrierBase(Operation *op) {
  return op->getAttrOfType<IntegerAttr>("barrier_id").getInt();
}

/// Ops that use barrier 0 for the whole block.
bool isBlockWideSync(Operation *op) {
  if (isa<gpu::BarrierOp, NVVM::Barrier0Op>(op))
    return true;
  if (auto bar = dyn_cast<NVVM::BarrierOp>(op)) {
    if (bar.getNumberOfThreads())
      return false;
    return !bar.getBarrierId() || getConstantInt(bar.getBarrierId()) == 0;
  }
  if (auto create = dyn_cast<CreateOp>(op))
    return !create.getDeferSync() &&
           getPipelineType(create.getResult()).getClusterSize() == 1;
  return false;
}

int64_t blockThreads(FunctionOpInterface fn, const Options &options) {
  if (options.blockDim > 0)
    return options.blockDim;
  if (auto attr = fn->getAttrOfType<DenseI32ArrayAttr>("known_block_size")) {
    ArrayRef<int32_t> dims = attr.asArrayRef();
    if (dims.size() == 3 && dims[1] == 1 && dims[2] == 1)
      return dims[0];
  }
  return 0;
}

} // namespace

LogicalResult protocol::checkNamedBarriers(FunctionOpInterface fn,
                                           const Options &options) {
  SmallVector<Operation *> barriers;
  Operation *blockWide = nullptr;
  fn->walk([&](Operation *op) {
    if (isa<NamedBarrierArriveOp, NamedBarrierSyncOp>(op))
      barriers.push_back(op);
    else if (!blockWide && isBlockWideSync(op))
      blockWide = op;
  });
  if (barriers.empty())
    return success();

  int64_t threads = blockThreads(fn, options);
  bool failedAny = false;
  llvm::MapVector<int64_t, IdUses> ids;
  SmallVector<std::pair<Operation *, int64_t>> zeroUsers;

  for (Operation *op : barriers) {
    Value index = op->getNumOperands() ? op->getOperand(0) : Value();
    int64_t base = barrierBase(op);
    if (!index) {
      if (base == 0)
        zeroUsers.push_back({op, 0});
    } else if (std::optional<int64_t> c = getConstantInt(index)) {
      if (base + *c == 0)
        zeroUsers.push_back({op, 0});
    }
    // Per warp: does it reach the op, and on which id.
    llvm::SmallDenseMap<int64_t, llvm::BitVector> warpsById;
    bool known = threads > 0 && threads % 32 == 0 && threads <= 1024;
    for (int64_t warp = 0; known && warp < threads / 32; ++warp) {
      int lanes = 0;
      std::optional<int64_t> id;
      for (int64_t lane = 0; lane < 32 && known; ++lane) {
        int64_t tid = warp * 32 + lane;
        std::optional<bool> runs = executes(op, tid);
        if (!runs) {
          known = false;
          break;
        }
        if (!*runs)
          continue;
        ++lanes;
        std::optional<int64_t> laneId = base;
        if (index) {
          std::optional<int64_t> i = evalForThread(index, tid);
          laneId = i ? std::optional<int64_t>(base + *i) : std::nullopt;
        }
        if (!laneId || (id && *id != *laneId))
          known = false;
        id = laneId;
      }
      if (!known || lanes == 0)
        continue;
      if (lanes != 32 && !op->hasAttr("unaligned")) {
        InFlightDiagnostic diag = op->emitError()
            << op->getName() << " is executed by " << lanes
            << " lanes of warp " << warp
            << ": an aligned bar.sync / bar.arrive needs every lane of the "
               "warp (use the unaligned form or move it out of the "
               "one-lane branch)";
        failedAny = true;
        known = false;
        break;
      }
      auto &bits = warpsById[*id];
      if (bits.empty())
        bits.resize(threads / 32);
      bits.set(warp);
    }
    if (!known) {
      // Unknown ids: the op may use any id from its base up.
      for (int64_t id = base; id <= 15 && (index || id == base); ++id)
        ids[id].complete = false;
      continue;
    }
    for (auto &[id, warps] : warpsById) {
      if (id == 0)
        zeroUsers.push_back({op, 0});
      if (id < 0 || id > 15) {
        op->emitError() << op->getName() << " reaches barrier id " << id
                        << " (id " << base << " + index) from "
                        << describeWarps(warps)
                        << "; the CTA has barriers 0..15";
        failedAny = true;
        continue;
      }
      ids[id].uses.push_back({op, barrierThreads(op), warps});
    }
  }

  // Id 0 is __syncthreads' barrier.
  if (blockWide)
    for (auto &[op, _] : zeroUsers) {
      InFlightDiagnostic diag = op->emitError()
          << op->getName()
          << " uses barrier id 0, which " << blockWide->getName()
          << " also uses as the block-wide barrier (bar.sync 0, all "
             "threads): the two collide; use an id in 1..15";
      diag.attachNote(blockWide->getLoc()) << "the block-wide use of id 0";
      failedAny = true;
    }

  for (auto &[id, entry] : ids) {
    if (entry.uses.empty())
      continue;
    // One id, one thread count.
    const Use &first = entry.uses.front();
    bool countsAgree = true;
    for (const Use &u : entry.uses) {
      if (u.threads == first.threads)
        continue;
      InFlightDiagnostic diag = u.op->emitError()
          << "named barrier id " << id << " is used with " << u.threads
          << " threads here (" << describeWarps(u.warps) << ") and with "
          << first.threads << " threads by another " << first.op->getName()
          << " (" << describeWarps(first.warps)
          << "): two barriers share one id; give each its own id";
      diag.attachNote(first.op->getLoc()) << "the other user of id " << id;
      failedAny = true;
      countsAgree = false;
      break;
    }
    if (!countsAgree || !entry.complete)
      continue;
    // The warps that reach the id are the threads it counts.
    llvm::BitVector all = first.warps;
    for (const Use &u : entry.uses)
      all |= u.warps;
    int64_t reaching = 32 * all.count();
    if (reaching > first.threads) {
      // Name two users whose warps differ: the colliding roles.
      const Use *other = nullptr;
      for (const Use &u : entry.uses)
        if (u.warps != first.warps) {
          other = &u;
          break;
        }
      InFlightDiagnostic diag = first.op->emitError();
      diag << "named barrier id " << id << " counts " << first.threads
           << " threads but " << reaching << " threads ("
           << describeWarps(all) << ") reach it";
      if (other) {
        diag << ": this " << first.op->getName() << " ("
             << describeWarps(first.warps) << ") and " << other->op->getName()
             << " (" << describeWarps(other->warps)
             << ") are roles that run at the same time on one id; give each "
                "its own id (or count both in num_threads if they are meant "
                "to meet)";
        diag.attachNote(other->op->getLoc()) << "the other user of id " << id;
      } else {
        diag << "; num_threads must equal the threads of the warps that "
                "reach it";
      }
      failedAny = true;
    } else if (reaching < first.threads) {
      InFlightDiagnostic diag = first.op->emitError()
          << "named barrier id " << id << " waits for " << first.threads
          << " threads but only " << reaching << " (" << describeWarps(all)
          << ") reach it: it never completes; num_threads must equal the "
             "threads of the warps that reach it";
      for (const Use &u : entry.uses)
        if (u.op != first.op) {
          diag.attachNote(u.op->getLoc()) << "another user of id " << id;
          break;
        }
      failedAny = true;
    }
  }
  return failure(failedAny);
}
