//===- StateLowering.cpp - pipeline.state.* and order.state ---------------===//
//
// A state is !llvm.struct<(i32, i32, i32)> = (index, phase, count), or one
// i32 phase_index in the simple form (docs/Rationale.md section 3). All of it is
// integer arithmetic; nothing touches memory.
//
//===----------------------------------------------------------------------===//

#include "LoweringUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

using namespace mlir;
using namespace mlir::pipeline;

namespace {

struct StateMakeLowering : PipelineOpLowering<StateMakeOp> {
  using PipelineOpLowering::PipelineOpLowering;

  LogicalResult
  matchAndRewrite(StateMakeOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    StateType type = op.getType();
    bool producer = type.getRole() == Role::Producer;
    if (type.getSimple()) {
      // Producers start one lap ahead (phase 1, index 0): phase_index = S.
      Value packed = adaptor.getIndex()
                         ? adaptor.getIndex()
                         : constI32(rewriter, loc,
                                    producer ? type.getStages() : 0);
      rewriter.replaceOp(op, packed);
      return success();
    }
    Value index = adaptor.getIndex(), phase = adaptor.getPhase();
    Value count = adaptor.getCount();
    if (!index) {
      // Buffers start empty, so the first producer acquire must pass:
      // producer phase 1, consumer phase 0.
      index = constI32(rewriter, loc, 0);
      phase = constI32(rewriter, loc, producer ? 1 : 0);
    }
    if (!count)
      count = constI32(rewriter, loc, 0);
    rewriter.replaceOp(op, packState(rewriter, loc, index, phase, count));
    return success();
  }
};

struct StateAdvanceLowering : PipelineOpLowering<StateAdvanceOp> {
  using PipelineOpLowering::PipelineOpLowering;

  LogicalResult
  matchAndRewrite(StateAdvanceOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOp(op, advanceState(rewriter, op.getLoc(),
                                        adaptor.getState(),
                                        op.getState().getType(),
                                        adaptor.getAmount()));
    return success();
  }
};

enum class Field { Index, Phase, Count };

template <typename OpTy, Field field>
struct StateFieldLowering : PipelineOpLowering<OpTy> {
  using PipelineOpLowering<OpTy>::PipelineOpLowering;

  LogicalResult
  matchAndRewrite(OpTy op, typename OpTy::Adaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    StateFields f = unpackState(rewriter, op.getLoc(), adaptor.getState(),
                                op.getState().getType());
    Value v = field == Field::Index   ? f.index
              : field == Field::Phase ? f.phase
                                      : f.count;
    rewriter.replaceOp(op, v);
    return success();
  }
};

struct OrderStateLowering : PipelineOpLowering<OrderStateOp> {
  using PipelineOpLowering::PipelineOpLowering;

  LogicalResult
  matchAndRewrite(OrderStateOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    // Group 0 goes first: its phase is 1 so its first wait passes on the
    // fresh barrier; every other group waits for its predecessor's arrive.
    Location loc = op.getLoc();
    Value first =
        arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::eq,
                              adaptor.getGroupId(), constI32(rewriter, loc, 0));
    Value phase =
        arith::ExtUIOp::create(rewriter, loc, rewriter.getI32Type(), first);
    Value zero = constI32(rewriter, loc, 0);
    rewriter.replaceOp(op, packState(rewriter, loc, zero, phase, zero));
    return success();
  }
};

} // namespace

void mlir::pipeline::populateStateLoweringPatterns(
    LLVMTypeConverter &converter, RewritePatternSet &patterns,
    const PipelineLoweringOptions &options) {
  patterns.add<StateMakeLowering, StateAdvanceLowering,
               StateFieldLowering<StateIndexOp, Field::Index>,
               StateFieldLowering<StatePhaseOp, Field::Phase>,
               StateFieldLowering<StateCountOp, Field::Count>,
               OrderStateLowering>(converter, options);
}
