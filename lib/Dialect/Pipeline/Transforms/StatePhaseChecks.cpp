//===- StatePhaseChecks.cpp - phases decided from static loop structure ---===//
//
// Property 14 of pipeline-verify-protocol: a wait reads the parity the
// barrier of its stage will have at that point, where the loop structure
// decides it. Three shapes of the bug users report, each where it is decided
// without guessing:
//
// - A start state made inside a loop (make_pipeline_state in the persistent
//   tile loop) restarts at (index 0, start phase) every iteration while the
//   barriers keep their phases. It is right only when one iteration walks a
//   multiple of 2 x stages (every stage back at its start parity); anything
//   else, including a walk the checker cannot count, is reported. An
//   (index, phase) pair computed from an inner loop's variables alone
//   restarts the same way in every iteration of the loop around it.
// - An (index, phase) pair computed from a loop's variables
//   (`*_w_index_phase(k % S, k % 2)`, tilelang#3087) whose index walks the
//   ring with a constant stride but whose phase does not flip exactly when
//   the index wraps.
// - The same pair whose first iteration is its side's first wait on the
//   pipeline at index 0 with the other side's start phase
//   (flash-attention#1317's shape, with the phase carried by the loop;
//   constant phases are property 3's).
//
// Loop values are evaluated by running the loop's integer iter args and
// induction variable through arith ops for a few laps of the ring; whatever
// depends on anything else (outer loops, kernel arguments, memory) is left
// alone.
//
//===----------------------------------------------------------------------===//

#include "ProtocolChecks.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

#include "llvm/ADT/SetVector.h"

using namespace mlir;
using namespace mlir::pipeline;
using namespace mlir::pipeline::protocol;


/// The nearest scf.for / scf.while around `op` inside its function.
static Operation *enclosingLoop(Operation *op) {
  for (Operation *p = op->getParentOp(); p && !isa<FunctionOpInterface>(p);
       p = p->getParentOp())
    if (isa<scf::ForOp, scf::WhileOp>(p))
      return p;
  return nullptr;
}

static bool definedOutside(Value v, Operation *loop) {
  if (Operation *def = v.getDefiningOp())
    return !loop->isAncestor(def);
  return !loop->isAncestor(cast<BlockArgument>(v).getOwner()->getParentOp());
}

/// How the user wrote the state, for messages.
static std::string pythonMake(StateMakeOp make) {
  StateType type = make.getType();
  std::string stages = std::to_string(type.getStages());
  if (!make.getIndex() && !make.getPhase() && !make.getCount()) {
    if (type.getRole() == Role::Producer)
      return "make_pipeline_state(PipelineUserType.Producer, " + stages + ")";
    if (type.getRole() == Role::Consumer)
      return "make_pipeline_state(PipelineUserType.Consumer, " + stages + ")";
  }
  if (type.getSimple())
    return "PipelineStateSimple(" + stages + ", ...)";
  return "PipelineState(" + stages + ", ...)";
}

static StringRef roleName(Role role) {
  return role == Role::Producer   ? "producer"
         : role == Role::Consumer ? "consumer"
                                  : "producer_consumer";
}

//===----------------------------------------------------------------------===//
// (a) Start states made inside a loop
//===----------------------------------------------------------------------===//

namespace {
/// The stages advanced (offset from the make) of each state value a chain
/// reaches in one iteration of the loop around its make.
struct Walk {
  llvm::DenseMap<Value, int64_t> offsets;
  bool known = true;
  bool escapes = false; // yielded to the loop around the make
};
} // namespace

static void follow(Value v, int64_t off, Walk &w, Operation *loop, int depth);

/// Stages one iteration of `inner` advances its iter arg `idx` (the offset of
/// the value it yields), or nullopt.
static std::optional<int64_t> perIteration(scf::ForOp inner, unsigned idx,
                                           int depth) {
  Walk w;
  follow(inner.getRegionIterArgs()[idx], 0, w, inner, depth + 1);
  if (!w.known)
    return std::nullopt;
  Value yielded = inner.getBody()->getTerminator()->getOperand(idx);
  auto it = w.offsets.find(yielded);
  if (it == w.offsets.end())
    return std::nullopt;
  return it->second;
}

static void follow(Value v, int64_t off, Walk &w, Operation *loop, int depth) {
  if (!w.known)
    return;
  if (depth > 8) {
    w.known = false;
    return;
  }
  auto [it, inserted] = w.offsets.try_emplace(v, off);
  if (!inserted) {
    // Branches that advance differently: the walk is not one number.
    if (it->second != off)
      w.known = false;
    return;
  }
  for (OpOperand &use : v.getUses()) {
    Operation *user = use.getOwner();
    if (auto adv = dyn_cast<StateAdvanceOp>(user)) {
      int64_t amount = 1;
      if (adv.getAmount()) {
        std::optional<int64_t> c = getConstantInt(adv.getAmount());
        if (!c) {
          w.known = false;
          return;
        }
        amount = *c;
      }
      follow(adv.getResult(), off + amount, w, loop, depth);
    } else if (auto inner = dyn_cast<scf::ForOp>(user)) {
      if (use.getOperandNumber() < inner.getNumControlOperands())
        continue;
      unsigned idx = use.getOperandNumber() - inner.getNumControlOperands();
      std::optional<int64_t> step = perIteration(inner, idx, depth);
      if (!step) {
        w.known = false;
        return;
      }
      int64_t total = 0;
      if (*step != 0) {
        std::optional<int64_t> trips = getConstantTripCount(inner);
        if (!trips) {
          w.known = false;
          return;
        }
        total = *step * std::max<int64_t>(*trips, 0);
      }
      follow(inner.getResult(idx), off + total, w, loop, depth);
    } else if (isa<scf::YieldOp>(user)) {
      Operation *parent = user->getParentOp();
      if (parent == loop)
        w.escapes = true;
      else if (isa<scf::IfOp>(parent))
        follow(parent->getResult(use.getOperandNumber()), off, w, loop, depth);
      else
        w.known = false;
    } else if (!getVerb(user) &&
               !isa<StateIndexOp, StatePhaseOp, StateCountOp>(user)) {
      // scf.while, calls, ops the walk does not know.
      w.known = false;
    }
  }
}

/// True when every scf.if between `loop` and `op` is a role split or a
/// guard (its condition depends on thread ids and constants only): `op`
/// then runs in every iteration, for the threads of its role.
static bool runsEveryIteration(Operation *op, Operation *loop) {
  for (Operation *p = op->getParentOp(); p && p != loop; p = p->getParentOp()) {
    auto ifOp = dyn_cast<scf::IfOp>(p);
    if (!ifOp)
      continue;
    if (isGuardIf(ifOp))
      continue;
    if (!evalForThread(ifOp.getCondition(), 0))
      return false;
  }
  return true;
}

static bool checkRestartedStarts(FunctionOpInterface fn) {
  bool failed = false;
  fn->walk([&](StateMakeOp make) {
    StateType type = make.getType();
    // Only a side's start state: no operands, the form make_pipeline_state
    // builds. States made from values are positions (property 14's other
    // shapes evaluate them).
    if (make.getIndex() || make.getPhase() || make.getCount() ||
        type.getRole() == Role::ProducerConsumer)
      return;
    Operation *loop = enclosingLoop(make);
    if (!loop)
      return;
    if (auto forOp = dyn_cast<scf::ForOp>(loop))
      if (std::optional<int64_t> trips = getConstantTripCount(forOp);
          trips && *trips <= 1)
        return;
    // The waits that read it inside the loop, on pipelines made outside it
    // (a pipeline created in the loop starts its barriers again too).
    Operation *reader = nullptr;
    for (Operation *r : phaseReaders(make.getResult())) {
      VerbRef verb = *getVerb(r);
      if (loop->isAncestor(r) && definedOutside(verb.pipeline, loop) &&
          runsEveryIteration(r, loop)) {
        reader = r;
        break;
      }
    }
    if (!reader)
      return;
    Walk walk;
    follow(make.getResult(), 0, walk, loop, 0);
    if (walk.escapes)
      return;
    int64_t stages = type.getStages();
    std::optional<int64_t> length;
    if (walk.known) {
      length = 0;
      for (auto &[v, off] : walk.offsets)
        length = std::max(*length, off);
    }
    // Every stage back at its start parity: the restart is a no-op.
    if (length && *length > 0 && *length % (2 * stages) == 0)
      return;
    VerbRef verb = *getVerb(reader);
    InFlightDiagnostic diag = make.emitError();
    diag << describe(verb.pipeline) << ": the " << roleName(type.getRole())
         << " state is made inside a loop (" << pythonMake(make)
         << " runs again every iteration, back at index 0 and its start phase) "
            "while the pipeline's barriers keep their phases: one iteration "
            "walks ";
    if (length)
      diag << *length << " stage(s), not a multiple of 2 x " << stages
           << " stages, ";
    else
      diag << "a number of stages not provably a multiple of 2 x " << stages
           << " (a run-time trip count or advance), ";
    diag << "so the next iteration's " << reader->getName()
         << " reads a phase its stage no longer has (it hangs, or passes on "
            "the stage's previous contents); make the state once before the "
            "loop and carry it (k.range(..., carry=[state]))";
    diag.attachNote(loop->getLoc()) << "the loop that restarts the state";
    diag.attachNote(reader->getLoc())
        << reader->getName() << " reads the restarted state here";
    failed = true;
  });
  return failed;
}

//===----------------------------------------------------------------------===//
// (b), (c) (index, phase) computed from loop variables
//===----------------------------------------------------------------------===//

using Env = llvm::DenseMap<Value, int64_t>;

/// The value of integer `v` given `env` (a loop's induction variable and
/// integer iter args), through constants and arith ops; nullopt otherwise.
static std::optional<int64_t> evalWith(Value v, const Env &env, int depth = 0) {
  if (depth > 32)
    return std::nullopt;
  if (auto it = env.find(v); it != env.end())
    return it->second;
  Operation *def = v.getDefiningOp();
  if (!def)
    return std::nullopt;
  if (std::optional<int64_t> c = getConstantInt(v))
    return c;
  if (isa<arith::IndexCastOp, arith::IndexCastUIOp, arith::ExtSIOp,
          arith::ExtUIOp, arith::TruncIOp>(def))
    return evalWith(def->getOperand(0), env, depth + 1);
  // A carried index that wraps by hand (`idx == S - 1 ? 0 : idx + 1`).
  if (auto select = dyn_cast<arith::SelectOp>(def)) {
    std::optional<int64_t> c = evalWith(select.getCondition(), env, depth + 1);
    if (!c)
      return std::nullopt;
    return evalWith(*c ? select.getTrueValue() : select.getFalseValue(), env,
                    depth + 1);
  }
  if (auto cmp = dyn_cast<arith::CmpIOp>(def)) {
    std::optional<int64_t> a = evalWith(cmp.getLhs(), env, depth + 1);
    std::optional<int64_t> b = evalWith(cmp.getRhs(), env, depth + 1);
    if (!a || !b)
      return std::nullopt;
    switch (cmp.getPredicate()) {
    case arith::CmpIPredicate::eq:
      return int64_t(*a == *b);
    case arith::CmpIPredicate::ne:
      return int64_t(*a != *b);
    case arith::CmpIPredicate::slt:
      return int64_t(*a < *b);
    case arith::CmpIPredicate::sle:
      return int64_t(*a <= *b);
    case arith::CmpIPredicate::sgt:
      return int64_t(*a > *b);
    case arith::CmpIPredicate::sge:
      return int64_t(*a >= *b);
    default:
      return std::nullopt; // unsigned compares of possibly negative values
    }
  }
  if (def->getNumOperands() != 2 || def->getNumResults() != 1)
    return std::nullopt;
  std::optional<int64_t> a = evalWith(def->getOperand(0), env, depth + 1);
  std::optional<int64_t> b = evalWith(def->getOperand(1), env, depth + 1);
  if (!a || !b)
    return std::nullopt;
  int64_t x = *a, y = *b;
  bool nonneg = x >= 0 && y >= 0;
  if (isa<arith::AddIOp>(def))
    return x + y;
  if (isa<arith::SubIOp>(def))
    return x - y;
  if (isa<arith::MulIOp>(def))
    return x * y;
  if (isa<arith::AndIOp>(def))
    return x & y;
  if (isa<arith::OrIOp>(def))
    return x | y;
  if (isa<arith::XOrIOp>(def))
    return x ^ y;
  if (isa<arith::MaxSIOp>(def))
    return std::max(x, y);
  if (isa<arith::MinSIOp>(def))
    return std::min(x, y);
  if (y != 0 && isa<arith::DivSIOp>(def))
    return x / y;
  if (y != 0 && isa<arith::RemSIOp>(def))
    return x % y;
  if (y > 0 && nonneg && isa<arith::DivUIOp>(def))
    return x / y;
  if (y > 0 && nonneg && isa<arith::RemUIOp>(def))
    return x % y;
  if (y > 0 && isa<arith::FloorDivSIOp>(def))
    return x >= 0 ? x / y : -((-x + y - 1) / y);
  if (y >= 0 && y < 32 && isa<arith::ShLIOp>(def))
    return x << y;
  if (y >= 0 && y < 32 && nonneg && isa<arith::ShRSIOp, arith::ShRUIOp>(def))
    return x >> y;
  return std::nullopt;
}

/// The environments of the first `n` iterations of `loop` (constant lower
/// bound and step): its induction variable and the integer iter args whose
/// initial value is constant and whose yield keeps evaluating.
static SmallVector<Env> iterate(scf::ForOp loop, int64_t n) {
  SmallVector<Env> out;
  std::optional<int64_t> lb = getConstantInt(loop.getLowerBound());
  std::optional<int64_t> step = getConstantInt(loop.getStep());
  if (!lb || !step || *step <= 0)
    return out;
  if (std::optional<int64_t> trips = getConstantTripCount(loop))
    n = std::min(n, *trips);
  Env env;
  for (auto [arg, init] :
       llvm::zip(loop.getRegionIterArgs(), loop.getInitArgs()))
    if (arg.getType().isIntOrIndex())
      if (std::optional<int64_t> c = getConstantInt(init))
        env[arg] = *c;
  Operation *yield = loop.getBody()->getTerminator();
  for (int64_t j = 0; j < n; ++j) {
    env[loop.getInductionVar()] = *lb + j * *step;
    out.push_back(env);
    Env next;
    for (auto [i, arg] : llvm::enumerate(loop.getRegionIterArgs()))
      if (env.count(arg))
        if (std::optional<int64_t> v = evalWith(yield->getOperand(i), env))
          next[arg] = *v;
    env = std::move(next);
  }
  return out;
}

namespace {
struct Position {
  int64_t index, phase;
};
} // namespace

/// The (index, phase) a state.make gives in the iteration `env`.
static std::optional<Position> positionAt(StateMakeOp make, const Env &env) {
  StateType type = make.getType();
  int64_t stages = type.getStages();
  if (type.getSimple()) {
    if (!make.getIndex())
      return std::nullopt;
    std::optional<int64_t> packed = evalWith(make.getIndex(), env);
    if (!packed || *packed < 0)
      return std::nullopt;
    return Position{*packed % stages, (*packed / stages) & 1};
  }
  if (!make.getIndex() || !make.getPhase())
    return std::nullopt;
  std::optional<int64_t> index = evalWith(make.getIndex(), env);
  std::optional<int64_t> phase = evalWith(make.getPhase(), env);
  if (!index || !phase || *index < 0 || *index >= stages)
    return std::nullopt;
  return Position{*index, *phase & 1};
}

static bool dependsOnLoop(StateMakeOp make, scf::ForOp loop) {
  for (Value v : make->getOperands())
    if (!getConstantInt(v) && loop->isAncestor(make) &&
        !definedOutside(v, loop))
      return true;
  return false;
}

/// (b): an index walking the ring with a constant stride d whose phase does
/// not flip exactly when the index wraps.
static bool checkPhaseFlips(StateMakeOp make, scf::ForOp loop,
                            ArrayRef<Env> iters, Operation *reader) {
  StateType type = make.getType();
  if (type.getSimple())
    return false; // index and phase come from one number: always in step
  int64_t stages = type.getStages();
  SmallVector<Position> pos;
  for (const Env &env : iters) {
    std::optional<Position> p = positionAt(make, env);
    if (!p)
      return false;
    pos.push_back(*p);
  }
  if (pos.size() < 2)
    return false;
  int64_t stride = ((pos[1].index - pos[0].index) % stages + stages) % stages;
  if (stages == 1)
    stride = 1;
  if (stride == 0)
    return false; // one stage every iteration: not a walk of the ring
  for (size_t j = 0; j + 1 < pos.size(); ++j)
    if (pos[j + 1].index != (pos[j].index + stride) % stages)
      return false;
  for (size_t j = 0; j + 1 < pos.size(); ++j) {
    bool wraps = ((pos[j].index + stride) / stages) & 1;
    int64_t expected = pos[j].phase ^ int64_t(wraps);
    if (pos[j + 1].phase == expected)
      continue;
    std::optional<int64_t> lb = getConstantInt(loop.getLowerBound());
    std::optional<int64_t> step = getConstantInt(loop.getStep());
    int64_t k = *lb + int64_t(j + 1) * *step;
    VerbRef verb = *getVerb(reader);
    InFlightDiagnostic diag = make.emitError();
    diag << describe(verb.pipeline) << ": the phase given to this state "
         << (wraps ? "stays " : "flips ") << "at iteration " << k
         << " of the loop, where the index goes from " << pos[j].index
         << " to " << pos[j + 1].index << " of " << stages
         << " stages: a stage's barrier phase flips once per lap of the ring "
            "(when the index wraps to the start), not every iteration, so "
         << reader->getName()
         << " waits for a phase its stage is not in (it hangs, or passes on "
            "the stage's previous contents); compute the phase as (k // "
         << stages
         << ") % 2 for a loop variable counting stages from 0 (the start "
            "phase for a consumer; xor 1 for a producer), or use a "
            "PipelineState and advance() it every iteration";
    // A phase carried by the loop is computed by what the loop yields.
    Value phase = make.getPhase();
    if (auto arg = dyn_cast<BlockArgument>(phase);
        arg && arg.getOwner() == loop.getBody() && arg.getArgNumber() > 0)
      phase = loop.getBody()->getTerminator()->getOperand(arg.getArgNumber() -
                                                          1);
    if (Operation *def = phase.getDefiningOp())
      diag.attachNote(def->getLoc()) << "phase computed here";
    diag.attachNote(loop->getLoc()) << "the loop";
    diag.attachNote(reader->getLoc())
        << reader->getName() << " reads the state here";
    return true;
  }
  return false;
}

/// (c): the first iteration is its side's first wait on the pipeline, at
/// index 0, with the other side's start phase.
static bool checkLoopStart(
    StateMakeOp make, scf::ForOp loop, ArrayRef<Env> iters,
    ArrayRef<Operation *> readers,
    llvm::DenseMap<std::pair<Value, unsigned>, SmallVector<Operation *>>
        &waiters) {
  StateType type = make.getType();
  // Constant operands are property 3's (checkInitialPhases).
  if (!dependsOnLoop(make, loop) || iters.empty())
    return false;
  if (make.getCount()) {
    std::optional<int64_t> count = evalWith(make.getCount(), iters.front());
    if (!count || *count != 0)
      return false;
  }
  std::optional<int64_t> packed;
  if (type.getSimple()) {
    packed = evalWith(make.getIndex(), iters.front());
    if (!packed)
      return false;
  }
  std::optional<Position> start = positionAt(make, iters.front());
  if (!start || start->index != 0)
    return false;
  bool eitherSide = type.getRole() == Role::ProducerConsumer;
  bool producer = type.getRole() == Role::Producer;
  Operation *first = nullptr;
  for (Operation *reader : readers) {
    VerbRef verb = *getVerb(reader);
    bool readerSide = isProducerVerb(verb.verb);
    if (!eitherSide && readerSide != producer)
      continue;
    if (verb.verb == Verb::OrderWait)
      continue;
    auto &same = waiters[{verb.pipeline, unsigned(readerSide)}];
    if (llvm::none_of(same, [&](Operation *other) {
          return runsBefore(other, reader);
        })) {
      first = reader;
      producer = readerSide;
      break;
    }
  }
  if (!first)
    return false;
  // A packed producer state counts from `stages`: below it is before the
  // start; a packed consumer at or above `stages` is one lap in (legal).
  bool wrong = type.getSimple()
                   ? (producer && *packed < type.getStages())
                   : start->phase != (producer ? 1 : 0);
  if (!wrong)
    return false;
  InFlightDiagnostic diag = make.emitError();
  diag << describe(getVerb(first)->pipeline) << ": in the loop's first "
       << "iteration this state is (index 0, phase " << start->phase
       << ") and the " << (producer ? "producer" : "consumer")
       << "'s first " << first->getName() << " on the pipeline reads it: ";
  if (producer)
    diag << "producer states start at phase 1 because buffers start empty; "
            "with phase 0 the first producer.acquire waits forever ";
  else
    diag << "consumer states start at phase 0 because no buffer is full "
            "yet; with phase 1 the first consumer.wait returns before the "
            "producer filled the stage ";
  if (type.getSimple())
    diag << "(the packed phase_index of a producer counts from stages: "
            "PipelineStateSimple(" << type.getStages() << ", "
         << type.getStages() << " + k))";
  else
    diag << "(start the phase the loop computes at " << (producer ? 1 : 0)
         << ": for a loop variable k counting stages from 0, ("
         << "k // " << type.getStages() << ") % 2"
         << (producer ? " ^ 1" : "") << ")";
  Value operand = type.getSimple() ? make.getIndex() : make.getPhase();
  if (Operation *def = operand.getDefiningOp())
    diag.attachNote(def->getLoc()) << "phase computed here";
  diag.attachNote(first->getLoc())
      << "first " << first->getName() << " of this side on "
      << describe(getVerb(first)->pipeline) << " reads it";
  return true;
}

/// Stages a state.make's (index, phase) advances per iteration when it walks
/// the ring regularly over `iters` (packed states: the phase_index step;
/// others: the index step modulo the stages, 1 for one stage), else nullopt.
static std::optional<int64_t> walkStride(StateMakeOp make,
                                         ArrayRef<Env> iters) {
  if (iters.size() < 2)
    return std::nullopt;
  StateType type = make.getType();
  int64_t stages = type.getStages();
  if (type.getSimple()) {
    SmallVector<int64_t> packed;
    for (const Env &env : iters) {
      std::optional<int64_t> v = evalWith(make.getIndex(), env);
      if (!v)
        return std::nullopt;
      packed.push_back(*v);
    }
    int64_t stride = packed[1] - packed[0];
    for (size_t j = 0; j + 1 < packed.size(); ++j)
      if (packed[j + 1] - packed[j] != stride)
        return std::nullopt;
    return stride > 0 ? std::optional<int64_t>(stride) : std::nullopt;
  }
  SmallVector<Position> pos;
  for (const Env &env : iters) {
    std::optional<Position> p = positionAt(make, env);
    if (!p)
      return std::nullopt;
    pos.push_back(*p);
  }
  int64_t stride = ((pos[1].index - pos[0].index) % stages + stages) % stages;
  if (stages == 1)
    stride = 1;
  if (stride == 0)
    return std::nullopt;
  for (size_t j = 0; j + 1 < pos.size(); ++j)
    if (pos[j + 1].index != (pos[j].index + stride) % stages)
      return std::nullopt;
  return stride;
}

/// (a) for explicit pairs: an (index, phase) computed from an inner loop's
/// variables alone starts again at the same position in every iteration of
/// the loop around it, as a start state made there does.
static bool checkRestartedPairs(StateMakeOp make, scf::ForOp loop,
                                ArrayRef<Env> iters, Operation *reader) {
  Operation *outer = enclosingLoop(loop);
  if (!outer)
    return false;
  if (auto outerFor = dyn_cast<scf::ForOp>(outer))
    if (std::optional<int64_t> trips = getConstantTripCount(outerFor);
        trips && *trips <= 1)
      return false;
  VerbRef verb = *getVerb(reader);
  if (!runsEveryIteration(loop, outer) ||
      !definedOutside(verb.pipeline, outer))
    return false;
  // The inner loop's bounds must not move with the outer loop either
  // (`range(t * K, t * K + K)` walks on): iterate() needs constant ones.
  if (!getConstantInt(loop.getLowerBound()) ||
      !getConstantInt(loop.getStep()))
    return false;
  std::optional<int64_t> stride = walkStride(make, iters);
  if (!stride)
    return false;
  int64_t stages = make.getType().getStages();
  std::optional<int64_t> length;
  if (std::optional<int64_t> trips = getConstantTripCount(loop)) {
    if (*trips <= 0)
      return false;
    length = *trips * *stride;
    if (*length % (2 * stages) == 0)
      return false;
  }
  InFlightDiagnostic diag = make.emitError();
  diag << describe(verb.pipeline)
       << ": this state's (index, phase) is computed from the inner loop's "
          "variables alone, so it starts again at the same stage and phase in "
          "every iteration of the loop around it while the barriers keep "
          "their phases: one pass of the inner loop walks ";
  if (length)
    diag << *length << " stage(s), not a multiple of 2 x " << stages
         << " stages, ";
  else
    diag << "a number of stages not provably a multiple of 2 x " << stages
         << " (a run-time trip count), ";
  diag << "so the next pass's " << reader->getName()
       << " reads a phase its stage no longer has; compute the pair from a "
          "count that runs across the outer loop (index (t * k_tiles + k) % "
       << stages << ", phase ((t * k_tiles + k) // " << stages
       << ") % 2), or carry a PipelineState across it "
          "(k.range(..., carry=[state]))";
  diag.attachNote(outer->getLoc())
      << "the loop whose iterations restart it";
  diag.attachNote(reader->getLoc())
      << reader->getName() << " reads the state here";
  return true;
}

static bool checkLoopPhases(FunctionOpInterface fn) {
  llvm::DenseMap<std::pair<Value, unsigned>, SmallVector<Operation *>> waiters;
  fn->walk([&](Operation *op) {
    if (std::optional<VerbRef> verb = getVerb(op); verb && readsPhase(verb->verb))
      waiters[{verb->pipeline, unsigned(isProducerVerb(verb->verb))}].push_back(
          op);
  });
  bool failed = false;
  fn->walk([&](StateMakeOp make) {
    if (!make.getIndex())
      return;
    auto loop = dyn_cast_or_null<scf::ForOp>(enclosingLoop(make));
    if (!loop || !dependsOnLoop(make, loop))
      return;
    // Waits of every iteration: one under a branch on the loop variable or
    // data (`if k > 0`) may skip the iterations the evaluation looks at.
    SmallVector<Operation *> readers = phaseReaders(make.getResult());
    llvm::erase_if(readers, [&](Operation *r) {
      return getVerb(r)->verb == Verb::OrderWait || !loop->isAncestor(r) ||
             !runsEveryIteration(r, loop);
    });
    if (readers.empty())
      return;
    // Enough iterations for two laps of the ring at stride 1.
    int64_t stages = make.getType().getStages();
    SmallVector<Env> iters = iterate(loop, 4 * stages + 2);
    if (checkLoopStart(make, loop, iters, readers, waiters)) {
      failed = true;
      return;
    }
    if (checkPhaseFlips(make, loop, iters, readers.front())) {
      failed = true;
      return;
    }
    failed |= checkRestartedPairs(make, loop, iters, readers.front());
  });
  return failed;
}

LogicalResult protocol::checkStatePhases(FunctionOpInterface fn) {
  bool failed = checkRestartedStarts(fn);
  failed |= checkLoopPhases(fn);
  return failure(failed);
}
