//===- Watchdog.cpp - bounded waits that report the stuck barrier ---------===//
//
// With `watchdog=true` every wait loop reads %globaltimer before its first
// try, and each failed try compares the elapsed time with the timeout. On
// expiry the first thread to get there fills the device global
// `__pipeline_watchdog` (i32[16], address space 1):
//
//   [0] magic 0x50495045 ("PIPE")   [1] pipeline id   [2] role (0 producer,
//   1 consumer)   [3] stage   [4] phase   [5..7] ctaid.x/y/z   [8] warp
//
// then traps. Pipeline ids index the module attribute
// `pipeline.watchdog_names` (an array of strings) that the pass writes.
//
//===----------------------------------------------------------------------===//

#include "LoweringUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/IR/SymbolTable.h"

using namespace mlir;
using namespace mlir::pipeline;

static constexpr StringLiteral kWatchdogGlobal = "__pipeline_watchdog";
static constexpr int64_t kWatchdogWords = 16;
static constexpr int64_t kWatchdogMagic = 0x50495045;

int32_t mlir::pipeline::getWatchdogPipelineId(Value pipeline) {
  auto create = pipeline.getDefiningOp<CreateOp>();
  if (!create)
    return -1;
  if (auto id = create->getAttrOfType<IntegerAttr>("pipeline.watchdog_id"))
    return static_cast<int32_t>(id.getInt());
  return -1;
}

/// The report buffer, created once per gpu.module (external linkage so the
/// runner finds it with cuModuleGetGlobal).
LLVM::GlobalOp mlir::pipeline::getOrCreateWatchdogGlobal(OpBuilder &b,
                                                         Location loc) {
  Operation *symbolTable = b.getInsertionBlock()->getParentOp();
  while (symbolTable && !symbolTable->hasTrait<OpTrait::SymbolTable>())
    symbolTable = symbolTable->getParentOp();
  assert(symbolTable && "wait loop outside of any symbol table");
  if (auto existing = dyn_cast_or_null<LLVM::GlobalOp>(
          SymbolTable::lookupSymbolIn(symbolTable, kWatchdogGlobal)))
    return existing;
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&symbolTable->getRegion(0).front());
  auto arrayTy = LLVM::LLVMArrayType::get(b.getI32Type(), kWatchdogWords);
  auto global = LLVM::GlobalOp::create(
      b, loc, arrayTy, /*isConstant=*/false, LLVM::Linkage::External,
      kWatchdogGlobal, /*value=*/Attribute(), /*alignment=*/4,
      /*addrSpace=*/static_cast<unsigned>(NVVM::NVVMMemorySpace::Global));
  b.createBlock(&global.getInitializerRegion());
  Value zero = LLVM::ZeroOp::create(b, loc, arrayTy);
  LLVM::ReturnOp::create(b, loc, zero);
  return global;
}

void mlir::pipeline::emitWatchdogCheck(OpBuilder &b, Location loc, Value start,
                                       LLVM::GlobalOp buffer,
                                       const PipelineLoweringOptions &options,
                                       const WaitSite &site) {
  Value now = NVVM::GlobalTimerOp::create(b, loc, b.getI64Type());
  Value elapsed = arith::SubIOp::create(b, loc, now, start);
  Value limit = arith::ConstantIntOp::create(b, loc, b.getI64Type(),
                                             options.watchdogTimeoutNs);
  Value expired = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ugt,
                                        elapsed, limit);
  emitIf(b, loc, expired, [&](OpBuilder &nb, Location nl) {
    Value base = LLVM::AddressOfOp::create(nb, nl, buffer);
    // Claim the record: only the first expired wait writes it.
    auto claim = LLVM::AtomicCmpXchgOp::create(
        nb, nl, base, constI32(nb, nl, 0), constI32(nb, nl, kWatchdogMagic),
        LLVM::AtomicOrdering::monotonic, LLVM::AtomicOrdering::monotonic);
    Value won =
        LLVM::ExtractValueOp::create(nb, nl, claim, ArrayRef<int64_t>{1});
    emitIf(nb, nl, won, [&](OpBuilder &wb, Location wl) {
      Type i32 = wb.getI32Type();
      SmallVector<Value> words = {
          constI32(wb, wl, site.pipelineId),
          constI32(wb, wl, site.role),
          site.stage,
          site.phase,
          NVVM::BlockIdXOp::create(wb, wl, i32),
          NVVM::BlockIdYOp::create(wb, wl, i32),
          NVVM::BlockIdZOp::create(wb, wl, i32),
          warpIndex(wb, wl)};
      for (auto [i, word] : llvm::enumerate(words)) {
        Value slot = LLVM::GEPOp::create(
            wb, wl, base.getType(), i32, base,
            ArrayRef<LLVM::GEPArg>{static_cast<int32_t>(i + 1)});
        LLVM::StoreOp::create(wb, wl, word, slot, /*alignment=*/4,
                              /*isVolatile=*/true);
      }
    });
    // Make the record visible to the host before the context dies.
    NVVM::MembarOp::create(nb, nl, NVVM::MemScopeKind::SYS);
    LLVM::Trap::create(nb, nl);
  });
}
