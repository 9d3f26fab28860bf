//===- ElectOnce.cpp - one elect.sync per converged warp-role region ------===//
//
// Verbs that act from one lane of a warp (elected arrives, expect_tx of TMA
// producers, tcgen05.commit) elect that lane with `elect.sync`. A
// hand-written kernel elects once per warp role and reuses the predicate;
// this file proves where the lowering may do the same.
//
// Why reuse is sound. A verb needs exactly one lane of the warp to act, and
// that lane to be one that executed the verb's preceding program order (its
// wait). `elect.sync` gives no memory ordering (the optional
// `syncwarp_before` bar.warp.sync stays per verb), so reusing a predicate
// computed earlier changes nothing but *which* lane acts, provided the same
// full warp reaches the verb as reached the point of the election. That
// holds when
//   (1) the election point is the start of a region of an `scf.if` whose
//       condition is warp-uniform (the warp-role branch, e.g. on the
//       shfl-synced warp index), and every op around that `scf.if` up to
//       the function is an `scf.if` on a warp-uniform condition or an
//       `scf.for` with warp-uniform bounds (the warp arrives there whole);
//   (2) every op between that region and the verb is also such an `scf.if`
//       or `scf.for` (no lane can skip the verb while another reaches it).
// Any other region op (scf.while, execute_region, a branch on the lane id,
// ...) on the way makes the verb keep its own elect.sync.
//
// Warp-uniform values: constants, kernel arguments, CTA/grid/cluster
// special registers, shfl.sync idx results with a full mask and a uniform
// source lane, tid.x / (32 k) in a 1-D block, induction variables and
// iteration arguments of uniform loops, and pure arith/index/llvm/pipeline
// ops of uniform operands.
//
//===----------------------------------------------------------------------===//

#include "ElectOnce.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Index/IR/IndexDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

using namespace mlir;
using namespace mlir::pipeline;

namespace {

/// The threads of the function's CTA form a 1-D block.
bool isOneDimBlock(Operation *func) {
  std::optional<std::array<int64_t, 3>> known = knownBlockSize(func);
  return known && (*known)[1] == 1 && (*known)[2] == 1;
}

bool isCtaUniformRegister(Operation *op) {
  return isa<NVVM::BlockIdXOp, NVVM::BlockIdYOp, NVVM::BlockIdZOp,
             NVVM::BlockDimXOp, NVVM::BlockDimYOp, NVVM::BlockDimZOp,
             NVVM::GridDimXOp, NVVM::GridDimYOp, NVVM::GridDimZOp,
             NVVM::ClusterIdXOp, NVVM::ClusterIdYOp, NVVM::ClusterIdZOp,
             NVVM::ClusterDimXOp, NVVM::ClusterDimYOp, NVVM::ClusterDimZOp,
             NVVM::BlockInClusterIdXOp, NVVM::BlockInClusterIdYOp,
             NVVM::BlockInClusterIdZOp, NVVM::ClusterDimBlocksXOp,
             NVVM::ClusterDimBlocksYOp, NVVM::ClusterDimBlocksZOp,
             NVVM::ClusterId, NVVM::ClusterDim, gpu::BlockIdOp,
             gpu::BlockDimOp, gpu::GridDimOp, gpu::ClusterIdOp,
             gpu::ClusterDimOp, gpu::ClusterBlockIdOp,
             gpu::ClusterDimBlocksOp>(op);
}

class UniformityAnalysis {
public:
  explicit UniformityAnalysis(Operation *func)
      : func(func), oneDim(isOneDimBlock(func)) {}

  /// Every lane of a warp holds the same value.
  bool isUniform(Value v) {
    auto it = memo.find(v);
    if (it != memo.end())
      return it->second;
    // Optimistic while in progress: a loop-carried value is uniform when
    // its init and every yielded value are, given that it is. When the
    // guess fails, forget what was concluded from it.
    size_t mark = log.size();
    memo[v] = true;
    log.push_back(v);
    bool result = compute(v);
    if (!result) {
      for (size_t i = mark + 1; i < log.size(); ++i)
        memo.erase(log[i]);
      log.resize(mark + 1);
    }
    memo[v] = result;
    return result;
  }

  /// A loop or branch that every lane of a warp takes the same way.
  bool isUniformControl(Operation *op) {
    if (auto ifOp = dyn_cast<scf::IfOp>(op))
      return isUniform(ifOp.getCondition());
    if (auto forOp = dyn_cast<scf::ForOp>(op))
      return isUniform(forOp.getLowerBound()) &&
             isUniform(forOp.getUpperBound()) && isUniform(forOp.getStep());
    return false;
  }

private:
  bool compute(Value v) {
    if (auto arg = dyn_cast<BlockArgument>(v))
      return computeArgument(arg);
    Operation *def = v.getDefiningOp();
    if (matchPattern(v, m_Constant()))
      return true;
    if (isCtaUniformRegister(def))
      return true;
    if (auto shfl = dyn_cast<NVVM::ShflOp>(def)) {
      // Every lane reads the same source lane of a full warp.
      std::optional<int64_t> mask = getConstantIntValue(shfl.getThreadMask());
      return shfl.getKind() == NVVM::ShflKind::idx && mask &&
             static_cast<int32_t>(*mask) == -1 &&
             !shfl.getReturnValueAndIsValid() && isUniform(shfl.getOffset());
    }
    if (isWarpIndexOfOneDimBlock(def))
      return true;
    if (!isMemoryEffectFree(def))
      return false;
    if (!isa<arith::ArithDialect, index::IndexDialect, LLVM::LLVMDialect,
             PipelineDialect>(def->getDialect()))
      return false;
    return llvm::all_of(def->getOperands(),
                        [&](Value operand) { return isUniform(operand); });
  }

  bool computeArgument(BlockArgument arg) {
    Block *block = arg.getOwner();
    Operation *parent = block->getParentOp();
    if (parent == func)
      return block->isEntryBlock(); // kernel parameters
    auto forOp = dyn_cast<scf::ForOp>(parent);
    if (!forOp || !isUniformControl(forOp))
      return false;
    if (arg == forOp.getInductionVar())
      return true;
    OpOperand *init = forOp.getTiedLoopInit(arg);
    OpOperand *yielded = forOp.getTiedLoopYieldedValue(arg);
    return init && yielded && isUniform(init->get()) &&
           isUniform(yielded->get());
  }

  /// `tid.x / (32 k)` or `tid.x >> (5 + k)` in a 1-D block: threads of one
  /// warp have consecutive tid.x starting at a multiple of 32.
  bool isWarpIndexOfOneDimBlock(Operation *op) {
    if (!oneDim || op->getNumOperands() != 2)
      return false;
    Value lhs = op->getOperand(0);
    if (!lhs.getDefiningOp<NVVM::ThreadIdXOp>())
      return false;
    std::optional<int64_t> rhs = getConstantIntValue(op->getOperand(1));
    if (!rhs || *rhs <= 0)
      return false;
    if (isa<arith::DivUIOp, arith::DivSIOp>(op))
      return *rhs % 32 == 0;
    if (isa<arith::ShRUIOp, arith::ShRSIOp>(op))
      return *rhs >= 5 && *rhs < 32;
    return false;
  }

  Operation *func;
  bool oneDim;
  llvm::DenseMap<Value, bool> memo;
  std::vector<Value> log;
};

/// The block where `verb`'s elected lane can be computed once, or null.
Block *findElectionBlock(Operation *verb, UniformityAnalysis &uniformity,
                         Operation *func) {
  Block *election = nullptr;
  for (Operation *parent = verb->getParentOp(); parent != func;
       parent = parent->getParentOp()) {
    if (!parent || !uniformity.isUniformControl(parent))
      return nullptr;
    // The outermost uniform branch is the warp-role region.
    if (isa<scf::IfOp>(parent)) {
      Region *region = verb->getParentRegion();
      while (region->getParentOp() != parent)
        region = region->getParentOp()->getParentRegion();
      election = &region->front();
    }
  }
  return election;
}

/// Verbs that may elect a lane in their lowering.
bool mayElect(Operation *op) {
  return isa<ProducerAcquireOp, ProducerCommitOp, ConsumerReleaseOp>(op);
}

} // namespace

void mlir::pipeline::analyzeElectHoisting(ModuleOp module,
                                          ElectHoisting &hoisting) {
  module.walk([&](FunctionOpInterface func) {
    UniformityAnalysis uniformity(func);
    func.walk([&](Operation *op) {
      if (!mayElect(op))
        return;
      if (Block *block = findElectionBlock(op, uniformity, func))
        hoisting.electionBlock[op] = block;
    });
  });
}

Value mlir::pipeline::electedLane(OpBuilder &b, Location loc, Operation *verb,
                                  const PipelineLoweringOptions &options) {
  ElectHoisting *hoisting = options.electHoisting;
  Block *block = nullptr;
  if (hoisting && verb)
    block = hoisting->electionBlock.lookup(verb);
  if (!block)
    return electOne(b, loc);
  Value &elected = hoisting->elected[block];
  if (!elected) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(block);
    elected = electOne(b, block->getParentOp()->getLoc());
  }
  return elected;
}
