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

#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SmallPtrSet.h"
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

//===----------------------------------------------------------------------===//
// Accesses to a ring whose buffer is not the held stage's
//===----------------------------------------------------------------------===//
//
// A ring some role addresses as `c * state.index + rest` holds one buffer
// per stage. A plain load or store into that allocation between a role's
// producer.acquire and producer.commit (or consumer.wait and
// consumer.release) of the ring's pipeline, whose address is computed from
// no state index (`ring.stage(t % 2, bytes)` on a ring of 4 stages: the
// double-buffering habit), touches a buffer the role need not hold: one a
// consumer is still reading, or one the producer is filling. Addresses from
// the index operand of an explicit `state.make index %i` count as the
// state's. Only the common static form: the verbs in the access's block or
// an enclosing one, before and after it.

namespace {
/// Values the address computation of `addr` reads (through region-free,
/// effect-free ops): whether it reaches a state.index, or a value that is
/// the index of an explicit state.make.
bool addressFromState(Value addr) {
  SmallVector<Value> worklist{addr};
  llvm::SmallPtrSet<Operation *, 16> visited;
  llvm::DenseSet<Value> seen;
  while (!worklist.empty()) {
    Value v = worklist.pop_back_val();
    if (!seen.insert(v).second)
      continue;
    for (Operation *user : v.getUsers())
      if (isa<StateMakeOp>(user))
        return true;
    Operation *def = v.getDefiningOp();
    if (!def || !visited.insert(def).second)
      continue;
    if (isa<StateIndexOp>(def))
      return true;
    if (def->getNumRegions() != 0 || isa<PipelineDialect>(def->getDialect()))
      continue;
    if (auto iface = dyn_cast<MemoryEffectOpInterface>(def))
      if (!iface.hasNoEffect())
        continue;
    llvm::append_range(worklist, def->getOperands());
  }
  return false;
}

/// The allocation a pointer chain starts from (getelementptr bases and
/// casts), or null.
Operation *baseAllocation(Value ptr) {
  for (int depth = 0; depth < 32; ++depth) {
    Operation *def = ptr.getDefiningOp();
    if (!def)
      return nullptr;
    if (allocationOf(def))
      return def;
    if (auto gep = dyn_cast<LLVM::GEPOp>(def))
      ptr = gep.getBase();
    else if (isa<LLVM::AddrSpaceCastOp, LLVM::BitcastOp>(def))
      ptr = def->getOperand(0);
    else
      return nullptr;
  }
  return nullptr;
}

/// The first verb of `pipe` in `op` (itself or nested), among `verbs`.
Operation *findVerb(Operation *op, Value pipe, ArrayRef<Verb> verbs) {
  Operation *found = nullptr;
  op->walk([&](Operation *inner) {
    if (found)
      return;
    std::optional<VerbRef> verb = getVerb(inner);
    if (verb && verb->pipeline == pipe && llvm::is_contained(verbs, verb->verb))
      found = inner;
  });
  return found;
}

/// The (opening, closing) verbs of `pipe` around `access`: an acquire or
/// wait before it and a commit or release after it, in its block or an
/// enclosing one (the nearest level that has an opening verb).
std::optional<std::pair<Operation *, Operation *>>
window(Operation *access, Value pipe) {
  for (Operation *at = access; at && !isa<FunctionOpInterface>(at);
       at = at->getParentOp()) {
    Operation *open = nullptr;
    for (Operation *p = at->getPrevNode(); p && !open; p = p->getPrevNode()) {
      if (findVerb(p, pipe, {Verb::Commit, Verb::Release}))
        break;
      open = findVerb(p, pipe, {Verb::Acquire, Verb::Wait});
    }
    if (!open)
      continue;
    std::optional<VerbRef> opened = getVerb(open);
    Verb closing = opened->verb == Verb::Acquire ? Verb::Commit : Verb::Release;
    for (Operation *n = at->getNextNode(); n; n = n->getNextNode())
      if (Operation *close = findVerb(n, pipe, {closing}))
        return std::make_pair(open, close);
    return std::nullopt;
  }
  return std::nullopt;
}

/// A ring: the pipeline whose states index it, the stride of one stage and
/// the address computation that shows it.
struct Ring {
  Value pipeline;
  int64_t stride;
  Operation *indexed;
};
} // namespace

LogicalResult protocol::checkRingBufferAccess(FunctionOpInterface fn) {
  llvm::MapVector<Operation *, Ring> rings;
  // The pipelines whose producer states index each ring: the ones that
  // fill it.
  llvm::DenseMap<Operation *, llvm::SetVector<Value>> fillers;
  fn->walk([&](StateIndexOp index) {
    auto type = dyn_cast<StateType>(index.getState().getType());
    if (!type || type.getSimple() || type.getStages() <= 1)
      return;
    std::optional<VerbRef> verb = verbOf(index.getState());
    if (!verb)
      return;
    llvm::SetVector<Value> producers;
    for (Operation *user : index.getState().getUsers())
      if (std::optional<VerbRef> v = getVerb(user))
        if (isProducerVerb(v->verb))
          producers.insert(v->pipeline);
    llvm::SetVector<Operation *> work;
    for (Operation *user : index->getUsers())
      work.insert(user);
    for (size_t i = 0; i < work.size() && work.size() < 256; ++i) {
      Operation *op = work[i];
      if (auto gep = dyn_cast<LLVM::GEPOp>(op)) {
        std::optional<std::pair<Allocation, Bound>> p = pointerBound(gep);
        if (p && p->second.index == index.getResult() && p->second.coef > 0) {
          rings.insert({p->first.op, Ring{verb->pipeline, p->second.coef, gep}});
          fillers[p->first.op].insert(producers.begin(), producers.end());
        }
        continue;
      }
      if (op->getNumResults() != 1 || op->getNumRegions() ||
          !isa<arith::ArithDialect>(op->getDialect()))
        continue;
      for (Operation *user : op->getResult(0).getUsers())
        work.insert(user);
    }
  });
  if (rings.empty())
    return success();
  SmallVector<Value> pipelines;
  fn->walk([&](CreateOp create) { pipelines.push_back(create.getResult()); });

  bool failed = false;
  llvm::DenseSet<Operation *> reported;
  fn->walk([&](Operation *access) {
    Value addr;
    if (auto store = dyn_cast<LLVM::StoreOp>(access))
      addr = store.getAddr();
    else if (auto load = dyn_cast<LLVM::LoadOp>(access))
      addr = load.getAddr();
    else
      return;
    Operation *alloc = baseAllocation(addr);
    auto ring = alloc ? rings.find(alloc) : rings.end();
    if (ring == rings.end() || reported.contains(alloc))
      return;
    // The pipelines of which this role holds a stage at the access.
    SmallVector<std::pair<Value, Operation *>> held;
    for (Value pipe : pipelines)
      if (auto w = window(access, pipe))
        held.push_back({pipe, w->first});
    if (held.empty())
      return;
    const llvm::SetVector<Value> &owners = fillers[alloc];
    if (!addressFromState(addr)) {
      auto own = llvm::find_if(held, [&](auto &h) {
        return h.first == ring->second.pipeline || owners.contains(h.first);
      });
      if (own == held.end())
        return;
      reported.insert(alloc);
      InFlightDiagnostic diag = access->emitError();
      diag << describe(own->first) << ": " << access->getName()
           << " reaches the ring whose buffers the stages pick (buffers of "
           << ring->second.stride
           << " bytes, addressed from state.index), while this role holds a "
              "stage, but its address is computed from no state's index: it "
              "may touch a buffer the role does not hold, one another role "
              "is filling or still reading (take the buffer from the held "
              "state: ring.stage(state.index, stage_bytes))";
      diag.attachNote(own->second->getLoc()) << "the stage is held from here";
      diag.attachNote(ring->second.indexed->getLoc())
          << "the ring's buffers are addressed from state.index here";
      failed = true;
      return;
    }
    // A ring one pipeline fills, touched while holding only stages of
    // others: the buffer is not this role's to read or write yet.
    if (owners.size() != 1 ||
        llvm::any_of(held, [&](auto &h) { return owners.contains(h.first); }))
      return;
    reported.insert(alloc);
    InFlightDiagnostic diag = access->emitError();
    diag << describe(held.front().first) << ": " << access->getName()
         << " touches a buffer of the ring that "
         << describe(owners.front())
         << " fills (its producer addresses it from state.index), while this "
            "role holds a stage of "
         << describe(held.front().first) << " but none of "
         << describe(owners.front())
         << ": the buffer may not be filled yet, or be refilled under the "
            "access (wait on "
         << describe(owners.front())
         << " first, and take the buffer from its own state)";
    diag.attachNote(held.front().second->getLoc())
        << "the stage held here is of another pipeline";
    noteCreate(diag, owners.front());
    failed = true;
  });
  return failure(failed);
}
