//===- NamedBarrierBalance.cpp - arrivals per warp on a named barrier -----===//
//
// Property 9, second part: a named barrier that counts every thread of the
// warps reaching it completes a generation when each of them arrived once
// (a warp blocked in `bar.sync` cannot arrive twice in one generation). A
// warp that only syncs on it therefore needs, for its last sync, as many
// arrivals from the others: with P warps counted and a sync-only warp that
// syncs c times, the barrier sees P * c warp arrivals only if the others
// make them. Fewer, over the whole kernel, and that warp hangs in its last
// sync. This is what a `named_barrier.sync` doubled, or a partner's
// `arrive` or `sync` dropped, does to a hand-made producer/consumer
// hand-over (the epilogue's full/empty barriers, a ring of barrier ids):
// every per-op check passes, the counts do not.
//
// How: per barrier id (an `index` operand computed from the warp gives
// each warp its id; one that is a remainder by a constant widens the id to
// a range; overlapping ranges are one family, whose sums bound each id's),
// the warps reaching each op come from the thread conditions of the scf.ifs
// around it, evaluated per thread of the block (whole warps only); how
// often a warp runs the op comes from the loops and the branches on kernel
// arguments and loop variables around it, as polynomials of the kernel's
// values (the stage-balance counter). The id's thread count must equal the
// warps reaching it; a sync-only warp's count times the warps is compared
// with the sum over all warps, for values of the kernel's arguments where
// every loop runs (fewer: its last sync hangs; more by a count that grows
// with the kernel's values: a warp arrives twice per generation). An id
// whose ops are all accounted for and that fewer warps reach than it counts
// never completes a sync (check 9 decides the same only without
// loop-variable branches). Ids reached under any other condition, counted
// with fewer threads than reach them (roles that take turns), or used in a
// function that calls others are left alone.
//
//===----------------------------------------------------------------------===//

#include "ProtocolChecks.h"
#include "SymbolicCounts.h"

#include "mlir/Interfaces/CallInterfaces.h"


#include <map>

using namespace mlir;
using namespace mlir::pipeline;
using namespace mlir::pipeline::protocol;

namespace {

/// Bounds the threads evaluated when the block size is not known; a set
/// that reaches the last warp is then open-ended (`warp >= 1`).
constexpr int64_t kUnknownBlockThreads = 1024;

struct Site {
  Operation *op;
  llvm::BitVector warps;
  Poly count;
  bool sync;
  bool counted; // under a branch on a kernel argument or loop variable
};

struct Id {
  int64_t lo, hi; // ids [lo, hi)
  int64_t threads = -1;
  SmallVector<Site> sites;
  bool decided = true;
};

/// The ids an op may use: [base, base + range of its index).
std::optional<std::pair<int64_t, int64_t>> idRange(Operation *op) {
  int64_t base = op->getAttrOfType<IntegerAttr>("barrier_id").getInt();
  if (op->getNumOperands() == 0)
    return std::make_pair(base, base + 1);
  Value index = op->getOperand(0);
  if (std::optional<int64_t> c = getConstantInt(index))
    return std::make_pair(base + *c, base + *c + 1);
  Operation *def = index.getDefiningOp();
  if (def && isa<arith::RemUIOp, arith::RemSIOp>(def))
    if (std::optional<int64_t> m = getConstantInt(def->getOperand(1));
        m && *m > 0)
      return std::make_pair(base, base + *m);
  return std::nullopt;
}

/// The warps that run `op` (all 32 lanes each), from the thread conditions
/// around it; conditions on kernel arguments and loop variables are
/// counted, not evaluated. nullopt when undecided.
std::optional<llvm::BitVector> warpsRunning(Operation *op, int64_t blockDim,
                                            bool &counted) {
  SmallVector<std::pair<Value, bool>> conds;
  counted = false;
  for (Operation *cur = op; !isa<FunctionOpInterface>(cur->getParentOp());
       cur = cur->getParentOp()) {
    Operation *parent = cur->getParentOp();
    if (auto ifOp = dyn_cast<scf::IfOp>(parent)) {
      Value cond = ifOp.getCondition();
      if (isUniformCondition(cond) || isLoopVariableCondition(cond)) {
        counted = true;
        continue;
      }
      conds.push_back({cond, cur->getParentRegion() == &ifOp.getThenRegion()});
    } else if (!isa<scf::ForOp>(parent)) {
      return std::nullopt;
    }
  }
  int64_t limit = blockDim > 0 ? blockDim : kUnknownBlockThreads;
  llvm::BitVector warps(limit / 32);
  for (int64_t w = 0; w < limit / 32; ++w) {
    int lanes = 0;
    for (int64_t l = 0; l < 32; ++l) {
      bool runs = true;
      for (auto [cond, inThen] : conds) {
        std::optional<int64_t> c = evalForThread(cond, w * 32 + l);
        if (!c)
          return std::nullopt;
        if (bool(*c) != inThen) {
          runs = false;
          break;
        }
      }
      lanes += runs;
    }
    if (lanes != 0 && lanes != 32)
      return std::nullopt;
    if (lanes == 32)
      warps.set(w);
  }
  if (blockDim <= 0 && warps.test(limit / 32 - 1))
    return std::nullopt;
  return warps;
}

void reportSurplus(const Id &id, const std::string &idText,
                   const llvm::BitVector &all, int64_t w, const Poly &c,
                   const Poly &total, const Poly &needed,
                   const AtomTable &atoms) {
  // At an arrive of a warp that arrives more often than the syncing warp.
  const Site *site = nullptr;
  for (const Site &s : id.sites)
    if (!site && !s.sync)
      site = &s;
  if (!site)
    site = &id.sites.front();
  llvm::BitVector one(all.size());
  one.set(w);
  InFlightDiagnostic diag = site->op->emitError();
  diag << "named barrier id " << idText << " counts " << id.threads
       << " threads (" << describeWarps(all) << "); " << describeWarps(one)
       << " only syncs on it, " << printPoly(c, atoms)
       << " times, but the warps arrive " << printPoly(total, atoms)
       << " times in all, " << printPoly(total - needed, atoms)
       << " more than its syncs use: a warp arrives twice in one generation "
          "and completes it without the syncing warp, which then waits for "
          "a generation its partners already passed (rule: every warp a "
          "named barrier counts reaches it once per generation; look for an "
          "arrive doubled or a sync dropped)";
  for (const Site &s : id.sites)
    if (s.op != site->op)
      diag.attachNote(s.op->getLoc())
          << "reached by " << describeWarps(s.warps) << ", "
          << printPoly(s.count, atoms) << " times";
}

} // namespace

LogicalResult protocol::checkNamedBarrierBalance(FunctionOpInterface fn,
                                                 const Options &options) {
  SmallVector<Operation *> ops;
  fn->walk([&](Operation *op) {
    if (isa<NamedBarrierArriveOp, NamedBarrierSyncOp>(op))
      ops.push_back(op);
  });
  // A callee may use the same ids: its arrivals are not seen here.
  bool calls = false;
  fn->walk([&](CallOpInterface) { calls = true; });
  if (ops.empty() || calls)
    return success();
  int64_t blockDim = getBlockDim(fn, options);
  if (blockDim > 0 && (blockDim % 32 || blockDim > kUnknownBlockThreads))
    return success();

  AtomTable atoms;
  Canonicalizer canon(atoms);
  std::vector<Poly> constraints;
  // Each op's ids: one, a range (an index that is a remainder by a
  // constant), or one per warp (an index computed from the warp: the
  // ping-pong scheduler's `id + warpgroup`).
  struct Entry {
    Operation *op;
    int64_t lo, hi;
    std::optional<llvm::BitVector> warps;
    bool counted;
  };
  SmallVector<Entry> entries;
  for (Operation *op : ops) {
    bool counted = false;
    std::optional<llvm::BitVector> warps = warpsRunning(op, blockDim, counted);
    int64_t base = op->getAttrOfType<IntegerAttr>("barrier_id").getInt();
    Value index = op->getNumOperands() ? op->getOperand(0) : Value();
    if (index && !getConstantInt(index) && warps) {
      // Per warp, when the index is the same for its lanes.
      std::map<int64_t, llvm::BitVector> byId;
      bool perWarp = true;
      for (int64_t w : warps->set_bits()) {
        std::optional<int64_t> first = evalForThread(index, 32 * w);
        std::optional<int64_t> last = evalForThread(index, 32 * w + 31);
        if (!first || first != last) {
          perWarp = false;
          break;
        }
        auto [it, _] = byId.try_emplace(base + *first,
                                        llvm::BitVector(warps->size()));
        it->second.set(w);
      }
      if (perWarp) {
        for (auto &[id, ws] : byId)
          entries.push_back({op, id, id + 1, ws, counted});
        continue;
      }
    }
    std::optional<std::pair<int64_t, int64_t>> range = idRange(op);
    if (!range)
      return success(); // an id anywhere: nothing is decided
    entries.push_back({op, range->first, range->second, warps, counted});
  }
  // Ids whose ranges overlap form one family: a warp's syncs on the family
  // need the same arrivals in sum as on each id.
  SmallVector<std::pair<int64_t, int64_t>> sorted;
  for (const Entry &e : entries)
    sorted.push_back({e.lo, e.hi});
  llvm::sort(sorted);
  SmallVector<Id> ids;
  for (auto [lo, hi] : sorted) {
    if (!ids.empty() && lo < ids.back().hi)
      ids.back().hi = std::max(ids.back().hi, hi);
    else
      ids.push_back({lo, hi});
  }
  for (const Entry &e : entries) {
    Id *id = nullptr;
    for (Id &family : ids)
      if (family.lo <= e.lo && e.hi <= family.hi)
        id = &family;
    int64_t threads = e.op->getAttrOfType<IntegerAttr>("num_threads").getInt();
    if (id->threads >= 0 && id->threads != threads)
      id->decided = false; // two barriers on one id: check 9 reports it
    id->threads = threads;
    std::optional<Poly> count = countExecutions(e.op, canon, constraints);
    if (!e.warps || !count) {
      id->decided = false;
      continue;
    }
    id->sites.push_back(
        {e.op, *e.warps, *count, isa<NamedBarrierSyncOp>(e.op), e.counted});
  }

  bool failed = false;
  for (Id &id : ids) {
    if (!id.decided || id.sites.empty())
      continue;
    llvm::BitVector all(id.sites.front().warps.size());
    for (const Site &s : id.sites)
      all |= s.warps;
    int64_t p = all.count();
    std::string idText = id.hi - id.lo == 1 ? std::to_string(id.lo)
                                            : std::to_string(id.lo) + ".." +
                                                  std::to_string(id.hi - 1);
    if (32 * p < id.threads) {
      // Every op on the id is accounted for, and too few warps reach it: a
      // sync there waits for threads that never come. Check 9 decides this
      // for a known block size where no branch on a kernel argument or loop
      // variable and no run-time id index is involved.
      bool check9Decides =
          blockDim > 0 && llvm::none_of(id.sites, [](const Site &s) {
            return s.counted || (s.op->getNumOperands() &&
                                 !getConstantInt(s.op->getOperand(0)));
          });
      const Site *sync = nullptr;
      for (const Site &s : id.sites)
        if (!sync && s.sync && !s.count.isZero())
          sync = &s;
      if (!sync || check9Decides)
        continue;
      InFlightDiagnostic diag = sync->op->emitError();
      diag << "named barrier id " << idText << " counts " << id.threads
           << " threads but only " << describeWarps(all) << " ("
           << 32 * p
           << " threads) reach it: this sync never completes (rule: a named "
              "barrier counts exactly the threads of the warps that reach "
              "it; look for a partner's arrive or sync that was dropped, or "
              "fix num_threads)";
      failed = true;
      continue;
    }
    if (32 * p != id.threads)
      continue; // roles taking turns (check 9 decides what it can)
    // Per warp: its arrivals, and whether it only syncs.
    Poly total;
    SmallVector<std::pair<int64_t, Poly>> perWarp;
    for (int64_t w : all.set_bits()) {
      Poly c;
      for (const Site &s : id.sites)
        if (s.warps.test(w))
          c = c + s.count;
      perWarp.push_back({w, c});
      total = total + c;
    }
    for (auto &[w, c] : perWarp) {
      bool syncOnly = llvm::all_of(id.sites, [&](const Site &s) {
        return !s.warps.test(w) || s.sync;
      });
      if (!syncOnly)
        continue;
      Poly needed = c.scaled(p);
      if (needed == total)
        continue;
      // Arrivals beyond what the syncs use that grow with the kernel's
      // values (every term positive, none constant only): some warp arrives
      // twice in one generation, every iteration, and completes generations
      // without the syncing warp (an arrive doubled). A constant surplus is
      // a start signal nobody waits for, which is legal.
      Poly surplus = total - needed;
      if (!surplus.getConstant() &&
          llvm::all_of(surplus.terms,
                       [](const auto &t) { return t.second > 0; })) {
        reportSurplus(id, idText, all, w, c, total, needed, atoms);
        failed = true;
        break;
      }
      std::optional<Witness> wit =
          findWitness(needed, total, constraints, atoms);
      if (!wit || wit->a <= wit->b)
        continue;
      // Report at a sync of this warp.
      const Site *site = nullptr;
      for (const Site &s : id.sites)
        if (!site && s.warps.test(w))
          site = &s;
      llvm::BitVector one(all.size());
      one.set(w);
      InFlightDiagnostic diag = site->op->emitError();
      diag << "named barrier id " << idText << " counts " << id.threads
           << " threads (" << describeWarps(all) << "); "
           << describeWarps(one) << " only syncs on it, "
           << printPoly(c, atoms)
           << " times, and each of its syncs needs one arrival of every "
              "warp counted, but the warps arrive "
           << printPoly(total, atoms) << " times in all, not "
           << printPoly(needed, atoms) << " (" << wit->text()
           << "): its last sync never completes (rule: every warp a named "
              "barrier counts reaches it once per generation; look for a "
              "sync doubled, or a partner's arrive or sync dropped or under "
              "a condition of its own)";
      for (const Site &s : id.sites)
        if (s.op != site->op)
          diag.attachNote(s.op->getLoc())
              << "reached by " << describeWarps(s.warps) << ", "
              << printPoly(s.count, atoms) << " times";
      failed = true;
      break;
    }
  }
  return failure(failed);
}
