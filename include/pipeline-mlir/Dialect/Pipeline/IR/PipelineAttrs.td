//===- PipelineAttrs.td - pipeline enums and attributes -----*- tablegen -*-===//

#ifndef PIPELINE_ATTRS_TD
#define PIPELINE_ATTRS_TD

include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"
include "pipeline-mlir/Dialect/Pipeline/IR/PipelineDialect.td"

//===----------------------------------------------------------------------===//
// Enums
//===----------------------------------------------------------------------===//

// Enum attributes print as `#pipeline.op_type<tma_load>` (the upstream NVVM
// spelling), which is what the op descriptions and diagnostics show.
class Pipeline_EnumAttr<EnumAttrInfo enumInfo, string name>
    : EnumAttr<Pipeline_Dialect, enumInfo, name> {
  let assemblyFormat = "`<` $value `>`";
}

// CuTe DSL `Agent`: the granularity at which a cooperative group arrives.
def Pipeline_Agent : I32EnumAttr<"Agent", "who arrives on a barrier", [
    I32EnumAttrCase<"Thread", 0, "thread">,
    I32EnumAttrCase<"Warp", 1, "warp">,
    I32EnumAttrCase<"ThreadBlock", 2, "threadblock">,
    I32EnumAttrCase<"ThreadBlockCluster", 3, "cluster">]> {
  let cppNamespace = "::mlir::pipeline";
  let genSpecializedAttr = 0;
}
def Pipeline_AgentAttr : Pipeline_EnumAttr<Pipeline_Agent, "agent">;

// CuTe DSL `PipelineOp`: the hardware mechanism that arrives on a barrier.
def Pipeline_OpType : I32EnumAttr<"OpType", "mechanism that signals a barrier", [
    I32EnumAttrCase<"AsyncThread", 0, "async_thread">,
    I32EnumAttrCase<"TmaLoad", 1, "tma_load">,
    I32EnumAttrCase<"TCGen05Mma", 2, "tcgen05_mma">,
    I32EnumAttrCase<"AsyncLoad", 3, "cp_async">,
    I32EnumAttrCase<"ClcLoad", 4, "clc_load">,
    I32EnumAttrCase<"TmaStore", 5, "tma_store">]> {
  let cppNamespace = "::mlir::pipeline";
  let genSpecializedAttr = 0;
}
def Pipeline_OpTypeAttr : Pipeline_EnumAttr<Pipeline_OpType, "op_type">;

// One case per CuTe DSL pipeline class (NamedBarrier has its own ops).
def Pipeline_Kind : I32EnumAttr<"PipelineKind", "CuTe DSL pipeline class", [
    I32EnumAttrCase<"Async", 0, "async">,
    I32EnumAttrCase<"CpAsync", 1, "cp_async">,
    I32EnumAttrCase<"TmaAsync", 2, "tma_async">,
    I32EnumAttrCase<"TmaStore", 3, "tma_store">,
    I32EnumAttrCase<"Order", 4, "order">,
    I32EnumAttrCase<"TmaUmma", 5, "tma_umma">,
    I32EnumAttrCase<"AsyncUmma", 6, "async_umma">,
    I32EnumAttrCase<"UmmaAsync", 7, "umma_async">,
    I32EnumAttrCase<"TmaMultiConsumersAsync", 8, "tma_multi_consumers_async">,
    I32EnumAttrCase<"ClcFetchAsync", 9, "clc_fetch_async">]> {
  let cppNamespace = "::mlir::pipeline";
  let genSpecializedAttr = 0;
}
def Pipeline_KindAttr : Pipeline_EnumAttr<Pipeline_Kind, "kind">;

// CuTe DSL `PipelineUserType`: which side of the pipeline a state walks.
def Pipeline_Role : I32EnumAttr<"Role", "side of the pipeline a state belongs to", [
    I32EnumAttrCase<"Producer", 0, "producer">,
    I32EnumAttrCase<"Consumer", 1, "consumer">,
    I32EnumAttrCase<"ProducerConsumer", 2, "producer_consumer">]> {
  let cppNamespace = "::mlir::pipeline";
  let genSpecializedAttr = 0;
}
def Pipeline_RoleAttr : Pipeline_EnumAttr<Pipeline_Role, "role">;

// Along which cluster modes the producer's loads are multicast.
def Pipeline_Multicast : I32EnumAttr<"Multicast", "cluster modes a load is multicast along", [
    I32EnumAttrCase<"None", 0, "none">,
    I32EnumAttrCase<"M", 1, "m">,
    I32EnumAttrCase<"N", 2, "n">,
    I32EnumAttrCase<"MN", 3, "mn">]> {
  let cppNamespace = "::mlir::pipeline";
  let genSpecializedAttr = 0;
}
def Pipeline_MulticastAttr : Pipeline_EnumAttr<Pipeline_Multicast, "multicast">;

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//

class Pipeline_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<Pipeline_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

def Pipeline_CooperativeGroupAttr : Pipeline_Attr<"CooperativeGroup", "group"> {
  let summary = "CuTe DSL CooperativeGroup: an agent and how many of them";
  let description = [{
    `#pipeline.group<thread, 128>` is `CooperativeGroup(Agent.Thread, 128)`.
    The barrier arrive count it implies is `size` for `thread`, `32 * size`
    for `warp`, `size * blockDim` for `threadblock` and
    `size * clusterSize * blockDim` for `cluster`.
  }];
  let parameters = (ins EnumParameter<Pipeline_Agent>:$agent, "int64_t":$size);
  let assemblyFormat = "`<` $agent `,` $size `>`";
  let genVerifyDecl = 1;
}

def Pipeline_ClusterLayoutAttr : Pipeline_Attr<"ClusterLayout", "cluster"> {
  let summary = "CuTe DSL cta_layout_vmnk: the cluster as (V, M, N, L)";
  let description = [{
    `#pipeline.cluster<2, 2, 1, 1>` is a cluster of V*M*N*L CTAs. V = 2 marks a
    2-CTA (`cta_group::2`) MMA pair; M and N are the modes that TMA multicast
    runs along; L is a batch mode. CTA ranks are laid out V fastest, then M,
    then N.
  }];
  let parameters = (ins "int64_t":$v, "int64_t":$m, "int64_t":$n, "int64_t":$l);
  let assemblyFormat = "`<` $v `,` $m `,` $n `,` $l `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// Number of CTAs in the cluster (V * M * N * L).
    int64_t getSize() const { return getV() * getM() * getN() * getL(); }
  }];
}

#endif // PIPELINE_ATTRS_TD
