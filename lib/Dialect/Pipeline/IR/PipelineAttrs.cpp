//===- PipelineAttrs.cpp - attribute verifiers ------------------*- C++ -*-===//

#include "pipeline-mlir/Dialect/Pipeline/IR/PipelineDialect.h"

using namespace mlir;
using namespace mlir::pipeline;

LogicalResult
CooperativeGroupAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                             Agent agent, int64_t size) {
  if (!symbolizeAgent(static_cast<uint32_t>(agent)))
    return emitError() << "#pipeline.group: agent "
                       << static_cast<int32_t>(agent)
                       << " is not an agent (0.." << getMaxEnumValForAgent()
                       << ")";
  if (size <= 0)
    return emitError() << "#pipeline.group: size must be positive, got "
                       << size;
  // The group's arrivals must fit in an mbarrier's 20-bit arrival count
  // (a warp arrives 32 times; block and cluster sizes multiply further at
  // run time, the checker compares those against the launch).
  int64_t perUnit = agent == Agent::Warp ? 32 : 1;
  if (size > kMaxArriveCount / perUnit)
    return emitError() << "#pipeline.group<" << stringifyAgent(agent)
                       << ", " << size << "> implies more than "
                       << kMaxArriveCount
                       << " arrivals, the mbarrier arrival-count limit";
  return success();
}

/// Hardware limit: a cluster holds at most 16 CTAs (portable limit is 8;
/// 16 needs cudaFuncAttributeNonPortableClusterSizeAllowed), and tcgen05
/// multicast masks are 16 bits wide.
static constexpr int64_t kMaxClusterSize = 16;

LogicalResult
ClusterLayoutAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                          int64_t v, int64_t m, int64_t n, int64_t l) {
  if (v <= 0 || m <= 0 || n <= 0 || l <= 0)
    return emitError() << "#pipeline.cluster: every mode of (V, M, N, L) "
                          "must be positive, got ("
                       << v << ", " << m << ", " << n << ", " << l << ")";
  if (v > 2)
    return emitError() << "#pipeline.cluster: V is the CTA-pair mode of "
                          "2-CTA MMA and must be 1 or 2, got "
                       << v;
  if (v * m * n * l > kMaxClusterSize)
    return emitError() << "#pipeline.cluster: a cluster holds at most "
                       << kMaxClusterSize << " CTAs, this layout has "
                       << v * m * n * l;
  return success();
}
