// tcgen05 kinds need an sm_100 family arch-specific target.
// RUN: pipeline-opt %s --convert-pipeline-to-nvvm=chip=sm_90a --split-input-file --verify-diagnostics

!U = !pipeline.pipeline<tma_umma, stages = 2, producer = #pipeline.group<thread, 1>,
                        consumer = #pipeline.group<thread, 1>, tx_count = 1024>
gpu.module @m {
  gpu.func @k() kernel {
    // expected-error @+1 {{PipelineTmaUmma uses tcgen05 and needs sm_100a; chip is sm_90a}}
    %p = pipeline.create : !U
    gpu.return
  }
}

// -----

!U = !pipeline.pipeline<umma_async, stages = 2, producer = #pipeline.group<thread, 1>,
                        consumer = #pipeline.group<warp, 4>>
// The gpu.module's target decides over the pass option.
gpu.module @m [#nvvm.target<chip = "sm_100">] {
  gpu.func @k() kernel {
    // expected-error @+1 {{PipelineUmmaAsync uses tcgen05 and needs sm_100a; chip is sm_100}}
    %p = pipeline.create : !U
    gpu.return
  }
}

// -----

// A pipeline that comes in as an argument is checked where it is used.
!U = !pipeline.pipeline<async_umma, stages = 2, producer = #pipeline.group<warp, 4>,
                        consumer = #pipeline.group<thread, 1>>
func.func @arg(%p: !U) {
  %s = pipeline.state.make : !pipeline.state<2, consumer>
  // expected-error @+1 {{PipelineAsyncUmma uses tcgen05 and needs sm_100a; chip is sm_90a}}
  pipeline.consumer.wait %p, %s : !U, !pipeline.state<2, consumer>
  return
}

// -----

// sm_100a in the target: accepted even though the option says sm_90a.
!U = !pipeline.pipeline<tma_multi_consumers_async, stages = 2,
                        producer = #pipeline.group<thread, 1>,
                        consumer = #pipeline.group<thread, 2>, tx_count = 1024>
gpu.module @m [#nvvm.target<chip = "sm_100a">] {
  gpu.func @k() kernel {
    %p = pipeline.create : !U
    gpu.return
  }
}

// -----

// A chip older than the lowering's instructions: LLVM's instruction
// selection aborted on elect.sync ("Cannot select") before this check.
!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>,
                        consumer = #pipeline.group<thread, 32>>
// expected-error @+1 {{gpu.module @m targets chip sm_80, which the pipeline lowering does not support (its instructions need one of sm_90a, sm_100a, sm_101a, sm_103a)}}
gpu.module @m [#nvvm.target<chip = "sm_80">] {
  gpu.func @k() kernel {
    %p = pipeline.create : !P
    gpu.return
  }
}

// -----

// sm_90 without the arch-specific suffix: its default PTX 7.8 lacks
// elect.sync too.
!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>,
                        consumer = #pipeline.group<thread, 32>>
// expected-error @+1 {{gpu.module @m targets chip sm_90, which the pipeline lowering does not support}}
gpu.module @m [#nvvm.target<chip = "sm_90a">, #nvvm.target<chip = "sm_90">] {
  gpu.func @k() kernel {
    %p = pipeline.create : !P
    gpu.return
  }
}

// -----

// A 32-bit NVPTX triple: LLVM cannot select cp.async.bulk.tensor for it and
// aborted in pipeline-to-cubin (found by the long fuzz run 7).
!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>,
                        consumer = #pipeline.group<thread, 32>>
// expected-error @+1 {{gpu.module @m targets triple nvptx-nvidia-cuda (32-bit NVPTX), which the pipeline lowering does not support (TMA copies take 64-bit global addresses: use nvptx64-nvidia-cuda)}}
gpu.module @m [#nvvm.target<triple = "nvptx-nvidia-cuda", chip = "sm_100a">] {
  gpu.func @k() kernel {
    %p = pipeline.create : !P
    gpu.return
  }
}

// -----

// A gpu.module without pipeline IR keeps whatever target it has.
gpu.module @plain [#nvvm.target<chip = "sm_80">] {
  gpu.func @k() kernel {
    gpu.return
  }
}
