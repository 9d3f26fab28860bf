//===- ElectOnce.h - one elect.sync per converged warp-role region -*- C++ -*-//
//
// Internal to lib/Conversion/PipelineToNVVM; see ElectOnce.cpp for the
// soundness argument.
//
//===----------------------------------------------------------------------===//

#ifndef LIB_CONVERSION_PIPELINETONVVM_ELECTONCE_H
#define LIB_CONVERSION_PIPELINETONVVM_ELECTONCE_H

#include "LoweringUtils.h"

#include "llvm/ADT/DenseMap.h"

namespace mlir {
namespace pipeline {

struct ElectHoisting {
  /// Verb (before conversion) -> the block at whose start its lane is
  /// elected: the region of its converged warp-role branch.
  llvm::DenseMap<Operation *, Block *> electionBlock;
  /// The elect.sync created at a block's start, made on first use.
  llvm::DenseMap<Block *, Value> elected;
};

/// Fills `hoisting.electionBlock` for the verbs of `module` (pipeline IR).
void analyzeElectHoisting(ModuleOp module, ElectHoisting &hoisting);

/// The i1 "this is the elected lane" for `verb`: the region's shared
/// elect.sync when the verb's region was proven converged, else a fresh
/// elect.sync at the insertion point.
Value electedLane(OpBuilder &b, Location loc, Operation *verb,
                  const PipelineLoweringOptions &options);

} // namespace pipeline
} // namespace mlir

#endif // LIB_CONVERSION_PIPELINETONVVM_ELECTONCE_H
