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

/// Why an #nvvm.target with these parameters would crash upstream MLIR or
/// the NVPTX back end (NVVMTargetCheck.h), passed to `callback`; nothing is
/// passed when it would not. Returns whether it is safe.
MLIR_CAPI_EXPORTED bool mlirPipelineCheckNVVMTargetParams(
    int64_t optLevel, MlirStringRef triple, MlirStringRef chip,
    MlirStringRef features, MlirStringCallback callback, void *userData);
/// Passes each chip the pipeline lowering supports to `callback`.
MLIR_CAPI_EXPORTED void
mlirPipelineForEachLoweringChip(MlirStringCallback callback, void *userData);
/// Emits an error (through the context's diagnostic handlers) at each op
/// under `op` that holds an #nvvm.target nvvmTargetProblem rejects; false if
/// there is one. Reads attributes only, so it is safe on unverified IR.
MLIR_CAPI_EXPORTED bool mlirPipelineCheckNVVMTargets(MlirOperation op);

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

/* The table of pipeline kinds (pipeline-mlir/Dialect/Pipeline/IR/
   KindTraits.h): what each kind means, and the barrier plan it gives one
   pipeline. Enums travel as integers, with their spelling alongside
   (static strings). Arrive targets: 0 none, 1 local, 2 pair_leader,
   3 cluster_cta0, 4 signalling_lanes, 5 multicast_mask; arm targets:
   0 none, 1 local, 2 pair_leader, 3 every_cluster_cta. */
typedef struct {
  int32_t kind;
  const char *kindName;   /* "tma_async" */
  const char *cuteClass;  /* "PipelineTmaAsync" */
  bool hasBarriers, hasProducerGroup, hasConsumerGroup;
  int32_t producerOp, consumerOp;
  const char *producerOpName, *consumerOpName; /* "tma_load", ... */
  bool consumerOpPerRelease, txBytes, stageCopies, tcgen05, multicast;
  bool pairScalesFull, pairScalesEmpty, tailLeaderOnly;
  int32_t arm, commit, release;
  const char *armName, *commitName, *releaseName;
} MlirPipelineKindTraits;

/// The arrive count a cooperative group implies (thread: size, warp:
/// 32 * size, threadblock: size * blockDim, cluster: size * clusterSize *
/// blockDim); -1 when it depends on an unknown block size (0) or the agent
/// is out of range.
MLIR_CAPI_EXPORTED int64_t mlirPipelineGetArriveCount(int32_t agent,
                                                      int64_t size,
                                                      int64_t blockDim,
                                                      int64_t clusterSize);

/// Fills `out` with the row of `kind`; false when `kind` names no kind.
MLIR_CAPI_EXPORTED bool mlirPipelineGetKindTraits(int32_t kind,
                                                  MlirPipelineKindTraits *out);

/// The facts of a pipeline type as plain values; absent groups have size 0,
/// no cluster layout is (1, 1, 1, 1).
typedef struct {
  int32_t kind;
  int64_t stages;
  int32_t producerAgent;
  int64_t producerSize;
  int32_t consumerAgent;
  int64_t consumerSize;
  int64_t v, m, n, l;
  int32_t multicast;
  int64_t ctaGroup, length, txCount;
} MlirPipelineParams;

typedef struct {
  int64_t numBarriers, numFull, numEmpty;
  int64_t clusterSize, ctaPair;
  int64_t fullScale, emptyScale;
  /* mbarrier.init counts; -1 when the block size they depend on is unknown
     or the side has no barrier. */
  int64_t fullCount, emptyCount;
  int64_t multicastPeers, signallingLanes;
  int32_t arm, commit, release;
  const char *armName, *commitName, *releaseName;
  int64_t txCount;
} MlirPipelineBarrierPlan;

MLIR_CAPI_EXPORTED MlirPipelineParams
mlirPipelinePipelineTypeGetParams(MlirType t);
/// The barrier plan of `params` for CTAs of `blockDim` threads (0: unknown);
/// false when the kind, an agent or the multicast mode is out of range.
MLIR_CAPI_EXPORTED bool
mlirPipelineComputeBarrierPlan(MlirPipelineParams params, int64_t blockDim,
                               MlirPipelineBarrierPlan *out);

#ifdef __cplusplus
}
#endif

#endif // PIPELINE_MLIR_C_DIALECTS_H
