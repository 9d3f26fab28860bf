//===- DeriveTxCount.cpp - tx_count from the copies of a stage ------------===//
//
// pipeline-derive-tx-count: a TMA pipeline created with tx_count = 0 gets
// the bytes its stages' copies deliver, counted by the functions the
// checker's property 5 uses (TxBytesChecks.cpp), so that the number armed
// and the number checked cannot disagree. Python's `create(tx_count=None)`
// and hand-written IR both rely on it; the lowering pipelines run it first.
//
//===----------------------------------------------------------------------===//

#include "pipeline-mlir/Dialect/Pipeline/Transforms/Passes.h"

#include "ProtocolChecks.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "llvm/ADT/SmallPtrSet.h"

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

/// Whether the stage's bound copies (tma_load / bulk copy of the state) are
/// all of them as far as the derivation knows: the state goes only to
/// pipeline ops and loops. Unlike copiesAreVisible (the checker's property
/// 5, which leaves such stages unchecked), a producer.barrier handle does
/// not hide the copies here: taking the handle next to a tma_load is
/// common (CuTe DSL passes it to cute.copy), and treating it as "no copy
/// bound" made the derivation fail with a false "no tma_load" error. What
/// is done with the handle is looked at by findByteDeliveringUse.
static bool stateStaysInPipelineOps(Value state) {
  return llvm::all_of(state.getUsers(), [](Operation *user) {
    return isa<PipelineDialect>(user->getDialect()) ||
           isa<scf::YieldOp, scf::ForOp>(user);
  });
}

/// Whether `op`, given a stage's full barrier address, may land or expect
/// transaction bytes on it, which the derivation cannot count: copies,
/// expect_tx / complete_tx, calls, inline asm, stores of the address and
/// anything unknown. Plain mbarrier arrives, waits and inits do not (their
/// arrivals are the checker's business, BarrierHandleChecks.cpp).
static bool mayDeliverBytes(Operation *op) {
  StringRef name = op->getName().getStringRef();
  if (name.starts_with("nvvm.mbarrier."))
    return name.contains("expect_tx") || name.contains("complete_tx");
  return true;
}

/// The first op that receives a producer.barrier handle of `state` (through
/// pure address arithmetic and casts) and may deliver bytes to the barrier;
/// null when the handles are unused or only waited or arrived on, so that
/// the bound copies are the stage's bytes.
static Operation *findByteDeliveringUse(Value state) {
  SmallVector<Value> worklist;
  for (Operation *user : state.getUsers())
    if (auto handle = dyn_cast<ProducerBarrierOp>(user))
      worklist.push_back(handle.getResult());
  llvm::SmallPtrSet<Operation *, 8> seen;
  while (!worklist.empty()) {
    Value v = worklist.pop_back_val();
    for (Operation *user : v.getUsers()) {
      if (!seen.insert(user).second)
        continue;
      if (isMemoryEffectFree(user) && user->getNumRegions() == 0) {
        llvm::append_range(worklist, user->getResults());
        continue;
      }
      if (mayDeliverBytes(user))
        return user;
    }
  }
  return nullptr;
}

/// Derives the tx_count of `create` (a TMA-load pipeline with tx_count 0)
/// and sets its type; emits an error and returns failure when it cannot.
static LogicalResult deriveOne(CreateOp create, const TxStages &stages,
                               DominanceInfo &domInfo) {
  Value pipe = create.getResult();
  PipelineType type = getPipelineType(pipe);
  std::optional<Production> first;
  for (auto &[key, acqs] : stages.acquires) {
    if (key.first != pipe || !stateStaysInPipelineOps(key.second))
      continue;
    if (Operation *user = findByteDeliveringUse(key.second)) {
      InFlightDiagnostic diag = user->emitError();
      diag << describe(pipe) << ": " << user->getName()
           << " receives the stage's full barrier from "
              "producer_get_barrier(state) and may deliver bytes to it that "
              "tx_count cannot be derived from (rule: a derived tx_count "
              "counts only the tma_load / bulk_copy of the state): issue the "
              "copy with tma_load(state, ...) or bulk_copy(state, ...), or "
              "give tx_count to create";
      noteCreate(diag, pipe);
      return failure();
    }
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
      if (issuedByManyThreads(*mine)) {
        const CopyBytes &many = *llvm::find_if(
            *mine, [](const CopyBytes &c) { return c.issuers > 1; });
        InFlightDiagnostic diag = many.op->emitError();
        diag << describe(pipe) << ": tx_count is not derived from this copy: "
             << "every lane of " << many.issuingWarps << " issues it ("
             << many.issuers << " copies of " << many.bytes
             << " bytes into the same stage); guard it with elect_one so that "
                "one lane issues it (or give tx_count to create if every "
                "lane's copy is meant)";
        noteCreate(diag, pipe);
        return failure();
      }
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
