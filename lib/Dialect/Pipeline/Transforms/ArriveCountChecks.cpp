//===- ArriveCountChecks.cpp - arrive counts against who arrives ----------===//
//
// Property 6 of pipeline-verify-protocol: the arrive counts a pipeline's
// groups imply must match who arrives: elect guards around async arrives,
// elected TMA arrives against a producer group of several, the
// signaling-lane arithmetic of tma_async clusters, consumer verbs issued
// from a producer role, and the arrivals per phase that the one role
// signalling a side makes (its warps from the guards, times what the verb's
// mechanism arrives) against the group's count.
//
// What is not decidable from the IR is left alone (see
// docs/VerifyProtocol.md): roles whose warps the guards leave open; sides
// signalled from several roles.
//
//===----------------------------------------------------------------------===//

#include "ProtocolChecks.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Interfaces/CallInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;
using namespace mlir::pipeline;
using namespace mlir::pipeline::protocol;

//===----------------------------------------------------------------------===//
// Arrive counts
//===----------------------------------------------------------------------===//

static std::string groupString(CooperativeGroupAttr group) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << "#pipeline.group<" << stringifyAgent(group.getAgent()) << ", "
     << group.getSize() << ">";
  return s;
}

/// The innermost enclosing scf.if whose condition restricts who runs `op`.
static Operation *findGuardIf(Operation *op) {
  for (Operation *p = op->getParentOp(); p && !isa<FunctionOpInterface>(p);
       p = p->getParentOp())
    if (auto ifOp = dyn_cast<scf::IfOp>(p))
      if (classifyCondition(ifOp.getCondition()) != Guard::None)
        return p;
  return nullptr;
}

namespace {
/// An mbarrier.arrive site of one side of a pipeline and who executes it.
struct ArriveSite {
  Operation *op;
  bool electOneAttr;
  bool oneThread; // one thread of the CTA (tid == c, or one warp + elect)
  bool perWarp;   // one lane of each executing warp
};
} // namespace

static ArriveSite classifyArrive(Operation *op, bool electOneAttr) {
  Guard guard = getEnclosingGuard(op);
  bool oneThread =
      guard == Guard::OneThread || (guard == Guard::OneWarp && electOneAttr);
  bool perWarp = !oneThread && (guard == Guard::OneLanePerWarp || electOneAttr);
  return {op, electOneAttr, oneThread, perWarp};
}

/// Reports arrives from fewer threads than the side's group counts.
/// `roles` is how many single-thread roles arrive (0 for a per-warp site).
static void reportGuardedArrive(const ArriveSite &site, Value pipe,
                                CooperativeGroupAttr group, bool producerSide,
                                size_t roles, const Options &options) {
  PipelineType type = getPipelineType(pipe);
  std::optional<int64_t> count =
      getArriveCount(group, options.blockDim, type.getClusterSize());
  StringRef side = producerSide ? "producer" : "consumer";
  Operation *guardIf = findGuardIf(site.op);
  InFlightDiagnostic diag = site.op->emitError();
  diag << describe(pipe) << ": " << site.op->getName() << " runs "
       << (site.oneThread ? "on one thread" : "once per warp")
       << (site.electOneAttr
               ? (guardIf ? " (elect_one under a guard)" : " (elect_one)")
               : " (guarded)");
  if (roles > 1)
    diag << " in each of " << roles << " roles";
  diag << " but the " << side << " group " << groupString(group) << " counts ";
  if (count)
    diag << *count << " arrivals";
  else
    diag << "an arrival per thread";
  diag << " per phase, so the " << (producerSide ? "full" : "empty")
       << " barrier never completes; ";
  if (site.oneThread)
    diag << "make the group #pipeline.group<thread, "
         << std::max<size_t>(roles, 1) << ">";
  else
    diag << "count the group in warps (#pipeline.group<thread, number of "
            "warps>) and use elect_one";
  diag << ", or " << (producerSide ? "commit" : "release")
       << " from every thread of the group";
  if (guardIf)
    diag.attachNote(guardIf->getLoc()) << "guard that narrows who arrives";
  noteCreate(diag, pipe);
}

/// Checks the mbarrier.arrive sites of one side of a pipeline against its
/// group: a per-warp site cannot serve a group counted per thread; single
/// thread sites in R roles make R arrivals per phase.
static bool checkArriveSites(Value pipe, bool producerSide,
                             ArrayRef<ArriveSite> sites,
                             const Options &options) {
  PipelineType type = getPipelineType(pipe);
  CooperativeGroupAttr group =
      producerSide ? type.getProducer() : type.getConsumer();
  if (!group || sites.empty())
    return false;
  int64_t maxWarps = options.blockDim > 0 ? options.blockDim / 32 : 32;
  for (const ArriveSite &site : sites) {
    if (!site.perWarp)
      continue;
    bool wrong = group.getAgent() != Agent::Thread ||
                 group.getSize() > maxWarps * type.getClusterSize();
    if (wrong) {
      reportGuardedArrive(site, pipe, group, producerSide, 0, options);
      return true;
    }
  }
  if (!llvm::all_of(sites, [](const ArriveSite &s) { return s.oneThread; }))
    return false;
  llvm::SmallPtrSet<Block *, 4> roles;
  for (const ArriveSite &site : sites)
    roles.insert(getRoleBlock(site.op));
  std::optional<int64_t> count =
      getArriveCount(group, options.blockDim, type.getClusterSize());
  bool wrong = count ? *count > static_cast<int64_t>(roles.size())
                     : group.getAgent() != Agent::Thread;
  if (!wrong)
    return false;
  reportGuardedArrive(sites.front(), pipe, group, producerSide, roles.size(),
                      options);
  return true;
}

/// Multicast CTAs whose loads land in each CTA (CuTe DSL's mcast_size).
static int64_t getMcastSize(PipelineType type) {
  return getBarrierPlan(type).multicastPeers;
}

namespace {
/// What one signalling site contributes to a phase of its barrier.
struct ImpliedArrives {
  int64_t count;
  Executors who;
  std::string how; // the mechanism, for the message
};
} // namespace

/// Arrivals per phase that one execution of `op` (a producer.commit or
/// consumer.release) by its role makes on this CTA's barrier; nullopt when
/// not decidable.
static std::optional<ImpliedArrives>
getImpliedArrives(Operation *op, PipelineType type, bool producerSide,
                  int64_t blockDim) {
  PipelineKind kind = type.getKind();
  // Mixed MMA + async consumers, CLC, order and store pipelines count
  // otherwise; pairs and clusters other than tma_async's signalling lanes
  // arrive on another CTA's barrier.
  if (kind == PipelineKind::TmaMultiConsumersAsync ||
      kind == PipelineKind::ClcFetchAsync || kind == PipelineKind::Order ||
      kind == PipelineKind::TmaStore)
    return std::nullopt;
  bool signallingLanes =
      !producerSide &&
      getBarrierPlan(type).release == ArriveTarget::SignallingLanes;
  if (type.getClusterSize() > 1 && !signallingLanes)
    return std::nullopt;
  std::optional<Executors> who = getExecutors(op, blockDim);
  if (!who)
    return std::nullopt;
  int64_t threads = who->warps * (who->wholeWarps ? 32 : 1);
  OpType opType =
      producerSide ? type.getProducerOpType() : type.getConsumerOpType();
  StringRef verb = producerSide ? "producer.commit" : "consumer.release";
  switch (opType) {
  case OpType::AsyncThread: {
    if (signallingLanes) {
      // Lanes 0..cluster-1 of every warp; a lane guard may leave them out.
      if (!who->wholeWarps)
        return std::nullopt;
      int64_t mcast = getMcastSize(type);
      std::string how = "whole-warp " + verb.str() + ": one signalling-lane "
                        "arrive per warp";
      if (mcast > 1)
        how += " from each of the " + std::to_string(mcast) +
               " multicast CTAs";
      return ImpliedArrives{who->warps * mcast, *who, how};
    }
    bool elect = producerSide
                     ? cast<ProducerCommitOp>(op).getElectOne()
                     : cast<ConsumerReleaseOp>(op).getElectOne();
    if (elect)
      return ImpliedArrives{who->warps, *who,
                            verb.str() + " elect_one: one arrive per warp"};
    return ImpliedArrives{threads, *who,
                          who->wholeWarps
                              ? "whole-warp " + verb.str()
                              : verb.str() + " from one lane per warp"};
  }
  case OpType::AsyncLoad:
    return ImpliedArrives{threads, *who,
                          "cp.async.mbarrier.arrive.noinc from every thread"};
  case OpType::TCGen05Mma:
    return ImpliedArrives{who->warps, *who,
                          "one elected tcgen05.commit per warp"};
  default:
    return std::nullopt;
  }
}

static std::string describeExecutors(const Executors &who) {
  std::string warps = who.warps == 1 ? "one warp"
                                     : std::to_string(who.warps) + " warps";
  if (who.wholeWarps)
    return warps;
  return who.warps == 1 ? "one lane of one warp"
                        : "one lane in each of " + warps;
}

/// The group to use, in the IR's spelling (diagnostics of kernels built from
/// Python say CooperativeGroup(Agent.Thread, n): diagnostics.python_terms).
static std::string threadGroupFix(int64_t n) {
  return "#pipeline.group<thread, " + std::to_string(n) + ">";
}

/// The warps of a thread set, for messages: "warps 4-7".
static std::string warpsOf(const llvm::BitVector &threads) {
  llvm::BitVector warps(threads.size() / 32);
  for (int t = threads.find_first(); t >= 0; t = threads.find_next(t))
    warps.set(t / 32);
  return describeWarps(warps);
}

/// Whether `v` may take different values in two warps of the CTA (lane
/// differences do not count: every warp has the same lanes). Thread and
/// warp indices, clocks and anything read from memory may; constants,
/// kernel arguments, CTA and cluster indices, lane ids and pure arithmetic
/// on them may not. Unknown is "may".
static bool mayDifferAcrossWarps(Value v, int depth = 0) {
  if (depth > 32)
    return true;
  if (getConstantInt(v))
    return false;
  if (auto arg = dyn_cast<BlockArgument>(v)) {
    Operation *owner = arg.getOwner()->getParentOp();
    // A kernel's arguments are the same for every thread; a helper
    // function's may be thread ids.
    if (auto fn = dyn_cast_or_null<gpu::GPUFuncOp>(owner))
      return !fn.isKernel() || !arg.getOwner()->isEntryBlock();
    auto loop = dyn_cast_or_null<scf::ForOp>(owner);
    if (!loop || arg != loop.getInductionVar())
      return true;
    return mayDifferAcrossWarps(loop.getLowerBound(), depth + 1) ||
           mayDifferAcrossWarps(loop.getUpperBound(), depth + 1) ||
           mayDifferAcrossWarps(loop.getStep(), depth + 1);
  }
  Operation *def = v.getDefiningOp();
  if (isa<gpu::ThreadIdOp, gpu::SubgroupIdOp>(def))
    return true;
  if (isa<gpu::LaneIdOp, gpu::BlockIdOp, gpu::GridDimOp, gpu::BlockDimOp>(def))
    return false;
  StringRef name = def->getName().getStringRef();
  if (name.consume_front("nvvm.read.ptx.sreg.")) {
    // Uniform across the warps of a CTA; every other special register
    // (tid, warpid, clocks, ...) is not.
    return !(name == "laneid" || name.starts_with("ctaid") ||
             name.starts_with("nctaid") || name.starts_with("ntid") ||
             name.starts_with("cluster") || name.starts_with("nclusterid"));
  }
  if (name == "nvvm.elect.sync")
    return false;
  if (def->getNumRegions() != 0 || !isMemoryEffectFree(def))
    return true;
  return llvm::any_of(def->getOperands(), [&](Value operand) {
    return mayDifferAcrossWarps(operand, depth + 1);
  });
}

/// True when the role blocks run the same code (equivalent ops on the same
/// values from outside) and nothing in it that decides which stages a
/// pipeline op names -- branch conditions, loop bounds, advance amounts,
/// explicit indices and phases -- depends on the warp: each role then
/// signals exactly the stages the others do (cooperative roles, as a
/// Python loop `for i in range(n): with k.if_(warpgroup == i):` builds).
/// A role that skips the other's stages (ping-pong: `state.advance(k)` in
/// one of them, an order barrier, an amount computed from the warp index)
/// is not.
static bool runSameStages(ArrayRef<Block *> blocks) {
  Region *first = blocks.front()->getParent();
  for (Block *block : blocks) {
    Region *region = block->getParent();
    if (!isa_and_nonnull<scf::IfOp>(region->getParentOp()) ||
        !region->hasOneBlock())
      return false;
    if (region != first &&
        !OperationEquivalence::isRegionEquivalentTo(
            first, region, OperationEquivalence::IgnoreLocations))
      return false;
  }
  WalkResult walk = first->walk([&](Operation *op) {
    if (isa<OrderWaitOp, OrderArriveOp>(op))
      return WalkResult::interrupt();
    if (auto ifOp = dyn_cast<scf::IfOp>(op))
      return mayDifferAcrossWarps(ifOp.getCondition())
                 ? WalkResult::interrupt()
                 : WalkResult::advance();
    if (auto loop = dyn_cast<scf::ForOp>(op)) {
      bool differs = mayDifferAcrossWarps(loop.getLowerBound()) ||
                     mayDifferAcrossWarps(loop.getUpperBound()) ||
                     mayDifferAcrossWarps(loop.getStep());
      for (Value init : loop.getInitArgs())
        differs |= isa<StateType>(init.getType()) &&
                   !first->isAncestor(init.getParentRegion()) &&
                   mayDifferAcrossWarps(init);
      return differs ? WalkResult::interrupt() : WalkResult::advance();
    }
    // Other control flow (scf.while, switches, calls' callees): not seen.
    if (op->getNumRegions() != 0 || isa<CallOpInterface>(op))
      return WalkResult::interrupt();
    bool pipelineOp = isa<PipelineDialect>(op->getDialect());
    for (Value operand : op->getOperands()) {
      // States from outside the role (one made before the role split, a
      // loop's initial state): the same value, unless made from the warp.
      bool outsideState = isa<StateType>(operand.getType()) &&
                          !first->isAncestor(operand.getParentRegion());
      bool integer = isa<IntegerType, IndexType>(operand.getType());
      if ((outsideState || (pipelineOp && integer)) &&
          mayDifferAcrossWarps(operand))
        return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return !walk.wasInterrupted();
}

/// True when the warps running `op` (a commit or release) may name
/// different stages with it: a loop around it whose bounds come from the
/// warp index (`k.range(warpgroup, ntiles, 2)`), or a state that reaches it
/// through an advance by a warp-dependent amount, an scf.if on the warp
/// index (`if warpgroup == 1: state.advance(k_tiles)`) or a make from
/// warp-dependent values. One role then holds CUTLASS's ping-pong consumer
/// warpgroups, each signalling only its own tiles' stages, and its warps do
/// not all arrive in every phase.
static bool stagesDependOnWarp(Operation *op) {
  for (Operation *p = op->getParentOp(); p && !isa<FunctionOpInterface>(p);
       p = p->getParentOp())
    if (auto loop = dyn_cast<scf::ForOp>(p))
      if (mayDifferAcrossWarps(loop.getLowerBound()) ||
          mayDifferAcrossWarps(loop.getUpperBound()) ||
          mayDifferAcrossWarps(loop.getStep()))
        return true;
  std::optional<VerbRef> verb = getVerb(op);
  if (!verb)
    return false;
  llvm::SetVector<Value> states;
  states.insert(verb->state);
  for (unsigned i = 0; i < states.size() && i < 256; ++i) {
    Value v = states[i];
    if (auto arg = dyn_cast<BlockArgument>(v)) {
      auto loop = dyn_cast_or_null<scf::ForOp>(arg.getOwner()->getParentOp());
      if (loop && arg.getArgNumber() > 0) {
        unsigned idx = arg.getArgNumber() - 1;
        states.insert(loop.getInitArgs()[idx]);
        states.insert(loop.getBody()->getTerminator()->getOperand(idx));
      }
      continue;
    }
    Operation *def = v.getDefiningOp();
    if (auto adv = dyn_cast<StateAdvanceOp>(def)) {
      if (adv.getAmount() && mayDifferAcrossWarps(adv.getAmount()))
        return true;
      states.insert(adv.getState());
    } else if (auto make = dyn_cast<StateMakeOp>(def)) {
      if (llvm::any_of(make->getOperands(), [](Value operand) {
            return mayDifferAcrossWarps(operand);
          }))
        return true;
    } else if (auto ifOp = dyn_cast<scf::IfOp>(def)) {
      if (mayDifferAcrossWarps(ifOp.getCondition()))
        return true;
      unsigned idx = cast<OpResult>(v).getResultNumber();
      for (Region *r : {&ifOp.getThenRegion(), &ifOp.getElseRegion()})
        if (!r->empty())
          states.insert(r->front().getTerminator()->getOperand(idx));
    } else if (auto loop = dyn_cast<scf::ForOp>(def)) {
      unsigned idx = cast<OpResult>(v).getResultNumber();
      states.insert(loop.getInitArgs()[idx]);
      states.insert(loop.getBody()->getTerminator()->getOperand(idx));
    }
  }
  return false;
}

namespace {
/// The threads that signal one side together (the same executor set at
/// every site) and what they give per phase.
struct SignalRole {
  ImpliedArrives implied;
  Operation *firstOp;
  Block *block;          // the role region of its sites
  bool oneBlock = true;  // all its sites are in that region
};
} // namespace

/// Compares the arrivals per phase that the roles issuing a side's
/// signalling verb make with the count its group gives the barrier. A role
/// is a set of threads (from getExecutors: `warp < 4`, `warp // 4 == i`,
/// `tid // 128 < 4`, else branches, ...); sites run by the same threads are
/// one role. With several disjoint roles (a Python loop of
/// `k.if_(warpgroup == i)`, ping-pong or cooperative consumer warpgroups)
/// either every role signals every stage (the barrier gets their sum) or
/// they take turns (each gives the count alone); a count that is neither is
/// an error. Sides already reported by the guard checks, roles whose
/// threads overlap, and anything not decidable are left alone.
static bool checkImpliedArriveCounts(
    FunctionOpInterface fn, const Options &options,
    const llvm::DenseSet<std::pair<Value, unsigned>> &reported) {
  int64_t blockDim = getBlockDim(fn, options);
  llvm::MapVector<std::pair<Value, unsigned>, SmallVector<Operation *>> sites;
  fn->walk([&](Operation *op) {
    if (auto commit = dyn_cast<ProducerCommitOp>(op))
      sites[{commit.getPipeline(), 0}].push_back(op);
    else if (auto release = dyn_cast<ConsumerReleaseOp>(op))
      sites[{release.getPipeline(), 1}].push_back(op);
  });
  bool failed = false;
  for (auto &[key, ops] : sites) {
    if (reported.contains(key))
      continue;
    Value pipe = key.first;
    bool producerSide = key.second == 0;
    auto create = pipe.getDefiningOp<CreateOp>();
    if (!create)
      continue;
    PipelineType type = getPipelineType(pipe);
    CooperativeGroupAttr group =
        producerSide ? type.getProducer() : type.getConsumer();
    if (!group)
      continue;
    std::optional<int64_t> expected =
        getArriveCount(group, blockDim, type.getClusterSize());
    if (!expected)
      continue;
    // tma_async groups not a multiple of mcast_size have their own error.
    if (!producerSide &&
        getBarrierPlan(type).release == ArriveTarget::SignallingLanes &&
        group.getAgent() == Agent::Thread &&
        group.getSize() % getMcastSize(type) != 0)
      continue;
    SmallVector<SignalRole> roles;
    bool decidable = true;
    for (Operation *op : ops) {
      std::optional<ImpliedArrives> here =
          getImpliedArrives(op, type, producerSide, blockDim);
      if (!here) {
        decidable = false;
        break;
      }
      auto same = llvm::find_if(roles, [&](const SignalRole &r) {
        return r.implied.who.threads == here->who.threads;
      });
      if (same != roles.end()) {
        // One role signalling from two sites must give one count.
        if (same->implied.count != here->count)
          decidable = false;
        same->oneBlock &= getRoleBlock(op) == same->block;
        continue;
      }
      // Overlapping roles (a role nested in another): not a split of the
      // block the count can be read from.
      if (llvm::any_of(roles, [&](const SignalRole &r) {
            return r.implied.who.threads.anyCommon(here->who.threads);
          }))
        decidable = false;
      roles.push_back({std::move(*here), op, getRoleBlock(op)});
    }
    if (!decidable || roles.empty())
      continue;
    StringRef side = producerSide ? "producer" : "consumer";
    StringRef signals = producerSide ? "commits" : "releases";
    StringRef barrier = producerSide ? "full" : "empty";
    auto never = [&](InFlightDiagnostic &diag) {
      diag << "the " << barrier << " barrier never completes and the "
           << (producerSide ? "consumers" : "producers") << " wait forever";
    };
    auto early = [&](InFlightDiagnostic &diag) {
      diag << "phases complete early and "
           << (producerSide ? "consumers read a stage before it is filled"
                            : "producers overwrite a stage still being read");
    };

    if (roles.size() == 1) {
      const ImpliedArrives &implied = roles.front().implied;
      if (implied.count == *expected)
        continue;
      // Warps of the role that take turns on the stages (ping-pong in one
      // role): how many arrive per phase is not decided here.
      if (implied.who.warps > 1 && llvm::any_of(ops, stagesDependOnWarp))
        continue;
      InFlightDiagnostic diag = create.emitError();
      diag << describe(pipe) << ": the " << side << " group "
           << groupString(group) << " expects " << *expected
           << " arrivals per phase, but the " << side << " role ("
           << describeExecutors(implied.who) << ", " << implied.how
           << ") gives " << implied.count << ": ";
      if (implied.count < *expected)
        never(diag);
      else
        early(diag);
      diag << "; use " << threadGroupFix(implied.count);
      Block *role = getRoleBlock(roles.front().firstOp);
      Operation *owner = getRoleOwner(role);
      if (owner && !isa<FunctionOpInterface>(owner))
        diag.attachNote(owner->getLoc()) << "the " << side << " role";
      diag.attachNote(roles.front().firstOp->getLoc())
          << "the " << side << " role " << signals << " here";
      failed = true;
      continue;
    }

    // Several roles: every role signals every stage (cooperative), or each
    // stage is signalled by one of them (ping-pong).
    int64_t sum = 0;
    bool sameCount = true;
    for (const SignalRole &r : roles) {
      sum += r.implied.count;
      sameCount &= r.implied.count == roles.front().implied.count;
    }
    int64_t each = roles.front().implied.count;
    // Roles that run the same code signal the same stages: only the sum.
    SmallVector<Block *> blocks;
    for (const SignalRole &r : roles)
      blocks.push_back(r.block);
    bool cooperative =
        llvm::all_of(roles, [](const SignalRole &r) { return r.oneBlock; }) &&
        runSameStages(blocks);
    if (sum == *expected || (!cooperative && sameCount && each == *expected))
      continue;
    InFlightDiagnostic diag = create.emitError();
    diag << describe(pipe) << ": the " << side << " group "
         << groupString(group) << " expects " << *expected
         << " arrivals per phase, but " << roles.size() << " " << side
         << " roles " << (producerSide ? "commit" : "release") << " it (";
    for (auto [i, r] : llvm::enumerate(roles)) {
      if (i)
        diag << "; ";
      diag << warpsOf(r.implied.who.threads) << ": " << r.implied.how
           << ", " << r.implied.count;
    }
    if (cooperative) {
      diag << "): the roles run the same code, which does not depend on "
              "the warp index, so each "
           << (producerSide ? "commits" : "releases")
           << " every stage and the barrier gets " << sum << " per phase: ";
      if (sum < *expected)
        never(diag);
      else
        early(diag);
      diag << "; use " << threadGroupFix(sum);
      for (const SignalRole &r : roles)
        diag.attachNote(r.firstOp->getLoc())
            << "a " << side << " role (" << warpsOf(r.implied.who.threads)
            << ") " << signals << " here";
      failed = true;
      continue;
    }
    diag << "): if every role " << (producerSide ? "commits" : "releases")
         << " every stage the barrier gets " << sum << " per phase (";
    if (sum < *expected)
      never(diag);
    else
      early(diag);
    diag << ")";
    if (sameCount) {
      diag << ", if they take turns (ping-pong) " << each << " (";
      if (each < *expected)
        never(diag);
      else
        early(diag);
      diag << "); use " << threadGroupFix(sum) << " when every role "
           << signals << " each stage, or " << threadGroupFix(each)
           << " when they take turns";
    } else {
      diag << "; use " << threadGroupFix(sum);
    }
    for (const SignalRole &r : roles)
      diag.attachNote(r.firstOp->getLoc())
          << "a " << side << " role (" << warpsOf(r.implied.who.threads)
          << ") " << signals << " here";
    failed = true;
  }
  return failed;
}

/// Pipeline sides (pipeline, 0 = producer / 1 = consumer) already reported,
/// so that the implied-count check does not report them twice.
using ReportedSides = llvm::DenseSet<std::pair<Value, unsigned>>;

/// (a) + (c2): guarded or elected mbarrier.arrive sites, per pipeline side.
static bool checkArriveGuards(FunctionOpInterface fn, const Options &options,
                              ReportedSides &reported) {
  bool failed = false;
  llvm::MapVector<std::pair<Value, unsigned>, SmallVector<ArriveSite>> sites;
  fn->walk<WalkOrder::PreOrder>([&](Operation *op) {
    if (auto commit = dyn_cast<ProducerCommitOp>(op)) {
      PipelineType type = commit.getPipelineType();
      if (type.getProducerOpType() == OpType::AsyncThread)
        sites[{commit.getPipeline(), 0}].push_back(
            classifyArrive(op, commit.getElectOne()));
      return;
    }
    auto release = dyn_cast<ConsumerReleaseOp>(op);
    if (!release)
      return;
    PipelineType type = release.getPipelineType();
    // The mixed MMA + async consumer count is not the async side's alone.
    if (type.getConsumerOpType() != OpType::AsyncThread ||
        getKindTraits(type.getKind()).consumerOpPerRelease)
      return;
    if (getBarrierPlan(type).signallingLanes > 1) {
      // Signaling lanes 0..cluster_size-1 of each warp arrive on one CTA each.
      Guard guard = getEnclosingGuard(op);
      if (!release.getElectOne() && guard != Guard::OneLanePerWarp &&
          guard != Guard::OneThread)
        return;
      InFlightDiagnostic diag = op->emitError();
      diag << describe(release.getPipeline())
           << ": consumer.release from one lane cannot signal the cluster: "
              "in a tma_async pipeline with a cluster of "
           << type.getClusterSize() << " CTAs, lanes 0.."
           << type.getClusterSize() - 1
           << " of every consumer warp each arrive on one CTA's empty "
              "barrier, so the peers' producers wait forever (release from "
              "the whole warp, without elect_one or an elect guard)";
      if (Operation *guardIf = findGuardIf(op))
        diag.attachNote(guardIf->getLoc()) << "guard that narrows who arrives";
      reported.insert({release.getPipeline(), 1});
      failed = true;
      return;
    }
    sites[{release.getPipeline(), 1}].push_back(
        classifyArrive(op, release.getElectOne()));
  });
  for (auto &[key, list] : sites) {
    if (checkArriveSites(key.first, key.second == 0, list, options)) {
      reported.insert(key);
      failed = true;
    }
  }
  return failed;
}

namespace {
/// Where one pipeline's verbs are, in program order.
struct PipeUses {
  SmallVector<Operation *> acquires;
  llvm::MapVector<Block *, SmallVector<Operation *>> producerRoles,
      consumerRoles;
};
} // namespace

/// (b) TMA: one elected arrive.expect_tx per single-warp producer role.
static bool checkElectedTmaArrive(Value pipe, const PipeUses &uses) {
  PipelineType type = getPipelineType(pipe);
  ArrayRef<Operation *> acquires = uses.acquires;
  if (!isTmaLoadKind(type.getKind()) || !type.getProducer() ||
      type.getProducer().getSize() <= 1 || acquires.empty() ||
      !llvm::all_of(acquires, [](Operation *acq) {
        Guard g = getEnclosingGuard(acq);
        return g == Guard::OneWarp || g == Guard::OneThread;
      }))
    return false;
  llvm::SmallPtrSet<Block *, 4> roles;
  for (Operation *acq : acquires)
    roles.insert(getRoleBlock(acq));
  if (type.getProducer().getSize() <= static_cast<int64_t>(roles.size()))
    return false;
  auto create = pipe.getDefiningOp<CreateOp>();
  Operation *where = create ? create.getOperation() : acquires.front();
  InFlightDiagnostic diag = where->emitError();
  diag << describe(pipe) << ": the producer group "
       << groupString(type.getProducer()) << " makes each full barrier expect "
       << type.getProducer().getSize()
       << " arrivals, but producer.acquire arrives once (one elected "
          "arrive.expect_tx) from "
       << roles.size() << " single-warp producer role"
       << (roles.size() == 1 ? "" : "s")
       << ": the stage never completes and consumers wait forever (a "
          "TMA producer group is #pipeline.group<thread, 1>)";
  for (Operation *acq : acquires)
    diag.attachNote(acq->getLoc()) << "elected arrive here";
  return true;
}

/// (c1) tma_async: as in CuTe DSL, each consumer warp releases a stage from
/// its signaling lanes, once on every CTA whose multicast loads it reads, so
/// the consumer group counts `mcast_size * consumer warps` arrivals
/// (CooperativeGroup(Agent.Thread, mcast_size * warps)).
static bool checkSignallingLaneGroup(Value pipe) {
  PipelineType type = getPipelineType(pipe);
  auto create = pipe.getDefiningOp<CreateOp>();
  if (getBarrierPlan(type).release != ArriveTarget::SignallingLanes ||
      !create || !type.getConsumer() ||
      type.getConsumer().getAgent() != Agent::Thread)
    return false;
  int64_t mcast = getMcastSize(type);
  if (type.getConsumer().getSize() % mcast == 0)
    return false;
  InFlightDiagnostic diag = create.emitError();
  diag << describe(pipe) << ": each consumer warp releases a stage "
       << "once on each of the " << mcast
       << " CTAs whose multicast loads it reads, so the consumer group "
          "counts (consumer warps x "
       << mcast << ") arrivals; " << groupString(type.getConsumer())
       << " is not a multiple of " << mcast
       << " (CuTe DSL: CooperativeGroup(Agent.Thread, mcast_size * "
          "num_consumer_warps))";
  return true;
}

/// (d) consumer verbs from the producer role (NVIDIA/cutlass#2126).
static bool checkConsumerVerbsInProducerRole(Value pipe, PipeUses &uses) {
  auto &producerRoles = uses.producerRoles;
  auto &consumerRoles = uses.consumerRoles;
  if (consumerRoles.size() < 2)
    return false;
  bool failed = false;
  for (auto &[role, consumerOps] : consumerRoles) {
    auto prod = producerRoles.find(role);
    if (prod == producerRoles.end() || !isa<scf::IfOp>(getRoleOwner(role)))
      continue;
    Operation *first = consumerOps.front();
    if (cast<StageVerbOpInterface>(first).getStateType().getRole() ==
        Role::ProducerConsumer)
      continue;
    Block *other = nullptr;
    for (auto &entry : consumerRoles)
      if (entry.first != role)
        other = entry.first;
    InFlightDiagnostic diag = first->emitError();
    diag << describe(pipe) << ": " << first->getName()
         << " issued from the producer role while another role consumes "
            "this pipeline: the producer threads' consumer arrives are not "
            "in the consumer group's count and the stages go out of step "
            "(NVIDIA/cutlass#2126); move the consumer verbs to the consumer "
            "role, or make a role that does both use producer_consumer "
            "states";
    diag.attachNote(prod->second.front()->getLoc())
        << "this role produces here";
    diag.attachNote(consumerRoles[other].front()->getLoc())
        << "the consumer role consumes here";
    failed = true;
  }
  return failed;
}

/// (f) Every warp that waits on a stage releases it too. A consumer role
/// whose warps all wait on each stage, but whose release runs in fewer of
/// them (one thread of the role, `thread_idx() == 32`, with a group count
/// of 1), passes the count check, yet the releasing warp may run a lap of
/// the ring ahead: the producer refills the stage and its phase completes
/// again while another warp of the role still polls the old parity, a phase
/// that will not come back. Each waiting warp must itself arrive (an
/// elected lane per warp with a group of that many warps is right), or the
/// role must synchronise between the other warps' use and the release (a
/// named barrier over the role, bar.sync, after a wait and before the
/// release; for a lagged release that precedes the iteration's wait,
/// anywhere before it): a role with such a barrier is left alone, as is one
/// whose warps the guards do not decide. A barrier after the release (at
/// the loop's end) leaves the release racing the other warps' reads.
static bool checkWaitersRelease(Value pipe, PipeUses &uses,
                                const Options &options) {
  PipelineType type = getPipelineType(pipe);
  const KindTraits &traits = getKindTraits(type.getKind());
  if (!traits.hasBarriers || !traits.hasConsumerGroup)
    return false;
  auto fn = pipe.getParentRegion()->getParentOfType<FunctionOpInterface>();
  if (!fn)
    return false;
  int64_t blockDim = getBlockDim(fn, options);
  for (auto &[role, ops] : uses.consumerRoles) {
    SmallVector<Operation *> waits, releases;
    for (Operation *op : ops) {
      Verb v = getVerb(op)->verb;
      if (v == Verb::Wait)
        waits.push_back(op);
      else if (v == Verb::Release)
        releases.push_back(op);
    }
    if (waits.empty() || releases.empty())
      continue;
    // A barrier across warps in the role orders the other warps' reads
    // before the release when it runs between a wait and the release (or,
    // for a release that runs before every wait of its iteration, the
    // previous stage's: anywhere before the release). One elsewhere (after
    // the release, before the wait) does not.
    Operation *owner = role->getParentOp();
    Operation *firstRelease = releases.front();
    bool releaseLeads = llvm::all_of(
        waits, [&](Operation *w) { return runsBefore(firstRelease, w); });
    bool synced = false;
    role->walk([&](Operation *op) {
      if (!isa<NamedBarrierSyncOp, gpu::BarrierOp, NVVM::Barrier0Op,
               NVVM::BarrierOp>(op))
        return;
      if (!runsBefore(op, firstRelease))
        return;
      if (releaseLeads ||
          llvm::any_of(waits, [&](Operation *w) { return runsBefore(w, op); }))
        synced = true;
    });
    if (synced || !owner)
      continue;
    auto warpsOfOps = [&](ArrayRef<Operation *> list)
        -> std::optional<llvm::BitVector> {
      llvm::BitVector warps;
      for (Operation *op : list) {
        std::optional<Executors> who = getExecutors(op, blockDim);
        if (!who || who->threads.none())
          return std::nullopt;
        if (warps.empty())
          warps.resize(who->threads.size() / 32 + 1);
        for (int t : who->threads.set_bits())
          warps.set(t / 32);
      }
      return warps;
    };
    std::optional<llvm::BitVector> waiting = warpsOfOps(waits);
    std::optional<llvm::BitVector> releasing = warpsOfOps(releases);
    if (!waiting || !releasing)
      continue;
    releasing->resize(waiting->size());
    llvm::BitVector idle = *waiting;
    idle.reset(*releasing);
    if (idle.none())
      continue;
    Operation *release = releases.front();
    InFlightDiagnostic diag = release->emitError();
    diag << describe(pipe) << ": " << describeWarps(*waiting)
         << " wait on each stage but only " << describeWarps(*releasing)
         << (releasing->count() == 1 ? " releases" : " release") << " it (" << describeWarps(idle)
         << " never arrive): a releasing warp can run a lap of the ring "
            "ahead and the producer refill the stage while "
         << describeWarps(idle)
         << " still poll its old phase, which does not come back; every "
            "warp that waits on a stage must release it (each thread, or an "
            "elected lane per warp with a consumer group counting the "
            "warps), or the role must synchronise (a named barrier over its "
            "warps) before one thread releases for all";
    diag.attachNote(waits.front()->getLoc()) << "the role waits here";
    noteCreate(diag, pipe);
    return true;
  }
  return false;
}

LogicalResult protocol::checkArriveCounts(FunctionOpInterface fn,
                                          const Options &options) {
  ReportedSides reported;
  bool failed = checkArriveGuards(fn, options, reported);

  // Per pipeline facts for (b), (c1) and (d), in program order.
  llvm::MapVector<Value, PipeUses> pipes;
  fn->walk<WalkOrder::PreOrder>([&](Operation *op) {
    std::optional<VerbRef> verb = getVerb(op);
    if (!verb)
      return;
    PipeUses &uses = pipes[verb->pipeline];
    if (verb->verb == Verb::Acquire)
      uses.acquires.push_back(op);
    if (isProducerVerb(verb->verb))
      uses.producerRoles[getRoleBlock(op)].push_back(op);
    else if (isConsumerVerb(verb->verb))
      uses.consumerRoles[getRoleBlock(op)].push_back(op);
  });
  for (auto &[pipe, uses] : pipes) {
    failed |= checkElectedTmaArrive(pipe, uses);
    failed |= checkSignallingLaneGroup(pipe);
    failed |= checkConsumerVerbsInProducerRole(pipe, uses);
    failed |= checkWaitersRelease(pipe, uses, options);
  }

  // (e) arrivals implied by who signals, against the group's count.
  failed |= checkImpliedArriveCounts(fn, options, reported);
  return failure(failed);
}
