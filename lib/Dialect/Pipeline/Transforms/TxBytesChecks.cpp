//===- TxBytesChecks.cpp - expect_tx bytes against the copies -------------===//
//
// Property 5 of pipeline-verify-protocol: a TMA producer.acquire arms its
// full barrier with tx_count (+ extra_tx) bytes; the copies bound to that
// stage must deliver exactly that. The count of what a stage's copies
// deliver is shared with pipeline-derive-tx-count (ProtocolChecks.h).
//
// What is not decidable from the IR is left alone (see
// docs/VerifyProtocol.md): dynamic bytes, masks and extra_tx; copies issued
// through producer.barrier by other ops.
//
//===----------------------------------------------------------------------===//

#include "ProtocolChecks.h"

#include "mlir/Interfaces/LoopLikeInterface.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace mlir::pipeline;
using namespace mlir::pipeline::protocol;

//===----------------------------------------------------------------------===//
// TX bytes
//===----------------------------------------------------------------------===//

bool protocol::copiesAreVisible(Value state) {
  for (OpOperand &use : state.getUses()) {
    Operation *user = use.getOwner();
    if (isa<ProducerBarrierOp>(user))
      return false;
    if (isa<PipelineDialect>(user->getDialect()) ||
        isa<scf::YieldOp, scf::ForOp>(user))
      continue;
    return false;
  }
  return true;
}

/// Bytes one execution of a copy lands in each CTA of its mask; nullopt when
/// not constant.
static std::optional<CopyBytes> getCopyBytes(Operation *copy, Operation *acq) {
  CopyBytes result{copy, 0, 1, 1};
  // Every thread that executes the copy op issues a copy: a producer warp
  // without an elect_one (or lane) guard issues 32, each landing its bytes
  // on the stage's barrier, where producer.acquire armed tx_count once (its
  // one elected arrive.expect_tx per warp). Per warp, then: 32 copies for
  // whole warps, 1 for one lane. Where the guards are not decided, one.
  if (auto fn = copy->getParentOfType<FunctionOpInterface>()) {
    if (std::optional<Executors> who =
            getExecutors(copy, getBlockDim(fn, Options{}))) {
      if (who->wholeWarps) {
        result.issuers = 32;
        llvm::BitVector warps(who->threads.size() / 32);
        for (unsigned t : who->threads.set_bits())
          warps.set(t / 32);
        result.issuingWarps = describeWarps(warps);
      }
    }
  }
  if (auto tma = dyn_cast<TmaLoadOp>(copy)) {
    result.bytes = tma.getBytes();
    if (Value mask = tma.getMulticastMask()) {
      // A multicast copy of a slice lands in every CTA of the mask; the peers
      // issue the other slices, so this CTA receives popcount(mask) slices.
      std::optional<int64_t> m = getConstantInt(mask);
      if (!m)
        return std::nullopt;
      result.multicast = llvm::popcount(static_cast<uint16_t>(*m));
    }
  } else {
    std::optional<int64_t> size =
        getConstantInt(cast<BulkLoadOp>(copy).getSize());
    if (!size)
      return std::nullopt;
    result.bytes = *size;
  }
  for (Operation *p = copy->getParentOp(); p && !p->isAncestor(acq);
       p = p->getParentOp()) {
    if (auto loop = dyn_cast<scf::ForOp>(p)) {
      std::optional<int64_t> trips = getConstantTripCount(loop);
      if (!trips)
        return std::nullopt;
      result.times *= *trips;
    } else if (isa<LoopLikeOpInterface>(p)) {
      return std::nullopt;
    }
  }
  return result;
}

TxStages protocol::collectTxStages(FunctionOpInterface fn) {
  TxStages stages;
  fn->walk([&](Operation *op) {
    std::optional<VerbRef> verb = getVerb(op);
    if (!verb || !isTmaLoadKind(getPipelineType(verb->pipeline).getKind()))
      return;
    if (verb->verb == Verb::Acquire)
      stages.acquires[{verb->pipeline, verb->state}].push_back(op);
    else if (verb->verb == Verb::Copy)
      stages.copies[{verb->pipeline, verb->state}].push_back(op);
  });
  return stages;
}

std::optional<SmallVector<CopyBytes>>
protocol::getAcquireCopies(Operation *acq, ArrayRef<Operation *> acqs,
                           ArrayRef<Operation *> stageCopies,
                           DominanceInfo &domInfo, Operation **culprit) {
  // The copies of this acquire: dominated by it and not by a later acquire
  // of the same state. A copy no acquire dominates makes the grouping
  // ambiguous: leave it.
  SmallVector<CopyBytes> mine;
  for (Operation *copy : stageCopies) {
    auto owner = llvm::find_if(acqs, [&](Operation *other) {
      return domInfo.properlyDominates(other, copy) &&
             llvm::none_of(acqs, [&](Operation *later) {
               return later != other &&
                      domInfo.properlyDominates(other, later) &&
                      domInfo.properlyDominates(later, copy);
             });
    });
    std::optional<CopyBytes> bytes;
    if (owner != acqs.end() && *owner != acq)
      continue;
    if (owner != acqs.end())
      bytes = getCopyBytes(copy, acq);
    if (!bytes) {
      if (culprit)
        *culprit = copy;
      return std::nullopt;
    }
    mine.push_back(*bytes);
  }
  return mine;
}

int64_t protocol::deliveredBytes(ArrayRef<CopyBytes> copies,
                                 PipelineType type) {
  // 2-CTA pipelines: both CTAs of the pair issue the same copies (SPMD)
  // and all of them complete on the leader's full barrier, which alone is
  // armed with tx_count: it receives ctaGroup times this CTA's bytes.
  int64_t total = 0;
  for (const CopyBytes &c : copies)
    total += c.bytes * c.times * c.multicast * c.issuers * type.getCtaGroup();
  return total;
}

void protocol::noteCopies(InFlightDiagnostic &diag, ArrayRef<CopyBytes> copies,
                          PipelineType type) {
  int64_t pair = type.getCtaGroup();
  for (const CopyBytes &c : copies) {
    Diagnostic &note = diag.attachNote(c.op->getLoc());
    note << "copy of " << c.bytes << " bytes";
    if (c.times != 1)
      note << " x " << c.times << " iterations";
    if (c.multicast != 1)
      note << " x " << c.multicast << " CTAs of the multicast mask";
    if (pair != 1)
      note << " x " << pair << " CTAs of the pair (cta_group " << pair << ")";
    if (c.issuers != 1)
      note << " x " << c.issuers << " lanes that issue it (" << c.issuingWarps
           << ": every lane, no elect_one guard)";
  }
}

bool protocol::issuedByManyThreads(ArrayRef<CopyBytes> copies) {
  return llvm::any_of(copies, [](const CopyBytes &c) { return c.issuers > 1; });
}

/// The scf.if between `acq` and `copy` whose condition may skip the copy
/// while the stage still expects its bytes: a data-dependent, loop-variable
/// or kernel-argument condition (not a guard that picks who issues it),
/// whose other branch issues no copy of the same stage. Null when none.
static scf::IfOp findSkippingIf(Operation *copy, Operation *acq,
                                ArrayRef<Operation *> stageCopies) {
  for (Operation *p = copy->getParentOp(); p && !p->isAncestor(acq);
       p = p->getParentOp()) {
    auto ifOp = dyn_cast<scf::IfOp>(p);
    if (!ifOp || classifyCondition(ifOp.getCondition()) != Guard::None)
      continue;
    Region &other = ifOp.getThenRegion().isAncestor(copy->getParentRegion())
                        ? ifOp.getElseRegion()
                        : ifOp.getThenRegion();
    bool otherCopies = llvm::any_of(stageCopies, [&](Operation *c) {
      return other.isAncestor(c->getParentRegion());
    });
    if (!otherCopies)
      return ifOp;
  }
  return nullptr;
}

LogicalResult protocol::checkTxBytes(FunctionOpInterface fn,
                                     DominanceInfo &domInfo) {
  TxStages stages = collectTxStages(fn);

  bool failed = false;
  llvm::DenseSet<Value> underived;
  for (auto &[key, acqs] : stages.acquires) {
    auto [pipe, state] = key;
    PipelineType type = getPipelineType(pipe);
    if (type.getTxCount() == 0) {
      // Left to pipeline-derive-tx-count (the lowering pipelines run it
      // first): report once per pipeline, not per stage.
      if (!underived.insert(pipe).second)
        continue;
      InFlightDiagnostic diag = acqs.front()->emitError();
      diag << describe(pipe)
           << ": tx_count is 0 (to be derived from the copies): run "
              "pipeline-derive-tx-count before pipeline-verify-protocol (the "
              "pipeline-to-nvvm and pipeline-to-cubin pipelines do)";
      noteCreate(diag, pipe);
      failed = true;
      continue;
    }
    if (!copiesAreVisible(state))
      continue;
    // lookup() returns a copy: keep it alive (an ArrayRef would dangle).
    SmallVector<Operation *> stageCopies = stages.copies.lookup(key);
    for (Operation *acq : acqs) {
      auto acquire = cast<ProducerAcquireOp>(acq);
      int64_t expected = type.getTxCount();
      std::optional<int64_t> extra;
      if (acquire.getExtraTx()) {
        extra = getConstantInt(acquire.getExtraTx());
        if (!extra)
          continue;
        expected += *extra;
      }
      if (stageCopies.empty()) {
        InFlightDiagnostic diag = acq->emitError();
        diag << describe(pipe) << ": producer.acquire arms the full barrier "
             << "for " << expected
             << " bytes but no pipeline.copy.tma_load or pipeline.copy.bulk "
                "is bound to this state: the stage never completes and "
                "consumers wait forever (issue the stage's copies with the "
                "state given to producer.acquire)";
        noteCreate(diag, pipe);
        failed = true;
        continue;
      }
      std::optional<SmallVector<CopyBytes>> mine =
          getAcquireCopies(acq, acqs, stageCopies, domInfo);
      if (!mine || mine->empty())
        continue;
      for (const CopyBytes &c : *mine) {
        scf::IfOp skip = findSkippingIf(c.op, acq, stageCopies);
        if (!skip)
          continue;
        // A warning: the condition may hold on every run (a bound the
        // host guarantees); when it does not, the stage hangs.
        InFlightDiagnostic diag = c.op->emitWarning();
        diag << describe(pipe) << ": this copy runs only when a run-time "
             << "condition holds, but producer.acquire arms the full barrier "
             << "for its bytes on every path: when the condition is false the "
                "stage never completes and consumers wait forever (issue the "
                "copy unconditionally, move producer.acquire under the same "
                "condition, or arm fewer bytes with extra_tx on that path)";
        diag.attachNote(skip.getLoc()) << "condition that may skip the copy";
        diag.attachNote(acq->getLoc()) << "producer.acquire that arms the "
                                          "stage's bytes";
      }
      // Copies in the two branches of one scf.if are alternatives (a
      // multicast half or the whole tile alone): each path through such
      // branches delivers its own copies, and each must deliver the bytes.
      SmallVector<scf::IfOp> forks;
      for (const CopyBytes &c : *mine)
        for (Operation *p = c.op->getParentOp(); p && !p->isAncestor(acq);
             p = p->getParentOp()) {
          auto ifOp = dyn_cast<scf::IfOp>(p);
          if (!ifOp || llvm::is_contained(forks, ifOp))
            continue;
          auto in = [&](Region &r) {
            return llvm::any_of(*mine, [&](const CopyBytes &o) {
              return r.isAncestor(o.op->getParentRegion());
            });
          };
          if (in(ifOp.getThenRegion()) && in(ifOp.getElseRegion()))
            forks.push_back(ifOp);
        }
      if (forks.size() > 4)
        forks.clear(); // too many paths: all copies together, as before
      SmallVector<CopyBytes> path;
      int64_t total = 0;
      bool allPathsRight = true;
      for (unsigned mask = 0; mask < (1u << forks.size()); ++mask) {
        path.clear();
        for (const CopyBytes &c : *mine) {
          bool taken = true;
          for (auto [i, f] : llvm::enumerate(forks)) {
            Region &r = (mask >> i) & 1 ? f.getElseRegion() : f.getThenRegion();
            if (f->isAncestor(c.op) && !r.isAncestor(c.op->getParentRegion()))
              taken = false;
          }
          if (taken)
            path.push_back(c);
        }
        total = deliveredBytes(path, type);
        if (total != expected) {
          allPathsRight = false;
          break;
        }
      }
      if (allPathsRight)
        continue;
      mine = path;
      InFlightDiagnostic diag = acq->emitError();
      diag << describe(pipe) << ": producer.acquire expects " << expected
           << " bytes (tx_count " << type.getTxCount();
      if (extra)
        diag << " + extra_tx " << *extra;
      diag << ") but the " << mine->size()
           << (mine->size() == 1 ? " copy" : " copies")
           << " bound to this stage deliver " << total << ": "
           << (total < expected
                   ? "the full barrier never completes and consumers wait "
                     "forever"
                   : "the phase completes before every byte landed and "
                     "consumers read a partly filled stage")
           << (issuedByManyThreads(*mine)
                   ? " (a copy op issues one copy per thread that runs it: "
                     "guard it with elect_one so that one lane issues it)"
                   : " (make tx_count the bytes of one stage's copies)");
      noteCopies(diag, *mine, type);
      noteCreate(diag, pipe);
      failed = true;
    }
  }
  return failure(failed);
}
