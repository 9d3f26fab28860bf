//===- PipelineTypes.cpp - type verifiers and queries -----------*- C++ -*-===//
//
// The pipeline type is where a malformed pipeline is caught first: every
// rule about which static facts fit together lives in PipelineType::verify.
//
//===----------------------------------------------------------------------===//

#include "pipeline-mlir/Dialect/Pipeline/IR/PipelineDialect.h"

#include "mlir/IR/DialectImplementation.h"

using namespace mlir;
using namespace mlir::pipeline;

//===----------------------------------------------------------------------===//
// PipelineType queries (the kind's row of KindTraits.cpp)
//===----------------------------------------------------------------------===//

int64_t PipelineType::getClusterSize() const {
  return getCluster() ? getCluster().getSize() : 1;
}

bool PipelineType::hasTxCount() const { return getKindTraits(getKind()).txBytes; }

bool PipelineType::needsTcgen05() const {
  return getKindTraits(getKind()).tcgen05;
}

bool PipelineType::hasBarriers() const {
  return getKindTraits(getKind()).hasBarriers;
}

int64_t PipelineType::getNumBarriers() const {
  return getBarrierPlan(*this).numBarriers;
}

OpType PipelineType::getProducerOpType() const {
  return getKindTraits(getKind()).producerOp;
}

OpType PipelineType::getConsumerOpType() const {
  return getKindTraits(getKind()).consumerOp;
}

//===----------------------------------------------------------------------===//
// PipelineType verification
//===----------------------------------------------------------------------===//

/// mbarrier tx-count is a 20-bit quantity (PTX ISA, mbarrier contents).
static constexpr int64_t kMaxTxCount = (1 << 20) - 1;

/// An arrive that comes from one elected thread (TMA expect_tx, CLC,
/// tcgen05.commit) counts once, so that side's group must be counted in
/// threads.
static bool arrivesFromElectedThread(OpType op) {
  return op == OpType::TmaLoad || op == OpType::ClcLoad ||
         op == OpType::TCGen05Mma;
}

namespace {
/// The parameters of a type being verified, and how to report on them.
struct TypeChecker {
  function_ref<InFlightDiagnostic()> emitError;
  const KindTraits &traits;
  PipelineKind kind;
  int64_t stages;
  CooperativeGroupAttr producer, consumer;
  int64_t txCount;
  ClusterLayoutAttr cluster;
  Multicast multicast;
  int64_t ctaGroup, length;

  InFlightDiagnostic fail() const {
    return emitError() << "!pipeline.pipeline<" << stringifyPipelineKind(kind)
                       << "> (" << traits.cuteClass << "): ";
  }

  LogicalResult stageCount() const;
  LogicalResult groups() const;
  LogicalResult transactionBytes() const;
  LogicalResult clusterAndPairs() const;
  LogicalResult orderLength() const;
};
} // namespace

LogicalResult TypeChecker::stageCount() const {
  if (stages <= 0)
    return fail() << "stages must be positive, got " << stages;
  if (stages > kMaxStages)
    return fail() << "stages = " << stages << " needs " << 2 * stages
                  << " mbarriers of " << kMbarrierBytes
                  << " bytes, more than the " << kMaxSharedMemoryBytes
                  << " bytes of shared memory of a CTA (at most " << kMaxStages
                  << " stages)";
  return success();
}

LogicalResult TypeChecker::groups() const {
  if (traits.hasProducerGroup && !producer)
    return fail() << "needs a producer group (producer = #pipeline.group<...>)";
  if (traits.hasConsumerGroup && !consumer)
    return fail() << "needs a consumer group (consumer = #pipeline.group<...>)";
  if (!traits.hasProducerGroup && (producer || consumer))
    return fail() << "synchronizes through bulk groups and takes no "
                     "producer or consumer group";
  if (!traits.hasConsumerGroup && consumer)
    return fail() << "has ordered groups, not a consumer group";

  // A side whose mechanism arrives once from an elected thread is counted
  // in threads.
  if (producer && arrivesFromElectedThread(traits.producerOp) &&
      producer.getAgent() != Agent::Thread)
    return fail() << "the producer side arrives through "
                  << stringifyOpType(traits.producerOp)
                  << " from one elected thread, so the producer agent must be "
                     "'thread', got '"
                  << stringifyAgent(producer.getAgent()) << "'";
  if (consumer && arrivesFromElectedThread(traits.consumerOp) &&
      consumer.getAgent() != Agent::Thread)
    return fail() << "the consumer side arrives through "
                  << stringifyOpType(traits.consumerOp)
                  << " from one elected thread, so the consumer agent must be "
                     "'thread', got '"
                  << stringifyAgent(consumer.getAgent()) << "'";
  if (traits.producerOp == OpType::AsyncLoad && producer &&
      producer.getAgent() == Agent::ThreadBlockCluster)
    return fail() << "cp.async arrives only on the issuing CTA's barrier, so "
                     "the producer agent cannot be 'cluster'";
  return success();
}

LogicalResult TypeChecker::transactionBytes() const {
  // tx_count = 0 (left out) on a kind whose stages are filled by copies
  // means "the bytes of one stage's copies": pipeline-derive-tx-count sets it.
  if (traits.txBytes && (txCount < 0 || (txCount == 0 && !traits.stageCopies)))
    return fail() << "TMA/CLC producers complete the full barrier by "
                     "transaction bytes: tx_count must be positive"
                  << (traits.stageCopies ? " (or left out, to be derived from "
                                           "the copies)"
                                         : "")
                  << ", got " << txCount;
  if (!traits.txBytes && txCount != 0)
    return fail() << "tx_count is only meaningful for TMA/CLC kinds, got "
                  << txCount;
  if (txCount > kMaxTxCount)
    return fail() << "tx_count " << txCount
                  << " exceeds the mbarrier limit of " << kMaxTxCount
                  << " bytes per phase";
  return success();
}

LogicalResult TypeChecker::clusterAndPairs() const {
  int64_t clusterSize = cluster ? cluster.getSize() : 1;
  if (multicast != Multicast::None) {
    if (!traits.multicast)
      return fail() << "does not multicast; remove multicast = "
                    << stringifyMulticast(multicast);
    if (clusterSize <= 1)
      return fail() << "multicast = " << stringifyMulticast(multicast)
                    << " needs a cluster of more than one CTA";
    bool alongM = multicast == Multicast::M || multicast == Multicast::MN;
    bool alongN = multicast == Multicast::N || multicast == Multicast::MN;
    if ((alongM && cluster.getM() == 1 && !alongN) ||
        (alongN && cluster.getN() == 1 && !alongM) ||
        (alongM && alongN && cluster.getM() == 1 && cluster.getN() == 1))
      return fail() << "multicast = " << stringifyMulticast(multicast)
                    << " runs along a cluster mode of extent 1";
  }
  if (ctaGroup != 1 && ctaGroup != 2)
    return fail() << "cta_group must be 1 or 2, got " << ctaGroup;
  if (ctaGroup == 2 && !traits.tcgen05)
    return fail() << "cta_group = 2 is a tcgen05 (UMMA) feature";
  if (ctaGroup == 2 && (!cluster || cluster.getV() != 2))
    return fail() << "cta_group = 2 (2-CTA MMA) needs a cluster layout with "
                     "V = 2";
  if (cluster && cluster.getV() == 2 && ctaGroup != 2)
    return fail() << "a cluster layout with V = 2 is a 2-CTA MMA pair and "
                     "needs cta_group = 2";
  return success();
}

LogicalResult TypeChecker::orderLength() const {
  // Only PipelineOrder has barriers without a consumer side: its groups.
  bool ordered = traits.hasBarriers && !traits.hasConsumerGroup;
  if (ordered && length <= 0)
    return fail() << "length (number of ordered groups) must be positive, got "
                  << length;
  if (!ordered && length != 0)
    return fail() << "length is only meaningful for order pipelines";
  // An order pipeline owns stages * length barriers (compare by division,
  // the product may overflow).
  if (ordered && length > kMaxSharedMemoryBytes / kMbarrierBytes / stages)
    return fail() << "stages = " << stages << " x length = " << length
                  << " mbarriers of " << kMbarrierBytes
                  << " bytes do not fit in the " << kMaxSharedMemoryBytes
                  << " bytes of shared memory of a CTA";
  return success();
}

LogicalResult PipelineType::verify(function_ref<InFlightDiagnostic()> emitError,
                                   PipelineKind kind, int64_t stages,
                                   CooperativeGroupAttr producer,
                                   CooperativeGroupAttr consumer,
                                   int64_t txCount, ClusterLayoutAttr cluster,
                                   Multicast multicast, int64_t ctaGroup,
                                   int64_t length) {
  // Enums arrive as integers through the C API and Python: reject values
  // that name no case before anything prints or switches on them.
  const KindTraits *traits = lookupKindTraits(kind);
  if (!traits || !symbolizePipelineKind(static_cast<uint32_t>(kind)))
    return emitError() << "!pipeline.pipeline: kind " << static_cast<int32_t>(kind)
                       << " is not a pipeline kind (0.."
                       << getMaxEnumValForPipelineKind() << ")";
  if (!symbolizeMulticast(static_cast<uint32_t>(multicast)))
    return emitError() << "!pipeline.pipeline: multicast "
                       << static_cast<int32_t>(multicast)
                       << " is not a multicast mode (0.."
                       << getMaxEnumValForMulticast() << ")";
  TypeChecker check{emitError, *traits, kind,    stages,    producer, consumer,
                    txCount,   cluster, multicast, ctaGroup, length};
  return success(succeeded(check.stageCount()) && succeeded(check.groups()) &&
                 succeeded(check.transactionBytes()) &&
                 succeeded(check.clusterAndPairs()) &&
                 succeeded(check.orderLength()));
}

//===----------------------------------------------------------------------===//
// StateType
//===----------------------------------------------------------------------===//

LogicalResult StateType::verify(function_ref<InFlightDiagnostic()> emitError,
                                int64_t stages, Role role, bool simple) {
  if (!symbolizeRole(static_cast<uint32_t>(role)))
    return emitError() << "!pipeline.state: role " << static_cast<int32_t>(role)
                       << " is not a role (0.." << getMaxEnumValForRole()
                       << ")";
  if (stages <= 0)
    return emitError() << "!pipeline.state: stages must be positive, got "
                       << stages;
  if (stages > kMaxStages)
    return emitError() << "!pipeline.state: stages = " << stages
                       << " exceeds the " << kMaxStages
                       << " stages whose barriers fit in shared memory";
  return success();
}

// !pipeline.state<4, producer> or !pipeline.state<4, consumer, simple>
Type StateType::parse(AsmParser &parser) {
  int64_t stages = 0;
  if (parser.parseLess() || parser.parseInteger(stages) || parser.parseComma())
    return {};
  StringRef roleName;
  SMLoc roleLoc = parser.getCurrentLocation();
  if (parser.parseKeyword(&roleName))
    return {};
  std::optional<Role> role = symbolizeRole(roleName);
  if (!role) {
    parser.emitError(roleLoc, "expected a role: producer, consumer or "
                              "producer_consumer");
    return {};
  }
  bool simple = false;
  if (succeeded(parser.parseOptionalComma())) {
    if (parser.parseKeyword("simple"))
      return {};
    simple = true;
  }
  if (parser.parseGreater())
    return {};
  return getChecked([&] { return parser.emitError(parser.getNameLoc()); },
                    parser.getContext(), stages, *role, simple);
}

void StateType::print(AsmPrinter &printer) const {
  printer << "<" << getStages() << ", " << stringifyRole(getRole());
  if (getSimple())
    printer << ", simple";
  printer << ">";
}
