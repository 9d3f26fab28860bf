//===- Passes.td - pipeline conversion passes ---------------*- tablegen -*-===//

#ifndef PIPELINE_CONVERSION_PASSES_TD
#define PIPELINE_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertPipelineToNVVM : Pass<"convert-pipeline-to-nvvm", "ModuleOp"> {
  let summary = "Lower pipeline ops to NVVM and LLVM dialect ops";
  let description = [{
    Emits exactly the instruction sequences of CuTe DSL's pipelines
    (`cutlass.pipeline`; docs/Rationale.md): mbarrier init/arrive/expect_tx/
    try_wait, tcgen05.commit, cp.async.bulk[.tensor], mapa + shared::cluster
    arrives, fence.mbarrier_init, cluster barriers, elect.sync, named
    barriers. Pipeline values become `!llvm.ptr<3>` (the barrier array),
    states `!llvm.struct<(i32, i32, i32)>` (index, phase, count) or one i32
    for the simple form.

    - Barrier storage: the `storage` operand, or a new `llvm.mlir.global
      internal` array of i64 in address space 3 named
      `__pipeline_barriers[_<name>][_<n>]` in the enclosing symbol table.
    - Arrive counts: the cooperative group's (thread n, warp 32n,
      threadblock n*blockDim, cluster n*clusterSize*blockDim); with a CTA
      pair (V = 2) the AsyncUmma full and UmmaAsync empty counts are doubled
      because both CTAs arrive on the leader's barrier.
    - Waits are `nvvm.mbarrier.try_wait.parity` (hint 10000000 ns; with the
      watchdog, `scf.while` loops on `nvvm.mbarrier.try_wait`) and guarded
      arrives are `scf.if`, so the output needs `convert-scf-to-cf` and
      `convert-nvvm-to-llvm` (done by the `pipeline-to-nvvm` pipeline).
    - Elect once (`elect-once`, on by default): a verb that elects one lane
      inside a converged warp-role region (an `scf.if` on a warp-uniform
      condition, only uniform `scf.if`/`scf.for` around it and inside it up
      to the verb) reuses one `nvvm.elect.sync` at the start of that region.
    - The chip is the one of the enclosing gpu.module's `#nvvm.target` when
      it has one, else the `chip` option; tcgen05 kinds on a chip other than
      sm_100a/sm_101a/sm_103a are an error on the op that creates (or, for
      block arguments, uses) the pipeline.
    - `watchdog=true` (docs/watchdog.md): each wait reads `%globaltimer`
      before its first try and after every failed one, and records what it
      waits on (pipeline id, role, stage, phase) in its warp's word of the
      shared wait table `__pipeline_watchdog_warps` (cleared at entry,
      marked on exit); thread 0 stores each pipeline's barrier address in
      `__pipeline_watchdog_pipes` at create. The verbs keep a ledger per
      barrier in the shared array `__pipeline_watchdog_ledger` (init count,
      arrivals, bytes announced by arrive.expect_tx, bytes of the copies
      issued; an atomic add each, in the CTA the operation signals). After
      `watchdog-timeout-ns` the
      first expired thread (an `atomicrmw xchg` on the i32 global
      `__pipeline_watchdog_claim`) writes a record of up to 4096 bytes
      through the pointer that the runner stored in the i64 global
      `__pipeline_watchdog_buffer` (pinned, mapped host memory; nothing is
      written while it is 0): words 1..10 = pipeline id, role (0 producer,
      1 consumer, 2 order), stage, phase, ctaid.x/y/z, warp, version 4,
      elapsed us; then `__pipeline_watchdog_dump` writes the wait table,
      calibration samples of the scratch barrier `__pipeline_watchdog_probe`
      and, for every barrier of every pipeline of the CTA, two parity
      probes, its state (expect_tx 1 byte, arrive's token,
      pending_count: docs/watchdog.md) and its ledger; `membar.sys`; then word 0, the magic
      0x57444F47 ("WDOG"), and `membar.sys` again. The other expired
      threads wait (at most 20 ms) for the record; every expired thread
      then traps. Pipeline ids index the module attribute
      `pipeline.watchdog_names`, which is also emitted as the NUL-separated
      global `__pipeline_watchdog_names`.
      Without the option nothing changes.
  }];
  let dependentDialects = [
    "::mlir::LLVM::LLVMDialect", "::mlir::NVVM::NVVMDialect",
    "::mlir::arith::ArithDialect", "::mlir::scf::SCFDialect",
    "::mlir::cf::ControlFlowDialect", "::mlir::gpu::GPUDialect"
  ];
  let options = [
    Option<"chip", "chip", "std::string", /*default=*/"\"sm_90a\"",
           "Target chip when the gpu.module has no #nvvm.target; tcgen05 "
           "kinds are rejected unless it is sm_100a/sm_101a/sm_103a">,
    Option<"watchdog", "watchdog", "bool", /*default=*/"false",
           "Bound every barrier wait by the global timer and trap with a report">,
    Option<"watchdogTimeoutNs", "watchdog-timeout-ns", "int64_t",
           /*default=*/"2000000000", "Watchdog timeout per wait, in ns">,
    Option<"electOnce", "elect-once", "bool", /*default=*/"true",
           "Compute elect.sync once per converged warp-role region">
  ];
}

#endif // PIPELINE_CONVERSION_PASSES_TD
