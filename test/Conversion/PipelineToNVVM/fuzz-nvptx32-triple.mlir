// A mutant of the long fuzz run 7 (docs/fuzzing.md): the arrive-counts seed's
// 2-CTA multicast TmaAsync kernel under a 32-bit `nvptx` triple. LLVM cannot
// select cp.async.bulk.tensor for it and pipeline-to-cubin aborted ("Cannot
// select"); the lowering now refuses the target, naming it.
// RUN: not pipeline-opt %s "--pipeline-to-cubin=chip=sm_100a format=isa verify-protocol=false" 2>&1 | FileCheck %s
// CHECK: error: gpu.module @kernels targets triple nvptx-nvidia-cuda (32-bit NVPTX), which the pipeline lowering does not support
// CHECK-NOT: Cannot select

!P = !pipeline.pipeline<tma_async, stages = 4, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 128>, tx_count = 12288, cluster = #pipeline.cluster<1, 2, 1, 1>, multicast = m>
!ps = !pipeline.state<4, producer>
!cs = !pipeline.state<4, consumer>

gpu.module @kernels [#nvvm.target<triple = "nvptx-nvidia-cuda", chip = "sm_100a">] {
gpu.func @mcast_release_against_128_threads(%desc: !llvm.ptr, %buf: !llvm.ptr<3>, %n: index) kernel attributes {known_block_size = array<i32: 160, 1, 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %x = arith.constant 0 : i32
  %mask = arith.constant 3 : i16
  %p = pipeline.create {name = "ab"} : !P
  %tid = gpu.thread_id x
  %warp = arith.divui %tid, %c32 : index
  %is_producer = arith.cmpi eq, %warp, %c0 : index
  scf.if %is_producer {
    %s0 = pipeline.state.make : !ps
    %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
      pipeline.producer.acquire %p, %s : !P, !ps
      %elected = nvvm.elect.sync -> i1
      scf.if %elected {
        pipeline.copy.tma_load %p, %s, %desc[%x, %x] to %buf multicast %mask {bytes = 4096 : i64} : !P, !ps, !llvm.ptr, !llvm.ptr<3>
        pipeline.copy.tma_load %p, %s, %desc[%x, %x] to %buf {bytes = 4096 : i64} : !P, !ps, !llvm.ptr, !llvm.ptr<3>
      }
      pipeline.producer.commit %p, %s : !P, !ps
      %next = pipeline.state.advance %s : !ps
      scf.yield %next : !ps
    }
    pipeline.producer.tail %p, %sN : !P, !ps
  }
  %is_consumer = arith.cmpi uge, %warp, %c1 : index
  scf.if %is_consumer {
    %c = pipeline.state.make : !cs
    %cN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %c) -> (!cs) {
      pipeline.consumer.wait %p, %s : !P, !cs
      pipeline.consumer.release %p, %s : !P, !cs
      %next = pipeline.state.advance %s : !cs
      scf.yield %next : !cs
    }
  }
  gpu.return
}
}

