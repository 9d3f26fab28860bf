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

// -----

!P = !pipeline.pipeline<async, stages = 4, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!ps = !pipeline.state<4, producer>

// Two pipelines on one barrier array (a copied create line): they share
// mbarriers, each completing the other's phases.
gpu.module @kernels {
  // expected-note @+1 {{storage declared here}}
  llvm.mlir.global internal @bars() {addr_space = 3 : i32, alignment = 8 : i64} : !llvm.array<16 x i64>
  gpu.func @shared_storage() kernel {
    %bars = llvm.mlir.addressof @bars : !llvm.ptr<3>
    // expected-note @+1 {{the other pipeline is created here}}
    %a = pipeline.create storage(%bars : !llvm.ptr<3>) {name = "a"} : !P
    %at = llvm.getelementptr %bars[32] : (!llvm.ptr<3>) -> !llvm.ptr<3>, i8
    // expected-error @+1 {{pipeline 'b': its barrier storage (bytes 32-95 of the allocation) overlaps that of pipeline 'a' (bytes 0-63): the two pipelines share mbarriers, so each one's arrivals complete the other's phases and its waits pass on the other's commits (give each pipeline its own barrier storage, e.g. its own alloc_barriers)}}
    %b = pipeline.create storage(%at : !llvm.ptr<3>) {name = "b"} : !P
    %s = pipeline.state.make : !ps
    pipeline.producer.acquire %a, %s : !P, !ps
    pipeline.producer.commit %a, %s : !P, !ps
    pipeline.producer.tail %a, %s : !P, !ps
    pipeline.producer.acquire %b, %s : !P, !ps
    pipeline.producer.commit %b, %s : !P, !ps
    pipeline.producer.tail %b, %s : !P, !ps
    gpu.return
  }
}

// -----

!P = !pipeline.pipeline<async, stages = 4, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!ps = !pipeline.state<4, producer>

// The twins: the second pipeline right after the first (bytes 64-127), and
// a create in each branch of one scf.if on the same bytes (one runs).
gpu.module @kernels {
  llvm.mlir.global internal @bars() {addr_space = 3 : i32, alignment = 8 : i64} : !llvm.array<24 x i64>
  gpu.func @adjacent_storage(%c : i1) kernel {
    %bars = llvm.mlir.addressof @bars : !llvm.ptr<3>
    %a = pipeline.create storage(%bars : !llvm.ptr<3>) {name = "a"} : !P
    %at = llvm.getelementptr %bars[64] : (!llvm.ptr<3>) -> !llvm.ptr<3>, i8
    %b = pipeline.create storage(%at : !llvm.ptr<3>) {name = "b"} : !P
    %s = pipeline.state.make : !ps
    pipeline.producer.acquire %a, %s : !P, !ps
    pipeline.producer.commit %a, %s : !P, !ps
    pipeline.producer.tail %a, %s : !P, !ps
    pipeline.producer.acquire %b, %s : !P, !ps
    pipeline.producer.commit %b, %s : !P, !ps
    pipeline.producer.tail %b, %s : !P, !ps
    %at2 = llvm.getelementptr %bars[128] : (!llvm.ptr<3>) -> !llvm.ptr<3>, i8
    scf.if %c {
      %x = pipeline.create storage(%at2 : !llvm.ptr<3>) {name = "x"} : !P
      pipeline.producer.acquire %x, %s : !P, !ps
      pipeline.producer.commit %x, %s : !P, !ps
      pipeline.producer.tail %x, %s : !P, !ps
    } else {
      %y = pipeline.create storage(%at2 : !llvm.ptr<3>) {name = "y"} : !P
      pipeline.producer.acquire %y, %s : !P, !ps
      pipeline.producer.commit %y, %s : !P, !ps
      pipeline.producer.tail %y, %s : !P, !ps
    }
    gpu.return
  }
}
