//===- CommitBeforeWrite.cpp - stores after producer.commit ---------------===//
//
// Property 7 of pipeline-verify-protocol: a producer whose stores fill a
// stage (PipelineAsync, PipelineAsyncUmma: AsyncThread producers; cp.async
// producers) publishes the stage with producer.commit. A plain store into
// that stage after the commit and before the next producer.acquire races
// with the consumers, which may already read the stage: silent corruption,
// no hang and no error on the GPU.
//
// How a store is tied to a stage: through its address. The stage buffers of
// a ring are addressed as `base + state.index * stage_bytes` (the kernel
// layer's `SmemRing.stage(state.index, ...)`), so the checker follows the
// address operands of a store back through pure ops (getelementptr, arith,
// casts) to the `pipeline.state.index` ops that feed them, and names the
// stage by that state (its root and offset, as the other checks do). A
// store whose address comes from the committed state's index writes the
// committed stage.
//
// The common static form only: the store follows the commit in the same
// block, or in an op nested after it (an scf.if, an inner loop), and no
// producer.acquire of the pipeline comes between them. Not seen: addresses
// that do not come from state.index (an index kept in a register of its
// own, loaded from memory, or passed through loop-carried values or
// function calls), stores in a later iteration of an enclosing loop, and
// writes by ops that declare no memory effect on their address. The
// simulator checks the dynamic form (sim/verbs.py, plain_store).
//
//===----------------------------------------------------------------------===//

#include "ProtocolChecks.h"

#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "llvm/ADT/SmallPtrSet.h"

using namespace mlir;
using namespace mlir::pipeline;
using namespace mlir::pipeline::protocol;

/// Producers whose stage contents are plain stores published by
/// producer.commit (an mbarrier arrive after the stores). TMA producers fill
/// stages with copies whose bytes complete the barrier; MMA producers write
/// tensor memory.
static bool commitPublishesStores(PipelineType type) {
  OpType op = type.getProducerOpType();
  return op == OpType::AsyncThread || op == OpType::AsyncLoad;
}

/// The operands that say where `op` writes: the operand a declared memory
/// write effect names and the operands after it (a memref's indices, as in
/// memref.store / vector.store; llvm.store has its address last). The
/// stored value comes before them, so storing a stage index as data does
/// not count. Pipeline ops are the protocol itself, not stage contents.
static SmallVector<Value> getWrittenAddresses(Operation *op) {
  SmallVector<Value> addresses;
  if (isa<PipelineDialect>(op->getDialect()))
    return addresses;
  auto iface = dyn_cast<MemoryEffectOpInterface>(op);
  if (!iface)
    return addresses;
  SmallVector<MemoryEffects::EffectInstance> effects;
  iface.getEffects(effects);
  for (const MemoryEffects::EffectInstance &effect : effects) {
    if (!isa<MemoryEffects::Write>(effect.getEffect()))
      continue;
    OpOperand *where = effect.getEffectValue<OpOperand *>();
    if (!where)
      continue;
    for (OpOperand &operand :
         op->getOpOperands().drop_front(where->getOperandNumber()))
      addresses.push_back(operand.get());
  }
  return addresses;
}

namespace {
/// A stage a store's address is computed from: the state.index op and the
/// state it reads, as (root, offset).
struct AddressStage {
  StateIndexOp index;
  std::pair<Value, int64_t> stage;
};
} // namespace

/// The state.index ops that the address computation of `addr` reads,
/// following the operands of region-free, non-pipeline ops (pure address
/// arithmetic). Block arguments stop the walk: a loop-carried address is
/// not followed.
static SmallVector<AddressStage> getAddressStages(Value addr) {
  SmallVector<AddressStage> found;
  SmallVector<Value> worklist{addr};
  llvm::SmallPtrSet<Operation *, 16> visited;
  while (!worklist.empty()) {
    Operation *def = worklist.pop_back_val().getDefiningOp();
    if (!def || !visited.insert(def).second)
      continue;
    if (auto index = dyn_cast<StateIndexOp>(def)) {
      found.push_back({index, getStateRoot(index.getState())});
      continue;
    }
    if (def->getNumRegions() != 0 || isa<PipelineDialect>(def->getDialect()))
      continue;
    // Loads are not address arithmetic: an address read from memory is not
    // tied to a stage by its computation.
    if (auto iface = dyn_cast<MemoryEffectOpInterface>(def))
      if (!iface.hasNoEffect())
        continue;
    llvm::append_range(worklist, def->getOperands());
  }
  return found;
}

/// True when `op` is, or contains, a producer.acquire / try_acquire of
/// `pipe`: the stage may be owned again from there on.
static bool reacquires(Operation *op, Value pipe) {
  bool found = false;
  op->walk([&](Operation *inner) {
    std::optional<VerbRef> verb = getVerb(inner);
    if (verb && verb->pipeline == pipe &&
        (verb->verb == Verb::Acquire || verb->verb == Verb::TryAcquire))
      found = true;
  });
  return found;
}

/// True when an op after `from` in its block commits `stage` of a pipeline
/// other than `pipe`: the store then fills that pipeline's stage (one state
/// shared by two pipelines), which is still open.
static bool laterCommitOfOther(Operation *from, Value pipe,
                               std::pair<Value, int64_t> stage) {
  for (Operation *op = from; op; op = op->getNextNode()) {
    bool found = false;
    op->walk([&](ProducerCommitOp commit) {
      if (commit.getPipeline() != pipe &&
          getStateRoot(commit.getState()) == stage)
        found = true;
    });
    if (found)
      return true;
  }
  return false;
}

LogicalResult protocol::checkCommitBeforeWrite(FunctionOpInterface fn) {
  bool failed = false;
  fn->walk([&](ProducerCommitOp commit) {
    Value pipe = commit.getPipeline();
    if (!commitPublishesStores(getPipelineType(pipe)))
      return;
    std::pair<Value, int64_t> committed = getStateRoot(commit.getState());
    for (Operation *op = commit->getNextNode(); op; op = op->getNextNode()) {
      if (reacquires(op, pipe))
        break;
      op->walk([&](Operation *store) {
        for (Value addr : getWrittenAddresses(store)) {
          for (const AddressStage &as : getAddressStages(addr)) {
            if (as.stage != committed || laterCommitOfOther(op, pipe, as.stage))
              continue;
            InFlightDiagnostic diag = store->emitError();
            diag << describe(pipe) << ": " << store->getName()
                 << " writes the stage that producer.commit already "
                    "published (its address comes from the committed "
                    "state's index), before the next producer.acquire: the "
                    "consumers may read the stage before this write lands "
                    "(silent corruption); move the write before "
                    "producer.commit";
            diag.attachNote(commit->getLoc()) << "the stage is committed here";
            diag.attachNote(as.index->getLoc())
                << "the write's address is computed from this stage index";
            noteCreate(diag, pipe);
            failed = true;
            return;
          }
        }
      });
    }
  });
  return failure(failed);
}
