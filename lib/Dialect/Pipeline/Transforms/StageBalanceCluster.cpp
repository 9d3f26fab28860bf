//===- StageBalanceCluster.cpp - stage balance per CTA of a cluster -------===//
//
// Property 11 per CTA of a cluster (StageCounting.h): the roles of a ring
// that is its own in every CTA (no multicast, no CTA pair) put under
// branches on the CTA rank. A producer that runs in fewer CTAs than its
// consumers leaves them waiting on stages nobody fills; a consumer that
// runs in fewer CTAs than its producer leaves the producer waiting for
// stages nobody releases.
//
//===----------------------------------------------------------------------===//

#include "StageCounting.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

using namespace mlir;
using namespace mlir::pipeline;
using namespace mlir::pipeline::protocol;

namespace {

/// CTAs per cluster from the gpu.func's known_cluster_size (1 when absent).
int64_t clusterSizeOf(FunctionOpInterface fn) {
  auto sizes = fn->getAttrOfType<DenseI32ArrayAttr>("known_cluster_size");
  if (!sizes)
    return 1;
  int64_t n = 1;
  for (int32_t d : sizes.asArrayRef())
    n *= std::max<int32_t>(d, 1);
  return n;
}

/// What an scf.if condition reads, for evaluating it per CTA rank: the
/// %cluster_ctarank reads, and whether anything else than constants and
/// arith ops (thread ids, kernel arguments, memory) goes into it.
void rankSources(Value v, llvm::SmallPtrSetImpl<Operation *> &ranks,
                 bool &other, int depth) {
  if (depth > 32) {
    other = true;
    return;
  }
  if (getConstantInt(v))
    return;
  Operation *def = v.getDefiningOp();
  if (!def) {
    other = true;
    return;
  }
  if (def->getName().getStringRef() == "nvvm.read.ptx.sreg.cluster.ctarank") {
    ranks.insert(def);
    return;
  }
  if (!isa<arith::ArithDialect>(def->getDialect()) ||
      def->getNumRegions() != 0) {
    other = true;
    return;
  }
  for (Value operand : def->getOperands())
    rankSources(operand, ranks, other, depth + 1);
}

/// The CTA ranks of the cluster in which `op` may run (`may`) and in which
/// it surely runs when its role runs at all (`sure`), from the scf.if
/// conditions around it that read the CTA rank: a condition of the rank
/// alone is evaluated for each rank; one that mixes the rank with thread
/// ids or data is not decided (every rank may run it, none surely does).
/// Conditions that do not read the rank (warp roles, kernel arguments)
/// leave both sets alone.
struct RankSets {
  llvm::BitVector may, sure;
  /// The outermost branch that decides the rank, and the ranks it keeps.
  scf::IfOp guard;
};

RankSets ranksOf(Operation *op, int64_t cluster) {
  RankSets r{llvm::BitVector(cluster, true), llvm::BitVector(cluster, true),
             {}};
  for (Block *block = op->getBlock(); block;) {
    Operation *parent = block->getParentOp();
    if (!parent || isa<FunctionOpInterface>(parent))
      break;
    if (auto ifOp = dyn_cast<scf::IfOp>(parent)) {
      llvm::SmallPtrSet<Operation *, 2> reads;
      bool other = false;
      rankSources(ifOp.getCondition(), reads, other, 0);
      bool inThen = block->getParent() == &ifOp.getThenRegion();
      if (!reads.empty()) {
        if (other || reads.size() > 1) {
          r.sure.reset();
        } else {
          Value rank = (*reads.begin())->getResult(0);
          llvm::BitVector taken(cluster);
          bool decided = true;
          for (int64_t c = 0; c < cluster && decided; ++c) {
            std::optional<int64_t> v =
                evalWithValue(ifOp.getCondition(), rank, c);
            if (!v)
              decided = false;
            else if ((*v != 0) == inThen)
              taken.set(c);
          }
          if (!decided) {
            r.sure.reset();
          } else {
            r.may &= taken;
            r.sure &= taken;
            r.guard = ifOp;
          }
        }
      }
    }
    block = parent->getBlock();
  }
  return r;
}

/// "CTA 1", "CTAs 0, 2".
std::string describeRanks(const llvm::BitVector &ranks) {
  std::string out;
  for (int c : ranks.set_bits())
    out += (out.empty() ? "" : ", ") + std::to_string(c);
  return (ranks.count() == 1 ? "CTA " : "CTAs ") + out;
}

} // namespace

/// Property 11 per CTA of a cluster: a ring of its own in every CTA (no
/// multicast, no CTA pair: each CTA's producer fills its own stages and its
/// consumers release them there) needs a producer in every CTA where a
/// consumer waits. A producer role put under `cluster_cta_rank() == 0` (as
/// a multicast leader would be) leaves the other CTAs' consumers waiting on
/// stages nobody fills; the other way round, a consumer role under a rank
/// branch leaves the other CTAs' producers filling stages nobody releases.
/// True when it reported an error.
bool protocol::checkRolesPerCta(Value pipe, ArrayRef<Operation *> verbs,
                                FunctionOpInterface fn) {
  int64_t cluster = clusterSizeOf(fn);
  if (cluster <= 1 || cluster > 16)
    return false;
  BarrierPlan plan = getBarrierPlan(getPipelineType(pipe));
  bool local = plan.multicastPeers == 1 && plan.ctaPair == 1 &&
               plan.release == ArriveTarget::Local &&
               (plan.commit == ArriveTarget::Local ||
                plan.commit == ArriveTarget::None) &&
               (plan.arm == ArmTarget::Local || plan.arm == ArmTarget::None);
  if (!local)
    return false;
  llvm::BitVector producers(cluster);
  Operation *producerOp = nullptr;
  scf::IfOp producerGuard;
  for (Operation *op : verbs)
    if (isProducerVerb(getVerb(op)->verb)) {
      RankSets r = ranksOf(op, cluster);
      producers |= r.may;
      if (!producerOp) {
        producerOp = op;
        producerGuard = r.guard;
      }
    }
  if (!producerOp)
    return false;
  for (Operation *op : verbs) {
    Verb v = getVerb(op)->verb;
    if (v != Verb::Wait && v != Verb::Release)
      continue;
    llvm::BitVector orphan = ranksOf(op, cluster).sure;
    orphan.reset(producers);
    if (orphan.none())
      continue;
    Operation *at = producerGuard ? producerGuard.getOperation() : op;
    InFlightDiagnostic diag = at->emitError();
    diag << describe(pipe) << ": its producer role runs in "
         << describeRanks(producers) << " of the cluster of " << cluster
         << " only";
    if (producerGuard)
      diag << " (this branch on the CTA rank)";
    diag << ", but the ring is per CTA (not multicast) and its consumers "
            "also wait in "
         << describeRanks(orphan)
         << ": they wait on stages nobody fills in their CTA (run the "
            "producer in every CTA whose consumers use the ring, or "
            "multicast the loads to them)";
    diag.attachNote(op->getLoc())
        << "the consumer waits here, in every CTA of the cluster";
    if (producerGuard)
      diag.attachNote(producerOp->getLoc()) << "the producer";
    noteCreate(diag, pipe);
    return true;
  }
  // The other direction: a producer that surely runs in a CTA where no
  // consumer may release (the consumer role put under a rank branch) fills
  // the ring there once and then waits on stages nobody frees; its
  // producer_tail never completes either.
  llvm::BitVector consumers(cluster);
  Operation *consumerOp = nullptr;
  scf::IfOp consumerGuard;
  for (Operation *op : verbs) {
    Verb v = getVerb(op)->verb;
    if (v != Verb::Wait && v != Verb::Release)
      continue;
    RankSets r = ranksOf(op, cluster);
    consumers |= r.may;
    if (!consumerOp) {
      consumerOp = op;
      consumerGuard = r.guard;
    }
  }
  if (!consumerOp)
    return false;
  for (Operation *op : verbs) {
    Verb v = getVerb(op)->verb;
    if (v != Verb::Acquire && v != Verb::Commit)
      continue;
    llvm::BitVector orphan = ranksOf(op, cluster).sure;
    orphan.reset(consumers);
    if (orphan.none())
      continue;
    Operation *at = consumerGuard ? consumerGuard.getOperation() : op;
    InFlightDiagnostic diag = at->emitError();
    diag << describe(pipe) << ": its consumer role runs in "
         << describeRanks(consumers) << " of the cluster of " << cluster
         << " only";
    if (consumerGuard)
      diag << " (this branch on the CTA rank)";
    diag << ", but the ring is per CTA (not multicast) and its producer "
            "also fills it in "
         << describeRanks(orphan)
         << ": nobody releases the stages there, so the producer's "
            "producer_acquire waits once the ring is full and its "
            "producer_tail never completes (run the consumer in every CTA "
            "whose producer fills the ring, or the producer only where a "
            "consumer waits)";
    diag.attachNote(op->getLoc())
        << "the producer acquires here, in every CTA of the cluster";
    if (consumerGuard)
      diag.attachNote(consumerOp->getLoc()) << "the consumer";
    noteCreate(diag, pipe);
    return true;
  }
  return false;
}

