// wgmma.fence between an op that writes an MMA's accumulator (or register A
// fragment) and the MMA: followed on SSA through insert/extractvalue, scf.if
// and scf.for results and iter_args. A wgmma result chained into the next
// MMA is ordered by the hardware; constants and undef have no place in
// program order. Each bug has its twin.
// RUN: pipeline-opt --pipeline-verify-protocol -split-input-file -verify-diagnostics %s

!acc = !llvm.struct<(f32, f32, f32, f32)>
!P = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 4>, tx_count = 1024>

// The accumulator is rescaled in the loop (softmax's O *= scale) and the
// loop's fence comes before the rescale: the next MMA may read O before the
// multiply lands.
gpu.module @m {
  gpu.func @rescale_after_the_fence(%a: i64, %b: i64, %n: i32, %s: f32) kernel attributes {known_block_size = array<i32: 128, 1, 1>} {
    %p = pipeline.create : !P
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %zero = llvm.mlir.undef : !acc
    %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %zero) -> (!acc) : i32 {
      nvvm.wgmma.fence.aligned
      %x = llvm.extractvalue %acc[0] : !acc
      // expected-note @+1 {{the register write}}
      %y = arith.mulf %x, %s : f32
      %o = llvm.insertvalue %y, %acc[0] : !acc
      // expected-error @+1 {{wgmma fence: this wgmma.mma_async reads registers (its accumulator or A fragment) that an op wrote with no wgmma.fence in between: the tensor cores may read them before that write lands (call wgmma.fence() -- warpgroup_arrive -- after the last write to the accumulator or A fragment, before the MMA)}}
      %d = nvvm.wgmma.mma_async %a, %b, %o, <m = 64, n = 8, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>] : !acc -> !acc
      nvvm.wgmma.commit.group.sync.aligned
      nvvm.wgmma.wait.group.sync.aligned 0
      scf.yield %d : !acc
    }
    gpu.return
  }
}

// -----

!acc = !llvm.struct<(f32, f32, f32, f32)>
!P = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 4>, tx_count = 1024>

// The twin: the fence after the rescale, before the MMA.
gpu.module @m {
  gpu.func @rescale_before_the_fence(%a: i64, %b: i64, %n: i32, %s: f32) kernel attributes {known_block_size = array<i32: 128, 1, 1>} {
    %p = pipeline.create : !P
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %zero = llvm.mlir.undef : !acc
    %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %zero) -> (!acc) : i32 {
      %x = llvm.extractvalue %acc[0] : !acc
      %y = arith.mulf %x, %s : f32
      %o = llvm.insertvalue %y, %acc[0] : !acc
      nvvm.wgmma.fence.aligned
      %d = nvvm.wgmma.mma_async %a, %b, %o, <m = 64, n = 8, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>] : !acc -> !acc
      nvvm.wgmma.commit.group.sync.aligned
      nvvm.wgmma.wait.group.sync.aligned 0
      scf.yield %d : !acc
    }
    gpu.return
  }
}

// -----

!acc = !llvm.struct<(f32, f32, f32, f32)>
!P = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 4>, tx_count = 1024>

// The loop's MMA takes a value the previous iteration rescaled after its
// MMA (around the back edge), and the loop has no fence of its own: the one
// before the loop only orders the first iteration.
gpu.module @m {
  gpu.func @back_edge_without_fence(%a: i64, %b: i64, %n: i32, %s: f32) kernel attributes {known_block_size = array<i32: 128, 1, 1>} {
    %p = pipeline.create : !P
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %zero = llvm.mlir.undef : !acc
    nvvm.wgmma.fence.aligned
    %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %zero) -> (!acc) : i32 {
      // expected-error @+1 {{wgmma fence: this wgmma.mma_async reads registers}}
      %d = nvvm.wgmma.mma_async %a, %b, %acc, <m = 64, n = 8, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>] : !acc -> !acc
      nvvm.wgmma.commit.group.sync.aligned
      nvvm.wgmma.wait.group.sync.aligned 0
      %x = llvm.extractvalue %d[0] : !acc
      // expected-note @+1 {{the register write}}
      %y = arith.mulf %x, %s : f32
      %o = llvm.insertvalue %y, %d[0] : !acc
      scf.yield %o : !acc
    }
    gpu.return
  }
}

// -----

!acc = !llvm.struct<(f32, f32, f32, f32)>
!P = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 4>, tx_count = 1024>

// The twin: a fence at the top of the loop body orders every iteration's
// MMA after the previous iteration's rescale; a chained MMA (its
// accumulator straight from the previous MMA) needs no other.
gpu.module @m {
  gpu.func @back_edge_with_fence(%a: i64, %b: i64, %n: i32, %s: f32) kernel attributes {known_block_size = array<i32: 128, 1, 1>} {
    %p = pipeline.create : !P
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %zero = llvm.mlir.undef : !acc
    %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %zero) -> (!acc) : i32 {
      nvvm.wgmma.fence.aligned
      %d = nvvm.wgmma.mma_async %a, %b, %acc, <m = 64, n = 8, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>] : !acc -> !acc
      %e = nvvm.wgmma.mma_async %a, %b, %d, <m = 64, n = 8, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>] : !acc -> !acc
      nvvm.wgmma.commit.group.sync.aligned
      nvvm.wgmma.wait.group.sync.aligned 0
      %x = llvm.extractvalue %e[0] : !acc
      %y = arith.mulf %x, %s : f32
      %o = llvm.insertvalue %y, %e[0] : !acc
      scf.yield %o : !acc
    }
    gpu.return
  }
}

// -----

!acc = !llvm.struct<(f32, f32, f32, f32)>
!P = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 4>, tx_count = 1024>

// Each iteration's S = Q K^T starts from no accumulator (scale-d zero) and
// the previous iteration's softmax read S's registers: the only fence is
// before the loop, so from the second iteration on the MMA may overwrite
// registers the softmax still reads.
gpu.module @m {
  gpu.func @mma_after_reads_without_fence(%a: i64, %b: i64, %n: i32, %out: !llvm.ptr<3>) kernel attributes {known_block_size = array<i32: 128, 1, 1>} {
    %p = pipeline.create : !P
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %none = llvm.mlir.undef : !acc
    nvvm.wgmma.fence.aligned
    scf.for %i = %c0 to %n step %c1 : i32 {
      // expected-error @+1 {{wgmma fence: this wgmma.mma_async may follow ops that read earlier MMAs' registers (the softmax of S, the rescale of O, an epilogue) with no wgmma.fence in between: the tensor cores may write those registers before the reads are done (call wgmma.fence() -- warpgroup_arrive -- before each batch of MMAs, after the register reads)}}
      %s = nvvm.wgmma.mma_async %a, %b, %none, <m = 64, n = 8, k = 16>, D[<f32>, <zero>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>] : !acc -> !acc
      nvvm.wgmma.commit.group.sync.aligned
      nvvm.wgmma.wait.group.sync.aligned 0
      %x = llvm.extractvalue %s[0] : !acc
      %e = math.exp %x : f32
      llvm.store %e, %out : f32, !llvm.ptr<3>
    }
    gpu.return
  }
}

// -----

!acc = !llvm.struct<(f32, f32, f32, f32)>
!P = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 4>, tx_count = 1024>

// The twin: a fence at the top of each iteration, after the previous
// iteration's reads.
gpu.module @m {
  gpu.func @mma_after_reads_with_fence(%a: i64, %b: i64, %n: i32, %out: !llvm.ptr<3>) kernel attributes {known_block_size = array<i32: 128, 1, 1>} {
    %p = pipeline.create : !P
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %none = llvm.mlir.undef : !acc
    scf.for %i = %c0 to %n step %c1 : i32 {
      nvvm.wgmma.fence.aligned
      %s = nvvm.wgmma.mma_async %a, %b, %none, <m = 64, n = 8, k = 16>, D[<f32>, <zero>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>] : !acc -> !acc
      nvvm.wgmma.commit.group.sync.aligned
      nvvm.wgmma.wait.group.sync.aligned 0
      %x = llvm.extractvalue %s[0] : !acc
      %e = math.exp %x : f32
      llvm.store %e, %out : f32, !llvm.ptr<3>
    }
    gpu.return
  }
}
