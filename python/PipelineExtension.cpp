//===- PipelineExtension.cpp - Python module _pipeline ----------*- C++ -*-===//
//
// Registers the pipeline dialect and passes with the upstream `mlir` Python
// package's MLIR (one copy per process) and gives the dialect's types and
// attributes real Python classes, subclasses of mlir.ir.Type / Attribute.
// Enums cross as their integer values; pipeline_mlir.dialects.pipeline wraps
// them into the generated Python enums.
//
//===----------------------------------------------------------------------===//

#include "pipeline-mlir-c/Dialects.h"

#include "mlir-c/Diagnostics.h"
#include "mlir-c/IR.h"
#include "mlir/Bindings/Python/Nanobind.h"
#include "mlir/Bindings/Python/NanobindAdaptors.h"

namespace nb = nanobind;
using namespace mlir::python::nanobind_adaptors;

namespace {
MlirAttribute optionalAttr(std::optional<MlirAttribute> a) {
  return a ? *a : MlirAttribute{nullptr};
}
nb::object attrOrNone(MlirAttribute a) {
  if (mlirAttributeIsNull(a))
    return nb::none();
  return nb::cast(a);
}
/// MLIR reports why a parameter set is invalid through the context's
/// diagnostic handlers and returns a null object. While alive, this collects
/// those messages so that they become the text of a ValueError instead of
/// going to stderr.
class DiagnosticCapture {
public:
  explicit DiagnosticCapture(MlirContext ctx) : ctx(ctx) {
    id = mlirContextAttachDiagnosticHandler(ctx, &handle, this, nullptr);
  }
  ~DiagnosticCapture() { mlirContextDetachDiagnosticHandler(ctx, id); }
  void raiseIfNull(bool isNull, const char *what) {
    if (!isNull)
      return;
    std::string msg = std::string("invalid ") + what;
    if (!messages.empty())
      msg += ": " + messages;
    throw nb::value_error(msg.c_str());
  }

private:
  static MlirLogicalResult handle(MlirDiagnostic diag, void *userData) {
    auto *self = static_cast<DiagnosticCapture *>(userData);
    if (!self->messages.empty())
      self->messages += "; ";
    mlirDiagnosticPrint(
        diag,
        [](MlirStringRef s, void *out) {
          static_cast<std::string *>(out)->append(s.data, s.length);
        },
        &self->messages);
    return mlirLogicalResultSuccess();
  }
  MlirContext ctx;
  MlirDiagnosticHandlerID id;
  std::string messages;
};

/// A kind's row of the table (KindTraits.h) as a dict.
nb::dict kindTraitsDict(int32_t kind) {
  MlirPipelineKindTraits t;
  if (!mlirPipelineGetKindTraits(kind, &t))
    throw nb::value_error(
        ("kind " + std::to_string(kind) + " is not a pipeline kind").c_str());
  nb::dict d;
  d["kind"] = t.kind;
  d["kind_name"] = t.kindName;
  d["cute_class"] = t.cuteClass;
  d["has_barriers"] = t.hasBarriers;
  d["has_producer_group"] = t.hasProducerGroup;
  d["has_consumer_group"] = t.hasConsumerGroup;
  d["producer_op"] = t.producerOp;
  d["consumer_op"] = t.consumerOp;
  d["producer_op_name"] = t.producerOpName;
  d["consumer_op_name"] = t.consumerOpName;
  d["consumer_op_per_release"] = t.consumerOpPerRelease;
  d["tx_bytes"] = t.txBytes;
  d["stage_copies"] = t.stageCopies;
  d["tcgen05"] = t.tcgen05;
  d["multicast"] = t.multicast;
  d["pair_scales_full"] = t.pairScalesFull;
  d["pair_scales_empty"] = t.pairScalesEmpty;
  d["tail_leader_only"] = t.tailLeaderOnly;
  d["arm"] = t.armName;
  d["commit"] = t.commitName;
  d["release"] = t.releaseName;
  return d;
}

/// A barrier plan as a dict; init counts the block size leaves open are None.
nb::dict barrierPlanDict(const MlirPipelineParams &params, int64_t blockDim) {
  MlirPipelineBarrierPlan p;
  if (!mlirPipelineComputeBarrierPlan(params, blockDim, &p))
    throw nb::value_error("barrier_plan: kind, agent or multicast out of range");
  auto count = [](int64_t c) -> nb::object {
    return c < 0 ? nb::none() : nb::cast(c);
  };
  nb::dict d;
  d["num_barriers"] = p.numBarriers;
  d["num_full"] = p.numFull;
  d["num_empty"] = p.numEmpty;
  d["cluster_size"] = p.clusterSize;
  d["cta_pair"] = p.ctaPair;
  d["full_scale"] = p.fullScale;
  d["empty_scale"] = p.emptyScale;
  d["full_count"] = count(p.fullCount);
  d["empty_count"] = count(p.emptyCount);
  d["multicast_peers"] = p.multicastPeers;
  d["signalling_lanes"] = p.signallingLanes;
  d["arm"] = p.armName;
  d["commit"] = p.commitName;
  d["release"] = p.releaseName;
  d["tx_count"] = p.txCount;
  return d;
}
} // namespace

NB_MODULE(_pipeline, m) {
  m.doc() = "pipeline-mlir native extension";

  m.def(
      "register_dialect",
      [](MlirContext context, bool load) {
        MlirDialectHandle handle = mlirGetDialectHandle__pipeline__();
        mlirDialectHandleRegisterDialect(handle, context);
        if (load)
          mlirDialectHandleLoadDialect(handle, context);
      },
      nb::arg("context").none() = nb::none(), nb::arg("load") = true,
      "Register (and load) the pipeline dialect in an mlir.ir.Context.");

  m.def(
      "arrive_count",
      [](int32_t agent, int64_t size, int64_t blockThreads,
         int64_t clusterSize) -> nb::object {
        int64_t c =
            mlirPipelineGetArriveCount(agent, size, blockThreads, clusterSize);
        return c < 0 ? nb::none() : nb::cast(c);
      },
      nb::arg("agent"), nb::arg("size"), nb::arg("block_threads") = 0,
      nb::arg("cluster_size") = 1,
      "Arrive count a cooperative group implies; None when it depends on an "
      "unknown block size.");
  m.def(
      "nvvm_target_problem",
      [](const std::string &chip, const std::string &features, int64_t O,
         const std::string &triple) {
        std::string problem;
        mlirPipelineCheckNVVMTargetParams(
            O, mlirStringRefCreate(triple.data(), triple.size()),
            mlirStringRefCreate(chip.data(), chip.size()),
            mlirStringRefCreate(features.data(), features.size()),
            [](MlirStringRef s, void *out) {
              static_cast<std::string *>(out)->append(s.data, s.length);
            },
            &problem);
        return problem;
      },
      nb::arg("chip"), nb::arg("features") = "", nb::arg("O") = 2,
      nb::arg("triple") = "nvptx64-nvidia-cuda",
      "Why an #nvvm.target with these parameters would crash upstream MLIR "
      "or LLVM's NVPTX back end; '' when it would not.");
  m.def(
      "lowering_chips",
      []() {
        nb::list chips;
        mlirPipelineForEachLoweringChip(
            [](MlirStringRef s, void *out) {
              static_cast<nb::list *>(out)->append(
                  nb::str(s.data, s.length));
            },
            &chips);
        return nb::tuple(chips);
      },
      "The chips the pipeline lowering emits code for (sm_90a, ...).");
  m.def(
      "check_nvvm_targets",
      [](MlirOperation op) {
        DiagnosticCapture capture(mlirOperationGetContext(op));
        bool ok = mlirPipelineCheckNVVMTargets(op);
        capture.raiseIfNull(!ok, "#nvvm.target");
      },
      nb::arg("operation"),
      "Raise ValueError if an #nvvm.target under `operation` would crash "
      "upstream MLIR (its verifier) or the NVPTX back end.");
  m.def("kind_traits", &kindTraitsDict, nb::arg("kind"),
        "The meaning of a pipeline kind (its row of KindTraits.h) as a dict.");
  m.def(
      "barrier_plan",
      [](int32_t kind, int64_t stages, int32_t producerAgent,
         int64_t producerSize, int32_t consumerAgent, int64_t consumerSize,
         int64_t v, int64_t mm, int64_t n, int64_t l, int32_t multicast,
         int64_t ctaGroup, int64_t length, int64_t txCount,
         int64_t blockThreads) {
        MlirPipelineParams params{kind, stages, producerAgent, producerSize,
                                  consumerAgent, consumerSize, v, mm, n, l,
                                  multicast, ctaGroup, length, txCount};
        return barrierPlanDict(params, blockThreads);
      },
      nb::arg("kind"), nb::arg("stages"), nb::arg("producer_agent") = 0,
      nb::arg("producer_size") = 0, nb::arg("consumer_agent") = 0,
      nb::arg("consumer_size") = 0, nb::arg("v") = 1, nb::arg("m") = 1,
      nb::arg("n") = 1, nb::arg("l") = 1, nb::arg("multicast") = 0,
      nb::arg("cta_group") = 1, nb::arg("length") = 0, nb::arg("tx_count") = 0,
      nb::arg("block_threads") = 0,
      "The barrier plan (KindTraits.h) of a pipeline given by plain values "
      "(absent groups: size 0); for code that has no !pipeline.pipeline.");

  m.def("register_passes", &mlirPipelineRegisterPasses,
        "Register pipeline-verify-protocol, convert-pipeline-to-nvvm and the "
        "pipeline-to-cubin pass pipeline for PassManager.parse.");

  //===--------------------------------------------------------------------===//
  // Attributes
  //===--------------------------------------------------------------------===//

  mlir_attribute_subclass(m, "CooperativeGroupAttr",
                          mlirAttributeIsAPipelineCooperativeGroup,
                          mlirPipelineCooperativeGroupGetTypeID)
      .def_classmethod(
          "get",
          [](nb::object cls, int32_t agent, int64_t size, MlirContext ctx) {
            DiagnosticCapture capture(ctx);
            MlirAttribute a = mlirPipelineCooperativeGroupGet(ctx, agent, size);
            capture.raiseIfNull(mlirAttributeIsNull(a), "#pipeline.group");
            return cls(a);
          },
          nb::arg("cls"), nb::arg("agent"), nb::arg("size"),
          nb::arg("context").none() = nb::none())
      .def_property_readonly("agent_value",
                             mlirPipelineCooperativeGroupGetAgent)
      .def_property_readonly("size", mlirPipelineCooperativeGroupGetSize);

  mlir_attribute_subclass(m, "ClusterLayoutAttr",
                          mlirAttributeIsAPipelineClusterLayout,
                          mlirPipelineClusterLayoutGetTypeID)
      .def_classmethod(
          "get",
          [](nb::object cls, int64_t v, int64_t mm, int64_t n, int64_t l,
             MlirContext ctx) {
            DiagnosticCapture capture(ctx);
            MlirAttribute a = mlirPipelineClusterLayoutGet(ctx, v, mm, n, l);
            capture.raiseIfNull(mlirAttributeIsNull(a), "#pipeline.cluster");
            return cls(a);
          },
          nb::arg("cls"), nb::arg("v"), nb::arg("m"), nb::arg("n"),
          nb::arg("l"), nb::arg("context").none() = nb::none())
      .def_property_readonly(
          "v", [](MlirAttribute a) { return mlirPipelineClusterLayoutGetMode(a, 0); })
      .def_property_readonly(
          "m", [](MlirAttribute a) { return mlirPipelineClusterLayoutGetMode(a, 1); })
      .def_property_readonly(
          "n", [](MlirAttribute a) { return mlirPipelineClusterLayoutGetMode(a, 2); })
      .def_property_readonly(
          "l", [](MlirAttribute a) { return mlirPipelineClusterLayoutGetMode(a, 3); });

  //===--------------------------------------------------------------------===//
  // Types
  //===--------------------------------------------------------------------===//

  mlir_type_subclass(m, "PipelineType", mlirTypeIsAPipelinePipelineType,
                     mlirPipelinePipelineTypeGetTypeID)
      .def_classmethod(
          "get",
          [](nb::object cls, int32_t kind, int64_t stages,
             std::optional<MlirAttribute> producer,
             std::optional<MlirAttribute> consumer, int64_t txCount,
             std::optional<MlirAttribute> cluster, int32_t multicast,
             int64_t ctaGroup, int64_t length, MlirContext ctx) {
            DiagnosticCapture capture(ctx);
            MlirType t = mlirPipelinePipelineTypeGet(
                ctx, kind, stages, optionalAttr(producer),
                optionalAttr(consumer), txCount, optionalAttr(cluster),
                multicast, ctaGroup, length);
            capture.raiseIfNull(mlirTypeIsNull(t), "!pipeline.pipeline");
            return cls(t);
          },
          nb::arg("cls"), nb::arg("kind"), nb::arg("stages"),
          nb::arg("producer").none() = nb::none(),
          nb::arg("consumer").none() = nb::none(), nb::arg("tx_count") = 0,
          nb::arg("cluster").none() = nb::none(), nb::arg("multicast") = 0,
          nb::arg("cta_group") = 1, nb::arg("length") = 0,
          nb::arg("context").none() = nb::none())
      .def_property_readonly("kind_value", mlirPipelinePipelineTypeGetKind)
      .def_property_readonly("stages", mlirPipelinePipelineTypeGetStages)
      .def_property_readonly(
          "producer",
          [](MlirType t) { return attrOrNone(mlirPipelinePipelineTypeGetProducer(t)); })
      .def_property_readonly(
          "consumer",
          [](MlirType t) { return attrOrNone(mlirPipelinePipelineTypeGetConsumer(t)); })
      .def_property_readonly("tx_count", mlirPipelinePipelineTypeGetTxCount)
      .def_property_readonly(
          "cluster",
          [](MlirType t) { return attrOrNone(mlirPipelinePipelineTypeGetCluster(t)); })
      .def_property_readonly("multicast_value",
                             mlirPipelinePipelineTypeGetMulticast)
      .def_property_readonly("cta_group", mlirPipelinePipelineTypeGetCtaGroup)
      .def_property_readonly("length", mlirPipelinePipelineTypeGetLength)
      .def(
          "barrier_plan",
          [](MlirType t, int64_t blockThreads) {
            return barrierPlanDict(mlirPipelinePipelineTypeGetParams(t),
                                   blockThreads);
          },
          nb::arg("block_threads") = 0,
          "The type's barrier plan (KindTraits.h): init counts (None where "
          "they depend on an unknown block size), 2-CTA scales, multicast "
          "peers, signalling lanes and arrive targets.");

  mlir_type_subclass(m, "StateType", mlirTypeIsAPipelineStateType,
                     mlirPipelineStateTypeGetTypeID)
      .def_classmethod(
          "get",
          [](nb::object cls, int64_t stages, int32_t role, bool simple,
             MlirContext ctx) {
            DiagnosticCapture capture(ctx);
            MlirType t = mlirPipelineStateTypeGet(ctx, stages, role, simple);
            capture.raiseIfNull(mlirTypeIsNull(t), "!pipeline.state");
            return cls(t);
          },
          nb::arg("cls"), nb::arg("stages"), nb::arg("role"),
          nb::arg("simple") = false, nb::arg("context").none() = nb::none())
      .def_property_readonly("stages", mlirPipelineStateTypeGetStages)
      .def_property_readonly("role_value", mlirPipelineStateTypeGetRole)
      .def_property_readonly("simple", mlirPipelineStateTypeGetSimple);
}
