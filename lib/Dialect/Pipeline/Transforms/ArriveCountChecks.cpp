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
// The guard rules are ArriveGuards.cpp's and the count of the signalling
// roles ImpliedArriveCounts.cpp's (ArriveCounts.h); the per-pipeline rules
// are here.
//
// What is not decidable from the IR is left alone (see
// docs/VerifyProtocol.md): roles whose warps the guards leave open; sides
// signalled from several roles.
//
//===----------------------------------------------------------------------===//

#include "ArriveCounts.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "llvm/ADT/MapVector.h"

using namespace mlir;
using namespace mlir::pipeline;
using namespace mlir::pipeline::protocol;

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
         << (releasing->count() == 1 ? " releases" : " release") << " it ("
         << describeWarps(idle)
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
