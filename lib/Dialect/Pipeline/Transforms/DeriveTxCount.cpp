//===- DeriveTxCount.cpp - tx_count from the copies of a stage ------------===//
//
// pipeline-derive-tx-count: a TMA pipeline created with tx_count = 0 gets
// the bytes its stages' copies deliver, counted by the functions the
// checker's property 5 uses (TxArriveChecks.cpp), so that the number armed
// and the number checked cannot disagree. Python's `create(tx_count=None)`
// and hand-written IR both rely on it; the lowering pipelines run it first.
//
//===----------------------------------------------------------------------===//

#include "pipeline-mlir/Dialect/Pipeline/Transforms/Passes.h"

#include "ProtocolChecks.h"

#include "mlir/IR/BuiltinOps.h"

namespace mlir::pipeline {
#define GEN_PASS_DEF_PIPELINEDERIVETXCOUNT
#include "pipeline-mlir/Dialect/Pipeline/Transforms/Passes.h.inc"
} // namespace mlir::pipeline

using namespace mlir;
using namespace mlir::pipeline;
using namespace mlir::pipeline::protocol;

/// The mbarrier's transaction count is 20 bits (PipelineTypes.cpp).
static constexpr int64_t kMaxTxCount = (1 << 20) - 1;

namespace {
/// The first production that defined a pipeline's tx_count.
struct Production {
  Operation *acquire;
  SmallVector<CopyBytes> copies;
  int64_t bytes;
};
} // namespace

/// Derives the tx_count of `create` (a TMA-load pipeline with tx_count 0)
/// and sets its type; emits an error and returns failure when it cannot.
static LogicalResult deriveOne(CreateOp create, const TxStages &stages,
                               DominanceInfo &domInfo) {
  Value pipe = create.getResult();
  PipelineType type = getPipelineType(pipe);
  std::optional<Production> first;
  for (auto &[key, acqs] : stages.acquires) {
    if (key.first != pipe || !copiesAreVisible(key.second))
      continue;
    SmallVector<Operation *> stageCopies = stages.copies.lookup(key);
    for (Operation *acq : acqs) {
      Operation *culprit = nullptr;
      std::optional<SmallVector<CopyBytes>> mine =
          getAcquireCopies(acq, acqs, stageCopies, domInfo, &culprit);
      if (!mine) {
        InFlightDiagnostic diag = culprit->emitError();
        diag << describe(pipe)
             << ": tx_count cannot be derived from this copy: its bytes, "
                "multicast mask or trip count is only known at run time, or "
                "no producer.acquire of its state comes before it (give "
                "tx_count to create)";
        noteCreate(diag, pipe);
        return failure();
      }
      if (mine->empty())
        continue;
      int64_t extra = 0;
      if (Value extraTx = cast<ProducerAcquireOp>(acq).getExtraTx()) {
        std::optional<int64_t> constant = getConstantInt(extraTx);
        if (!constant) {
          InFlightDiagnostic diag = acq->emitError();
          diag << describe(pipe)
               << ": producer.acquire adds a run-time extra_tx, so the bytes "
                  "to arm cannot be derived from the copies (give tx_count "
                  "to create)";
          noteCreate(diag, pipe);
          return failure();
        }
        extra = *constant;
      }
      int64_t bytes = deliveredBytes(*mine, type) - extra;
      if (!first) {
        first = Production{acq, *mine, bytes};
        continue;
      }
      if (bytes == first->bytes)
        continue;
      InFlightDiagnostic diag = acq->emitError();
      diag << describe(pipe) << ": this production's copies deliver " << bytes
           << " bytes per stage but the first production delivered "
           << first->bytes
           << ", which became the derived tx_count: every production must "
              "deliver the same bytes (give tx_count explicitly if they "
              "differ on purpose)";
      noteCopies(diag, *mine, type);
      diag.attachNote(first->acquire->getLoc())
          << "the first production, " << first->bytes << " bytes";
      noteCreate(diag, pipe);
      return failure();
    }
  }
  if (!first) {
    InFlightDiagnostic diag = create.emitError();
    diag << describe(pipe)
         << " was created without tx_count and no tma_load or bulk copy is "
            "bound to a producer.acquire of it, so its tx_count cannot be "
            "derived (give tx_count to create)";
    return failure();
  }
  if (first->bytes <= 0 || first->bytes > kMaxTxCount) {
    InFlightDiagnostic diag = first->acquire->emitError();
    diag << describe(pipe) << ": the copies of one stage deliver "
         << first->bytes << " bytes"
         << (first->bytes <= 0 ? " after extra_tx is taken out: a derived "
                                 "tx_count must be positive"
                               : ", over the mbarrier limit of 1048575 bytes "
                                 "per phase");
    noteCopies(diag, first->copies, type);
    return failure();
  }
  // Every op that uses the pipeline takes its type from this value.
  pipe.setType(PipelineType::get(
      type.getContext(), type.getKind(), type.getStages(), type.getProducer(),
      type.getConsumer(), first->bytes, type.getCluster(), type.getMulticast(),
      type.getCtaGroup(), type.getLength()));
  return success();
}

namespace {
struct PipelineDeriveTxCountPass
    : public pipeline::impl::PipelineDeriveTxCountBase<
          PipelineDeriveTxCountPass> {
  using Base::Base;

  void runOnOperation() override {
    bool failed = false;
    getOperation()->walk([&](FunctionOpInterface fn) {
      SmallVector<CreateOp> pending;
      fn->walk([&](CreateOp create) {
        PipelineType type = getPipelineType(create.getResult());
        if (type.getTxCount() == 0 && isTmaLoadKind(type.getKind()))
          pending.push_back(create);
      });
      if (pending.empty())
        return;
      DominanceInfo domInfo(fn);
      TxStages stages = collectTxStages(fn);
      for (CreateOp create : pending)
        failed |= deriveOne(create, stages, domInfo).failed();
    });
    if (failed)
      signalPassFailure();
  }
};
} // namespace
