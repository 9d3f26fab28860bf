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
// PipelineType queries
//===----------------------------------------------------------------------===//

int64_t PipelineType::getClusterSize() const {
  return getCluster() ? getCluster().getSize() : 1;
}

bool PipelineType::hasTxCount() const {
  switch (getKind()) {
  case PipelineKind::TmaAsync:
  case PipelineKind::TmaUmma:
  case PipelineKind::TmaMultiConsumersAsync:
  case PipelineKind::ClcFetchAsync:
    return true;
  default:
    return false;
  }
}

bool PipelineType::needsTcgen05() const {
  switch (getKind()) {
  case PipelineKind::TmaUmma:
  case PipelineKind::AsyncUmma:
  case PipelineKind::UmmaAsync:
  case PipelineKind::TmaMultiConsumersAsync:
    return true;
  default:
    return false;
  }
}

bool PipelineType::hasBarriers() const {
  return getKind() != PipelineKind::TmaStore;
}

int64_t PipelineType::getNumBarriers() const {
  if (!hasBarriers())
    return 0;
  if (getKind() == PipelineKind::Order)
    return getStages() * getLength();
  return 2 * getStages();
}

OpType PipelineType::getProducerOpType() const {
  switch (getKind()) {
  case PipelineKind::Async:
  case PipelineKind::Order:
  case PipelineKind::AsyncUmma:
    return OpType::AsyncThread;
  case PipelineKind::CpAsync:
    return OpType::AsyncLoad;
  case PipelineKind::TmaAsync:
  case PipelineKind::TmaUmma:
  case PipelineKind::TmaMultiConsumersAsync:
    return OpType::TmaLoad;
  case PipelineKind::TmaStore:
    return OpType::TmaStore;
  case PipelineKind::UmmaAsync:
    return OpType::TCGen05Mma;
  case PipelineKind::ClcFetchAsync:
    return OpType::ClcLoad;
  }
  return OpType::AsyncThread;
}

OpType PipelineType::getConsumerOpType() const {
  switch (getKind()) {
  case PipelineKind::TmaUmma:
  case PipelineKind::AsyncUmma:
    return OpType::TCGen05Mma;
  case PipelineKind::TmaStore:
    return OpType::TmaStore;
  default:
    return OpType::AsyncThread;
  }
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

static bool allowsMulticast(PipelineKind kind) {
  switch (kind) {
  case PipelineKind::TmaAsync:
  case PipelineKind::TmaUmma:
  case PipelineKind::TmaMultiConsumersAsync:
  case PipelineKind::AsyncUmma:
  case PipelineKind::UmmaAsync:
    return true;
  default:
    return false;
  }
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
  if (!symbolizePipelineKind(static_cast<uint32_t>(kind)))
    return emitError() << "!pipeline.pipeline: kind " << static_cast<int32_t>(kind)
                       << " is not a pipeline kind (0.."
                       << getMaxEnumValForPipelineKind() << ")";
  if (!symbolizeMulticast(static_cast<uint32_t>(multicast)))
    return emitError() << "!pipeline.pipeline: multicast "
                       << static_cast<int32_t>(multicast)
                       << " is not a multicast mode (0.."
                       << getMaxEnumValForMulticast() << ")";

  StringRef cls = getCuteClassName(kind);
  auto fail = [&]() {
    return emitError() << "!pipeline.pipeline<" << stringifyPipelineKind(kind)
                       << "> (" << cls << "): ";
  };

  if (stages <= 0)
    return fail() << "stages must be positive, got " << stages;
  if (stages > kMaxStages)
    return fail() << "stages = " << stages << " needs " << 2 * stages
                  << " mbarriers of " << kMbarrierBytes
                  << " bytes, more than the " << kMaxSharedMemoryBytes
                  << " bytes of shared memory of a CTA (at most " << kMaxStages
                  << " stages)";

  // Cooperative groups.
  bool hasConsumerSide =
      kind != PipelineKind::TmaStore && kind != PipelineKind::Order;
  if (kind != PipelineKind::TmaStore && !producer)
    return fail() << "needs a producer group (producer = #pipeline.group<...>)";
  if (hasConsumerSide && !consumer)
    return fail() << "needs a consumer group (consumer = #pipeline.group<...>)";
  if (kind == PipelineKind::TmaStore && (producer || consumer))
    return fail() << "synchronizes through bulk groups and takes no "
                     "producer or consumer group";
  if (kind == PipelineKind::Order && consumer)
    return fail() << "has ordered groups, not a consumer group";

  // Build a throwaway type-less view of the op types for the agent rules.
  auto opTypeFor = [&](bool producerSide) -> OpType {
    switch (kind) {
    case PipelineKind::CpAsync:
      return producerSide ? OpType::AsyncLoad : OpType::AsyncThread;
    case PipelineKind::TmaAsync:
    case PipelineKind::TmaMultiConsumersAsync:
      return producerSide ? OpType::TmaLoad : OpType::AsyncThread;
    case PipelineKind::TmaUmma:
      return producerSide ? OpType::TmaLoad : OpType::TCGen05Mma;
    case PipelineKind::AsyncUmma:
      return producerSide ? OpType::AsyncThread : OpType::TCGen05Mma;
    case PipelineKind::UmmaAsync:
      return producerSide ? OpType::TCGen05Mma : OpType::AsyncThread;
    case PipelineKind::ClcFetchAsync:
      return producerSide ? OpType::ClcLoad : OpType::AsyncThread;
    default:
      return OpType::AsyncThread;
    }
  };
  if (producer && arrivesFromElectedThread(opTypeFor(true)) &&
      producer.getAgent() != Agent::Thread)
    return fail() << "the producer side arrives through "
                  << stringifyOpType(opTypeFor(true))
                  << " from one elected thread, so the producer agent must be "
                     "'thread', got '"
                  << stringifyAgent(producer.getAgent()) << "'";
  if (consumer && arrivesFromElectedThread(opTypeFor(false)) &&
      consumer.getAgent() != Agent::Thread)
    return fail() << "the consumer side arrives through "
                  << stringifyOpType(opTypeFor(false))
                  << " from one elected thread, so the consumer agent must be "
                     "'thread', got '"
                  << stringifyAgent(consumer.getAgent()) << "'";
  if (kind == PipelineKind::CpAsync && producer &&
      producer.getAgent() == Agent::ThreadBlockCluster)
    return fail() << "cp.async arrives only on the issuing CTA's barrier, so "
                     "the producer agent cannot be 'cluster'";

  // Transaction bytes.
  bool txKind = kind == PipelineKind::TmaAsync ||
                kind == PipelineKind::TmaUmma ||
                kind == PipelineKind::TmaMultiConsumersAsync ||
                kind == PipelineKind::ClcFetchAsync;
  if (txKind && txCount <= 0)
    return fail() << "TMA/CLC producers complete the full barrier by "
                     "transaction bytes: tx_count must be positive, got "
                  << txCount;
  if (!txKind && txCount != 0)
    return fail() << "tx_count is only meaningful for TMA/CLC kinds, got "
                  << txCount;
  if (txCount > kMaxTxCount)
    return fail() << "tx_count " << txCount
                  << " exceeds the mbarrier limit of " << kMaxTxCount
                  << " bytes per phase";

  // Clusters, multicast and CTA pairs.
  int64_t clusterSize = cluster ? cluster.getSize() : 1;
  bool tcgen05 = kind == PipelineKind::TmaUmma ||
                 kind == PipelineKind::AsyncUmma ||
                 kind == PipelineKind::UmmaAsync ||
                 kind == PipelineKind::TmaMultiConsumersAsync;
  if (multicast != Multicast::None) {
    if (!allowsMulticast(kind))
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
  if (ctaGroup == 2 && !tcgen05)
    return fail() << "cta_group = 2 is a tcgen05 (UMMA) feature";
  if (ctaGroup == 2 && (!cluster || cluster.getV() != 2))
    return fail() << "cta_group = 2 (2-CTA MMA) needs a cluster layout with "
                     "V = 2";
  if (cluster && cluster.getV() == 2 && ctaGroup != 2)
    return fail() << "a cluster layout with V = 2 is a 2-CTA MMA pair and "
                     "needs cta_group = 2";

  // PipelineOrder.
  if (kind == PipelineKind::Order && length <= 0)
    return fail() << "length (number of ordered groups) must be positive, got "
                  << length;
  if (kind != PipelineKind::Order && length != 0)
    return fail() << "length is only meaningful for order pipelines";
  // An order pipeline owns stages * length barriers (compare by division,
  // the product may overflow).
  if (kind == PipelineKind::Order &&
      length > kMaxSharedMemoryBytes / kMbarrierBytes / stages)
    return fail() << "stages = " << stages << " x length = " << length
                  << " mbarriers of " << kMbarrierBytes
                  << " bytes do not fit in the " << kMaxSharedMemoryBytes
                  << " bytes of shared memory of a CTA";
  return success();
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
