//===- LoweringUtils.h - shared helpers of the lowerings --------*- C++ -*-===//
//
// Internal to lib/Conversion/PipelineToNVVM. Every helper emits NVVM/LLVM/
// arith/scf ops at the builder's insertion point. Control flow is built with
// scf.if / scf.while (never by splitting blocks) because pipeline ops usually
// sit in single-block scf.for bodies.
//
// Barrier array layout (CuTe DSL's MbarrierArray): 8-byte mbarriers, full
// barriers at [0, S), empty barriers at [S, 2S); PipelineOrder has S*length
// barriers.
//
//===----------------------------------------------------------------------===//

#ifndef LIB_CONVERSION_PIPELINETONVVM_LOWERINGUTILS_H
#define LIB_CONVERSION_PIPELINETONVVM_LOWERINGUTILS_H

#include "pipeline-mlir/Conversion/PipelineToNVVM/PipelineToNVVM.h"
#include "pipeline-mlir/Dialect/Pipeline/IR/PipelineDialect.h"

#include "mlir/Conversion/LLVMCommon/Pattern.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

#include <array>
#include <optional>

namespace mlir {
class LLVMTypeConverter;
class RewritePatternSet;

namespace pipeline {

/// Suspend-time hint of every blocking try_wait (same as CUTLASS C++ and
/// CuTe DSL: 0x989680 ns).
constexpr int64_t kTryWaitSuspendTimeHint = 10000000;

/// Per-stage code (barrier init, the producer tail's waits) is unrolled up to
/// this many stages and a run-time loop beyond, so that the IR, and the time
/// and memory of every later pass, grow linearly with the stage count.
constexpr int64_t kMaxUnrolledStages = 8;

/// Base of every pattern: an LLVM conversion pattern that also sees the
/// lowering options.
template <typename OpTy>
class PipelineOpLowering : public ConvertOpToLLVMPattern<OpTy> {
public:
  PipelineOpLowering(const LLVMTypeConverter &converter,
                     const PipelineLoweringOptions &options)
      : ConvertOpToLLVMPattern<OpTy>(converter), options(options) {}

protected:
  PipelineLoweringOptions options;
};

//===----------------------------------------------------------------------===//
// Constants and special registers
//===----------------------------------------------------------------------===//

Value constI32(OpBuilder &b, Location loc, int64_t v);
Value constI16(OpBuilder &b, Location loc, int64_t v);
Value constI1(OpBuilder &b, Location loc, bool v);

/// The `known_block_size` of the gpu.func that is or holds `at`, if any.
std::optional<std::array<int64_t, 3>> knownBlockSize(Operation *at);

/// tid.x + ntid.x * (tid.y + ntid.y * tid.z).
Value linearThreadId(OpBuilder &b, Location loc);
/// linearThreadId / 32 (warp index in the CTA); tid.x / 32 where the
/// function's known block size is 1-D.
Value warpIndex(OpBuilder &b, Location loc);
Value laneId(OpBuilder &b, Location loc);
/// ntid.x * ntid.y * ntid.z, a constant where the block size is known.
Value blockSize(OpBuilder &b, Location loc);
/// %cluster_ctarank.
Value clusterCtaRank(OpBuilder &b, Location loc);
/// nvvm.elect.sync over the full warp: true in one lane.
Value electOne(OpBuilder &b, Location loc);
/// True in the leader CTA of a 2-CTA pair (cta rank % V == 0); null when
/// every CTA is a leader (V == 1), so callers can skip the test.
Value isLeaderCta(OpBuilder &b, Location loc, PipelineType type);

/// Emits `scf.if cond { body }` (no results).
void emitIf(OpBuilder &b, Location loc, Value cond,
            function_ref<void(OpBuilder &, Location)> body);

/// The chip a module is compiled for: the chip of its gpu.module's
/// #nvvm.target when there is one, else the pass option.
std::string getChipFor(Operation *op, const PipelineLoweringOptions &options);

//===----------------------------------------------------------------------===//
// Barriers
//===----------------------------------------------------------------------===//

/// Address of barrier `index` (i32) of the array at `base` (!llvm.ptr<3>).
Value barrierAt(OpBuilder &b, Location loc, Value base, Value index);
Value fullBarrier(OpBuilder &b, Location loc, Value base, Value index);
Value emptyBarrier(OpBuilder &b, Location loc, Value base, PipelineType type,
                   Value index);

/// Arrive count a cooperative group implies (thread: n, warp: 32n,
/// threadblock: n*blockDim, cluster: n*clusterSize*blockDim).
Value groupArriveCount(OpBuilder &b, Location loc, CooperativeGroupAttr group,
                       PipelineType type);

/// The nearest op around `op` (or `op` itself) that is a symbol table.
Operation *enclosingSymbolTable(Operation *op);
/// The shared-memory array `name` ([n x elem], no initializer: shared
/// memory has none; the kernel zeroes what it reads) of `symbolTable`,
/// created at the start of its body when missing.
LLVM::GlobalOp getOrCreateSharedArray(OpBuilder &b, Location loc,
                                      Operation *symbolTable, StringRef name,
                                      Type elem, int64_t n);
/// &global[index] (shared memory) for an i32 or constant index.
Value sharedElement(OpBuilder &b, Location loc, LLVM::GlobalOp global,
                    Type elem, Value index);

constexpr llvm::StringLiteral kWatchdogLedgerSymbol =
    "__pipeline_watchdog_ledger";
/// Attributes set by the pass (assignWatchdogIds): on a pipeline.create,
/// its first ledger entry; on a symbol table, the entries of its ledger.
constexpr llvm::StringLiteral kLedgerFirstAttr = "pipeline.watchdog_ledger";
constexpr llvm::StringLiteral kLedgerEntriesAttr =
    "pipeline.watchdog_ledger_entries";

/// Barrier entries the forensic dump has room for (per gpu.module); the
/// ledger keeps counters for the same entries.
constexpr int64_t kWatchdogMaxBarrierEntries = (1024 - 64) / 9;

/// The watchdog's software ledger (docs/watchdog.md, "The ledger"): per
/// barrier entry, four i32 words in shared memory, cumulative since the
/// pipeline's create, kept by the lowered code itself.
enum LedgerField : int32_t {
  kLedgerCount = 0,     // the barrier's init count (stored at create)
  kLedgerArrivals = 1,  // arrive operations our verbs issued on it
  kLedgerAnnounced = 2, // bytes announced by arrive.expect_tx
  kLedgerIssued = 3,    // bytes of the copies issued that signal it
};
constexpr int32_t kLedgerWords = 4;

/// A barrier's ledger entry: `first` is the entry of barrier 0 of its
/// pipeline (-1: no ledger: watchdog off, or the pipeline is not known at
/// the use), `index` the barrier's i32 index in the pipeline's array.
struct LedgerSlot {
  int64_t first = -1;
  Value index;
  explicit operator bool() const { return first >= 0 && index; }
};

/// The ledger slot of barrier `barrierIndex` of `pipeline` (the value before
/// conversion); empty when the watchdog is off.
LedgerSlot getLedgerSlot(const PipelineLoweringOptions &options,
                         Value pipeline, Value barrierIndex);

/// Adds `amount` (an i32 value or integer attribute: no op is built when
/// the slot is empty) to `field` of `slot`'s entry: in this CTA
/// (atom.shared.add) or, with `dstRank`, in that CTA of the cluster (mapa +
/// generic atom.add). Nothing when `slot` is empty.
void emitLedgerAdd(OpBuilder &b, Location loc, const LedgerSlot &slot,
                   int32_t field, OpFoldResult amount,
                   Value dstRank = Value());

/// emitLedgerAdd in every CTA whose bit is set in the i16 `mask` (a
/// multicast: the copy's bytes or the commit's arrival land in each), or
/// with `toPairLeader` in the pair leader of each (rank with bit 0 clear).
void emitLedgerAddMasked(OpBuilder &b, Location loc, const LedgerSlot &slot,
                         int32_t field, OpFoldResult amount, Value mask,
                         bool toPairLeader = false);

/// Watchdog record roles (word 2, docs/watchdog.md).
enum WatchdogRole : int32_t {
  kWatchdogProducer = 0, // producer_acquire, producer_tail
  kWatchdogConsumer = 1, // consumer_wait
  kWatchdogOrder = 2,    // order_wait
};

/// What the watchdog reports about a wait (see Watchdog.cpp).
struct WaitSite {
  int32_t pipelineId = -1;
  int32_t role = kWatchdogProducer;
  Value stage; // i32
  Value phase; // i32
};

/// Blocking wait: loop on mbarrier.try_wait.parity until `phase` completed.
void emitWaitLoop(OpBuilder &b, Location loc, Value barrier, Value phase,
                  const PipelineLoweringOptions &options, const WaitSite &site);
/// Same, skipped when `token` (may be null) is true.
void emitWaitUnlessToken(OpBuilder &b, Location loc, Value barrier,
                         Value phase, Value token,
                         const PipelineLoweringOptions &options,
                         const WaitSite &site);
/// One mbarrier.try_wait.parity, returns i1.
Value emitTryWait(OpBuilder &b, Location loc, Value barrier, Value phase);

/// mbarrier.arrive from an AsyncThread side. `dstRank` (may be null) makes
/// it a remote arrive on that CTA's barrier (mapa + shared::cluster, cluster
/// scope). `electOneLane` arrives once per warp (after bar.warp.sync when
/// `syncwarpBefore`), from the lane `electedLane` picks for `verb` (may be
/// null: a fresh elect.sync).
/// `ledger`: the barrier's ledger slot (watchdog on), counted once per
/// arrive, in the CTA it lands in.
void emitAsyncArrive(OpBuilder &b, Location loc, Value barrier, Value dstRank,
                     bool electOneLane, bool syncwarpBefore,
                     Operation *verb = nullptr,
                     const PipelineLoweringOptions *options = nullptr,
                     const LedgerSlot &ledger = LedgerSlot());

/// Elected tcgen05.commit on `barrier` with the pipeline's CTA group and the
/// 16-bit multicast `mask` (may be null: the unmasked form, keeping the
/// CTA group), from the lane `electedLane` picks for `verb`.
void emitUmmaCommit(OpBuilder &b, Location loc, Value barrier, Value mask,
                    PipelineType type, Operation *verb,
                    const PipelineLoweringOptions &options,
                    const LedgerSlot &ledger = LedgerSlot());

/// The pipeline id that the watchdog reports for `pipeline` (the value
/// before conversion), or -1.
int32_t getWatchdogPipelineId(Value pipeline);

/// Symbols of the watchdog contract (docs/watchdog.md).
constexpr llvm::StringLiteral kWatchdogBufferSymbol =
    "__pipeline_watchdog_buffer";
constexpr llvm::StringLiteral kWatchdogClaimSymbol =
    "__pipeline_watchdog_claim";
constexpr llvm::StringLiteral kWatchdogNamesSymbol =
    "__pipeline_watchdog_names";

constexpr llvm::StringLiteral kWatchdogWarpsSymbol =
    "__pipeline_watchdog_warps";
constexpr llvm::StringLiteral kWatchdogPipesSymbol =
    "__pipeline_watchdog_pipes";
constexpr llvm::StringLiteral kWatchdogProbeSymbol =
    "__pipeline_watchdog_probe";
constexpr llvm::StringLiteral kWatchdogDumpSymbol = "__pipeline_watchdog_dump";


/// The device globals a bounded wait uses: the i64 record pointer that the
/// runner sets, the i32 claim word, and the per-warp wait table in shared
/// memory (docs/watchdog.md, "The forensic dump").
struct WatchdogGlobals {
  LLVM::GlobalOp buffer, claim, warps;
};

/// What the forensic dump needs to know about pipeline id i (collected
/// before the conversion, from its pipeline.create).
struct WatchdogPipeInfo {
  int64_t numBarriers = 0;
  int64_t stages = 0;
  bool order = false;
  /// Its full barriers count tx bytes (the kind table): the dump must not
  /// arrive on them (see defineDump).
  bool fullTx = false;
  /// The symbol table (gpu.module) of its pipeline.create: a dump reads
  /// only the pipelines of its own module.
  Operation *scope = nullptr;
  /// Its first entry in the dump and the ledger of its scope; -1: none
  /// (no barriers, or past kWatchdogMaxBarrierEntries).
  int64_t firstEntry = -1;
};

/// Watchdog on, from the thread that zeroed the ledger: stores each barrier's
/// init count (`emptyCount` null: an order pipeline, one count) into the
/// ledger entries of the pipeline `op` creates; nothing without a ledger.
void emitLedgerInitCounts(OpBuilder &b, Location loc, CreateOp op,
                          Value fullCount, Value emptyCount);
/// Watchdog on: records the barrier array `base` of the pipeline created by
/// `op` in the shared table `__pipeline_watchdog_pipes` (linear thread 0,
/// the thread that zeroed the table at kernel entry), so that the dump finds
/// every pipeline of the CTA.
/// With `fullCount` / `emptyCount` (empty: null; order pipelines), the
/// same thread stores each barrier's init count into its ledger entry.
void emitWatchdogPipeEntry(OpBuilder &b, Location loc, CreateOp op, Value base,
                           Value fullCount, Value emptyCount);

/// Watchdog on: the warp's entry in the wait table, marked waiting on
/// `site` (before a bounded wait) or done with it (after).
void emitWatchdogWaitMark(OpBuilder &b, Location loc,
                          const WatchdogGlobals &globals, const WaitSite &site,
                          bool waiting);

/// After the conversion (watchdog on): defines `__pipeline_watchdog_dump`
/// in every symbol table that calls it, and instruments its kernels (wait
/// table and pipes table zeroed at entry, warp marked exited at return).
void finalizeWatchdog(ModuleOp module, ArrayRef<WatchdogPipeInfo> pipes);

/// The watchdog globals of the symbol table around the builder's insertion
/// point, created on first use. Call it where the insertion block is
/// attached (not inside an op being built).
WatchdogGlobals getOrCreateWatchdogGlobals(OpBuilder &b, Location loc);

/// Fails (with an error on the op) when a symbol of the module already uses
/// a watchdog global's name with another meaning.
LogicalResult checkWatchdogSymbols(ModuleOp module);

/// Adds `__pipeline_watchdog_names` (the NUL-separated `names`) next to
/// every `__pipeline_watchdog_buffer` of `module` that has none.
void addWatchdogNames(ModuleOp module, ArrayAttr names);

/// Watchdog hook used by emitWaitLoop: when `now - start > timeout`, write
/// the record for `site` (first expired thread) and trap.
void emitWatchdogCheck(OpBuilder &b, Location loc, Value start,
                       const WatchdogGlobals &globals,
                       const PipelineLoweringOptions &options,
                       const WaitSite &site);

//===----------------------------------------------------------------------===//
// Pipeline state
//===----------------------------------------------------------------------===//

struct StateFields {
  Value index, phase, count;
};

/// Index and phase (and count) of a converted state value.
StateFields unpackState(OpBuilder &b, Location loc, Value state,
                        StateType type);
/// Builds the (index, phase, count) struct of a non-simple state.
Value packState(OpBuilder &b, Location loc, Value index, Value phase,
                Value count);
/// state.advance: by one, or by `amount` (may be null).
Value advanceState(OpBuilder &b, Location loc, Value state, StateType type,
                   Value amount);

//===----------------------------------------------------------------------===//
// Clusters (ClusterMasks.cpp)
//===----------------------------------------------------------------------===//

/// A CTA's coordinate in the (V, M, N, L) cluster layout.
struct CtaCoord {
  Value v, m, n, l;
};
CtaCoord ctaCoord(OpBuilder &b, Location loc, ClusterLayoutAttr layout,
                  Value rank);

/// i1: does CTA `other` share a multicast tile with CTA `self` (same coord
/// except along the multicast modes)? `ignoreV` also accepts the CTA-pair
/// peer.
Value sharesMulticastTile(OpBuilder &b, Location loc, PipelineType type,
                          const CtaCoord &self, const CtaCoord &other,
                          bool ignoreV);

/// i16 mask of the CTAs an MMA-side arrive must reach: the CTAs sharing a
/// multicast tile with this one, plus the CTA-pair peer when V = 2. Null
/// when that is only this CTA (no cluster, no multicast, V = 1).
Value ummaArrivalMask(OpBuilder &b, Location loc, PipelineType type);

/// Rank of the leader CTA of this CTA's pair (rank rounded down to a
/// multiple of V).
Value leaderCtaRank(OpBuilder &b, Location loc, PipelineType type);

//===----------------------------------------------------------------------===//
// Pattern registration, one function per family
//===----------------------------------------------------------------------===//

void populateStateLoweringPatterns(LLVMTypeConverter &converter,
                                   RewritePatternSet &patterns,
                                   const PipelineLoweringOptions &options);
void populateBarrierLoweringPatterns(LLVMTypeConverter &converter,
                                     RewritePatternSet &patterns,
                                     const PipelineLoweringOptions &options);
void populateProducerConsumerLoweringPatterns(
    LLVMTypeConverter &converter, RewritePatternSet &patterns,
    const PipelineLoweringOptions &options);
void populateCopyLoweringPatterns(LLVMTypeConverter &converter,
                                  RewritePatternSet &patterns,
                                  const PipelineLoweringOptions &options);
void populateOrderNamedBarrierLoweringPatterns(
    LLVMTypeConverter &converter, RewritePatternSet &patterns,
    const PipelineLoweringOptions &options);

} // namespace pipeline
} // namespace mlir

#endif // LIB_CONVERSION_PIPELINETONVVM_LOWERINGUTILS_H
