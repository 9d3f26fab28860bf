// RUN: pipeline-opt %s -split-input-file -verify-diagnostics

// Limits that no GPU can exceed (fuzzed inputs used to pass the
// verifier and then exhaust memory or crash the lowering). Barriers live in
// shared memory: 2 * stages mbarriers of 8 bytes must fit in 227 KiB, so at
// most 14528 stages; arrival counts are 20 bits.

// The largest stage count whose barriers fit is accepted.
func.func private @stages_max(!pipeline.pipeline<async, stages = 14528, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 1>>)

// -----

// expected-error @+1 {{(PipelineAsync): stages = 14529 needs 29058 mbarriers of 8 bytes, more than the 232448 bytes of shared memory of a CTA (at most 14528 stages)}}
func.func private @stages_too_many(!pipeline.pipeline<async, stages = 14529, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 1>>)

// -----

// expected-error @+1 {{stages = 2147483647 needs 4294967294 mbarriers}}
func.func private @stages_int_max(!pipeline.pipeline<tma_async, stages = 2147483647, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 1>, tx_count = 64>)

// -----

// expected-error @+1 {{(PipelineOrder): stages = 4096 x length = 8 mbarriers of 8 bytes do not fit in the 232448 bytes of shared memory of a CTA}}
func.func private @order_too_many(!pipeline.pipeline<order, stages = 4096, producer = #pipeline.group<thread, 128>, length = 8>)

// -----

// expected-error @+1 {{!pipeline.state: stages = 9223372036854775807 exceeds the 14528 stages whose barriers fit in shared memory}}
func.func private @state_too_many(!pipeline.state<9223372036854775807, consumer>)

// -----

// expected-error @+1 {{#pipeline.group<warp, 32768> implies more than 1048575 arrivals, the mbarrier arrival-count limit}}
func.func private @group_too_many_warps() attributes {g = #pipeline.group<warp, 32768>}

// -----

// expected-error @+1 {{#pipeline.group<thread, 1048576> implies more than 1048575 arrivals}}
func.func private @group_too_many_threads() attributes {g = #pipeline.group<thread, 1048576>}

// -----

// Pipeline ops lower to device code: outside a function they would land in
// the module body (found by fuzzing: the lowering then failed blaming 'gpu.module').
gpu.module @kernels {
  // expected-error @+1 {{'pipeline.create' op must be nested in a function (func.func, gpu.func, llvm.func): it lowers to device code, which a module body cannot hold}}
  %p = pipeline.create : !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 1>>
}

// -----

// expected-error @+1 {{'pipeline.state.make' op must be nested in a function}}
%s = pipeline.state.make : !pipeline.state<2, producer>
