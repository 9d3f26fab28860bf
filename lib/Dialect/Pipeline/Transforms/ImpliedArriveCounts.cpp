//===- ImpliedArriveCounts.cpp - arrivals per phase against the count -----===//
//
// Property 6 (ArriveCounts.h), (e): the arrivals per phase that the roles
// signalling a side make (their warps from the guards, times what the
// verb's mechanism arrives) against the count the side's group gives the
// barrier. Several roles either each signal every stage (cooperative
// consumers: the barrier gets their sum) or take turns (ping-pong: each
// gives the count alone).
//
//===----------------------------------------------------------------------===//

#include "ArriveCounts.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Interfaces/CallInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;
using namespace mlir::pipeline;
using namespace mlir::pipeline::protocol;

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
  // An MMA consumer's release is a tcgen05.commit multicast to the CTAs
  // whose loads land in the stage (ummaArrivalMask): with a pair, only
  // the leader CTA of each pair issues it, so each CTA's empty barrier
  // gets one commit per warp from each pair of its multicast peers.
  bool mmaRelease = !producerSide &&
                    type.getConsumerOpType() == OpType::TCGen05Mma &&
                    kind == PipelineKind::TmaUmma;
  if (type.getClusterSize() > 1 && !signallingLanes && !mmaRelease)
    return std::nullopt;
  std::optional<Executors> who = getExecutors(op, blockDim);
  // The MMA warp under the pair leader's branch (a CTA rank): that branch
  // is the same for every warp of a CTA.
  if (!who && mmaRelease)
    who = getWarpExecutors(op, blockDim, /*noGlobalWrites=*/false);
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
  case OpType::TCGen05Mma: {
    int64_t peers = type.getClusterSize() > 1 ? getMcastSize(type) : 1;
    if (peers == 1)
      return ImpliedArrives{who->warps, *who,
                            "one elected tcgen05.commit per warp"};
    std::string how = "one elected tcgen05.commit per warp, multicast from "
                      "the MMA " +
                      std::string(type.getCtaGroup() == 2
                                      ? "of each CTA pair's leader"
                                      : "of each CTA") +
                      " among the " + std::to_string(peers) +
                      " whose loads land in the stage";
    return ImpliedArrives{who->warps * peers, *who, how};
  }
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
bool protocol::checkImpliedArriveCounts(FunctionOpInterface fn,
                                        const Options &options,
                                        const ReportedSides &reported) {
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
