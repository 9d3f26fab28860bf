// RUN: pipeline-opt %s -split-input-file -verify-diagnostics

// One case per verifier rule of the pipeline dialect, in the order of the
// verifiers: PipelineAttrs.cpp (attributes), PipelineTypes.cpp (the pipeline
// and state types), PipelineOps.cpp (ops against their types).

//===----------------------------------------------------------------------===//
// #pipeline.group and #pipeline.cluster
//===----------------------------------------------------------------------===//

// expected-error @+1 {{#pipeline.group: size must be positive, got 0}}
func.func private @group_size_zero() attributes {g = #pipeline.group<thread, 0>}

// -----

// expected-error @+1 {{#pipeline.group: size must be positive, got -4}}
func.func private @group_size_negative() attributes {g = #pipeline.group<warp, -4>}

// -----

// expected-error @+1 {{#pipeline.cluster: every mode of (V, M, N, L) must be positive, got (1, 0, 1, 1)}}
func.func private @cluster_mode_zero() attributes {c = #pipeline.cluster<1, 0, 1, 1>}

// -----

// expected-error @+1 {{#pipeline.cluster: V is the CTA-pair mode of 2-CTA MMA and must be 1 or 2, got 4}}
func.func private @cluster_v_too_large() attributes {c = #pipeline.cluster<4, 1, 1, 1>}

// -----

// expected-error @+1 {{#pipeline.cluster: a cluster holds at most 16 CTAs, this layout has 32}}
func.func private @cluster_too_large() attributes {c = #pipeline.cluster<1, 4, 4, 2>}

// -----

// Inside a pipeline type the attribute's error comes first, then the type
// parser names the parameter it could not build.
// expected-error @+2 {{#pipeline.cluster: a cluster holds at most 16 CTAs, this layout has 18}}
// expected-error @+1 {{failed to parse Pipeline_PipelineType parameter 'cluster'}}
func.func private @cluster_too_large_in_type(!pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 128>, tx_count = 1024, cluster = #pipeline.cluster<1, 3, 3, 2>>)

//===----------------------------------------------------------------------===//
// !pipeline.pipeline
//===----------------------------------------------------------------------===//

// -----

// expected-error @+1 {{!pipeline.pipeline<async> (PipelineAsync): stages must be positive, got 0}}
func.func private @stages_zero(!pipeline.pipeline<async, stages = 0, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 1>>)

// -----

// expected-error @+1 {{(PipelineTmaStore): stages must be positive, got -2}}
func.func private @stages_negative(!pipeline.pipeline<tma_store, stages = -2>)

// -----

// expected-error @+1 {{(PipelineAsync): needs a producer group (producer = #pipeline.group<...>)}}
func.func private @missing_producer(!pipeline.pipeline<async, stages = 2, consumer = #pipeline.group<thread, 1>>)

// -----

// expected-error @+1 {{(PipelineOrder): needs a producer group}}
func.func private @order_missing_producer(!pipeline.pipeline<order, stages = 2, length = 2>)

// -----

// expected-error @+1 {{(PipelineCpAsync): needs a consumer group (consumer = #pipeline.group<...>)}}
func.func private @missing_consumer(!pipeline.pipeline<cp_async, stages = 2, producer = #pipeline.group<thread, 32>>)

// -----

// expected-error @+1 {{(PipelineTmaStore): synchronizes through bulk groups and takes no producer or consumer group}}
func.func private @tma_store_with_group(!pipeline.pipeline<tma_store, stages = 2, producer = #pipeline.group<thread, 1>>)

// -----

// expected-error @+1 {{(PipelineOrder): has ordered groups, not a consumer group}}
func.func private @order_with_consumer(!pipeline.pipeline<order, stages = 2, producer = #pipeline.group<thread, 128>, consumer = #pipeline.group<thread, 128>, length = 2>)

// -----

// expected-error @+1 {{(PipelineTmaAsync): the producer side arrives through tma_load from one elected thread, so the producer agent must be 'thread', got 'warp'}}
func.func private @tma_producer_warp(!pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<warp, 1>, consumer = #pipeline.group<thread, 128>, tx_count = 1024>)

// -----

// expected-error @+1 {{(PipelineClcFetchAsync): the producer side arrives through clc_load from one elected thread, so the producer agent must be 'thread', got 'threadblock'}}
func.func private @clc_producer_block(!pipeline.pipeline<clc_fetch_async, stages = 1, producer = #pipeline.group<threadblock, 1>, consumer = #pipeline.group<thread, 128>, tx_count = 16>)

// -----

// expected-error @+1 {{(PipelineUmmaAsync): the producer side arrives through tcgen05_mma from one elected thread, so the producer agent must be 'thread', got 'warp'}}
func.func private @umma_producer_warp(!pipeline.pipeline<umma_async, stages = 2, producer = #pipeline.group<warp, 1>, consumer = #pipeline.group<warp, 4>>)

// -----

// expected-error @+1 {{(PipelineTmaUmma): the consumer side arrives through tcgen05_mma from one elected thread, so the consumer agent must be 'thread', got 'warp'}}
func.func private @umma_consumer_warp(!pipeline.pipeline<tma_umma, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<warp, 1>, tx_count = 1024>)

// -----

// expected-error @+1 {{(PipelineCpAsync): cp.async arrives only on the issuing CTA's barrier, so the producer agent cannot be 'cluster'}}
func.func private @cp_async_cluster_producer(!pipeline.pipeline<cp_async, stages = 2, producer = #pipeline.group<cluster, 1>, consumer = #pipeline.group<thread, 32>>)

// -----

// tx_count left out (0) of a kind filled by copies is derived from them
// (pipeline-derive-tx-count); a CLC response has no copy to derive from.
// expected-error @+1 {{(PipelineClcFetchAsync): TMA/CLC producers complete the full barrier by transaction bytes: tx_count must be positive, got 0}}
func.func private @clc_missing_tx(!pipeline.pipeline<clc_fetch_async, stages = 1, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 128>>)

// -----

// expected-error @+1 {{(PipelineTmaMultiConsumersAsync): TMA/CLC producers complete the full barrier by transaction bytes: tx_count must be positive (or left out, to be derived from the copies), got -8}}
func.func private @tma_negative_tx(!pipeline.pipeline<tma_multi_consumers_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 5>, tx_count = -8>)

// -----

// expected-error @+1 {{(PipelineClcFetchAsync): TMA/CLC producers complete the full barrier by transaction bytes: tx_count must be positive, got -16}}
func.func private @clc_negative_tx(!pipeline.pipeline<clc_fetch_async, stages = 1, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 128>, tx_count = -16>)

// -----

// expected-error @+1 {{(PipelineAsync): tx_count is only meaningful for TMA/CLC kinds, got 1024}}
func.func private @tx_on_async(!pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 1>, tx_count = 1024>)

// -----

// expected-error @+1 {{(PipelineTmaUmma): tx_count 1048576 exceeds the mbarrier limit of 1048575 bytes per phase}}
func.func private @tx_too_large(!pipeline.pipeline<tma_umma, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 1>, tx_count = 1048576>)

// -----

// expected-error @+1 {{(PipelineCpAsync): does not multicast; remove multicast = m}}
func.func private @multicast_on_cp_async(!pipeline.pipeline<cp_async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>, cluster = #pipeline.cluster<1, 2, 1, 1>, multicast = m>)

// -----

// expected-error @+1 {{(PipelineTmaAsync): multicast = n needs a cluster of more than one CTA}}
func.func private @multicast_without_cluster(!pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 128>, tx_count = 1024, multicast = n>)

// -----

// expected-error @+1 {{(PipelineTmaAsync): multicast = m runs along a cluster mode of extent 1}}
func.func private @multicast_m_extent_one(!pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 128>, tx_count = 1024, cluster = #pipeline.cluster<1, 1, 2, 1>, multicast = m>)

// -----

// expected-error @+1 {{(PipelineUmmaAsync): multicast = n runs along a cluster mode of extent 1}}
func.func private @multicast_n_extent_one(!pipeline.pipeline<umma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<warp, 4>, cluster = #pipeline.cluster<1, 2, 1, 1>, multicast = n>)

// -----

// expected-error @+1 {{(PipelineTmaUmma): multicast = mn runs along a cluster mode of extent 1}}
func.func private @multicast_mn_extent_one(!pipeline.pipeline<tma_umma, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 1>, tx_count = 1024, cluster = #pipeline.cluster<2, 1, 1, 1>, multicast = mn, cta_group = 2>)

// -----

// expected-error @+1 {{(PipelineTmaUmma): cta_group must be 1 or 2, got 4}}
func.func private @cta_group_four(!pipeline.pipeline<tma_umma, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 1>, tx_count = 1024, cta_group = 4>)

// -----

// expected-error @+1 {{(PipelineTmaAsync): cta_group = 2 is a tcgen05 (UMMA) feature}}
func.func private @cta_group_on_hopper_kind(!pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 128>, tx_count = 1024, cluster = #pipeline.cluster<2, 1, 1, 1>, cta_group = 2>)

// -----

// expected-error @+1 {{(PipelineAsyncUmma): cta_group = 2 (2-CTA MMA) needs a cluster layout with V = 2}}
func.func private @cta_group_two_without_cluster(!pipeline.pipeline<async_umma, stages = 2, producer = #pipeline.group<thread, 128>, consumer = #pipeline.group<thread, 1>, cta_group = 2>)

// -----

// expected-error @+1 {{(PipelineTmaUmma): cta_group = 2 (2-CTA MMA) needs a cluster layout with V = 2}}
func.func private @cta_group_two_with_v_one(!pipeline.pipeline<tma_umma, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 1>, tx_count = 1024, cluster = #pipeline.cluster<1, 2, 1, 1>, cta_group = 2>)

// -----

// expected-error @+1 {{(PipelineTmaUmma): a cluster layout with V = 2 is a 2-CTA MMA pair and needs cta_group = 2}}
func.func private @v_two_without_cta_group(!pipeline.pipeline<tma_umma, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 1>, tx_count = 1024, cluster = #pipeline.cluster<2, 1, 1, 1>>)

// -----

// expected-error @+1 {{(PipelineOrder): length (number of ordered groups) must be positive, got 0}}
func.func private @order_without_length(!pipeline.pipeline<order, stages = 2, producer = #pipeline.group<thread, 128>>)

// -----

// expected-error @+1 {{(PipelineAsync): length is only meaningful for order pipelines}}
func.func private @length_on_async(!pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 1>, length = 2>)

//===----------------------------------------------------------------------===//
// !pipeline.state
//===----------------------------------------------------------------------===//

// -----

// expected-error @+1 {{!pipeline.state: stages must be positive, got 0}}
func.func private @state_stages_zero(!pipeline.state<0, producer>)

// -----

// expected-error @+1 {{expected a role: producer, consumer or producer_consumer}}
func.func private @state_bad_role(!pipeline.state<2, reader>)

//===----------------------------------------------------------------------===//
// Creation and initialization
//===----------------------------------------------------------------------===//

// -----

func.func @storage_on_tma_store(%smem: !llvm.ptr<3>) {
  // expected-error @+1 {{'pipeline.create' op PipelineTmaStore owns no mbarriers and takes no barrier storage}}
  %p = pipeline.create storage(%smem : !llvm.ptr<3>) : !pipeline.pipeline<tma_store, stages = 2>
  return
}

// -----

func.func @empty_name() {
  // expected-error @+1 {{'pipeline.create' op name must not be empty}}
  %p = pipeline.create {name = ""} : !pipeline.pipeline<tma_store, stages = 2>
  return
}

// -----

func.func @init_arrive_cluster_zero() {
  // expected-error @+1 {{'pipeline.init_arrive' op attribute 'cluster_size' failed to satisfy constraint: 64-bit signless integer attribute whose minimum value is 1 whose maximum value is 16}}
  pipeline.init_arrive {cluster_size = 0}
  return
}

// -----

func.func @init_wait_cluster_too_large() {
  // expected-error @+1 {{'pipeline.init_wait' op attribute 'cluster_size' failed to satisfy constraint: 64-bit signless integer attribute whose minimum value is 1 whose maximum value is 16}}
  pipeline.init_wait {cluster_size = 17}
  return
}

//===----------------------------------------------------------------------===//
// pipeline.state.make
//===----------------------------------------------------------------------===//

// -----

func.func @simple_with_phase(%i: i32) {
  // expected-error @+1 {{'pipeline.state.make' op a simple state is one packed phase_index: give only 'index'}}
  %s = pipeline.state.make index %i phase %i : !pipeline.state<2, consumer, simple>
  return
}

// -----

func.func @index_without_phase(%i: i32) {
  // expected-error @+1 {{'pipeline.state.make' op give both 'index' and 'phase', or neither for the role's start state}}
  %s = pipeline.state.make index %i : !pipeline.state<2, consumer>
  return
}

// -----

func.func @count_without_index(%c: i32) {
  // expected-error @+1 {{'pipeline.state.make' op 'count' needs 'index' and 'phase'}}
  %s = pipeline.state.make count %c : !pipeline.state<2, producer>
  return
}

// -----

func.func @producer_consumer_start() {
  // expected-error @+1 {{'pipeline.state.make' op a producer_consumer state has no start state (producers start at phase 1, consumers at 0): give 'index' and 'phase', or use pipeline.order.state}}
  %s = pipeline.state.make : !pipeline.state<2, producer_consumer>
  return
}

//===----------------------------------------------------------------------===//
// Producer and consumer verbs
//===----------------------------------------------------------------------===//

// -----

!async = !pipeline.pipeline<async, stages = 4, producer = #pipeline.group<thread, 128>, consumer = #pipeline.group<thread, 128>>
func.func @state_stage_mismatch(%p: !async, %s: !pipeline.state<2, producer>) {
  // expected-error @+1 {{'pipeline.producer.acquire' op state has 2 stages but the pipeline has 4 (a state walks its own pipeline's ring)}}
  pipeline.producer.acquire %p, %s : !async, !pipeline.state<2, producer>
  return
}

// -----

!async = !pipeline.pipeline<async, stages = 4, producer = #pipeline.group<thread, 128>, consumer = #pipeline.group<thread, 128>>
func.func @consumer_state_stage_mismatch(%p: !async, %s: !pipeline.state<3, consumer>) {
  // expected-error @+1 {{'pipeline.consumer.release' op state has 3 stages but the pipeline has 4}}
  pipeline.consumer.release %p, %s : !async, !pipeline.state<3, consumer>
  return
}

// -----

!async = !pipeline.pipeline<async, stages = 4, producer = #pipeline.group<thread, 128>, consumer = #pipeline.group<thread, 128>>
func.func @producer_verb_consumer_state(%p: !async, %s: !pipeline.state<4, consumer>) {
  // expected-error @+1 {{'pipeline.producer.commit' op is a producer verb but the state is a consumer state (make it with make_pipeline_state(PipelineUserType.Producer, ...))}}
  pipeline.producer.commit %p, %s : !async, !pipeline.state<4, consumer>
  return
}

// -----

!async = !pipeline.pipeline<async, stages = 4, producer = #pipeline.group<thread, 128>, consumer = #pipeline.group<thread, 128>>
func.func @producer_tail_consumer_state(%p: !async, %s: !pipeline.state<4, consumer>) {
  // expected-error @+1 {{'pipeline.producer.tail' op is a producer verb but the state is a consumer state}}
  pipeline.producer.tail %p, %s : !async, !pipeline.state<4, consumer>
  return
}

// -----

!async = !pipeline.pipeline<async, stages = 4, producer = #pipeline.group<thread, 128>, consumer = #pipeline.group<thread, 128>>
func.func @consumer_verb_producer_state(%p: !async, %s: !pipeline.state<4, producer>) {
  // expected-error @+1 {{'pipeline.consumer.wait' op is a consumer verb but the state is a producer state (make it with make_pipeline_state(PipelineUserType.Consumer, ...))}}
  pipeline.consumer.wait %p, %s : !async, !pipeline.state<4, producer>
  return
}

// -----

!order = !pipeline.pipeline<order, stages = 2, producer = #pipeline.group<thread, 128>, length = 2>
func.func @producer_verb_on_order(%p: !order, %s: !pipeline.state<2, producer>) {
  // expected-error @+1 {{'pipeline.producer.acquire' op order pipelines use pipeline.order.wait / pipeline.order.arrive, not producer verbs}}
  pipeline.producer.acquire %p, %s : !order, !pipeline.state<2, producer>
  return
}

// -----

!order = !pipeline.pipeline<order, stages = 2, producer = #pipeline.group<thread, 128>, length = 2>
func.func @consumer_verb_on_order(%p: !order, %s: !pipeline.state<2, consumer>) {
  // expected-error @+1 {{'pipeline.consumer.release' op order pipelines use pipeline.order.wait / pipeline.order.arrive, not consumer verbs}}
  pipeline.consumer.release %p, %s : !order, !pipeline.state<2, consumer>
  return
}

// -----

!store = !pipeline.pipeline<tma_store, stages = 2>
func.func @consumer_wait_on_tma_store(%p: !store, %s: !pipeline.state<2, consumer>) {
  // expected-error @+1 {{'pipeline.consumer.wait' op PipelineTmaStore has no consumer side (completion is tracked by bulk groups)}}
  pipeline.consumer.wait %p, %s : !store, !pipeline.state<2, consumer>
  return
}

// -----

!store = !pipeline.pipeline<tma_store, stages = 2>
func.func @consumer_try_wait_on_tma_store(%p: !store, %s: !pipeline.state<2, consumer>) {
  // expected-error @+1 {{'pipeline.consumer.try_wait' op PipelineTmaStore has no consumer side}}
  %t = pipeline.consumer.try_wait %p, %s : !store, !pipeline.state<2, consumer>
  return
}

// -----

!async = !pipeline.pipeline<async, stages = 4, producer = #pipeline.group<thread, 128>, consumer = #pipeline.group<thread, 128>>
func.func @extra_tx_on_async(%p: !async, %s: !pipeline.state<4, producer>, %e: i32) {
  // expected-error @+1 {{'pipeline.producer.acquire' op extra_tx adds transaction bytes and needs a TMA/CLC pipeline, not PipelineAsync}}
  pipeline.producer.acquire %p, %s extra_tx %e : !async, !pipeline.state<4, producer>
  return
}

// -----

!store = !pipeline.pipeline<tma_store, stages = 2>
func.func @token_on_tma_store(%p: !store, %s: !pipeline.state<2, producer>, %t: i1) {
  // expected-error @+1 {{'pipeline.producer.acquire' op PipelineTmaStore has no try_acquire, so no token}}
  pipeline.producer.acquire %p, %s token %t : !store, !pipeline.state<2, producer>
  return
}

// -----

!store = !pipeline.pipeline<tma_store, stages = 2>
func.func @try_acquire_on_tma_store(%p: !store, %s: !pipeline.state<2, producer>) {
  // expected-error @+1 {{'pipeline.producer.try_acquire' op PipelineTmaStore has no try_acquire (bulk groups cannot be polled)}}
  %t = pipeline.producer.try_acquire %p, %s : !store, !pipeline.state<2, producer>
  return
}

// -----

!store = !pipeline.pipeline<tma_store, stages = 2>
func.func @barrier_of_tma_store(%p: !store, %s: !pipeline.state<2, producer>) {
  // expected-error @+1 {{'pipeline.producer.barrier' op PipelineTmaStore owns no mbarriers}}
  %b = pipeline.producer.barrier %p, %s : !store, !pipeline.state<2, producer>
  return
}

// -----

!tma = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 128>, tx_count = 1024>
func.func @elect_one_on_tma_commit(%p: !tma, %s: !pipeline.state<2, producer>) {
  // expected-error @+1 {{'pipeline.producer.commit' op elect_one turns per-thread mbarrier.arrive into one arrive per warp; this side signals through tma_load}}
  pipeline.producer.commit %p, %s {elect_one} : !tma, !pipeline.state<2, producer>
  return
}

// -----

!cp = !pipeline.pipeline<cp_async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
func.func @elect_one_on_cp_async_commit(%p: !cp, %s: !pipeline.state<2, producer>) {
  // expected-error @+1 {{'pipeline.producer.commit' op elect_one turns per-thread mbarrier.arrive into one arrive per warp; this side signals through cp_async}}
  pipeline.producer.commit %p, %s {elect_one} : !cp, !pipeline.state<2, producer>
  return
}

// -----

!umma = !pipeline.pipeline<tma_umma, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 1>, tx_count = 1024>
func.func @elect_one_on_umma_release(%p: !umma, %s: !pipeline.state<2, consumer>) {
  // expected-error @+1 {{'pipeline.consumer.release' op elect_one turns per-thread mbarrier.arrive into one arrive per warp; this side signals through tcgen05_mma}}
  pipeline.consumer.release %p, %s {elect_one} : !umma, !pipeline.state<2, consumer>
  return
}

// -----

!async = !pipeline.pipeline<async, stages = 4, producer = #pipeline.group<thread, 128>, consumer = #pipeline.group<warp, 4>>
func.func @syncwarp_without_elect(%p: !async, %s: !pipeline.state<4, consumer>) {
  // expected-error @+1 {{'pipeline.consumer.release' op syncwarp_before only makes sense with elect_one}}
  pipeline.consumer.release %p, %s {syncwarp_before} : !async, !pipeline.state<4, consumer>
  return
}

// -----

!multi = !pipeline.pipeline<tma_multi_consumers_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 5>, tx_count = 1024>
func.func @multi_consumer_release_without_op_type(%p: !multi, %s: !pipeline.state<2, consumer>) {
  // expected-error @+1 {{'pipeline.consumer.release' op PipelineTmaMultiConsumersAsync has MMA and async consumers: say which one releases with op_type = #pipeline.op_type<tcgen05_mma> or #pipeline.op_type<async_thread>}}
  pipeline.consumer.release %p, %s : !multi, !pipeline.state<2, consumer>
  return
}

// -----

!multi = !pipeline.pipeline<tma_multi_consumers_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 5>, tx_count = 1024>
func.func @multi_consumer_release_wrong_op_type(%p: !multi, %s: !pipeline.state<2, consumer>) {
  // expected-error @+1 {{'pipeline.consumer.release' op op_type must be tcgen05_mma or async_thread, got tma_load}}
  pipeline.consumer.release %p, %s {op_type = #pipeline.op_type<tma_load>} : !multi, !pipeline.state<2, consumer>
  return
}

// -----

!tma = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 128>, tx_count = 1024>
func.func @release_op_type_mismatch(%p: !tma, %s: !pipeline.state<2, consumer>) {
  // expected-error @+1 {{'pipeline.consumer.release' op PipelineTmaAsync consumers release through async_thread, not tcgen05_mma}}
  pipeline.consumer.release %p, %s {op_type = #pipeline.op_type<tcgen05_mma>} : !tma, !pipeline.state<2, consumer>
  return
}

//===----------------------------------------------------------------------===//
// Copies
//===----------------------------------------------------------------------===//

// -----

!async = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 128>, consumer = #pipeline.group<thread, 128>>
func.func @tma_load_on_async(%p: !async, %s: !pipeline.state<2, producer>, %d: !llvm.ptr, %dst: !llvm.ptr<3>, %x: i32) {
  // expected-error @+1 {{'pipeline.copy.tma_load' op binds a TMA load to a stage's full barrier, which needs a TMA pipeline, not PipelineAsync}}
  pipeline.copy.tma_load %p, %s, %d[%x] to %dst {bytes = 128} : !async, !pipeline.state<2, producer>, !llvm.ptr, !llvm.ptr<3>
  return
}

// -----

!clc = !pipeline.pipeline<clc_fetch_async, stages = 1, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 128>, tx_count = 16>
func.func @tma_load_on_clc(%p: !clc, %s: !pipeline.state<1, producer>, %d: !llvm.ptr, %dst: !llvm.ptr<3>, %x: i32) {
  // expected-error @+1 {{'pipeline.copy.tma_load' op binds a TMA load to a stage's full barrier, which needs a TMA pipeline, not PipelineClcFetchAsync}}
  pipeline.copy.tma_load %p, %s, %d[%x] to %dst {bytes = 16} : !clc, !pipeline.state<1, producer>, !llvm.ptr, !llvm.ptr<3>
  return
}

// -----

!cp = !pipeline.pipeline<cp_async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
func.func @bulk_copy_on_cp_async(%p: !cp, %s: !pipeline.state<2, producer>, %src: !llvm.ptr<1>, %dst: !llvm.ptr<3>, %n: i32) {
  // expected-error @+1 {{'pipeline.copy.bulk' op binds a bulk copy to a stage's full barrier, which needs a TMA pipeline, not PipelineCpAsync}}
  pipeline.copy.bulk %p, %s, %src to %dst, %n : !cp, !pipeline.state<2, producer>, !llvm.ptr<1>, !llvm.ptr<3>
  return
}

// -----

!tma = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 128>, tx_count = 1024>
func.func @bulk_copy_consumer_state(%p: !tma, %s: !pipeline.state<2, consumer>, %src: !llvm.ptr<1>, %dst: !llvm.ptr<3>, %n: i32) {
  // expected-error @+1 {{'pipeline.copy.bulk' op is a producer verb but the state is a consumer state}}
  pipeline.copy.bulk %p, %s, %src to %dst, %n : !tma, !pipeline.state<2, consumer>, !llvm.ptr<1>, !llvm.ptr<3>
  return
}

// -----

!tma = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 128>, tx_count = 1024>
func.func @tma_load_consumer_state(%p: !tma, %s: !pipeline.state<2, consumer>, %d: !llvm.ptr, %dst: !llvm.ptr<3>, %x: i32) {
  // expected-error @+1 {{'pipeline.copy.tma_load' op is a producer verb but the state is a consumer state}}
  pipeline.copy.tma_load %p, %s, %d[%x] to %dst {bytes = 1024} : !tma, !pipeline.state<2, consumer>, !llvm.ptr, !llvm.ptr<3>
  return
}

// -----

!tma = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 128>, tx_count = 1024>
func.func @multicast_mask_without_cluster(%p: !tma, %s: !pipeline.state<2, producer>, %d: !llvm.ptr, %dst: !llvm.ptr<3>, %x: i32, %m: i16) {
  // expected-error @+1 {{'pipeline.copy.tma_load' op multicast needs a pipeline with a cluster of more than one CTA}}
  pipeline.copy.tma_load %p, %s, %d[%x] to %dst multicast %m {bytes = 1024} : !tma, !pipeline.state<2, producer>, !llvm.ptr, !llvm.ptr<3>
  return
}

// -----

!tma = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 128>, tx_count = 1024, cluster = #pipeline.cluster<1, 2, 1, 1>>
func.func @multicast_mask_on_unicast_pipeline(%p: !tma, %s: !pipeline.state<2, producer>, %d: !llvm.ptr, %dst: !llvm.ptr<3>, %x: i32, %m: i16) {
  // expected-error @+1 {{'pipeline.copy.tma_load' op multicast needs a pipeline declared with multicast = m, n or mn, so that consumers release the stage to the CTAs that write into it}}
  pipeline.copy.tma_load %p, %s, %d[%x] to %dst multicast %m {bytes = 1024} : !tma, !pipeline.state<2, producer>, !llvm.ptr, !llvm.ptr<3>
  return
}

// -----

!tma = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 128>, tx_count = 1024>
func.func @tma_load_rank_zero(%p: !tma, %s: !pipeline.state<2, producer>, %d: !llvm.ptr, %dst: !llvm.ptr<3>) {
  // expected-error @+1 {{'pipeline.copy.tma_load' op TMA tensor copies take 1 to 5 coordinates, got 0}}
  pipeline.copy.tma_load %p, %s, %d[] to %dst {bytes = 1024} : !tma, !pipeline.state<2, producer>, !llvm.ptr, !llvm.ptr<3>
  return
}

// -----

!tma = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 128>, tx_count = 1024>
func.func @tma_load_rank_six(%p: !tma, %s: !pipeline.state<2, producer>, %d: !llvm.ptr, %dst: !llvm.ptr<3>, %x: i32) {
  // expected-error @+1 {{'pipeline.copy.tma_load' op TMA tensor copies take 1 to 5 coordinates, got 6}}
  pipeline.copy.tma_load %p, %s, %d[%x, %x, %x, %x, %x, %x] to %dst {bytes = 1024} : !tma, !pipeline.state<2, producer>, !llvm.ptr, !llvm.ptr<3>
  return
}

// -----

!tma = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 128>, tx_count = 1024>
func.func @tma_load_zero_bytes(%p: !tma, %s: !pipeline.state<2, producer>, %d: !llvm.ptr, %dst: !llvm.ptr<3>, %x: i32) {
  // expected-error @+1 {{'pipeline.copy.tma_load' op attribute 'bytes' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive}}
  pipeline.copy.tma_load %p, %s, %d[%x] to %dst {bytes = 0} : !tma, !pipeline.state<2, producer>, !llvm.ptr, !llvm.ptr<3>
  return
}

// -----

func.func @tma_store_rank_six(%d: !llvm.ptr, %src: !llvm.ptr<3>, %x: i32) {
  // expected-error @+1 {{'pipeline.copy.tma_store' op TMA tensor copies take 1 to 5 coordinates, got 6}}
  pipeline.copy.tma_store %d[%x, %x, %x, %x, %x, %x] from %src : !llvm.ptr, !llvm.ptr<3>
  return
}

// -----

func.func @tma_store_rank_zero(%d: !llvm.ptr, %src: !llvm.ptr<3>) {
  // expected-error @+1 {{'pipeline.copy.tma_store' op TMA tensor copies take 1 to 5 coordinates, got 0}}
  pipeline.copy.tma_store %d[] from %src : !llvm.ptr, !llvm.ptr<3>
  return
}

// -----

func.func @bulk_group_pending_too_large() {
  // expected-error @+1 {{'pipeline.bulk_group.wait' op attribute 'pending' failed to satisfy constraint: 64-bit signless integer attribute whose minimum value is 0 whose maximum value is 63}}
  pipeline.bulk_group.wait {pending = 64}
  return
}

// -----

func.func @bulk_group_pending_negative() {
  // expected-error @+1 {{'pipeline.bulk_group.wait' op attribute 'pending' failed to satisfy constraint: 64-bit signless integer attribute whose minimum value is 0 whose maximum value is 63}}
  pipeline.bulk_group.wait {pending = -1, read}
  return
}

//===----------------------------------------------------------------------===//
// PipelineOrder
//===----------------------------------------------------------------------===//

// -----

!async = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 128>, consumer = #pipeline.group<thread, 128>>
func.func @order_state_on_async(%p: !async, %g: i32) {
  // expected-error @+1 {{'pipeline.order.state' op needs an order pipeline (PipelineOrder), not PipelineAsync}}
  %s = pipeline.order.state %p, %g : !async -> !pipeline.state<2, producer_consumer>
  return
}

// -----

!order = !pipeline.pipeline<order, stages = 2, producer = #pipeline.group<thread, 128>, length = 2>
func.func @order_state_role(%p: !order, %g: i32) {
  // expected-error @+1 {{'pipeline.order.state' op an order state is a (non-simple) producer_consumer state, got '!pipeline.state<2, producer>'}}
  %s = pipeline.order.state %p, %g : !order -> !pipeline.state<2, producer>
  return
}

// -----

!order = !pipeline.pipeline<order, stages = 2, producer = #pipeline.group<thread, 128>, length = 2>
func.func @order_state_simple(%p: !order, %g: i32) {
  // expected-error @+1 {{'pipeline.order.state' op an order state is a (non-simple) producer_consumer state, got '!pipeline.state<2, producer_consumer, simple>'}}
  %s = pipeline.order.state %p, %g : !order -> !pipeline.state<2, producer_consumer, simple>
  return
}

// -----

!order = !pipeline.pipeline<order, stages = 2, producer = #pipeline.group<thread, 128>, length = 2>
func.func @order_state_depth(%p: !order, %g: i32) {
  // expected-error @+1 {{'pipeline.order.state' op state has 3 stages but the order pipeline has depth 2}}
  %s = pipeline.order.state %p, %g : !order -> !pipeline.state<3, producer_consumer>
  return
}

// -----

!order = !pipeline.pipeline<order, stages = 2, producer = #pipeline.group<thread, 128>, length = 2>
func.func @order_wait_role(%p: !order, %s: !pipeline.state<2, consumer>, %g: i32) {
  // expected-error @+1 {{'pipeline.order.wait' op an order state is a (non-simple) producer_consumer state, got '!pipeline.state<2, consumer>'}}
  pipeline.order.wait %p, %s, %g : !order, !pipeline.state<2, consumer>
  return
}

// -----

!order = !pipeline.pipeline<order, stages = 2, producer = #pipeline.group<thread, 128>, length = 2>
func.func @order_wait_depth(%p: !order, %s: !pipeline.state<4, producer_consumer>, %g: i32) {
  // expected-error @+1 {{'pipeline.order.wait' op state has 4 stages but the order pipeline has depth 2}}
  pipeline.order.wait %p, %s, %g : !order, !pipeline.state<4, producer_consumer>
  return
}

// -----

!async = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 128>, consumer = #pipeline.group<thread, 128>>
func.func @order_arrive_on_async(%p: !async, %s: !pipeline.state<2, producer_consumer>, %g: i32) {
  // expected-error @+1 {{'pipeline.order.arrive' op needs an order pipeline (PipelineOrder), not PipelineAsync}}
  %s1 = pipeline.order.arrive %p, %s, %g : !async, !pipeline.state<2, producer_consumer>
  return
}

//===----------------------------------------------------------------------===//
// NamedBarrier
//===----------------------------------------------------------------------===//

// -----

func.func @named_barrier_id_too_large() {
  // expected-error @+1 {{'pipeline.named_barrier.sync' op attribute 'barrier_id' failed to satisfy constraint: 64-bit signless integer attribute whose value is non-negative whose maximum value is 15}}
  pipeline.named_barrier.sync id = 16, threads = 128
  return
}

// -----

func.func @named_barrier_id_negative() {
  // expected-error @+1 {{'pipeline.named_barrier.arrive' op attribute 'barrier_id' failed to satisfy constraint: 64-bit signless integer attribute whose value is non-negative whose maximum value is 15}}
  pipeline.named_barrier.arrive id = -1, threads = 128
  return
}

// -----

func.func @named_barrier_threads_not_warp_multiple() {
  // expected-error @+1 {{'pipeline.named_barrier.arrive' op thread count must be a multiple of the warp size (32), got 48}}
  pipeline.named_barrier.arrive id = 1, threads = 48
  return
}

// -----

func.func @named_barrier_threads_too_many() {
  // expected-error @+1 {{'pipeline.named_barrier.sync' op attribute 'num_threads' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive whose maximum value is 1024}}
  pipeline.named_barrier.sync id = 1, threads = 2048 {unaligned}
  return
}

// -----

func.func @named_barrier_threads_zero() {
  // expected-error @+1 {{'pipeline.named_barrier.sync' op attribute 'num_threads' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive}}
  pipeline.named_barrier.sync id = 1, threads = 0
  return
}
