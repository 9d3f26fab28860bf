//===- Dialects.cpp - C API of the pipeline dialect -------------*- C++ -*-===//

#include "pipeline-mlir-c/Dialects.h"

#include "pipeline-mlir/Conversion/PipelineToNVVM/NVVMTargetCheck.h"
#include "pipeline-mlir/Conversion/PipelineToNVVM/PipelineToNVVM.h"
#include "pipeline-mlir/Dialect/Pipeline/IR/PipelineDialect.h"
#include "pipeline-mlir/Dialect/Pipeline/Transforms/Passes.h"

#include "mlir/CAPI/IR.h"
#include "mlir/CAPI/Registration.h"
#include "mlir/CAPI/Support.h"
#include "mlir/IR/Diagnostics.h"

using namespace mlir;
using namespace mlir::pipeline;

MLIR_DEFINE_CAPI_DIALECT_REGISTRATION(Pipeline, pipeline,
                                      mlir::pipeline::PipelineDialect)

void mlirPipelineRegisterPasses(void) {
  static bool registered = false;
  if (registered)
    return;
  registered = true;
  mlir::pipeline::registerPipelineVerifyProtocol();
  mlir::pipeline::registerPipelineDeriveTxCount();
  mlir::pipeline::registerConvertPipelineToNVVM();
  mlir::pipeline::registerPipelineToCubinPipeline();
}

bool mlirPipelineCheckNVVMTargetParams(int64_t optLevel, MlirStringRef triple,
                                       MlirStringRef chip,
                                       MlirStringRef features,
                                       MlirStringCallback callback,
                                       void *userData) {
  std::string problem = nvvmTargetProblem(optLevel, unwrap(triple),
                                          unwrap(chip), unwrap(features));
  if (problem.empty())
    return true;
  callback(mlirStringRefCreate(problem.data(), problem.size()), userData);
  return false;
}

void mlirPipelineForEachLoweringChip(MlirStringCallback callback,
                                     void *userData) {
  for (StringRef chip : getLoweringChips())
    callback(mlirStringRefCreate(chip.data(), chip.size()), userData);
}

bool mlirPipelineCheckNVVMTargets(MlirOperation op) {
  return succeeded(checkNVVMTargets(unwrap(op)));
}

MlirTypeID mlirPipelinePipelineTypeGetTypeID(void) {
  return wrap(PipelineType::getTypeID());
}
MlirTypeID mlirPipelineStateTypeGetTypeID(void) {
  return wrap(StateType::getTypeID());
}
MlirTypeID mlirPipelineCooperativeGroupGetTypeID(void) {
  return wrap(CooperativeGroupAttr::getTypeID());
}
MlirTypeID mlirPipelineClusterLayoutGetTypeID(void) {
  return wrap(ClusterLayoutAttr::getTypeID());
}

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//

bool mlirAttributeIsAPipelineCooperativeGroup(MlirAttribute a) {
  return isa<CooperativeGroupAttr>(unwrap(a));
}
MlirAttribute mlirPipelineCooperativeGroupGet(MlirContext ctx, int32_t agent,
                                              int64_t size) {
  MLIRContext *c = unwrap(ctx);
  return wrap(CooperativeGroupAttr::getChecked(
      [c] { return emitError(UnknownLoc::get(c)); }, c,
      static_cast<Agent>(agent), size));
}
int32_t mlirPipelineCooperativeGroupGetAgent(MlirAttribute a) {
  return static_cast<int32_t>(cast<CooperativeGroupAttr>(unwrap(a)).getAgent());
}
int64_t mlirPipelineCooperativeGroupGetSize(MlirAttribute a) {
  return cast<CooperativeGroupAttr>(unwrap(a)).getSize();
}

bool mlirAttributeIsAPipelineClusterLayout(MlirAttribute a) {
  return isa<ClusterLayoutAttr>(unwrap(a));
}
MlirAttribute mlirPipelineClusterLayoutGet(MlirContext ctx, int64_t v,
                                           int64_t m, int64_t n, int64_t l) {
  MLIRContext *c = unwrap(ctx);
  return wrap(ClusterLayoutAttr::getChecked(
      [c] { return emitError(UnknownLoc::get(c)); }, c, v, m, n, l));
}
int64_t mlirPipelineClusterLayoutGetMode(MlirAttribute a, int32_t mode) {
  auto attr = cast<ClusterLayoutAttr>(unwrap(a));
  switch (mode) {
  case 0:
    return attr.getV();
  case 1:
    return attr.getM();
  case 2:
    return attr.getN();
  default:
    return attr.getL();
  }
}

//===----------------------------------------------------------------------===//
// Types
//===----------------------------------------------------------------------===//

bool mlirTypeIsAPipelinePipelineType(MlirType t) {
  return isa<PipelineType>(unwrap(t));
}
MlirType mlirPipelinePipelineTypeGet(MlirContext ctx, int32_t kind,
                                     int64_t stages, MlirAttribute producer,
                                     MlirAttribute consumer, int64_t txCount,
                                     MlirAttribute cluster, int32_t multicast,
                                     int64_t ctaGroup, int64_t length) {
  MLIRContext *c = unwrap(ctx);
  auto group = [](MlirAttribute a) {
    return mlirAttributeIsNull(a)
               ? CooperativeGroupAttr()
               : dyn_cast<CooperativeGroupAttr>(unwrap(a));
  };
  ClusterLayoutAttr layout =
      mlirAttributeIsNull(cluster) ? ClusterLayoutAttr()
                                   : dyn_cast<ClusterLayoutAttr>(unwrap(cluster));
  return wrap(PipelineType::getChecked(
      [c] { return emitError(UnknownLoc::get(c)); }, c,
      static_cast<PipelineKind>(kind), stages, group(producer), group(consumer),
      txCount, layout, static_cast<Multicast>(multicast), ctaGroup, length));
}
int32_t mlirPipelinePipelineTypeGetKind(MlirType t) {
  return static_cast<int32_t>(cast<PipelineType>(unwrap(t)).getKind());
}
int64_t mlirPipelinePipelineTypeGetStages(MlirType t) {
  return cast<PipelineType>(unwrap(t)).getStages();
}
MlirAttribute mlirPipelinePipelineTypeGetProducer(MlirType t) {
  return wrap(cast<PipelineType>(unwrap(t)).getProducer());
}
MlirAttribute mlirPipelinePipelineTypeGetConsumer(MlirType t) {
  return wrap(cast<PipelineType>(unwrap(t)).getConsumer());
}
int64_t mlirPipelinePipelineTypeGetTxCount(MlirType t) {
  return cast<PipelineType>(unwrap(t)).getTxCount();
}
MlirAttribute mlirPipelinePipelineTypeGetCluster(MlirType t) {
  return wrap(cast<PipelineType>(unwrap(t)).getCluster());
}
int32_t mlirPipelinePipelineTypeGetMulticast(MlirType t) {
  return static_cast<int32_t>(cast<PipelineType>(unwrap(t)).getMulticast());
}
int64_t mlirPipelinePipelineTypeGetCtaGroup(MlirType t) {
  return cast<PipelineType>(unwrap(t)).getCtaGroup();
}
int64_t mlirPipelinePipelineTypeGetLength(MlirType t) {
  return cast<PipelineType>(unwrap(t)).getLength();
}

bool mlirTypeIsAPipelineStateType(MlirType t) {
  return isa<StateType>(unwrap(t));
}
MlirType mlirPipelineStateTypeGet(MlirContext ctx, int64_t stages, int32_t role,
                                  bool simple) {
  MLIRContext *c = unwrap(ctx);
  return wrap(StateType::getChecked([c] { return emitError(UnknownLoc::get(c)); },
                                    c, stages, static_cast<Role>(role), simple));
}
int64_t mlirPipelineStateTypeGetStages(MlirType t) {
  return cast<StateType>(unwrap(t)).getStages();
}
int32_t mlirPipelineStateTypeGetRole(MlirType t) {
  return static_cast<int32_t>(cast<StateType>(unwrap(t)).getRole());
}
bool mlirPipelineStateTypeGetSimple(MlirType t) {
  return cast<StateType>(unwrap(t)).getSimple();
}

//===----------------------------------------------------------------------===//
// The table of pipeline kinds and barrier plans
//===----------------------------------------------------------------------===//

static const char *arriveTargetName(ArriveTarget target) {
  switch (target) {
  case ArriveTarget::None:
    return "none";
  case ArriveTarget::Local:
    return "local";
  case ArriveTarget::PairLeader:
    return "pair_leader";
  case ArriveTarget::ClusterCta0:
    return "cluster_cta0";
  case ArriveTarget::SignallingLanes:
    return "signalling_lanes";
  case ArriveTarget::MulticastMask:
    return "multicast_mask";
  }
  return "none";
}

static const char *armTargetName(ArmTarget target) {
  switch (target) {
  case ArmTarget::None:
    return "none";
  case ArmTarget::Local:
    return "local";
  case ArmTarget::PairLeader:
    return "pair_leader";
  case ArmTarget::EveryClusterCta:
    return "every_cluster_cta";
  }
  return "none";
}

/// The spelling of an enum case: a string literal, so NUL-terminated.
static const char *cString(StringRef s) { return s.data(); }

int64_t mlirPipelineGetArriveCount(int32_t agent, int64_t size,
                                   int64_t blockDim, int64_t clusterSize) {
  if (agent < 0 || !symbolizeAgent(static_cast<uint32_t>(agent)))
    return -1;
  return getArriveCount(static_cast<Agent>(agent), size, blockDim, clusterSize)
      .value_or(-1);
}

bool mlirPipelineGetKindTraits(int32_t kind, MlirPipelineKindTraits *out) {
  if (kind < 0 || !symbolizePipelineKind(static_cast<uint32_t>(kind)))
    return false;
  const KindTraits &t = getKindTraits(static_cast<PipelineKind>(kind));
  out->kind = kind;
  out->kindName = cString(stringifyPipelineKind(t.kind));
  out->cuteClass = t.cuteClass;
  out->hasBarriers = t.hasBarriers;
  out->hasProducerGroup = t.hasProducerGroup;
  out->hasConsumerGroup = t.hasConsumerGroup;
  out->producerOp = static_cast<int32_t>(t.producerOp);
  out->consumerOp = static_cast<int32_t>(t.consumerOp);
  out->producerOpName = cString(stringifyOpType(t.producerOp));
  out->consumerOpName = cString(stringifyOpType(t.consumerOp));
  out->consumerOpPerRelease = t.consumerOpPerRelease;
  out->txBytes = t.txBytes;
  out->stageCopies = t.stageCopies;
  out->tcgen05 = t.tcgen05;
  out->multicast = t.multicast;
  out->pairScalesFull = t.pairScalesFull;
  out->pairScalesEmpty = t.pairScalesEmpty;
  out->tailLeaderOnly = t.tailLeaderOnly;
  out->arm = static_cast<int32_t>(t.arm);
  out->commit = static_cast<int32_t>(t.commit);
  out->release = static_cast<int32_t>(t.release);
  out->armName = armTargetName(t.arm);
  out->commitName = arriveTargetName(t.commit);
  out->releaseName = arriveTargetName(t.release);
  return true;
}

MlirPipelineParams mlirPipelinePipelineTypeGetParams(MlirType t) {
  PipelineParams p = PipelineParams::fromType(cast<PipelineType>(unwrap(t)));
  return {static_cast<int32_t>(p.kind),
          p.stages,
          static_cast<int32_t>(p.producerAgent),
          p.producerSize,
          static_cast<int32_t>(p.consumerAgent),
          p.consumerSize,
          p.v,
          p.m,
          p.n,
          p.l,
          static_cast<int32_t>(p.multicast),
          p.ctaGroup,
          p.length,
          p.txCount};
}

bool mlirPipelineComputeBarrierPlan(MlirPipelineParams params,
                                    int64_t blockDim,
                                    MlirPipelineBarrierPlan *out) {
  auto u = [](int32_t value) { return static_cast<uint32_t>(value); };
  if (!symbolizePipelineKind(u(params.kind)) ||
      !symbolizeAgent(u(params.producerAgent)) ||
      !symbolizeAgent(u(params.consumerAgent)) ||
      !symbolizeMulticast(u(params.multicast)))
    return false;
  PipelineParams p;
  p.kind = static_cast<PipelineKind>(params.kind);
  p.stages = params.stages;
  p.producerAgent = static_cast<Agent>(params.producerAgent);
  p.producerSize = params.producerSize;
  p.consumerAgent = static_cast<Agent>(params.consumerAgent);
  p.consumerSize = params.consumerSize;
  p.v = params.v;
  p.m = params.m;
  p.n = params.n;
  p.l = params.l;
  p.multicast = static_cast<Multicast>(params.multicast);
  p.ctaGroup = params.ctaGroup;
  p.length = params.length;
  p.txCount = params.txCount;
  BarrierPlan plan = computeBarrierPlan(p, blockDim);
  out->numBarriers = plan.numBarriers;
  out->numFull = plan.numFull;
  out->numEmpty = plan.numEmpty;
  out->clusterSize = plan.clusterSize;
  out->ctaPair = plan.ctaPair;
  out->fullScale = plan.fullScale;
  out->emptyScale = plan.emptyScale;
  out->fullCount = plan.fullCount.value_or(-1);
  out->emptyCount = plan.emptyCount.value_or(-1);
  out->multicastPeers = plan.multicastPeers;
  out->signallingLanes = plan.signallingLanes;
  out->arm = static_cast<int32_t>(plan.arm);
  out->commit = static_cast<int32_t>(plan.commit);
  out->release = static_cast<int32_t>(plan.release);
  out->armName = armTargetName(plan.arm);
  out->commitName = arriveTargetName(plan.commit);
  out->releaseName = arriveTargetName(plan.release);
  out->txCount = plan.txCount;
  return true;
}
