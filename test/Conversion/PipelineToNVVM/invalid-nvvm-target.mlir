// #nvvm.target values that upstream MLIR 22 or LLVM's NVPTX back end abort
// on are rejected before upstream's gpu.module verifier reads them
// (NVVMTargetCheck.h, docs/fuzzing.md): the parser-time verification of
// pipeline-opt runs after this check. Each split is a pipeline kernel module
// so that the fuzzer mutates it too.
// RUN: pipeline-opt %s --split-input-file --verify-diagnostics
// RUN: not pipeline-opt %s --split-input-file 2>&1 | FileCheck %s
// CHECK-NOT: Assertion
// CHECK-NOT: PLEASE submit

// A chip shorter than "sm_": StringRef::drop_front asserted (fuzzer, run 6).
// CHECK: error: invalid #nvvm.target<chip = "P4">: chip "P4" is not a processor of LLVM's NVPTX back end (expected sm_<version>[a|f] such as sm_90a or sm_100a)
// expected-error @+1 {{invalid #nvvm.target<chip = "P4">: chip "P4" is not a processor of LLVM's NVPTX back end}}
gpu.module @short_chip [#nvvm.target<chip = "P4">] {
  gpu.func @k() kernel {
    %p = pipeline.create : !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
    gpu.return
  }
}

// -----

// CHECK: error: invalid #nvvm.target<chip = "sm">: chip "sm" is not
// expected-error @+1 {{chip "sm" is not a processor of LLVM's NVPTX back end}}
gpu.module @two_chars [#nvvm.target<chip = "sm">] {
}

// -----

// Digits that do not parse: upstream read an uninitialized version, and the
// back end then aborted in instruction selection.
// CHECK: error: invalid #nvvm.target<chip = "sm_x">: chip "sm_x" is not
// expected-error @+1 {{chip "sm_x" is not a processor of LLVM's NVPTX back end}}
gpu.module @no_digits [#nvvm.target<chip = "sm_x">] {
}

// -----

// The shape of a chip, but not one the back end knows.
// CHECK: error: invalid #nvvm.target<chip = "sm_91">: chip "sm_91" is not
// expected-error @+1 {{chip "sm_91" is not a processor of LLVM's NVPTX back end}}
gpu.module @unknown_sm [#nvvm.target<chip = "sm_91">] {
}

// -----

// verifyTarget = false skips upstream's check, not the back end's use.
// CHECK: error: invalid #nvvm.target<chip = "abc", verifyTarget = false>: chip "abc" is not
// expected-error @+1 {{chip "abc" is not a processor of LLVM's NVPTX back end}}
gpu.module @unverified [#nvvm.target<chip = "abc", verifyTarget = false>] {
}

// -----

// Features that remove what the chip implies: instruction selection aborted.
// CHECK: error: invalid #nvvm.target<chip = "sm_90a", features = "-ptx88">: features "-ptx88": "-ptx88" is not "+ptx<version>"
// expected-error @+1 {{features "-ptx88": "-ptx88" is not "+ptx<version>" for a PTX ISA version LLVM's NVPTX back end knows}}
gpu.module @removed_feature [#nvvm.target<chip = "sm_90a", features = "-ptx88">] {
}

// -----

// CHECK: error: invalid #nvvm.target<chip = "sm_90a", features = "+sm_100a">: features "+sm_100a": "+sm_100a" is not
// expected-error @+1 {{features "+sm_100a": "+sm_100a" is not "+ptx<version>"}}
gpu.module @sm_feature [#nvvm.target<chip = "sm_90a", features = "+sm_100a">] {
}

// -----

// Another target's triple: its back end cannot select NVVM intrinsics.
// CHECK: error: invalid #nvvm.target<triple = "x86_64-unknown-linux-gnu", chip = "sm_90a">: triple "x86_64-unknown-linux-gnu" is not an NVPTX triple (expected nvptx64-nvidia-cuda)
// expected-error @+1 {{triple "x86_64-unknown-linux-gnu" is not an NVPTX triple}}
gpu.module @host_triple [#nvvm.target<triple = "x86_64-unknown-linux-gnu", chip = "sm_90a">] {
}

// -----

// ptxas-cmd-options is cast to an array when ptxas runs.
// CHECK: error: invalid #nvvm.target<chip = "sm_90a", flags = {"ptxas-cmd-options" = 1 : i64}>: flag ptxas-cmd-options must be an array of strings
// expected-error @+1 {{flag ptxas-cmd-options must be an array of strings}}
gpu.module @cmd_options [#nvvm.target<chip = "sm_90a", flags = {"ptxas-cmd-options" = 1}>] {
}

// -----

// Inside a gpu.binary object too (nothing verifies it there, but lowering
// the binary reads it).
// CHECK: error: invalid #nvvm.target<chip = "P4">: chip "P4" is not
// expected-error @+1 {{chip "P4" is not a processor of LLVM's NVPTX back end}}
gpu.binary @bin [#gpu.object<#nvvm.target<chip = "P4">, "">]

// -----

// Upstream's own rules still apply after ours (O is checked by the parser).
// CHECK: error: The optimization level must be a number between 0 and 3.
// expected-error @+1 {{The optimization level must be a number between 0 and 3.}}
gpu.module @o_level [#nvvm.target<O = 4, chip = "sm_90a">] {
}
