//===- ArriveGuards.cpp - guarded and elected mbarrier.arrive sites -------===//
//
// Property 6 (ArriveCounts.h), (a) and (c2): an async side's arrive sites
// run by fewer threads than its group counts (an elect guard, one thread of
// the CTA, one lane per warp against a group counted per thread), and a
// tma_async consumer release from one lane where every signalling lane of
// the warp must arrive on one CTA each.
//
//===----------------------------------------------------------------------===//

#include "ArriveCounts.h"

#include "llvm/ADT/MapVector.h"

using namespace mlir;
using namespace mlir::pipeline;
using namespace mlir::pipeline::protocol;


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

/// (a) + (c2): guarded or elected mbarrier.arrive sites, per pipeline side.
bool protocol::checkArriveGuards(FunctionOpInterface fn,
                                 const Options &options,
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
