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
    store may still read it, named barrier ids that collide (id 0 next
    to block-wide sync, one id for roles that run at the same time) or count
    other threads than the warps that reach them, barrier storage (a
    shared global) smaller than the pipeline's mbarriers, and roles whose
    stage counts over the whole kernel differ (a producer loop over `n`
    against a consumer loop over `n - 1`), compared as polynomials of the
    kernel's arguments and loop bounds. A copy that a run-time condition may
    skip while its acquire armed the bytes is a warning.
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
           "bound read from memory, ...), naming what stops it">,
    Option<"registerFile", "register-file", "int64_t", /*default=*/"65536",
           "Registers one CTA may hold, for the register budget: the "
           "65,536-register file of an SM, or its share when several CTAs "
           "run on one SM">
  ];
}

def PipelineDeriveTxCount : Pass<"pipeline-derive-tx-count", "ModuleOp"> {
  let summary = "Set a TMA pipeline's tx_count from the bytes its copies deliver";
  let description = [{
    A TMA pipeline created with `tx_count = 0` (`tx_count` left out of
    `PipelineTmaAsync.create` and the other TMA-load kinds) arms each stage
    with the bytes that the copies bound to it deliver. This pass sets the
    pipeline's type to that number; the `pipeline-to-nvvm` and
    `pipeline-to-cubin` pipelines run it first. The bytes are counted as
    `pipeline-verify-protocol` counts them (one function for both): a copy's
    bytes, times the iterations of constant loops around it inside the
    stage, times the CTAs of a constant multicast mask, times 2 for a 2-CTA
    pipeline; a constant `extra_tx` of the acquire is not part of tx_count.

    A production is the copies bound to one `producer.acquire`. The first
    one defines tx_count; every other must deliver the same bytes (a peeled
    first iteration that loads an extra tile, or a branch that forgets one,
    is an error at its acquire). A pipeline with no production it can count
    (no copy, or only copies with a run-time size, mask or trip count) is an
    error at its create: give `tx_count` explicitly.
  }];
}

#endif // PIPELINE_TRANSFORMS_PASSES_TD
