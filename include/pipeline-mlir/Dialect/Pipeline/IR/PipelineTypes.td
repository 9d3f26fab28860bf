//===- PipelineTypes.td - pipeline types --------------------*- tablegen -*-===//

#ifndef PIPELINE_TYPES_TD
#define PIPELINE_TYPES_TD

include "mlir/IR/AttrTypeBase.td"
include "pipeline-mlir/Dialect/Pipeline/IR/PipelineAttrs.td"

class Pipeline_Type<string name, string typeMnemonic, list<Trait> traits = []>
    : TypeDef<Pipeline_Dialect, name, traits> {
  let mnemonic = typeMnemonic;
}

def Pipeline_PipelineType : Pipeline_Type<"Pipeline", "pipeline"> {
  let summary = "a CuTe DSL pipeline object with every static fact the lowering needs";
  let description = [{
    The value of this type stands for the pipeline's barrier array in shared
    memory (full barriers `[0, stages)`, empty barriers `[stages, 2*stages)`).
    Everything the lowering, the verifiers and the protocol checker must know
    is in the type, so that no analysis has to chase the `pipeline.create`:

    - `kind`: the CuTe DSL class (`tma_async` is `PipelineTmaAsync`, ...);
    - `stages`: number of buffers (for `order`: the depth);
    - `producer` / `consumer`: the cooperative groups (arrive counts);
    - `tx_count`: bytes each stage's TMA/CLC load delivers (TMA kinds);
    - `cluster`: the (V, M, N, L) cluster layout, absent for one CTA;
    - `multicast`: the cluster modes loads are multicast along;
    - `cta_group`: 2 for 2-CTA (`cta_group::2`) UMMA pipelines;
    - `length`: the number of ordered groups (`order` only).

    Example:
    ```mlir
    !pipeline.pipeline<tma_async, stages = 4,
        producer = #pipeline.group<thread, 1>,
        consumer = #pipeline.group<thread, 8>, tx_count = 16384,
        cluster = #pipeline.cluster<1, 2, 1, 1>, multicast = m>
    ```
  }];
  let parameters = (ins
    EnumParameter<Pipeline_Kind>:$kind,
    "int64_t":$stages,
    OptionalParameter<"::mlir::pipeline::CooperativeGroupAttr">:$producer,
    OptionalParameter<"::mlir::pipeline::CooperativeGroupAttr">:$consumer,
    DefaultValuedParameter<"int64_t", "0">:$tx_count,
    OptionalParameter<"::mlir::pipeline::ClusterLayoutAttr">:$cluster,
    DefaultValuedParameter<"::mlir::pipeline::Multicast",
                           "::mlir::pipeline::Multicast::None">:$multicast,
    DefaultValuedParameter<"int64_t", "1">:$cta_group,
    DefaultValuedParameter<"int64_t", "0">:$length
  );
  let assemblyFormat = [{
    `<` $kind `,` struct($stages, $producer, $consumer, $tx_count, $cluster,
                         $multicast, $cta_group, $length) `>`
  }];
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// Number of CTAs in the cluster (1 without a cluster layout).
    int64_t getClusterSize() const;
    /// True for the kinds whose full barrier is signalled by TMA/CLC
    /// complete_tx and therefore need `tx_count`.
    bool hasTxCount() const;
    /// True for the kinds that use tcgen05 (sm_100 only).
    bool needsTcgen05() const;
    /// True when the pipeline owns full/empty mbarriers (all but tma_store).
    bool hasBarriers() const;
    /// Number of 8-byte mbarriers the pipeline needs in shared memory.
    int64_t getNumBarriers() const;
    /// The mechanism that arrives on the full / empty barriers.
    ::mlir::pipeline::OpType getProducerOpType() const;
    ::mlir::pipeline::OpType getConsumerOpType() const;
  }];
}

def Pipeline_StateType : Pipeline_Type<"State", "state"> {
  let summary = "a pipeline state: (index, phase, count) walking a ring of stages";
  let description = [{
    CuTe DSL `PipelineState`. `role` is the `PipelineUserType` the state was
    made for; producer verbs take producer states, consumer verbs consumer
    states. `simple` selects the flash-attention `PipelineStateSimple` form,
    one i32 `phase_index` from which index and phase are derived.

    ```mlir
    !pipeline.state<4, producer>
    !pipeline.state<2, consumer, simple>
    ```
  }];
  let parameters = (ins "int64_t":$stages, EnumParameter<Pipeline_Role>:$role,
                        DefaultValuedParameter<"bool", "false">:$simple);
  // `simple` is a bare keyword, so the format is written by hand.
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
}

#endif // PIPELINE_TYPES_TD
