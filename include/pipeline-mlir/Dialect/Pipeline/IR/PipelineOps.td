//===- PipelineOps.td - pipeline operations -----------------*- tablegen -*-===//
//
// One op per CuTe DSL pipeline verb. Barrier-touching ops read and write
// memory (the mbarriers), so no pass may reorder or drop them; state ops are
// pure arithmetic on (index, phase, count).
//
//===----------------------------------------------------------------------===//

#ifndef PIPELINE_OPS_TD
#define PIPELINE_OPS_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/CommonAttrConstraints.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Dialect/LLVMIR/LLVMOpBase.td"
include "pipeline-mlir/Dialect/Pipeline/IR/PipelineTypes.td"
include "pipeline-mlir/Dialect/Pipeline/IR/PipelineInterfaces.td"

def Pipeline_AnyPipeline : Type<CPred<"::llvm::isa<::mlir::pipeline::PipelineType>($_self)">,
                                "pipeline", "::mlir::pipeline::PipelineType">;
def Pipeline_AnyState : Type<CPred<"::llvm::isa<::mlir::pipeline::StateType>($_self)">,
                             "pipeline state", "::mlir::pipeline::StateType">;
def Pipeline_SharedPtr : LLVM_PointerInAddressSpace<3>;

def Pipeline_BarrierEffects : MemoryEffects<[MemRead, MemWrite]>;

// A cluster holds 1 to 16 CTAs (16 is the non-portable maximum, and the
// width of tcgen05 multicast masks). A class, so that each use is anonymous
// and the Python bindings build it as the I64Attr it is.
class Pipeline_ClusterSizeAttr
    : ConfinedAttr<DefaultValuedAttr<I64Attr, "1">,
                   [IntMinValue<1>, IntMaxValue<16>]>;

//===----------------------------------------------------------------------===//
// Creation and initialization
//===----------------------------------------------------------------------===//

def Pipeline_CreateOp : Pipeline_Op<"create", [Pipeline_BarrierEffects]> {
  let summary = "create a pipeline: allocate and initialize its mbarriers";
  let description = [{
    `PipelineXxx.create(...)`. Warp 0 elects one thread that initializes the
    `2 * stages` mbarriers (`mbarrier.init.shared.b64`) with the arrive counts
    implied by the type's cooperative groups, then `fence.mbarrier_init` and a
    CTA (`bar.sync 0`) or cluster barrier make them visible. With
    `defer_sync` the synchronization is left to `pipeline.init_arrive` /
    `pipeline.init_wait`.

    Barrier storage is either the given shared-memory pointer
    (`barrier_storage=` in CuTe DSL) or, without one, a shared global that the
    lowering creates. `name` labels the pipeline in diagnostics and watchdog
    messages.

    ```mlir
    %p = pipeline.create storage(%smem : !llvm.ptr<3>) {defer_sync, name = "ab"}
        : !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>,
                             consumer = #pipeline.group<thread, 32>>
    ```
    PTX ISA: [mbarrier.init](https://docs.nvidia.com/cuda/parallel-thread-execution/#parallel-synchronization-and-communication-instructions-mbarrier-init)
  }];
  let arguments = (ins Optional<Pipeline_SharedPtr>:$barrier_storage,
                       UnitAttr:$defer_sync,
                       OptionalAttr<StrAttr>:$name);
  let results = (outs Pipeline_AnyPipeline:$result);
  let assemblyFormat = [{
    (`storage` `(` $barrier_storage^ `:` type($barrier_storage) `)`)? attr-dict `:` type($result)
  }];
  let hasVerifier = 1;
}

def Pipeline_InitArriveOp : Pipeline_Op<"init_arrive", [Pipeline_BarrierEffects]> {
  let summary = "first half of the deferred post-init synchronization";
  let description = [{
    `pipeline_init_arrive(cta_layout_vmnk, is_relaxed)`: after every
    `pipeline.create {defer_sync}`, one arrive on the cluster barrier
    (`barrier.cluster.arrive[.relaxed]`) when `cluster_size > 1`, nothing for
    one CTA.

    ```mlir
    pipeline.init_arrive {cluster_size = 2, relaxed}
    ```
  }];
  let arguments = (ins Pipeline_ClusterSizeAttr<>:$cluster_size,
                       UnitAttr:$relaxed);
  let assemblyFormat = "attr-dict";
}

def Pipeline_InitWaitOp : Pipeline_Op<"init_wait", [Pipeline_BarrierEffects]> {
  let summary = "second half of the deferred post-init synchronization";
  let description = [{
    `pipeline_init_wait(cta_layout_vmnk)`: `barrier.cluster.wait` when
    `cluster_size > 1`, `bar.sync 0` for one CTA. Place it before the first
    use of any pipeline created with `defer_sync`.

    ```mlir
    pipeline.init_wait {cluster_size = 2}
    ```
  }];
  let arguments = (ins Pipeline_ClusterSizeAttr<>:$cluster_size);
  let assemblyFormat = "attr-dict";
}

//===----------------------------------------------------------------------===//
// Pipeline state
//===----------------------------------------------------------------------===//

def Pipeline_StateMakeOp : Pipeline_Op<"state.make", [Pure, AttrSizedOperandSegments]> {
  let summary = "make a pipeline state (make_pipeline_state / PipelineState(...))";
  let description = [{
    Without operands: the role's start state, `(index 0, phase 1, count 0)`
    for producers (buffers start empty, so the first acquire passes) and
    `(0, 0, 0)` for consumers. With `index` and `phase` (and optionally
    `count`): that state, as `PipelineState(stages, count, index, phase)` or
    the flash-attention `*_w_index_phase` forms. For the `simple` form the
    single `index` operand is the packed `phase_index`. A `producer_consumer`
    state has no start state (producers start at phase 1, consumers at 0), so
    it needs `index` and `phase` (or `pipeline.order.state`).

    ```mlir
    %ps = pipeline.state.make : !pipeline.state<4, producer>
    %cs = pipeline.state.make index %i phase %ph : !pipeline.state<4, consumer>
    ```
  }];
  let arguments = (ins Optional<I32>:$index, Optional<I32>:$phase,
                       Optional<I32>:$count);
  let results = (outs Pipeline_AnyState:$result);
  let assemblyFormat = [{
    (`index` $index^)? (`phase` $phase^)? (`count` $count^)? attr-dict `:` type($result)
  }];
  let hasVerifier = 1;
}

def Pipeline_StateAdvanceOp : Pipeline_Op<"state.advance",
    [Pure, AllTypesMatch<["state", "result"]>]> {
  let summary = "advance a state by one stage, or by a dynamic amount";
  let description = [{
    `state.advance()`: `index + 1`, `count + 1`, and on wrap-around
    `index = 0`, `phase ^= 1`. With `by %n`: `index += n`,
    `phase ^= (index / stages) % 2`, `index %= stages`, `count += n`.

    ```mlir
    %s1 = pipeline.state.advance %s0 : !pipeline.state<4, producer>
    %s2 = pipeline.state.advance %s1 by %n : !pipeline.state<4, producer>
    ```
  }];
  let arguments = (ins Pipeline_AnyState:$state, Optional<I32>:$amount);
  let results = (outs Pipeline_AnyState:$result);
  let assemblyFormat = "$state (`by` $amount^)? attr-dict `:` type($state)";
  // Advancing by a constant 0 is the identity.
  let hasFolder = 1;
}

class Pipeline_StateFieldOp<string fieldName>
    : Pipeline_Op<"state." # fieldName, [Pure]> {
  let summary = "read the " # fieldName # " of a pipeline state";
  let description = "Returns the state's `" # fieldName # [{` as i32.

    ```mlir
    %v = pipeline.state.}] # fieldName # [{ %s : !pipeline.state<4, consumer>
    ```
  }];
  let arguments = (ins Pipeline_AnyState:$state);
  let results = (outs I32:$result);
  let assemblyFormat = "$state attr-dict `:` type($state)";
  // Reading a field of a non-simple `pipeline.state.make` that was given the
  // field as an operand yields that operand.
  let hasFolder = 1;
}
def Pipeline_StateIndexOp : Pipeline_StateFieldOp<"index">;
def Pipeline_StatePhaseOp : Pipeline_StateFieldOp<"phase">;
def Pipeline_StateCountOp : Pipeline_StateFieldOp<"count">;

//===----------------------------------------------------------------------===//
// Producer verbs
//===----------------------------------------------------------------------===//

// An op on one stage of a pipeline; `verb` is its StageVerb.
class Pipeline_StageOp<string mnemonic, string verb, list<Trait> traits = []>
    : Pipeline_Op<mnemonic,
                  !listconcat([Pipeline_StageVerbOpInterface], traits)> {
  let extraClassDeclaration = [{
    /// The verb this op is (StageVerbOpInterface).
    static ::mlir::pipeline::StageVerb getStageVerb() {
      return ::mlir::pipeline::StageVerb::}] # verb # [{;
    }
  }];
  let hasVerifier = 1;
}

// A stage verb that touches the stage's barriers.
class Pipeline_VerbOp<string mnemonic, string verb, list<Trait> traits = []>
    : Pipeline_StageOp<mnemonic, verb,
                       !listconcat([Pipeline_BarrierEffects], traits)>;

def Pipeline_ProducerAcquireOp : Pipeline_VerbOp<"producer.acquire", "Acquire", [AttrSizedOperandSegments]> {
  let summary = "wait until the stage's buffer is empty (producer_acquire)";
  let description = [{
    Waits on `empty[index]` with the state's phase
    (`mbarrier.try_wait.parity` loop, suspend hint 10,000,000 ns), skipped
    when `token` (from `producer.try_acquire`) is true. For TMA kinds the
    elected thread then arms `full[index]` with
    `mbarrier.arrive.expect_tx(tx_count + extra_tx)`; for UMMA kinds only in
    the leader CTA. For `tma_store` it is `cp.async.bulk.wait_group.read
    stages-1`.

    ```mlir
    pipeline.producer.acquire %p, %s token %t extra_tx %e : !pipeline.pipeline<...>, !pipeline.state<...>
    ```
    PTX ISA: [mbarrier.try_wait](https://docs.nvidia.com/cuda/parallel-thread-execution/#parallel-synchronization-and-communication-instructions-mbarrier-test-wait-try-wait)
  }];
  let arguments = (ins Pipeline_AnyPipeline:$pipeline, Pipeline_AnyState:$state,
                       Optional<I1>:$token, Optional<I32>:$extra_tx);
  let assemblyFormat = [{
    $pipeline `,` $state (`token` $token^)? (`extra_tx` $extra_tx^)? attr-dict
    `:` type($pipeline) `,` type($state)
  }];
}

def Pipeline_ProducerTryAcquireOp : Pipeline_VerbOp<"producer.try_acquire", "TryAcquire"> {
  let summary = "test once whether the stage's buffer is empty (producer_try_acquire)";
  let description = [{
    One `mbarrier.try_wait.parity` on `empty[index]`; the i1 result is a token
    for `producer.acquire ... token`.

    ```mlir
    %t = pipeline.producer.try_acquire %p, %s : !pipeline.pipeline<...>, !pipeline.state<...>
    ```
  }];
  let arguments = (ins Pipeline_AnyPipeline:$pipeline, Pipeline_AnyState:$state);
  let results = (outs I1:$token);
  let assemblyFormat = "$pipeline `,` $state attr-dict `:` type($pipeline) `,` type($state)";
}

def Pipeline_ProducerCommitOp : Pipeline_VerbOp<"producer.commit", "Commit"> {
  let summary = "signal that the stage's buffer is full (producer_commit)";
  let description = [{
    Async kinds: `mbarrier.arrive` on `full[index]` (one per warp with
    `elect_one`, after `__syncwarp` with `syncwarp_before`); cp.async:
    `cp.async.mbarrier.arrive.noinc`; TMA kinds: nothing (the copy's
    complete_tx completes the phase); UMMA producer: elected
    `tcgen05.commit` with the multicast mask and CTA group; `tma_store`:
    `cp.async.bulk.commit_group`.

    ```mlir
    pipeline.producer.commit %p, %s : !pipeline.pipeline<...>, !pipeline.state<...>
    ```
  }];
  let arguments = (ins Pipeline_AnyPipeline:$pipeline, Pipeline_AnyState:$state,
                       UnitAttr:$elect_one, UnitAttr:$syncwarp_before);
  let assemblyFormat = "$pipeline `,` $state attr-dict `:` type($pipeline) `,` type($state)";
}

def Pipeline_ProducerTailOp : Pipeline_VerbOp<"producer.tail", "Tail"> {
  let summary = "wait until every in-flight buffer was released (producer_tail)";
  let description = [{
    Acquires each of the `stages` stages in turn starting at `state`, so that
    no consumer arrive is still in flight towards this CTA's barriers when it
    exits. `umma_async`: leader CTA only. `tma_store`:
    `cp.async.bulk.wait_group.read 0`.

    ```mlir
    pipeline.producer.tail %p, %s : !pipeline.pipeline<...>, !pipeline.state<...>
    ```
  }];
  let arguments = (ins Pipeline_AnyPipeline:$pipeline, Pipeline_AnyState:$state);
  let assemblyFormat = "$pipeline `,` $state attr-dict `:` type($pipeline) `,` type($state)";
}

def Pipeline_ProducerBarrierOp : Pipeline_StageOp<"producer.barrier", "Barrier", [Pure]> {
  let summary = "the stage's full barrier, for a TMA copy (producer_get_barrier)";
  let description = [{
    Returns the shared-memory address of `full[index]`.

    ```mlir
    %bar = pipeline.producer.barrier %p, %s : !pipeline.pipeline<...>, !pipeline.state<...>
    ```
  }];
  let arguments = (ins Pipeline_AnyPipeline:$pipeline, Pipeline_AnyState:$state);
  let results = (outs Pipeline_SharedPtr:$barrier);
  let assemblyFormat = "$pipeline `,` $state attr-dict `:` type($pipeline) `,` type($state)";
  }

//===----------------------------------------------------------------------===//
// Consumer verbs
//===----------------------------------------------------------------------===//

def Pipeline_ConsumerWaitOp : Pipeline_VerbOp<"consumer.wait", "Wait"> {
  let summary = "wait until the stage's buffer is full (consumer_wait)";
  let description = [{
    `mbarrier.try_wait.parity` loop on `full[index]` with the state's phase,
    skipped when `token` is true.

    ```mlir
    pipeline.consumer.wait %p, %s : !pipeline.pipeline<...>, !pipeline.state<...>
    ```
  }];
  let arguments = (ins Pipeline_AnyPipeline:$pipeline, Pipeline_AnyState:$state,
                       Optional<I1>:$token);
  let assemblyFormat = [{
    $pipeline `,` $state (`token` $token^)? attr-dict `:` type($pipeline) `,` type($state)
  }];
}

def Pipeline_ConsumerTryWaitOp : Pipeline_VerbOp<"consumer.try_wait", "TryWait"> {
  let summary = "test once whether the stage's buffer is full (consumer_try_wait)";
  let description = [{
    ```mlir
    %t = pipeline.consumer.try_wait %p, %s : !pipeline.pipeline<...>, !pipeline.state<...>
    ```
  }];
  let arguments = (ins Pipeline_AnyPipeline:$pipeline, Pipeline_AnyState:$state);
  let results = (outs I1:$token);
  let assemblyFormat = "$pipeline `,` $state attr-dict `:` type($pipeline) `,` type($state)";
}

def Pipeline_ConsumerReleaseOp : Pipeline_VerbOp<"consumer.release", "Release"> {
  let summary = "signal that the stage's buffer may be refilled (consumer_release)";
  let description = [{
    Async consumers: `mbarrier.arrive` on `empty[index]`; with a cluster,
    `tma_async` arrives from the signaling lanes (`lane < cluster_size`) on
    CTA `lane % cluster_size` through `mapa` and `shared::cluster`. MMA
    consumers: elected `tcgen05.commit` with the consumer multicast mask.
    `tma_multi_consumers_async` has both kinds of consumer, so its releases
    name theirs with `op_type = #pipeline.op_type<tcgen05_mma>` or
    `#pipeline.op_type<async_thread>`.

    ```mlir
    pipeline.consumer.release %p, %s : !pipeline.pipeline<...>, !pipeline.state<...>
    ```
  }];
  let arguments = (ins Pipeline_AnyPipeline:$pipeline, Pipeline_AnyState:$state,
                       UnitAttr:$elect_one, UnitAttr:$syncwarp_before,
                       OptionalAttr<Pipeline_OpTypeAttr>:$op_type);
  let assemblyFormat = "$pipeline `,` $state attr-dict `:` type($pipeline) `,` type($state)";
}

//===----------------------------------------------------------------------===//
// Copies bound to a pipeline stage
//===----------------------------------------------------------------------===//

def Pipeline_TmaLoadOp : Pipeline_VerbOp<"copy.tma_load", "Copy", [AttrSizedOperandSegments]> {
  let summary = "TMA tensor load into a stage, completing on its full barrier";
  let description = [{
    `cp.async.bulk.tensor.Nd.shared::cluster.global.mbarrier::complete_tx::bytes`
    from the tensor map `desc` at `coordinates` into `dst`, signalling the
    state's full barrier; with `multicast` the 16-bit CTA mask of the
    `.multicast::cluster` form, allowed only when the pipeline type declares
    `multicast = m|n|mn` (its consumers then release the stage to every CTA
    that writes into it). `bytes` is the box size in bytes, which the
    protocol checker compares against the pipeline's `tx_count`.

    ```mlir
    pipeline.copy.tma_load %p, %s, %desc[%x, %y] to %dst {bytes = 4096 : i64}
        : !pipeline.pipeline<...>, !pipeline.state<...>, !llvm.ptr, !llvm.ptr<3>
    ```
    PTX ISA: [cp.async.bulk.tensor](https://docs.nvidia.com/cuda/parallel-thread-execution/#data-movement-and-conversion-instructions-cp-async-bulk-tensor)
  }];
  let arguments = (ins Pipeline_AnyPipeline:$pipeline, Pipeline_AnyState:$state,
                       LLVM_AnyPointer:$desc, Variadic<I32>:$coordinates,
                       Pipeline_SharedPtr:$dst, Optional<I16>:$multicast_mask,
                       ConfinedAttr<I64Attr, [IntPositive]>:$bytes);
  let assemblyFormat = [{
    $pipeline `,` $state `,` $desc `[` $coordinates `]` `to` $dst
    (`multicast` $multicast_mask^)? attr-dict
    `:` type($pipeline) `,` type($state) `,` type($desc) `,` type($dst)
  }];
}

def Pipeline_BulkLoadOp : Pipeline_VerbOp<"copy.bulk", "Copy"> {
  let summary = "non-tensor bulk copy into a stage, completing on its full barrier";
  let description = [{
    `cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes` of
    `size` bytes (a multiple of 16) from global `src` to shared `dst`.

    ```mlir
    pipeline.copy.bulk %p, %s, %src to %dst, %size
        : !pipeline.pipeline<...>, !pipeline.state<...>, !llvm.ptr<1>, !llvm.ptr<3>
    ```
  }];
  let arguments = (ins Pipeline_AnyPipeline:$pipeline, Pipeline_AnyState:$state,
                       LLVM_PointerInAddressSpace<1>:$src, Pipeline_SharedPtr:$dst,
                       I32:$size);
  let assemblyFormat = [{
    $pipeline `,` $state `,` $src `to` $dst `,` $size attr-dict
    `:` type($pipeline) `,` type($state) `,` type($src) `,` type($dst)
  }];
}

def Pipeline_TmaStoreOp : Pipeline_Op<"copy.tma_store", [Pipeline_BarrierEffects]> {
  let summary = "TMA tensor store from shared memory (joins the open bulk group)";
  let description = [{
    `cp.async.bulk.tensor.Nd.global.shared::cta.bulk_group`. Completion is
    tracked by bulk groups (`pipeline.bulk_group.*` or the `tma_store`
    pipeline's producer verbs), not by mbarriers.

    ```mlir
    pipeline.copy.tma_store %desc[%x, %y] from %src : !llvm.ptr, !llvm.ptr<3>
    ```
  }];
  let arguments = (ins LLVM_AnyPointer:$desc, Variadic<I32>:$coordinates,
                       Pipeline_SharedPtr:$src);
  let assemblyFormat = [{
    $desc `[` $coordinates `]` `from` $src attr-dict `:` type($desc) `,` type($src)
  }];
  let hasVerifier = 1;
}

def Pipeline_BulkGroupCommitOp : Pipeline_Op<"bulk_group.commit", [Pipeline_BarrierEffects]> {
  let summary = "close the open bulk async-group (TmaStoreFence / tma_store_arrive)";
  let description = [{
    `cp.async.bulk.commit_group`.

    ```mlir
    pipeline.bulk_group.commit
    ```
  }];
  let assemblyFormat = "attr-dict";
}

def Pipeline_BulkGroupWaitOp : Pipeline_Op<"bulk_group.wait", [Pipeline_BarrierEffects]> {
  let summary = "wait until at most `pending` bulk async-groups are in flight";
  let description = [{
    `cp.async.bulk.wait_group[.read] pending`. With `read`, only the reads of
    the source shared memory must have finished (the buffer may be reused).

    ```mlir
    pipeline.bulk_group.wait {pending = 1 : i64, read}
    ```
  }];
  // The PTX immediate is a small non-negative integer.
  let arguments = (ins ConfinedAttr<DefaultValuedAttr<I64Attr, "0">,
                                    [IntMinValue<0>, IntMaxValue<63>]>:$pending,
                       UnitAttr:$read);
  let assemblyFormat = "attr-dict";
}

//===----------------------------------------------------------------------===//
// PipelineOrder
//===----------------------------------------------------------------------===//

def Pipeline_OrderStateOp : Pipeline_Op<"order.state", [Pure]> {
  let summary = "the start state of one group of a PipelineOrder";
  let description = [{
    `(index 0, phase = group_id == 0, count 0)` over `depth` stages: group 0
    goes first, every other group waits for its predecessor. Order states
    are non-simple `producer_consumer` states, since every group both waits
    and arrives.

    ```mlir
    %s = pipeline.order.state %p, %gid : !pipeline.pipeline<order, ...> -> !pipeline.state<2, producer_consumer>
    ```
  }];
  let arguments = (ins Pipeline_AnyPipeline:$pipeline, I32:$group_id);
  let results = (outs Pipeline_AnyState:$result);
  let assemblyFormat = "$pipeline `,` $group_id attr-dict `:` type($pipeline) `->` type($result)";
  let hasVerifier = 1;
}

def Pipeline_OrderWaitOp : Pipeline_VerbOp<"order.wait", "OrderWait"> {
  let summary = "wait for this group's turn (PipelineOrder.wait)";
  let description = [{
    Waits on barrier `index * length + group_id` with the state's phase.

    ```mlir
    pipeline.order.wait %p, %s, %gid : !pipeline.pipeline<order, ...>, !pipeline.state<2, producer_consumer>
    ```
  }];
  let arguments = (ins Pipeline_AnyPipeline:$pipeline, Pipeline_AnyState:$state,
                       I32:$group_id);
  let assemblyFormat = [{
    $pipeline `,` $state `,` $group_id attr-dict `:` type($pipeline) `,` type($state)
  }];
}

def Pipeline_OrderArriveOp : Pipeline_VerbOp<"order.arrive", "OrderArrive",
    [AllTypesMatch<["state", "result"]>]> {
  let summary = "hand the turn to the next group and advance (PipelineOrder.arrive)";
  let description = [{
    Arrives on barrier `index * length + (group_id + 1) % length`, then
    returns the advanced state.

    ```mlir
    %s1 = pipeline.order.arrive %p, %s, %gid : !pipeline.pipeline<order, ...>, !pipeline.state<2, producer_consumer>
    ```
  }];
  let arguments = (ins Pipeline_AnyPipeline:$pipeline, Pipeline_AnyState:$state,
                       I32:$group_id);
  let results = (outs Pipeline_AnyState:$result);
  let assemblyFormat = [{
    $pipeline `,` $state `,` $group_id attr-dict `:` type($pipeline) `,` type($state)
  }];
}

//===----------------------------------------------------------------------===//
// NamedBarrier
//===----------------------------------------------------------------------===//

class Pipeline_NamedBarrierOp<string mnemonic>
    : Pipeline_Op<"named_barrier." # mnemonic, [Pipeline_BarrierEffects]> {
  // 16 hardware barriers per CTA; at most a CTA's 1024 threads.
  let arguments = (ins ConfinedAttr<I64Attr, [IntNonNegative, IntMaxValue<15>]>:$barrier_id,
                       ConfinedAttr<I64Attr, [IntPositive, IntMaxValue<1024>]>:$num_threads,
                       Optional<I32>:$index, UnitAttr:$unaligned);
  let assemblyFormat = [{
    `id` `=` $barrier_id `,` `threads` `=` $num_threads (`index` $index^)? attr-dict
  }];
  let hasVerifier = 1;
}

def Pipeline_NamedBarrierArriveOp : Pipeline_NamedBarrierOp<"arrive"> {
  let summary = "arrive on a named CTA barrier without waiting (NamedBarrier.arrive)";
  let description = [{
    `bar.arrive id, threads` (`barrier.cta.arrive` when `unaligned`). With
    `index` the barrier is `id + index` (`arrive_w_index`). Ids 0..15 exist;
    id 0 is the one `__syncthreads` uses.

    ```mlir
    pipeline.named_barrier.arrive id = 1, threads = 256
    ```
    PTX ISA: [bar, barrier](https://docs.nvidia.com/cuda/parallel-thread-execution/#parallel-synchronization-and-communication-instructions-bar)
  }];
}

def Pipeline_NamedBarrierSyncOp : Pipeline_NamedBarrierOp<"sync"> {
  let summary = "arrive on a named CTA barrier and wait (NamedBarrier.arrive_and_wait / sync)";
  let description = [{
    `bar.sync id, threads` (`barrier.cta.sync` when `unaligned`).

    ```mlir
    pipeline.named_barrier.sync id = 1, threads = 256
    ```
  }];
}

#endif // PIPELINE_OPS_TD
