// Property 6: arrive counts agree with who arrives.
// RUN: pipeline-opt --pipeline-verify-protocol -split-input-file -verify-diagnostics %s

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 128>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>

// The consumer group counts 128 threads but only one lane per warp releases.
func.func @elected_release_counted_in_threads(%n: index) {
  %tid = gpu.thread_id x
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  // expected-note @+1 {{pipeline 'kv' is created here}}
  %p = pipeline.create {name = "kv"} : !P
  %warp = arith.divui %tid, %c32 : index
  %is_consumer = arith.cmpi uge, %warp, %c1 : index
  scf.if %is_consumer {
    %c = pipeline.state.make : !cs
    %cN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %c) -> (!cs) {
      pipeline.consumer.wait %p, %s : !P, !cs
      %e = nvvm.elect.sync -> i1
      // expected-note @+1 {{guard that narrows who arrives}}
      scf.if %e {
        // expected-error @+1 {{pipeline 'kv': pipeline.consumer.release runs once per warp (guarded) but the consumer group #pipeline.group<thread, 128> counts 128 arrivals per phase, so the empty barrier never completes; count the group in warps (#pipeline.group<thread, number of warps>) and use elect_one, or release from every thread of the group}}
        pipeline.consumer.release %p, %s : !P, !cs
      }
      %s1 = pipeline.state.advance %s : !cs
      scf.yield %s1 : !cs
    }
  }
  return
}

// -----

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<warp, 1>, consumer = #pipeline.group<warp, 4>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>

// Thread 0 alone commits, but a one-warp producer group counts 32 arrivals.
func.func @one_thread_commit_with_warp_agent() {
  %tid = gpu.thread_id x
  %c0 = arith.constant 0 : index
  // expected-note @+1 {{pipeline 'kv' is created here}}
  %p = pipeline.create {name = "kv"} : !P
  %s = pipeline.state.make : !ps
  %t0 = arith.cmpi eq, %tid, %c0 : index
  // expected-note @+1 {{guard that narrows who arrives}}
  scf.if %t0 {
    pipeline.producer.acquire %p, %s : !P, !ps
    // expected-error @+1 {{pipeline 'kv': pipeline.producer.commit runs on one thread (guarded) but the producer group #pipeline.group<warp, 1> counts 32 arrivals per phase, so the full barrier never completes; make the group #pipeline.group<thread, 1>, or commit from every thread of the group}}
    pipeline.producer.commit %p, %s : !P, !ps
    pipeline.producer.tail %p, %s : !P, !ps
  }
  return
}

// -----

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<warp, 1>, consumer = #pipeline.group<warp, 4>>
!cs = !pipeline.state<2, consumer>

// elect_one arrives once per warp; a warp agent counts 32 arrivals per warp.
func.func @elect_one_with_warp_agent() {
  // expected-note @+1 {{pipeline 'kv' is created here}}
  %p = pipeline.create {name = "kv"} : !P
  %c = pipeline.state.make : !cs
  pipeline.consumer.wait %p, %c : !P, !cs
  // expected-error @+1 {{pipeline 'kv': pipeline.consumer.release runs once per warp (elect_one) but the consumer group #pipeline.group<warp, 4> counts 128 arrivals per phase}}
  pipeline.consumer.release %p, %c {elect_one} : !P, !cs
  return
}

// -----

!T = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 2>, consumer = #pipeline.group<thread, 128>, tx_count = 4096>
!ps = !pipeline.state<2, producer>

// One producer warp arms each stage with one elected arrive.expect_tx, but the
// full barrier counts two arrivals (NVIDIA/cutlass#2404).
func.func @tma_producer_group_of_two(%n: index, %desc: !llvm.ptr, %buf: !llvm.ptr<3>) {
  %tid = gpu.thread_id x
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %x = arith.constant 0 : i32
  // expected-error @+1 {{pipeline 'ab': the producer group #pipeline.group<thread, 2> makes each full barrier expect 2 arrivals, but producer.acquire arrives once (one elected arrive.expect_tx) from 1 single-warp producer role: the stage never completes and consumers wait forever (a TMA producer group is #pipeline.group<thread, 1>)}}
  %p = pipeline.create {name = "ab"} : !T
  %warp = arith.divui %tid, %c32 : index
  %is_producer = arith.cmpi eq, %warp, %c0 : index
  scf.if %is_producer {
    %s0 = pipeline.state.make : !ps
    %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
      // expected-note @+1 {{elected arrive here}}
      pipeline.producer.acquire %p, %s : !T, !ps
      %e = nvvm.elect.sync -> i1
      scf.if %e {
        pipeline.copy.tma_load %p, %s, %desc[%x] to %buf {bytes = 4096 : i64} : !T, !ps, !llvm.ptr, !llvm.ptr<3>
      }
      %s1 = pipeline.state.advance %s : !ps
      scf.yield %s1 : !ps
    }
    pipeline.producer.tail %p, %sN : !T, !ps
  }
  return
}

// -----

!T = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 3>, tx_count = 4096, cluster = #pipeline.cluster<1, 2, 1, 1>, multicast = m>

// Each consumer warp arrives once on each of the 2 CTAs of its multicast
// column, so the consumer group must count 2 x warps arrivals.
func.func @cluster_consumer_count_not_multiple_of_mcast() {
  // expected-error @+1 {{pipeline 'ab': each consumer warp releases a stage once on each of the 2 CTAs whose multicast loads it reads, so the consumer group counts (consumer warps x 2) arrivals; #pipeline.group<thread, 3> is not a multiple of 2}}
  %p = pipeline.create {name = "ab"} : !T
  %c = pipeline.state.make : !pipeline.state<2, consumer>
  pipeline.consumer.wait %p, %c : !T, !pipeline.state<2, consumer>
  pipeline.consumer.release %p, %c : !T, !pipeline.state<2, consumer>
  return
}

// -----

!T = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 128>, tx_count = 4096, cluster = #pipeline.cluster<1, 2, 1, 1>, multicast = m>
!cs = !pipeline.state<2, consumer>

// Lanes 0 and 1 of each consumer warp signal CTAs 0 and 1; an elected
// release only reaches CTA 0.
func.func @cluster_elected_release() {
  %c0 = arith.constant 0 : index
  %p = pipeline.create {name = "ab"} : !T
  %c = pipeline.state.make : !cs
  pipeline.consumer.wait %p, %c : !T, !cs
  %lane_id = gpu.lane_id
  %first = arith.cmpi eq, %lane_id, %c0 : index
  // expected-note @+1 {{guard that narrows who arrives}}
  scf.if %first {
    // expected-error @+1 {{pipeline 'ab': consumer.release from one lane cannot signal the cluster: in a tma_async pipeline with a cluster of 2 CTAs, lanes 0..1 of every consumer warp each arrive on one CTA's empty barrier, so the peers' producers wait forever (release from the whole warp, without elect_one or an elect guard)}}
    pipeline.consumer.release %p, %c : !T, !cs
  }
  return
}

// -----

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 128>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>

// The producer warp also waits on and releases the stages it filled
// (NVIDIA/cutlass#2126): its arrives are not in the consumer count.
func.func @consumer_verbs_in_producer_role(%n: index, %warp: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %p = pipeline.create {name = "ab"} : !P
  %is_producer = arith.cmpi eq, %warp, %c0 : index
  scf.if %is_producer {
    %s0 = pipeline.state.make : !ps
    %c = pipeline.state.make : !cs
    %r:2 = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0, %t = %c) -> (!ps, !cs) {
      // expected-note @+1 {{this role produces here}}
      pipeline.producer.acquire %p, %s : !P, !ps
      pipeline.producer.commit %p, %s : !P, !ps
      // expected-error @+1 {{pipeline 'ab': pipeline.consumer.wait issued from the producer role while another role consumes this pipeline: the producer threads' consumer arrives are not in the consumer group's count and the stages go out of step (NVIDIA/cutlass#2126); move the consumer verbs to the consumer role, or make a role that does both use producer_consumer states}}
      pipeline.consumer.wait %p, %t : !P, !cs
      pipeline.consumer.release %p, %t : !P, !cs
      %s1 = pipeline.state.advance %s : !ps
      %t1 = pipeline.state.advance %t : !cs
      scf.yield %s1, %t1 : !ps, !cs
    }
    pipeline.producer.tail %p, %r#0 : !P, !ps
  } else {
    %c = pipeline.state.make : !cs
    %cN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %c) -> (!cs) {
      // expected-note @+1 {{the consumer role consumes here}}
      pipeline.consumer.wait %p, %s : !P, !cs
      pipeline.consumer.release %p, %s : !P, !cs
      %s1 = pipeline.state.advance %s : !cs
      scf.yield %s1 : !cs
    }
  }
  return
}

// -----

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 8>>
!T = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 2>, consumer = #pipeline.group<thread, 256>, tx_count = 4096, cluster = #pipeline.cluster<1, 2, 1, 1>, multicast = m>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>

// Correct: thread 0 commits for a one-thread producer group; 8 consumer
// warps release once per warp; two TMA producer warps each arm the stage
// (a producer group of 2); cluster releases from whole warps.
func.func @arrive_counts_ok(%desc: !llvm.ptr, %buf: !llvm.ptr<3>) {
  %tid = gpu.thread_id x
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %x = arith.constant 0 : i32
  %p = pipeline.create {name = "kv"} : !P
  %t = pipeline.create {name = "ab"} : !T
  %warp = arith.divui %tid, %c32 : index
  %t0 = arith.cmpi eq, %tid, %c0 : index
  %s = pipeline.state.make : !ps
  scf.if %t0 {
    pipeline.producer.acquire %p, %s : !P, !ps
    pipeline.producer.commit %p, %s : !P, !ps
    pipeline.producer.tail %p, %s : !P, !ps
  }
  %w0 = arith.cmpi eq, %warp, %c0 : index
  scf.if %w0 {
    pipeline.producer.acquire %t, %s : !T, !ps
    %e = nvvm.elect.sync -> i1
    scf.if %e {
      pipeline.copy.tma_load %t, %s, %desc[%x] to %buf {bytes = 4096 : i64} : !T, !ps, !llvm.ptr, !llvm.ptr<3>
    }
    pipeline.producer.tail %t, %s : !T, !ps
  }
  %w1 = arith.cmpi eq, %warp, %c1 : index
  scf.if %w1 {
    pipeline.producer.acquire %t, %s : !T, !ps
    %e = nvvm.elect.sync -> i1
    scf.if %e {
      pipeline.copy.tma_load %t, %s, %desc[%x] to %buf {bytes = 4096 : i64} : !T, !ps, !llvm.ptr, !llvm.ptr<3>
    }
    pipeline.producer.tail %t, %s : !T, !ps
  }
  %c = pipeline.state.make : !cs
  pipeline.consumer.wait %p, %c : !P, !cs
  pipeline.consumer.release %p, %c {elect_one, syncwarp_before} : !P, !cs
  pipeline.consumer.wait %t, %c : !T, !cs
  pipeline.consumer.release %t, %c : !T, !cs
  return
}

// -----

!P = !pipeline.pipeline<async, stages = 4, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 64>>
!cs = !pipeline.state<4, consumer>

// The consumer role is one warp (warp_idx broadcast with shfl.sync, as the
// kernel layer emits it) and releases with elect_one: one arrival per phase,
// not 64.
func.func @one_warp_elect_one(%n: i32) {
  %tid = nvvm.read.ptx.sreg.tid.x : i32
  %c32 = arith.constant 32 : i32
  %all = arith.constant -1 : i32
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %clamp = arith.constant 31 : i32
  // expected-note @+1 {{pipeline 'kv' is created here}}
  %p = pipeline.create {name = "kv"} : !P
  %w = arith.divsi %tid, %c32 : i32
  %warp = nvvm.shfl.sync idx %all, %w, %c0, %clamp : i32 -> i32
  %is_consumer = arith.cmpi eq, %warp, %c1 : i32
  // expected-note @+1 {{guard that narrows who arrives}}
  scf.if %is_consumer {
    %c = pipeline.state.make : !cs
    %cN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %c) -> (!cs) : i32 {
      pipeline.consumer.wait %p, %s : !P, !cs
      // expected-error @+1 {{pipeline 'kv': pipeline.consumer.release runs on one thread (elect_one under a guard) but the consumer group #pipeline.group<thread, 64> counts 64 arrivals per phase, so the empty barrier never completes; make the group #pipeline.group<thread, 1>, or release from every thread of the group}}
      pipeline.consumer.release %p, %s {elect_one} : !P, !cs
      %s1 = pipeline.state.advance %s : !cs
      scf.yield %s1 : !cs
    }
  }
  return
}

// -----

!P = !pipeline.pipeline<async, stages = 4, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 2>>
!cs = !pipeline.state<4, consumer>

// Correct: two one-warp consumer roles release with elect_one, two arrivals
// per phase for a group of two.
func.func @two_roles_elect_one() {
  %tid = nvvm.read.ptx.sreg.tid.x : i32
  %c32 = arith.constant 32 : i32
  %c1 = arith.constant 1 : i32
  %c2 = arith.constant 2 : i32
  %p = pipeline.create {name = "kv"} : !P
  %warp = arith.divsi %tid, %c32 : i32
  %w1 = arith.cmpi eq, %warp, %c1 : i32
  scf.if %w1 {
    %c = pipeline.state.make : !cs
    pipeline.consumer.wait %p, %c : !P, !cs
    pipeline.consumer.release %p, %c {elect_one} : !P, !cs
  }
  %w2 = arith.cmpi eq, %warp, %c2 : i32
  scf.if %w2 {
    %c = pipeline.state.make : !cs
    pipeline.consumer.wait %p, %c : !P, !cs
    pipeline.consumer.release %p, %c {elect_one} : !P, !cs
  }
  return
}

// -----

// Implied arrive counts (check (e)): what the role that signals gives per
// phase against what the group makes the barrier expect.
//
// (a) PipelineAsync: the consumer role is one warp (warp == 1) releasing with
// the whole warp: 32 arrivals per phase, not 64.

!P = !pipeline.pipeline<async, stages = 4, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 64>>
!ps = !pipeline.state<4, producer>
!cs = !pipeline.state<4, consumer>

func.func @one_warp_release_against_64_threads(%n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %tid = gpu.thread_id x
  %warp = arith.divui %tid, %c32 : index
  // expected-error @+1 {{pipeline 'kv': the consumer group #pipeline.group<thread, 64> expects 64 arrivals per phase, but the consumer role (one warp, whole-warp consumer.release) gives 32: the empty barrier never completes and the producers wait forever; use #pipeline.group<thread, 32>}}
  %p = pipeline.create {name = "kv"} : !P
  %is_producer = arith.cmpi eq, %warp, %c0 : index
  scf.if %is_producer {
    %s0 = pipeline.state.make : !ps
    %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
      pipeline.producer.acquire %p, %s : !P, !ps
      pipeline.producer.commit %p, %s : !P, !ps
      %next = pipeline.state.advance %s : !ps
      scf.yield %next : !ps
    }
    pipeline.producer.tail %p, %sN : !P, !ps
  }
  %is_consumer = arith.cmpi eq, %warp, %c1 : index
  // expected-note @+1 {{the consumer role}}
  scf.if %is_consumer {
    %c = pipeline.state.make : !cs
    %cN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %c) -> (!cs) {
      pipeline.consumer.wait %p, %s : !P, !cs
      // expected-note @+1 {{the consumer role releases here}}
      pipeline.consumer.release %p, %s : !P, !cs
      %next = pipeline.state.advance %s : !cs
      scf.yield %next : !cs
    }
  }
  return
}

// -----

// (a) passing: two consumer warps (warp >= 1 of a 96-thread block, from
// known_block_size) release with every thread: 64 arrivals, as counted.

!P = !pipeline.pipeline<async, stages = 4, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 64>>
!ps = !pipeline.state<4, producer>
!cs = !pipeline.state<4, consumer>

gpu.module @kernels {
gpu.func @two_warps_release_64(%n: index) kernel attributes {known_block_size = array<i32: 96, 1, 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %tid = gpu.thread_id x
  %warp = arith.divui %tid, %c32 : index
  %p = pipeline.create {name = "kv"} : !P
  %is_producer = arith.cmpi eq, %warp, %c0 : index
  scf.if %is_producer {
    %s0 = pipeline.state.make : !ps
    %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
      pipeline.producer.acquire %p, %s : !P, !ps
      pipeline.producer.commit %p, %s : !P, !ps
      %next = pipeline.state.advance %s : !ps
      scf.yield %next : !ps
    }
    pipeline.producer.tail %p, %sN : !P, !ps
  } else {
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

// -----

// Not decidable, so no diagnostic: without a block size, `warp >= 1` is an
// open range of warps, whatever the consumer group says.

!P = !pipeline.pipeline<async, stages = 4, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 1000>>
!ps = !pipeline.state<4, producer>
!cs = !pipeline.state<4, consumer>

func.func @open_warp_range_is_not_counted(%n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %tid = gpu.thread_id x
  %warp = arith.divui %tid, %c32 : index
  %p = pipeline.create {name = "kv"} : !P
  %is_producer = arith.cmpi eq, %warp, %c0 : index
  scf.if %is_producer {
    %s0 = pipeline.state.make : !ps
    %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
      pipeline.producer.acquire %p, %s : !P, !ps
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
  return
}

// -----

// (b) PipelineTmaAsync in a 2-CTA cluster multicasting along M: each of the
// 4 consumer warps (warp >= 1 of 160 threads) arrives once per multicast CTA
// from its signalling lanes, 8 arrivals per phase, not 128.

!P = !pipeline.pipeline<tma_async, stages = 4, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 128>, tx_count = 12288, cluster = #pipeline.cluster<1, 2, 1, 1>, multicast = m>
!ps = !pipeline.state<4, producer>
!cs = !pipeline.state<4, consumer>

gpu.module @kernels {
gpu.func @mcast_release_against_128_threads(%desc: !llvm.ptr, %buf: !llvm.ptr<3>, %n: index) kernel attributes {known_block_size = array<i32: 160, 1, 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %x = arith.constant 0 : i32
  %mask = arith.constant 3 : i16
  // expected-error @+1 {{pipeline 'ab': the consumer group #pipeline.group<thread, 128> expects 128 arrivals per phase, but the consumer role (4 warps, whole-warp consumer.release: one signalling-lane arrive per warp from each of the 2 multicast CTAs) gives 8: the empty barrier never completes and the producers wait forever; use #pipeline.group<thread, 8>}}
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
  // expected-note @+1 {{the consumer role}}
  scf.if %is_consumer {
    %c = pipeline.state.make : !cs
    %cN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %c) -> (!cs) {
      pipeline.consumer.wait %p, %s : !P, !cs
      // expected-note @+1 {{the consumer role releases here}}
      pipeline.consumer.release %p, %s : !P, !cs
      %next = pipeline.state.advance %s : !cs
      scf.yield %next : !cs
    }
  }
  gpu.return
}
}

// -----

// (b) The same with the group counted in warps (4 x 32 = 128 arrivals).

!P = !pipeline.pipeline<tma_async, stages = 4, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<warp, 4>, tx_count = 12288, cluster = #pipeline.cluster<1, 2, 1, 1>, multicast = m>
!ps = !pipeline.state<4, producer>
!cs = !pipeline.state<4, consumer>

gpu.module @kernels {
gpu.func @mcast_release_against_4_warps(%desc: !llvm.ptr, %buf: !llvm.ptr<3>, %n: index) kernel attributes {known_block_size = array<i32: 160, 1, 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %x = arith.constant 0 : i32
  %mask = arith.constant 3 : i16
  // expected-error @+1 {{pipeline 'ab': the consumer group #pipeline.group<warp, 4> expects 128 arrivals per phase, but the consumer role (4 warps, whole-warp consumer.release: one signalling-lane arrive per warp from each of the 2 multicast CTAs) gives 8: the empty barrier never completes and the producers wait forever; use #pipeline.group<thread, 8>}}
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
  // expected-note @+1 {{the consumer role}}
  scf.if %is_consumer {
    %c = pipeline.state.make : !cs
    %cN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %c) -> (!cs) {
      pipeline.consumer.wait %p, %s : !P, !cs
      // expected-note @+1 {{the consumer role releases here}}
      pipeline.consumer.release %p, %s : !P, !cs
      %next = pipeline.state.advance %s : !cs
      scf.yield %next : !cs
    }
  }
  gpu.return
}
}

// -----

// (b) passing: consumer warps x mcast_size = 4 x 2 = 8.

!P = !pipeline.pipeline<tma_async, stages = 4, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 8>, tx_count = 12288, cluster = #pipeline.cluster<1, 2, 1, 1>, multicast = m>
!ps = !pipeline.state<4, producer>
!cs = !pipeline.state<4, consumer>

gpu.module @kernels {
gpu.func @mcast_release_against_8(%desc: !llvm.ptr, %buf: !llvm.ptr<3>, %n: index) kernel attributes {known_block_size = array<i32: 160, 1, 1>} {
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

// -----

// (c) PipelineTmaUmma: the MMA warp releases with one elected tcgen05.commit,
// one arrival per phase, not 32.

!P = !pipeline.pipeline<tma_umma, stages = 3, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 32>, tx_count = 16384>
!ps = !pipeline.state<3, producer>
!cs = !pipeline.state<3, consumer>

func.func @umma_commit_against_32_threads(%desc: !llvm.ptr, %buf: !llvm.ptr<3>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %x = arith.constant 0 : i32
  // expected-error @+1 {{pipeline 'ab': the consumer group #pipeline.group<thread, 32> expects 32 arrivals per phase, but the consumer role (one warp, one elected tcgen05.commit per warp) gives 1: the empty barrier never completes and the producers wait forever; use #pipeline.group<thread, 1>}}
  %p = pipeline.create {name = "ab"} : !P
  %tid = gpu.thread_id x
  %warp = arith.divui %tid, %c32 : index
  %is_tma = arith.cmpi eq, %warp, %c0 : index
  scf.if %is_tma {
    %s0 = pipeline.state.make : !ps
    %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
      pipeline.producer.acquire %p, %s : !P, !ps
      %elected = nvvm.elect.sync -> i1
      scf.if %elected {
        pipeline.copy.tma_load %p, %s, %desc[%x, %x] to %buf {bytes = 16384 : i64} : !P, !ps, !llvm.ptr, !llvm.ptr<3>
      }
      %next = pipeline.state.advance %s : !ps
      scf.yield %next : !ps
    }
    pipeline.producer.tail %p, %sN : !P, !ps
  }
  %is_mma = arith.cmpi eq, %warp, %c1 : index
  // expected-note @+1 {{the consumer role}}
  scf.if %is_mma {
    %c = pipeline.state.make : !cs
    %cN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %c) -> (!cs) {
      pipeline.consumer.wait %p, %s : !P, !cs
      // expected-note @+1 {{the consumer role releases here}}
      pipeline.consumer.release %p, %s : !P, !cs
      %next = pipeline.state.advance %s : !cs
      scf.yield %next : !cs
    }
  }
  return
}

// -----

// (c) passing: one tcgen05.commit, a group of one.

!P = !pipeline.pipeline<tma_umma, stages = 3, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 1>, tx_count = 16384>
!ps = !pipeline.state<3, producer>
!cs = !pipeline.state<3, consumer>

func.func @umma_commit_against_1(%desc: !llvm.ptr, %buf: !llvm.ptr<3>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %x = arith.constant 0 : i32
  %p = pipeline.create {name = "ab"} : !P
  %tid = gpu.thread_id x
  %warp = arith.divui %tid, %c32 : index
  %is_tma = arith.cmpi eq, %warp, %c0 : index
  scf.if %is_tma {
    %s0 = pipeline.state.make : !ps
    %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
      pipeline.producer.acquire %p, %s : !P, !ps
      %elected = nvvm.elect.sync -> i1
      scf.if %elected {
        pipeline.copy.tma_load %p, %s, %desc[%x, %x] to %buf {bytes = 16384 : i64} : !P, !ps, !llvm.ptr, !llvm.ptr<3>
      }
      %next = pipeline.state.advance %s : !ps
      scf.yield %next : !ps
    }
    pipeline.producer.tail %p, %sN : !P, !ps
  }
  %is_mma = arith.cmpi eq, %warp, %c1 : index
  scf.if %is_mma {
    %c = pipeline.state.make : !cs
    %cN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %c) -> (!cs) {
      pipeline.consumer.wait %p, %s : !P, !cs
      pipeline.consumer.release %p, %s : !P, !cs
      %next = pipeline.state.advance %s : !cs
      scf.yield %next : !cs
    }
  }
  return
}

// -----

// (c) with a CTA pair in a multicast cluster (triton-lang/triton#10196):
// two pairs multicast along M; the MMA warp runs in each pair's leader and
// its tcgen05.commit reaches the 4 CTAs whose loads land in the stage, so
// each CTA's empty barrier gets one commit from each of the 2 leaders.
// Counting the 4 CTAs leaves every phase 2 arrivals short.

!P = !pipeline.pipeline<tma_umma, stages = 3, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 4>, tx_count = 16384, cluster = #pipeline.cluster<2, 2, 1, 1>, multicast = m, cta_group = 2>
!ps = !pipeline.state<3, producer>
!cs = !pipeline.state<3, consumer>

gpu.module @m {
  gpu.func @pair_mma_multicast_counted_per_cta(%desc: !llvm.ptr, %buf: !llvm.ptr<3>, %n: index) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c32 = arith.constant 32 : index
    %x = arith.constant 0 : i32
    %two = arith.constant 2 : i32
    // expected-error @+1 {{pipeline 'ab': the consumer group #pipeline.group<thread, 4> expects 4 arrivals per phase, but the consumer role (one warp, one elected tcgen05.commit per warp, multicast from the MMA of each CTA pair's leader among the 2 whose loads land in the stage) gives 2: the empty barrier never completes and the producers wait forever; use #pipeline.group<thread, 2>}}
    %p = pipeline.create {name = "ab"} : !P
    %tid = gpu.thread_id x
    %warp = arith.divui %tid, %c32 : index
    %rank = nvvm.read.ptx.sreg.cluster.ctarank : i32
    %is_tma = arith.cmpi eq, %warp, %c0 : index
    scf.if %is_tma {
      %s0 = pipeline.state.make : !ps
      %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
        pipeline.producer.acquire %p, %s : !P, !ps
        %elected = nvvm.elect.sync -> i1
        scf.if %elected {
          pipeline.copy.tma_load %p, %s, %desc[%x, %x] to %buf {bytes = 8192 : i64} : !P, !ps, !llvm.ptr, !llvm.ptr<3>
        }
        %next = pipeline.state.advance %s : !ps
        scf.yield %next : !ps
      }
      pipeline.producer.tail %p, %sN : !P, !ps
    }
    %is_mma = arith.cmpi eq, %warp, %c1 : index
    scf.if %is_mma {
      %r = arith.remui %rank, %two : i32
      %leader = arith.cmpi eq, %r, %x : i32
      // expected-note @+1 {{the consumer role}}
      scf.if %leader {
        %c = pipeline.state.make : !cs
        %cN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %c) -> (!cs) {
          pipeline.consumer.wait %p, %s : !P, !cs
          // expected-note @+1 {{the consumer role releases here}}
          pipeline.consumer.release %p, %s : !P, !cs
          %next = pipeline.state.advance %s : !cs
          scf.yield %next : !cs
        }
      }
    }
    gpu.return
  }
}

// -----

// (c) with a CTA pair, passing: one commit from each pair's leader, a
// group of 2.

!P = !pipeline.pipeline<tma_umma, stages = 3, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 2>, tx_count = 16384, cluster = #pipeline.cluster<2, 2, 1, 1>, multicast = m, cta_group = 2>
!ps = !pipeline.state<3, producer>
!cs = !pipeline.state<3, consumer>

gpu.module @m {
  gpu.func @pair_mma_multicast_counted_per_pair(%desc: !llvm.ptr, %buf: !llvm.ptr<3>, %n: index) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c32 = arith.constant 32 : index
    %x = arith.constant 0 : i32
    %two = arith.constant 2 : i32
    %p = pipeline.create {name = "ab"} : !P
    %tid = gpu.thread_id x
    %warp = arith.divui %tid, %c32 : index
    %rank = nvvm.read.ptx.sreg.cluster.ctarank : i32
    %is_tma = arith.cmpi eq, %warp, %c0 : index
    scf.if %is_tma {
      %s0 = pipeline.state.make : !ps
      %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
        pipeline.producer.acquire %p, %s : !P, !ps
        %elected = nvvm.elect.sync -> i1
        scf.if %elected {
          pipeline.copy.tma_load %p, %s, %desc[%x, %x] to %buf {bytes = 8192 : i64} : !P, !ps, !llvm.ptr, !llvm.ptr<3>
        }
        %next = pipeline.state.advance %s : !ps
        scf.yield %next : !ps
      }
      pipeline.producer.tail %p, %sN : !P, !ps
    }
    %is_mma = arith.cmpi eq, %warp, %c1 : index
    scf.if %is_mma {
      %r = arith.remui %rank, %two : i32
      %leader = arith.cmpi eq, %r, %x : i32
      scf.if %leader {
        %c = pipeline.state.make : !cs
        %cN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %c) -> (!cs) {
          pipeline.consumer.wait %p, %s : !P, !cs
          pipeline.consumer.release %p, %s : !P, !cs
          %next = pipeline.state.advance %s : !cs
          scf.yield %next : !cs
        }
      }
    }
    gpu.return
  }
}
