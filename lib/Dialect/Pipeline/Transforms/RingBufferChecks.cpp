//===- RingBufferChecks.cpp - stages against the buffers of a ring --------===//
//
// Property 16 of pipeline-verify-protocol: a pipeline has no more stages
// than the buffers of the ring its stages index. A load ring of B buffers
// driven by a pipeline of B + 1 stages passes every count: the barriers
// add up, the states wrap at B + 1; but stage B's buffer lies past the
// ring: in the next allocation (the barriers, another operand's ring) or
// past the end of shared memory. The data of two stages then share bytes
// and are overwritten while consumers read them.
//
// The IR names the size of an allocation in two ways: a shared-memory
// global of a sized array type (`llvm.mlir.global ... !llvm.array<N x i8>`,
// read with `llvm.mlir.addressof`), and the `pipeline.smem_bytes` attribute
// the Python kernel layer puts on the op that yields an allocation's
// pointer (`Kernel.smem_alloc`: an offset into dynamic shared memory,
// whose size the IR does not know otherwise). A buffer address is a chain
// of `llvm.getelementptr`s from such a pointer; where its byte offset is
// `c * state.index + rest`, with a constant c > 0 and a rest that is at
// least a known constant (thread ids, loop variables over non-negative
// ranges and constants, added and multiplied), the buffer of the last
// stage starts at or after `c * (stages - 1) + min(rest)`. At or past the
// allocation's end, that address is out of the ring: reported at the
// address computation, with the ring's size in buffers of c bytes. Offsets
// the model does not follow (a kernel argument, a select, a remainder of
// the index) leave the address unchecked.
//
//===----------------------------------------------------------------------===//

#include "ProtocolChecks.h"
#include "SymbolicCounts.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;
using namespace mlir::pipeline;
using namespace mlir::pipeline::protocol;

namespace {

/// A lower bound of an integer: value >= coef * index + low, with `index`
/// the result of one pipeline.state.index (null when coef is 0).
struct Bound {
  int64_t coef = 0;
  int64_t low = 0;
  Value index;
};

/// The bytes one step of a getelementptr index moves (i8, integers,
/// floats, vectors and arrays of them).
std::optional<int64_t> stepBytes(Type t) {
  if (t.isIntOrFloat())
    return (t.getIntOrFloatBitWidth() + 7) / 8;
  if (auto vec = dyn_cast<VectorType>(t)) {
    std::optional<int64_t> e = stepBytes(vec.getElementType());
    if (!e || vec.isScalable())
      return std::nullopt;
    return *e * vec.getNumElements();
  }
  if (auto arr = dyn_cast<LLVM::LLVMArrayType>(t)) {
    std::optional<int64_t> e = stepBytes(arr.getElementType());
    return e ? std::optional<int64_t>(*e * arr.getNumElements()) : std::nullopt;
  }
  return std::nullopt;
}

std::optional<Bound> add(std::optional<Bound> a, std::optional<Bound> b) {
  if (!a || !b || (a->index && b->index && a->index != b->index))
    return std::nullopt;
  return Bound{a->coef + b->coef, a->low + b->low,
               a->index ? a->index : b->index};
}

std::optional<Bound> scale(std::optional<Bound> a, int64_t k) {
  if (!a || k < 0)
    return std::nullopt;
  return Bound{a->coef * k, a->low * k, a->index};
}

/// A lower bound of `v` as coef * state.index + low.
std::optional<Bound> lowerBound(Value v, int depth = 0) {
  if (depth > 32)
    return std::nullopt;
  if (std::optional<int64_t> c = getConstantInt(v))
    return Bound{0, *c, {}};
  if (auto arg = dyn_cast<BlockArgument>(v)) {
    // A loop variable from a non-negative start, counting up.
    auto loop = dyn_cast_or_null<scf::ForOp>(arg.getOwner()->getParentOp());
    if (!loop || arg != loop.getInductionVar())
      return std::nullopt;
    std::optional<int64_t> lb = getConstantInt(loop.getLowerBound());
    std::optional<int64_t> step = getConstantInt(loop.getStep());
    if (!lb || *lb < 0 || !step || *step <= 0)
      return std::nullopt;
    return Bound{0, *lb, {}};
  }
  Operation *def = v.getDefiningOp();
  if (!def)
    return std::nullopt;
  if (isa<StateIndexOp>(def))
    return Bound{1, 0, v};
  // Thread, lane, warp and CTA ids are non-negative.
  if (isThreadRead(def) || isCtaRead(def))
    return Bound{0, 0, {}};
  auto operand = [&](unsigned i) {
    return lowerBound(def->getOperand(i), depth + 1);
  };
  if (isa<arith::ExtSIOp, arith::ExtUIOp, arith::IndexCastOp,
          arith::IndexCastUIOp, LLVM::SExtOp, LLVM::ZExtOp>(def))
    return operand(0);
  if (isa<arith::AddIOp, LLVM::AddOp>(def))
    return add(operand(0), operand(1));
  if (isa<arith::SubIOp, LLVM::SubOp>(def)) {
    std::optional<int64_t> c = getConstantInt(def->getOperand(1));
    std::optional<Bound> a = operand(0);
    if (!a || !c)
      return std::nullopt;
    return Bound{a->coef, a->low - *c, a->index};
  }
  if (isa<arith::MulIOp, LLVM::MulOp>(def)) {
    for (unsigned i = 0; i < 2; ++i)
      if (std::optional<int64_t> k = getConstantInt(def->getOperand(i)))
        return scale(operand(1 - i), *k);
    // Two non-negative factors without the index: at least 0.
    std::optional<Bound> a = operand(0), b = operand(1);
    if (a && b && !a->index && !b->index && a->low >= 0 && b->low >= 0)
      return Bound{0, a->low * b->low, {}};
    return std::nullopt;
  }
  if (isa<arith::ShLIOp, LLVM::ShlOp>(def)) {
    std::optional<int64_t> k = getConstantInt(def->getOperand(1));
    if (!k || *k < 0 || *k > 30)
      return std::nullopt;
    return scale(operand(0), int64_t(1) << *k);
  }
  // Unsigned remainders, divisions and masks of non-negative values without
  // the index stay non-negative.
  if (isa<arith::RemUIOp, arith::DivUIOp, arith::AndIOp, arith::ShRUIOp,
          arith::RemSIOp, arith::DivSIOp>(def)) {
    std::optional<Bound> a = operand(0), b = operand(1);
    if (a && b && !a->index && !b->index && a->low >= 0 && b->low >= 0)
      return Bound{0, 0, {}};
    return std::nullopt;
  }
  return std::nullopt;
}

/// An allocation of known size: where a pointer chain starts.
struct Allocation {
  Operation *op;
  int64_t bytes;
};

std::optional<Allocation> allocationOf(Operation *def) {
  if (auto attr = def->getAttrOfType<IntegerAttr>("pipeline.smem_bytes"))
    return Allocation{def, attr.getInt()};
  if (auto addr = dyn_cast<LLVM::AddressOfOp>(def)) {
    auto global = dyn_cast_or_null<LLVM::GlobalOp>(
        SymbolTable::lookupNearestSymbolFrom(def, addr.getGlobalNameAttr()));
    if (!global || global.getAddrSpace() != 3)
      return std::nullopt;
    std::optional<int64_t> bytes = stepBytes(global.getGlobalType());
    // A zero-sized array is the dynamic shared memory: its size is the
    // launch's.
    if (!bytes || *bytes <= 0)
      return std::nullopt;
    return Allocation{def, *bytes};
  }
  return std::nullopt;
}

/// A pointer as (allocation, lower bound of its byte offset in it).
std::optional<std::pair<Allocation, Bound>> pointerBound(Value ptr,
                                                         int depth = 0) {
  Operation *def = ptr.getDefiningOp();
  if (!def || depth > 16)
    return std::nullopt;
  if (std::optional<Allocation> a = allocationOf(def))
    return std::make_pair(*a, Bound{});
  if (isa<LLVM::AddrSpaceCastOp, LLVM::BitcastOp>(def))
    return pointerBound(def->getOperand(0), depth + 1);
  auto gep = dyn_cast<LLVM::GEPOp>(def);
  if (!gep)
    return std::nullopt;
  auto indices = gep.getIndices();
  std::optional<int64_t> bytes = stepBytes(gep.getElemType());
  if (indices.size() != 1 || !bytes)
    return std::nullopt;
  std::optional<std::pair<Allocation, Bound>> base =
      pointerBound(gep.getBase(), depth + 1);
  if (!base)
    return std::nullopt;
  auto index = *indices.begin();
  std::optional<Bound> offset;
  if (auto attr = dyn_cast<IntegerAttr>(index))
    offset = Bound{0, attr.getInt(), {}};
  else
    offset = lowerBound(cast<Value>(index));
  std::optional<Bound> sum = add(base->second, scale(offset, *bytes));
  if (!sum)
    return std::nullopt;
  return std::make_pair(base->first, *sum);
}

/// A verb that uses `state` (to name the pipeline), or null.
std::optional<VerbRef> verbOf(Value state) {
  for (Operation *user : state.getUsers())
    if (std::optional<VerbRef> verb = getVerb(user))
      return verb;
  return std::nullopt;
}

} // namespace

LogicalResult protocol::checkRingBuffers(FunctionOpInterface fn) {
  SmallVector<StateIndexOp> indices;
  fn->walk([&](StateIndexOp op) {
    auto type = dyn_cast<StateType>(op.getState().getType());
    if (type && !type.getSimple() && type.getStages() > 1)
      indices.push_back(op);
  });
  if (indices.empty())
    return success();

  bool failed = false;
  // One report per allocation (the producer's and the consumers' indices
  // reach the same ring).
  llvm::DenseSet<Operation *> reported;
  for (StateIndexOp index : indices) {
    // The address computations the index reaches: forward through integer
    // arithmetic and casts to the getelementptrs that use it.
    llvm::SetVector<Operation *> work;
    SmallVector<LLVM::GEPOp> geps;
    for (Operation *user : index->getUsers())
      work.insert(user);
    for (size_t i = 0; i < work.size() && work.size() < 256; ++i) {
      Operation *op = work[i];
      if (auto gep = dyn_cast<LLVM::GEPOp>(op)) {
        geps.push_back(gep);
        continue;
      }
      if (op->getNumResults() != 1 || op->getNumRegions() ||
          !isa<arith::ArithDialect>(op->getDialect()))
        continue;
      for (Operation *user : op->getResult(0).getUsers())
        work.insert(user);
    }
    int64_t stages = cast<StateType>(index.getState().getType()).getStages();
    for (LLVM::GEPOp gep : geps) {
      std::optional<std::pair<Allocation, Bound>> p = pointerBound(gep);
      if (!p || p->second.index != index.getResult() || p->second.coef <= 0)
        continue;
      auto [alloc, bound] = *p;
      int64_t last = bound.coef * (stages - 1) + bound.low;
      if (last < alloc.bytes || !reported.insert(alloc.op).second)
        continue;
      int64_t buffers = (alloc.bytes - std::max<int64_t>(bound.low, 0)) /
                        bound.coef;
      std::optional<VerbRef> verb = verbOf(index.getState());
      InFlightDiagnostic diag = gep.emitError();
      if (verb)
        diag << describe(verb->pipeline) << ": ";
      diag << "the buffer of stage " << (stages - 1) << " starts at byte "
           << last << " of a " << alloc.bytes
           << "-byte shared-memory allocation (rule: a pipeline has no more "
              "stages than the buffers of the ring it indexes): the ring "
              "holds "
           << buffers << " buffer" << (buffers == 1 ? "" : "s") << " of "
           << bound.coef << " bytes, so " << stages
           << " stages write past it into other data and two stages share "
              "bytes (use at most "
           << buffers << " stages, or allocate " << stages << " buffers)";
      diag.attachNote(alloc.op->getLoc()) << "the allocation";
      if (verb)
        noteCreate(diag, verb->pipeline);
      failed = true;
      break; // one report per index
    }
  }
  return failure(failed);
}
