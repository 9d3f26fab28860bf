// Kernels the NVPTX backend or upstream GPU lowerings would crash on are
// rejected before lowering, naming what is wrong.
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
  // expected-error @+1 {{'llvm.mlir.global' op addr_space = 9 is not a PTX address space a global variable can live in (0, 1, 3, 4 or 5)}}
  llvm.mlir.global external @g(0 : i32) {addr_space = 9 : i32} : i32
}

// -----

// Spaces a pointer may point into but no global can live in (fuzz finding:
// "LLVM ERROR: Bad address space found while emitting PTX: 7" aborted).
gpu.module @m {
  // expected-error @+1 {{'llvm.mlir.global' op addr_space = 7 is not a PTX address space a global variable can live in (0, 1, 3, 4 or 5)}}
  llvm.mlir.global external @cluster_global(0 : i32) {addr_space = 7 : i32} : i32
}

// -----

gpu.module @m {
  // expected-error @+1 {{'llvm.mlir.global' op addr_space = 6 is not a PTX address space a global variable can live in}}
  llvm.mlir.global external @tmem_global(0 : i32) {addr_space = 6 : i32} : i32
}

// -----

gpu.module @m {
  // expected-error @+1 {{'llvm.mlir.global' op addr_space = 101 is not a PTX address space a global variable can live in}}
  llvm.mlir.global external @param_global(0 : i32) {addr_space = 101 : i32} : i32
}

// -----

// PTX cannot initialize shared or local variables (fuzz finding: "LLVM
// ERROR: initial value of 'x' is not allowed in addrspace(3)" aborted).
gpu.module @m {
  // expected-error @+1 {{'llvm.mlir.global' op addr_space = 3: PTX cannot initialize a shared variable; leave the initial value out (or make it zero)}}
  llvm.mlir.global external @shared_init(33 : i32) {addr_space = 3 : i32} : i32
}

// -----

gpu.module @m {
  // expected-error @+1 {{'llvm.mlir.global' op addr_space = 5: PTX cannot initialize a local variable}}
  llvm.mlir.global internal @local_init(1.5 : f32) {addr_space = 5 : i32} : f32
}

// -----

// An alignment that is not a power of two of at most 2^32 bytes (fuzz
// finding: alignment = -2^63 tripped an LLVM assertion in translation).
gpu.module @m {
  // expected-error @+1 {{'llvm.mlir.global' op alignment = -9223372036854775808 is not a power of two of at most 2^32 bytes}}
  llvm.mlir.global external @smem() {addr_space = 3 : i32, alignment = -9223372036854775808 : i64} : !llvm.array<0 x i8>
}

// -----

gpu.module @m {
  // expected-error @+1 {{'llvm.mlir.global' op alignment = 8589934592 is not a power of two of at most 2^32 bytes}}
  llvm.mlir.global external @smem2p33() {addr_space = 3 : i32, alignment = 8589934592 : i64} : !llvm.array<0 x i8>
}

// -----

gpu.module @m {
  llvm.mlir.global external @smem1024() {addr_space = 3 : i32, alignment = 1024 : i64} : !llvm.array<0 x i8>
}

// -----

// Zero or no initial value in shared memory, any value in global or
// constant memory: accepted.
gpu.module @m {
  llvm.mlir.global external @shared_zero(0 : i32) {addr_space = 3 : i32} : i32
  llvm.mlir.global internal @shared_none() {addr_space = 3 : i32} : !llvm.array<4 x i64>
  llvm.mlir.global internal @global_init(7 : i32) {addr_space = 1 : i32} : i32
  llvm.mlir.global internal constant @const_init(9 : i32) {addr_space = 4 : i32} : i32
}

// -----

gpu.module @m {
  // expected-error @+1 {{'gpu.func' op uses '!llvm.ptr<9>', a pointer into an address space PTX does not have}}
  gpu.func @bad_pointer(%p: !llvm.ptr<9>) kernel {
    gpu.return
  }
}

// -----

// Within the limits: accepted (tensor memory, address space 6, included).
gpu.module @m {
  gpu.func @ok(%p: !llvm.ptr<3>, %tmem: !llvm.ptr<6>) kernel attributes {known_block_size = array<i32: 32, 32, 1>, known_cluster_size = array<i32: 2, 2, 1>} {
    gpu.return
  }
}

// -----

// An instruction between the functions of a gpu.module passes the upstream
// verifiers, and LLVM IR translation crashed on it (fuzz finding).
gpu.module @m {
  gpu.func @k() kernel {
    gpu.return
  }
  // expected-error @+1 {{'nvvm.elect.sync' op is directly in the body of gpu.module @m: only functions and globals may be there (move it into a function)}}
  %e = nvvm.elect.sync -> i1
}

// -----

// A declaration that takes a pipeline: the conversion failed with "failed to
// legalize operation 'func.func'" (fuzz finding); now a clear error.
gpu.module @m {
  // expected-error @+1 {{'func.func' op is a declaration taking '!pipeline.pipeline<async, stages = 2, producer = <thread, 1>, consumer = <thread, 1>>': pipelines and states can only be passed to functions defined in the same gpu.module}}
  func.func private @external(!pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 1>>)
}

// -----

// A constant GEP index beyond 29 bits asserted in the upstream GEP folder
// (fuzz finding).
gpu.module @m {
  gpu.func @k(%p: !llvm.ptr<3>) kernel {
    // expected-error @+1 {{'llvm.getelementptr' op constant index 2147483647 does not fit the 29 bits the LLVM dialect keeps for it; pass it as a value}}
    %q = llvm.getelementptr %p[2147483647] : (!llvm.ptr<3>) -> !llvm.ptr<3>, i32
    gpu.return
  }
}
