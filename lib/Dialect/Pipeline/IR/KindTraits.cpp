//===- KindTraits.cpp - the table of pipeline kinds and barrier plans -----===//
//
// One row per CuTe DSL pipeline class; see KindTraits.h for the columns and
// docs/Rationale.md (sections 5-6: arrive counts, clusters, multicast and
// 2-CTA pairs) for the hardware behaviour behind the rows that scale or
// redirect arrivals.
//
//===----------------------------------------------------------------------===//

#include "pipeline-mlir/Dialect/Pipeline/IR/KindTraits.h"

#include "pipeline-mlir/Dialect/Pipeline/IR/PipelineDialect.h"

#include "llvm/Support/ErrorHandling.h"

#include <cassert>
#include <iterator>

using namespace mlir;
using namespace mlir::pipeline;

namespace {
using AT = ArriveTarget;
using Arm = ArmTarget;
using Op = OpType;
using K = PipelineKind;

// clang-format off
/// Indexed by the kind's value (checked by lookupKindTraits).
constexpr KindTraits kTable[] = {
  //  kind                        class
  //  barriers prodGrp consGrp  producerOp        consumerOp       perRelease
  //  tx     copies tcgen05 mcast  pairFull pairEmpty
  //  arm                      commit                release               tailLeaderOnly
  {K::Async, "PipelineAsync",
   true, true, true, Op::AsyncThread, Op::AsyncThread, false,
   false, false, false, false, false, false,
   Arm::None, AT::Local, AT::Local, false},
  // cp.async.mbarrier.arrive.noinc lands on the issuing CTA's barrier.
  {K::CpAsync, "PipelineCpAsync",
   true, true, true, Op::AsyncLoad, Op::AsyncThread, false,
   false, false, false, false, false, false,
   Arm::None, AT::Local, AT::Local, false},
  // Each consumer warp releases once on every CTA whose multicast loads it
  // reads, from its signalling lanes.
  {K::TmaAsync, "PipelineTmaAsync",
   true, true, true, Op::TmaLoad, Op::AsyncThread, false,
   true, true, false, true, false, false,
   Arm::Local, AT::None, AT::SignallingLanes, false},
  // Bulk groups, no barriers.
  {K::TmaStore, "PipelineTmaStore",
   false, false, false, Op::TmaStore, Op::TmaStore, false,
   false, false, false, false, false, false,
   Arm::None, AT::None, AT::None, false},
  // Every group waits on its own barrier and arrives on the next group's.
  {K::Order, "PipelineOrder",
   true, true, false, Op::AsyncThread, Op::AsyncThread, false,
   false, false, false, false, false, false,
   Arm::None, AT::Local, AT::None, false},
  // The MMA runs in the pair leader: only the leader arms, with both CTAs'
  // bytes.
  {K::TmaUmma, "PipelineTmaUmma",
   true, true, true, Op::TmaLoad, Op::TCGen05Mma, false,
   true, true, true, true, false, false,
   Arm::PairLeader, AT::None, AT::MulticastMask, false},
  // Both CTAs' producers arrive on the leader's full barrier.
  {K::AsyncUmma, "PipelineAsyncUmma",
   true, true, true, Op::AsyncThread, Op::TCGen05Mma, false,
   false, false, true, true, true, false,
   Arm::None, AT::PairLeader, AT::MulticastMask, false},
  // Epilogue threads of both CTAs release the leader's stage.
  {K::UmmaAsync, "PipelineUmmaAsync",
   true, true, true, Op::TCGen05Mma, Op::AsyncThread, false,
   false, false, true, true, false, true,
   Arm::None, AT::MulticastMask, AT::PairLeader, true},
  {K::TmaMultiConsumersAsync, "PipelineTmaMultiConsumersAsync",
   true, true, true, Op::TmaLoad, Op::AsyncThread, true,
   true, true, true, true, false, false,
   Arm::PairLeader, AT::None, AT::Local, false},
  // The scheduler (and its empty barrier) lives in CTA 0; the response is
  // multicast to every CTA.
  {K::ClcFetchAsync, "PipelineClcFetchAsync",
   true, true, true, Op::ClcLoad, Op::AsyncThread, false,
   true, false, false, false, false, false,
   Arm::EveryClusterCta, AT::None, AT::ClusterCta0, false},
};
// clang-format on
} // namespace

ArriveTarget BarrierPlan::releaseTarget(OpType side) const {
  return side == OpType::TCGen05Mma ? ArriveTarget::MulticastMask : release;
}

const KindTraits *mlir::pipeline::lookupKindTraits(PipelineKind kind) {
  auto index = static_cast<uint32_t>(kind);
  if (index >= std::size(kTable))
    return nullptr;
  const KindTraits &row = kTable[index];
  if (row.kind != kind)
    llvm::report_fatal_error("KindTraits table out of order");
  return &row;
}

const KindTraits &mlir::pipeline::getKindTraits(PipelineKind kind) {
  const KindTraits *row = lookupKindTraits(kind);
  assert(row && "not a pipeline kind");
  return *row;
}

PipelineParams PipelineParams::fromType(PipelineType type) {
  PipelineParams p;
  p.kind = type.getKind();
  p.stages = type.getStages();
  if (CooperativeGroupAttr g = type.getProducer()) {
    p.producerAgent = g.getAgent();
    p.producerSize = g.getSize();
  }
  if (CooperativeGroupAttr g = type.getConsumer()) {
    p.consumerAgent = g.getAgent();
    p.consumerSize = g.getSize();
  }
  if (ClusterLayoutAttr c = type.getCluster()) {
    p.v = c.getV();
    p.m = c.getM();
    p.n = c.getN();
    p.l = c.getL();
  }
  p.multicast = type.getMulticast();
  p.ctaGroup = type.getCtaGroup();
  p.length = type.getLength();
  p.txCount = type.getTxCount();
  return p;
}

BarrierPlan mlir::pipeline::computeBarrierPlan(const PipelineParams &p,
                                               int64_t blockDim) {
  BarrierPlan plan;
  const KindTraits &t = getKindTraits(p.kind);
  plan.traits = &t;
  plan.clusterSize = p.v * p.m * p.n * p.l;
  plan.ctaPair = p.v;
  plan.txCount = p.txCount;
  if (t.hasBarriers) {
    if (!t.hasConsumerGroup) {
      plan.numFull = p.stages * p.length;
    } else {
      plan.numFull = p.stages;
      plan.numEmpty = p.stages;
    }
    plan.numBarriers = plan.numFull + plan.numEmpty;
  }
  if (t.pairScalesFull)
    plan.fullScale = p.v;
  if (t.pairScalesEmpty)
    plan.emptyScale = p.v;
  auto scaled = [](std::optional<int64_t> c, int64_t k) {
    return c ? std::optional<int64_t>(*c * k) : std::nullopt;
  };
  if (plan.numFull && p.producerSize)
    plan.fullCount = scaled(
        getArriveCount(p.producerAgent, p.producerSize, blockDim, plan.clusterSize),
        plan.fullScale);
  if (plan.numEmpty && p.consumerSize)
    plan.emptyCount = scaled(
        getArriveCount(p.consumerAgent, p.consumerSize, blockDim, plan.clusterSize),
        plan.emptyScale);

  bool alongM = p.multicast == Multicast::M || p.multicast == Multicast::MN;
  bool alongN = p.multicast == Multicast::N || p.multicast == Multicast::MN;
  plan.multicastPeers = (alongM ? p.m : 1) + (alongN ? p.n : 1) - 1;

  auto resolve = [&](ArriveTarget target) {
    if (target == ArriveTarget::PairLeader && p.v == 1)
      return ArriveTarget::Local;
    if (target == ArriveTarget::ClusterCta0 && plan.clusterSize == 1)
      return ArriveTarget::Local;
    return target;
  };
  plan.commit = resolve(t.commit);
  plan.release = resolve(t.release);
  plan.arm = t.arm == ArmTarget::PairLeader && p.v == 1 ? ArmTarget::Local
                                                        : t.arm;
  if (plan.release == ArriveTarget::SignallingLanes)
    plan.signallingLanes = plan.clusterSize;
  return plan;
}

BarrierPlan mlir::pipeline::getBarrierPlan(PipelineType type,
                                           int64_t blockDim) {
  return computeBarrierPlan(PipelineParams::fromType(type), blockDim);
}
