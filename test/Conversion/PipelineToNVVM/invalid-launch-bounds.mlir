// Kernels the NVPTX backend or upstream GPU lowerings would crash on are
// rejected before lowering, naming what is wrong (issue 15).
// RUN: pipeline-opt %s --convert-pipeline-to-nvvm --split-input-file --verify-diagnostics

gpu.module @m {
  // expected-error @+1 {{'gpu.func' op known_block_size exceeds the 1024 threads of a CTA}}
  gpu.func @too_many_threads() kernel attributes {known_block_size = array<i32: 2147483647, 1, 1>} {
    %t = gpu.thread_id x
    gpu.return
  }
}

// -----

gpu.module @m {
  // expected-error @+1 {{'gpu.func' op known_block_size entries must be positive, got 0}}
  gpu.func @zero_extent() kernel attributes {known_block_size = array<i32: 160, 0, 1>} {
    gpu.return
  }
}

// -----

gpu.module @m {
  // expected-error @+1 {{'gpu.func' op known_cluster_size exceeds the 16 CTAs of a cluster}}
  gpu.func @big_cluster() kernel attributes {known_cluster_size = array<i32: 8, 4, 1>} {
    gpu.return
  }
}

// -----

gpu.module @m {
  // expected-error @+1 {{'llvm.mlir.global' op addr_space = 9 is not a PTX address space (0, 1, 3, 4, 5, 7 or 101)}}
  llvm.mlir.global external @g(0 : i32) {addr_space = 9 : i32} : i32
}

// -----

gpu.module @m {
  // expected-error @+1 {{'gpu.func' op uses '!llvm.ptr<9>', a pointer into an address space PTX does not have}}
  gpu.func @bad_pointer(%p: !llvm.ptr<9>) kernel {
    gpu.return
  }
}

// -----

// Within the limits: accepted.
gpu.module @m {
  gpu.func @ok(%p: !llvm.ptr<3>) kernel attributes {known_block_size = array<i32: 32, 32, 1>, known_cluster_size = array<i32: 2, 2, 1>} {
    gpu.return
  }
}
