//===- PipelineDialect.td - pipeline dialect definition -----*- tablegen -*-===//

#ifndef PIPELINE_DIALECT_TD
#define PIPELINE_DIALECT_TD

include "mlir/IR/OpBase.td"

def Pipeline_Dialect : Dialect {
  let name = "pipeline";
  let cppNamespace = "::mlir::pipeline";
  let summary = "GPU producer/consumer pipelines (CuTe DSL `cutlass.pipeline`) as IR";
  let description = [{
    The `pipeline` dialect models the producer/consumer synchronization that
    CUTLASS's CuTe DSL exposes as `cutlass.pipeline` classes: a ring of
    `stages` buffers, each guarded by a *full* mbarrier (producer -> consumer)
    and an *empty* mbarrier (consumer -> producer), and per-role pipeline
    states (index, phase, count) that walk the ring.

    Everything that decides which PTX must be emitted is static and lives in
    the `!pipeline.pipeline` type (kind, stages, cooperative groups, tx bytes,
    cluster layout, multicast mode, CTA group), so that verifiers, the
    protocol checker and the lowering to NVVM all see the same facts.
  }];
  let useDefaultTypePrinterParser = 1;
  let useDefaultAttributePrinterParser = 1;
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

// Every pipeline op must sit inside a function (see InsideFunction in
// PipelineDialect.h).
def Pipeline_InsideFunction : NativeOpTrait<"InsideFunction"> {
  let cppNamespace = "::mlir::pipeline";
}

class Pipeline_Op<string mnemonic, list<Trait> traits = []>
    : Op<Pipeline_Dialect, mnemonic,
         !listconcat(traits, [Pipeline_InsideFunction])>;

#endif // PIPELINE_DIALECT_TD
