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
//===----------------------------------------------------------------------===//

#include "ProtocolChecks.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
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
};
} // namespace

static std::optional<Storage> getStorage(Value ptr, Operation *from) {
  int64_t offset = 0;
  while (Operation *def = ptr.getDefiningOp()) {
    // A Python allocation (`Kernel.alloc_barriers`) names its bytes.
    if (auto bytes = def->getAttrOfType<IntegerAttr>("pipeline.smem_bytes"))
      return Storage{def, bytes.getInt() - offset};
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
  return Storage{global, *size - offset};
}

LogicalResult protocol::checkBarrierStorage(FunctionOpInterface fn) {
  bool failed = false;
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
