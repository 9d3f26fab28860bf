// tcgen05 fences around the hand-over of a tensor-memory stage (an
// umma_async pipeline: the MMA warp writes the accumulator, the epilogue
// reads it): tcgen05.fence::after_thread_sync after the consumer.wait or
// producer.acquire that hands a stage over, before the first tcgen05 op on
// it; tcgen05.fence::before_thread_sync after the last tcgen05 op, before
// the consumer.release that hands it back. Each bug has its twin.
// RUN: pipeline-opt --pipeline-verify-protocol -split-input-file -verify-diagnostics %s

!U = !pipeline.pipeline<umma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 4>>

// The MMA warp acquires the accumulator stage the epilogue released and
// issues its MMA with no fence::after in between.
gpu.module @m {
  gpu.func @mma_after_acquire_without_fence(%t: !llvm.ptr<6>, %a: i64, %b: i64, %idesc: i32) kernel attributes {known_block_size = array<i32: 32, 1, 1>} {
    %p = pipeline.create {name = "acc"} : !U
    %s = pipeline.state.make : !pipeline.state<2, producer>
    // expected-note @+1 {{the producer.acquire}}
    pipeline.producer.acquire %p, %s : !U, !pipeline.state<2, producer>
    %true = arith.constant true
    // expected-error @+1 {{tcgen05 fence: this tcgen05 op uses the tensor memory that the producer.acquire of pipeline 'acc' hands over, with no tcgen05.fence::after_thread_sync in between: it is not ordered after the other role's tcgen05 ops on that stage (call tcgen05.fence_after_thread_sync() after producer_acquire)}}
    nvvm.tcgen05.mma %t, %a, %b, %idesc, %true {ctaGroup = #nvvm.cta_group<cta_1>, kind = #nvvm.tcgen05_mma_kind<f16>} : (!llvm.ptr<6>, i64, i64, i32, i1)
    pipeline.producer.commit %p, %s : !U, !pipeline.state<2, producer>
    pipeline.producer.tail %p, %s : !U, !pipeline.state<2, producer>
    gpu.return
  }
}

// -----

!U = !pipeline.pipeline<umma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 4>>

// The twin.
gpu.module @m {
  gpu.func @mma_after_acquire_with_fence(%t: !llvm.ptr<6>, %a: i64, %b: i64, %idesc: i32) kernel attributes {known_block_size = array<i32: 32, 1, 1>} {
    %p = pipeline.create {name = "acc"} : !U
    %s = pipeline.state.make : !pipeline.state<2, producer>
    pipeline.producer.acquire %p, %s : !U, !pipeline.state<2, producer>
    nvvm.tcgen05.fence <after>
    %true = arith.constant true
    nvvm.tcgen05.mma %t, %a, %b, %idesc, %true {ctaGroup = #nvvm.cta_group<cta_1>, kind = #nvvm.tcgen05_mma_kind<f16>} : (!llvm.ptr<6>, i64, i64, i32, i1)
    pipeline.producer.commit %p, %s : !U, !pipeline.state<2, producer>
    pipeline.producer.tail %p, %s : !U, !pipeline.state<2, producer>
    gpu.return
  }
}

// -----

!U = !pipeline.pipeline<umma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 128>>

// The epilogue reads the accumulator after its wait with no fence::after,
// and releases it with no fence::before after the read.
gpu.module @m {
  gpu.func @epilogue_without_fences(%t: !llvm.ptr<6>) kernel attributes {known_block_size = array<i32: 128, 1, 1>} {
    %p = pipeline.create {name = "acc"} : !U
    %s = pipeline.state.make : !pipeline.state<2, consumer>
    // expected-note @+1 {{the consumer.wait}}
    pipeline.consumer.wait %p, %s : !U, !pipeline.state<2, consumer>
    // expected-error @+2 {{tcgen05 fence: this tcgen05 op uses the tensor memory that the consumer.wait of pipeline 'acc' hands over, with no tcgen05.fence::after_thread_sync in between}}
    // expected-note @+1 {{the tcgen05 op}}
    %v = nvvm.tcgen05.ld %t {shape = #nvvm.tcgen05_ldst_shape<shape_32x32b>} : vector<4xi32>
    nvvm.tcgen05.wait <load>
    // expected-error @+1 {{tcgen05 fence: this consumer.release hands the tensor memory of pipeline 'acc' back with no tcgen05.fence::before_thread_sync after the tcgen05 ops that used it: the next MMA may overwrite the stage before they are done (call tcgen05.fence_before_thread_sync() before consumer_release)}}
    pipeline.consumer.release %p, %s : !U, !pipeline.state<2, consumer>
    gpu.return
  }
}

// -----

!U = !pipeline.pipeline<umma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 128>>

// The twin: fence::after after the wait, fence::before before the release.
gpu.module @m {
  gpu.func @epilogue_with_fences(%t: !llvm.ptr<6>) kernel attributes {known_block_size = array<i32: 128, 1, 1>} {
    %p = pipeline.create {name = "acc"} : !U
    %s = pipeline.state.make : !pipeline.state<2, consumer>
    pipeline.consumer.wait %p, %s : !U, !pipeline.state<2, consumer>
    nvvm.tcgen05.fence <after>
    %v = nvvm.tcgen05.ld %t {shape = #nvvm.tcgen05_ldst_shape<shape_32x32b>} : vector<4xi32>
    nvvm.tcgen05.wait <load>
    nvvm.tcgen05.fence <before>
    pipeline.consumer.release %p, %s : !U, !pipeline.state<2, consumer>
    gpu.return
  }
}

// -----

!U = !pipeline.pipeline<umma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 128>>

// Every tcgen05.ld of the stage completes before the consumer.release that
// hands it back: a tcgen05.wait::ld on every path. The bug
// (NVIDIA/cutlass#3652): only lanes 0-15 use the registers and wait for the
// load, inside their branch; lanes 16-31 arrive with theirs in flight.
gpu.module @m {
  gpu.func @ld_waited_in_a_branch_only(%t: !llvm.ptr<6>, %out: !llvm.ptr<3>) kernel attributes {known_block_size = array<i32: 128, 1, 1>} {
    %p = pipeline.create {name = "acc"} : !U
    %s = pipeline.state.make : !pipeline.state<2, consumer>
    pipeline.consumer.wait %p, %s : !U, !pipeline.state<2, consumer>
    nvvm.tcgen05.fence <after>
    // expected-note @+1 {{the tcgen05.ld}}
    %v = nvvm.tcgen05.ld %t {shape = #nvvm.tcgen05_ldst_shape<shape_32x32b>} : vector<4xi32>
    %lane = nvvm.read.ptx.sreg.laneid : i32
    %c16 = arith.constant 16 : i32
    %low = arith.cmpi ult, %lane, %c16 : i32
    scf.if %low {
      nvvm.tcgen05.wait <load>
      %c0 = arith.constant 0 : i32
      %x = llvm.extractelement %v[%c0 : i32] : vector<4xi32>
      llvm.store %x, %out : i32, !llvm.ptr<3>
    }
    nvvm.tcgen05.fence <before>
    // expected-error @+1 {{tcgen05 wait: this consumer.release hands the tensor memory of pipeline 'acc' back while a tcgen05.ld of it may still be in flight: no tcgen05.wait::ld follows the load on every path to the release}}
    pipeline.consumer.release %p, %s : !U, !pipeline.state<2, consumer>
    gpu.return
  }
}

// -----

!U = !pipeline.pipeline<umma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 128>>

// The twin: the wait before the lanes branch.
gpu.module @m {
  gpu.func @ld_waited_before_the_branch(%t: !llvm.ptr<6>, %out: !llvm.ptr<3>) kernel attributes {known_block_size = array<i32: 128, 1, 1>} {
    %p = pipeline.create {name = "acc"} : !U
    %s = pipeline.state.make : !pipeline.state<2, consumer>
    pipeline.consumer.wait %p, %s : !U, !pipeline.state<2, consumer>
    nvvm.tcgen05.fence <after>
    %v = nvvm.tcgen05.ld %t {shape = #nvvm.tcgen05_ldst_shape<shape_32x32b>} : vector<4xi32>
    nvvm.tcgen05.wait <load>
    %lane = nvvm.read.ptx.sreg.laneid : i32
    %c16 = arith.constant 16 : i32
    %low = arith.cmpi ult, %lane, %c16 : i32
    scf.if %low {
      %c0 = arith.constant 0 : i32
      %x = llvm.extractelement %v[%c0 : i32] : vector<4xi32>
      llvm.store %x, %out : i32, !llvm.ptr<3>
    }
    nvvm.tcgen05.fence <before>
    pipeline.consumer.release %p, %s : !U, !pipeline.state<2, consumer>
    gpu.return
  }
}

// -----

!U = !pipeline.pipeline<umma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 128>>

// Just on the other side: the lanes that use the registers wait in their
// branch, and every lane waits again after it, before the release.
gpu.module @m {
  gpu.func @ld_waited_after_the_branch(%t: !llvm.ptr<6>, %out: !llvm.ptr<3>) kernel attributes {known_block_size = array<i32: 128, 1, 1>} {
    %p = pipeline.create {name = "acc"} : !U
    %s = pipeline.state.make : !pipeline.state<2, consumer>
    pipeline.consumer.wait %p, %s : !U, !pipeline.state<2, consumer>
    nvvm.tcgen05.fence <after>
    %v = nvvm.tcgen05.ld %t {shape = #nvvm.tcgen05_ldst_shape<shape_32x32b>} : vector<4xi32>
    %lane = nvvm.read.ptx.sreg.laneid : i32
    %c16 = arith.constant 16 : i32
    %low = arith.cmpi ult, %lane, %c16 : i32
    scf.if %low {
      nvvm.tcgen05.wait <load>
      %c0 = arith.constant 0 : i32
      %x = llvm.extractelement %v[%c0 : i32] : vector<4xi32>
      llvm.store %x, %out : i32, !llvm.ptr<3>
    }
    nvvm.tcgen05.wait <load>
    nvvm.tcgen05.fence <before>
    pipeline.consumer.release %p, %s : !U, !pipeline.state<2, consumer>
    gpu.return
  }
}
