//===- SymbolicCounts.cpp - counts as polynomials of kernel values --------===//
//
// See SymbolicCounts.h.
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

#include <functional>
#include <random>

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

/// Integer arith ops that witnesses evaluate exactly (evalArith).
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

static bool compare(arith::CmpIPredicate pred, int64_t x, int64_t y) {
  using P = arith::CmpIPredicate;
  switch (pred) {
  case P::eq: return x == y;
  case P::ne: return x != y;
  case P::slt: case P::ult: return x < y;
  case P::sle: case P::ule: return x <= y;
  case P::sgt: case P::ugt: return x > y;
  case P::sge: case P::uge: return x >= y;
  }
  return false;
}

/// The value of an evaluable op (isEvaluable) on operand values; nullopt on
/// a division by zero.
static std::optional<int64_t> evalArith(const Atom &a, ArrayRef<int64_t> x) {
  StringRef op = a.op;
  if (op == "arith.select")
    return x[0] ? x[1] : x[2];
  if (op == "arith.cmpi")
    return compare(a.argPred, x[0], x[1]) ? 1 : 0;
  if (op == "arith.maxsi" || op == "arith.maxui")
    return std::max(x[0], x[1]);
  if (op == "arith.minsi" || op == "arith.minui")
    return std::min(x[0], x[1]);
  if (op == "arith.andi")
    return x[0] & x[1];
  if (op == "arith.ori")
    return x[0] | x[1];
  if (op == "arith.xori")
    return x[0] ^ x[1];
  if (x[1] == 0)
    return std::nullopt;
  if (op == "arith.divsi" || op == "arith.divui")
    return x[0] / x[1];
  if (op == "arith.floordivsi")
    return llvm::divideFloorSigned(x[0], x[1]);
  if (op == "arith.ceildivsi" || op == "arith.ceildivui")
    return llvm::divideCeilSigned(x[0], x[1]);
  if (op == "arith.remsi" || op == "arith.remui")
    return x[0] % x[1];
  return std::nullopt;
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

namespace {
//===----------------------------------------------------------------------===//
// Witnesses: values of the leaves for which two counts differ
//===----------------------------------------------------------------------===//

class Evaluator {
public:
  Evaluator(const AtomTable &atoms, std::mt19937_64 &rng, bool small,
            std::optional<int64_t> fixed)
      : atoms(atoms), rng(rng), small(small), fixed(fixed),
        values(atoms.size()), bound(atoms.size()) {}

  /// Whether `c >= 0` for every iteration of the loops whose variables it
  /// depends on (outer loops first: an inner loop's bounds may depend on
  /// them); nullopt when it cannot be evaluated.
  std::optional<bool> holds(const Poly &c) {
    std::optional<unsigned> next;
    for (unsigned iv : ivsOf(c, atoms)) {
      if (bound[iv])
        continue;
      // Outermost free loop: its bounds need no other free variable.
      bool outermost = llvm::all_of(atoms[iv].ivs, [&](unsigned o) {
        return o == iv || bound[o].has_value();
      });
      if (outermost) {
        next = iv;
        break;
      }
    }
    if (!next) {
      if (!ivsOf(c, atoms).empty() &&
          llvm::any_of(ivsOf(c, atoms), [&](unsigned o) { return !bound[o]; }))
        return std::nullopt;
      std::optional<int64_t> v = eval(c);
      if (!v)
        return std::nullopt;
      return *v >= 0;
    }
    std::optional<bool> all = true;
    forEachIteration(*next, [&]() {
      std::optional<bool> h = holds(c);
      if (!h || !*h)
        all = h;
      return all.has_value() && *all;
    }, all);
    return all;
  }

  std::optional<int64_t> eval(const Poly &p) {
    int64_t sum = 0;
    for (auto &[m, c] : p.terms) {
      int64_t prod = c;
      for (unsigned id : m) {
        std::optional<int64_t> x = atom(id);
        if (!x)
          return std::nullopt;
        prod *= *x;
      }
      sum += prod;
    }
    return sum;
  }

  /// The leaves given values, for the message.
  std::vector<std::pair<unsigned, int64_t>> leaves;

private:
  const AtomTable &atoms;
  std::mt19937_64 &rng;
  bool small;
  std::optional<int64_t> fixed;
  std::vector<std::optional<int64_t>> values;
  /// Values of the Iv atoms in the sum (or the constraint) being evaluated.
  std::vector<std::optional<int64_t>> bound;
  /// Values of atoms that depend on loop variables, per iteration: a leaf
  /// the check does not look into (`max(ceildiv(min(...), 128), 1)` of the
  /// tile index) is a function of them, the same in both counts.
  std::map<std::pair<unsigned, std::vector<int64_t>>, int64_t> perIteration;
  /// Iterations all sums of one sample may enumerate (a sample past it is
  /// skipped: 600 samples must stay cheap next to a compile).
  int64_t budget = 1 << 12;

  /// Runs `body` with the Iv atom `iv` bound to each value of its loop
  /// (until `body` returns false); `failed` is cleared (nullopt) when the
  /// bounds cannot be evaluated or the budget runs out.
  template <typename T>
  void forEachIteration(unsigned iv, llvm::function_ref<bool()> body,
                        std::optional<T> &failed) {
    const Atom &v = atoms[iv];
    std::optional<int64_t> lb = eval(v.inner), ub = eval(v.other),
                           st = eval(v.step);
    if (!lb || !ub || !st || *st <= 0) {
      failed = std::nullopt;
      return;
    }
    std::optional<int64_t> saved = bound[iv];
    for (int64_t x = *lb; x < *ub; x += *st) {
      if (--budget < 0) {
        failed = std::nullopt;
        break;
      }
      bound[iv] = x;
      if (!body())
        break;
    }
    bound[iv] = saved;
  }

  std::optional<int64_t> atom(unsigned id) {
    const Atom &a = atoms[id];
    if (a.kind == AtomKind::Iv)
      return bound[id];
    std::vector<int64_t> at;
    if (!a.ivs.empty()) {
      for (unsigned iv : a.ivs) {
        if (!bound[iv])
          return std::nullopt;
        at.push_back(*bound[iv]);
      }
      auto it = perIteration.find({id, at});
      if (it != perIteration.end())
        return it->second;
    } else if (values[id]) {
      return values[id];
    }
    std::optional<int64_t> r;
    switch (a.kind) {
    case AtomKind::Leaf: {
      if (!a.op.empty()) {
        SmallVector<int64_t> x;
        for (const Poly &arg : a.args) {
          std::optional<int64_t> v = eval(arg);
          if (!v)
            return std::nullopt;
          x.push_back(*v);
        }
        r = evalArith(a, x);
        if (!r)
          return std::nullopt;
        break;
      }
      // The first samples give every leaf one small value (the message
      // reads best with `n = 2`); then random ones, small and larger.
      int64_t hi = a.boolean ? 1 : small ? 8 : 300;
      if (fixed) {
        // Sample i gives the k-th leaf digit k of i in base 4 (base 2 for
        // an i1): every small combination of the first leaves comes early.
        unsigned ordinal = leaves.size();
        int64_t digit = a.boolean ? (*fixed >> ordinal) & 1
                                  : (*fixed >> (2 * ordinal)) & 3;
        static constexpr int64_t kSmall[] = {1, 2, 3, 0};
        r = a.boolean ? 1 - digit : kSmall[digit];
      } else {
        r = std::uniform_int_distribution<int64_t>(0, hi)(rng);
      }
      if (!a.ivs.empty()) {
        // A function of the loop variables: one value per iteration (small
        // ones in the first samples, as for the leaves).
        r = std::uniform_int_distribution<int64_t>(0, fixed ? 3 : hi)(rng);
        break;
      }
      leaves.push_back({id, *r});
      break;
    }
    case AtomKind::FloorDiv:
    case AtomKind::CeilDiv:
    case AtomKind::Rem: {
      std::optional<int64_t> x = eval(a.inner);
      if (!x)
        return std::nullopt;
      r = a.kind == AtomKind::FloorDiv  ? llvm::divideFloorSigned(*x, a.divisor)
          : a.kind == AtomKind::CeilDiv ? llvm::divideCeilSigned(*x, a.divisor)
                                        : *x % a.divisor;
      break;
    }
    case AtomKind::Trips: {
      std::optional<int64_t> x = eval(a.inner), s = eval(a.other);
      if (!x || !s || *s <= 0)
        return std::nullopt;
      r = llvm::divideCeilSigned(std::max<int64_t>(*x, 0), *s);
      break;
    }
    case AtomKind::Indicator: {
      std::optional<int64_t> x = eval(a.inner), y = eval(a.other);
      if (!x || !y)
        return std::nullopt;
      using P = arith::CmpIPredicate;
      bool holds = false;
      switch (a.pred) {
      case P::eq: holds = *x == *y; break;
      case P::ne: holds = *x != *y; break;
      case P::slt: case P::ult: holds = *x < *y; break;
      case P::sle: case P::ule: holds = *x <= *y; break;
      case P::sgt: case P::ugt: holds = *x > *y; break;
      case P::sge: case P::uge: holds = *x >= *y; break;
      }
      r = holds ? 1 : 0;
      break;
    }
    case AtomKind::IvCount:
      return std::nullopt; // closed by its loop; never reaches a count
    case AtomKind::Iv:
      return bound[id]; // handled above
    case AtomKind::Sum: {
      std::optional<int64_t> sum = 0;
      forEachIteration(a.ivAtom, [&]() {
        std::optional<int64_t> x = eval(a.inner);
        if (!x) {
          sum = std::nullopt;
          return false;
        }
        *sum += *x;
        return true;
      }, sum);
      r = sum;
      break;
    }
    }
    if (!r)
      return std::nullopt;
    if (!a.ivs.empty())
      perIteration[{id, at}] = *r;
    else
      values[id] = r;
    return r;
  }
};
} // namespace

std::optional<Witness> protocol::findWitness(const Poly &a, const Poly &b,
                                   const std::vector<Poly> &constraints,
                                   const AtomTable &atoms) {
  std::mt19937_64 rng(0x5eed);
  for (int i = 0; i < 600; ++i) {
    Evaluator ev(atoms, rng, /*small=*/i < 500,
                 i < 256 ? std::optional<int64_t>(i) : std::nullopt);
    std::optional<int64_t> x = ev.eval(a), y = ev.eval(b);
    if (!x || !y || *x == *y)
      continue;
    bool ok = true;
    for (const Poly &c : constraints) {
      std::optional<bool> h = ev.holds(c);
      if (!h || !*h) {
        ok = false;
        break;
      }
    }
    if (!ok)
      continue;
    Witness w{*x, *y, ""};
    auto leaves = ev.leaves;
    llvm::sort(leaves, [&](auto &l, auto &r) {
      return atoms[l.first].name < atoms[r.first].name;
    });
    // Only the leaves of the two counts (constraints may add others).
    for (auto &[id, val] : leaves) {
      bool inCounts = false;
      std::function<bool(const Poly &)> uses = [&](const Poly &p) {
        for (auto &[m, c] : p.terms)
          for (unsigned x : m) {
            const Atom &at = atoms[x];
            if (x == id || uses(at.inner) || uses(at.other) ||
                (at.kind == AtomKind::Sum && uses(Poly::atom(at.ivAtom))) ||
                llvm::any_of(at.args, uses))
              return true;
          }
        return false;
      };
      inCounts = uses(a) || uses(b);
      if (!inCounts)
        continue;
      if (!w.values.empty())
        w.values += ", ";
      w.values += atoms[id].name + " = " + std::to_string(val);
    }
    return w;
  }
  return std::nullopt;
}

