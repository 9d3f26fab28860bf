//===- StartAndTailChecks.cpp - start phases and producer tails -----------===//
//
// Properties 3 and 4 of pipeline-verify-protocol: a state made with an
// explicit constant phase must start where its role starts (producer 1,
// consumer 0), and a producer role must reach producer.tail before it ends.
//
//===----------------------------------------------------------------------===//

#include "ProtocolChecks.h"

#include "llvm/ADT/MapVector.h"

using namespace mlir;
using namespace mlir::pipeline;
using namespace mlir::pipeline::protocol;

//===----------------------------------------------------------------------===//
// Start phases
//===----------------------------------------------------------------------===//

LogicalResult protocol::checkInitialPhases(FunctionOpInterface fn) {
  bool failed = false;
  fn->walk([&](StateMakeOp make) {
    StateType type = make.getType();
    if (type.getRole() == Role::ProducerConsumer)
      return;
    // The packed simple form holds phase * stages + index.
    Value operand = type.getSimple() ? make.getIndex() : make.getPhase();
    if (!operand)
      return;
    std::optional<int64_t> value = getConstantInt(operand);
    if (!value || *value < 0)
      return;
    int64_t phase = (type.getSimple() ? *value / type.getStages() : *value) & 1;
    bool producer = type.getRole() == Role::Producer;
    if (phase == (producer ? 1 : 0))
      return;
    InFlightDiagnostic diag = make.emitError();
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
           << ", or pipeline.state.make without operands)";
    if (Operation *def = operand.getDefiningOp())
      diag.attachNote(def->getLoc()) << "phase given here";
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

/// Whether something can still arrive on the producer CTA's barriers (or
/// read its shared memory) after a producer role stops waiting.
static bool tailMatters(PipelineType type, const Options &options) {
  return options.singleCtaTail || type.getClusterSize() > 1 ||
         type.getKind() == PipelineKind::TmaStore ||
         type.getConsumerOpType() == OpType::TCGen05Mma ||
         type.getKind() == PipelineKind::TmaMultiConsumersAsync;
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
        !tailMatters(type, options) || !verb->pipeline.getDefiningOp())
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
    InFlightDiagnostic diag = where->emitError();
    diag << describe(pipe)
         << ": producer role exits without pipeline.producer.tail: ";
    if (type.getKind() == PipelineKind::TmaStore)
      diag << "TMA stores may still be reading shared memory when the CTA "
              "exits (add pipeline.producer.tail after the last commit; it "
              "waits for every bulk group)";
    else
      diag << (type.getClusterSize() > 1
                   ? "consumers in peer CTAs may still arrive on this CTA's "
                     "barriers"
                   : "consumer arrives may still be in flight towards this "
                     "CTA's barriers")
           << " (add pipeline.producer.tail with the state the producer "
              "ends with"
           << (loop ? ", after the loop)" : ")");
    diag.attachNote(missing->getLoc())
        << "last " << missing->getName() << " of this role";
    if (isa<scf::IfOp>(getRoleOwner(role)))
      diag.attachNote(getRoleOwner(role)->getLoc()) << "producer role region";
    failed = true;
  }
  return failure(failed);
}
