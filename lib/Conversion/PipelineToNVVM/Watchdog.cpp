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
//     for that (at most 20 ms: a trap aborts the grid, and would cut the
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
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

using namespace mlir;
using namespace mlir::pipeline;

namespace {
constexpr int64_t kWatchdogMagic = 0x57444F47; // "WDOG"
/// Version 2: words 11.. hold the forensic dump (docs/watchdog.md).
/// Version 3: the dump records mbarrier.arrive state tokens and
/// mbarrier.pending_count instead of loads of the mbarrier word (which read
/// 0 on sm_90).
/// Version 4: each barrier entry also carries its software ledger (init
/// count, arrivals, announced and issued tx bytes): 9 words per barrier.
constexpr int64_t kWatchdogVersion = 4;
/// Claim word: 0 free, 1 taken (record being written), 2 record written.
constexpr int64_t kClaimTaken = 1;
constexpr int64_t kClaimDone = 2;
/// How long a thread that lost the claim waits for the record before it
/// traps anyway. The winner needs a few microseconds for the record and
/// about a hundred more stores across PCIe for the forensic dump; 20 ms
/// leaves a wide margin and only delays a trap that is already due.
constexpr int64_t kLoserWaitNs = 20000000;
constexpr unsigned kGlobalAddrSpace =
    static_cast<unsigned>(NVVM::NVVMMemorySpace::Global);
constexpr unsigned kSharedAddrSpace =
    static_cast<unsigned>(NVVM::NVVMMemorySpace::Shared);

// The forensic dump's layout in the host record (i32 words; the host
// decoder in runtime/forensics.py is the executable version).
constexpr int32_t kWordWarpCount = 11;    // warps in the CTA
constexpr int32_t kWordBarrierCount = 12; // barrier entries written
// Pending-count word of a barrier whose state the dump did not read.
constexpr int32_t kNotRead = -1;
constexpr int32_t kWordSampleCount = 13;  // calibration samples written
constexpr int32_t kWordWarps = 16;        // 32 words: the wait table
constexpr int32_t kWordSamples = 48;      // 5 x (lo, hi, pending)
constexpr int32_t kSampleWords = 3;
constexpr int32_t kWordBarriers = 64;     // kBarrierWords per barrier
constexpr int32_t kBarrierWords = 5 + kLedgerWords;
constexpr int32_t kRecordWords = 1024;    // the runner maps 4096 bytes
constexpr int32_t kMaxWarps = 32;         // 1024 threads
constexpr int32_t kMaxBarrierEntries =
    (kRecordWords - kWordBarriers) / kBarrierWords;
static_assert(kMaxBarrierEntries == kWatchdogMaxBarrierEntries,
              "the ledger and the dump cover the same entries");
/// Bit of a barrier entry's second word: the entry has a ledger.
constexpr int32_t kEntryHasLedger = 1 << 2;

constexpr int64_t kCalibMax = (1 << 20) - 1; // mbarrier count/tx limit
constexpr int64_t kCalibComplete = 0x12345;
constexpr int64_t kCalibSmallCount = 5;  // second scratch barrier
constexpr int64_t kCalibSmallTx = 100;

// Wait-table word of a warp: bit 31 waiting now, bit 30 the rest is valid
// (the warp has waited), bit 29 a thread of the warp returned; bits 28..27
// role, 26..19 pipeline id + 1 (0: unknown), 18..1 stage, 0 phase.
constexpr int64_t kMarkWaiting = int64_t(1) << 31;
constexpr int64_t kMarkValid = int64_t(1) << 30;
constexpr int64_t kMarkExited = int64_t(1) << 29;

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

/// Declares `void __pipeline_watchdog_dump(ptr)` in `symbolTable`; its body
/// is defined after the conversion (finalizeWatchdog), when every pipeline
/// of the module is known.
LLVM::LLVMFuncOp getOrDeclareDump(OpBuilder &b, Location loc,
                                  Operation *symbolTable) {
  if (auto existing = dyn_cast_or_null<LLVM::LLVMFuncOp>(
          SymbolTable::lookupSymbolIn(symbolTable, kWatchdogDumpSymbol)))
    return existing;
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToEnd(&symbolTable->getRegion(0).front());
  auto type = LLVM::LLVMFunctionType::get(
      LLVM::LLVMVoidType::get(b.getContext()),
      {LLVM::LLVMPointerType::get(b.getContext())});
  auto func = LLVM::LLVMFuncOp::create(b, loc, kWatchdogDumpSymbol, type,
                                       LLVM::Linkage::Internal);
  return func;
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
    // Words 11..: every barrier of every pipeline of this CTA and the wait
    // table, before the magic makes the record visible as complete.
    Operation *symbolTable =
        enclosingSymbolTable(sb.getInsertionBlock()->getParentOp());
    LLVM::CallOp::create(sb, sl, getOrDeclareDump(sb, sl, symbolTable),
                         ValueRange{record});
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
                               b.getI32Type(), LLVM::Linkage::Internal),
          getOrCreateSharedArray(b, loc, symbolTable, kWatchdogWarpsSymbol,
                                 b.getI32Type(), kMaxWarps)};
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
    else if (llvm::is_contained(
                 {kWatchdogWarpsSymbol, kWatchdogPipesSymbol,
                  kWatchdogProbeSymbol, kWatchdogDumpSymbol,
                  kWatchdogLedgerSymbol},
                 name.getValue())) {
      // Defined by the pass itself: a user symbol of that name would be
      // silently reused with another meaning.
      op->emitError() << "'" << name.getValue()
                      << "' is reserved for the pipeline watchdog's forensic "
                         "dump; rename this symbol";
      ok = false;
    }
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

//===----------------------------------------------------------------------===//
// The forensic dump (docs/watchdog.md, "The forensic dump")
//===----------------------------------------------------------------------===//

void mlir::pipeline::emitWatchdogWaitMark(OpBuilder &b, Location loc,
                                          const WatchdogGlobals &globals,
                                          const WaitSite &site, bool waiting) {
  Type i32 = b.getI32Type();
  // 8 bits of id + 1; an id that does not fit reads as unknown (0) rather
  // than as another pipeline.
  int64_t pid = site.pipelineId < 0 || site.pipelineId >= 255
                    ? 0
                    : site.pipelineId + 1;
  int64_t fixed = kMarkValid | (waiting ? kMarkWaiting : 0) |
                  (int64_t(site.role & 3) << 27) | (pid << 19);
  // stage (18 bits) << 1 | phase & 1
  Value stage = arith::AndIOp::create(b, loc, site.stage,
                                      constI32(b, loc, 0x3FFFF));
  Value phase = arith::AndIOp::create(b, loc, site.phase, constI32(b, loc, 1));
  Value word = arith::OrIOp::create(
      b, loc,
      arith::ShLIOp::create(b, loc, stage, constI32(b, loc, 1)), phase);
  word = arith::OrIOp::create(
      b, loc, word,
      arith::ConstantIntOp::create(b, loc, i32, static_cast<int32_t>(fixed)));
  // Every lane of the warp writes the same word; only this warp writes it.
  Value slot = sharedElement(b, loc, globals.warps, i32, warpIndex(b, loc));
  LLVM::StoreOp::create(b, loc, word, slot, /*alignment=*/4,
                        /*isVolatile=*/true);
}

void mlir::pipeline::emitWatchdogPipeEntry(OpBuilder &b, Location loc,
                                           CreateOp op, Value base,
                                           Value fullCount, Value emptyCount) {
  int32_t id = getWatchdogPipelineId(op.getResult());
  auto names = op->getParentOfType<ModuleOp>()->getAttrOfType<ArrayAttr>(
      "pipeline.watchdog_names");
  if (id < 0 || !names)
    return;
  Operation *symbolTable = enclosingSymbolTable(op->getParentOp());
  LLVM::GlobalOp pipes =
      getOrCreateSharedArray(b, loc, symbolTable, kWatchdogPipesSymbol,
                             b.getI32Type(), names.size());
  // Thread 0 zeroed the table at kernel entry (finalizeWatchdog): the same
  // thread writes the entry, so program order suffices; the create's CTA
  // sync publishes it before any wait can time out. The shared address + 1,
  // so that 0 means "not created in this CTA" (barriers are 8-byte aligned).
  Value first = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                      linearThreadId(b, loc),
                                      constI32(b, loc, 0));
  emitIf(b, loc, first, [&](OpBuilder &tb, Location tl) {
    Value address = LLVM::PtrToIntOp::create(tb, tl, tb.getI32Type(), base);
    Value tagged =
        arith::AddIOp::create(tb, tl, address, constI32(tb, tl, 1));
    LLVM::StoreOp::create(
        tb, tl, tagged,
        sharedElement(tb, tl, pipes, tb.getI32Type(), constI32(tb, tl, id)),
        /*alignment=*/4, /*isVolatile=*/true);
    // The ledger's init counts, from the thread that zeroed the ledger.
    emitLedgerInitCounts(tb, tl, op, fullCount, emptyCount);
  });
}

namespace {
/// Stores `value` (i32) at word `word` of the host record `record`.
void storeWord(OpBuilder &b, Location loc, Value record, int32_t word,
               Value value) {
  Value at = LLVM::GEPOp::create(b, loc, record.getType(), b.getI32Type(),
                                 record, ArrayRef<LLVM::GEPArg>{word});
  LLVM::StoreOp::create(b, loc, value, at, /*alignment=*/4,
                        /*isVolatile=*/true);
}

/// Reads the state of the mbarrier at `bar` into words `word` .. `word + 2`
/// (token low, token high, pending arrivals) without completing its phase.
///
/// Loads of the mbarrier word read 0 on sm_90 (measured on the H100: plain,
/// volatile, generic, atomic and acquire loads alike), so the state is taken
/// from the token that mbarrier.arrive returns: the barrier's state before
/// that arrive. mbarrier.pending_count of the token is the pending arrival
/// count (PTX ISA, exact); the rest of the token is implementation-specific
/// and the host fits it to the calibration samples. The expect_tx of 1 byte
/// comes first: with a tx byte pending our arrive cannot complete the phase
/// (a phase completes when both counts reach 0), so no waiting warp is
/// released. The barrier is left perturbed (one arrival more, one tx byte
/// more); harmless, since every expired thread traps right after the dump.
void storeState(OpBuilder &b, Location loc, Value record, int32_t word,
                Value bar) {
  Type i32 = b.getI32Type(), i64 = b.getI64Type();
  NVVM::MBarrierExpectTxOp::create(b, loc, bar, constI32(b, loc, 1));
  Value token =
      NVVM::MBarrierArriveOp::create(b, loc, i64, bar, /*count=*/Value())
          .getRes();
  storeWord(b, loc, record, word, arith::TruncIOp::create(b, loc, i32, token));
  Value high = arith::ShRUIOp::create(
      b, loc, token, arith::ConstantIntOp::create(b, loc, i64, 32));
  storeWord(b, loc, record, word + 1,
            arith::TruncIOp::create(b, loc, i32, high));
  // MLIR 22 has no NVVM op for mbarrier.pending_count: the LLVM NVPTX
  // intrinsic (no inline PTX needed).
  Value pending =
      LLVM::CallIntrinsicOp::create(
          b, loc, i32,
          b.getStringAttr("llvm.nvvm.mbarrier.pending.count"),
          ValueRange{token})
          .getResult(0);
  storeWord(b, loc, record, word + 2, pending);
}

/// Body of `__pipeline_watchdog_dump(record)`: the wait table, calibration
/// samples of a scratch mbarrier in known states (so that the host can
/// fit its decoding of the undocumented state token on the GPU it runs on),
/// and for every barrier of every pipeline of the CTA two test_wait.parity
/// probes, then its state token and pending arrival count (storeState).
void defineDump(LLVM::LLVMFuncOp dump, Operation *symbolTable,
                ArrayRef<WatchdogPipeInfo> pipes) {
  OpBuilder b(dump.getContext());
  Location loc = dump.getLoc();
  Block *entry = dump.addEntryBlock(b);
  b.setInsertionPointToStart(entry);
  Type i32 = b.getI32Type(), i64 = b.getI64Type();
  Value record = entry->getArgument(0);
  auto sharedPtr = LLVM::LLVMPointerType::get(b.getContext(), kSharedAddrSpace);

  // Warps in the CTA, and the wait table.
  Value warps = arith::DivUIOp::create(
      b, loc,
      arith::AddIOp::create(b, loc, blockSize(b, loc), constI32(b, loc, 31)),
      constI32(b, loc, 32));
  storeWord(b, loc, record, kWordWarpCount, warps);
  LLVM::GlobalOp table = getOrCreateSharedArray(
      b, loc, symbolTable, kWatchdogWarpsSymbol, b.getI32Type(), kMaxWarps);
  for (int32_t w = 0; w < kMaxWarps; ++w) {
    Value slot = sharedElement(b, loc, table, i32, constI32(b, loc, w));
    storeWord(b, loc, record, kWordWarps + w,
              LLVM::LoadOp::create(b, loc, i32, slot, /*alignment=*/4,
                                   /*isVolatile=*/true));
  }

  // Calibration: each sample is storeState's own expect_tx(1) + arrive on
  // a scratch mbarrier in a state known by construction, so that the host
  // can fit the tx-count field of the (undocumented) token on the GPU it
  // runs on, and check pending_count. Tuples (phase, pending arrivals,
  // pending tx bytes) of the state the token captures; M = 2^20 - 1, the
  // largest legal count, pins the width of each field:
  //   A (0, M, 1)              p0 after init M
  //   B (0, M-1, M)            then expect_tx M-2
  //   C (0, M-2, M-0x12344)    then complete_tx 0x12345
  //   D (0, 5, 101)            p1 after init 5, expect_tx 100
  //   E (1, 5, 1)              then complete_tx 101 and 4 arrives: phase 0
  //                            completes.
  LLVM::GlobalOp probe = getOrCreateSharedArray(
      b, loc, symbolTable, kWatchdogProbeSymbol, b.getI64Type(), 2);
  Value p0 = sharedElement(b, loc, probe, i64, constI32(b, loc, 0));
  Value p1 = sharedElement(b, loc, probe, i64, constI32(b, loc, 1));
  auto sample = [&](int32_t i, Value bar) {
    storeState(b, loc, record, kWordSamples + kSampleWords * i, bar);
  };
  NVVM::MBarrierInitOp::create(b, loc, p0, constI32(b, loc, kCalibMax),
                               Value());
  sample(0, p0);
  NVVM::MBarrierExpectTxOp::create(b, loc, p0,
                                   constI32(b, loc, kCalibMax - 2));
  sample(1, p0);
  NVVM::MBarrierCompleteTxOp::create(b, loc, p0,
                                     constI32(b, loc, kCalibComplete));
  sample(2, p0);
  NVVM::MBarrierInitOp::create(b, loc, p1, constI32(b, loc, kCalibSmallCount),
                               Value());
  NVVM::MBarrierExpectTxOp::create(b, loc, p1,
                                   constI32(b, loc, kCalibSmallTx));
  sample(3, p1);
  NVVM::MBarrierCompleteTxOp::create(b, loc, p1,
                                     constI32(b, loc, kCalibSmallTx + 1));
  for (int64_t i = 0; i < kCalibSmallCount - 1; ++i)
    NVVM::MBarrierArriveOp::create(b, loc, i64, p1, /*count=*/Value());
  sample(4, p1);
  storeWord(b, loc, record, kWordSampleCount, constI32(b, loc, 5));

  // Every barrier of every pipeline: a header word (id << 16 | order << 15
  // | created << 14 | stages), index << 8 | probes, then storeState's token
  // low, token high, pending arrivals.
  LLVM::GlobalOp table2 =
      getOrCreateSharedArray(b, loc, symbolTable, kWatchdogPipesSymbol, i32,
                             static_cast<int64_t>(pipes.size()));
  // The ledger exists where some verb of this symbol table counted into it.
  auto ledger = dyn_cast_or_null<LLVM::GlobalOp>(
      SymbolTable::lookupSymbolIn(symbolTable, kWatchdogLedgerSymbol));
  int32_t entryIndex = 0;
  for (auto [id, info] : llvm::enumerate(pipes)) {
    if (info.numBarriers == 0 || info.scope != symbolTable ||
        entryIndex >= kMaxBarrierEntries)
      continue;
    Value tagged = LLVM::LoadOp::create(
        b, loc, i32,
        sharedElement(b, loc, table2, i32,
                      constI32(b, loc, static_cast<int64_t>(id))),
        /*alignment=*/4, /*isVolatile=*/true);
    Value created = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne,
                                          tagged, constI32(b, loc, 0));
    int64_t header = (int64_t(id) << 16) | (info.order ? 1 << 15 : 0) |
                     (info.stages & 0x3FFF);
    Value headerWord = arith::OrIOp::create(
        b, loc, constI32(b, loc, header),
        arith::ShLIOp::create(b, loc,
                              arith::ExtUIOp::create(b, loc, i32, created),
                              constI32(b, loc, 14)));
    int32_t first = entryIndex;
    int64_t count = std::min<int64_t>(info.numBarriers,
                                      kMaxBarrierEntries - entryIndex);
    for (int64_t j = 0; j < count; ++j)
      storeWord(b, loc, record, kWordBarriers + kBarrierWords * (first + j),
                headerWord);
    entryIndex += static_cast<int32_t>(count);
    emitIf(b, loc, created, [&](OpBuilder &cb, Location cl) {
      Value base = arith::SubIOp::create(cb, cl, tagged, constI32(cb, cl, 1));
      for (int64_t j = 0; j < count; ++j) {
        int32_t word = kWordBarriers +
                       kBarrierWords * (first + static_cast<int32_t>(j));
        Value address = arith::AddIOp::create(cb, cl, base,
                                              constI32(cb, cl, 8 * j));
        Value bar = LLVM::IntToPtrOp::create(cb, cl, sharedPtr, address);
        // test_wait.parity(p) is true when the phase of parity p has
        // completed: exactly one of the two holds, and the other one is the
        // current phase's parity. The probes come before storeState, whose
        // arrive changes the barrier.
        auto probeBit = [&](int p) {
          Value done = NVVM::MBarrierTestWaitOp::create(
              cb, cl, cb.getI1Type(), bar, constI32(cb, cl, p));
          return arith::ShLIOp::create(
              cb, cl, arith::ExtUIOp::create(cb, cl, i32, done),
              constI32(cb, cl, p));
        };
        Value probes = arith::OrIOp::create(cb, cl, probeBit(0), probeBit(1));
        bool hasLedger = ledger && info.firstEntry >= 0;
        storeWord(cb, cl, record, word + 1,
                  arith::OrIOp::create(
                      cb, cl,
                      constI32(cb, cl,
                               j << 8 | (hasLedger ? kEntryHasLedger : 0)),
                      probes));
        // The ledger: what our verbs did to this barrier since its create.
        for (int32_t f = 0; f < kLedgerWords; ++f) {
          Value v = constI32(cb, cl, 0);
          if (hasLedger)
            v = LLVM::LoadOp::create(
                cb, cl, i32,
                sharedElement(
                    cb, cl, ledger, i32,
                    constI32(cb, cl,
                             (info.firstEntry + j) * kLedgerWords + f)),
                /*alignment=*/4, /*isVolatile=*/true);
          storeWord(cb, cl, record, word + 5 + f, v);
        }
        // A full barrier that counts tx bytes may have every arrival in and
        // bytes outstanding (the wrong-tx hang): one more arrive then
        // underflows the arrival count and faults the kernel before the
        // record is published (measured on the H100). Its state is not
        // read; the host reports it as such (pending word kNotRead).
        if (info.fullTx && j < info.stages) {
          storeWord(cb, cl, record, word + 2, constI32(cb, cl, 0));
          storeWord(cb, cl, record, word + 3, constI32(cb, cl, 0));
          storeWord(cb, cl, record, word + 4, constI32(cb, cl, kNotRead));
          continue;
        }
        storeState(cb, cl, record, word + 2, bar);
      }
    });
  }
  storeWord(b, loc, record, kWordBarrierCount, constI32(b, loc, entryIndex));
  LLVM::ReturnOp::create(b, loc, ValueRange{});
}

bool isKernel(Operation *op) {
  if (auto func = dyn_cast<gpu::GPUFuncOp>(op))
    return func.isKernel();
  if (auto func = dyn_cast<LLVM::LLVMFuncOp>(op))
    return func->hasAttr(NVVM::NVVMDialect::getKernelFuncAttrName());
  return false;
}

/// Kernel entry: every warp clears its wait-table word, thread 0 the pipes
/// table; each return marks the warp exited.
void instrumentKernel(FunctionOpInterface kernel, Operation *symbolTable,
                      int64_t numPipes) {
  OpBuilder b(kernel.getContext());
  Location loc = kernel.getLoc();
  Type i32 = b.getI32Type();
  LLVM::GlobalOp table = getOrCreateSharedArray(
      b, loc, symbolTable, kWatchdogWarpsSymbol, i32, kMaxWarps);
  LLVM::GlobalOp pipes = getOrCreateSharedArray(
      b, loc, symbolTable, kWatchdogPipesSymbol, i32, numPipes);
  Block &entry = kernel.getFunctionBody().front();
  b.setInsertionPointToStart(&entry);
  LLVM::StoreOp::create(b, loc, constI32(b, loc, 0),
                        sharedElement(b, loc, table, i32, warpIndex(b, loc)),
                        /*alignment=*/4, /*isVolatile=*/true);
  Value first = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                      linearThreadId(b, loc),
                                      constI32(b, loc, 0));
  auto ledger = dyn_cast_or_null<LLVM::GlobalOp>(
      SymbolTable::lookupSymbolIn(symbolTable, kWatchdogLedgerSymbol));
  emitIf(b, loc, first, [&](OpBuilder &tb, Location tl) {
    for (int64_t i = 0; i < std::max<int64_t>(numPipes, 1); ++i)
      LLVM::StoreOp::create(tb, tl, constI32(tb, tl, 0),
                            sharedElement(tb, tl, pipes, i32,
                                          constI32(tb, tl, i)),
                            /*alignment=*/4, /*isVolatile=*/true);
    if (!ledger)
      return;
    // The ledger's counters start at 0 (shared memory has no initializer);
    // the creates' CTA/cluster syncs order this before any verb counts.
    auto words = cast<LLVM::LLVMArrayType>(ledger.getGlobalType())
                     .getNumElements();
    auto loop = scf::ForOp::create(tb, tl, constI32(tb, tl, 0),
                                   constI32(tb, tl, words),
                                   constI32(tb, tl, 1));
    OpBuilder::InsertionGuard guard(tb);
    tb.setInsertionPoint(loop.getBody()->getTerminator());
    LLVM::StoreOp::create(
        tb, tl, constI32(tb, tl, 0),
        sharedElement(tb, tl, ledger, i32, loop.getInductionVar()),
        /*alignment=*/4, /*isVolatile=*/true);
  });
  SmallVector<Operation *> returns;
  kernel.getFunctionBody().walk([&](Operation *op) {
    if (isa<gpu::ReturnOp, LLVM::ReturnOp>(op) &&
        op->getParentOp() == kernel.getOperation())
      returns.push_back(op);
  });
  for (Operation *ret : returns) {
    b.setInsertionPoint(ret);
    LLVM::AtomicRMWOp::create(
        b, ret->getLoc(), LLVM::AtomicBinOp::_or,
        sharedElement(b, ret->getLoc(), table, i32, warpIndex(b, ret->getLoc())),
        constI32(b, ret->getLoc(), static_cast<int32_t>(kMarkExited)),
        LLVM::AtomicOrdering::monotonic);
  }
}
} // namespace

void mlir::pipeline::finalizeWatchdog(ModuleOp module,
                                      ArrayRef<WatchdogPipeInfo> pipes) {
  SmallVector<LLVM::LLVMFuncOp> dumps;
  module.walk([&](LLVM::LLVMFuncOp func) {
    if (func.getSymName() == kWatchdogDumpSymbol && func.isExternal())
      dumps.push_back(func);
  });
  for (LLVM::LLVMFuncOp dump : dumps) {
    Operation *symbolTable = enclosingSymbolTable(dump->getParentOp());
    defineDump(dump, symbolTable, pipes);
    SmallVector<FunctionOpInterface> kernels;
    for (Operation &op : symbolTable->getRegion(0).front())
      if (isKernel(&op))
        kernels.push_back(cast<FunctionOpInterface>(&op));
    for (FunctionOpInterface kernel : kernels)
      instrumentKernel(kernel, symbolTable,
                       static_cast<int64_t>(pipes.size()));
  }
}
