//===- SymbolicCounts.cpp - counts as polynomials of kernel values --------===//
//
// See SymbolicCounts.h: the polynomials and the canonicalizer that builds
// them from IR values. The search for values that make two counts differ
// (findWitness) is in CountWitnesses.cpp.
//
//===----------------------------------------------------------------------===//

#include "SymbolicCounts.h"

#include "ProtocolChecks.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace mlir::pipeline;
using namespace mlir::pipeline::protocol;

Poly protocol::multiply(const Poly &a, const Poly &b, const AtomTable &atoms) {
  Poly r;
  for (auto &[ma, ca] : a.terms)
    for (auto &[mb, cb] : b.terms) {
      Monomial m = ma;
      for (unsigned id : mb) {
        AtomKind k = atoms[id].kind;
        bool idempotent = k == AtomKind::Indicator || k == AtomKind::IvCount ||
                          atoms[id].boolean;
        if (idempotent && llvm::is_contained(m, id))
          continue;
        m.push_back(id);
      }
      llvm::sort(m);
      r.addTerm(m, ca * cb);
    }
  return r;
}

static std::string printMonomial(const Monomial &m, const AtomTable &atoms) {
  std::vector<std::string> names;
  for (unsigned id : m)
    names.push_back(atoms[id].name);
  llvm::sort(names);
  return llvm::join(names, " * ");
}

std::string protocol::printPoly(const Poly &p, const AtomTable &atoms) {
  if (p.isZero())
    return "0";
  std::string s;
  // Terms with atoms first, the constant last: "n - 1".
  auto emit = [&](const Monomial &m, int64_t c) {
    bool neg = c < 0;
    int64_t mag = neg ? -c : c;
    if (s.empty())
      s += neg ? "-" : "";
    else
      s += neg ? " - " : " + ";
    if (m.empty()) {
      s += std::to_string(mag);
      return;
    }
    if (mag != 1)
      s += std::to_string(mag) + " * ";
    s += printMonomial(m, atoms);
  };
  for (auto &[m, c] : p.terms)
    if (!m.empty())
      emit(m, c);
  if (auto it = p.terms.find({}); it != p.terms.end())
    emit(it->first, it->second);
  return s;
}

bool protocol::polyHas(const Poly &p, const AtomTable &atoms,
             llvm::function_ref<bool(const Atom &)> pred) {
  for (auto &[m, c] : p.terms)
    for (unsigned id : m)
      if (pred(atoms[id]))
        return true;
  return false;
}

std::vector<unsigned> protocol::ivsOf(const Poly &p, const AtomTable &atoms) {
  std::vector<unsigned> out;
  for (auto &[m, c] : p.terms)
    for (unsigned id : m)
      out.insert(out.end(), atoms[id].ivs.begin(), atoms[id].ivs.end());
  llvm::sort(out);
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

static bool anyThread(const Poly &p, const AtomTable &atoms) {
  return polyHas(p, atoms, [](const Atom &a) { return a.thread; });
}
static bool anyCarried(const Poly &p, const AtomTable &atoms) {
  return polyHas(p, atoms, [](const Atom &a) { return a.carried; });
}

Poly protocol::sumOver(unsigned iv, const Poly &body, const Poly &trips,
                       AtomTable &atoms) {
  Poly r;
  for (auto &[m, c] : body.terms) {
    Monomial free, dep;
    for (unsigned id : m)
      (llvm::is_contained(atoms[id].ivs, iv) ? dep : free).push_back(id);
    Poly coeff;
    coeff.terms[free] = c;
    if (dep.empty()) {
      r = r + multiply(coeff, trips, atoms);
      continue;
    }
    // One Sum atom per monomial of the loop's own variable: the producer's
    // `1 + (n(t) - 1)` and a consumer's `n(t)` are one polynomial before
    // they are summed, and so one atom after.
    Poly inner;
    inner.terms[dep] = 1;
    std::string key = "sum(" + std::to_string(iv) + "|";
    for (unsigned id : dep)
      key += std::to_string(id) + ".";
    key += ")";
    const Atom &v = atoms[iv];
    Atom a{AtomKind::Sum, "sum(" + v.name + " in [" + printPoly(v.inner, atoms) +
                              ", " + printPoly(v.other, atoms) + "): " +
                              printPoly(inner, atoms) + ")"};
    a.inner = inner;
    a.ivAtom = iv;
    std::vector<unsigned> ivs = ivsOf(inner, atoms);
    ivs.insert(ivs.end(), v.ivs.begin(), v.ivs.end());
    llvm::sort(ivs);
    ivs.erase(std::unique(ivs.begin(), ivs.end()), ivs.end());
    for (unsigned id : ivs)
      if (id != iv)
        a.ivs.push_back(id);
    a.thread = anyThread(inner, atoms) || v.thread;
    a.carried = anyCarried(inner, atoms) || v.carried;
    a.loopVar = a.carried || !a.ivs.empty();
    unsigned id = atoms.get(key, a);
    r = r + multiply(coeff, Poly::atom(id), atoms);
  }
  return r;
}

static std::string parenthesized(const Poly &p, const AtomTable &atoms) {
  std::string s = printPoly(p, atoms);
  if (p.terms.size() > 1 ||
      (p.terms.size() == 1 && p.terms.begin()->first.size() > 1))
    return "(" + s + ")";
  return s;
}

//===----------------------------------------------------------------------===//
// Values as polynomials
//===----------------------------------------------------------------------===//

bool protocol::isThreadRead(Operation *op) {
  if (isa<gpu::ThreadIdOp, gpu::LaneIdOp, gpu::SubgroupIdOp>(op))
    return true;
  StringRef name = op->getName().getStringRef();
  return name.starts_with("nvvm.read.ptx.sreg.tid.") ||
         name == "nvvm.read.ptx.sreg.laneid" ||
         name == "nvvm.read.ptx.sreg.warpid" || name == "nvvm.elect.sync" ||
         name.starts_with("nvvm.read.ptx.sreg.clock") ||
         name == "nvvm.read.ptx.sreg.globaltimer";
}

bool protocol::isCtaRead(Operation *op) {
  if (isa<gpu::BlockIdOp, gpu::GridDimOp, gpu::BlockDimOp,
          gpu::ClusterIdOp, gpu::ClusterDimOp, gpu::ClusterBlockIdOp>(op))
    return true;
  StringRef name = op->getName().getStringRef();
  return name.starts_with("nvvm.read.ptx.sreg.ctaid.") ||
         name.starts_with("nvvm.read.ptx.sreg.nctaid.") ||
         name.starts_with("nvvm.read.ptx.sreg.ntid.") ||
         name.starts_with("nvvm.read.ptx.sreg.cluster") ||
         name.starts_with("nvvm.read.ptx.sreg.nclusterid.");
}

/// How messages name a function argument: the parameter's name in the
/// user's source where the builder recorded one (the Python Kernel sets
/// `{pipeline.name = "k_tiles"}` in the gpu.func's arg_attrs, so that a
/// count reads "k_tiles - 1" as the kernel was written), else "%argN".
static std::string argumentName(FunctionOpInterface fn, BlockArgument arg) {
  if (arg.getOwner()->isEntryBlock())
    if (auto name = fn.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                    "pipeline.name"))
      if (!name.getValue().empty())
        return name.str();
  return "%arg" + std::to_string(arg.getArgNumber());
}

/// "max(ceildiv(...), 1)" for the integer arith ops the polynomials do not
/// model, so that a count built on them (causal attention's k-block bound)
/// reads as a formula; the op's name when the operands print too long.
static std::string functionalNameOf(StringRef opName,
                                    ArrayRef<std::string> operands) {
  StringRef fn = llvm::StringSwitch<StringRef>(opName)
                     .Cases("arith.maxsi", "arith.maxui", "max")
                     .Cases("arith.minsi", "arith.minui", "min")
                     .Cases("arith.divsi", "arith.divui", "div")
                     .Cases("arith.remsi", "arith.remui", "rem")
                     .Case("arith.select", "select")
                     .Case("arith.andi", "and")
                     .Case("arith.ori", "or")
                     .Case("arith.xori", "xor")
                     .Default("");
  if (fn.empty())
    return opName.str();
  std::string s = fn.str() + "(" + llvm::join(operands, ", ") + ")";
  return s.size() <= 72 ? s : fn.str() + "(...)";
}

/// Integer arith ops that witnesses evaluate exactly (evalArith,
/// CountWitnesses.cpp).
static bool isEvaluable(Operation *def) {
  if (def->getNumResults() != 1 ||
      !def->getResult(0).getType().isIntOrIndex())
    return false;
  return isa<arith::MaxSIOp, arith::MaxUIOp, arith::MinSIOp, arith::MinUIOp,
             arith::DivSIOp, arith::DivUIOp, arith::FloorDivSIOp,
             arith::CeilDivSIOp, arith::CeilDivUIOp, arith::RemSIOp,
             arith::RemUIOp, arith::SelectOp, arith::AndIOp, arith::OrIOp,
             arith::XOrIOp, arith::CmpIOp>(def);
}

static std::string shortOpName(Operation *op) {
  StringRef name = op->getName().getStringRef();
  if (name.consume_front("nvvm.read.ptx.sreg."))
    return "%" + name.str();
  return name.str();
}

namespace mlir::pipeline::protocol {
class CanonicalizerImpl {
public:
  explicit CanonicalizerImpl(AtomTable &atoms) : atoms(atoms) {}

  /// The polynomial of an integer (or index, i1) value.
  Poly get(Value v) {
    auto it = memo.find(v);
    if (it != memo.end())
      return it->second;
    Poly p = compute(v, 0);
    memo[v] = p;
    return p;
  }

  /// A structural key for `v`: equal keys mean equal values in every thread
  /// that computes them (pure ops of equal operands).
  std::string key(Value v) { return "{" + keyOf(get(v)) + "}"; }

  AtomTable &atoms;

private:
  llvm::DenseMap<Value, Poly> memo;

  std::string keyOf(const Poly &p) {
    std::string s;
    for (auto &[m, c] : p.terms) {
      s += std::to_string(c) + "*";
      for (unsigned id : m)
        s += "a" + std::to_string(id) + ".";
      s += ";";
    }
    return s;
  }

  Poly leaf(const std::string &key, const std::string &name, bool thread,
            bool loopVar, bool boolean, bool carried = false,
            std::vector<unsigned> ivs = {}) {
    Atom a{AtomKind::Leaf, name};
    a.thread = thread;
    a.loopVar = loopVar;
    a.boolean = boolean;
    a.carried = carried;
    a.ivs = std::move(ivs);
    return Poly::atom(atoms.get(key, a));
  }

  Poly opaque(Value v) {
    // Identity of the value: two loads of one address may differ.
    std::string key = "v" + std::to_string(reinterpret_cast<uintptr_t>(
                                v.getAsOpaquePointer()));
    bool thread = false, loopVar = false, carried = false;
    std::vector<unsigned> ivs;
    if (Operation *def = v.getDefiningOp()) {
      thread = isThreadRead(def);
      for (Value operand : def->getOperands()) {
        Poly p = get(operand);
        thread |= polyHas(p, atoms, [](const Atom &a) { return a.thread; });
        loopVar |= polyHas(p, atoms, [](const Atom &a) { return a.loopVar; });
        carried |= anyCarried(p, atoms);
        std::vector<unsigned> more = ivsOf(p, atoms);
        ivs.insert(ivs.end(), more.begin(), more.end());
      }
      llvm::sort(ivs);
      ivs.erase(std::unique(ivs.begin(), ivs.end()), ivs.end());
      std::string name = shortOpName(def);
      // Pure ops and uniform reads are keyed by structure.
      if ((isMemoryEffectFree(def) || isCtaRead(def) || isThreadRead(def)) &&
          def->getNumRegions() == 0 && def->getNumResults() == 1 &&
          !isa<arith::ConstantOp>(def)) {
        key = name;
        llvm::raw_string_ostream os(key);
        def->getAttrDictionary().print(os);
        SmallVector<std::string> operandKeys;
        for (Value operand : def->getOperands())
          operandKeys.push_back(this->key(operand));
        // min(n, t + 1) and min(t + 1, n) are one value.
        if (def->hasTrait<OpTrait::IsCommutative>())
          llvm::sort(operandKeys);
        for (const std::string &k : operandKeys)
          os << "(" << k << ")";
        // Thread reads are keyed by structure too (warp_idx computed twice
        // is one value), but they never compare across roles.
        name = functionalName(def, name);
      }
      // A cheap readable name: "%nctaid.x", "memref.load".
      Poly p = leaf(key, name, thread, loopVar, v.getType().isInteger(1),
                    carried, std::move(ivs));
      if (isEvaluable(def)) {
        Atom &a = atoms[p.terms.begin()->first.front()];
        if (a.op.empty()) {
          a.op = def->getName().getStringRef().str();
          for (Value operand : def->getOperands())
            a.args.push_back(get(operand));
          if (auto cmp = dyn_cast<arith::CmpIOp>(def))
            a.argPred = cmp.getPredicate();
        }
      }
      return p;
    }
    return leaf(key, "?", thread, true, v.getType().isInteger(1),
                /*carried=*/true);
  }

  Poly divAtom(AtomKind kind, const Poly &inner, int64_t d, StringRef op) {
    std::string key = (op + "(" + keyOf(inner) + "," + std::to_string(d) + ")")
                          .str();
    Atom a{kind, ""};
    a.inner = inner;
    a.divisor = d;
    a.thread = polyHas(inner, atoms, [](const Atom &x) { return x.thread; });
    a.loopVar = polyHas(inner, atoms, [](const Atom &x) { return x.loopVar; });
    a.carried = anyCarried(inner, atoms);
    a.ivs = ivsOf(inner, atoms);
    a.name = kind == AtomKind::Rem
                 ? parenthesized(inner, atoms) + " mod " + std::to_string(d)
                 : op.str() + "(" + printPoly(inner, atoms) + ", " +
                       std::to_string(d) + ")";
    return Poly::atom(atoms.get(key, a));
  }

  std::string functionalName(Operation *def, const std::string &opName) {
    SmallVector<std::string> operands;
    for (Value operand : def->getOperands())
      operands.push_back(printPoly(get(operand), atoms));
    return functionalNameOf(opName, operands);
  }

  std::string boundsKey(scf::ForOp loop) {
    return keyOf(get(loop.getLowerBound())) + "|" +
           keyOf(get(loop.getUpperBound())) + "|" + keyOf(get(loop.getStep()));
  }

public:
  /// The Iv atom of `loop`'s induction variable. It is keyed by the loop's
  /// bounds (and how many enclosing loops have the same ones), not by the
  /// loop: the producer's tile loop and each consumer's, over the same
  /// range, give one atom, so a k-block bound that each role computes from
  /// its tile index with the same ops is one value, and the sums over tiles
  /// of the roles' counts compare term by term.
  unsigned ivAtom(scf::ForOp loop) {
    Poly lb = get(loop.getLowerBound()), ub = get(loop.getUpperBound()),
         step = get(loop.getStep());
    std::string bounds = boundsKey(loop);
    unsigned nth = 0;
    for (Operation *p = loop->getParentOp(); p; p = p->getParentOp())
      if (auto outer = dyn_cast<scf::ForOp>(p))
        if (boundsKey(outer) == bounds)
          ++nth;
    std::string key = "iv(" + bounds + "#" + std::to_string(nth) + ")";
    // The `for` target's name where the builder knew it (the Python
    // k.range sets pipeline.iv_name from `for kt, ... in k.range`).
    auto hint = loop->getAttrOfType<StringAttr>("pipeline.iv_name");
    Atom a{AtomKind::Iv,
           hint && !hint.getValue().empty() ? hint.str() : "%iv"};
    a.loopVar = true;
    a.loop = loop;
    a.inner = lb;
    a.other = ub;
    a.step = step;
    a.thread = anyThread(lb + ub + step, atoms);
    a.carried = anyCarried(lb + ub + step, atoms);
    unsigned id = atoms.get(key, a);
    if (atoms[id].ivs.empty()) {
      std::vector<unsigned> ivs = ivsOf(lb + ub + step, atoms);
      ivs.push_back(id);
      llvm::sort(ivs);
      ivs.erase(std::unique(ivs.begin(), ivs.end()), ivs.end());
      atoms[id].ivs = ivs;
    }
    return id;
  }

  /// floor(p / d) or ceil(p / d) for a positive constant d, exactly when
  /// every non-constant coefficient is a multiple of d.
  Poly divide(const Poly &p, int64_t d, bool ceil) {
    if (d == 1)
      return p;
    if (std::optional<int64_t> c = p.getConstant())
      return Poly::constant(ceil ? llvm::divideCeilSigned(*c, d)
                                 : llvm::divideFloorSigned(*c, d));
    Poly rest, constant;
    bool exact = true;
    for (auto &[m, c] : p.terms) {
      if (m.empty())
        constant.terms[m] = c;
      else if (c % d == 0)
        rest.terms[m] = c / d;
      else
        exact = false;
    }
    if (exact) {
      int64_t c = constant.getConstant().value_or(0);
      return rest + Poly::constant(ceil ? llvm::divideCeilSigned(c, d)
                                        : llvm::divideFloorSigned(c, d));
    }
    return divAtom(ceil ? AtomKind::CeilDiv : AtomKind::FloorDiv, p, d,
                   ceil ? "ceildiv" : "floordiv");
  }

private:
  Poly compute(Value v, int depth) {
    if (std::optional<int64_t> c = getConstantInt(v))
      return Poly::constant(*c);
    if (auto arg = dyn_cast<BlockArgument>(v)) {
      Operation *owner = arg.getOwner()->getParentOp();
      std::string key = "arg" + std::to_string(reinterpret_cast<uintptr_t>(
                                    arg.getAsOpaquePointer()));
      bool boolean = arg.getType().isInteger(1);
      if (auto fn = dyn_cast_or_null<FunctionOpInterface>(owner)) {
        // A kernel's arguments are the same for every thread; a helper
        // function's may be thread ids (lit tests pass warp ids so).
        auto gpuFn = dyn_cast<gpu::GPUFuncOp>(owner);
        bool kernel = gpuFn && gpuFn.isKernel();
        return leaf(key, argumentName(fn, arg), /*thread=*/!kernel, false,
                    boolean);
      }
      if (auto loop = dyn_cast_or_null<scf::ForOp>(owner)) {
        if (arg == loop.getInductionVar())
          return Poly::atom(ivAtom(loop));
      }
      return leaf(key, "?", false, true, boolean, /*carried=*/true);
    }
    Operation *def = v.getDefiningOp();
    if (depth > 64 || !def)
      return opaque(v);
    auto operand = [&](unsigned i) { return get(def->getOperand(i)); };
    if (isa<arith::IndexCastOp, arith::IndexCastUIOp, arith::ExtSIOp,
            arith::ExtUIOp, arith::TruncIOp>(def))
      return operand(0);
    if (isa<arith::AddIOp>(def))
      return operand(0) + operand(1);
    if (isa<arith::SubIOp>(def))
      return operand(0) - operand(1);
    if (isa<arith::MulIOp>(def))
      return multiply(operand(0), operand(1), atoms);
    std::optional<int64_t> rhs =
        def->getNumOperands() == 2 ? getConstantInt(def->getOperand(1))
                                   : std::nullopt;
    if (rhs && *rhs > 0 && *rhs < (int64_t(1) << 32)) {
      if (isa<arith::DivSIOp, arith::DivUIOp, arith::FloorDivSIOp>(def))
        return divide(operand(0), *rhs, /*ceil=*/false);
      if (isa<arith::CeilDivSIOp, arith::CeilDivUIOp>(def))
        return divide(operand(0), *rhs, /*ceil=*/true);
      if (isa<arith::ShRSIOp, arith::ShRUIOp>(def) && *rhs < 32)
        return divide(operand(0), int64_t(1) << *rhs, /*ceil=*/false);
      if (isa<arith::ShLIOp>(def) && *rhs < 32)
        return operand(0).scaled(int64_t(1) << *rhs);
      if (isa<arith::RemSIOp, arith::RemUIOp>(def)) {
        Poly inner = operand(0);
        if (std::optional<int64_t> c = inner.getConstant())
          return Poly::constant(*c % *rhs);
        return divAtom(AtomKind::Rem, inner, *rhs, "mod");
      }
    }
    return opaque(v);
  }
};
} // namespace mlir::pipeline::protocol

Canonicalizer::Canonicalizer(AtomTable &atoms)
    : atoms(atoms), impl(std::make_unique<CanonicalizerImpl>(atoms)) {}
Canonicalizer::~Canonicalizer() = default;
Poly Canonicalizer::get(Value v) { return impl->get(v); }
std::string Canonicalizer::key(Value v) { return impl->key(v); }
Poly Canonicalizer::divide(const Poly &p, int64_t d, bool ceil) {
  return impl->divide(p, d, ceil);
}
unsigned Canonicalizer::ivAtom(scf::ForOp loop) { return impl->ivAtom(loop); }

std::optional<Poly> protocol::tripCount(scf::ForOp loop, Canonicalizer &canon,
                                        std::vector<Poly> &constraints) {
  AtomTable &atoms = canon.atoms;
  Poly lb = canon.get(loop.getLowerBound());
  Poly ub = canon.get(loop.getUpperBound());
  Poly step = canon.get(loop.getStep());
  for (const Poly *p : {&lb, &ub, &step})
    if (polyHas(*p, atoms, [](const Atom &a) { return a.carried || a.thread; }))
      return std::nullopt;
  // A run-time step that depends on a loop variable has no Trips atom
  // that the sums could evaluate per iteration.
  if (!step.getConstant() && !ivsOf(step, atoms).empty())
    return std::nullopt;
  Poly extent = ub - lb;
  std::optional<int64_t> s = step.getConstant();
  // A build-time extent is counted exactly: a loop whose upper bound is
  // at or below its lower bound runs 0 times, not ceildiv(ub - lb) < 0
  // times. A prologue of `stages` acquires followed by a main loop over
  // [stages, k_tiles) with a constant k_tiles = 1 (tilelang#2566) counts
  // 2 + 0, not 2 - 1; and a negative constant pushed as a constraint below
  // would hold for no launch values, silencing every comparison of the
  // pipeline. Only a run-time extent is assumed non-negative.
  if (std::optional<int64_t> e = extent.getConstant()) {
    if (*e <= 0)
      return Poly::constant(0);
    if (s && *s > 0)
      return Poly::constant(llvm::divideCeil(*e, *s));
  }
  // A loop from a constant start above 0 to a run-time bound (`range(S,
  // n)` after a prologue of S stages) runs max(0, n - S) times, and the
  // kernel does not promise n >= S: assuming it (a constraint) would make
  // the prologue's S stages plus the loop's n - S equal a consumer's n for
  // every value left, while with n < S the producer fills S stages. Its
  // count keeps the max (a Trips atom, evaluated clipped at 0), and the
  // values below the start stay in the comparison. A loop from 0 (or from
  // a run-time start) keeps the assumption: its extent is the count; so
  // does a loop from 1 after a peeled first iteration (FlashAttention's
  // mainloop from k-block 1, a verb before the loop in its block,
  // unconditional, of a pipeline the loop's own verbs use: a verb of
  // another ring there peels nothing of this loop): the kernel does
  // iteration 0 whatever n is, so
  // it assumes at least one k-block, and a launch with none has no work
  // for either role. A loop from 1 with nothing peeled before it makes no
  // such promise: where its extent can go negative (`range(1, n)`, not
  // `range(1, n + 1)`), it runs max(0, n - 1) times, like a loop from 2.
  std::optional<int64_t> start = lb.getConstant();
  auto peeledFirst = [&] {
    SmallVector<Value, 4> pipes;
    loop->walk([&](Operation *inner) {
      if (std::optional<VerbRef> v = getVerb(inner))
        if (!llvm::is_contained(pipes, v->pipeline))
          pipes.push_back(v->pipeline);
    });
    for (Operation *p = loop->getPrevNode(); p; p = p->getPrevNode())
      if (std::optional<VerbRef> v = getVerb(p);
          v && llvm::is_contained(pipes, v->pipeline))
        return true;
    return false;
  };
  auto mayBeNegative = [&] {
    return llvm::any_of(extent.terms, [](auto &t) { return t.second < 0; });
  };
  if (start &&
      (*start > 1 || (*start == 1 && mayBeNegative() && !peeledFirst())) &&
      s && *s > 0 && ivsOf(extent, atoms).empty() &&
      !polyHas(extent, atoms, [](const Atom &a) { return a.loopVar; })) {
    std::string range = printPoly(extent, atoms);
    std::string key = "clip(" + range + "|" + std::to_string(*s) + ")";
    std::string name = "max(0, " + range + ")";
    if (*s != 1)
      name = "ceildiv(" + name + ", " + std::to_string(*s) + ")";
    Atom a{AtomKind::Trips, name};
    a.inner = extent;
    a.other = Poly::constant(*s);
    a.clipped = true;
    return Poly::atom(atoms.get(key, a));
  }
  constraints.push_back(extent);
  if (s && *s > 0)
    return canon.divide(extent, *s, /*ceil=*/true);
  if (s)
    return std::nullopt;
  constraints.push_back(step - Poly::constant(1));
  std::string key = "trips(" + printPoly(extent, atoms) + "|" +
                    printPoly(step, atoms) + ")";
  // Keys by printed form are unique: atom names print their structure.
  Atom a{AtomKind::Trips, "ceildiv(" + printPoly(extent, atoms) + ", " +
                              printPoly(step, atoms) + ")"};
  a.inner = extent;
  a.other = step;
  return Poly::atom(atoms.get(key, a));
}

std::string protocol::stagesOf(const Poly &p, const AtomTable &atoms) {
  std::optional<int64_t> c = p.getConstant();
  return printPoly(p, atoms) + (c && *c == 1 ? " stage" : " stages");
}
