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
            bool loopVar, bool boolean) {
    Atom a{AtomKind::Leaf, name};
    a.thread = thread;
    a.loopVar = loopVar;
    a.boolean = boolean;
    return Poly::atom(atoms.get(key, a));
  }

  Poly opaque(Value v) {
    // Identity of the value: two loads of one address may differ.
    std::string key = "v" + std::to_string(reinterpret_cast<uintptr_t>(
                                v.getAsOpaquePointer()));
    bool thread = false, loopVar = false;
    if (Operation *def = v.getDefiningOp()) {
      thread = isThreadRead(def);
      for (Value operand : def->getOperands()) {
        Poly p = get(operand);
        thread |= polyHas(p, atoms, [](const Atom &a) { return a.thread; });
        loopVar |= polyHas(p, atoms, [](const Atom &a) { return a.loopVar; });
      }
      std::string name = shortOpName(def);
      // Pure ops and uniform reads are keyed by structure.
      if ((isMemoryEffectFree(def) || isCtaRead(def) || isThreadRead(def)) &&
          def->getNumRegions() == 0 && def->getNumResults() == 1 &&
          !isa<arith::ConstantOp>(def)) {
        key = name;
        llvm::raw_string_ostream os(key);
        def->getAttrDictionary().print(os);
        for (Value operand : def->getOperands())
          os << "(" << this->key(operand) << ")";
        // Thread reads are keyed by structure too (warp_idx computed twice
        // is one value), but they never compare across roles.
      }
      // A cheap readable name: "%nctaid.x", "memref.load".
      return leaf(key, name, thread, loopVar, v.getType().isInteger(1));
    }
    return leaf(key, "?", thread, true, v.getType().isInteger(1));
  }

  Poly divAtom(AtomKind kind, const Poly &inner, int64_t d, StringRef op) {
    std::string key = (op + "(" + keyOf(inner) + "," + std::to_string(d) + ")")
                          .str();
    Atom a{kind, ""};
    a.inner = inner;
    a.divisor = d;
    a.thread = polyHas(inner, atoms, [](const Atom &x) { return x.thread; });
    a.loopVar = polyHas(inner, atoms, [](const Atom &x) { return x.loopVar; });
    a.name = kind == AtomKind::Rem
                 ? parenthesized(inner, atoms) + " mod " + std::to_string(d)
                 : op.str() + "(" + printPoly(inner, atoms) + ", " +
                       std::to_string(d) + ")";
    return Poly::atom(atoms.get(key, a));
  }

public:
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
        if (arg == loop.getInductionVar()) {
          // The `for` target's name where the builder knew it (the Python
          // k.range sets pipeline.iv_name from `for kt, ... in k.range`).
          auto hint = loop->getAttrOfType<StringAttr>("pipeline.iv_name");
          Atom a{AtomKind::Leaf,
                 hint && !hint.getValue().empty() ? hint.str() : "%iv"};
          a.loopVar = true;
          a.loop = loop;
          return Poly::atom(atoms.get(key, a));
        }
      }
      return leaf(key, "?", false, true, boolean);
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

namespace {
//===----------------------------------------------------------------------===//
// Witnesses: values of the leaves for which two counts differ
//===----------------------------------------------------------------------===//

class Evaluator {
public:
  Evaluator(const AtomTable &atoms, std::mt19937_64 &rng, bool small,
            std::optional<int64_t> fixed)
      : atoms(atoms), rng(rng), small(small), fixed(fixed),
        values(atoms.size()) {}

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

  std::optional<int64_t> atom(unsigned id) {
    if (values[id])
      return values[id];
    const Atom &a = atoms[id];
    std::optional<int64_t> r;
    switch (a.kind) {
    case AtomKind::Leaf: {
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
    }
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
      std::optional<int64_t> v = ev.eval(c);
      if (!v || *v < 0) {
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
          for (unsigned x : m)
            if (x == id || uses(atoms[x].inner) || uses(atoms[x].other))
              return true;
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

