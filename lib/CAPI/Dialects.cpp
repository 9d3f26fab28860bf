//===- Dialects.cpp - C API of the pipeline dialect -------------*- C++ -*-===//

#include "pipeline-mlir-c/Dialects.h"

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
  mlir::pipeline::registerConvertPipelineToNVVM();
  mlir::pipeline::registerPipelineToCubinPipeline();
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
