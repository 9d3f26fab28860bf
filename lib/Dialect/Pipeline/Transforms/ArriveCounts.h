//===- ArriveCounts.h - arrive counts against who arrives -------*- C++ -*-===//
//
// Private to lib/Dialect/Pipeline/Transforms. Property 6 is three files:
// the guards around mbarrier.arrive sites (ArriveGuards.cpp), the arrivals
// per phase that the roles signalling a side imply (ImpliedArriveCounts.cpp),
// and the per-pipeline rules with the entry point (ArriveCountChecks.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef PIPELINE_MLIR_LIB_DIALECT_PIPELINE_TRANSFORMS_ARRIVECOUNTS_H
#define PIPELINE_MLIR_LIB_DIALECT_PIPELINE_TRANSFORMS_ARRIVECOUNTS_H

#include "ProtocolChecks.h"

#include "llvm/ADT/DenseSet.h"

namespace mlir::pipeline::protocol {

/// "#pipeline.group<thread, 32>", for messages.
inline std::string groupString(CooperativeGroupAttr group) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << "#pipeline.group<" << stringifyAgent(group.getAgent()) << ", "
     << group.getSize() << ">";
  return s;
}

/// Multicast CTAs whose loads land in each CTA (CuTe DSL's mcast_size).
inline int64_t getMcastSize(PipelineType type) {
  return getBarrierPlan(type).multicastPeers;
}

/// Pipeline sides (pipeline, 0 = producer / 1 = consumer) already reported,
/// so that the implied-count check does not report them twice.
using ReportedSides = llvm::DenseSet<std::pair<Value, unsigned>>;

/// (a) + (c2): guarded or elected mbarrier.arrive sites, per pipeline side
/// (ArriveGuards.cpp). True when it reported an error.
bool checkArriveGuards(FunctionOpInterface fn, const Options &options,
                       ReportedSides &reported);

/// (e): the arrivals per phase that the roles issuing a side's signalling
/// verb make, against the count its group gives the barrier
/// (ImpliedArriveCounts.cpp). True when it reported an error.
bool checkImpliedArriveCounts(FunctionOpInterface fn, const Options &options,
                              const ReportedSides &reported);

} // namespace mlir::pipeline::protocol

#endif // PIPELINE_MLIR_LIB_DIALECT_PIPELINE_TRANSFORMS_ARRIVECOUNTS_H
