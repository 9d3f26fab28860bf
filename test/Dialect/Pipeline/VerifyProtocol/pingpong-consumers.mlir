// CUTLASS's ping-pong consumers written as one role (both consumer
// warpgroups run the same code, sm90_gemm_tma_warpspecialized_pingpong):
// warpgroup 1 starts one tile in (`advance(k_tiles)` under `warpgroup == 1`)
// and each takes every other tile, so each stage is released by one
// warpgroup and the consumer count is one warpgroup's threads. The implied
// count (property 6) cannot read a per-phase count from the role's warps
// there and leaves it alone; the same role releasing every stage with both
// warpgroups is still reported.
// RUN: pipeline-opt --pipeline-verify-protocol -split-input-file -verify-diagnostics %s

!P = !pipeline.pipeline<async, stages = 3, producer = #pipeline.group<thread, 128>, consumer = #pipeline.group<thread, 128>>
!ps = !pipeline.state<3, producer>
!cs = !pipeline.state<3, consumer>

gpu.module @kernels {
gpu.func @pingpong_one_role(%tiles: index, %k: i32) kernel attributes {known_block_size = array<i32: 384, 1, 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c128 = arith.constant 128 : index
  %tid = gpu.thread_id x
  %wg = arith.divsi %tid, %c128 : index
  %p = pipeline.create {name = "ab"} : !P
  %is_producer = arith.cmpi eq, %wg, %c0 : index
  %kk = arith.index_cast %k : i32 to index
  scf.if %is_producer {
    %s0 = pipeline.state.make : !ps
    %sT = scf.for %t = %c0 to %tiles step %c1 iter_args(%st = %s0) -> (!ps) {
      %sN = scf.for %i = %c0 to %kk step %c1 iter_args(%s = %st) -> (!ps) {
        pipeline.producer.acquire %p, %s : !P, !ps
        pipeline.producer.commit %p, %s : !P, !ps
        %next = pipeline.state.advance %s : !ps
        scf.yield %next : !ps
      }
      scf.yield %sN : !ps
    }
    pipeline.producer.tail %p, %sT : !P, !ps
  }
  %is_consumer = arith.cmpi sge, %wg, %c1 : index
  scf.if %is_consumer {
    %mine = arith.subi %wg, %c1 : index
    %c = pipeline.state.make : !cs
    %second = arith.cmpi eq, %mine, %c1 : index
    %start = scf.if %second -> (!cs) {
      %skip = pipeline.state.advance %c by %k : !cs
      scf.yield %skip : !cs
    } else {
      scf.yield %c : !cs
    }
    %cT = scf.for %t = %mine to %tiles step %c2 iter_args(%ct = %start) -> (!cs) {
      %cN = scf.for %i = %c0 to %kk step %c1 iter_args(%s = %ct) -> (!cs) {
        pipeline.consumer.wait %p, %s : !P, !cs
        pipeline.consumer.release %p, %s : !P, !cs
        %next = pipeline.state.advance %s : !cs
        scf.yield %next : !cs
      }
      %other = pipeline.state.advance %cN by %k : !cs
      scf.yield %other : !cs
    }
  }
  gpu.return
}
}

// -----

// The bug twin: the same role releases every stage with both warpgroups
// (no offset, no skip: cooperative consumers) against one warpgroup's count.

!P = !pipeline.pipeline<async, stages = 3, producer = #pipeline.group<thread, 128>, consumer = #pipeline.group<thread, 128>>
!ps = !pipeline.state<3, producer>
!cs = !pipeline.state<3, consumer>

gpu.module @kernels {
gpu.func @cooperative_one_role(%tiles: index, %k: i32) kernel attributes {known_block_size = array<i32: 384, 1, 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c128 = arith.constant 128 : index
  %tid = gpu.thread_id x
  %wg = arith.divsi %tid, %c128 : index
  // expected-error @+1 {{pipeline 'ab': the consumer group #pipeline.group<thread, 128> expects 128 arrivals per phase, but the consumer role (8 warps, whole-warp consumer.release) gives 256}}
  %p = pipeline.create {name = "ab"} : !P
  %is_producer = arith.cmpi eq, %wg, %c0 : index
  %kk = arith.index_cast %k : i32 to index
  scf.if %is_producer {
    %s0 = pipeline.state.make : !ps
    %sT = scf.for %t = %c0 to %tiles step %c1 iter_args(%st = %s0) -> (!ps) {
      %sN = scf.for %i = %c0 to %kk step %c1 iter_args(%s = %st) -> (!ps) {
        pipeline.producer.acquire %p, %s : !P, !ps
        pipeline.producer.commit %p, %s : !P, !ps
        %next = pipeline.state.advance %s : !ps
        scf.yield %next : !ps
      }
      scf.yield %sN : !ps
    }
    pipeline.producer.tail %p, %sT : !P, !ps
  }
  %is_consumer = arith.cmpi sge, %wg, %c1 : index
  // expected-note @+1 {{the consumer role}}
  scf.if %is_consumer {
    %c = pipeline.state.make : !cs
    %cT = scf.for %t = %c0 to %tiles step %c1 iter_args(%ct = %c) -> (!cs) {
      %cN = scf.for %i = %c0 to %kk step %c1 iter_args(%s = %ct) -> (!cs) {
        pipeline.consumer.wait %p, %s : !P, !cs
        // expected-note @+1 {{the consumer role releases here}}
        pipeline.consumer.release %p, %s : !P, !cs
        %next = pipeline.state.advance %s : !cs
        scf.yield %next : !cs
      }
      scf.yield %cN : !cs
    }
  }
  gpu.return
}
}
