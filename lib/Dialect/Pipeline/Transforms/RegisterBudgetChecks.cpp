//===- RegisterBudgetChecks.cpp - setmaxnreg against the register file ----===//
//
// The register budget of a warp-specialized kernel (pipeline-verify-protocol):
// `setmaxnreg.inc` waits until the registers it asks for are free, and only
// another warpgroup's `setmaxnreg.dec` (or its exit) frees them. When the
// warpgroups of a CTA together hold more than the 65,536 registers of an SM
// after their setmaxnreg, nobody gives them back and the kernel hangs.
//
// Each warpgroup (128 threads, 4 consecutive warps) holds the most any
// setmaxnreg it runs asks for, or the registers of the launch when it runs
// none: the register file over the block's threads in steps of 8, at most
// 256 (the cap ptxas gives a kernel with `.reqntid`, which every gpu.func
// with a known_block_size gets). Which warpgroups run a setmaxnreg comes
// from the scf.if conditions around it, evaluated per thread
// (evalForThread); a condition on anything else (a kernel argument,
// memory), a block that is not 1-D or not whole warpgroups, or a
// warpgroup that runs a setmaxnreg with some of its threads leaves the
// kernel unchecked: another rule's business, not a budget to guess.
//
// The pass option `register-file` lowers the 65,536 for a kernel that
// shares its SM with other CTAs (each holds its share).
//
// The Python layer (Kernel.compile / to_ptx) reaches this rule through the
// pass pipeline; the messages are in its words there (diagnostics.py maps
// `setmaxnreg.inc N` to `set_max_registers(N, increase=True)`). Python's
// configuration check (check_register_budget) runs this rule too, on the
// roles' setmaxnreg alone: the formula and its message are written here
// only.
//
//===----------------------------------------------------------------------===//

#include "ProtocolChecks.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/Twine.h"

#include <map>
#include <tuple>

using namespace mlir;
using namespace mlir::pipeline;
using namespace mlir::pipeline::protocol;

namespace {

constexpr int64_t kWarpgroupThreads = 128;
constexpr int64_t kMinRegisters = 24, kMaxRegisters = 256;

/// "65,536".
std::string withThousands(int64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0 && llvm::isDigit(digits[i - 1]))
      out += ',';
    out += digits[i];
  }
  return out;
}

/// "warpgroup 0", "warpgroups 1-4", "warpgroups 0, 2".
std::string warpgroupNames(ArrayRef<int64_t> groups) {
  std::string out;
  llvm::raw_string_ostream os(out);
  if (groups.size() == 1) {
    os << "warpgroup " << groups.front();
    return out;
  }
  bool contiguous = groups.back() - groups.front() + 1 ==
                    static_cast<int64_t>(groups.size());
  os << "warpgroups ";
  if (contiguous)
    os << groups.front() << "-" << groups.back();
  else
    llvm::interleaveComma(groups, os);
  return out;
}

/// The warpgroups (of `numGroups`) that run `op`: every enclosing scf.if
/// condition evaluated for each thread. nullopt when a condition is not
/// decided for some thread, or a warpgroup runs it with part of its threads.
std::optional<llvm::BitVector> warpgroupsRunning(Operation *op,
                                                 int64_t numGroups) {
  int64_t threads = numGroups * kWarpgroupThreads;
  llvm::BitVector running(threads, true);
  for (Operation *cur = op; cur->getParentOp() &&
                            !isa<FunctionOpInterface>(cur->getParentOp());
       cur = cur->getParentOp()) {
    auto ifOp = dyn_cast<scf::IfOp>(cur->getParentOp());
    if (!ifOp)
      continue; // a loop body runs on the threads that reach the loop
    bool inThen = cur->getParentRegion() == &ifOp.getThenRegion();
    for (int64_t tid = 0; tid < threads; ++tid) {
      if (!running.test(tid))
        continue;
      std::optional<int64_t> c = evalForThread(ifOp.getCondition(), tid);
      if (!c)
        return std::nullopt;
      if (static_cast<bool>(*c) != inThen)
        running.reset(tid);
    }
  }
  llvm::BitVector groups(numGroups);
  for (int64_t g = 0; g < numGroups; ++g) {
    int64_t n = 0;
    for (int64_t t = g * kWarpgroupThreads; t < (g + 1) * kWarpgroupThreads; ++t)
      n += running.test(t);
    if (n == kWarpgroupThreads)
      groups.set(g);
    else if (n != 0)
      return std::nullopt; // part of a warpgroup: not a budget question
  }
  return groups;
}

} // namespace

LogicalResult protocol::checkRegisterBudget(FunctionOpInterface fn,
                                            const Options &options) {
  if (fn.isExternal())
    return success();
  SmallVector<NVVM::SetMaxRegisterOp> sites;
  fn->walk([&](NVVM::SetMaxRegisterOp op) { sites.push_back(op); });
  if (sites.empty())
    return success();
  int64_t blockDim = getBlockDim(fn, options);
  if (blockDim <= 0 || blockDim % kWarpgroupThreads)
    return success();
  int64_t numGroups = blockDim / kWarpgroupThreads;
  int64_t registerFile = options.registerFile;
  int64_t entry =
      std::min<int64_t>(kMaxRegisters, registerFile / blockDim / 8 * 8);

  // Per warpgroup: the registers it holds and the setmaxnreg ops it runs.
  SmallVector<int64_t> registers(numGroups, entry);
  SmallVector<SmallVector<NVVM::SetMaxRegisterOp>> runs(numGroups);
  for (NVVM::SetMaxRegisterOp op : sites) {
    std::optional<llvm::BitVector> groups = warpgroupsRunning(op, numGroups);
    if (!groups)
      return success();
    for (int g : groups->set_bits())
      runs[g].push_back(op);
  }
  int64_t perThread = 0;
  for (int64_t g = 0; g < numGroups; ++g) {
    if (!runs[g].empty()) {
      registers[g] = 0;
      for (NVVM::SetMaxRegisterOp op : runs[g])
        registers[g] =
            std::max<int64_t>(registers[g], static_cast<int64_t>(op.getRegCount()));
    }
    perThread += registers[g];
  }
  int64_t total = kWarpgroupThreads * perThread;
  if (total <= registerFile)
    return success();

  // Warpgroups by count, the most first: "warpgroups 1-2 at 240 registers
  // per thread and warpgroup 0 at 168 (not resized: ...)".
  std::map<int64_t, SmallVector<int64_t>, std::greater<int64_t>> byCount;
  for (int64_t g = 0; g < numGroups; ++g)
    byCount[registers[g]].push_back(g);
  std::string listing, terms;
  llvm::raw_string_ostream ls(listing), ts(terms);
  size_t i = 0;
  for (auto &[count, groups] : byCount) {
    if (i)
      ls << (i + 1 == byCount.size() ? " and " : ", ");
    ls << warpgroupNames(groups) << " at " << count;
    if (i == 0)
      ls << " registers per thread";
    bool kept = llvm::all_of(groups, [&](int64_t g) { return runs[g].empty(); });
    if (kept)
      ls << " (not resized: the entry registers)";
    if (i)
      ts << " + ";
    if (groups.size() > 1)
      ts << groups.size() << " x " << count;
    else
      ts << count;
    ++i;
  }
  // The fix: a setmaxnreg.dec for the warpgroups that keep the launch's
  // registers (what the others leave them), and the most the warpgroups at
  // the top may ask for while the others keep theirs.
  auto &[top, topGroups] = *byCount.begin();
  int64_t topGroupCount = static_cast<int64_t>(topGroups.size());
  int64_t perWarpgroup = registerFile / kWarpgroupThreads;
  int64_t room = perWarpgroup - (perThread - top * topGroupCount);
  int64_t fits = room / topGroupCount / 8 * 8;
  bool topResized =
      llvm::any_of(topGroups, [&](int64_t g) { return !runs[g].empty(); });
  SmallVector<int64_t> kept;
  int64_t resizedSum = 0;
  for (int64_t g = 0; g < numGroups; ++g) {
    if (runs[g].empty())
      kept.push_back(g);
    else
      resizedSum += registers[g];
  }
  SmallVector<std::string> fixes;
  if (!kept.empty()) {
    int64_t left = (perWarpgroup - resizedSum) /
                   static_cast<int64_t>(kept.size()) / 8 * 8;
    if (left >= kMinRegisters)
      fixes.push_back((Twine("give ") + warpgroupNames(kept) +
                       " a setmaxnreg.dec to at most " + Twine(left))
                          .str());
  }
  if (fits >= kMinRegisters && topResized)
    fixes.push_back((Twine("lower the setmaxnreg.inc of ") +
                     warpgroupNames(topGroups) + " to at most " + Twine(fits))
                        .str());
  std::string fix;
  if (fixes.empty())
    fix = "give the kernel fewer warpgroups";
  else if (fixes.size() == 1)
    fix = fixes.front() + ", or give the kernel fewer warpgroups";
  else
    fix = fixes[0] + ", or " + fixes[1];

  // The error at a setmaxnreg of the warpgroups asking for the most (their
  // inc is the one that waits), else at the kernel; a note per op.
  Operation *at = fn;
  for (int64_t g : topGroups)
    for (NVVM::SetMaxRegisterOp op : runs[g])
      if (op.getRegCount() == top && at == fn.getOperation())
        at = op;
  InFlightDiagnostic diag =
      at->emitError()
      << "register budget: " << listing << " need " << kWarpgroupThreads
      << " threads x (" << terms << ") = " << total << " > " << registerFile
      << " registers (the " << withThousands(registerFile)
      << "-register file of an SM): setmaxnreg.inc "
         "waits until the registers it asks for are free, and no warpgroup "
         "gives them back, so the kernel hangs ("
      << fix << ")";
  // One note per setmaxnreg site: the ops of one source line (a Python loop
  // makes one per warpgroup) with the same action and count are one site.
  using Site = std::tuple<const void *, int, uint32_t>;
  llvm::MapVector<Site, std::pair<Operation *, SmallVector<int64_t>>> sitesOf;
  for (int64_t g = 0; g < numGroups; ++g)
    for (NVVM::SetMaxRegisterOp op : runs[g]) {
      bool inc = op.getAction() == NVVM::SetMaxRegisterAction::increase;
      Site key{op->getLoc().getAsOpaquePointer(), inc ? 1 : 0,
               op.getRegCount()};
      auto &entry = sitesOf[key];
      if (!entry.first)
        entry.first = op;
      if (entry.second.empty() || entry.second.back() != g)
        entry.second.push_back(g);
    }
  for (auto &[key, site] : sitesOf) {
    llvm::BitVector warps(numGroups * kWarpgroupThreads / 32);
    for (int64_t g : site.second)
      warps.set(g * 4, g * 4 + 4);
    diag.attachNote(site.first->getLoc())
        << (std::get<1>(key) ? "setmaxnreg.inc " : "setmaxnreg.dec ")
        << std::get<2>(key) << " runs in " << warpgroupNames(site.second)
        << " (" << describeWarps(warps) << ")";
  }
  return failure();
}
