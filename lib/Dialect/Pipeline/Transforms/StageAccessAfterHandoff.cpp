//===- StageAccessAfterHandoff.cpp - stage accesses after the hand-off -----===//
//
// Property 7 of pipeline-verify-protocol: a stage's buffer belongs to one
// side at a time, and a plain access after the verb that hands it to the
// other side races with that side.
//
// - Commit before write. A producer whose stores fill a stage
//   (PipelineAsync, PipelineAsyncUmma: AsyncThread producers; cp.async
//   producers) publishes the stage with producer.commit. A plain store into
//   that stage after the commit and before the next producer.acquire races
//   with the consumers, which may already read the stage.
// - Release before read. A consumer hands a stage back with
//   consumer.release; the producer may refill it from then on (a TMA copy,
//   or stores). A plain load from that stage after the release and before
//   the next consumer.wait reads whatever the producer is writing: the
//   load moved below the release while tidying a loop, or LSE read from
//   the stage of the Q it came with after that stage was released.
//
// Either way: silent corruption, no hang and no error on the GPU.
//
// How an access is tied to a stage: through its address. The stage buffers
// of a ring are addressed as `base + state.index * stage_bytes` (the kernel
// layer's `SmemRing.stage(state.index, ...)`), so the checker follows the
// address operands of a store or load back through pure ops
// (getelementptr, arith, casts) to the `pipeline.state.index` ops that feed
// them, and names the stage by that state (its root and offset, as the
// other checks do). An access whose address comes from the handed-off
// state's index touches the handed-off stage.
//
// The common static form only: the access follows the hand-off in the same
// block, or in an op nested after it (an scf.if, an inner loop), or after
// an scf.if around the hand-off (a release under a lane guard, the other
// lanes reading after the guard: tile-ai/tilelang#2410), and no re-taking
// verb of the pipeline (producer.acquire after a commit, consumer.wait after
// a release) comes between them. Not seen: addresses
// that do not come from state.index (an index kept in a register of its
// own, loaded from memory, or passed through loop-carried values or
// function calls), accesses in a later iteration of an enclosing loop, and
// accesses by ops that declare no memory effect on their address (wgmma
// reads its operands through descriptors: property 8). The simulator checks
// the dynamic forms (commit before write, read after release).
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

/// The operands that say where `op` writes (``EffectT`` = Write) or reads
/// (Read): the operand a declared memory effect of that kind names and the
/// operands after it (a memref's indices, as in memref.store / vector.store;
/// llvm.store has its address last). A stored value comes before them, so
/// storing a stage index as data does not count. Pipeline ops are the
/// protocol itself, not stage contents.
template <typename EffectT>
static SmallVector<Value> getAccessedAddresses(Operation *op) {
  SmallVector<Value> addresses;
  if (isa<PipelineDialect>(op->getDialect()))
    return addresses;
  auto iface = dyn_cast<MemoryEffectOpInterface>(op);
  if (!iface)
    return addresses;
  SmallVector<MemoryEffects::EffectInstance> effects;
  iface.getEffects(effects);
  for (const MemoryEffects::EffectInstance &effect : effects) {
    if (!isa<EffectT>(effect.getEffect()))
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

/// True when `op` is, or contains, one of `verbs` of `pipe`: the stage may
/// be owned again from there on (producer.acquire / try_acquire after a
/// commit, consumer.wait / try_wait after a release).
static bool retakes(Operation *op, Value pipe, ArrayRef<Verb> verbs) {
  bool found = false;
  op->walk([&](Operation *inner) {
    std::optional<VerbRef> verb = getVerb(inner);
    if (verb && verb->pipeline == pipe && llvm::is_contained(verbs, verb->verb))
      found = true;
  });
  return found;
}

/// The ops after `op` in program order up to the end of the loop body or
/// function around it: those after it in its block, then, for each scf.if
/// around it (a lane guard such as elect_one or `lane == 0`, a condition),
/// those after that scf.if in its block. A hand-off under a guard is
/// followed by the guarded lanes and by the others once the branch joins.
static SmallVector<Operation *> getFollowingOps(Operation *op) {
  SmallVector<Operation *> ops;
  for (Operation *at = op; at;) {
    for (Operation *next = at->getNextNode(); next; next = next->getNextNode())
      ops.push_back(next);
    Operation *parent = at->getParentOp();
    if (!parent || !isa<scf::IfOp>(parent))
      break;
    at = parent;
  }
  return ops;
}

/// True when an op after `from` in its block hands off (``HandOffOp``:
/// producer.commit or consumer.release) `stage` of a pipeline other than
/// `pipe`: the access then touches that pipeline's stage (one state shared
/// by two pipelines), which is still open.
template <typename HandOffOp>
static bool laterHandOffOfOther(Operation *from, Value pipe,
                                std::pair<Value, int64_t> stage) {
  for (Operation *op = from; op; op = op->getNextNode()) {
    bool found = false;
    op->walk([&](HandOffOp handOff) {
      if (handOff.getPipeline() != pipe &&
          getStateRoot(handOff.getState()) == stage)
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
    for (Operation *op : getFollowingOps(commit)) {
      if (retakes(op, pipe, {Verb::Acquire, Verb::TryAcquire}))
        break;
      op->walk([&](Operation *store) {
        for (Value addr : getAccessedAddresses<MemoryEffects::Write>(store)) {
          for (const AddressStage &as : getAddressStages(addr)) {
            if (as.stage != committed || laterHandOffOfOther<ProducerCommitOp>(op, pipe, as.stage))
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

LogicalResult protocol::checkReleaseBeforeRead(FunctionOpInterface fn) {
  bool failed = false;
  fn->walk([&](ConsumerReleaseOp release) {
    Value pipe = release.getPipeline();
    std::pair<Value, int64_t> released = getStateRoot(release.getState());
    for (Operation *op : getFollowingOps(release)) {
      if (retakes(op, pipe, {Verb::Wait, Verb::TryWait}))
        break;
      bool reported = false;
      op->walk([&](Operation *load) {
        if (reported)
          return;
        for (Value addr : getAccessedAddresses<MemoryEffects::Read>(load)) {
          for (const AddressStage &as : getAddressStages(addr)) {
            if (as.stage != released ||
                laterHandOffOfOther<ConsumerReleaseOp>(op, pipe, as.stage))
              continue;
            InFlightDiagnostic diag = load->emitError();
            diag << describe(pipe) << ": " << load->getName()
                 << " reads the stage that consumer.release already handed "
                    "back to the producer (its address comes from the "
                    "released state's index), before the next "
                    "consumer.wait: the producer may be refilling the stage "
                    "under this read (silent corruption); move the read "
                    "before consumer.release";
            diag.attachNote(release->getLoc()) << "the stage is released here";
            diag.attachNote(as.index->getLoc())
                << "the read's address is computed from this stage index";
            noteCreate(diag, pipe);
            failed = true;
            reported = true;
            return;
          }
        }
      });
    }
  });
  return failure(failed);
}
