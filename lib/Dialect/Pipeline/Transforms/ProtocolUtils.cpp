//===- ProtocolUtils.cpp - shared helpers of the protocol checker -------===//
//
// Verb recognition, pipeline names for messages, role regions and guards,
// state distances. See ProtocolChecks.h.
//
//===----------------------------------------------------------------------===//

#include "ProtocolChecks.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Interfaces/CallInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
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
/// A value the evaluation takes as given (a loop's induction variable).
struct Binding {
  Value value;
  int64_t at = 0;
};
} // namespace

static std::optional<int64_t> evalRaw(Value v, int64_t tid, int depth,
                                      const Binding &bound);

/// The value for one thread; an i1 is 0 or 1 (constants and xor with `true`
/// come sign-extended: `true` is -1 and `c ^ true` -2, still nonzero).
static std::optional<int64_t> evalAt(Value v, int64_t tid, int depth,
                                     const Binding &bound) {
  std::optional<int64_t> r = evalRaw(v, tid, depth, bound);
  if (r && v.getType().isInteger(1))
    *r &= 1;
  return r;
}

std::optional<int64_t> protocol::evalForThread(Value v, int64_t tid) {
  return evalAt(v, tid, 0, Binding{});
}

std::optional<int64_t> protocol::evalWithValue(Value v, Value given,
                                               int64_t at) {
  return evalAt(v, 0, 0, Binding{given, at});
}

std::optional<int64_t> protocol::evalForThreadWith(Value v, int64_t tid,
                                                   Value given, int64_t at) {
  return evalAt(v, tid, 0, Binding{given, at});
}

static std::optional<int64_t> evalRaw(Value v, int64_t tid, int depth,
                                      const Binding &bound) {
  if (depth > 64)
    return std::nullopt;
  if (bound.value && v == bound.value)
    return bound.at;
  Operation *def = v.getDefiningOp();
  if (!def)
    return std::nullopt;
  auto in = [&](unsigned i, int64_t t) {
    return evalAt(def->getOperand(i), t, depth + 1, bound);
  };
  if (std::optional<int64_t> c = getConstantInt(v))
    return c;
  if (auto tidOp = dyn_cast<gpu::ThreadIdOp>(def))
    return tidOp.getDimension() == gpu::Dimension::x ? tid : 0;
  StringRef name = def->getName().getStringRef();
  if (name == "nvvm.read.ptx.sreg.tid.x")
    return tid;
  if (name == "nvvm.read.ptx.sreg.tid.y" || name == "nvvm.read.ptx.sreg.tid.z")
    return 0;
  if (name == "nvvm.read.ptx.sreg.laneid" || isa<gpu::LaneIdOp>(def))
    return tid % 32;
  // %warpid and the subgroup id: the warp index of a 1-D block.
  if (name == "nvvm.read.ptx.sreg.warpid" || isa<gpu::SubgroupIdOp>(def))
    return tid / 32;
  if (isa<NVVM::ElectSyncOp>(def))
    return tid % 32 == 0;
  if (auto shfl = dyn_cast<NVVM::ShflOp>(def)) {
    std::optional<int64_t> lane = evalAt(shfl.getOffset(), tid, depth + 1, bound);
    if (shfl.getKind() != NVVM::ShflKind::idx || !lane || *lane < 0 ||
        *lane > 31 || shfl.getReturnValueAndIsValid())
      return std::nullopt;
    return evalAt(shfl.getVal(), tid - tid % 32 + *lane, depth + 1, bound);
  }
  if (isa<arith::ExtUIOp, arith::ExtSIOp, arith::TruncIOp, arith::IndexCastOp,
          arith::IndexCastUIOp>(def))
    return in(0, tid);
  if (auto sel = dyn_cast<arith::SelectOp>(def)) {
    std::optional<int64_t> c = in(0, tid);
    if (!c)
      return std::nullopt;
    return in(*c ? 1 : 2, tid);
  }
  if (def->getNumOperands() != 2 || def->getDialect()->getNamespace() != "arith")
    return std::nullopt;
  std::optional<int64_t> a = in(0, tid), b = in(1, tid);
  if (!a || !b)
    return std::nullopt;
  if (auto cmp = dyn_cast<arith::CmpIOp>(def)) {
    // Thread-id arithmetic stays small and non-negative: signed and
    // unsigned orders agree.
    switch (cmp.getPredicate()) {
    case arith::CmpIPredicate::eq:
      return *a == *b;
    case arith::CmpIPredicate::ne:
      return *a != *b;
    case arith::CmpIPredicate::slt:
    case arith::CmpIPredicate::ult:
      return *a < *b;
    case arith::CmpIPredicate::sle:
    case arith::CmpIPredicate::ule:
      return *a <= *b;
    case arith::CmpIPredicate::sgt:
    case arith::CmpIPredicate::ugt:
      return *a > *b;
    case arith::CmpIPredicate::sge:
    case arith::CmpIPredicate::uge:
      return *a >= *b;
    }
  }
  if (isa<arith::AddIOp>(def))
    return *a + *b;
  if (isa<arith::SubIOp>(def))
    return *a - *b;
  if (isa<arith::MulIOp>(def))
    return *a * *b;
  if (isa<arith::DivSIOp, arith::DivUIOp>(def))
    return *b ? std::optional<int64_t>(*a / *b) : std::nullopt;
  if (isa<arith::RemSIOp, arith::RemUIOp>(def))
    return *b ? std::optional<int64_t>(*a % *b) : std::nullopt;
  if (isa<arith::AndIOp>(def))
    return *a & *b;
  if (isa<arith::OrIOp>(def))
    return *a | *b;
  if (isa<arith::XOrIOp>(def))
    return *a ^ *b;
  if (isa<arith::ShLIOp>(def))
    return *b >= 0 && *b < 63 ? std::optional<int64_t>(*a << *b) : std::nullopt;
  if (isa<arith::ShRUIOp, arith::ShRSIOp>(def))
    return *b >= 0 && *b < 63 ? std::optional<int64_t>(*a >> *b) : std::nullopt;
  return std::nullopt;
}


/// "warps 4-7" / "warps 4-7, 9".
std::string protocol::describeWarps(const llvm::BitVector &warps) {
  std::string out;
  int first = warps.find_first();
  while (first >= 0) {
    int last = first;
    while (last + 1 < static_cast<int>(warps.size()) && warps.test(last + 1))
      ++last;
    if (!out.empty())
      out += ", ";
    out += std::to_string(first);
    if (last > first)
      out += "-" + std::to_string(last);
    first = last + 1 < static_cast<int>(warps.size()) ? warps.find_next(last)
                                                      : -1;
  }
  return (warps.count() == 1 ? "warp " : "warps ") + out;
}

/// Threads the 1-D evaluation enumerates when the block size is unknown: the
/// largest CTA. A set that reaches its last warp is open-ended (`warp >= 1`)
/// and depends on the real size.
static constexpr int64_t kMaxBlockThreads = 1024;

/// The executors of a set of threads (the first `limit` of `threads`), by
/// warp: every warp all 32 lanes or one (elect, lane == c, tid == c), all
/// alike. No warp at all is dead code (or an out-of-range constant): not
/// counted. Shared by getExecutorsWith and getWarpExecutors.
static std::optional<Executors> warpsOf(llvm::BitVector threads,
                                        int64_t limit) {
  int64_t warps = 0, whole = 0;
  for (int64_t w = 0; w < limit / 32; ++w) {
    int64_t lanes = 0;
    for (int64_t l = 0; l < 32; ++l)
      lanes += threads.test(w * 32 + l);
    if (lanes == 0)
      continue;
    if (lanes != 32 && lanes != 1)
      return std::nullopt;
    ++warps;
    whole += lanes == 32;
  }
  if (warps == 0 || (whole != 0 && whole != warps))
    return std::nullopt;
  return Executors{warps, whole == warps, std::move(threads)};
}


std::optional<Executors> protocol::getExecutors(Operation *op,
                                                int64_t blockDim) {
  return getExecutorsWith(op, blockDim, Value(), 0);
}

std::optional<Executors> protocol::getExecutorsWith(Operation *op,
                                                    int64_t blockDim,
                                                    Value given, int64_t at) {
  // The branch conditions on the way up, with the side `op` is on.
  SmallVector<std::pair<Value, bool>> conds;
  for (Operation *cur = op;;) {
    Operation *parent = cur->getParentOp();
    if (!parent)
      return std::nullopt;
    if (isa<FunctionOpInterface>(parent))
      break;
    if (auto ifOp = dyn_cast<scf::IfOp>(parent)) {
      conds.push_back({ifOp.getCondition(),
                       cur->getParentRegion() == &ifOp.getThenRegion()});
    } else if (!isa<scf::ForOp>(parent)) {
      // Loops with early exits, switches, ...: who gets here is not known.
      return std::nullopt;
    }
    cur = parent;
  }
  // A partial last warp would make the warp arithmetic wrong.
  if (blockDim > 0 && (blockDim % 32 != 0 || blockDim > kMaxBlockThreads))
    return std::nullopt;
  if (blockDim <= 0 && conds.empty())
    return std::nullopt;
  // Every thread of the block, through every condition: comparisons,
  // equalities, and/or/xor of thread, warp (tid / 32, %warpid, the shfl
  // broadcast), warpgroup (warp / 4, tid / 128) and lane ids with constants;
  // an else branch is the complement. Anything else (kernel arguments, loop
  // variables, memory) is not counted.
  int64_t limit = blockDim > 0 ? blockDim : kMaxBlockThreads;
  llvm::BitVector threads(limit);
  for (int64_t tid = 0; tid < limit; ++tid) {
    bool runs = true;
    for (auto [cond, inThen] : conds) {
      std::optional<int64_t> c = evalAt(cond, tid, 0, Binding{given, at});
      if (!c)
        return std::nullopt;
      if (static_cast<bool>(*c) != inThen) {
        runs = false;
        break;
      }
    }
    if (runs)
      threads.set(tid);
  }
  if (blockDim <= 0 && threads.find_next(limit - 33) >= 0)
    return std::nullopt;
  return warpsOf(std::move(threads), limit);
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

bool protocol::isThreadSplit(scf::IfOp ifOp) {
  Value cond = ifOp.getCondition();
  return !isUniformCondition(cond) && !isLoopVariableCondition(cond) &&
         evalForThread(cond, 0).has_value();
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

/// The verbs whose barrier wait reads the state's phase, per side: a state
/// that only reaches commits and releases (`producer_commit_w_index` builds
/// one with phase 0) has a phase nobody reads.
bool protocol::readsPhase(Verb v) {
  return v == Verb::Acquire || v == Verb::TryAcquire || v == Verb::Tail ||
         v == Verb::Wait || v == Verb::TryWait || v == Verb::OrderWait;
}

/// The phase-reading verbs that `start` reaches, following the state
/// through advances, loop carries and scf.if results.
SmallVector<Operation *> protocol::phaseReaders(Value start) {
  SmallVector<Operation *> readers;
  llvm::SetVector<Value> values;
  values.insert(start);
  for (unsigned i = 0; i < values.size(); ++i)
    for (OpOperand &use : values[i].getUses()) {
      Operation *user = use.getOwner();
      if (std::optional<VerbRef> verb = getVerb(user);
          verb && verb->state == values[i] && readsPhase(verb->verb))
        readers.push_back(user);
      if (isa<StateAdvanceOp, OrderArriveOp>(user)) {
        values.insert(user->getResult(0));
      } else if (auto loop = dyn_cast<scf::ForOp>(user)) {
        if (use.getOperandNumber() >= loop.getNumControlOperands()) {
          unsigned idx = use.getOperandNumber() - loop.getNumControlOperands();
          values.insert(loop.getRegionIterArgs()[idx]);
          values.insert(loop.getResult(idx));
        }
      } else if (auto yield = dyn_cast<scf::YieldOp>(user)) {
        Operation *parent = yield->getParentOp();
        unsigned idx = use.getOperandNumber();
        if (auto loop = dyn_cast<scf::ForOp>(parent)) {
          values.insert(loop.getRegionIterArgs()[idx]);
          values.insert(loop.getResult(idx));
        } else if (isa<scf::IfOp>(parent)) {
          values.insert(parent->getResult(idx));
        }
      }
    }
  return readers;
}

/// True when `before` runs earlier than `op` in program order: an ancestor
/// of `before` precedes an ancestor of `op` in a common block.
bool protocol::runsBefore(Operation *before, Operation *op) {
  for (Operation *b = before; b; b = b->getParentOp())
    for (Operation *o = op; o; o = o->getParentOp())
      if (o->getBlock() && o->getBlock() == b->getBlock())
        return b != o && b->isBeforeInBlock(o);
  return false;
}

/// Whether `v`, an address, is the same in every warp: constants, kernel
/// arguments, CTA and cluster ids, and pure arithmetic on them.
bool protocol::uniformAddress(Value v, int depth) {
  if (depth > 32)
    return false;
  if (getConstantInt(v))
    return true;
  if (auto arg = dyn_cast<BlockArgument>(v)) {
    auto fn = dyn_cast_or_null<gpu::GPUFuncOp>(arg.getOwner()->getParentOp());
    return fn && fn.isKernel() && arg.getOwner()->isEntryBlock();
  }
  Operation *def = v.getDefiningOp();
  StringRef name = def->getName().getStringRef();
  if (name.consume_front("nvvm.read.ptx.sreg."))
    return name.starts_with("ctaid") || name.starts_with("nctaid") ||
           name.starts_with("cluster") || name.starts_with("nclusterid");
  if (isa<gpu::BlockIdOp, gpu::GridDimOp, gpu::BlockDimOp,
          LLVM::AddressOfOp>(def))
    return true;
  // Any other leaf (thread, lane and warp ids, clocks, elect) may differ.
  if (def->getNumOperands() == 0 || def->getNumRegions() ||
      !isMemoryEffectFree(def))
    return false;
  return llvm::all_of(def->getOperands(),
                      [&](Value in) { return uniformAddress(in, depth + 1); });
}

/// Whether the function may write global memory (a store or atomic outside
/// shared memory, a TMA or bulk store): a count loaded from it may then
/// change between the warps' reads.
bool protocol::writesGlobal(FunctionOpInterface fn) {
  auto outsideShared = [](Value ptr) {
    auto t = dyn_cast<LLVM::LLVMPointerType>(ptr.getType());
    return !t || t.getAddressSpace() != 3;
  };
  return fn->walk([&](Operation *op) {
             bool writes = false;
             if (auto st = dyn_cast<LLVM::StoreOp>(op))
               writes = outsideShared(st.getAddr());
             else if (auto rmw = dyn_cast<LLVM::AtomicRMWOp>(op))
               writes = outsideShared(rmw.getPtr());
             else if (auto cas = dyn_cast<LLVM::AtomicCmpXchgOp>(op))
               writes = outsideShared(cas.getPtr());
             else
               writes =
                   isa<TmaStoreOp, NVVM::CpAsyncBulkTensorSharedCTAToGlobalOp,
                       NVVM::CpAsyncBulkSharedCTAToGlobalOp,
                       NVVM::CpAsyncBulkTensorReduceOp, CallOpInterface>(op);
             return writes ? WalkResult::interrupt() : WalkResult::advance();
           })
      .wasInterrupted();
}

/// Whether `v` is the same in every warp of the CTA at any one time:
/// constants, kernel arguments, CTA and cluster ids, induction variables of
/// loops with such bounds, loads of such addresses from memory nothing in
/// the kernel writes (`readOnly`: constant memory, or global memory when
/// the function writes none), pure arithmetic on them.
bool protocol::sameForEveryWarp(Value v, bool noGlobalWrites, int depth) {
  if (depth > 32)
    return false;
  if (uniformAddress(v))
    return true;
  if (auto arg = dyn_cast<BlockArgument>(v)) {
    auto loop = dyn_cast_or_null<scf::ForOp>(arg.getOwner()->getParentOp());
    return loop && arg == loop.getInductionVar() &&
           sameForEveryWarp(loop.getLowerBound(), noGlobalWrites, depth + 1) &&
           sameForEveryWarp(loop.getUpperBound(), noGlobalWrites, depth + 1) &&
           sameForEveryWarp(loop.getStep(), noGlobalWrites, depth + 1);
  }
  Operation *def = v.getDefiningOp();
  if (auto load = dyn_cast<LLVM::LoadOp>(def)) {
    auto t = cast<LLVM::LLVMPointerType>(load.getAddr().getType());
    bool readOnly = t.getAddressSpace() == 4 ||
                    (t.getAddressSpace() != 3 && noGlobalWrites);
    return readOnly && uniformAddress(load.getAddr());
  }
  if (def->getNumOperands() == 0 || def->getNumRegions() ||
      !isMemoryEffectFree(def))
    return false;
  return llvm::all_of(def->getOperands(), [&](Value in) {
    return sameForEveryWarp(in, noGlobalWrites, depth + 1);
  });
}

/// Who runs `op`, from the scf.if conditions around it that may differ
/// between warps (a branch every warp takes alike, on a loop variable, a
/// kernel argument or a count in constant memory, narrows a role and adds
/// no warps: left out), evaluated per thread with `given` taken as `at`
/// (getExecutors' rules otherwise). nullopt when not decided.
std::optional<Executors>
protocol::getWarpExecutors(Operation *op, int64_t blockDim,
                           bool noGlobalWrites, Value given, int64_t at) {
  SmallVector<std::pair<Value, bool>> conds;
  for (Operation *cur = op;;) {
    Operation *parent = cur->getParentOp();
    if (!parent)
      return std::nullopt;
    if (isa<FunctionOpInterface>(parent))
      break;
    if (auto ifOp = dyn_cast<scf::IfOp>(parent)) {
      if (!sameForEveryWarp(ifOp.getCondition(), noGlobalWrites))
        conds.push_back({ifOp.getCondition(),
                         cur->getParentRegion() == &ifOp.getThenRegion()});
    } else if (!isa<scf::ForOp>(parent)) {
      return std::nullopt;
    }
    cur = parent;
  }
  if (blockDim <= 0 || blockDim % 32 || blockDim > 1024)
    return std::nullopt;
  llvm::BitVector threads(blockDim);
  for (int64_t tid = 0; tid < blockDim; ++tid) {
    bool runs = true;
    for (auto [cond, inThen] : conds) {
      std::optional<int64_t> c = evalForThreadWith(cond, tid, given, at);
      if (!c)
        return std::nullopt;
      if (static_cast<bool>(*c) != inThen) {
        runs = false;
        break;
      }
    }
    if (runs)
      threads.set(tid);
  }
  return warpsOf(std::move(threads), blockDim);
}
