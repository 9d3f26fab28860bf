//===- PipelineInterfaces.td - pipeline op interfaces -------*- tablegen -*-===//

#ifndef PIPELINE_INTERFACES_TD
#define PIPELINE_INTERFACES_TD

include "mlir/IR/OpBase.td"

def Pipeline_StageVerbOpInterface : OpInterface<"StageVerbOpInterface"> {
  let description = [{
    An op that acts on one stage of a pipeline: it takes the
    `!pipeline.pipeline` and the `!pipeline.state` that names the stage
    (producer and consumer verbs, the copies bound to a stage, the order
    verbs). The verifier, the protocol checker and the lowering read the
    pipeline, the state and the verb's side through it instead of matching
    every op.
  }];
  let cppNamespace = "::mlir::pipeline";
  let methods = [
    InterfaceMethod<"The pipeline the verb acts on.",
      "::mlir::TypedValue<::mlir::pipeline::PipelineType>", "getPipeline">,
    InterfaceMethod<"The state that names the stage.",
      "::mlir::TypedValue<::mlir::pipeline::StateType>", "getState">,
    StaticInterfaceMethod<"Which verb the op is.",
      "::mlir::pipeline::StageVerb", "getStageVerb">,
    InterfaceMethod<"The pipeline's type.",
      "::mlir::pipeline::PipelineType", "getPipelineType", (ins), [{}], [{
        return $_op.getPipeline().getType();
      }]>,
    InterfaceMethod<"The state's type.",
      "::mlir::pipeline::StateType", "getStateType", (ins), [{}], [{
        return $_op.getState().getType();
      }]>,
    InterfaceMethod<[{The side the verb is for: producer, consumer, or
      producer_consumer for the order verbs (every group waits and arrives).}],
      "::mlir::pipeline::Role", "getVerbRole", (ins), [{}], [{
        return ::mlir::pipeline::getStageVerbRole(ConcreteOp::getStageVerb());
      }]>,
  ];
}

#endif // PIPELINE_INTERFACES_TD
