//===- BarrierStorageChecks.cpp - barrier storage large enough ------------===//
//
// Property 10 of pipeline-verify-protocol: the shared memory given to
// pipeline.create as barrier storage holds the pipeline's mbarriers (8 bytes
// each: 2 * stages for a full/empty ring, depth * length for an order). A
// smaller array makes the last barriers overlap whatever follows it, which
// no verifier and no simulator notices: the kernel hangs or corrupts data.
//
// The size is known when the storage is a shared global (`llvm.mlir.global`
// in address space 3 of an array type), reached through `llvm.mlir.addressof`
// and constant byte offsets (`llvm.getelementptr`), or when it is carved out
// of dynamic shared memory by the Python layer, whose allocation pointer
// carries its bytes (`pipeline.smem_bytes`, `Kernel.alloc_barriers`).
//
// Two pipelines whose storage overlaps in one allocation (the same
// `alloc_barriers` handed to two creates, or offsets into one array that
// collide) share mbarriers: each ring's arrivals complete the other's phases
// and its waits pass on the other's commits. Creates in the two branches of
// one `scf.if` never both run and are not compared.
//
//===----------------------------------------------------------------------===//

#include "ProtocolChecks.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/SymbolTable.h"

using namespace mlir;
using namespace mlir::pipeline;
using namespace mlir::pipeline::protocol;

/// Bytes of an LLVM type made of integers, floats and arrays (nullopt for
/// anything else).
static std::optional<int64_t> getTypeBytes(Type type) {
  if (auto array = dyn_cast<LLVM::LLVMArrayType>(type)) {
    std::optional<int64_t> elem = getTypeBytes(array.getElementType());
    if (!elem)
      return std::nullopt;
    return *elem * static_cast<int64_t>(array.getNumElements());
  }
  if (type.isIntOrFloat() && type.getIntOrFloatBitWidth() % 8 == 0)
    return type.getIntOrFloatBitWidth() / 8;
  return std::nullopt;
}

namespace {
/// The allocation behind a storage pointer (a shared global, or the op
/// that carries `pipeline.smem_bytes`) and the bytes left from the pointer
/// to its end.
struct Storage {
  Operation *allocation;
  int64_t bytesLeft;
  /// Bytes from the allocation's start to the pointer.
  int64_t offset;
};
} // namespace

static std::optional<Storage> getStorage(Value ptr, Operation *from) {
  int64_t offset = 0;
  while (Operation *def = ptr.getDefiningOp()) {
    // A Python allocation (`Kernel.alloc_barriers`) names its bytes.
    if (auto bytes = def->getAttrOfType<IntegerAttr>("pipeline.smem_bytes"))
      return Storage{def, bytes.getInt() - offset, offset};
    auto gep = dyn_cast<LLVM::GEPOp>(def);
    if (!gep)
      break;
    // Byte offsets only (`getelementptr ... i8`), as builders emit them.
    if (!gep.getElemType().isInteger(8) || gep.getIndices().size() != 1)
      return std::nullopt;
    auto index = gep.getIndices()[0];
    std::optional<int64_t> step;
    if (auto attr = dyn_cast<IntegerAttr>(index))
      step = attr.getInt();
    else
      step = getConstantInt(cast<Value>(index));
    if (!step)
      return std::nullopt;
    offset += *step;
    ptr = gep.getBase();
  }
  auto addr = ptr.getDefiningOp<LLVM::AddressOfOp>();
  if (!addr)
    return std::nullopt;
  auto global = SymbolTable::lookupNearestSymbolFrom<LLVM::GlobalOp>(
      from, addr.getGlobalNameAttr());
  if (!global || global.getAddrSpace() != 3)
    return std::nullopt;
  std::optional<int64_t> size = getTypeBytes(global.getGlobalType());
  // A zero-length array is the extern dynamic shared memory: no size.
  if (!size || *size == 0)
    return std::nullopt;
  return Storage{global, *size - offset, offset};
}

/// Whether `a` and `b` lie in different branches of one `scf.if` (so that
/// at most one of them runs).
static bool inExclusiveBranches(Operation *a, Operation *b) {
  for (Operation *ifOp = a->getParentOp(); ifOp; ifOp = ifOp->getParentOp()) {
    if (!isa<scf::IfOp>(ifOp) || !ifOp->isProperAncestor(b))
      continue;
    Region *ra = a->getParentRegion(), *rb = b->getParentRegion();
    while (ra->getParentOp() != ifOp)
      ra = ra->getParentOp()->getParentRegion();
    while (rb->getParentOp() != ifOp)
      rb = rb->getParentOp()->getParentRegion();
    return ra != rb;
  }
  return false;
}

namespace {
/// A create's mbarriers: bytes [begin, end) of an allocation.
struct Placed {
  CreateOp create;
  Operation *allocation;
  int64_t begin, end;
};
} // namespace

LogicalResult protocol::checkBarrierStorage(FunctionOpInterface fn) {
  bool failed = false;
  SmallVector<Placed> placed;
  fn->walk([&](CreateOp create) {
    Value storage = create.getBarrierStorage();
    if (!storage)
      return;
    PipelineType type = getPipelineType(create.getResult());
    int64_t needed = getBarrierPlan(type).numBarriers * 8;
    std::optional<Storage> found = getStorage(storage, create);
    if (!found)
      return;
    Placed here{create, found->allocation, found->offset,
                found->offset + needed};
    for (Placed &other : placed) {
      if (other.allocation != here.allocation || other.end <= here.begin ||
          here.end <= other.begin ||
          inExclusiveBranches(other.create, create))
        continue;
      InFlightDiagnostic diag = create.emitError();
      diag << describe(create.getResult())
           << ": its barrier storage (bytes " << here.begin << "-"
           << here.end - 1 << " of the allocation) overlaps that of "
           << describe(other.create.getResult()) << " (bytes " << other.begin
           << "-" << other.end - 1
           << "): the two pipelines share mbarriers, so each one's arrivals "
              "complete the other's phases and its waits pass on the other's "
              "commits (give each pipeline its own barrier storage, e.g. its "
              "own alloc_barriers)";
      diag.attachNote(other.create.getLoc()) << "the other pipeline is created here";
      diag.attachNote(found->allocation->getLoc()) << "storage declared here";
      failed = true;
      break;
    }
    placed.push_back(here);
  });
  fn->walk([&](CreateOp create) {
    Value storage = create.getBarrierStorage();
    if (!storage)
      return;
    PipelineType type = getPipelineType(create.getResult());
    int64_t needed = getBarrierPlan(type).numBarriers * 8;
    std::optional<Storage> found = getStorage(storage, create);
    if (!found || found->bytesLeft >= needed)
      return;
    InFlightDiagnostic diag = create.emitError();
    diag << describe(create.getResult()) << ": barrier storage holds "
         << found->bytesLeft << " bytes (" << found->bytesLeft / 8
         << " mbarriers) but the pipeline needs " << needed << " ("
         << needed / 8 << " mbarriers of 8 bytes: "
         << (type.getKind() == PipelineKind::Order
                 ? "depth x length"
                 : "a full and an empty barrier per stage")
         << "): the last barriers overlap the shared memory after it (make "
            "the storage "
         << needed << " bytes)";
    diag.attachNote(found->allocation->getLoc()) << "storage declared here";
    failed = true;
  });
  return failure(failed);
}
