//===- ProtocolChecks.h - pieces of pipeline-verify-protocol ----*- C++ -*-===//
//
// Private to lib/Dialect/Pipeline/Transforms. The protocol checker is split by
// family of checks (balance and state threading, start phases and tails, TX
// bytes and arrive counts); this header holds what they share: how a verb op
// is recognised, how a pipeline is named in messages, what a "role region"
// is and which guards restrict who executes an op.
//
//===----------------------------------------------------------------------===//

#ifndef PIPELINE_MLIR_LIB_DIALECT_PIPELINE_TRANSFORMS_PROTOCOLCHECKS_H
#define PIPELINE_MLIR_LIB_DIALECT_PIPELINE_TRANSFORMS_PROTOCOLCHECKS_H

#include "pipeline-mlir/Dialect/Pipeline/IR/PipelineDialect.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Dominance.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/MapVector.h"

#include <optional>
#include <string>

namespace mlir::pipeline::protocol {

struct Options {
  /// Threads per CTA (0 = unknown).
  int64_t blockDim = 0;
  /// Make a missing producer.tail an error also where nothing can arrive
  /// after the CTA exits (single CTA, synchronous consumers); else a warning.
  bool singleCtaTail = false;
  /// Remark where the stage-balance check cannot compare a pipeline's roles.
  bool stageBalanceRemarks = false;
  /// Registers one CTA may hold (the register budget, check 17): the SM's
  /// register file, or its share when several CTAs run on one SM.
  int64_t registerFile = 65536;
};

/// Threads per CTA: the pass option, else a 1-D known_block_size of the
/// gpu.func (with y or z extents, tid.x / 32 is not the warp index); 0 when
/// unknown.
int64_t getBlockDim(FunctionOpInterface fn, const Options &options);

//===----------------------------------------------------------------------===//
// Verbs
//===----------------------------------------------------------------------===//

/// The stage verbs (StageVerbOpInterface).
using Verb = StageVerb;

struct VerbRef {
  Verb verb;
  Value pipeline;
  Value state;
};

/// Recognises the pipeline ops that take a (pipeline, state) pair.
std::optional<VerbRef> getVerb(Operation *op);

inline bool isProducerVerb(Verb v) {
  return getStageVerbRole(v) == Role::Producer;
}
inline bool isConsumerVerb(Verb v) {
  return getStageVerbRole(v) == Role::Consumer;
}

inline PipelineType getPipelineType(Value pipe) {
  return cast<PipelineType>(pipe.getType());
}

/// TMA kinds whose full barrier completes by copy.tma_load / copy.bulk bytes
/// (their producer.commit is a no-op).
bool isTmaLoadKind(PipelineKind kind);

/// "pipeline 'ab'" when pipeline.create carries a name, else the CuTe class
/// ("PipelineTmaAsync pipeline").
std::string describe(Value pipe);

/// Attaches a note at the pipeline's creation (when it is an op in the IR).
void noteCreate(InFlightDiagnostic &diag, Value pipe);

//===----------------------------------------------------------------------===//
// Who executes an op
//===----------------------------------------------------------------------===//

/// How many threads an `scf.if` condition lets through, from the most to the
/// least: unknown (a role split or data-dependent), one warp, one lane per
/// warp (elect.sync, lane == c), one thread of the CTA (tid == c).
enum class Guard { None = 0, OneWarp = 1, OneLanePerWarp = 2, OneThread = 3 };

/// The guard an `scf.if` condition amounts to (through and-ed conditions).
Guard classifyCondition(Value cond);

/// The combined guard of every enclosing `scf.if` then-branch of `op`, up to
/// its function.
Guard getEnclosingGuard(Operation *op);

/// True when this scf.if only narrows who executes inside a role (elect one,
/// lane 0, thread 0): its branches are not roles of their own.
bool isGuardIf(scf::IfOp ifOp);

/// The role region of `op`: the nearest enclosing block that is a branch of
/// an `scf.if` which is not a guard (a warp-role branch), or the function
/// body.
Block *getRoleBlock(Operation *op);

/// Who executes an op, as far as the enclosing scf.if conditions tell: a
/// number of warps, whether all 32 lanes of each (else one lane per warp),
/// and the threads themselves (bit t = thread t of the 1-D block).
struct Executors {
  int64_t warps;
  bool wholeWarps;
  llvm::BitVector threads;
};

/// The executors of `op`, from every enclosing scf.if branch up to the
/// function, found by evaluating the conditions for every thread of the
/// block (evalForThread: thread, lane, warp and warpgroup ids -- `tid / 32`,
/// `warp / 4`, `tid / 128` -- compared with constants, and-ed, or-ed; an
/// else branch is the complement). `blockDim` (threads per CTA, 0 = unknown)
/// bounds the block; without it, a set that is open-ended (`warp >= 1`) is
/// not decided. nullopt when anything on the way is not decidable (a
/// condition on a kernel argument, loop variable or memory, an op other
/// than scf.if/scf.for around `op`, warps that run with some but not all or
/// one of their lanes).
std::optional<Executors> getExecutors(Operation *op, int64_t blockDim);
/// The same with ``given`` (a value the same for every warp: a kernel
/// argument, a count read from memory) taken as ``at`` in every condition.
std::optional<Executors> getExecutorsWith(Operation *op, int64_t blockDim,
                                          Value given, int64_t at);

/// The value of an i1/integer SSA value for thread `tid` of a 1-D block, if
/// it depends only on the thread id and constants (arith ops, thread / lane /
/// warp id reads, nvvm.shfl.sync idx from a constant lane, elect.sync =
/// lane 0); i1 values are 0 or 1.
std::optional<int64_t> evalForThread(Value v, int64_t tid);
/// The same evaluation with ``given`` (a loop's induction variable) taken
/// as ``at``, for thread 0: a loop-variable condition at one iteration.
std::optional<int64_t> evalWithValue(Value v, Value given, int64_t at);
/// evalForThread with ``given`` taken as ``at``.
std::optional<int64_t> evalForThreadWith(Value v, int64_t tid, Value given,
                                         int64_t at);

/// Whether an address is the same in every warp: constants, kernel
/// arguments, CTA and cluster ids, pure arithmetic on them.
bool uniformAddress(Value v, int depth = 0);
/// Whether the function may write global memory (a store or atomic outside
/// shared memory, a TMA or bulk store, a call).
bool writesGlobal(FunctionOpInterface fn);
/// Whether a value is the same in every warp of the CTA at any one time:
/// uniform addresses, induction variables of loops with such bounds, loads
/// of such addresses from constant memory (or from global memory when
/// `noGlobalWrites`), pure arithmetic on them.
bool sameForEveryWarp(Value v, bool noGlobalWrites, int depth = 0);
/// getExecutors leaving out the scf.if conditions that are the same for
/// every warp (sameForEveryWarp: a branch on a loop variable, a kernel
/// argument, the CTA rank narrows a role and adds no warps), the others
/// evaluated per thread with `given` taken as `at`.
std::optional<Executors> getWarpExecutors(Operation *op, int64_t blockDim,
                                          bool noGlobalWrites,
                                          Value given = Value(),
                                          int64_t at = 0);

/// "warp 3", "warps 4-7, 9" for a set of warp indices.
std::string describeWarps(const llvm::BitVector &warps);

/// True when an `scf.if` condition is the same for every thread of the CTA
/// and for every iteration of the loops around it: built only from
/// constants and kernel (`gpu.func ... kernel`) arguments with pure arith
/// ops. Such a branch is
/// not a warp-role split, so both branches must do the same with each
/// pipeline. Conditions on thread, lane, warp or CTA ids, loop variables
/// (peeled first/last iterations) or memory are not decided (false).
bool isUniformCondition(Value cond);

/// True when an `scf.if` condition is uniform across threads but depends on
/// a loop variable (`k > 0`: a peeled first iteration). How often each
/// branch runs is not decided.
bool isLoopVariableCondition(Value cond);

/// True when an `scf.if` splits threads: its condition is neither uniform
/// nor a loop variable's, and evalForThread decides it per thread. Each
/// branch then acts for its own threads (the per-thread walks of the fence
/// and shared-memory hand-over checks).
bool isThreadSplit(scf::IfOp ifOp);

/// The op that owns a role block (the scf.if or the function), for notes.
Operation *getRoleOwner(Block *roleBlock);

/// The outermost scf.for that contains `op` and lies within `ancestorBlock`
/// (null when `op` is in no such loop).
scf::ForOp getOutermostLoopWithin(Operation *op, Block *ancestorBlock);

//===----------------------------------------------------------------------===//
// States
//===----------------------------------------------------------------------===//

/// A state as (root, stages advanced from it): the root is the first value up
/// the chain of state.advance (by a constant) / order.arrive ops. Two states
/// with the same root and offset name the same stage even when they are
/// different SSA values.
std::pair<Value, int64_t> getStateRoot(Value state);

/// Constant trip count of an scf.for, if its bounds and step are constants.
std::optional<int64_t> getConstantTripCount(scf::ForOp loop);

/// Integer value of a constant-foldable SSA value.
std::optional<int64_t> getConstantInt(Value v);

/// A body of ops with nothing but a terminator.
bool isEmptyBlock(Block *block);

//===----------------------------------------------------------------------===//
// Transaction bytes: what the copies of a stage deliver. One count, shared by
// the checker (checkTxBytes) and pipeline-derive-tx-count.
//===----------------------------------------------------------------------===//

/// One copy bound to a stage: the bytes it lands in this CTA per execution,
/// how often it runs per stage (enclosing constant loops), how many CTAs
/// of its multicast mask send this CTA a slice, and how many lanes of each
/// warp that runs it issue it (each lane that executes a copy op issues a
/// copy: 32 for a warp without an elect_one / lane guard, against the one
/// arrive.expect_tx its producer.acquire gives per warp; 1 where the guards
/// are not decided, see getExecutors).
struct CopyBytes {
  Operation *op;
  int64_t bytes;
  int64_t times;
  int64_t multicast;
  int64_t issuers = 1;
  /// The warps that issue it ("warp 1"), when issuers > 1.
  std::string issuingWarps;
};

/// The producer.acquire and copy ops of the TMA-load pipelines of `fn`, per
/// (pipeline, state), in program order.
struct TxStages {
  llvm::MapVector<std::pair<Value, Value>, SmallVector<Operation *>> acquires,
      copies;
};
TxStages collectTxStages(FunctionOpInterface fn);

/// False when the stage's copies may be issued by ops the checker cannot see
/// (the barrier address is taken, or the state leaves the pipeline ops).
bool copiesAreVisible(Value state);

/// The copies among `stageCopies` that fill the stage `acq` armed: dominated
/// by it and not by a later acquire of `acqs` (the acquires of the same
/// state). nullopt when undecidable; `*culprit` is then the copy (a copy no
/// acquire dominates, or one whose bytes, mask or trip count are not
/// constant).
std::optional<SmallVector<CopyBytes>>
getAcquireCopies(Operation *acq, ArrayRef<Operation *> acqs,
                 ArrayRef<Operation *> stageCopies, DominanceInfo &domInfo,
                 Operation **culprit = nullptr);

/// Bytes `copies` land on the stage's full barrier: multicast senders and,
/// for 2-CTA pipelines, both CTAs of the pair (the leader's barrier counts
/// the peer's copies too).
int64_t deliveredBytes(ArrayRef<CopyBytes> copies, PipelineType type);

/// Whether a copy among `copies` is issued by more than one thread (a warp
/// without an elect_one guard).
bool issuedByManyThreads(ArrayRef<CopyBytes> copies);

/// Attaches one note per copy: its bytes and each factor.
void noteCopies(InFlightDiagnostic &diag, ArrayRef<CopyBytes> copies,
                PipelineType type);

//===----------------------------------------------------------------------===//
// The checks. Each emits its diagnostics and returns failure if it found a
// problem; all of them run so that one compile reports every problem.
//===----------------------------------------------------------------------===//

/// Property 1: acquire/commit and wait/release balance per loop and role.
/// A consumer role (`hand`) that waits on stages of `pipe` and leaves their
/// release to another role (`rel`): true when one named barrier (no index)
/// orders them, `hand` arriving or syncing on it after its last wait, `rel`
/// syncing on it before its first release, with the same id and thread
/// count, that count being the two roles' threads (the block size of
/// `anchor`'s function decides who runs each site). RoleHandOver.cpp.
/// `barrier`, when given, receives `rel`'s barrier op.
bool handsOverAtBarrier(Block &hand, Block &rel, Value pipe, Operation *anchor,
                        Operation **barrier = nullptr);
/// Two loops over the same range: equal bounds and step (the same values or
/// equal constants).
bool sameLoopRange(scf::ForOp a, scf::ForOp b);
/// The id and thread count of a named barrier op without an index.
std::optional<std::pair<int64_t, int64_t>> namedBarrierId(Operation *op);
/// How two roles' loops relate for a hand-over at named barrier `barrier`:
/// Related when their ranges are the same or differ by a peel made explicit
/// before the later loop (the same step and upper bound, lower bounds k
/// steps apart, its role meeting the barrier k more times before its loop
/// than the other role before its own), `shift` = how many iterations `b`
/// starts after `a`; NotProven for a peel the checker does not follow (a
/// peel at the end, or a meet before a loop inside a branch or loop);
/// Unrelated otherwise (other ranges, or meets that do not account for
/// the peel). RoleHandOver.cpp.
struct LoopRelation {
  enum Kind { Related, NotProven, Unrelated } kind;
  /// `b` starts `shift` iterations after `a` (a peel before `b`'s loop).
  int64_t shift;
  /// `b` ends `tail` iterations after `a` (negative: before it); the loop
  /// that ends earlier runs those iterations after it, straight-line.
  int64_t tail;
};
LoopRelation relateLoops(scf::ForOp a, scf::ForOp b, Operation *barrier);
/// Which straight-line meet of `barrier`'s named barrier after `loop`
/// (0 for the first) `barrier` is; nullopt when it is not one (in a branch
/// or loop, or a meet in one comes first).
std::optional<int64_t> meetIndexAfter(scf::ForOp loop, Operation *barrier);
/// The warning of check 8 at a release after named barrier `id` that
/// another role's loop (`otherLoop`) meets with reads in flight, where that
/// loop and the release's (`mine`) are not Related (relateLoops).
void warnHandOverNotProven(Operation *release, int64_t id,
                           Operation *otherLoop, scf::ForOp mine);
/// The warning of check 1 where `loop` waits on stages of `pipe` and leaves
/// their release to `other`, a loop of another role whose range relates to
/// it by a peel the checker does not follow (relateLoops: NotProven).
void warnHandOverNotProven(scf::ForOp loop, scf::ForOp other, Value pipe);
LogicalResult checkBalance(FunctionOpInterface fn);
/// Property 1, for a verb under a branch on the loop's own iteration that
/// repeats every m iterations (`i % 2 == 0`): per period of the loop, the
/// pairs must still add up (PeriodicBranches.cpp).
LogicalResult checkPeriodicBranches(FunctionOpInterface fn);

/// One pipeline, one side: producer (acquire/commit, or order wait/arrive)
/// or consumer (wait/release).
using PairKey = std::pair<Value, unsigned>;
constexpr unsigned kProducerSide = 0;
constexpr unsigned kConsumerSide = 1;
/// Which half of which pair an op is, if any: (key, true) for the opening
/// verb (acquire, wait, order.wait), (key, false) for the closing one. TMA
/// kinds' commits are no-ops and not counted (check 5 counts their copies).
std::optional<std::pair<PairKey, bool>> classifyPairVerb(Operation *op);
/// How diagnostics name a pipeline side's pair of verbs.
struct PairWords {
  StringRef firstVerb, secondVerb; // op names
  StringRef firstDoes, secondDoes; // "acquires", "commits"
};
PairWords wordsFor(const PairKey &key);
/// "1 stage", "3 stages".
std::string stages(int64_t n);
/// Property 2: states carried by loops advance once per stage used; verbs
/// of one stage use the same state value.
LogicalResult checkStateThreading(FunctionOpInterface fn,
                                  DominanceInfo &domInfo);
/// Property 3: explicit start phases.
LogicalResult checkInitialPhases(FunctionOpInterface fn);
/// Property 4: producer roles end with producer.tail.
LogicalResult checkProducerTail(FunctionOpInterface fn, const Options &options);
/// Property 5: expect_tx bytes equal the bytes of the copies of the stage.
LogicalResult checkTxBytes(FunctionOpInterface fn, DominanceInfo &domInfo);
/// Property 6: arrive counts agree with who arrives.
LogicalResult checkArriveCounts(FunctionOpInterface fn, const Options &options);
/// Property 7: no store into a stage after its producer.commit, before the
/// next producer.acquire, and no load from a stage after its
/// consumer.release, before the next consumer.wait
/// (StageAccessAfterHandoff.cpp).
LogicalResult checkCommitBeforeWrite(FunctionOpInterface fn);
LogicalResult checkReleaseBeforeRead(FunctionOpInterface fn);
/// Property 8: a stage is released (or re-acquired) only after the
/// asynchronous readers of its buffer (wgmma, tcgen05.mma, bulk stores)
/// issued before are done reading (AsyncReadChecks.cpp); a release by
/// fewer warps than read the stage, only after the other warps' reads are
/// retired before the role barrier it is ordered after.
LogicalResult checkAsyncReads(FunctionOpInterface fn, const Options &options);
/// Property 9: named barrier ids, thread counts and the warps that reach
/// them (NamedBarrierChecks.cpp).
LogicalResult checkNamedBarriers(FunctionOpInterface fn, const Options &options);
/// Property 9 (second part): a warp that only syncs on a named barrier gets
/// an arrival of every warp the barrier counts for each of its syncs
/// (NamedBarrierBalance.cpp).
LogicalResult checkNamedBarrierBalance(FunctionOpInterface fn,
                                       const Options &options);
/// Property 10: barrier storage holds the pipeline's mbarriers where its size
/// is known (BarrierStorageChecks.cpp).
LogicalResult checkBarrierStorage(FunctionOpInterface fn);
/// Property 11: the stages each role produces, waits on and releases over
/// the whole kernel, as polynomials of the kernel's arguments and loop
/// bounds, agree across roles (StageBalance.cpp).
LogicalResult checkStageBalance(FunctionOpInterface fn, const Options &options);
/// Property 12: a stage's copies (tma_load, bulk) run between the
/// producer.acquire and the producer.commit of their state
/// (CopyInsideAcquire.cpp).
LogicalResult checkCopiesInsideAcquire(FunctionOpInterface fn);
/// Property 13: no arrive (or init) of the user's own on a stage barrier
/// handed out by producer.barrier (BarrierHandleChecks.cpp).
LogicalResult checkBarrierHandles(FunctionOpInterface fn);
/// Property 13 (second part): a pipeline created with defer_sync is used
/// only after a post-init sync (pipeline.init_wait) (BarrierHandleChecks.cpp).
LogicalResult checkDeferredInit(FunctionOpInterface fn, DominanceInfo &domInfo);
/// Property 14: phases decided by the loop structure: start states made
/// inside a loop, (index, phase) pairs computed from loop variables whose
/// phase does not flip when the index wraps or starts at the other side's
/// parity (StatePhaseChecks.cpp).
LogicalResult checkStatePhases(FunctionOpInterface fn);
/// Property 15: in straight-line code, one stage's verbs come in their
/// protocol's order: commit after acquire, release after wait, each once;
/// one producer.tail; a PipelineTmaStore's copy.tma_store between its
/// acquire and commit (VerbOrderChecks.cpp).
LogicalResult checkVerbOrder(FunctionOpInterface fn);
/// Property 16: the buffer a state's index selects lies inside the
/// shared-memory allocation of its ring (RingBufferChecks.cpp).
LogicalResult checkRingBuffers(FunctionOpInterface fn);

/// Property 16 (accesses): a plain load or store into a ring, while a role
/// holds one of its stages, whose address comes from no state index.
LogicalResult checkRingBufferAccess(FunctionOpInterface fn);

/// Property 17: the registers the warpgroups hold after their setmaxnreg
/// (the launch's when they run none) fit the 65,536-register file, or
/// setmaxnreg.inc waits forever (RegisterBudgetChecks.cpp). Runs on every
/// function with a setmaxnreg, pipelines or not.
LogicalResult checkRegisterBudget(FunctionOpInterface fn,
                                  const Options &options);
/// Property 13 (third part): the cluster's post-init sync comes in pairs,
/// pipeline.init_arrive then pipeline.init_wait (BarrierHandleChecks.cpp).
LogicalResult checkInitSyncPairs(FunctionOpInterface fn);

/// Check 18: a role that waits on (acquires) more stages of a ring than it
/// has before releasing (committing) the oldest (HeldStageChecks.cpp).
LogicalResult checkHeldStages(FunctionOpInterface fn);
/// Property 19: every participant reaches a barrier equally often: no
/// block-wide bar.sync in a warp role, no barrier in a loop whose trip count
/// differs between the warps it counts, no ring shared by the CTAs of a
/// cluster in a loop whose trip count differs between them
/// (UniformTripChecks.cpp).
LogicalResult checkUniformTrips(FunctionOpInterface fn, const Options &options);

/// Check 9, third part: a named barrier synced on one branch of a non-role
/// scf.if inside a loop and only arrived on by the other (HeldStageChecks.cpp).
LogicalResult checkNamedBarrierBranchVerbs(FunctionOpInterface fn);
/// Property 9, a role that only arrives on a named barrier in a loop while
/// another syncs on it: refused at the arrive when nothing in the arriving
/// warps' loop body holds them back until the syncing side signals (a sync
/// on a second named barrier it meets, a wait on a stage it produces, an
/// acquire of a one-stage ring it releases). ArriveOnlyRoles.cpp.
LogicalResult checkArriveOnlyRoles(FunctionOpInterface fn,
                                   const Options &options);

/// Verbs whose barrier wait reads a state's phase (a state that only reaches
/// commits and releases has a phase nobody reads).
bool readsPhase(Verb v);

/// The phase-reading verbs `start` reaches, following the state through
/// advances, loop carries and scf.if results (checks 3 and 14).
SmallVector<Operation *> phaseReaders(Value start);

/// True when `before` runs earlier than `op` in program order: an ancestor
/// of `before` precedes an ancestor of `op` in a common block.
bool runsBefore(Operation *before, Operation *op);

} // namespace mlir::pipeline::protocol

#endif // PIPELINE_MLIR_LIB_DIALECT_PIPELINE_TRANSFORMS_PROTOCOLCHECKS_H
