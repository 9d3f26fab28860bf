// #nvvm.target values the NVPTX back end knows pass pipeline-opt's target
// check (NVVMTargetCheck.h) and keep their meaning; bad pipeline-to-cubin or
// nvvm-attach-target options stop with a diagnostic before nvvm-attach-target
// builds the attribute (upstream asserts on O = 5 and aborts on chip "P4").
// RUN: pipeline-opt %s | FileCheck %s
// RUN: not pipeline-opt %s --pipeline-to-cubin="chip=P4 format=isa" 2>&1 | FileCheck %s --check-prefix=CHIP
// RUN: not pipeline-opt %s --pipeline-to-cubin="chip=sm_90a O=5 format=isa" 2>&1 | FileCheck %s --check-prefix=OLEVEL
// RUN: not pipeline-opt %s --pipeline-to-cubin="chip=sm_90a features=-ptx88 format=isa" 2>&1 | FileCheck %s --check-prefix=FEATURES
// RUN: not pipeline-opt %s --pipeline-to-cubin="chip=sm_100a features=+ptx80 format=isa" 2>&1 | FileCheck %s --check-prefix=LOWPTX
// RUN: not pipeline-opt %s --pipeline-to-cubin="chip=sm_80 format=isa" 2>&1 | FileCheck %s --check-prefix=OLDCHIP
// RUN: not pipeline-opt %s --pipeline-to-cubin="chip=sm_90a format=isa" 2>&1 | FileCheck %s --check-prefix=ATTACHED
// Upstream's own pass with the same options: checked by pipeline-opt before
// the pipeline runs (NVVMTargetAttr::get asserted on O = 5).
// RUN: not pipeline-opt %s --nvvm-attach-target="O=5" 2>&1 | FileCheck %s --check-prefix=ATTACH-O
// RUN: not pipeline-opt %s --pass-pipeline="builtin.module(nvvm-attach-target{chip=P4})" 2>&1 | FileCheck %s --check-prefix=ATTACH-CHIP

// CHECK: gpu.module @hopper [#nvvm.target<chip = "sm_90a", features = "+ptx88">]
// CHECK: gpu.module @blackwell_family [#nvvm.target<chip = "sm_100f", features = "+ptx88,+ptx80">]
// CHECK: gpu.module @oldest [#nvvm.target<O = 0, triple = "nvptx-nvidia-cuda", chip = "sm_20", verifyTarget = false>]
// CHECK: gpu.module @unverified [#nvvm.target<chip = "sm_90a", flags = {fast, "ptxas-cmd-options" = ["-v"]}, verifyTarget = false>]

// CHIP: error: pipeline-to-cubin options: chip "P4" is not a processor of LLVM's NVPTX back end
// OLEVEL: error: pipeline-to-cubin options: O = 5 is not an optimization level (0 to 3)
// FEATURES: error: pipeline-to-cubin options: features "-ptx88": "-ptx88" is not "+ptx<version>"
// LOWPTX: error: pipeline-to-cubin options: features "+ptx80" ask for PTX 8.0, below the PTX 8.6 that chip "sm_100a" needs
// OLDCHIP: error: pipeline-to-cubin options: chip "sm_80" is not one the pipeline lowering supports (sm_90a, sm_100a, sm_101a, sm_103a)
// ATTACH-O: pipeline-opt: nvvm-attach-target options: O = 5 is not an optimization level (0 to 3)
// ATTACH-CHIP: pipeline-opt: nvvm-attach-target options: chip "P4" is not a processor of LLVM's NVPTX back end
// pipeline-to-cubin compiles every target a gpu.module has: older ones stop
// LLVM's instruction selection, so they are refused whatever the module holds.
// ATTACHED-DAG: error: gpu.module @blackwell_family targets chip sm_100f, which the pipeline lowering does not support (its instructions need one of sm_90a, sm_100a, sm_101a, sm_103a)
// ATTACHED-DAG: error: gpu.module @oldest targets chip sm_20, which the pipeline lowering does not support

module attributes {gpu.container_module} {
  gpu.module @hopper [#nvvm.target<chip = "sm_90a", features = "+ptx88">] {
    gpu.func @k() kernel {
      %p = pipeline.create : !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
      gpu.return
    }
  }
  gpu.module @blackwell_family [#nvvm.target<chip = "sm_100f", features = "+ptx88,+ptx80">] {
  }
  gpu.module @oldest [#nvvm.target<O = 0, triple = "nvptx-nvidia-cuda", chip = "sm_20", verifyTarget = false>] {
  }
  gpu.module @unverified [#nvvm.target<chip = "sm_90a", flags = {fast, "ptxas-cmd-options" = ["-v"]}, verifyTarget = false>] {
  }
}
