// Property 10: barrier storage of a known size (a shared global, through
// addressof and constant byte offsets) holds the pipeline's mbarriers.
// RUN: pipeline-opt --pipeline-verify-protocol -split-input-file -verify-diagnostics %s

!P = !pipeline.pipeline<async, stages = 4, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!ps = !pipeline.state<4, producer>

gpu.module @kernels {
  // expected-note @+1 {{storage declared here}}
  llvm.mlir.global internal @bars() {addr_space = 3 : i32, alignment = 8 : i64} : !llvm.array<4 x i64>
  gpu.func @too_small() kernel {
    %bars = llvm.mlir.addressof @bars : !llvm.ptr<3>
    // expected-error @+1 {{pipeline 'ab': barrier storage holds 32 bytes (4 mbarriers) but the pipeline needs 64 (8 mbarriers of 8 bytes: a full and an empty barrier per stage): the last barriers overlap the shared memory after it (make the storage 64 bytes)}}
    %p = pipeline.create storage(%bars : !llvm.ptr<3>) {name = "ab"} : !P
    %s = pipeline.state.make : !ps
    pipeline.producer.acquire %p, %s : !P, !ps
    pipeline.producer.commit %p, %s : !P, !ps
    pipeline.producer.tail %p, %s : !P, !ps
    gpu.return
  }
}

// -----

!P = !pipeline.pipeline<async, stages = 4, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!ps = !pipeline.state<4, producer>

// 80 bytes, the pipeline starting 16 bytes in: 64 left, enough (the twin).
gpu.module @kernels {
  llvm.mlir.global internal @bars() {addr_space = 3 : i32, alignment = 8 : i64} : !llvm.array<10 x i64>
  gpu.func @large_enough() kernel {
    %bars = llvm.mlir.addressof @bars : !llvm.ptr<3>
    %at = llvm.getelementptr %bars[16] : (!llvm.ptr<3>) -> !llvm.ptr<3>, i8
    %p = pipeline.create storage(%at : !llvm.ptr<3>) {name = "ab"} : !P
    %s = pipeline.state.make : !ps
    pipeline.producer.acquire %p, %s : !P, !ps
    pipeline.producer.commit %p, %s : !P, !ps
    pipeline.producer.tail %p, %s : !P, !ps
    gpu.return
  }
}

// -----

!P = !pipeline.pipeline<async, stages = 4, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!ps = !pipeline.state<4, producer>

// The same 80 bytes, the pipeline starting 24 bytes in: 56 left.
gpu.module @kernels {
  // expected-note @+1 {{storage declared here}}
  llvm.mlir.global internal @bars() {addr_space = 3 : i32, alignment = 8 : i64} : !llvm.array<10 x i64>
  gpu.func @offset_too_far() kernel {
    %bars = llvm.mlir.addressof @bars : !llvm.ptr<3>
    %at = llvm.getelementptr %bars[24] : (!llvm.ptr<3>) -> !llvm.ptr<3>, i8
    // expected-error @+1 {{barrier storage holds 56 bytes (7 mbarriers) but the pipeline needs 64}}
    %p = pipeline.create storage(%at : !llvm.ptr<3>) {name = "ab"} : !P
    %s = pipeline.state.make : !ps
    pipeline.producer.acquire %p, %s : !P, !ps
    pipeline.producer.commit %p, %s : !P, !ps
    pipeline.producer.tail %p, %s : !P, !ps
    gpu.return
  }
}
