//===- PipelineOps.cpp - op verifiers ---------------------------*- C++ -*-===//
//
// Rules that relate an op to its pipeline and state types. Messages name the
// op (MLIR prefixes it with "'pipeline.xxx' op") and the rule that failed.
//
//===----------------------------------------------------------------------===//

#include "pipeline-mlir/Dialect/Pipeline/IR/PipelineDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

using namespace mlir;
using namespace mlir::pipeline;

#define GET_OP_CLASSES
#include "pipeline-mlir/Dialect/Pipeline/IR/PipelineOps.cpp.inc"

//===----------------------------------------------------------------------===//
// Shared checks
//===----------------------------------------------------------------------===//

static StringRef roleName(Role role) { return stringifyRole(role); }

/// The state must walk the same ring as the pipeline and belong to the side
/// that the verb is for.
static LogicalResult verifyStateFor(Operation *op, PipelineType pipe,
                                    StateType state, Role side) {
  if (state.getStages() != pipe.getStages())
    return op->emitOpError() << "state has " << state.getStages()
                             << " stages but the pipeline has "
                             << pipe.getStages()
                             << " (a state walks its own pipeline's ring)";
  if (state.getRole() != side && state.getRole() != Role::ProducerConsumer)
    return op->emitOpError()
           << "is a " << roleName(side) << " verb but the state is a "
           << roleName(state.getRole())
           << " state (make it with make_pipeline_state(PipelineUserType."
           << (side == Role::Producer ? "Producer" : "Consumer") << ", ...))";
  return success();
}

static LogicalResult verifyProducerVerb(Operation *op, PipelineType pipe,
                                        StateType state) {
  if (pipe.getKind() == PipelineKind::Order)
    return op->emitOpError() << "order pipelines use pipeline.order.wait / "
                                "pipeline.order.arrive, not producer verbs";
  return verifyStateFor(op, pipe, state, Role::Producer);
}

static LogicalResult verifyConsumerVerb(Operation *op, PipelineType pipe,
                                        StateType state) {
  if (pipe.getKind() == PipelineKind::TmaStore)
    return op->emitOpError()
           << "PipelineTmaStore has no consumer side (completion is tracked "
              "by bulk groups)";
  if (pipe.getKind() == PipelineKind::Order)
    return op->emitOpError() << "order pipelines use pipeline.order.wait / "
                                "pipeline.order.arrive, not consumer verbs";
  return verifyStateFor(op, pipe, state, Role::Consumer);
}

/// Kinds whose stages copy.tma_load / copy.bulk fill.
static bool isTmaLoadKind(PipelineKind kind) {
  return getKindTraits(kind).stageCopies;
}

/// TMA tensor copies address 1 to 5 dimensions.
static LogicalResult verifyTensorRank(Operation *op, size_t rank) {
  if (rank < 1 || rank > 5)
    return op->emitOpError() << "TMA tensor copies take 1 to 5 coordinates, got "
                             << rank;
  return success();
}

/// A constant `value` (an i32 operand) that the lowering uses to address a
/// pipeline's barriers must lie in [0, `size`): barrier addresses are
/// computed from it with no bound, so index 5 of a 2-stage pipeline arrives
/// on shared memory past the barrier array (the checker and the lowering
/// take the value as given). Run-time values are not seen here.
static LogicalResult verifyConstantIndex(Operation *op, Value value,
                                         StringRef what, StringRef owner,
                                         int64_t size, StringRef unit,
                                         StringRef fix) {
  APInt c;
  if (!value || !matchPattern(value, m_ConstantInt(&c)))
    return success();
  int64_t v = c.getSExtValue();
  if (v >= 0 && v < size)
    return success();
  return op->emitOpError()
         << what << " " << v << " is out of range: " << owner << " has "
         << size << " " << unit << " (" << what << " 0.." << size - 1
         << "), and the barrier it names would lie past the pipeline's "
            "barrier array, in shared memory the pipeline does not own ("
         << fix << ")";
}

/// A constant phase must be a parity, 0 or 1: it is the operand of
/// `mbarrier.try_wait.parity`, which ptxas refuses for any other value (and
/// the state's advance flips it with `xor 1`, so 2 would never match).
static LogicalResult verifyConstantPhase(Operation *op, Value phase) {
  APInt c;
  if (!phase || !matchPattern(phase, m_ConstantInt(&c)))
    return success();
  int64_t v = c.getSExtValue();
  if (v == 0 || v == 1)
    return success();
  return op->emitOpError()
         << "phase " << v
         << " is not a parity: a pipeline state's phase is the parity "
            "mbarrier.try_wait.parity waits on, 0 or 1 (give phase % 2; "
            "producers start at 1, consumers at 0)";
}

LogicalResult mlir::pipeline::verifyInsideFunction(Operation *op) {
  if (op->getParentOfType<FunctionOpInterface>())
    return success();
  return op->emitOpError()
         << "must be nested in a function (func.func, gpu.func, llvm.func): "
            "it lowers to device code, which a module body cannot hold";
}

//===----------------------------------------------------------------------===//
// Creation and initialization
//===----------------------------------------------------------------------===//

LogicalResult CreateOp::verify() {
  PipelineType pipe = getType();
  if (getBarrierStorage() && !pipe.hasBarriers())
    return emitOpError() << "PipelineTmaStore owns no mbarriers and takes no "
                            "barrier storage";
  if (getName() && getName()->empty())
    return emitOpError() << "name must not be empty";
  return success();
}

//===----------------------------------------------------------------------===//
// State
//===----------------------------------------------------------------------===//

LogicalResult StateMakeOp::verify() {
  StateType type = getType();
  // make_pipeline_state only knows the producer (phase 1) and consumer
  // (phase 0) start states; a producer_consumer start would be a guess.
  if (type.getRole() == Role::ProducerConsumer && !getIndex())
    return emitOpError() << "a producer_consumer state has no start state "
                            "(producers start at phase 1, consumers at 0): "
                            "give 'index' and 'phase', or use "
                            "pipeline.order.state";
  if (type.getSimple()) {
    if (getPhase() || getCount())
      return emitOpError() << "a simple state is one packed phase_index: give "
                              "only 'index'";
    // A packed phase_index is reduced modulo the stages (unsigned) by the
    // lowering: every value names a stage of the ring.
    return success();
  }
  if (static_cast<bool>(getIndex()) != static_cast<bool>(getPhase()))
    return emitOpError() << "give both 'index' and 'phase', or neither for the "
                            "role's start state";
  if (getCount() && !getIndex())
    return emitOpError() << "'count' needs 'index' and 'phase'";
  if (failed(verifyConstantIndex(
          *this, getIndex(), "index", "the state", type.getStages(),
          "stages",
          "give the stage's index, or a start state advanced to it with "
          "pipeline.state.advance")))
    return failure();
  return verifyConstantPhase(*this, getPhase());
}

OpFoldResult StateAdvanceOp::fold(FoldAdaptor adaptor) {
  auto amount = dyn_cast_or_null<IntegerAttr>(adaptor.getAmount());
  if (amount && amount.getValue().isZero())
    return getState();
  return {};
}

/// The `pipeline.state.make` that built `state` with explicit fields, if any.
/// A simple state packs phase_index into `index`, so its fields are derived
/// values, not operands.
static StateMakeOp getFieldwiseMake(Value state) {
  auto make = state.getDefiningOp<StateMakeOp>();
  if (!make || make.getType().getSimple())
    return {};
  return make;
}

OpFoldResult StateIndexOp::fold(FoldAdaptor) {
  if (StateMakeOp make = getFieldwiseMake(getState()))
    return make.getIndex();
  return {};
}

OpFoldResult StatePhaseOp::fold(FoldAdaptor) {
  if (StateMakeOp make = getFieldwiseMake(getState()))
    return make.getPhase();
  return {};
}

OpFoldResult StateCountOp::fold(FoldAdaptor) {
  if (StateMakeOp make = getFieldwiseMake(getState()))
    return make.getCount();
  return {};
}

//===----------------------------------------------------------------------===//
// Producer verbs
//===----------------------------------------------------------------------===//

LogicalResult ProducerAcquireOp::verify() {
  PipelineType pipe = getPipelineType();
  if (failed(verifyProducerVerb(*this, pipe, getStateType())))
    return failure();
  if (getExtraTx() && !pipe.hasTxCount())
    return emitOpError() << "extra_tx adds transaction bytes and needs a "
                            "TMA/CLC pipeline, not "
                         << getCuteClassName(pipe.getKind());
  if (getToken() && pipe.getKind() == PipelineKind::TmaStore)
    return emitOpError() << "PipelineTmaStore has no try_acquire, so no token";
  return success();
}

LogicalResult ProducerTryAcquireOp::verify() {
  PipelineType pipe = getPipelineType();
  if (pipe.getKind() == PipelineKind::TmaStore)
    return emitOpError() << "PipelineTmaStore has no try_acquire (bulk groups "
                            "cannot be polled)";
  return verifyProducerVerb(*this, pipe, getStateType());
}

/// `elect_one` / `syncwarp_before` replace per-thread arrives by one arrive
/// per warp, which only exists for mbarrier.arrive sides.
template <typename OpTy>
static LogicalResult verifyElectOne(OpTy op, OpType sideOpType) {
  if (op.getSyncwarpBefore() && !op.getElectOne())
    return op.emitOpError() << "syncwarp_before only makes sense with elect_one";
  if (op.getElectOne() && sideOpType != OpType::AsyncThread)
    return op.emitOpError() << "elect_one turns per-thread mbarrier.arrive "
                               "into one arrive per warp; this side signals "
                               "through "
                            << stringifyOpType(sideOpType);
  return success();
}

LogicalResult ProducerCommitOp::verify() {
  PipelineType pipe = getPipelineType();
  if (failed(verifyProducerVerb(*this, pipe, getStateType())))
    return failure();
  return verifyElectOne(*this, pipe.getProducerOpType());
}

LogicalResult ProducerTailOp::verify() {
  PipelineType pipe = getPipelineType();
  return verifyProducerVerb(*this, pipe, getStateType());
}

LogicalResult ProducerBarrierOp::verify() {
  PipelineType pipe = getPipelineType();
  if (!pipe.hasBarriers())
    return emitOpError() << "PipelineTmaStore owns no mbarriers";
  return verifyProducerVerb(*this, pipe, getStateType());
}

//===----------------------------------------------------------------------===//
// Consumer verbs
//===----------------------------------------------------------------------===//

LogicalResult ConsumerWaitOp::verify() {
  PipelineType pipe = getPipelineType();
  return verifyConsumerVerb(*this, pipe, getStateType());
}

LogicalResult ConsumerTryWaitOp::verify() {
  PipelineType pipe = getPipelineType();
  return verifyConsumerVerb(*this, pipe, getStateType());
}

LogicalResult ConsumerReleaseOp::verify() {
  PipelineType pipe = getPipelineType();
  if (failed(verifyConsumerVerb(*this, pipe, getStateType())))
    return failure();
  OpType side = pipe.getConsumerOpType();
  if (getKindTraits(pipe.getKind()).consumerOpPerRelease) {
    if (!getOpType())
      return emitOpError() << "PipelineTmaMultiConsumersAsync has MMA and "
                              "async consumers: say which one releases with "
                              "op_type = #pipeline.op_type<tcgen05_mma> or "
                              "#pipeline.op_type<async_thread>";
    side = *getOpType();
    if (side != OpType::TCGen05Mma && side != OpType::AsyncThread)
      return emitOpError() << "op_type must be tcgen05_mma or async_thread, got "
                           << stringifyOpType(side);
  } else if (getOpType() && *getOpType() != side) {
    return emitOpError() << getCuteClassName(pipe.getKind())
                         << " consumers release through "
                         << stringifyOpType(side) << ", not "
                         << stringifyOpType(*getOpType());
  }
  return verifyElectOne(*this, side);
}

//===----------------------------------------------------------------------===//
// Copies
//===----------------------------------------------------------------------===//

LogicalResult TmaLoadOp::verify() {
  PipelineType pipe = getPipelineType();
  if (!isTmaLoadKind(pipe.getKind()))
    return emitOpError() << "binds a TMA load to a stage's full barrier, which "
                            "needs a TMA pipeline, not "
                         << getCuteClassName(pipe.getKind());
  if (failed(verifyStateFor(*this, pipe, getStateType(), Role::Producer)))
    return failure();
  if (getMulticastMask() && pipe.getClusterSize() <= 1)
    return emitOpError() << "multicast needs a pipeline with a cluster of more "
                            "than one CTA";
  // The consumers release the stage to every CTA that may write into it only
  // when the pipeline type says that loads are multicast.
  if (getMulticastMask() && pipe.getMulticast() == Multicast::None)
    return emitOpError() << "multicast needs a pipeline declared with "
                            "multicast = m, n or mn, so that consumers release "
                            "the stage to the CTAs that write into it";
  return verifyTensorRank(*this, getCoordinates().size());
}

LogicalResult BulkLoadOp::verify() {
  PipelineType pipe = getPipelineType();
  if (!isTmaLoadKind(pipe.getKind()))
    return emitOpError() << "binds a bulk copy to a stage's full barrier, "
                            "which needs a TMA pipeline, not "
                         << getCuteClassName(pipe.getKind());
  return verifyStateFor(*this, pipe, getStateType(), Role::Producer);
}

LogicalResult TmaStoreOp::verify() {
  return verifyTensorRank(*this, getCoordinates().size());
}

//===----------------------------------------------------------------------===//
// PipelineOrder
//===----------------------------------------------------------------------===//

/// Every group of a PipelineOrder both waits and arrives, on a ring of
/// `depth` stages, so its state is a full producer_consumer state.
static LogicalResult verifyOrderOp(Operation *op, PipelineType pipe,
                                   StateType state) {
  if (pipe.getKind() != PipelineKind::Order)
    return op->emitOpError() << "needs an order pipeline (PipelineOrder), not "
                             << getCuteClassName(pipe.getKind());
  if (state.getStages() != pipe.getStages())
    return op->emitOpError() << "state has " << state.getStages()
                             << " stages but the order pipeline has depth "
                             << pipe.getStages();
  if (state.getRole() != Role::ProducerConsumer || state.getSimple())
    return op->emitOpError() << "an order state is a (non-simple) "
                                "producer_consumer state, got "
                             << state;
  return success();
}

/// Group g of an order waits on barrier `index * length + g` and arrives on
/// `index * length + (g + 1) % length`: a constant group id must name one of
/// the `length` groups.
static LogicalResult verifyOrderGroup(Operation *op, PipelineType pipe,
                                      Value groupId) {
  return verifyConstantIndex(
      op, groupId, "group_id", "the order", pipe.getLength(), "groups",
      "give PipelineOrder.create a group_id below its length");
}

LogicalResult OrderStateOp::verify() {
  PipelineType pipe = getPipeline().getType();
  if (failed(verifyOrderOp(*this, pipe, getType())))
    return failure();
  return verifyOrderGroup(*this, pipe, getGroupId());
}

LogicalResult OrderWaitOp::verify() {
  if (failed(verifyOrderOp(*this, getPipelineType(), getStateType())))
    return failure();
  return verifyOrderGroup(*this, getPipelineType(), getGroupId());
}

LogicalResult OrderArriveOp::verify() {
  if (failed(verifyOrderOp(*this, getPipelineType(), getStateType())))
    return failure();
  return verifyOrderGroup(*this, getPipelineType(), getGroupId());
}

//===----------------------------------------------------------------------===//
// NamedBarrier
//===----------------------------------------------------------------------===//

/// `bar` counts must be warp multiples (the id and count ranges are ODS
/// constraints).
template <typename OpTy>
static LogicalResult verifyNamedBarrier(OpTy op) {
  if (op.getNumThreads() % 32 != 0)
    return op.emitOpError() << "thread count must be a multiple of the warp "
                               "size (32), got "
                            << op.getNumThreads();
  // `index` is added to the id: a constant one must keep it among the 16.
  APInt c;
  if (op.getIndex() && matchPattern(op.getIndex(), m_ConstantInt(&c))) {
    int64_t id = op.getBarrierId() + c.getSExtValue();
    if (id < 0 || id > 15)
      return op.emitOpError()
             << "id " << op.getBarrierId() << " + index " << c.getSExtValue()
             << " = " << id
             << " is not a named barrier: a CTA has barriers 0..15 (lower "
                "the id or the index)";
  }
  return success();
}

LogicalResult NamedBarrierArriveOp::verify() { return verifyNamedBarrier(*this); }
LogicalResult NamedBarrierSyncOp::verify() { return verifyNamedBarrier(*this); }
