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
// A release by fewer warps than read the stage, or by another role: see
// AsyncReadHandBack.cpp.
//
//===----------------------------------------------------------------------===//

#include "AsyncReadChecker.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/IR/OperationSupport.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::pipeline;
using namespace mlir::pipeline::protocol;
using namespace mlir::pipeline::protocol::asyncread;

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

/// A barrier every warp of a role meets (a named barrier's arrive or sync,
/// the block-wide bar.sync 0): the point another warp's work is ordered
/// before.
static bool isRoleBarrier(Operation *op) {
  return isa<NamedBarrierSyncOp, NamedBarrierArriveOp, gpu::BarrierOp,
             NVVM::Barrier0Op, NVVM::BarrierOp>(op);
}

//===----------------------------------------------------------------------===//
// Which stages an op reads
//===----------------------------------------------------------------------===//

void Checker::readsOf(Operation *op, ValueRange operands, Reader kind,
                      Group &out) {
  size_t before = out.size();
  readsOfStates(op, operands, kind, out);
  // A bulk store of an address no state names (a fixed buffer) is still
  // in flight for the refill check (checkRefill), tied to no stage.
  if (kind == Reader::BulkStore && out.size() == before)
    out.push_back(Read{op, kind, Canon{}, {}});
}

void Checker::readsOfStates(Operation *op, ValueRange operands, Reader kind,
                            Group &out) {
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

//===----------------------------------------------------------------------===//
// Walking the function in program order
//===----------------------------------------------------------------------===//

bool Checker::isRoleIf(Operation *op) {
  auto ifOp = dyn_cast<scf::IfOp>(op);
  return ifOp && isThreadSplit(ifOp) && !isGuardIf(ifOp);
}

void Checker::walk(Block &block, InFlight &f) {
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

void Checker::visit(Operation *op, InFlight &f) {
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
    else if (verb->verb == Verb::Copy)
      checkRefill(op, *verb, f);
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

/// A straight-line meet of another role after its loop `other` (a peeled
/// tail), handed to this role's loop `loop`: when the two loops relate
/// with `other` ending earlier, its m-th meet after the loop is in the
/// generation of `loop`'s iteration `trips(other) + shift + m`, so a read
/// of `other`'s result state at offset o names the stage `o + init(other)
/// - (shift + m) * step` of `loop`'s leader iter arg (as (start root,
/// offset), as a loop's meets are mapped below). Other entries unchanged.
InFlight::AtNamed Checker::mapTail(scf::ForOp loop,
                                   const InFlight::AtNamed &n) {
  InFlight::AtNamed out = n;
  for (Read &r : out.reads) {
    auto result = r.stage.root ? dyn_cast<OpResult>(r.stage.root) : OpResult();
    auto other = result ? dyn_cast<scf::ForOp>(result.getOwner()) : nullptr;
    if (!other || other == loop)
      continue;
    LoopRelation rel = relateLoops(loop, other, n.barrier);
    if (rel.kind != LoopRelation::Related || rel.tail >= 0) {
      if (rel.kind == LoopRelation::NotProven ||
          (rel.kind == LoopRelation::Related && rel.tail > 0)) {
        out.unproven = true;
        out.loop = other;
      }
      continue;
    }
    std::optional<int64_t> m = meetIndexAfter(other, n.barrier);
    BlockArgument arg =
        other.getRegionIterArgs()[result.getResultNumber()];
    std::optional<int64_t> step = canon.constantStep(arg);
    if (!m || !step) {
      out.unproven = true;
      out.loop = other;
      continue;
    }
    Canon init = canon.get(other.getInitArgs()[result.getResultNumber()]);
    r.stage = {init.root,
               init.offset + r.stage.offset - (rel.shift + *m) * *step};
  }
  return out;
}

void Checker::visitLoop(scf::ForOp loop, InFlight &f) {
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
        kept.push_back(n.tailOf ? n : mapTail(loop, n));
        continue;
      }
      auto other = dyn_cast<scf::ForOp>(n.loop);
      if (!other || other == loop || n.unproven)
        continue;
      // The same range, or peels made explicit before the later loop
      // (`other` starts `shift` iterations after this loop) or after the
      // loop that ends earlier (a tail of this loop's role: its releases
      // after the loop meet `other`'s last iterations, mapped at the exit).
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
  // This role's tail: where `other` (another role's loop) ends `tail`
  // iterations after this one and this role meets the barrier `tail` more
  // times after its loop, straight-line (relateLoops), its m-th meet there
  // is in the generation of `other`'s iteration trips(loop) - shift + m:
  // a read of `other` at (start root, o) names the stage (result, o -
  // init.offset - shift * step) of this loop's leader iter arg, plus m
  // steps (checkOtherRole adds them).
  for (const InFlight::AtNamed &n : outerHanded) {
    auto other = dyn_cast_or_null<scf::ForOp>(n.loop);
    if (!other || other == loop || n.unproven || n.tailOf)
      continue;
    LoopRelation rel = relateLoops(loop, other, n.barrier);
    if (rel.kind != LoopRelation::Related || rel.tail <= 0)
      continue;
    InFlight::AtNamed t = n;
    t.loop = nullptr;
    t.tailOf = loop;
    t.tailMeets = rel.tail;
    for (Read &r : t.reads) {
      Canon mapped{};
      for (BlockArgument arg : loop.getRegionIterArgs()) {
        if (!isa<StateType>(arg.getType()) || canon.get(arg).root != arg)
          continue;
        Canon init = canon.get(loop.getInitArgs()[arg.getArgNumber() - 1]);
        if (r.stage.root && StateCanon::sameRoot(init.root, r.stage.root) &&
            canon.constantStep(arg) == n.step) {
          mapped = Canon{loop.getResult(arg.getArgNumber() - 1),
                         r.stage.offset - init.offset - rel.shift * n.step};
          break;
        }
      }
      r.stage = mapped;
    }
    exit.handed.push_back(t);
  }
  // (A loop that may run zero times is taken to run at least once.)
  f = exit;
}

LogicalResult protocol::checkAsyncReads(FunctionOpInterface fn,
                                        const Options &options) {
  if (fn.isExternal())
    return success();
  Checker checker(fn, getBlockDim(fn, options));
  checker.run(fn.getFunctionBody().front());
  return failure(checker.failedAny);
}
