//===- StartAndTailChecks.cpp - start phases and producer tails -----------===//
//
// Properties 3 and 4 of pipeline-verify-protocol: a state made as a start
// state (explicit constant phase, index 0, count 0) whose phase the first
// wait of its side reads must start where its role starts (producer 1,
// consumer 0), and a producer role must reach producer.tail before it ends
// when something can still arrive on its CTA after the CTA exits (else the
// missing tail is a warning).
//
//===----------------------------------------------------------------------===//

#include "ProtocolChecks.h"

#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;
using namespace mlir::pipeline;
using namespace mlir::pipeline::protocol;

//===----------------------------------------------------------------------===//
// Start phases
//===----------------------------------------------------------------------===//


/// The phase of a state.make when it claims to be the role's start state
/// (nullopt when it is a position mid-stream, or not constant):
/// - index / phase / count: count absent or 0 and index 0. A count > 0 (or
///   a runtime count) is a state resumed mid-stream, and an index other
///   than 0 is past the start.
/// - the packed `simple` form counts stages from the start, which is
///   phase_index `stages` for producers and 0 for consumers: a producer
///   below `stages` is before its own start; a consumer at or above
///   `stages` is one lap in, which is legal.
static std::optional<int64_t> claimedStartPhase(StateMakeOp make) {
  StateType type = make.getType();
  if (type.getSimple()) {
    std::optional<int64_t> packed =
        make.getIndex() ? getConstantInt(make.getIndex()) : std::nullopt;
    if (!packed || *packed < 0 || type.getRole() != Role::Producer ||
        *packed >= type.getStages())
      return std::nullopt;
    return 0;
  }
  if (!make.getPhase())
    return std::nullopt;
  std::optional<int64_t> phase = getConstantInt(make.getPhase());
  std::optional<int64_t> index =
      make.getIndex() ? getConstantInt(make.getIndex()) : 0;
  std::optional<int64_t> count =
      make.getCount() ? getConstantInt(make.getCount()) : 0;
  if (!phase || *phase < 0 || !index || *index != 0 || !count || *count != 0)
    return std::nullopt;
  return *phase & 1;
}

LogicalResult protocol::checkInitialPhases(FunctionOpInterface fn) {
  // The phase-reading verbs per (pipeline, side), to tell a stage's first
  // wait from a later one.
  llvm::DenseMap<std::pair<Value, unsigned>, SmallVector<Operation *>> waiters;
  fn->walk([&](Operation *op) {
    if (std::optional<VerbRef> verb = getVerb(op); verb && readsPhase(verb->verb))
      waiters[{verb->pipeline, unsigned(isProducerVerb(verb->verb))}].push_back(op);
  });

  bool failed = false;
  fn->walk([&](StateMakeOp make) {
    StateType type = make.getType();
    // A producer_consumer state (`PipelineState(stages, 0, 0, 0)`) takes its
    // side from the first wait that reads it.
    bool eitherSide = type.getRole() == Role::ProducerConsumer;
    std::optional<int64_t> phase = claimedStartPhase(make);
    if (!phase)
      return;
    // Only a state whose phase is read by the first wait of its side on a
    // pipeline starts that side; later waits are mid-stream positions
    // (flash-attention's *_w_index_phase calls in an unrolled loop).
    Operation *firstReader = nullptr;
    bool producer = type.getRole() == Role::Producer;
    for (Operation *reader : phaseReaders(make.getResult())) {
      VerbRef verb = *getVerb(reader);
      bool readerSide = isProducerVerb(verb.verb);
      if (!eitherSide && readerSide != producer)
        continue;
      auto &same = waiters[{verb.pipeline, unsigned(readerSide)}];
      if (llvm::none_of(same, [&](Operation *other) {
            return runsBefore(other, reader);
          })) {
        firstReader = reader;
        producer = readerSide;
        break;
      }
    }
    if (!firstReader || *phase == (producer ? 1 : 0))
      return;
    Value operand = type.getSimple() ? make.getIndex() : make.getPhase();
    InFlightDiagnostic diag = make.emitError();
    if (eitherSide) {
      diag << "producer_consumer state starts at phase " << *phase
           << " and the first "
           << (producer ? "producer.acquire" : "consumer.wait")
           << " on this pipeline reads it: ";
      if (producer)
        diag << "producer states start at phase 1 because buffers start "
                "empty; with phase 0 the first producer.acquire waits "
                "forever ";
      else
        diag << "consumer states start at phase 0 because no buffer is full "
                "yet; with phase 1 the first consumer.wait returns before the "
                "producer filled the stage ";
      diag << "(make the " << (producer ? "producer" : "consumer")
           << "'s start state with pipeline.state.make : !pipeline.state<"
           << type.getStages() << ", " << (producer ? "producer" : "consumer")
           << ">)";
      if (Operation *def = operand.getDefiningOp())
        diag.attachNote(def->getLoc()) << "phase given here";
      diag.attachNote(firstReader->getLoc())
          << "first " << firstReader->getName() << " of this side on "
          << describe(getVerb(firstReader)->pipeline) << " reads it";
      failed = true;
      return;
    }
    if (producer)
      diag << "producer state starts at phase 0: producer states start at "
              "phase 1 because buffers start empty; with phase 0 the first "
              "producer.acquire waits forever ";
    else
      diag << "consumer state starts at phase 1: consumer states start at "
              "phase 0 because no buffer is full yet; with phase 1 the first "
              "consumer.wait returns before the producer filled the stage ";
    if (type.getSimple())
      diag << "(make the packed phase_index "
           << (producer ? "stages + index" : "index") << ", or use "
           << "pipeline.state.make without operands)";
    else
      diag << "(use phase " << (producer ? 1 : 0)
           << ", or pipeline.state.make without operands; a state resumed "
              "mid-stream gives its count)";
    if (Operation *def = operand.getDefiningOp())
      diag.attachNote(def->getLoc()) << "phase given here";
    diag.attachNote(firstReader->getLoc())
        << "first " << firstReader->getName() << " of this side on "
        << describe(getVerb(firstReader)->pipeline) << " reads it";
    failed = true;
  });
  return failure(failed);
}

//===----------------------------------------------------------------------===//
// Producer tail
//===----------------------------------------------------------------------===//

/// True when a producer.tail on `pipe` runs after `op` before the function
/// ends: later in op's block or in any enclosing block.
static bool reachesTail(Operation *op, Value pipe) {
  for (Operation *cur = op; cur && !isa<FunctionOpInterface>(cur);
       cur = cur->getParentOp()) {
    for (Operation *next = cur->getNextNode(); next;
         next = next->getNextNode()) {
      WalkResult found = next->walk([&](ProducerTailOp tail) {
        return tail.getPipeline() == pipe ? WalkResult::interrupt()
                                          : WalkResult::advance();
      });
      if (found.wasInterrupted())
        return true;
    }
  }
  return false;
}

/// Why something can still arrive on the producer CTA's barriers (or read
/// its shared memory) after the CTA exits, or nullptr when nothing can.
///
/// The tail matters only for arrivals that no thread of this CTA waits for
/// before it exits:
/// - a cluster: consumers in peer CTAs arrive remotely on this CTA's empty
///   barriers (and 2-CTA peers send bytes to the leader), whenever they
///   finish, independently of this CTA;
/// - a tcgen05 consumer (tma_umma, async_umma, the MMA side of
///   tma_multi_consumers_async): its release is a tcgen05.commit, which
///   arrives when the MMAs complete, after the MMA warp has moved on;
/// - tma_store: the bulk stores read shared memory asynchronously.
/// Otherwise (one CTA, consumer threads arriving with mbarrier.arrive) every
/// arrive is an instruction of a thread of this CTA, which cannot exit before
/// it retires, and the TMA / cp.async bytes of a full barrier are waited for
/// by the consumers; the CTA's shared memory lives until its last thread
/// exits. A missing tail there is only a departure from CuTe DSL's
/// convention: a warning.
static const char *lateArriveReason(PipelineType type) {
  if (type.getClusterSize() > 1)
    return "consumers in peer CTAs may still arrive on this CTA's barriers";
  if (type.getKind() == PipelineKind::TmaStore)
    return "TMA stores may still be reading shared memory when the CTA "
           "exits (add pipeline.producer.tail after the last commit; it "
           "waits for every bulk group)";
  if (type.getConsumerOpType() == OpType::TCGen05Mma ||
      type.getKind() == PipelineKind::TmaMultiConsumersAsync)
    return "the consumer's tcgen05.commit arrives when its MMAs complete, "
           "which may be after the CTA exits";
  return nullptr;
}

LogicalResult protocol::checkProducerTail(FunctionOpInterface fn,
                                          const Options &options) {
  // The ops that make a region a producer role, per (role, pipeline), in
  // program order.
  llvm::MapVector<std::pair<Block *, Value>, SmallVector<Operation *>> roles;
  fn->walk([&](Operation *op) {
    std::optional<VerbRef> verb = getVerb(op);
    if (!verb)
      return;
    PipelineType type = getPipelineType(verb->pipeline);
    bool triggers = verb->verb == Verb::Acquire ||
                    (verb->verb == Verb::Commit &&
                     type.getKind() == PipelineKind::TmaStore);
    // A pipeline passed in as an argument belongs to the caller's role,
    // which owns the tail.
    if (!triggers || type.getKind() == PipelineKind::Order ||
        !verb->pipeline.getDefiningOp())
      return;
    roles[{getRoleBlock(op), verb->pipeline}].push_back(op);
  });

  bool failed = false;
  for (auto &[key, ops] : roles) {
    auto [role, pipe] = key;
    Operation *missing = nullptr;
    for (Operation *op : ops)
      if (!reachesTail(op, pipe))
        missing = op;
    if (!missing)
      continue;
    PipelineType type = getPipelineType(pipe);
    scf::ForOp loop = getOutermostLoopWithin(missing, role);
    Operation *where = loop ? loop.getOperation() : missing;
    const char *reason = lateArriveReason(type);
    bool error = reason || options.singleCtaTail;
    InFlightDiagnostic diag = error ? where->emitError() : where->emitWarning();
    diag << describe(pipe)
         << ": producer role exits without pipeline.producer.tail: ";
    if (type.getKind() == PipelineKind::TmaStore) {
      diag << reason;
    } else {
      if (reason)
        diag << reason;
      else
        diag << "not needed here (one CTA, consumers arrive synchronously: "
                "nothing can arrive after the CTA exits), but CuTe DSL "
                "producers end with producer_tail";
      diag << " (add pipeline.producer.tail with the state the producer "
              "ends with"
           << (loop ? ", after the loop)" : ")");
    }
    diag.attachNote(missing->getLoc())
        << "last " << missing->getName() << " of this role";
    if (isa<scf::IfOp>(getRoleOwner(role)))
      diag.attachNote(getRoleOwner(role)->getLoc()) << "producer role region";
    failed |= error;
  }
  return failure(failed);
}
