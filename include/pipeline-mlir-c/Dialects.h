/*===- Dialects.h - C API of the pipeline dialect -----------------*- C -*-===*\
|* The C API that the Python extension binds: dialect handle, pass           *|
|* registration, and constructors/accessors of the dialect's types and       *|
|* attributes. Enums travel as their integer values (see PipelineAttrs.td).  *|
\*===----------------------------------------------------------------------===*/

#ifndef PIPELINE_MLIR_C_DIALECTS_H
#define PIPELINE_MLIR_C_DIALECTS_H

#include "mlir-c/IR.h"

#ifdef __cplusplus
extern "C" {
#endif

MLIR_DECLARE_CAPI_DIALECT_REGISTRATION(Pipeline, pipeline);

/// Registers pipeline-verify-protocol, convert-pipeline-to-nvvm and the
/// pipeline-to-cubin pass pipeline with the global registry.
MLIR_CAPI_EXPORTED void mlirPipelineRegisterPasses(void);

/* TypeIDs, so that Python returns values of our types as our classes. */
MLIR_CAPI_EXPORTED MlirTypeID mlirPipelinePipelineTypeGetTypeID(void);
MLIR_CAPI_EXPORTED MlirTypeID mlirPipelineStateTypeGetTypeID(void);
MLIR_CAPI_EXPORTED MlirTypeID mlirPipelineCooperativeGroupGetTypeID(void);
MLIR_CAPI_EXPORTED MlirTypeID mlirPipelineClusterLayoutGetTypeID(void);

/* #pipeline.group<agent, size> */
MLIR_CAPI_EXPORTED bool mlirAttributeIsAPipelineCooperativeGroup(MlirAttribute a);
MLIR_CAPI_EXPORTED MlirAttribute
mlirPipelineCooperativeGroupGet(MlirContext ctx, int32_t agent, int64_t size);
MLIR_CAPI_EXPORTED int32_t mlirPipelineCooperativeGroupGetAgent(MlirAttribute a);
MLIR_CAPI_EXPORTED int64_t mlirPipelineCooperativeGroupGetSize(MlirAttribute a);

/* #pipeline.cluster<v, m, n, l> */
MLIR_CAPI_EXPORTED bool mlirAttributeIsAPipelineClusterLayout(MlirAttribute a);
MLIR_CAPI_EXPORTED MlirAttribute mlirPipelineClusterLayoutGet(
    MlirContext ctx, int64_t v, int64_t m, int64_t n, int64_t l);
/// mode: 0 = V, 1 = M, 2 = N, 3 = L.
MLIR_CAPI_EXPORTED int64_t mlirPipelineClusterLayoutGetMode(MlirAttribute a,
                                                           int32_t mode);

/* !pipeline.pipeline<...>; a null attribute means "absent". Returns a null
   type when the parameters are inconsistent (the diagnostic goes to the
   context's handlers). */
MLIR_CAPI_EXPORTED bool mlirTypeIsAPipelinePipelineType(MlirType t);
MLIR_CAPI_EXPORTED MlirType mlirPipelinePipelineTypeGet(
    MlirContext ctx, int32_t kind, int64_t stages, MlirAttribute producer,
    MlirAttribute consumer, int64_t txCount, MlirAttribute cluster,
    int32_t multicast, int64_t ctaGroup, int64_t length);
MLIR_CAPI_EXPORTED int32_t mlirPipelinePipelineTypeGetKind(MlirType t);
MLIR_CAPI_EXPORTED int64_t mlirPipelinePipelineTypeGetStages(MlirType t);
MLIR_CAPI_EXPORTED MlirAttribute mlirPipelinePipelineTypeGetProducer(MlirType t);
MLIR_CAPI_EXPORTED MlirAttribute mlirPipelinePipelineTypeGetConsumer(MlirType t);
MLIR_CAPI_EXPORTED int64_t mlirPipelinePipelineTypeGetTxCount(MlirType t);
MLIR_CAPI_EXPORTED MlirAttribute mlirPipelinePipelineTypeGetCluster(MlirType t);
MLIR_CAPI_EXPORTED int32_t mlirPipelinePipelineTypeGetMulticast(MlirType t);
MLIR_CAPI_EXPORTED int64_t mlirPipelinePipelineTypeGetCtaGroup(MlirType t);
MLIR_CAPI_EXPORTED int64_t mlirPipelinePipelineTypeGetLength(MlirType t);

/* !pipeline.state<stages, role[, simple]> */
MLIR_CAPI_EXPORTED bool mlirTypeIsAPipelineStateType(MlirType t);
MLIR_CAPI_EXPORTED MlirType mlirPipelineStateTypeGet(MlirContext ctx,
                                                     int64_t stages,
                                                     int32_t role, bool simple);
MLIR_CAPI_EXPORTED int64_t mlirPipelineStateTypeGetStages(MlirType t);
MLIR_CAPI_EXPORTED int32_t mlirPipelineStateTypeGetRole(MlirType t);
MLIR_CAPI_EXPORTED bool mlirPipelineStateTypeGetSimple(MlirType t);

#ifdef __cplusplus
}
#endif

#endif // PIPELINE_MLIR_C_DIALECTS_H
