//===- WatchdogLedger.cpp - the watchdog's per-barrier counters -----------===//
//
// In watchdog mode the lowered verbs keep, per barrier, the counters the
// forensic dump reports (docs/watchdog.md, "The ledger"): arrivals, bytes
// announced by arrive.expect_tx and bytes of the copies issued, one atomic
// add each in shared memory. Watchdog.cpp writes them into the dump.
//
//===----------------------------------------------------------------------===//

#include "LoweringUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"

using namespace mlir;
using namespace mlir::pipeline;


namespace {
/// The ledger array of the symbol table around `b`'s insertion point
/// ([entries * kLedgerWords x i32] in shared memory), or null when the pass
/// gave that symbol table no ledger.
LLVM::GlobalOp getOrCreateLedger(OpBuilder &b, Location loc) {
  Operation *symbolTable =
      enclosingSymbolTable(b.getInsertionBlock()->getParentOp());
  if (!symbolTable)
    return {};
  auto entries = symbolTable->getAttrOfType<IntegerAttr>(kLedgerEntriesAttr);
  if (!entries || entries.getInt() <= 0)
    return {};
  return getOrCreateSharedArray(b, loc, symbolTable, kWatchdogLedgerSymbol,
                                b.getI32Type(),
                                entries.getInt() * kLedgerWords);
}

/// &ledger[(first + index) * kLedgerWords + field] (shared memory).
Value ledgerWord(OpBuilder &b, Location loc, LLVM::GlobalOp ledger,
                 const LedgerSlot &slot, int32_t field) {
  Value entry = arith::AddIOp::create(b, loc, slot.index,
                                      constI32(b, loc, slot.first));
  Value word = arith::AddIOp::create(
      b, loc, arith::MulIOp::create(b, loc, entry, constI32(b, loc, kLedgerWords)),
      constI32(b, loc, field));
  return sharedElement(b, loc, ledger, b.getI32Type(), word);
}
} // namespace

LedgerSlot mlir::pipeline::getLedgerSlot(const PipelineLoweringOptions &options,
                                         Value pipeline, Value barrierIndex) {
  if (!options.watchdog)
    return {};
  auto create = pipeline.getDefiningOp<CreateOp>();
  if (!create)
    return {};
  auto first = create->getAttrOfType<IntegerAttr>(kLedgerFirstAttr);
  if (!first)
    return {};
  return {first.getInt(), barrierIndex};
}

void mlir::pipeline::emitLedgerAdd(OpBuilder &b, Location loc,
                                   const LedgerSlot &slot, int32_t field,
                                   OpFoldResult amount, Value dstRank) {
  if (!slot)
    return;
  Value value = isa<Value>(amount)
                    ? cast<Value>(amount)
                    : constI32(b, loc,
                               cast<IntegerAttr>(cast<Attribute>(amount))
                                   .getInt());
  LLVM::GlobalOp ledger = getOrCreateLedger(b, loc);
  if (!ledger)
    return;
  Value word = ledgerWord(b, loc, ledger, slot, field);
  if (dstRank) {
    // Another CTA's entry: its generic distributed-shared-memory address
    // (a generic atom.add; atomics on shared::cluster addresses need no
    // more, but the generic form is the one NVPTX lowers everywhere).
    Value generic = LLVM::AddrSpaceCastOp::create(
        b, loc, LLVM::LLVMPointerType::get(b.getContext()), word);
    word = NVVM::MapaOp::create(b, loc, generic.getType(), generic, dstRank);
  }
  LLVM::AtomicRMWOp::create(b, loc, LLVM::AtomicBinOp::add, word, value,
                            LLVM::AtomicOrdering::monotonic);
}

void mlir::pipeline::emitLedgerAddMasked(OpBuilder &b, Location loc,
                                         const LedgerSlot &slot, int32_t field,
                                         OpFoldResult amount, Value mask,
                                         bool toPairLeader) {
  if (!slot)
    return;
  auto rankOf = [&](int64_t r) { return toPairLeader ? r & ~int64_t(1) : r; };
  // A constant mask (the usual multicast): only its CTAs, no tests.
  if (std::optional<int64_t> known = getConstantIntValue(mask)) {
    for (int64_t r = 0; r < 16; ++r)
      if (*known & (int64_t(1) << r))
        emitLedgerAdd(b, loc, slot, field, amount, constI32(b, loc, rankOf(r)));
    return;
  }
  Value bits = mask;
  if (mask.getType().getIntOrFloatBitWidth() < 32)
    bits = arith::ExtUIOp::create(b, loc, b.getI32Type(), mask);
  for (int64_t r = 0; r < 16; ++r) {
    Value set = arith::CmpIOp::create(
        b, loc, arith::CmpIPredicate::ne,
        arith::AndIOp::create(b, loc, bits, constI32(b, loc, int64_t(1) << r)),
        constI32(b, loc, 0));
    emitIf(b, loc, set, [&](OpBuilder &nb, Location nl) {
      emitLedgerAdd(nb, nl, slot, field, amount, constI32(nb, nl, rankOf(r)));
    });
  }
}

void mlir::pipeline::emitLedgerInitCounts(OpBuilder &b, Location loc,
                                          CreateOp op, Value fullCount,
                                          Value emptyCount) {
  PipelineType type = op.getType();
  auto first = op->getAttrOfType<IntegerAttr>(kLedgerFirstAttr);
  LLVM::GlobalOp ledger = first ? getOrCreateLedger(b, loc) : nullptr;
  if (!ledger)
    return;
  auto storeCount = [&](OpBuilder &sb, Location sl, Value index,
                        Value count) {
    LLVM::StoreOp::create(
        sb, sl, count,
        ledgerWord(sb, sl, ledger, {first.getInt(), index}, kLedgerCount),
        /*alignment=*/4, /*isVolatile=*/true);
  };
  int64_t n = type.getNumBarriers(), stages = type.getStages();
  bool order = !emptyCount;
  auto loop = scf::ForOp::create(b, loc, constI32(b, loc, 0),
                                 constI32(b, loc, order ? n : stages),
                                 constI32(b, loc, 1));
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(loop.getBody()->getTerminator());
  Value i = loop.getInductionVar();
  storeCount(b, loc, i, fullCount);
  if (!order)
    storeCount(b, loc,
               arith::AddIOp::create(b, loc, i, constI32(b, loc, stages)),
               emptyCount);
}
