//===- TmaStoreBufferChecks.cpp - TMA-store stages vs. staging buffers ----===//
//
// Staging buffers of a PipelineTmaStore (pipeline-verify-protocol): its
// producer.acquire is `cp.async.bulk.wait_group.read (stages - 1)`: it
// returns as soon as at most `stages - 1` committed bulk groups still read
// shared memory. The buffer the next tile is written into must therefore
// not be one that any of the `stages - 1` previous groups read: with B
// staging buffers used in turn, `stages <= B`. A 3-stage pipeline over a
// 2-buffer ring lets the warps overwrite the buffer that the store of two
// tiles ago is still reading: silent corruption of the output, no hang.
//
// The IR does not tie buffers to the pipeline, so the check models what is
// there: the source address of every bulk store that a commit of the
// pipeline closes, as a linear form (opaque loop-invariant values with
// coefficients, plus a constant), evaluated for consecutive iterations of
// the loop around the commits. The loop's induction variable is counted
// (constant step), and so is `pipeline.state.index` of a state the loop
// carries and advances by a constant (its ring has the state type's stage
// count); remainders, divisions and masks of counted values are computed.
// Two commits less than `stages` apart whose stores read the same address
// read the same buffer.
//
// The same window for the writes that refill a buffer: a shared-memory
// store in the loop, before a commit, whose buffer (the base of its
// address: `buffer + thread offset`) is the source of a store closed by one
// of the `stages - 1` commits before it, in every iteration modelled, may
// overwrite the buffer that store still reads: a 2-stage copy loop that
// stores buffer i%2, then refills buffer (i+1)%2, whose store of the
// previous iteration the acquire leaves in flight (deepseek-ai/DeepEP#657:
// `tma_store_wait<kNumStages - 1>` before a prefetch into the buffer just
// stored). Anything not modelled (a loaded or data-dependent
// address, a store in a nested loop, commits in different loops, commits
// issued by different threads) leaves the pipeline unchecked: the check
// only reports addresses it has proved equal.
//
//===----------------------------------------------------------------------===//

#include "SmemHandoffChecks.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include <map>

using namespace mlir;
using namespace mlir::pipeline;
using namespace mlir::pipeline::protocol;

namespace {

/// sum(coefficient * opaque value) + constant. Opaque values are invariant
/// over the iterations compared, so equal forms are equal addresses.
struct Linear {
  std::map<const void *, int64_t> terms;
  int64_t constant = 0;

  static Linear of(int64_t c) {
    Linear l;
    l.constant = c;
    return l;
  }
  static Linear leaf(Value v) {
    Linear l;
    l.terms[v.getAsOpaquePointer()] = 1;
    return l;
  }
  bool isConstant() const { return terms.empty(); }
  Linear &add(const Linear &o, int64_t scale) {
    for (auto [k, c] : o.terms) {
      int64_t &t = terms[k];
      t += scale * c;
      if (t == 0)
        terms.erase(k);
    }
    constant += scale * o.constant;
    return *this;
  }
  bool operator==(const Linear &o) const {
    return constant == o.constant && terms == o.terms;
  }
};

/// Bytes of an element type a getelementptr scales its index by (scalars,
/// vectors and arrays of them); nullopt for structs and the like.
std::optional<int64_t> elementBytes(Type t) {
  if (t.isIntOrFloat())
    return (t.getIntOrFloatBitWidth() + 7) / 8;
  if (auto vec = dyn_cast<VectorType>(t)) {
    if (vec.isScalable())
      return std::nullopt;
    std::optional<int64_t> e = elementBytes(vec.getElementType());
    return e ? std::optional<int64_t>(*e * vec.getNumElements()) : std::nullopt;
  }
  if (auto arr = dyn_cast<LLVM::LLVMArrayType>(t)) {
    std::optional<int64_t> e = elementBytes(arr.getElementType());
    return e ? std::optional<int64_t>(*e * arr.getNumElements()) : std::nullopt;
  }
  return std::nullopt;
}

/// Evaluates addresses at iteration `k` of `loop` (null: straight-line
/// code, one "iteration").
class AddressModel {
public:
  AddressModel(scf::ForOp loop) : loop(loop) {}

  int64_t k = 0;
  /// Start index assumed for a loop-carried state whose start is not a
  /// constant (the iter arg), when one is needed.
  DenseMap<Value, int64_t> assumedStart;
  /// Loop-carried states whose start index is not known (filled while
  /// evaluating; the caller then tries every start).
  SmallVector<std::pair<Value, int64_t>, 1> unknownStarts; // (iter arg, stages)

  std::optional<Linear> eval(Value v, int depth = 0) {
    if (depth > 64)
      return std::nullopt;
    if (std::optional<int64_t> c = getConstantInt(v))
      return Linear::of(*c);
    if (loop && v == loop.getInductionVar()) {
      std::optional<int64_t> step = getConstantInt(loop.getStep());
      std::optional<Linear> lb = eval(loop.getLowerBound(), depth + 1);
      if (!step || !lb)
        return std::nullopt;
      return lb->add(Linear::of(k), *step);
    }
    Operation *def = v.getDefiningOp();
    if (!def)
      return invariant(v) ? std::optional<Linear>(Linear::leaf(v))
                          : std::nullopt;
    if (auto index = dyn_cast<StateIndexOp>(def))
      return stateIndex(index, depth);
    auto operand = [&](unsigned i) { return eval(def->getOperand(i), depth + 1); };
    if (isa<arith::AddIOp, LLVM::AddOp, arith::SubIOp, LLVM::SubOp>(def)) {
      std::optional<Linear> a = operand(0), b = operand(1);
      if (!a || !b)
        return std::nullopt;
      return a->add(*b, isa<arith::AddIOp, LLVM::AddOp>(def) ? 1 : -1);
    }
    if (isa<arith::MulIOp, LLVM::MulOp>(def)) {
      std::optional<Linear> a = operand(0), b = operand(1);
      if (a && b && b->isConstant())
        return Linear().add(*a, b->constant);
      if (a && b && a->isConstant())
        return Linear().add(*b, a->constant);
      return opaque(v, depth);
    }
    if (isa<arith::ShLIOp, LLVM::ShlOp>(def)) {
      std::optional<Linear> a = operand(0), b = operand(1);
      if (a && b && b->isConstant() && b->constant >= 0 && b->constant < 32)
        return Linear().add(*a, int64_t(1) << b->constant);
      return opaque(v, depth);
    }
    // Width and pointer casts keep the value (the addresses compared are
    // small offsets in shared memory).
    if (isa<arith::ExtSIOp, arith::ExtUIOp, arith::TruncIOp, arith::IndexCastOp,
            arith::IndexCastUIOp, LLVM::SExtOp, LLVM::ZExtOp, LLVM::TruncOp,
            LLVM::PtrToIntOp, LLVM::IntToPtrOp, LLVM::AddrSpaceCastOp,
            LLVM::BitcastOp>(def))
      return operand(0);
    if (auto gep = dyn_cast<LLVM::GEPOp>(def)) {
      auto indices = gep.getIndices();
      std::optional<int64_t> bytes = elementBytes(gep.getElemType());
      std::optional<Linear> base = eval(gep.getBase(), depth + 1);
      if (indices.size() != 1 || !bytes || !base)
        return opaque(v, depth);
      auto index = *indices.begin();
      if (auto attr = dyn_cast<IntegerAttr>(index))
        return base->add(Linear::of(attr.getInt()), *bytes);
      std::optional<Linear> i = eval(cast<Value>(index), depth + 1);
      if (!i)
        return opaque(v, depth);
      return base->add(*i, *bytes);
    }
    return opaque(v, depth);
  }

private:
  /// A value the model does not decompose: computed when its operands are
  /// constants at this iteration, an opaque term when it is the same in
  /// every iteration, unknown otherwise.
  std::optional<Linear> opaque(Value v, int depth) {
    Operation *def = v.getDefiningOp();
    if (def && def->getNumResults() == 1 && def->getNumRegions() == 0 &&
        isMemoryEffectFree(def)) {
      SmallVector<int64_t, 3> c;
      for (Value in : def->getOperands()) {
        std::optional<Linear> l = eval(in, depth + 1);
        if (!l || !l->isConstant())
          break;
        c.push_back(l->constant);
      }
      if (c.size() == def->getNumOperands())
        if (std::optional<int64_t> r = fold(def, c))
          return Linear::of(*r);
    }
    if (invariant(v))
      return Linear::leaf(v);
    return std::nullopt;
  }

  static std::optional<int64_t> fold(Operation *def, ArrayRef<int64_t> c) {
    if (c.size() == 3 && isa<arith::SelectOp, LLVM::SelectOp>(def))
      return c[0] ? c[1] : c[2];
    if (c.size() != 2)
      return std::nullopt;
    int64_t a = c[0], b = c[1];
    if (isa<arith::RemSIOp, arith::RemUIOp, LLVM::SRemOp, LLVM::URemOp>(def))
      return b ? std::optional<int64_t>(a % b) : std::nullopt;
    if (isa<arith::DivSIOp, arith::DivUIOp, LLVM::SDivOp, LLVM::UDivOp>(def))
      return b ? std::optional<int64_t>(a / b) : std::nullopt;
    if (isa<arith::AndIOp, LLVM::AndOp>(def))
      return a & b;
    if (isa<arith::OrIOp, LLVM::OrOp>(def))
      return a | b;
    if (isa<arith::XOrIOp, LLVM::XOrOp>(def))
      return a ^ b;
    if (isa<arith::ShRSIOp, arith::ShRUIOp, LLVM::AShrOp, LLVM::LShrOp>(def))
      return b >= 0 && b < 63 ? std::optional<int64_t>(a >> b) : std::nullopt;
    if (isa<arith::MinSIOp>(def))
      return std::min(a, b);
    if (isa<arith::MaxSIOp>(def))
      return std::max(a, b);
    if (auto cmp = dyn_cast<arith::CmpIOp>(def)) {
      switch (cmp.getPredicate()) {
      case arith::CmpIPredicate::eq: return a == b;
      case arith::CmpIPredicate::ne: return a != b;
      case arith::CmpIPredicate::slt: return a < b;
      case arith::CmpIPredicate::sle: return a <= b;
      case arith::CmpIPredicate::sgt: return a > b;
      case arith::CmpIPredicate::sge: return a >= b;
      default: return std::nullopt;
      }
    }
    return std::nullopt;
  }

  /// The same in every iteration of `loop`: defined outside it, or computed
  /// inside from such values by pure ops (thread ids, constants, ...).
  bool invariant(Value v, int depth = 0) {
    if (!loop || depth > 64)
      return depth <= 64;
    if (!loop->isAncestor(v.getParentRegion()->getParentOp()))
      return true;
    Operation *def = v.getDefiningOp();
    if (!def || def->getNumRegions() || !isMemoryEffectFree(def))
      return false;
    for (Value in : def->getOperands())
      if (!invariant(in, depth + 1))
        return false;
    return true;
  }

  /// `state.index` of a state the loop carries and advances by a constant
  /// per iteration: (start + advance * k) mod stages.
  std::optional<Linear> stateIndex(StateIndexOp index, int depth) {
    auto type = dyn_cast<StateType>(index.getState().getType());
    if (!type || type.getSimple() || type.getStages() <= 0)
      return std::nullopt;
    int64_t stages = type.getStages();
    auto wrap = [&](int64_t i) { return ((i % stages) + stages) % stages; };
    auto [root, offset] = getStateRoot(index.getState());
    if (auto make = root.getDefiningOp<StateMakeOp>()) {
      std::optional<int64_t> i =
          make.getIndex() ? getConstantInt(make.getIndex()) : int64_t(0);
      if (i)
        return Linear::of(wrap(*i + offset));
    }
    auto arg = dyn_cast<BlockArgument>(root);
    if (loop && arg && arg.getOwner() == loop.getBody() &&
        arg.getArgNumber() > 0) {
      unsigned idx = arg.getArgNumber() - 1;
      auto [yRoot, yOffset] = getStateRoot(
          loop.getBody()->getTerminator()->getOperand(idx));
      if (yRoot != arg)
        return std::nullopt;
      int64_t start;
      auto [iRoot, iOffset] = getStateRoot(loop.getInitArgs()[idx]);
      auto make = iRoot.getDefiningOp<StateMakeOp>();
      std::optional<int64_t> i =
          !make ? std::nullopt
                : make.getIndex() ? getConstantInt(make.getIndex())
                                  : std::optional<int64_t>(0);
      if (i) {
        start = *i + iOffset;
      } else if (auto it = assumedStart.find(arg); it != assumedStart.end()) {
        start = it->second;
      } else {
        if (!llvm::is_contained(unknownStarts, std::make_pair(Value(arg), stages)))
          unknownStarts.push_back({arg, stages});
        start = 0;
      }
      return Linear::of(wrap(start + offset + yOffset * k));
    }
    if (invariant(index.getResult(), depth))
      return Linear::leaf(index.getResult());
    return std::nullopt;
  }

  scf::ForOp loop;
};

/// An op that closes the open bulk group: a commit of a tma_store pipeline
/// (the pipeline is returned) or a bare commit_group (null).
std::optional<Value> closesBulkGroup(Operation *op) {
  if (auto commit = dyn_cast<ProducerCommitOp>(op))
    if (getPipelineType(commit.getPipeline()).getKind() ==
        PipelineKind::TmaStore)
      return commit.getPipeline();
  if (isa<BulkGroupCommitOp, NVVM::CpAsyncBulkCommitGroupOp>(op))
    return Value();
  return std::nullopt;
}

/// The first op after `op` in program order (later in its block, nested
/// ops first, then after each enclosing op) that closes a bulk group.
Operation *nextGroupClose(Operation *op) {
  for (Operation *cur = op; cur && !isa<FunctionOpInterface>(cur);
       cur = cur->getParentOp()) {
    for (Operation *next = cur->getNextNode(); next; next = next->getNextNode()) {
      Operation *found = nullptr;
      next->walk<WalkOrder::PreOrder>([&](Operation *inner) {
        if (closesBulkGroup(inner)) {
          found = inner;
          return WalkResult::interrupt();
        }
        return WalkResult::advance();
      });
      if (found)
        return found;
    }
  }
  return nullptr;
}

} // namespace

bool protocol::isSharedMemoryWrite(Operation *op) {
  auto shared = [](Type t) {
    if (auto ptr = dyn_cast<LLVM::LLVMPointerType>(t))
      return ptr.getAddressSpace() == 3;
    if (auto memref = dyn_cast<MemRefType>(t)) {
      Attribute space = memref.getMemorySpace();
      if (auto gpuSpace = dyn_cast_or_null<gpu::AddressSpaceAttr>(space))
        return gpuSpace.getValue() == gpu::AddressSpace::Workgroup;
      if (auto i = dyn_cast_or_null<IntegerAttr>(space))
        return i.getInt() == 3;
    }
    return false;
  };
  if (auto st = dyn_cast<LLVM::StoreOp>(op))
    return shared(st.getAddr().getType());
  // memref.store / vector.store by name: the check needs only their memref
  // operand (the second), not a link to those dialects.
  StringRef name = op->getName().getStringRef();
  if ((name == "memref.store" || name == "vector.store") &&
      op->getNumOperands() >= 2)
    return shared(op->getOperand(1).getType());
  return isa<NVVM::StMatrixOp>(op);
}

bool protocol::isBulkStore(Operation *op) {
  return isa<TmaStoreOp, NVVM::CpAsyncBulkTensorSharedCTAToGlobalOp,
             NVVM::CpAsyncBulkSharedCTAToGlobalOp,
             NVVM::CpAsyncBulkTensorReduceOp>(op);
}

/// The shared-memory source of a bulk store.
Value protocol::bulkStoreSource(Operation *op) {
  if (auto s = dyn_cast<TmaStoreOp>(op))
    return s.getSrc();
  if (auto s = dyn_cast<NVVM::CpAsyncBulkTensorSharedCTAToGlobalOp>(op))
    return s.getSrcMem();
  if (auto s = dyn_cast<NVVM::CpAsyncBulkSharedCTAToGlobalOp>(op))
    return s.getSrcMem();
  if (auto s = dyn_cast<NVVM::CpAsyncBulkTensorReduceOp>(op))
    return s.getSrcMem();
  return {};
}

namespace {

struct Group {
  Operation *commit;
  SmallVector<Operation *, 2> stores;
};

/// The buffer a shared-memory write fills: the base of its address when
/// the address adds a per-thread offset to it (`buffer[tid]`), else the
/// address itself.
Value writtenBuffer(Operation *op) {
  Value addr;
  if (auto st = dyn_cast<LLVM::StoreOp>(op))
    addr = st.getAddr();
  else if (auto st = dyn_cast<NVVM::StMatrixOp>(op))
    addr = st.getPtr();
  if (!addr)
    return {};
  if (auto gep = addr.getDefiningOp<LLVM::GEPOp>())
    return gep.getBase();
  return addr;
}

/// Writes in `loop` (not a nested loop) that refill the buffer a store of
/// one of the `stages - 1` groups before still reads; true when reported.
/// `seq`: the store addresses of each group, in commit order.
bool checkRefills(CreateOp create, ArrayRef<Group> groups, scf::ForOp loop,
                  AddressModel &model,
                  const SmallVector<SmallVector<Linear, 2>> &seq, int64_t stages,
                  int64_t iterations) {
  Block *body = loop.getBody();
  int64_t perIteration = groups.size();
  SmallVector<Operation *> commitTops;
  for (const Group &g : groups)
    commitTops.push_back(body->findAncestorOpInBlock(*g.commit));
  bool reported = false;
  loop.getBody()->walk([&](Operation *write) {
    if (reported || !isSharedMemoryWrite(write) ||
        write->getParentOfType<scf::ForOp>() != loop)
      return;
    Value buffer = writtenBuffer(write);
    Operation *top = body->findAncestorOpInBlock(*write);
    if (!buffer || !top)
      return;
    // The group this write's data goes with: the first commit after it.
    int64_t g = perIteration;
    for (int64_t i = 0; i < perIteration; ++i) {
      if (commitTops[i] == top)
        return; // the write and the commit in one op: not decided
      if (top->isBeforeInBlock(commitTops[i])) {
        g = i;
        break;
      }
    }
    SmallVector<std::optional<Linear>> written;
    for (int64_t k = 0; k < iterations; ++k) {
      model.k = k;
      written.push_back(model.eval(buffer));
    }
    for (int64_t d = 1; d < stages && !reported; ++d) {
      int64_t h = ((g - d) % perIteration + perIteration) % perIteration;
      for (size_t j = 0; j < groups[h].stores.size() && !reported; ++j) {
        int64_t matched = 0;
        bool mismatch = false;
        for (int64_t k = 0; k < iterations && !mismatch; ++k) {
          int64_t at = k * perIteration + g - d;
          if (at < 0 || at >= static_cast<int64_t>(seq.size()))
            continue;
          if (!written[k] || j >= seq[at].size() || !(*written[k] == seq[at][j]))
            mismatch = true;
          else
            ++matched;
        }
        if (mismatch || matched < 2)
          continue;
        reported = true;
        Value pipe = create.getResult();
        InFlightDiagnostic diag =
            write->emitError()
            << describe(pipe) << ": this write refills the staging buffer "
            << "that the tma_store " << d << " commit" << (d == 1 ? "" : "s")
            << " before still reads: producer_acquire() only waits until at "
               "most "
            << stages - 1 << " bulk group" << (stages == 2 ? "" : "s")
            << " still read shared memory, and that store's group is one "
               "of them, so the write may land under the store (silent "
               "corruption of the output); wait for it (a PipelineTmaStore "
               "of "
            << d << " stage" << (d == 1 ? "" : "s")
            << "), or refill a buffer none of the last " << stages - 1
            << " stores reads";
        diag.attachNote(groups[h].stores[j]->getLoc())
            << "this store reads the buffer";
        diag.attachNote(create.getLoc()) << "the pipeline is created here";
      }
    }
  });
  return reported;
}

/// Checks one pipeline; true when it reported.
bool checkPipeline(CreateOp create, ArrayRef<Group> groups, int64_t blockDim) {
  Value pipe = create.getResult();
  int64_t stages = getPipelineType(pipe).getStages();
  scf::ForOp loop = groups.front().commit->getParentOfType<scf::ForOp>();
  // Every store and commit in the same loop (not a nested one), issued by a
  // common thread (bulk groups are per thread).
  std::optional<llvm::BitVector> common;
  bool executorsKnown = true;
  for (const Group &g : groups) {
    SmallVector<Operation *, 4> ops(g.stores.begin(), g.stores.end());
    ops.push_back(g.commit);
    for (Operation *op : ops) {
      if (op->getParentOfType<scf::ForOp>() != loop)
        return false;
      std::optional<Executors> ex =
          executorsKnown ? getExecutors(op, blockDim) : std::nullopt;
      if (!ex) {
        executorsKnown = false;
        continue;
      }
      if (!common)
        common = ex->threads;
      else
        *common &= ex->threads;
    }
  }
  // Stores that read an unchanging buffer are harmless: the buffer must be
  // rewritten, by ordinary stores in the loop (or the function), for a
  // store still in flight to see the wrong data.
  Operation *scope = loop ? loop.getOperation()
                          : groups.front().commit->getParentOfType<FunctionOpInterface>()
                                .getOperation();
  bool rewritten = false;
  scope->walk([&](Operation *op) {
    if (isSharedMemoryWrite(op))
      rewritten = true;
  });
  if (!rewritten)
    return false;
  if (executorsKnown ? !common || common->none()
                     : llvm::any_of(groups, [&](const Group &g) {
                         return g.commit->getBlock() !=
                                groups.front().commit->getBlock();
                       }))
    return false;

  // Iterations to look at: enough for every window of `stages` commits to
  // show up away from the loop's start (bounded by a constant trip count).
  int64_t iterations = 1;
  if (loop) {
    iterations = 4 * stages + 8;
    if (std::optional<int64_t> trips = getConstantTripCount(loop))
      iterations = std::min(iterations, *trips);
  }
  int64_t perIteration = groups.size();

  AddressModel model(loop);
  // Address(es) of each commit's stores, per iteration; one pass per start
  // index of a loop-carried state that does not start at a constant.
  using Addresses = SmallVector<SmallVector<Linear, 2>>;
  auto evaluate = [&]() -> std::optional<Addresses> {
    Addresses out;
    for (int64_t k = 0; k < iterations; ++k) {
      model.k = k;
      for (const Group &g : groups) {
        SmallVector<Linear, 2> addrs;
        for (Operation *s : g.stores) {
          std::optional<Linear> a = model.eval(bulkStoreSource(s));
          if (!a)
            return std::nullopt;
          addrs.push_back(*a);
        }
        out.push_back(std::move(addrs));
      }
    }
    return out;
  };
  // The smallest distance (in commits) at which a buffer is read again, and
  // the stores that show it.
  struct Reuse {
    int64_t distance;
    Operation *first, *second;
  };
  auto findReuse = [&](const Addresses &seq) -> std::optional<Reuse> {
    std::optional<Reuse> best;
    for (int64_t g = 0; g < static_cast<int64_t>(seq.size()); ++g)
      for (int64_t h = g + 1;
           h < static_cast<int64_t>(seq.size()) && h - g < stages; ++h)
        for (size_t i = 0; i < seq[g].size(); ++i)
          for (size_t j = 0; j < seq[h].size(); ++j)
            if (seq[g][i] == seq[h][j] && (!best || h - g < best->distance))
              best = Reuse{h - g, groups[g % perIteration].stores[i],
                           groups[h % perIteration].stores[j]};
    return best;
  };

  std::optional<Addresses> seq = evaluate();
  if (!seq)
    return false;
  std::optional<Reuse> reuse = findReuse(*seq);
  if (!reuse)
    return model.unknownStarts.empty() && loop &&
           checkRefills(create, groups, loop, model, *seq, stages, iterations);
  // A state that does not start at a known index: the reuse must show for
  // every start (one such state at most).
  if (model.unknownStarts.size() > 1)
    return false;
  if (model.unknownStarts.size() == 1) {
    auto [arg, ring] = model.unknownStarts.front();
    for (int64_t s = 1; s < ring; ++s) {
      model.assumedStart[arg] = s;
      std::optional<Addresses> other = evaluate();
      if (!other)
        return false;
      std::optional<Reuse> r = findReuse(*other);
      if (!r)
        return false;
      if (r->distance > reuse->distance)
        reuse = r;
    }
  }

  int64_t buffers = reuse->distance;
  InFlightDiagnostic diag =
      create.emitError()
      << describe(pipe) << " has " << stages << " stages but its tma_stores "
      << "read " << buffers << " staging buffer" << (buffers == 1 ? "" : "s")
      << " in turn (a store's source address is read again " << buffers
      << " commit" << (buffers == 1 ? "" : "s")
      << " later): producer_acquire() only waits until at most "
      << stages - 1 << " bulk groups still read shared memory, so it returns "
      << "while the store of " << buffers << " commit"
      << (buffers == 1 ? "" : "s")
      << " before still reads the buffer about to be rewritten (staging "
         "buffers: a PipelineTmaStore needs at least as many buffers as "
         "stages; create it with num_stages="
      << buffers << ", or stage through " << stages
      << " buffers: index the buffer by the tile counter modulo " << stages
      << ")";
  diag.attachNote(reuse->first->getLoc())
      << "this store reads the buffer";
  diag.attachNote(reuse->second->getLoc())
      << "and this one reads the same buffer " << buffers << " commit"
      << (buffers == 1 ? "" : "s") << " later, while up to " << stages - 1
      << " earlier groups may be in flight";
  return true;
}

} // namespace

LogicalResult protocol::checkTmaStoreBuffers(FunctionOpInterface fn,
                                             const Options &options) {
  if (fn.isExternal())
    return success();
  // The commits of each tma_store pipeline with more than one stage (one
  // stage: the acquire waits for every earlier group), and the stores each
  // closes.
  llvm::MapVector<Value, SmallVector<Group, 2>> groups;
  DenseMap<Operation *, std::pair<Value, size_t>> groupOf;
  fn->walk([&](ProducerCommitOp commit) {
    PipelineType type = getPipelineType(commit.getPipeline());
    if (type.getKind() != PipelineKind::TmaStore || type.getStages() < 2 ||
        !commit.getPipeline().getDefiningOp<CreateOp>())
      return;
    auto &list = groups[commit.getPipeline()];
    groupOf[commit] = {commit.getPipeline(), list.size()};
    list.push_back(Group{commit, {}});
  });
  if (groups.empty())
    return success();
  fn->walk([&](Operation *op) {
    if (!isBulkStore(op) || !bulkStoreSource(op))
      return;
    Operation *close = nextGroupClose(op);
    if (!close)
      return;
    auto it = groupOf.find(close);
    if (it == groupOf.end())
      return;
    groups[it->second.first][it->second.second].stores.push_back(op);
  });
  int64_t blockDim = getBlockDim(fn, options);
  bool failed = false;
  for (auto &[pipe, list] : groups) {
    // A commit that closes no store (an empty group) reads nothing but
    // still counts as a group for wait_group.
    if (llvm::all_of(list, [](const Group &g) { return g.stores.empty(); }))
      continue;
    failed |= checkPipeline(pipe.getDefiningOp<CreateOp>(), list, blockDim);
  }
  return failure(failed);
}
