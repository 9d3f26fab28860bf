//===- Passes.td - pipeline dialect passes ------------------*- tablegen -*-===//

#ifndef PIPELINE_TRANSFORMS_PASSES_TD
#define PIPELINE_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def PipelineVerifyProtocol : Pass<"pipeline-verify-protocol", "ModuleOp"> {
  let summary = "Check statically how pipeline ops are used (deadlock classes)";
  let description = [{
    Catches the synchronization bugs that otherwise surface as a hung kernel:
    unbalanced acquire/commit and wait/release per role and loop, states that
    do not advance exactly once per loop iteration, producer states that do
    not start at phase 1 (consumer: 0), a producer role that exits without
    `producer.tail` while arrives can still land on its CTA (a warning where
    none can), expect_tx bytes that differ from the bytes of the copies
    bound to the stage (multicast receivers and 2-CTA pairs included),
    arrive counts that disagree with who arrives, stores into a stage after
    the producer.commit that published it, a stage released (or
    re-acquired) while a wgmma group, an uncommitted tcgen05.mma or a bulk
    store may still read it, and named barrier ids that collide (id 0 next
    to block-wide sync, one id for roles that run at the same time) or count
    other threads than the warps that reach them, and roles whose stage
    counts over the whole kernel differ (a producer loop over `n` against a
    consumer loop over `n - 1`), compared as polynomials of the kernel's
    arguments and loop bounds.
    Each diagnostic points at the op and says how to fix it.

    Roles: each branch of an `scf.if` that splits warps (not an elect, lane or
    thread-id guard) and each function body is a role region. Checks that
    depend on values the IR does not fix (dynamic trip counts, byte counts,
    multicast masks, extra_tx) are skipped rather than guessed; see
    docs/VerifyProtocol.md for the exact rules.
  }];
  let options = [
    Option<"blockDim", "block-dim", "int64_t", /*default=*/"0",
           "Threads per CTA, when known, to check threadblock arrive counts">,
    Option<"singleCtaTail", "single-cta-tail", "bool", /*default=*/"false",
           "Make a missing producer.tail an error also for single-CTA "
           "pipelines whose consumers arrive synchronously (nothing can "
           "arrive after the CTA exits there, so by default it is a warning; "
           "CuTe DSL kernels always end producers with producer_tail)">,
    Option<"stageBalanceRemarks", "stage-balance-remarks", "bool",
           /*default=*/"false",
           "Remark on each pipeline whose roles' stage counts the "
           "stage-balance check cannot compare (a loop over an scf.while, a "
           "bound read from memory, ...), naming what stops it">
  ];
}

#endif // PIPELINE_TRANSFORMS_PASSES_TD
