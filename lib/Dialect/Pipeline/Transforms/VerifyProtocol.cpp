//===- VerifyProtocol.cpp - static pipeline protocol checks -----*- C++ -*-===//
//
// The pass runs every check on every function (func.func, gpu.func, ...) of
// the module and fails if any of them reported an error. The checks are
// declared in ProtocolChecks.h (and SmemHandoffChecks.h), one family per
// file of this directory; docs/VerifyProtocol.md names each check's file.
//
//===----------------------------------------------------------------------===//

#include "pipeline-mlir/Dialect/Pipeline/Transforms/Passes.h"

#include "ProtocolChecks.h"
#include "SmemHandoffChecks.h"

#include "mlir/IR/BuiltinOps.h"

namespace mlir::pipeline {
#define GEN_PASS_DEF_PIPELINEVERIFYPROTOCOL
#include "pipeline-mlir/Dialect/Pipeline/Transforms/Passes.h.inc"
} // namespace mlir::pipeline

using namespace mlir;
using namespace mlir::pipeline;

namespace {
struct PipelineVerifyProtocolPass
    : public pipeline::impl::PipelineVerifyProtocolBase<
          PipelineVerifyProtocolPass> {
  using Base::Base;

  void runOnOperation() override {
    protocol::Options options;
    options.blockDim = blockDim;
    options.singleCtaTail = singleCtaTail;
    options.stageBalanceRemarks = stageBalanceRemarks;
    options.registerFile = registerFile;

    bool failed = false;
    getOperation()->walk([&](FunctionOpInterface fn) {
      // The register budget concerns every kernel that resizes its
      // warpgroups, whether it has pipelines or not.
      failed |= protocol::checkRegisterBudget(fn, options).failed();
      // Functions without pipeline ops are the common case: skip them early.
      bool usesPipelines = false;
      fn->walk([&](Operation *op) {
        if (isa<PipelineDialect>(op->getDialect()))
          usesPipelines = true;
      });
      if (!usesPipelines)
        return;
      DominanceInfo domInfo(fn);
      // Run all checks so one compile reports every problem.
      failed |= protocol::checkInitialPhases(fn).failed();
      failed |= protocol::checkStatePhases(fn).failed();
      bool unbalanced = protocol::checkBalance(fn).failed();
      unbalanced |= protocol::checkStateThreading(fn, domInfo).failed();
      unbalanced |= protocol::checkPeriodicBranches(fn).failed();
      failed |= unbalanced;
      failed |= protocol::checkProducerTail(fn, options).failed();
      failed |= protocol::checkTxBytes(fn, domInfo).failed();
      failed |= protocol::checkArriveCounts(fn, options).failed();
      failed |= protocol::checkCommitBeforeWrite(fn).failed();
      failed |= protocol::checkReleaseBeforeRead(fn).failed();
      failed |= protocol::checkAsyncReads(fn, options).failed();
      failed |= protocol::checkNamedBarriers(fn, options).failed();
      failed |= protocol::checkNamedBarrierBalance(fn, options).failed();
      failed |= protocol::checkNamedBarrierBranchVerbs(fn).failed();
      failed |= protocol::checkArriveOnlyRoles(fn, options).failed();
      failed |= protocol::checkUniformTrips(fn, options).failed();
      failed |= protocol::checkBarrierStorage(fn).failed();
      failed |= protocol::checkTmaStoreBuffers(fn, options).failed();
      failed |= protocol::checkSmemHandoff(fn, options).failed();
      failed |= protocol::checkFences(fn, options).failed();
      failed |= protocol::checkBarrierHandles(fn).failed();
      failed |= protocol::checkDeferredInit(fn, domInfo).failed();
      failed |= protocol::checkInitSyncPairs(fn).failed();
      failed |= protocol::checkVerbOrder(fn).failed();
      failed |= protocol::checkRingBuffers(fn).failed();
      failed |= protocol::checkRingBufferAccess(fn).failed();
      // Whole-kernel counts mean something once each loop body and role is
      // balanced and its states thread (checks 1 and 2): comparing them
      // before would report the same bug twice.
      if (!unbalanced)
        failed |= protocol::checkStageBalance(fn, options).failed();
      if (!unbalanced)
        failed |= protocol::checkHeldStages(fn).failed();
      // A copy whose state check 2 already found advanced past its acquire
      // is also outside any acquire of its own state: report it once.
      if (!unbalanced)
        failed |= protocol::checkCopiesInsideAcquire(fn).failed();
    });
    if (failed)
      signalPassFailure();
    markAllAnalysesPreserved();
  }
};
} // namespace
