//===- ProtocolUtils.cpp - shared helpers of the protocol checker -------===//
//
// Verb recognition, pipeline names for messages, role regions and guards,
// state distances. See ProtocolChecks.h.
//
//===----------------------------------------------------------------------===//

#include "ProtocolChecks.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/Matchers.h"

using namespace mlir;
using namespace mlir::pipeline;
using namespace mlir::pipeline::protocol;

std::optional<VerbRef> protocol::getVerb(Operation *op) {
  auto verb = dyn_cast<StageVerbOpInterface>(op);
  if (!verb)
    return std::nullopt;
  return VerbRef{verb.getStageVerb(), verb.getPipeline(), verb.getState()};
}

bool protocol::isTmaLoadKind(PipelineKind kind) {
  return getKindTraits(kind).stageCopies;
}

std::string protocol::describe(Value pipe) {
  if (auto create = pipe.getDefiningOp<CreateOp>())
    if (std::optional<StringRef> name = create.getName())
      return ("pipeline '" + *name + "'").str();
  return (getCuteClassName(getPipelineType(pipe).getKind()) + " pipeline")
      .str();
}

void protocol::noteCreate(InFlightDiagnostic &diag, Value pipe) {
  if (auto create = pipe.getDefiningOp<CreateOp>())
    diag.attachNote(create.getLoc()) << describe(pipe) << " is created here";
}

//===----------------------------------------------------------------------===//
// Guards
//===----------------------------------------------------------------------===//

namespace {
/// What a thread-identity value is.
enum class IdKind { None, Tid, Lane, Warp };
} // namespace

static Value stripCasts(Value v) {
  while (Operation *def = v.getDefiningOp()) {
    if (!isa<arith::IndexCastOp, arith::IndexCastUIOp, arith::ExtUIOp,
             arith::ExtSIOp, arith::TruncIOp>(def))
      break;
    v = def->getOperand(0);
  }
  return v;
}

static IdKind classifyId(Value v) {
  v = stripCasts(v);
  Operation *def = v.getDefiningOp();
  if (!def)
    return IdKind::None;
  if (auto tid = dyn_cast<gpu::ThreadIdOp>(def))
    return tid.getDimension() == gpu::Dimension::x ? IdKind::Tid : IdKind::None;
  if (isa<gpu::LaneIdOp>(def))
    return IdKind::Lane;
  if (isa<gpu::SubgroupIdOp>(def))
    return IdKind::Warp;
  StringRef name = def->getName().getStringRef();
  if (name == "nvvm.read.ptx.sreg.tid.x")
    return IdKind::Tid;
  if (name == "nvvm.read.ptx.sreg.laneid")
    return IdKind::Lane;
  if (name == "nvvm.read.ptx.sreg.warpid")
    return IdKind::Warp;
  // CUTLASS's canonical_warp_idx_sync (and the kernel layer's warp_idx):
  // the warp index broadcast from lane 0 stays a warp index.
  if (name == "nvvm.shfl.sync" && def->getNumOperands() >= 2 &&
      classifyId(def->getOperand(1)) == IdKind::Warp)
    return IdKind::Warp;
  // tid % 32, tid & 31 -> lane; tid / 32, tid >> 5 -> warp.
  if (def->getNumOperands() != 2)
    return IdKind::None;
  std::optional<int64_t> rhs = getConstantInt(def->getOperand(1));
  if (!rhs || classifyId(def->getOperand(0)) != IdKind::Tid)
    return IdKind::None;
  if (isa<arith::RemUIOp, arith::RemSIOp>(def) && *rhs == 32)
    return IdKind::Lane;
  if (isa<arith::AndIOp>(def) && *rhs == 31)
    return IdKind::Lane;
  if (isa<arith::DivUIOp, arith::DivSIOp>(def) && *rhs == 32)
    return IdKind::Warp;
  if (isa<arith::ShRUIOp, arith::ShRSIOp>(def) && *rhs == 5)
    return IdKind::Warp;
  return IdKind::None;
}

static Guard combine(Guard a, Guard b) {
  if ((a == Guard::OneWarp && b == Guard::OneLanePerWarp) ||
      (b == Guard::OneWarp && a == Guard::OneLanePerWarp))
    return Guard::OneThread;
  return static_cast<int>(a) > static_cast<int>(b) ? a : b;
}

Guard protocol::classifyCondition(Value cond) {
  Operation *def = cond.getDefiningOp();
  if (!def)
    return Guard::None;
  if (def->getName().getStringRef() == "nvvm.elect.sync")
    return Guard::OneLanePerWarp;
  if (auto andOp = dyn_cast<arith::AndIOp>(def))
    return combine(classifyCondition(andOp.getLhs()),
                   classifyCondition(andOp.getRhs()));
  auto cmp = dyn_cast<arith::CmpIOp>(def);
  if (!cmp || cmp.getPredicate() != arith::CmpIPredicate::eq)
    return Guard::None;
  Value id = cmp.getLhs();
  if (!getConstantInt(cmp.getRhs())) {
    if (!getConstantInt(cmp.getLhs()))
      return Guard::None;
    id = cmp.getRhs();
  }
  switch (classifyId(id)) {
  case IdKind::Tid:
    return Guard::OneThread;
  case IdKind::Lane:
    return Guard::OneLanePerWarp;
  case IdKind::Warp:
    return Guard::OneWarp;
  case IdKind::None:
    return Guard::None;
  }
  return Guard::None;
}

Guard protocol::getEnclosingGuard(Operation *op) {
  Guard guard = Guard::None;
  for (Operation *cur = op; cur && !isa<FunctionOpInterface>(cur);
       cur = cur->getParentOp()) {
    auto ifOp = dyn_cast_or_null<scf::IfOp>(cur->getParentOp());
    if (ifOp && cur->getParentRegion() == &ifOp.getThenRegion())
      guard = combine(guard, classifyCondition(ifOp.getCondition()));
  }
  return guard;
}

namespace {
/// Warps [lo, hi) minus `excluded`, and whether only one lane per warp runs.
struct ExecutorRange {
  int64_t lo = 0;
  std::optional<int64_t> hi;
  SmallVector<int64_t> excluded;
  bool oneLane = false;

  void below(int64_t k) { hi = hi ? std::min(*hi, k) : k; }
  void from(int64_t k) { lo = std::max(lo, k); }
};
} // namespace

/// The predicate that holds for (b, a) when `pred` holds for (a, b).
static arith::CmpIPredicate swapOperands(arith::CmpIPredicate pred) {
  using P = arith::CmpIPredicate;
  switch (pred) {
  case P::slt:
    return P::sgt;
  case P::sgt:
    return P::slt;
  case P::sle:
    return P::sge;
  case P::sge:
    return P::sle;
  case P::ult:
    return P::ugt;
  case P::ugt:
    return P::ult;
  case P::ule:
    return P::uge;
  case P::uge:
    return P::ule;
  default:
    return pred; // eq, ne
  }
}

/// Narrows `range` by `cond` (or by its negation, for an else branch);
/// false when the condition is not one the checker can count.
static bool narrow(ExecutorRange &range, Value cond, bool negate) {
  Operation *def = cond.getDefiningOp();
  if (!def)
    return false;
  if (def->getName().getStringRef() == "nvvm.elect.sync") {
    range.oneLane = true;
    return !negate;
  }
  if (auto andOp = dyn_cast<arith::AndIOp>(def))
    return !negate && narrow(range, andOp.getLhs(), false) &&
           narrow(range, andOp.getRhs(), false);
  auto cmp = dyn_cast<arith::CmpIOp>(def);
  if (!cmp)
    return false;
  arith::CmpIPredicate pred = cmp.getPredicate();
  Value id = cmp.getLhs();
  std::optional<int64_t> k = getConstantInt(cmp.getRhs());
  if (!k) {
    k = getConstantInt(cmp.getLhs());
    id = cmp.getRhs();
    pred = swapOperands(pred);
  }
  if (!k || *k < 0)
    return false;
  if (negate)
    pred = arith::invertPredicate(pred);
  using P = arith::CmpIPredicate;
  IdKind kind = classifyId(id);
  if (kind == IdKind::Lane) {
    range.oneLane = true;
    return pred == P::eq;
  }
  if (kind == IdKind::Tid) {
    if (pred == P::eq) {
      range.oneLane = true;
      range.from(*k / 32);
      range.below(*k / 32 + 1);
      return true;
    }
    // Thread ranges count whole warps only on warp boundaries.
    int64_t w = *k / 32;
    switch (pred) {
    case P::ult:
    case P::slt:
      range.below(w);
      return *k % 32 == 0;
    case P::uge:
    case P::sge:
      range.from(w);
      return *k % 32 == 0;
    case P::ule:
    case P::sle:
      range.below(w + 1);
      return *k % 32 == 31;
    case P::ugt:
    case P::sgt:
      range.from(w + 1);
      return *k % 32 == 31;
    default:
      return false;
    }
  }
  if (kind != IdKind::Warp)
    return false;
  switch (pred) {
  case P::eq:
    range.from(*k);
    range.below(*k + 1);
    return true;
  case P::ne:
    range.excluded.push_back(*k);
    return true;
  case P::ult:
  case P::slt:
    range.below(*k);
    return true;
  case P::ule:
  case P::sle:
    range.below(*k + 1);
    return true;
  case P::ugt:
  case P::sgt:
    range.from(*k + 1);
    return true;
  case P::uge:
  case P::sge:
    range.from(*k);
    return true;
  }
  return false;
}

std::optional<Executors> protocol::getExecutors(Operation *op,
                                                int64_t blockDim) {
  ExecutorRange range;
  for (Operation *cur = op;;) {
    Operation *parent = cur->getParentOp();
    if (!parent)
      return std::nullopt;
    if (isa<FunctionOpInterface>(parent))
      break;
    if (auto ifOp = dyn_cast<scf::IfOp>(parent)) {
      bool inElse = cur->getParentRegion() == &ifOp.getElseRegion();
      if (!narrow(range, ifOp.getCondition(), inElse))
        return std::nullopt;
    } else if (!isa<scf::ForOp>(parent)) {
      // Loops with early exits, switches, ...: who gets here is not known.
      return std::nullopt;
    }
    cur = parent;
  }
  if (blockDim > 0) {
    // A partial last warp would make the warp arithmetic wrong.
    if (blockDim % 32 != 0)
      return std::nullopt;
    range.below(blockDim / 32);
  }
  if (!range.hi)
    return std::nullopt;
  int64_t warps = *range.hi - range.lo;
  llvm::sort(range.excluded);
  const int64_t *end = std::unique(range.excluded.begin(), range.excluded.end());
  for (const int64_t *e = range.excluded.begin(); e != end; ++e)
    if (*e >= range.lo && *e < *range.hi)
      --warps;
  // No warp at all is dead code (or an out-of-range constant): not counted.
  if (warps <= 0)
    return std::nullopt;
  return Executors{warps, !range.oneLane};
}

bool protocol::isEmptyBlock(Block *block) {
  return !block || block->empty() ||
         (block->getOperations().size() == 1 &&
          block->back().hasTrait<OpTrait::IsTerminator>());
}

bool protocol::isGuardIf(scf::IfOp ifOp) {
  Guard g = classifyCondition(ifOp.getCondition());
  // `warp == k` picks a warp role; lane/thread/elect conditions narrow who
  // executes inside a role.
  if (g == Guard::None || g == Guard::OneWarp)
    return false;
  return ifOp.getElseRegion().empty() ||
         isEmptyBlock(&ifOp.getElseRegion().front());
}

Block *protocol::getRoleBlock(Operation *op) {
  Block *block = op->getBlock();
  while (block) {
    Operation *parent = block->getParentOp();
    if (!parent || isa<FunctionOpInterface>(parent))
      return block;
    if (auto ifOp = dyn_cast<scf::IfOp>(parent); ifOp && !isGuardIf(ifOp))
      return block;
    block = parent->getBlock();
  }
  return block;
}

namespace {
/// Where the leaves of a condition come from, through pure arith ops.
struct ConditionSources {
  bool loopVariable = false; // an scf.for induction variable or iter_arg
  bool other = false;        // thread ids, memory, helper arguments, ...
};
} // namespace

static void collectSources(Value v, ConditionSources &sources, int depth) {
  if (depth > 64) {
    sources.other = true;
    return;
  }
  if (auto arg = dyn_cast<BlockArgument>(v)) {
    Operation *owner = arg.getOwner()->getParentOp();
    if (isa_and_nonnull<scf::ForOp>(owner)) {
      sources.loopVariable = true;
      return;
    }
    // Arguments of a kernel are the same for every thread; a helper
    // function's arguments may be thread ids (lit tests pass warp ids so).
    auto gpuFunc = dyn_cast_or_null<gpu::GPUFuncOp>(owner);
    if (!gpuFunc || !gpuFunc.isKernel() || !arg.getOwner()->isEntryBlock())
      sources.other = true;
    return;
  }
  if (matchPattern(v, m_Constant()))
    return;
  Operation *def = v.getDefiningOp();
  if (!def || !isa<arith::ArithDialect>(def->getDialect()) ||
      def->getNumRegions() != 0) {
    sources.other = true;
    return;
  }
  for (Value operand : def->getOperands())
    collectSources(operand, sources, depth + 1);
}

bool protocol::isUniformCondition(Value cond) {
  ConditionSources sources;
  collectSources(cond, sources, 0);
  return !sources.loopVariable && !sources.other;
}

bool protocol::isLoopVariableCondition(Value cond) {
  ConditionSources sources;
  collectSources(cond, sources, 0);
  return sources.loopVariable && !sources.other;
}

Operation *protocol::getRoleOwner(Block *roleBlock) {
  return roleBlock->getParentOp();
}

scf::ForOp protocol::getOutermostLoopWithin(Operation *op,
                                            Block *ancestorBlock) {
  scf::ForOp result;
  for (Operation *cur = op; cur && cur->getBlock() != ancestorBlock;) {
    cur = cur->getParentOp();
    if (auto loop = dyn_cast_or_null<scf::ForOp>(cur))
      result = loop;
  }
  return result;
}

//===----------------------------------------------------------------------===//
// States and constants
//===----------------------------------------------------------------------===//

std::optional<int64_t> protocol::getConstantInt(Value v) {
  APInt value;
  if (matchPattern(v, m_ConstantInt(&value)))
    return value.getSExtValue();
  return std::nullopt;
}

std::pair<Value, int64_t> protocol::getStateRoot(Value state) {
  int64_t offset = 0;
  // Chains are short; the bound only guards against malformed IR.
  for (int steps = 0; steps < 1024; ++steps) {
    Operation *def = state.getDefiningOp();
    if (auto adv = dyn_cast_or_null<StateAdvanceOp>(def)) {
      int64_t amount = 1;
      if (adv.getAmount()) {
        std::optional<int64_t> c = getConstantInt(adv.getAmount());
        if (!c)
          break;
        amount = *c;
      }
      offset += amount;
      state = adv.getState();
      continue;
    }
    if (auto arrive = dyn_cast_or_null<OrderArriveOp>(def)) {
      offset += 1;
      state = arrive.getState();
      continue;
    }
    break;
  }
  return {state, offset};
}

std::optional<int64_t> protocol::getConstantTripCount(scf::ForOp loop) {
  std::optional<int64_t> lb = getConstantInt(loop.getLowerBound());
  std::optional<int64_t> ub = getConstantInt(loop.getUpperBound());
  std::optional<int64_t> step = getConstantInt(loop.getStep());
  if (!lb || !ub || !step || *step <= 0)
    return std::nullopt;
  if (*ub <= *lb)
    return 0;
  return (*ub - *lb + *step - 1) / *step;
}

int64_t protocol::getBlockDim(FunctionOpInterface fn, const Options &options) {
  if (options.blockDim > 0)
    return options.blockDim;
  auto gpuFn = dyn_cast<gpu::GPUFuncOp>(fn.getOperation());
  if (!gpuFn)
    return 0;
  std::optional<ArrayRef<int32_t>> size = gpuFn.getKnownBlockSize();
  if (!size || size->size() != 3 || (*size)[1] != 1 || (*size)[2] != 1)
    return 0;
  return (*size)[0];
}
