//===- Watchdog.cpp - bounded waits that report the stuck barrier ---------===//
//
// The device half of docs/watchdog.md (the runner's half is
// python/pipeline_mlir/runtime/watchdog.py). With `watchdog=true` every wait
// loop reads %globaltimer before its first try, and each failed try compares
// the elapsed time with the timeout. On expiry:
//
//   * the first thread to get there (atomicrmw xchg 1 on the device global
//     `__pipeline_watchdog_claim`) loads the i64 `__pipeline_watchdog_buffer`
//     that the runner set to the device address of a pinned, mapped host
//     buffer, and if it is not null writes words 1..10 of the record with
//     volatile stores through that generic pointer, membar.sys, the magic
//     0x57444F47 to word 0, membar.sys;
//   * the winner then sets the claim to 2; the other expired threads wait
//     for that (at most 1 ms: a trap aborts the grid, and would cut the
//     record short) and every expired thread traps.
//
// The record lives in host memory because after a trap the context is
// poisoned and a device global could not be copied back. The claim is a
// device global because atomics on host memory over PCIe are not
// guaranteed.
//
// Pipeline ids index the module attribute `pipeline.watchdog_names` and the
// NUL-separated global `__pipeline_watchdog_names` that the pass emits next
// to the buffer (addWatchdogNames).
//
//===----------------------------------------------------------------------===//

#include "LoweringUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"

using namespace mlir;
using namespace mlir::pipeline;

namespace {
constexpr int64_t kWatchdogMagic = 0x57444F47; // "WDOG"
constexpr int64_t kWatchdogVersion = 1;
/// Claim word: 0 free, 1 taken (record being written), 2 record written.
constexpr int64_t kClaimTaken = 1;
constexpr int64_t kClaimDone = 2;
/// How long a thread that lost the claim waits for the record before it
/// traps anyway (the winner needs a few microseconds).
constexpr int64_t kLoserWaitNs = 1000000;
constexpr unsigned kGlobalAddrSpace =
    static_cast<unsigned>(NVVM::NVVMMemorySpace::Global);

Operation *enclosingSymbolTable(Operation *op) {
  while (op && !op->hasTrait<OpTrait::SymbolTable>())
    op = op->getParentOp();
  return op;
}

/// The global `name` of `symbolTable`, created as an integer global of
/// `type` (initial 0) at the start of its body when missing.
LLVM::GlobalOp getOrCreateIntGlobal(OpBuilder &b, Location loc,
                                    Operation *symbolTable, StringRef name,
                                    IntegerType type, LLVM::Linkage linkage) {
  if (auto existing = dyn_cast_or_null<LLVM::GlobalOp>(
          SymbolTable::lookupSymbolIn(symbolTable, name)))
    return existing;
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&symbolTable->getRegion(0).front());
  return LLVM::GlobalOp::create(b, loc, type, /*isConstant=*/false, linkage,
                                name, b.getIntegerAttr(type, 0),
                                /*alignment=*/type.getWidth() / 8,
                                kGlobalAddrSpace);
}

/// The winner's half: words 1..10 of the record for `site`, membar.sys,
/// the magic, membar.sys, through the pointer that the runner stored in the
/// buffer global (nothing when it is null, e.g. a plain cuLaunchKernel).
void emitRecord(OpBuilder &b, Location loc, Value elapsed,
                const WatchdogGlobals &globals, const WaitSite &site) {
  Type i32 = b.getI32Type(), i64 = b.getI64Type();
  Value slot = LLVM::AddressOfOp::create(b, loc, globals.buffer);
  Value address = LLVM::LoadOp::create(b, loc, i64, slot, /*alignment=*/8,
                                       /*isVolatile=*/true);
  Value armed =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, address,
                            arith::ConstantIntOp::create(b, loc, i64, 0));
  emitIf(b, loc, armed, [&](OpBuilder &sb, Location sl) {
    // A generic pointer: the buffer is host memory mapped into the
    // device's address space.
    Value record = LLVM::IntToPtrOp::create(
        sb, sl, LLVM::LLVMPointerType::get(sb.getContext()), address);
    auto store = [&](int32_t word, Value value) {
      Value at = LLVM::GEPOp::create(sb, sl, record.getType(), i32, record,
                                     ArrayRef<LLVM::GEPArg>{word});
      LLVM::StoreOp::create(sb, sl, value, at, /*alignment=*/4,
                            /*isVolatile=*/true);
    };
    // Elapsed µs, saturated to the i32 range.
    Value micros = arith::DivUIOp::create(
        sb, sl, elapsed, arith::ConstantIntOp::create(sb, sl, i64, 1000));
    micros = arith::MinUIOp::create(
        sb, sl, micros, arith::ConstantIntOp::create(sb, sl, i64, INT32_MAX));
    Value words[] = {constI32(sb, sl, site.pipelineId),
                     constI32(sb, sl, site.role),
                     site.stage,
                     site.phase,
                     NVVM::BlockIdXOp::create(sb, sl, i32),
                     NVVM::BlockIdYOp::create(sb, sl, i32),
                     NVVM::BlockIdZOp::create(sb, sl, i32),
                     warpIndex(sb, sl),
                     constI32(sb, sl, kWatchdogVersion),
                     arith::TruncIOp::create(sb, sl, i32, micros)};
    for (auto [i, word] : llvm::enumerate(words))
      store(static_cast<int32_t>(i + 1), word);
    // The magic last, after the rest is visible system-wide: a host that
    // sees it sees a complete record.
    NVVM::MembarOp::create(sb, sl, NVVM::MemScopeKind::SYS);
    store(0, constI32(sb, sl, kWatchdogMagic));
    NVVM::MembarOp::create(sb, sl, NVVM::MemScopeKind::SYS);
  });
}

/// The losers' half: a trap aborts the whole grid, so a thread that lost
/// the claim and trapped at once could cut the winner's record short. Wait
/// until the winner marks the claim done (at most kLoserWaitNs).
void emitAwaitRecord(OpBuilder &b, Location loc, Value claim) {
  Type i32 = b.getI32Type(), i64 = b.getI64Type();
  Value since = NVVM::GlobalTimerOp::create(b, loc, i64);
  auto spin = scf::WhileOp::create(b, loc, TypeRange{}, ValueRange{});
  OpBuilder::InsertionGuard guard(b);
  b.createBlock(&spin.getBefore());
  Value state = LLVM::LoadOp::create(b, loc, i32, claim, /*alignment=*/4,
                                     /*isVolatile=*/true);
  Value pending = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne,
                                        state, constI32(b, loc, kClaimDone));
  Value waited = arith::SubIOp::create(
      b, loc, NVVM::GlobalTimerOp::create(b, loc, i64), since);
  Value patient = arith::CmpIOp::create(
      b, loc, arith::CmpIPredicate::ult, waited,
      arith::ConstantIntOp::create(b, loc, i64, kLoserWaitNs));
  scf::ConditionOp::create(b, loc,
                           arith::AndIOp::create(b, loc, pending, patient),
                           ValueRange{});
  b.createBlock(&spin.getAfter());
  scf::YieldOp::create(b, loc);
}
} // namespace

int32_t mlir::pipeline::getWatchdogPipelineId(Value pipeline) {
  auto create = pipeline.getDefiningOp<CreateOp>();
  if (!create)
    return -1;
  if (auto id = create->getAttrOfType<IntegerAttr>("pipeline.watchdog_id"))
    return static_cast<int32_t>(id.getInt());
  return -1;
}

WatchdogGlobals mlir::pipeline::getOrCreateWatchdogGlobals(OpBuilder &b,
                                                           Location loc) {
  Operation *symbolTable =
      enclosingSymbolTable(b.getInsertionBlock()->getParentOp());
  assert(symbolTable && "wait loop outside of any symbol table");
  // The buffer is external so that cuModuleGetGlobal finds it (PTX
  // `.visible .global .u64`); the claim is only read by the kernel.
  return {getOrCreateIntGlobal(b, loc, symbolTable, kWatchdogBufferSymbol,
                               b.getI64Type(), LLVM::Linkage::External),
          getOrCreateIntGlobal(b, loc, symbolTable, kWatchdogClaimSymbol,
                               b.getI32Type(), LLVM::Linkage::Internal)};
}

LogicalResult mlir::pipeline::checkWatchdogSymbols(ModuleOp module) {
  bool ok = true;
  auto expect = [&](Operation *op, Type type) {
    auto global = dyn_cast<LLVM::GlobalOp>(op);
    if (global && global.getGlobalType() == type &&
        global.getAddrSpace() == kGlobalAddrSpace)
      return;
    op->emitError() << "'" << SymbolTable::getSymbolName(op).getValue()
                    << "' is reserved for the pipeline watchdog: it must be "
                       "an llvm.mlir.global of type "
                    << type << " in address space " << kGlobalAddrSpace;
    ok = false;
  };
  module.walk([&](Operation *op) {
    auto symbol = dyn_cast<SymbolOpInterface>(op);
    if (!symbol)
      return;
    StringAttr name = symbol.getNameAttr();
    if (!name)
      return;
    Builder b(op->getContext());
    if (name.getValue() == kWatchdogBufferSymbol)
      expect(op, b.getI64Type());
    else if (name.getValue() == kWatchdogClaimSymbol)
      expect(op, b.getI32Type());
  });
  return success(ok);
}

void mlir::pipeline::addWatchdogNames(ModuleOp module, ArrayAttr names) {
  // "ab\0epi\0": the names by id, each NUL-terminated; one NUL when there
  // are none (no zero-length global).
  std::string table;
  for (Attribute name : names) {
    table += cast<StringAttr>(name).getValue().str();
    table.push_back('\0');
  }
  if (table.empty())
    table.push_back('\0');

  SmallVector<LLVM::GlobalOp> buffers;
  module.walk([&](LLVM::GlobalOp global) {
    if (global.getSymName() == kWatchdogBufferSymbol)
      buffers.push_back(global);
  });
  for (LLVM::GlobalOp buffer : buffers) {
    Operation *symbolTable = enclosingSymbolTable(buffer->getParentOp());
    if (SymbolTable::lookupSymbolIn(symbolTable, kWatchdogNamesSymbol))
      continue;
    OpBuilder b(buffer);
    b.setInsertionPointAfter(buffer);
    auto type = LLVM::LLVMArrayType::get(b.getI8Type(), table.size());
    LLVM::GlobalOp::create(b, buffer.getLoc(), type, /*isConstant=*/true,
                           LLVM::Linkage::External, kWatchdogNamesSymbol,
                           b.getStringAttr(table), /*alignment=*/1,
                           kGlobalAddrSpace);
  }
}

void mlir::pipeline::emitWatchdogCheck(OpBuilder &b, Location loc, Value start,
                                       const WatchdogGlobals &globals,
                                       const PipelineLoweringOptions &options,
                                       const WaitSite &site) {
  Type i64 = b.getI64Type();
  Value now = NVVM::GlobalTimerOp::create(b, loc, i64);
  Value elapsed = arith::SubIOp::create(b, loc, now, start);
  Value limit =
      arith::ConstantIntOp::create(b, loc, i64, options.watchdogTimeoutNs);
  Value expired = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ugt,
                                        elapsed, limit);
  emitIf(b, loc, expired, [&](OpBuilder &eb, Location el) {
    // Elect the one thread that writes the record.
    Value claim = LLVM::AddressOfOp::create(eb, el, globals.claim);
    Value old = LLVM::AtomicRMWOp::create(eb, el, LLVM::AtomicBinOp::xchg,
                                          claim, constI32(eb, el, kClaimTaken),
                                          LLVM::AtomicOrdering::monotonic);
    Value won = arith::CmpIOp::create(eb, el, arith::CmpIPredicate::eq, old,
                                      constI32(eb, el, 0));
    auto ifWon = scf::IfOp::create(eb, el, TypeRange{}, won,
                                   /*withElseRegion=*/true);
    {
      OpBuilder::InsertionGuard guard(eb);
      eb.setInsertionPoint(ifWon.thenBlock()->getTerminator());
      emitRecord(eb, el, elapsed, globals, site);
      // Release the losers: the record is complete.
      LLVM::AtomicRMWOp::create(eb, el, LLVM::AtomicBinOp::xchg, claim,
                                constI32(eb, el, kClaimDone),
                                LLVM::AtomicOrdering::monotonic);
      eb.setInsertionPoint(ifWon.elseBlock()->getTerminator());
      emitAwaitRecord(eb, el, claim);
    }
    // Every expired thread traps, once the record is written.
    LLVM::Trap::create(eb, el);
  });
}
