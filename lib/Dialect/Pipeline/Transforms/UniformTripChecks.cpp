//===- UniformTripChecks.cpp - barriers every participant reaches equally -===//
//
// Property 19 of pipeline-verify-protocol: a barrier completes a generation
// when every participant it counts arrived, so each participant must reach
// it equally often. Three shapes break that with every per-op count right:
//
//  (a) a block-wide barrier (`bar.sync 0`: k.sync_threads(), the
//      `__syncthreads` of the CTA) under a warp-role branch. It is an
//      aligned barrier over every thread of the CTA: all of them must run
//      this same instruction, and the warps outside the branch never do
//      (NVIDIA/Fuser#4187);
//  (b) a named barrier (or the block-wide one) inside a loop whose trip
//      count differs between the warps it counts: the warps with fewer
//      iterations leave the loop, the others wait at their last sync
//      (intel/sycl-tla#830: a causal k-loop bounded per warp);
//  (c) a pipeline whose barriers the CTAs of a cluster share (multicast
//      loads land in every CTA of the mask and each consumer releases in
//      all of them; the two CTAs of a 2-CTA MMA pair) inside a loop whose
//      trip count differs between those CTAs: the CTA with more stages
//      waits for arrivals its peer never makes (deepseek-ai/DeepGEMM#415,
//      #429: a k-loop per CTA where clusters straddle groups); or, the
//      same way, such a ring's ops (verbs, multicast copies) under a
//      branch whose condition differs between the CTAs of a cluster in a
//      way their rank alone does not decide (DeepGEMM#415's second form:
//      each CTA decides from its own tile whether multicast is valid, one
//      multicasts, its peer loads alone).
//  (d) an aligned named barrier (`bar.sync id, n`) that warps of different
//      roles sync on at different sites of one generation: `.aligned`
//      promises that the blocking participants run the same barrier
//      instruction, so two role branches each with their own `bar.sync`
//      on one id is undefined (compute-sanitizer reports it as a divergent
//      barrier; mlc-ai/TIRx-kernels#21). The unaligned form
//      (`barrier.cta.sync`), or `bar.arrive` on all sides but one, is
//      defined. One site reached by every participant (a role's own
//      barrier) and the arrive-then-sync hand-over stay legal.
//
// Trip counts are decided by evaluation: the loop's bounds are computed
// from constants, thread / warp / lane ids, the CTA's block id and cluster
// rank and the kernel's arguments (a few sets of small values) with arith
// ops, for each warp the barrier counts (b) or each CTA rank of a cluster
// (c); a bound that reads memory, a loop-carried value or anything else is
// not decided and the loop is left alone. Only a difference found for
// concrete values is reported.
//
//===----------------------------------------------------------------------===//

#include "ProtocolChecks.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

#include "llvm/ADT/StringExtras.h"

using namespace mlir;
using namespace mlir::pipeline;
using namespace mlir::pipeline::protocol;

namespace {

//===----------------------------------------------------------------------===//
// Evaluating loop bounds for one thread of one CTA
//===----------------------------------------------------------------------===//

/// Where the evaluation stands: a thread of the 1-D block, a CTA of the
/// grid and its rank in its cluster, and the kernel arguments' values
/// (argument i takes 1 + (seed * 7 + 3 * i) % 9: small positive values, a
/// different set per seed).
struct Point {
  int64_t tid = 0;
  int64_t ctaid[3] = {0, 0, 0};
  int64_t nctaid[3] = {64, 1, 1};
  int64_t rank = 0;
  int64_t seed = 0;
};

int64_t argValue(unsigned index, int64_t seed) {
  return 1 + (seed * 7 + 3 * static_cast<int64_t>(index)) % 9;
}

std::optional<int64_t> eval(Value v, const Point &at, int depth = 0);

std::optional<int64_t> evalI(Value v, const Point &at, int depth) {
  std::optional<int64_t> r = eval(v, at, depth);
  if (r && v.getType().isInteger(1))
    *r &= 1;
  return r;
}

std::optional<int64_t> dim(StringRef name, StringRef prefix,
                           const int64_t (&values)[3]) {
  if (!name.consume_front(prefix))
    return std::nullopt;
  if (name == "x")
    return values[0];
  if (name == "y")
    return values[1];
  if (name == "z")
    return values[2];
  return std::nullopt;
}

std::optional<int64_t> eval(Value v, const Point &at, int depth) {
  if (depth > 64)
    return std::nullopt;
  if (std::optional<int64_t> c = getConstantInt(v))
    return c;
  if (auto arg = dyn_cast<BlockArgument>(v)) {
    auto fn = dyn_cast_or_null<gpu::GPUFuncOp>(arg.getOwner()->getParentOp());
    if (fn && fn.isKernel() && arg.getType().isIntOrIndex())
      return argValue(arg.getArgNumber(), at.seed);
    return std::nullopt;
  }
  Operation *def = v.getDefiningOp();
  auto index = [](gpu::Dimension d, const int64_t(&values)[3]) {
    return values[d == gpu::Dimension::x ? 0 : d == gpu::Dimension::y ? 1 : 2];
  };
  if (auto t = dyn_cast<gpu::ThreadIdOp>(def))
    return t.getDimension() == gpu::Dimension::x ? at.tid : 0;
  if (isa<gpu::LaneIdOp>(def))
    return at.tid % 32;
  if (auto b = dyn_cast<gpu::BlockIdOp>(def))
    return index(b.getDimension(), at.ctaid);
  if (auto g = dyn_cast<gpu::GridDimOp>(def))
    return index(g.getDimension(), at.nctaid);
  StringRef name = def->getName().getStringRef();
  if (name == "nvvm.read.ptx.sreg.tid.x")
    return at.tid;
  if (name == "nvvm.read.ptx.sreg.tid.y" || name == "nvvm.read.ptx.sreg.tid.z")
    return 0;
  if (name == "nvvm.read.ptx.sreg.laneid")
    return at.tid % 32;
  if (name == "nvvm.read.ptx.sreg.warpid")
    return at.tid / 32;
  if (name == "nvvm.read.ptx.sreg.cluster.ctarank")
    return at.rank;
  if (std::optional<int64_t> d = dim(name, "nvvm.read.ptx.sreg.ctaid.", at.ctaid))
    return d;
  if (std::optional<int64_t> d =
          dim(name, "nvvm.read.ptx.sreg.nctaid.", at.nctaid))
    return d;
  if (auto shfl = dyn_cast<NVVM::ShflOp>(def)) {
    // The warp-index broadcast from a constant lane.
    std::optional<int64_t> lane = getConstantInt(shfl.getOffset());
    if (shfl.getKind() != NVVM::ShflKind::idx || !lane || *lane < 0 ||
        *lane > 31 || shfl.getReturnValueAndIsValid())
      return std::nullopt;
    Point from = at;
    from.tid = at.tid - at.tid % 32 + *lane;
    return evalI(shfl.getVal(), from, depth + 1);
  }
  auto in = [&](unsigned i) { return evalI(def->getOperand(i), at, depth + 1); };
  if (isa<arith::ExtUIOp, arith::ExtSIOp, arith::TruncIOp, arith::IndexCastOp,
          arith::IndexCastUIOp>(def))
    return in(0);
  if (isa<arith::SelectOp>(def)) {
    std::optional<int64_t> c = in(0);
    if (!c)
      return std::nullopt;
    return in(*c ? 1 : 2);
  }
  if (def->getNumOperands() != 2 || !isa<arith::ArithDialect>(def->getDialect()))
    return std::nullopt;
  std::optional<int64_t> a = in(0), b = in(1);
  if (!a || !b)
    return std::nullopt;
  if (auto cmp = dyn_cast<arith::CmpIOp>(def)) {
    switch (cmp.getPredicate()) {
    case arith::CmpIPredicate::eq: return *a == *b;
    case arith::CmpIPredicate::ne: return *a != *b;
    case arith::CmpIPredicate::slt:
    case arith::CmpIPredicate::ult: return *a < *b;
    case arith::CmpIPredicate::sle:
    case arith::CmpIPredicate::ule: return *a <= *b;
    case arith::CmpIPredicate::sgt:
    case arith::CmpIPredicate::ugt: return *a > *b;
    case arith::CmpIPredicate::sge:
    case arith::CmpIPredicate::uge: return *a >= *b;
    }
  }
  if (isa<arith::AddIOp>(def)) return *a + *b;
  if (isa<arith::SubIOp>(def)) return *a - *b;
  if (isa<arith::MulIOp>(def)) return *a * *b;
  if (isa<arith::MaxSIOp, arith::MaxUIOp>(def)) return std::max(*a, *b);
  if (isa<arith::MinSIOp, arith::MinUIOp>(def)) return std::min(*a, *b);
  if (*b == 0 && isa<arith::DivSIOp, arith::DivUIOp, arith::RemSIOp,
                     arith::RemUIOp, arith::FloorDivSIOp, arith::CeilDivSIOp,
                     arith::CeilDivUIOp>(def))
    return std::nullopt;
  if (isa<arith::DivSIOp, arith::DivUIOp>(def)) return *a / *b;
  if (isa<arith::RemSIOp, arith::RemUIOp>(def)) return *a % *b;
  if (isa<arith::FloorDivSIOp>(def))
    return *a / *b - ((*a % *b != 0) && ((*a < 0) != (*b < 0)));
  if (isa<arith::CeilDivSIOp, arith::CeilDivUIOp>(def))
    return *a / *b + ((*a % *b != 0) && ((*a < 0) == (*b < 0)));
  if (isa<arith::AndIOp>(def)) return *a & *b;
  if (isa<arith::OrIOp>(def)) return *a | *b;
  if (isa<arith::XOrIOp>(def)) return *a ^ *b;
  if (isa<arith::ShLIOp>(def))
    return *b >= 0 && *b < 63 ? std::optional<int64_t>(*a << *b) : std::nullopt;
  if (isa<arith::ShRUIOp, arith::ShRSIOp>(def))
    return *b >= 0 && *b < 63 ? std::optional<int64_t>(*a >> *b) : std::nullopt;
  return std::nullopt;
}

/// The trip count of `loop` at `at`; nullopt when a bound is not decided.
std::optional<int64_t> tripsAt(scf::ForOp loop, const Point &at) {
  std::optional<int64_t> lb = evalI(loop.getLowerBound(), at, 0);
  std::optional<int64_t> ub = evalI(loop.getUpperBound(), at, 0);
  std::optional<int64_t> step = evalI(loop.getStep(), at, 0);
  if (!lb || !ub || !step || *step <= 0)
    return std::nullopt;
  return *ub <= *lb ? 0 : (*ub - *lb + *step - 1) / *step;
}

constexpr int64_t kSeeds = 4;

/// The kernel arguments a seed gives to a loop's bounds or a branch's
/// condition, for messages: "k = 3, n = 5".
std::string argsText(Operation *loop, int64_t seed) {
  auto fn = loop->getParentOfType<gpu::GPUFuncOp>();
  if (!fn)
    return "";
  SmallVector<std::string> parts;
  std::function<void(Value, int)> visit = [&](Value v, int depth) {
    if (depth > 64)
      return;
    if (auto arg = dyn_cast<BlockArgument>(v)) {
      if (arg.getOwner()->getParentOp() != fn.getOperation())
        return;
      auto name = fn.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                  "pipeline.name");
      std::string text = (name && !name.getValue().empty()
                              ? name.str()
                              : "%arg" + std::to_string(arg.getArgNumber())) +
                         " = " +
                         std::to_string(argValue(arg.getArgNumber(), seed));
      if (!llvm::is_contained(parts, text))
        parts.push_back(text);
      return;
    }
    if (Operation *def = v.getDefiningOp())
      for (Value operand : def->getOperands())
        visit(operand, depth + 1);
  };
  if (auto forOp = dyn_cast<scf::ForOp>(loop)) {
    for (Value bound :
         {forOp.getLowerBound(), forOp.getUpperBound(), forOp.getStep()})
      visit(bound, 0);
  } else {
    for (Value operand : loop->getOperands()) // an scf.if's condition
      visit(operand, 0);
  }
  return llvm::join(parts, ", ");
}

//===----------------------------------------------------------------------===//
// (a) + (b): barriers the warps of a CTA reach
//===----------------------------------------------------------------------===//

/// A sync that every warp it counts must run each generation: a named
/// barrier's sync on a constant id, or a block-wide `bar.sync 0`. Its
/// thread count (0 = the whole block) and a name for messages.
struct SyncSite {
  Operation *op;
  int64_t threads; // 0: every thread of the block
  std::string what;
};

std::optional<SyncSite> syncSite(Operation *op) {
  if (isa<gpu::BarrierOp, NVVM::Barrier0Op>(op))
    return SyncSite{op, 0, "block-wide barrier (bar.sync 0, k.sync_threads())"};
  if (auto bar = dyn_cast<NVVM::BarrierOp>(op)) {
    if (bar.getNumberOfThreads() ||
        (bar.getBarrierId() && getConstantInt(bar.getBarrierId()) != 0))
      return std::nullopt;
    return SyncSite{op, 0, "block-wide barrier (bar.sync 0, k.sync_threads())"};
  }
  if (auto sync = dyn_cast<NamedBarrierSyncOp>(op)) {
    int64_t id = op->getAttrOfType<IntegerAttr>("barrier_id").getInt();
    if (op->getNumOperands()) {
      std::optional<int64_t> c = getConstantInt(op->getOperand(0));
      if (!c)
        return std::nullopt; // an id per warp: roles that take turns
      id += *c;
    }
    int64_t threads = op->getAttrOfType<IntegerAttr>("num_threads").getInt();
    return SyncSite{op, threads,
                    "named barrier " + std::to_string(id) + " (" +
                        std::to_string(threads) + " threads)"};
  }
  return std::nullopt;
}

/// The outermost warp-role branch around `op` (a thread split that is not
/// an elect / lane guard).
scf::IfOp outermostRoleBranch(Operation *op, FunctionOpInterface fn) {
  scf::IfOp split;
  for (Operation *p = op->getParentOp(); p && p != fn.getOperation();
       p = p->getParentOp())
    if (auto ifOp = dyn_cast<scf::IfOp>(p))
      if (isThreadSplit(ifOp) && !isGuardIf(ifOp))
        split = ifOp;
  return split;
}

bool checkBlockSyncInRole(const SyncSite &site, const Executors &who,
                          int64_t blockThreads, FunctionOpInterface fn) {
  int64_t warps = blockThreads / 32;
  llvm::BitVector reach(warps);
  for (int64_t w = 0; w < warps; ++w)
    if (who.threads.test(32 * w))
      reach.set(w);
  if (static_cast<int64_t>(reach.count()) == warps)
    return false;
  InFlightDiagnostic diag = site.op->emitError();
  diag << "block-wide barrier (bar.sync 0, k.sync_threads()) inside a "
          "warp-role branch, reached by "
       << describeWarps(reach) << " of the CTA's " << warps
       << " (rule: bar.sync 0 is an aligned barrier over every thread of the "
          "CTA, all of which must run this same instruction): the other "
          "warps never run it, which PTX leaves undefined and which hangs "
          "whenever they are still running (a producer waiting for this "
          "role's releases); sync the warps of this role on a named "
          "barrier of their own, "
          "NamedBarrier(barrier_id=..., num_threads="
       << reach.count() * 32 << ")";
  if (scf::IfOp split = outermostRoleBranch(site.op, fn))
    diag.attachNote(split.getLoc()) << "the warp-role branch starts here";
  return true;
}

/// (b): a loop around `site` whose trip count differs between two of the
/// warps `warps`.
bool checkSyncLoops(const SyncSite &site, ArrayRef<int64_t> warps,
                    FunctionOpInterface fn) {
  for (Operation *p = site.op->getParentOp(); p && p != fn.getOperation();
       p = p->getParentOp()) {
    auto loop = dyn_cast<scf::ForOp>(p);
    if (!loop)
      continue;
    for (int64_t seed = 0; seed < kSeeds; ++seed) {
      std::optional<int64_t> first;
      int64_t firstWarp = -1;
      bool undecided = false;
      for (int64_t w : warps) {
        Point at;
        at.tid = 32 * w;
        at.seed = seed;
        std::optional<int64_t> n = tripsAt(loop, at);
        if (!n) {
          undecided = true;
          break;
        }
        if (!first) {
          first = n;
          firstWarp = w;
          continue;
        }
        if (*n == *first)
          continue;
        InFlightDiagnostic diag = site.op->emitError();
        diag << site.what
             << " synced inside a loop whose trip count differs between the "
                "warps it counts: warp "
             << firstWarp << " runs the loop " << *first << " times, warp " << w
             << " " << *n << " times";
        std::string args = argsText(loop, seed);
        if (!args.empty())
          diag << " (with " << args << ")";
        diag << " (rule: every warp a barrier counts syncs on it equally "
                "often): the warps with fewer iterations leave the loop and "
                "the others wait forever at their last sync; bound the loop "
                "the same for every warp (mask the iterations a warp does not "
                "need), or sync on a barrier that counts only the warps that "
                "run them";
        diag.attachNote(loop.getLoc())
            << "the loop whose bounds depend on the warp";
        return true;
      }
      if (undecided)
        break;
    }
  }
  return false;
}

/// The warps that run `op` when it runs: the thread conditions around it
/// evaluated per warp (lanes 0 and 31 agree, else not decided), branches
/// on kernel arguments and constants (the same for every thread: they
/// decide whether it runs, not who) left out; nullopt when a condition is
/// neither or an op other than scf.if / scf.for is on the way.
std::optional<llvm::BitVector> warpsWhenRun(Operation *op,
                                            int64_t blockThreads) {
  SmallVector<std::pair<Value, bool>> conds;
  for (Operation *cur = op;;) {
    Operation *parent = cur->getParentOp();
    if (!parent)
      return std::nullopt;
    if (isa<FunctionOpInterface>(parent))
      break;
    if (auto ifOp = dyn_cast<scf::IfOp>(parent)) {
      if (!isUniformCondition(ifOp.getCondition()))
        conds.push_back({ifOp.getCondition(),
                         cur->getParentRegion() == &ifOp.getThenRegion()});
    } else if (!isa<scf::ForOp>(parent)) {
      return std::nullopt;
    }
    cur = parent;
  }
  llvm::BitVector warps(blockThreads / 32);
  for (int64_t w = 0; w < blockThreads / 32; ++w) {
    std::optional<bool> runs[2];
    for (int lane : {0, 31}) {
      bool r = true;
      for (auto [cond, inThen] : conds) {
        std::optional<int64_t> c = evalForThread(cond, 32 * w + lane);
        if (!c)
          return std::nullopt;
        r &= static_cast<bool>(*c) == inThen;
      }
      runs[lane ? 1 : 0] = r;
    }
    if (*runs[0] != *runs[1])
      return std::nullopt; // part of a warp: check 9's
    if (*runs[0])
      warps.set(w);
  }
  return warps;
}

/// (d): aligned syncs of one id at two sites reached by disjoint warps
/// that complete one generation together.
bool checkAlignedSites(FunctionOpInterface fn, int64_t blockThreads) {
  struct Site {
    Operation *op;
    int64_t id, threads;
    llvm::BitVector warps;
  };
  SmallVector<Site> sites;
  fn->walk([&](NamedBarrierSyncOp op) {
    if (op->hasAttr("unaligned"))
      return;
    std::optional<SyncSite> site = syncSite(op);
    if (!site)
      return;
    std::optional<llvm::BitVector> warps = warpsWhenRun(op, blockThreads);
    if (!warps || warps->none())
      return;
    int64_t id = op->getAttrOfType<IntegerAttr>("barrier_id").getInt();
    if (op->getNumOperands())
      id += *getConstantInt(op->getOperand(0));
    sites.push_back({op, id, site->threads, *warps});
  });
  bool failed = false;
  llvm::DenseSet<int64_t> reported;
  for (size_t j = 0; j < sites.size(); ++j)
    for (size_t i = 0; i < j; ++i) {
      const Site &a = sites[i], &b = sites[j];
      if (a.id != b.id || a.threads != b.threads || reported.contains(a.id) ||
          a.warps.anyCommon(b.warps))
        continue;
      int64_t na = 32 * a.warps.count(), nb = 32 * b.warps.count();
      // Each site alone short of the count, both together within it: a
      // generation completes with warps from both sites.
      if (na >= a.threads || nb >= a.threads || na + nb > a.threads)
        continue;
      reported.insert(a.id);
      failed = true;
      InFlightDiagnostic diag = b.op->emitError();
      diag << "aligned named barrier " << a.id << " (bar.sync " << a.id
           << ", " << a.threads << ") synced by " << describeWarps(b.warps)
           << " here and by " << describeWarps(a.warps)
           << " at another site, in one generation (rule: the blocking "
              "participants of an aligned barrier run the same barrier "
              "instruction; warps of different roles syncing at their own "
              "sites is undefined, a divergent barrier): use the unaligned "
              "form at these sites (NamedBarrier.wait_unaligned(), "
              "`unaligned` on pipeline.named_barrier.sync: barrier.cta.sync), "
              "or let all sides but the one that waits arrive "
              "(NamedBarrier.arrive(): bar.arrive)";
      diag.attachNote(a.op->getLoc())
          << "the other site of that generation, in another role";
    }
  return failed;
}

bool checkWarpSyncs(FunctionOpInterface fn, const Options &options) {
  int64_t blockThreads = getBlockDim(fn, options);
  if (blockThreads <= 0 || blockThreads % 32 || blockThreads > 1024)
    return false;
  bool failed = false;
  fn->walk([&](Operation *op) {
    std::optional<SyncSite> site = syncSite(op);
    if (!site)
      return;
    std::optional<Executors> who = getExecutors(op, blockThreads);
    if (!who || !who->wholeWarps)
      return;
    if (site->threads == 0 &&
        checkBlockSyncInRole(*site, *who, blockThreads, fn)) {
      failed = true;
      return;
    }
    SmallVector<int64_t> warps;
    for (int64_t w = 0; w < blockThreads / 32; ++w)
      if (who->threads.test(32 * w))
        warps.push_back(w);
    // A named barrier that counts more warps than reach this site is shared
    // with other sites (another role's arrive): their counts are check 9's.
    int64_t counted = site->threads ? site->threads : blockThreads;
    if (warps.size() < 2 || static_cast<int64_t>(warps.size()) * 32 != counted)
      return;
    failed |= checkSyncLoops(*site, warps, fn);
  });
  failed |= checkAlignedSites(fn, blockThreads);
  return failed;
}

//===----------------------------------------------------------------------===//
// (c): rings the CTAs of a cluster share
//===----------------------------------------------------------------------===//

/// Whether the pipeline's barriers take arrivals or bytes from other CTAs.
bool sharedAcrossCtas(PipelineType type) {
  BarrierPlan plan = getBarrierPlan(type);
  if (plan.multicastPeers > 1 || plan.ctaPair > 1)
    return true;
  if (plan.arm == ArmTarget::EveryClusterCta)
    return false; // clc_fetch_async: one producer serves every CTA
  return (plan.release != ArriveTarget::Local &&
          plan.release != ArriveTarget::None) ||
         (plan.commit != ArriveTarget::Local &&
          plan.commit != ArriveTarget::None);
}

/// Where CTA `r` of the cluster at grid position `pos` stands, with the
/// argument values of `seed`.
Point clusterPoint(int64_t seed, int64_t pos, int64_t r, int64_t cx, int64_t cy,
                   int64_t cz) {
  Point at;
  at.seed = seed;
  at.rank = r;
  at.ctaid[0] = pos * cx + r % cx;
  at.ctaid[1] = (r / cx) % cy;
  at.ctaid[2] = r / (cx * cy);
  at.nctaid[0] = 16 * cx;
  at.nctaid[1] = cy;
  at.nctaid[2] = cz;
  return at;
}

/// A branch around `op` whose condition differs between the CTAs of one
/// cluster, where the rank alone does not decide it (the same condition
/// gives another per-rank pattern in another cluster): reported at `op`.
bool checkClusterBranch(Operation *op, Value pipe, scf::IfOp ifOp,
                        int64_t cluster, int64_t cx, int64_t cy, int64_t cz,
                        int64_t blockThreads) {
  int64_t warps = blockThreads > 0 && blockThreads % 32 == 0 &&
                          blockThreads <= 1024
                      ? blockThreads / 32
                      : 1;
  constexpr int64_t kPositions = 16;
  for (int64_t seed = 0; seed < kSeeds; ++seed) {
    // pattern[pos][w * cluster + r]: the condition in warp w of rank r.
    SmallVector<SmallVector<int64_t>> pattern(kPositions);
    for (int64_t pos = 0; pos < kPositions; ++pos)
      for (int64_t w = 0; w < warps; ++w)
        for (int64_t r = 0; r < cluster; ++r) {
          Point at = clusterPoint(seed, pos, r, cx, cy, cz);
          at.tid = 32 * w;
          std::optional<int64_t> c = evalI(ifOp.getCondition(), at, 0);
          if (!c)
            return false;
          pattern[pos].push_back(*c);
        }
    if (llvm::all_of(pattern, [&](auto &p) { return p == pattern.front(); }))
      continue; // the same in every cluster: a split by rank (check 11)
    for (int64_t pos = 0; pos < kPositions; ++pos)
      for (int64_t w = 0; w < warps; ++w)
        for (int64_t r = 1; r < cluster; ++r) {
          int64_t first = pattern[pos][w * cluster];
          int64_t other = pattern[pos][w * cluster + r];
          if (first == other)
            continue;
          bool inThen = ifOp.getThenRegion().isAncestor(op->getParentRegion());
          auto path = [&](int64_t c) {
            return (c != 0) == inThen ? "runs this op" : "skips it";
          };
          InFlightDiagnostic diag = op->emitError();
          diag << describe(pipe) << ": its barriers are shared by the "
               << cluster
               << " CTAs of the cluster (multicast loads land in every CTA "
                  "of the mask and the consumers release the stage in each "
                  "of them, or a 2-CTA pair), but this op sits under a "
                  "branch whose condition differs between those CTAs: in "
                  "the cluster of block ids "
               << pos * cx << ".." << pos * cx + cx - 1;
          std::string args = argsText(ifOp, seed);
          if (!args.empty())
            diag << " (" << args << ")";
          diag << ", the CTA of rank 0 " << path(first)
               << ", the CTA of rank " << r << " " << path(other)
               << ", while in other clusters the ranks agree (rule: the CTAs "
                  "that share a ring's barriers make the same arrivals and "
                  "copies; a split by rank is the same in every cluster): a "
                  "CTA's barriers wait for bytes or arrivals its peer does "
                  "not send, or receive ones they do not expect; decide the "
                  "branch from what the cluster shares (its first CTA's "
                  "tile, block_idx // cluster size)";
          diag.attachNote(ifOp.getLoc())
              << "the branch whose condition differs between the CTAs";
          noteCreate(diag, pipe);
          return true;
        }
  }
  return false;
}

bool checkClusterLoops(FunctionOpInterface fn, int64_t blockThreads) {
  auto dims = fn->getAttrOfType<DenseI32ArrayAttr>("known_cluster_size");
  if (!dims || dims.size() != 3)
    return false;
  int64_t cx = std::max(dims[0], 1), cy = std::max(dims[1], 1),
          cz = std::max(dims[2], 1);
  int64_t cluster = cx * cy * cz;
  if (cluster <= 1 || cluster > 16)
    return false;
  bool failed = false;
  llvm::DenseSet<Value> reported; // one report per pipeline
  fn->walk([&](Operation *op) {
    // The ring's verbs, and its copies (a multicast tma_load names it too).
    Value pipe;
    if (std::optional<VerbRef> verb = getVerb(op))
      pipe = verb->pipeline;
    else
      for (Value v : op->getOperands())
        if (isa<PipelineType>(v.getType()))
          pipe = v;
    if (!pipe || !pipe.getDefiningOp<CreateOp>() || reported.contains(pipe) ||
        !sharedAcrossCtas(getPipelineType(pipe)))
      return;
    for (Operation *p = op->getParentOp(); p && p != fn.getOperation();
         p = p->getParentOp()) {
      if (auto ifOp = dyn_cast<scf::IfOp>(p)) {
        if (checkClusterBranch(op, pipe, ifOp, cluster, cx, cy, cz,
                               blockThreads)) {
          reported.insert(pipe);
          failed = true;
          return;
        }
        continue;
      }
      auto loop = dyn_cast<scf::ForOp>(p);
      if (!loop)
        continue;
      for (int64_t seed = 0; seed < kSeeds; ++seed) {
        // The CTAs of the cluster at grid position `seed` along x.
        SmallVector<std::pair<int64_t, int64_t>> trips; // (rank, trips)
        bool undecided = false;
        for (int64_t r = 0; r < cluster && !undecided; ++r) {
          Point at = clusterPoint(seed, seed, r, cx, cy, cz);
          std::optional<int64_t> n = tripsAt(loop, at);
          if (!n)
            undecided = true;
          else
            trips.push_back({r, *n});
        }
        if (undecided)
          break;
        auto other = llvm::find_if(trips, [&](auto &t) {
          return t.second != trips.front().second;
        });
        if (other == trips.end())
          continue;
        InFlightDiagnostic diag = op->emitError();
        diag << describe(pipe)
             << ": its barriers are shared by the " << cluster
             << " CTAs of the cluster (multicast loads land in every CTA of "
                "the mask and the consumers release the stage in each of "
                "them, or a 2-CTA pair), but a loop around this verb runs a "
                "number of times that differs between those CTAs: the CTA "
                "of rank "
             << trips.front().first << " runs it " << trips.front().second
             << " times, the CTA of rank " << other->first << " "
             << other->second << " times (block ids " << seed * cx << ".."
             << seed * cx + cx - 1;
        std::string args = argsText(loop, seed);
        if (!args.empty())
          diag << ", " << args;
        diag << ") (rule: the CTAs that share a ring's barriers run the same "
                "stages): the CTA with more stages waits forever for "
                "arrivals its peer never makes; compute the loop's bounds "
                "from what the cluster shares (its first CTA's tile, "
                "block_idx // cluster size), not from the CTA's own block "
                "id or rank";
        diag.attachNote(loop.getLoc())
            << "the loop whose trip count differs between the CTAs";
        noteCreate(diag, pipe);
        reported.insert(pipe);
        failed = true;
        return;
      }
    }
  });
  return failed;
}

} // namespace

LogicalResult protocol::checkUniformTrips(FunctionOpInterface fn,
                                          const Options &options) {
  bool failed = checkWarpSyncs(fn, options);
  failed |= checkClusterLoops(fn, getBlockDim(fn, options));
  return failure(failed);
}
