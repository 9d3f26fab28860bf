//===- KindTraits.h - what each pipeline kind means -------------*- C++ -*-===//
//
// The one table of pipeline semantics (docs/Rationale.md sections 5-6): for
// every CuTe DSL pipeline class, which mechanism signals each side, which
// barriers complete by transaction bytes, where each side's arrive lands and
// which counts the 2-CTA pair doubles. `getBarrierPlan` resolves the table
// for one `!pipeline.pipeline` type: the mbarrier.init counts, the
// multicast peers and signalling lanes, and the arrive targets.
//
// The type verifier, the lowering and the protocol checker read it here; the
// Python builders and the simulator read it through the C API
// (pipeline-mlir-c/Dialects.h), so that no copy of it can drift.
//
//===----------------------------------------------------------------------===//

#ifndef PIPELINE_MLIR_DIALECT_PIPELINE_IR_KINDTRAITS_H
#define PIPELINE_MLIR_DIALECT_PIPELINE_IR_KINDTRAITS_H

#include <cstdint>
#include <optional>

namespace mlir::pipeline {

enum class Agent : uint32_t;
enum class OpType : uint32_t;
enum class PipelineKind : uint32_t;
enum class Multicast : uint32_t;
class PipelineType;

/// Where one side's barrier arrive lands, seen from the arriving CTA. The
/// numbers are the C API's (MlirPipelineArriveTarget).
enum class ArriveTarget : int32_t {
  /// No mbarrier arrive: the barrier completes by TMA/CLC transaction bytes
  /// (a TMA producer.commit is a no-op), or the side has no barrier.
  None = 0,
  /// This CTA's barrier.
  Local = 1,
  /// The pair leader's barrier (rank - rank % V): the 2-CTA MMA waits there.
  PairLeader = 2,
  /// CTA 0 of the cluster, where the CLC producer and its barriers live.
  ClusterCta0 = 3,
  /// Lane r of every warp (r < cluster size) arrives on CTA r's barrier when
  /// CTA r's loads land in this CTA (PipelineTmaAsync's signalling lanes).
  SignallingLanes = 4,
  /// One elected tcgen05.commit arrives on every CTA of the multicast mask:
  /// the CTAs sharing a multicast tile with this one, and the pair peer.
  MulticastMask = 5,
};

/// Who arms a full barrier with `mbarrier.arrive.expect_tx`.
enum class ArmTarget : int32_t {
  /// The full barrier does not complete by transaction bytes.
  None = 0,
  /// One elected producer thread arms its own CTA's barrier.
  Local = 1,
  /// Only the pair leader arms, with the bytes of both CTAs (the MMA
  /// consumer waits in the leader).
  PairLeader = 2,
  /// Lane r of the producer warp arms CTA r's barrier (the CLC response is
  /// multicast to every CTA of the cluster).
  EveryClusterCta = 3,
};

/// The static meaning of one pipeline kind.
struct KindTraits {
  PipelineKind kind;
  /// CuTe DSL class name ("PipelineTmaAsync").
  const char *cuteClass;
  /// Owns full/empty mbarriers (all but tma_store, which uses bulk groups).
  bool hasBarriers;
  /// The type names a producer / consumer cooperative group.
  bool hasProducerGroup;
  bool hasConsumerGroup;
  /// The mechanism that signals the full (producer) / empty (consumer)
  /// barrier.
  OpType producerOp;
  OpType consumerOp;
  /// MMA and async consumers share the empty barrier: each consumer.release
  /// names its mechanism (op_type); consumerOp is the async one.
  bool consumerOpPerRelease;
  /// The full barrier completes by transaction bytes (tx_count).
  bool txBytes;
  /// pipeline.copy.tma_load / copy.bulk fill the stages (TMA loads).
  bool stageCopies;
  /// Uses tcgen05 (sm_100 only): may be a 2-CTA (cta_group = 2) pipeline.
  bool tcgen05;
  /// Loads may be multicast along cluster modes.
  bool multicast;
  /// With a CTA pair (V = 2) both CTAs arrive on the leader's full / empty
  /// barrier, so its init count is the group's count times V.
  bool pairScalesFull;
  bool pairScalesEmpty;
  /// Who arms the full barrier with expect_tx.
  ArmTarget arm;
  /// Where producer.commit's / consumer.release's arrive lands (for a
  /// consumerOpPerRelease kind: the async consumers'; MMA consumers commit
  /// to the multicast mask).
  ArriveTarget commit;
  ArriveTarget release;
  /// producer.tail waits, in the pair leader only, for the last stage in
  /// flight (the MMA producer runs in the leader and stages retire in order).
  bool tailLeaderOnly;
};

/// The row of `kind`; nullptr for a value that names no kind.
const KindTraits *lookupKindTraits(PipelineKind kind);
/// The row of a valid kind.
const KindTraits &getKindTraits(PipelineKind kind);

/// The facts of a `!pipeline.pipeline` type that the plan depends on, as
/// plain values (the C API and the simulator build one without a type).
struct PipelineParams {
  PipelineKind kind;
  int64_t stages = 1;
  /// Absent groups have size 0.
  Agent producerAgent{}, consumerAgent{};
  int64_t producerSize = 0, consumerSize = 0;
  /// (V, M, N, L); all 1 without a cluster layout.
  int64_t v = 1, m = 1, n = 1, l = 1;
  Multicast multicast{};
  int64_t ctaGroup = 1;
  int64_t length = 0;
  int64_t txCount = 0;

  static PipelineParams fromType(PipelineType type);
};

/// The barriers of one pipeline type, resolved from its kind's row.
struct BarrierPlan {
  const KindTraits *traits = nullptr;
  /// 8-byte mbarriers in shared memory: full [0, S), empty [S, 2S); an order
  /// pipeline's S * length barriers all count the producer group.
  int64_t numBarriers = 0;
  /// Barriers initialized with the full / empty count.
  int64_t numFull = 0, numEmpty = 0;
  int64_t clusterSize = 1;
  /// CTAs of the MMA pair (V).
  int64_t ctaPair = 1;
  /// Factor on the group's arrive count: V where both CTAs of a pair arrive
  /// on the leader's barrier (the 2-CTA doubling), else 1.
  int64_t fullScale = 1, emptyScale = 1;
  /// mbarrier.init count of each full / empty barrier; nullopt when it
  /// depends on an unknown block size (threadblock / cluster groups) or the
  /// side has no barrier.
  std::optional<int64_t> fullCount, emptyCount;
  /// CTAs whose loads land in one CTA's stage, itself included (CuTe DSL's
  /// mcast_size): the CTAs that differ from it only along a multicast mode.
  int64_t multicastPeers = 1;
  /// Lanes per warp that signal a release (SignallingLanes: the cluster
  /// size), 0 otherwise.
  int64_t signallingLanes = 0;
  /// The row's targets resolved for this layout: PairLeader is Local
  /// without a pair, ClusterCta0 is Local for one CTA.
  ArmTarget arm = ArmTarget::None;
  ArriveTarget commit = ArriveTarget::None, release = ArriveTarget::None;
  /// Bytes each stage's expect_tx announces (txBytes kinds).
  int64_t txCount = 0;

  /// Where a consumer.release through `side` lands (MMA consumers: the
  /// multicast mask; otherwise `release`).
  ArriveTarget releaseTarget(OpType side) const;
};

/// The plan of a pipeline for CTAs of `blockDim` threads (0: unknown).
BarrierPlan computeBarrierPlan(const PipelineParams &params,
                               int64_t blockDim = 0);
BarrierPlan getBarrierPlan(PipelineType type, int64_t blockDim = 0);

} // namespace mlir::pipeline

#endif // PIPELINE_MLIR_DIALECT_PIPELINE_IR_KINDTRAITS_H
