//===- AsyncReadHandBack.cpp - check 8 at a release or acquire -----------===//
//
// Check 8 (AsyncReadChecks.cpp walks the function): at each hand-back of a
// stage (consumer.release, producer.acquire), no asynchronous read of it by
// the same threads may be in flight.
//
// A refill under the same thread's bulk store: a copy into a stage (TMA
// load, bulk copy) is an asynchronous write of its buffer; a bulk store
// of the same stage's buffer that the issuing thread committed and has not
// waited for (cp.async.bulk.wait_group.read) may still read it. Buffers
// are compared by allocation (the `pipeline.smem_bytes` pointer or shared
// global the address starts from): a store of another buffer indexed by
// the same state is not this one's (uccl-project/mKernel#18: one tile used
// for an input stage and for the output C, the store's wait at a fixed
// k-block rather than before the first load into it). Within one
// allocation, by byte ranges where the offsets are known (constants and
// `state.index` times a constant, every stage taken) and the copy's size
// is (a tensor store's box is not: it runs to the allocation's end): a
// store of bytes no copy writes is not overwritten.
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

#include "AsyncReadChecker.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

using namespace mlir;
using namespace mlir::pipeline;
using namespace mlir::pipeline::protocol;
using namespace mlir::pipeline::protocol::asyncread;

/// The name a finding gives an asynchronous reader: the op's, except for a
/// wgmma written as inline asm (A from registers, which the NVVM op cannot
/// express), named by its instruction.
static std::string readerName(Operation *op) {
  if (isa<LLVM::InlineAsmOp>(op))
    return "wgmma.mma_async with A in registers (llvm.inline_asm)";
  return op->getName().getStringRef().str();
}

/// A release that is itself a tcgen05.commit (MMA consumers; the
/// UmmaAsync producer's commit): it covers every earlier tcgen05.mma.
bool asyncread::isTcgen05Commit(Operation *op) {
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

//===----------------------------------------------------------------------===//
// The check at a release / acquire
//===----------------------------------------------------------------------===//

void Checker::checkHandBack(Operation *op, const VerbRef &verb, InFlight &f) {
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

/// The allocation a shared-memory address starts from: the op carrying
/// `pipeline.smem_bytes` (Kernel.smem_alloc) or the shared global's name,
/// through GEPs and casts; null when not known.
static const void *allocationOf(Value ptr) {
  for (int depth = 0; ptr && depth < 16; ++depth) {
    Operation *def = ptr.getDefiningOp();
    if (!def)
      return nullptr;
    if (def->hasAttr("pipeline.smem_bytes"))
      return def;
    if (auto addr = dyn_cast<LLVM::AddressOfOp>(def))
      return addr.getGlobalNameAttr().getAsOpaquePointer();
    if (auto gep = dyn_cast<LLVM::GEPOp>(def))
      ptr = gep.getBase();
    else if (isa<LLVM::AddrSpaceCastOp, LLVM::BitcastOp>(def))
      ptr = def->getOperand(0);
    else
      return nullptr;
  }
  return nullptr;
}

/// The byte offsets an integer may take, when a few constants bound it:
/// constants, `pipeline.state.index` (0 .. stages - 1 of its state type),
/// sums, differences, products and left shifts of such, width casts.
/// nullopt otherwise (or past 64 values).
static std::optional<SmallVector<int64_t, 8>> valuesOf(Value v, int depth) {
  if (depth > 16)
    return std::nullopt;
  if (std::optional<int64_t> c = getConstantInt(v))
    return SmallVector<int64_t, 8>{*c};
  Operation *def = v.getDefiningOp();
  if (!def)
    return std::nullopt;
  if (auto index = dyn_cast<StateIndexOp>(def)) {
    auto type = dyn_cast<StateType>(index.getState().getType());
    if (!type || type.getSimple() || type.getStages() <= 0 ||
        type.getStages() > 64)
      return std::nullopt;
    SmallVector<int64_t, 8> out;
    for (int64_t i = 0; i < type.getStages(); ++i)
      out.push_back(i);
    return out;
  }
  if (isa<arith::ExtSIOp, arith::ExtUIOp, arith::TruncIOp, arith::IndexCastOp,
          arith::IndexCastUIOp, LLVM::SExtOp, LLVM::ZExtOp, LLVM::TruncOp>(def))
    return valuesOf(def->getOperand(0), depth + 1);
  bool add = isa<arith::AddIOp, LLVM::AddOp>(def);
  bool sub = isa<arith::SubIOp, LLVM::SubOp>(def);
  bool mul = isa<arith::MulIOp, LLVM::MulOp>(def);
  bool shl = isa<arith::ShLIOp, LLVM::ShlOp>(def);
  if (!add && !sub && !mul && !shl)
    return std::nullopt;
  auto a = valuesOf(def->getOperand(0), depth + 1);
  auto b = valuesOf(def->getOperand(1), depth + 1);
  if (!a || !b || a->size() * b->size() > 64)
    return std::nullopt;
  SmallVector<int64_t, 8> out;
  for (int64_t x : *a)
    for (int64_t y : *b) {
      if (shl && (y < 0 || y > 31))
        return std::nullopt;
      out.push_back(add ? x + y : sub ? x - y : mul ? x * y : x << y);
    }
  return out;
}

/// The byte offsets from its allocation (allocationOf) a shared-memory
/// address may take: one-index getelementptrs of scalar elements with
/// offsets valuesOf bounds, and casts. nullopt when not known.
static std::optional<SmallVector<int64_t, 8>> offsetsOf(Value ptr) {
  SmallVector<int64_t, 8> out{0};
  for (int depth = 0; ptr && depth < 16; ++depth) {
    Operation *def = ptr.getDefiningOp();
    if (!def)
      return std::nullopt;
    if (def->hasAttr("pipeline.smem_bytes") || isa<LLVM::AddressOfOp>(def))
      return out;
    if (isa<LLVM::AddrSpaceCastOp, LLVM::BitcastOp>(def)) {
      ptr = def->getOperand(0);
      continue;
    }
    auto gep = dyn_cast<LLVM::GEPOp>(def);
    if (!gep || gep.getIndices().size() != 1 ||
        !gep.getElemType().isIntOrFloat())
      return std::nullopt;
    int64_t bytes = (gep.getElemType().getIntOrFloatBitWidth() + 7) / 8;
    auto index = *gep.getIndices().begin();
    std::optional<SmallVector<int64_t, 8>> values;
    if (auto attr = dyn_cast<IntegerAttr>(index))
      values = SmallVector<int64_t, 8>{attr.getInt()};
    else
      values = valuesOf(cast<Value>(index), 0);
    if (!values || values->size() * out.size() > 64)
      return std::nullopt;
    SmallVector<int64_t, 8> next;
    for (int64_t o : out)
      for (int64_t v : *values)
        next.push_back(o + v * bytes);
    out = std::move(next);
    ptr = gep.getBase();
  }
  return std::nullopt;
}

/// A constant integer operand or attribute of a copy or store: its bytes.
static std::optional<int64_t> copyBytes(Operation *op) {
  if (auto load = dyn_cast<TmaLoadOp>(op))
    return load.getBytes();
  if (auto bulk = dyn_cast<BulkLoadOp>(op))
    return getConstantInt(bulk.getSize());
  if (auto store = dyn_cast<NVVM::CpAsyncBulkSharedCTAToGlobalOp>(op))
    return getConstantInt(store.getSize());
  return std::nullopt; // a tensor store's box is in its descriptor
}

/// Whether a copy of `copyLen` bytes at any of `copyAt` and a store at any
/// of `storeAt` (`storeLen` bytes, or up to the allocation's end when not
/// known) may share a byte.
static bool mayOverlap(ArrayRef<int64_t> copyAt, int64_t copyLen,
                       ArrayRef<int64_t> storeAt,
                       std::optional<int64_t> storeLen) {
  for (int64_t c : copyAt)
    for (int64_t s : storeAt)
      if (s < c + copyLen && (!storeLen || c < s + *storeLen))
        return true;
  return false;
}

/// The shared-memory source of a bulk store (its first pointer operand in
/// address space 3).
static Value storeSource(Operation *op) {
  if (auto store = dyn_cast<TmaStoreOp>(op))
    return store.getSrc();
  for (Value v : op->getOperands())
    if (auto t = dyn_cast<LLVM::LLVMPointerType>(v.getType());
        t && t.getAddressSpace() == 3)
      return v;
  return Value();
}

void Checker::checkRefill(Operation *op, const VerbRef &verb, InFlight &f) {
  Value dst;
  if (auto load = dyn_cast<TmaLoadOp>(op))
    dst = load.getDst();
  else if (auto bulk = dyn_cast<BulkLoadOp>(op))
    dst = bulk.getDst();
  const void *buffer = dst ? allocationOf(dst) : nullptr;
  if (!buffer || reported.contains(op))
    return;
  Canon s = canon.get(verb.state);
  int64_t stages = getPipelineType(verb.pipeline).getStages();
  auto check = [&](const Read &r, int64_t newer) {
    if (r.kind != Reader::BulkStore || reported.contains(op))
      return;
    // A store tied to a stage: the same stage. A store of a fixed address
    // of the ring's allocation: the copies of the loop cycle through every
    // stage of it, so any copy into it may be the one that overlaps.
    if (r.stage.root) {
      int64_t d = r.stage.offset - s.offset;
      if (!StateCanon::sameRoot(r.stage.root, s.root) ||
          ((d % stages) + stages) % stages != 0)
        return;
    }
    Value src = storeSource(r.op);
    if (!src || allocationOf(src) != buffer)
      return;
    // Byte ranges where both are known: a store of a part of the
    // allocation no copy writes is not overwritten.
    std::optional<SmallVector<int64_t, 8>> copyAt = offsetsOf(dst);
    std::optional<SmallVector<int64_t, 8>> storeAt = offsetsOf(src);
    std::optional<int64_t> copyLen = copyBytes(op);
    if (copyAt && storeAt && copyLen && *copyLen > 0 &&
        !mayOverlap(*copyAt, *copyLen, *storeAt, copyBytes(r.op)))
      return;
    reported.insert(op);
    failedAny = true;
    InFlightDiagnostic diag =
        op->emitError()
        << op->getName() << " refills a stage of " << describe(verb.pipeline)
        << " whose buffer a bulk store issued by this thread may still read "
           "(rule: a copy into shared memory is an asynchronous write; the "
           "bulk store's reads of that buffer end only at a "
           "cp.async.bulk.wait_group.read that covers its group, in the "
           "issuing thread); wait for it ("
        << (newer >= 0 ? "pipeline.bulk_group.wait {read, pending = N} with "
                         "N <= " + std::to_string(newer)
                       : std::string("commit its group, then "
                                     "pipeline.bulk_group.wait {read}"))
        << ") before the first copy into that buffer, on every path";
    diag.attachNote(r.op->getLoc())
        << "the bulk store of that buffer, still in flight at the copy";
  };
  for (size_t g = 0; g < f.bulk.size(); ++g)
    for (Read &r : f.bulk[g])
      check(r, f.bulk.size() - 1 - g);
  for (Read &r : f.bulkOpen)
    check(r, -1);
}

/// The warps that execute `op` (nullopt: not decided).
std::optional<llvm::BitVector> Checker::warpsOf(Operation *op) {
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

//===----------------------------------------------------------------------===//
// A release by another warp of the role, or by another role
//===----------------------------------------------------------------------===//

/// A release by fewer warps than read the stage: the other warps' reads
/// of it must be retired before the last role barrier on the way.
void Checker::checkOtherWarps(Operation *op, const VerbRef &verb,
                              InFlight &f, SameStageFn sameStage) {
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
void Checker::warnUnproven(Operation *op, const InFlight::AtNamed &n) {
  auto mine = op->getParentOfType<scf::ForOp>();
  if (mine && warned.insert({mine, n.loop}).second)
    warnHandOverNotProven(op, namedBarrierId(n.barrier)->first, n.loop, mine);
}


/// last synced on: that role's reads of the stage must be retired before
/// the barrier.
void Checker::checkOtherRole(Operation *op, const VerbRef &verb,
                             InFlight &f, SameStageFn sameStage) {
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
    // A tail of this role after its loop: the m-th meet after it names
    // the stages m steps on; past the other loop's last iteration, none.
    int64_t shift = 0;
    if (n.tailOf) {
      auto mine = cast<scf::ForOp>(n.tailOf);
      std::optional<int64_t> m = meetIndexAfter(mine, f.barrier);
      if (!m || *m >= n.tailMeets ||
          f.barrier->getParentOfType<scf::ForOp>() !=
              mine->getParentOfType<scf::ForOp>())
        continue;
      shift = *m * n.step;
    }
    for (Read r : n.reads) {
      if (r.stage.root)
        r.stage.offset += shift;
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
