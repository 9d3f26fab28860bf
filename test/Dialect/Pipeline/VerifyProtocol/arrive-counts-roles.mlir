// Property 6, implied arrive counts under the role idioms of the docs
// who releases is derived from the role conditions by
// evaluating them for every thread of the block -- `warpgroup < 4` with the
// warpgroup as tid // 128, `warp // 4 == i`, the else branch of a role split
// (the complement), and roles built in a Python loop (one scf.if per
// warpgroup). Each bug is next to its correct twin.
// RUN: pipeline-opt --pipeline-verify-protocol -split-input-file -verify-diagnostics %s

// (1) ThunderKittens#115: four consumer warpgroups (warpgroup < 4, the
// warpgroup index as tid // 128) release with every thread, 512 arrivals per
// phase, against a count sized for two warpgroups.

!P = !pipeline.pipeline<async, stages = 4, producer = #pipeline.group<thread, 128>, consumer = #pipeline.group<thread, 256>>
!ps = !pipeline.state<4, producer>
!cs = !pipeline.state<4, consumer>

gpu.module @kernels {
gpu.func @four_warpgroups_count_for_two(%n: index) kernel attributes {known_block_size = array<i32: 640, 1, 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %c32 = arith.constant 32 : index
  %c128 = arith.constant 128 : index
  %tid = gpu.thread_id x
  %zero = arith.constant 0 : i32
  %wg = arith.divsi %tid, %c128 : index
  // expected-error @+1 {{pipeline 'kv': the consumer group #pipeline.group<thread, 256> expects 256 arrivals per phase, but the consumer role (16 warps, whole-warp consumer.release) gives 512: phases complete early and producers overwrite a stage still being read; use #pipeline.group<thread, 512>}}
  %p = pipeline.create {name = "kv"} : !P
  %is_producer = arith.cmpi eq, %wg, %c4 : index
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
  %is_consumer = arith.cmpi slt, %wg, %c4 : index
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

// (1) twin: the count covers the four warpgroups.

!P = !pipeline.pipeline<async, stages = 4, producer = #pipeline.group<thread, 128>, consumer = #pipeline.group<thread, 512>>
!ps = !pipeline.state<4, producer>
!cs = !pipeline.state<4, consumer>

gpu.module @kernels {
gpu.func @four_warpgroups_count_for_four(%n: index) kernel attributes {known_block_size = array<i32: 640, 1, 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %c32 = arith.constant 32 : index
  %c128 = arith.constant 128 : index
  %tid = gpu.thread_id x
  %zero = arith.constant 0 : i32
  %wg = arith.divsi %tid, %c128 : index
  %p = pipeline.create {name = "kv"} : !P
  %is_producer = arith.cmpi eq, %wg, %c4 : index
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
  %is_consumer = arith.cmpi slt, %wg, %c4 : index
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

// (1) with a group counted in warps: <warp, 8> is 256 arrivals, the four
// warpgroups' 16 warps make 512.

!P = !pipeline.pipeline<async, stages = 4, producer = #pipeline.group<thread, 128>, consumer = #pipeline.group<warp, 8>>
!ps = !pipeline.state<4, producer>
!cs = !pipeline.state<4, consumer>

gpu.module @kernels {
gpu.func @four_warpgroups_count_eight_warps(%n: index) kernel attributes {known_block_size = array<i32: 640, 1, 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %c32 = arith.constant 32 : index
  %c128 = arith.constant 128 : index
  %tid = gpu.thread_id x
  %zero = arith.constant 0 : i32
  %wg = arith.divsi %tid, %c128 : index
  // expected-error @+1 {{pipeline 'kv': the consumer group #pipeline.group<warp, 8> expects 256 arrivals per phase, but the consumer role (16 warps, whole-warp consumer.release) gives 512: phases complete early and producers overwrite a stage still being read; use #pipeline.group<thread, 512>}}
  %p = pipeline.create {name = "kv"} : !P
  %is_producer = arith.cmpi eq, %wg, %c4 : index
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
  %is_consumer = arith.cmpi slt, %wg, %c4 : index
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

// (1) twin: <warp, 16>.

!P = !pipeline.pipeline<async, stages = 4, producer = #pipeline.group<thread, 128>, consumer = #pipeline.group<warp, 16>>
!ps = !pipeline.state<4, producer>
!cs = !pipeline.state<4, consumer>

gpu.module @kernels {
gpu.func @four_warpgroups_count_sixteen_warps(%n: index) kernel attributes {known_block_size = array<i32: 640, 1, 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %c32 = arith.constant 32 : index
  %c128 = arith.constant 128 : index
  %tid = gpu.thread_id x
  %zero = arith.constant 0 : i32
  %wg = arith.divsi %tid, %c128 : index
  %p = pipeline.create {name = "kv"} : !P
  %is_producer = arith.cmpi eq, %wg, %c4 : index
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
  %is_consumer = arith.cmpi slt, %wg, %c4 : index
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

// (2) `warp // 4 == 1`: one consumer warpgroup releasing with elect_one
// makes one arrive per warp, 4 per phase, not 8.

!P = !pipeline.pipeline<async, stages = 4, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 8>>
!ps = !pipeline.state<4, producer>
!cs = !pipeline.state<4, consumer>

gpu.module @kernels {
gpu.func @warpgroup_elect_count_8(%n: index) kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %c32 = arith.constant 32 : index
  %c128 = arith.constant 128 : index
  %tid = gpu.thread_id x
  %zero = arith.constant 0 : i32
  %warp = arith.divsi %tid, %c32 : index
  %wg = arith.divsi %warp, %c4 : index
  // expected-error @+1 {{pipeline 'kv': the consumer group #pipeline.group<thread, 8> expects 8 arrivals per phase, but the consumer role (4 warps, consumer.release elect_one: one arrive per warp) gives 4: the empty barrier never completes and the producers wait forever; use #pipeline.group<thread, 4>}}
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
  %is_consumer = arith.cmpi eq, %wg, %c1 : index
  // expected-note @+1 {{the consumer role}}
  scf.if %is_consumer {
    %c = pipeline.state.make : !cs
    %cN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %c) -> (!cs) {
      pipeline.consumer.wait %p, %s : !P, !cs
      // expected-note @+1 {{the consumer role releases here}}
      pipeline.consumer.release %p, %s {elect_one} : !P, !cs
      %next = pipeline.state.advance %s : !cs
      scf.yield %next : !cs
    }
  }
  gpu.return
}
}

// -----

// (2) twin: four warps, four arrivals.

!P = !pipeline.pipeline<async, stages = 4, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 4>>
!ps = !pipeline.state<4, producer>
!cs = !pipeline.state<4, consumer>

gpu.module @kernels {
gpu.func @warpgroup_elect_count_4(%n: index) kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %c32 = arith.constant 32 : index
  %c128 = arith.constant 128 : index
  %tid = gpu.thread_id x
  %zero = arith.constant 0 : i32
  %warp = arith.divsi %tid, %c32 : index
  %wg = arith.divsi %warp, %c4 : index
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
  %is_consumer = arith.cmpi eq, %wg, %c1 : index
  scf.if %is_consumer {
    %c = pipeline.state.make : !cs
    %cN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %c) -> (!cs) {
      pipeline.consumer.wait %p, %s : !P, !cs
      pipeline.consumer.release %p, %s {elect_one} : !P, !cs
      %next = pipeline.state.advance %s : !cs
      scf.yield %next : !cs
    }
  }
  gpu.return
}
}

// -----

// (3) A role split with else: warpgroup 0 produces, the else branch (the
// other two warpgroups of a 384-thread block) releases with 256 threads.

!P = !pipeline.pipeline<async, stages = 4, producer = #pipeline.group<thread, 128>, consumer = #pipeline.group<thread, 128>>
!ps = !pipeline.state<4, producer>
!cs = !pipeline.state<4, consumer>

gpu.module @kernels {
gpu.func @else_branch_two_warpgroups_count_one(%n: index) kernel attributes {known_block_size = array<i32: 384, 1, 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %c32 = arith.constant 32 : index
  %c128 = arith.constant 128 : index
  %tid = gpu.thread_id x
  %zero = arith.constant 0 : i32
  %warp = arith.divsi %tid, %c32 : index
  %wg = arith.divsi %warp, %c4 : index
  // expected-error @+1 {{pipeline 'kv': the consumer group #pipeline.group<thread, 128> expects 128 arrivals per phase, but the consumer role (8 warps, whole-warp consumer.release) gives 256: phases complete early and producers overwrite a stage still being read; use #pipeline.group<thread, 256>}}
  %p = pipeline.create {name = "kv"} : !P
  %is_producer = arith.cmpi eq, %wg, %c0 : index
  // expected-note @+1 {{the consumer role}}
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

// (3) twin: the else branch's 256 threads are counted.

!P = !pipeline.pipeline<async, stages = 4, producer = #pipeline.group<thread, 128>, consumer = #pipeline.group<thread, 256>>
!ps = !pipeline.state<4, producer>
!cs = !pipeline.state<4, consumer>

gpu.module @kernels {
gpu.func @else_branch_two_warpgroups_count_two(%n: index) kernel attributes {known_block_size = array<i32: 384, 1, 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %c32 = arith.constant 32 : index
  %c128 = arith.constant 128 : index
  %tid = gpu.thread_id x
  %zero = arith.constant 0 : i32
  %warp = arith.divsi %tid, %c32 : index
  %wg = arith.divsi %warp, %c4 : index
  %p = pipeline.create {name = "kv"} : !P
  %is_producer = arith.cmpi eq, %wg, %c0 : index
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

// (4) cutlass#2418: ping-pong consumer warpgroups (each a role of its own,
// built in a Python loop) declared with a count of one thread: 256 arrivals
// per phase if both released every stage, 128 when they take turns, never 1.

!P = !pipeline.pipeline<async, stages = 4, producer = #pipeline.group<thread, 128>, consumer = #pipeline.group<thread, 1>>
!ps = !pipeline.state<4, producer>
!cs = !pipeline.state<4, consumer>

gpu.module @kernels {
gpu.func @pingpong_count_one(%n: index, %k: i32) kernel attributes {known_block_size = array<i32: 384, 1, 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %c32 = arith.constant 32 : index
  %c128 = arith.constant 128 : index
  %tid = gpu.thread_id x
  %zero = arith.constant 0 : i32
  %kk = arith.index_cast %k : i32 to index
  %warp = arith.divsi %tid, %c32 : index
  %wg = arith.divsi %warp, %c4 : index
  // expected-error @+1 {{pipeline 'kv': the consumer group #pipeline.group<thread, 1> expects 1 arrivals per phase, but 2 consumer roles release it (warps 4-7: whole-warp consumer.release, 128; warps 8-11: whole-warp consumer.release, 128): if every role releases every stage the barrier gets 256 per phase (phases complete early and producers overwrite a stage still being read), if they take turns (ping-pong) 128 (phases complete early and producers overwrite a stage still being read); use #pipeline.group<thread, 256> when every role releases each stage, or #pipeline.group<thread, 128> when they take turns}}
  %p = pipeline.create {name = "kv"} : !P
  %is_producer = arith.cmpi eq, %wg, %c0 : index
  %n2 = arith.muli %n, %c2 : index
  scf.if %is_producer {
    %s0 = pipeline.state.make : !ps
    %sN = scf.for %t = %c0 to %n2 step %c1 iter_args(%st = %s0) -> (!ps) {
      %sK = scf.for %i = %c0 to %kk step %c1 iter_args(%s = %st) -> (!ps) {
        pipeline.producer.acquire %p, %s : !P, !ps
        pipeline.producer.commit %p, %s : !P, !ps
        %next = pipeline.state.advance %s : !ps
        scf.yield %next : !ps
      }
      scf.yield %sK : !ps
    }
    pipeline.producer.tail %p, %sN : !P, !ps
  }
  %is_consumer1 = arith.cmpi eq, %wg, %c1 : index
  scf.if %is_consumer1 {
    %c00 = pipeline.state.make : !cs
    %c = pipeline.state.advance %c00 by %zero : !cs
    %cN = scf.for %t = %c0 to %n step %c1 iter_args(%st = %c) -> (!cs) {
      %sK = scf.for %i = %c0 to %kk step %c1 iter_args(%s = %st) -> (!cs) {
        pipeline.consumer.wait %p, %s : !P, !cs
      // expected-note @+1 {{a consumer role (warps 4-7) releases here}}
        pipeline.consumer.release %p, %s : !P, !cs
        %next = pipeline.state.advance %s : !cs
        scf.yield %next : !cs
      }
      // Skip the other warpgroup's tile.
      %skip = pipeline.state.advance %sK by %k : !cs
      scf.yield %skip : !cs
    }
  }
  %is_consumer2 = arith.cmpi eq, %wg, %c2 : index
  scf.if %is_consumer2 {
    %c00 = pipeline.state.make : !cs
    %c = pipeline.state.advance %c00 by %k : !cs
    %cN = scf.for %t = %c0 to %n step %c1 iter_args(%st = %c) -> (!cs) {
      %sK = scf.for %i = %c0 to %kk step %c1 iter_args(%s = %st) -> (!cs) {
        pipeline.consumer.wait %p, %s : !P, !cs
      // expected-note @+1 {{a consumer role (warps 8-11) releases here}}
        pipeline.consumer.release %p, %s : !P, !cs
        %next = pipeline.state.advance %s : !cs
        scf.yield %next : !cs
      }
      // Skip the other warpgroup's tile.
      %skip = pipeline.state.advance %sK by %k : !cs
      scf.yield %skip : !cs
    }
  }
  gpu.return
}
}

// -----

// (4) twin: one warpgroup's 128 threads release each stage.

!P = !pipeline.pipeline<async, stages = 4, producer = #pipeline.group<thread, 128>, consumer = #pipeline.group<thread, 128>>
!ps = !pipeline.state<4, producer>
!cs = !pipeline.state<4, consumer>

gpu.module @kernels {
gpu.func @pingpong_count_128(%n: index, %k: i32) kernel attributes {known_block_size = array<i32: 384, 1, 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %c32 = arith.constant 32 : index
  %c128 = arith.constant 128 : index
  %tid = gpu.thread_id x
  %zero = arith.constant 0 : i32
  %kk = arith.index_cast %k : i32 to index
  %warp = arith.divsi %tid, %c32 : index
  %wg = arith.divsi %warp, %c4 : index
  %p = pipeline.create {name = "kv"} : !P
  %is_producer = arith.cmpi eq, %wg, %c0 : index
  %n2 = arith.muli %n, %c2 : index
  scf.if %is_producer {
    %s0 = pipeline.state.make : !ps
    %sN = scf.for %t = %c0 to %n2 step %c1 iter_args(%st = %s0) -> (!ps) {
      %sK = scf.for %i = %c0 to %kk step %c1 iter_args(%s = %st) -> (!ps) {
        pipeline.producer.acquire %p, %s : !P, !ps
        pipeline.producer.commit %p, %s : !P, !ps
        %next = pipeline.state.advance %s : !ps
        scf.yield %next : !ps
      }
      scf.yield %sK : !ps
    }
    pipeline.producer.tail %p, %sN : !P, !ps
  }
  %is_consumer1 = arith.cmpi eq, %wg, %c1 : index
  scf.if %is_consumer1 {
    %c00 = pipeline.state.make : !cs
    %c = pipeline.state.advance %c00 by %zero : !cs
    %cN = scf.for %t = %c0 to %n step %c1 iter_args(%st = %c) -> (!cs) {
      %sK = scf.for %i = %c0 to %kk step %c1 iter_args(%s = %st) -> (!cs) {
        pipeline.consumer.wait %p, %s : !P, !cs
        pipeline.consumer.release %p, %s : !P, !cs
        %next = pipeline.state.advance %s : !cs
        scf.yield %next : !cs
      }
      // Skip the other warpgroup's tile.
      %skip = pipeline.state.advance %sK by %k : !cs
      scf.yield %skip : !cs
    }
  }
  %is_consumer2 = arith.cmpi eq, %wg, %c2 : index
  scf.if %is_consumer2 {
    %c00 = pipeline.state.make : !cs
    %c = pipeline.state.advance %c00 by %k : !cs
    %cN = scf.for %t = %c0 to %n step %c1 iter_args(%st = %c) -> (!cs) {
      %sK = scf.for %i = %c0 to %kk step %c1 iter_args(%s = %st) -> (!cs) {
        pipeline.consumer.wait %p, %s : !P, !cs
        pipeline.consumer.release %p, %s : !P, !cs
        %next = pipeline.state.advance %s : !cs
        scf.yield %next : !cs
      }
      // Skip the other warpgroup's tile.
      %skip = pipeline.state.advance %sK by %k : !cs
      scf.yield %skip : !cs
    }
  }
  gpu.return
}
}

// -----

// (4) twin with one code for both warpgroups: the first tile's offset is
// computed from the warpgroup index, so the roles may take turns and one
// warpgroup's count is accepted.

!P = !pipeline.pipeline<async, stages = 4, producer = #pipeline.group<thread, 128>, consumer = #pipeline.group<thread, 128>>
!ps = !pipeline.state<4, producer>
!cs = !pipeline.state<4, consumer>

gpu.module @kernels {
gpu.func @pingpong_warp_offset_count_128(%n: index, %k: i32) kernel attributes {known_block_size = array<i32: 384, 1, 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %c32 = arith.constant 32 : index
  %c128 = arith.constant 128 : index
  %tid = gpu.thread_id x
  %zero = arith.constant 0 : i32
  %kk = arith.index_cast %k : i32 to index
  %warp = arith.divsi %tid, %c32 : index
  %wg = arith.divsi %warp, %c4 : index
  %p = pipeline.create {name = "kv"} : !P
  %is_producer = arith.cmpi eq, %wg, %c0 : index
  %n2 = arith.muli %n, %c2 : index
  scf.if %is_producer {
    %s0 = pipeline.state.make : !ps
    %sN = scf.for %t = %c0 to %n2 step %c1 iter_args(%st = %s0) -> (!ps) {
      %sK = scf.for %i = %c0 to %kk step %c1 iter_args(%s = %st) -> (!ps) {
        pipeline.producer.acquire %p, %s : !P, !ps
        pipeline.producer.commit %p, %s : !P, !ps
        %next = pipeline.state.advance %s : !ps
        scf.yield %next : !ps
      }
      scf.yield %sK : !ps
    }
    pipeline.producer.tail %p, %sN : !P, !ps
  }
  %wg32 = arith.index_cast %wg : index to i32
  %one32 = arith.constant 1 : i32
  %turn = arith.subi %wg32, %one32 : i32
  %first = arith.muli %turn, %k : i32
  %is_consumer1 = arith.cmpi eq, %wg, %c1 : index
  scf.if %is_consumer1 {
    %c00 = pipeline.state.make : !cs
    %c = pipeline.state.advance %c00 by %first : !cs
    %cN = scf.for %t = %c0 to %n step %c1 iter_args(%st = %c) -> (!cs) {
      %sK = scf.for %i = %c0 to %kk step %c1 iter_args(%s = %st) -> (!cs) {
        pipeline.consumer.wait %p, %s : !P, !cs
        pipeline.consumer.release %p, %s : !P, !cs
        %next = pipeline.state.advance %s : !cs
        scf.yield %next : !cs
      }
      // Skip the other warpgroup's tile.
      %skip = pipeline.state.advance %sK by %k : !cs
      scf.yield %skip : !cs
    }
  }
  %is_consumer2 = arith.cmpi eq, %wg, %c2 : index
  scf.if %is_consumer2 {
    %c00 = pipeline.state.make : !cs
    %c = pipeline.state.advance %c00 by %first : !cs
    %cN = scf.for %t = %c0 to %n step %c1 iter_args(%st = %c) -> (!cs) {
      %sK = scf.for %i = %c0 to %kk step %c1 iter_args(%s = %st) -> (!cs) {
        pipeline.consumer.wait %p, %s : !P, !cs
        pipeline.consumer.release %p, %s : !P, !cs
        %next = pipeline.state.advance %s : !cs
        scf.yield %next : !cs
      }
      // Skip the other warpgroup's tile.
      %skip = pipeline.state.advance %sK by %k : !cs
      scf.yield %skip : !cs
    }
  }
  gpu.return
}
}

// -----

// (5) ThunderKittens#115 with the consumer warpgroups built in a loop: four
// roles with the same code, so each releases every stage: 512 arrivals, not
// the 256 of two warpgroups.

!P = !pipeline.pipeline<async, stages = 4, producer = #pipeline.group<thread, 128>, consumer = #pipeline.group<thread, 256>>
!ps = !pipeline.state<4, producer>
!cs = !pipeline.state<4, consumer>

gpu.module @kernels {
gpu.func @loop_roles_four_count_two(%n: index) kernel attributes {known_block_size = array<i32: 640, 1, 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %c32 = arith.constant 32 : index
  %c128 = arith.constant 128 : index
  %tid = gpu.thread_id x
  %zero = arith.constant 0 : i32
  %warp = arith.divsi %tid, %c32 : index
  %wg = arith.divsi %warp, %c4 : index
  // expected-error @+1 {{pipeline 'kv': the consumer group #pipeline.group<thread, 256> expects 256 arrivals per phase, but 4 consumer roles release it (warps 4-7: whole-warp consumer.release, 128; warps 8-11: whole-warp consumer.release, 128; warps 12-15: whole-warp consumer.release, 128; warps 16-19: whole-warp consumer.release, 128): the roles run the same code, which does not depend on the warp index, so each releases every stage and the barrier gets 512 per phase: phases complete early and producers overwrite a stage still being read; use #pipeline.group<thread, 512>}}
  %p = pipeline.create {name = "kv"} : !P
  %is_producer = arith.cmpi eq, %wg, %c0 : index
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
  %is_consumer1 = arith.cmpi eq, %wg, %c1 : index
  scf.if %is_consumer1 {
    %c = pipeline.state.make : !cs
    %cN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %c) -> (!cs) {
      pipeline.consumer.wait %p, %s : !P, !cs
      // expected-note @+1 {{a consumer role (warps 4-7) releases here}}
      pipeline.consumer.release %p, %s : !P, !cs
      %next = pipeline.state.advance %s : !cs
      scf.yield %next : !cs
    }
  }
  %is_consumer2 = arith.cmpi eq, %wg, %c2 : index
  scf.if %is_consumer2 {
    %c = pipeline.state.make : !cs
    %cN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %c) -> (!cs) {
      pipeline.consumer.wait %p, %s : !P, !cs
      // expected-note @+1 {{a consumer role (warps 8-11) releases here}}
      pipeline.consumer.release %p, %s : !P, !cs
      %next = pipeline.state.advance %s : !cs
      scf.yield %next : !cs
    }
  }
  %is_consumer3 = arith.cmpi eq, %wg, %c3 : index
  scf.if %is_consumer3 {
    %c = pipeline.state.make : !cs
    %cN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %c) -> (!cs) {
      pipeline.consumer.wait %p, %s : !P, !cs
      // expected-note @+1 {{a consumer role (warps 12-15) releases here}}
      pipeline.consumer.release %p, %s : !P, !cs
      %next = pipeline.state.advance %s : !cs
      scf.yield %next : !cs
    }
  }
  %is_consumer4 = arith.cmpi eq, %wg, %c4 : index
  scf.if %is_consumer4 {
    %c = pipeline.state.make : !cs
    %cN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %c) -> (!cs) {
      pipeline.consumer.wait %p, %s : !P, !cs
      // expected-note @+1 {{a consumer role (warps 16-19) releases here}}
      pipeline.consumer.release %p, %s : !P, !cs
      %next = pipeline.state.advance %s : !cs
      scf.yield %next : !cs
    }
  }
  gpu.return
}
}

// -----

// (5) twin: four warpgroups, 512.

!P = !pipeline.pipeline<async, stages = 4, producer = #pipeline.group<thread, 128>, consumer = #pipeline.group<thread, 512>>
!ps = !pipeline.state<4, producer>
!cs = !pipeline.state<4, consumer>

gpu.module @kernels {
gpu.func @loop_roles_four_count_four(%n: index) kernel attributes {known_block_size = array<i32: 640, 1, 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %c32 = arith.constant 32 : index
  %c128 = arith.constant 128 : index
  %tid = gpu.thread_id x
  %zero = arith.constant 0 : i32
  %warp = arith.divsi %tid, %c32 : index
  %wg = arith.divsi %warp, %c4 : index
  %p = pipeline.create {name = "kv"} : !P
  %is_producer = arith.cmpi eq, %wg, %c0 : index
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
  %is_consumer1 = arith.cmpi eq, %wg, %c1 : index
  scf.if %is_consumer1 {
    %c = pipeline.state.make : !cs
    %cN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %c) -> (!cs) {
      pipeline.consumer.wait %p, %s : !P, !cs
      pipeline.consumer.release %p, %s : !P, !cs
      %next = pipeline.state.advance %s : !cs
      scf.yield %next : !cs
    }
  }
  %is_consumer2 = arith.cmpi eq, %wg, %c2 : index
  scf.if %is_consumer2 {
    %c = pipeline.state.make : !cs
    %cN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %c) -> (!cs) {
      pipeline.consumer.wait %p, %s : !P, !cs
      pipeline.consumer.release %p, %s : !P, !cs
      %next = pipeline.state.advance %s : !cs
      scf.yield %next : !cs
    }
  }
  %is_consumer3 = arith.cmpi eq, %wg, %c3 : index
  scf.if %is_consumer3 {
    %c = pipeline.state.make : !cs
    %cN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %c) -> (!cs) {
      pipeline.consumer.wait %p, %s : !P, !cs
      pipeline.consumer.release %p, %s : !P, !cs
      %next = pipeline.state.advance %s : !cs
      scf.yield %next : !cs
    }
  }
  %is_consumer4 = arith.cmpi eq, %wg, %c4 : index
  scf.if %is_consumer4 {
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

// (6) Cooperative warpgroups declared with one warpgroup's count: the
// roles run the same code, so a ping-pong reading (128 each) does not apply.

!P = !pipeline.pipeline<async, stages = 4, producer = #pipeline.group<thread, 128>, consumer = #pipeline.group<thread, 128>>
!ps = !pipeline.state<4, producer>
!cs = !pipeline.state<4, consumer>

gpu.module @kernels {
gpu.func @loop_roles_two_count_one_warpgroup(%n: index) kernel attributes {known_block_size = array<i32: 384, 1, 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %c32 = arith.constant 32 : index
  %c128 = arith.constant 128 : index
  %tid = gpu.thread_id x
  %zero = arith.constant 0 : i32
  %warp = arith.divsi %tid, %c32 : index
  %wg = arith.divsi %warp, %c4 : index
  // expected-error @+1 {{pipeline 'kv': the consumer group #pipeline.group<thread, 128> expects 128 arrivals per phase, but 2 consumer roles release it (warps 4-7: whole-warp consumer.release, 128; warps 8-11: whole-warp consumer.release, 128): the roles run the same code, which does not depend on the warp index, so each releases every stage and the barrier gets 256 per phase: phases complete early and producers overwrite a stage still being read; use #pipeline.group<thread, 256>}}
  %p = pipeline.create {name = "kv"} : !P
  %is_producer = arith.cmpi eq, %wg, %c0 : index
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
  %is_consumer1 = arith.cmpi eq, %wg, %c1 : index
  scf.if %is_consumer1 {
    %c = pipeline.state.make : !cs
    %cN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %c) -> (!cs) {
      pipeline.consumer.wait %p, %s : !P, !cs
      // expected-note @+1 {{a consumer role (warps 4-7) releases here}}
      pipeline.consumer.release %p, %s : !P, !cs
      %next = pipeline.state.advance %s : !cs
      scf.yield %next : !cs
    }
  }
  %is_consumer2 = arith.cmpi eq, %wg, %c2 : index
  scf.if %is_consumer2 {
    %c = pipeline.state.make : !cs
    %cN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %c) -> (!cs) {
      pipeline.consumer.wait %p, %s : !P, !cs
      // expected-note @+1 {{a consumer role (warps 8-11) releases here}}
      pipeline.consumer.release %p, %s : !P, !cs
      %next = pipeline.state.advance %s : !cs
      scf.yield %next : !cs
    }
  }
  gpu.return
}
}

// -----

// (6) twin: both warpgroups counted.

!P = !pipeline.pipeline<async, stages = 4, producer = #pipeline.group<thread, 128>, consumer = #pipeline.group<thread, 256>>
!ps = !pipeline.state<4, producer>
!cs = !pipeline.state<4, consumer>

gpu.module @kernels {
gpu.func @loop_roles_two_count_two(%n: index) kernel attributes {known_block_size = array<i32: 384, 1, 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %c32 = arith.constant 32 : index
  %c128 = arith.constant 128 : index
  %tid = gpu.thread_id x
  %zero = arith.constant 0 : i32
  %warp = arith.divsi %tid, %c32 : index
  %wg = arith.divsi %warp, %c4 : index
  %p = pipeline.create {name = "kv"} : !P
  %is_producer = arith.cmpi eq, %wg, %c0 : index
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
  %is_consumer1 = arith.cmpi eq, %wg, %c1 : index
  scf.if %is_consumer1 {
    %c = pipeline.state.make : !cs
    %cN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %c) -> (!cs) {
      pipeline.consumer.wait %p, %s : !P, !cs
      pipeline.consumer.release %p, %s : !P, !cs
      %next = pipeline.state.advance %s : !cs
      scf.yield %next : !cs
    }
  }
  %is_consumer2 = arith.cmpi eq, %wg, %c2 : index
  scf.if %is_consumer2 {
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

// (7) Not decided, so not reported: the warpgroup index comes in as an
// argument of a helper function (it may be anything), so who releases is
// unknown, whatever the count.

!P = !pipeline.pipeline<async, stages = 4, producer = #pipeline.group<thread, 128>, consumer = #pipeline.group<thread, 7>>
!ps = !pipeline.state<4, producer>
!cs = !pipeline.state<4, consumer>

func.func @helper_warpgroup_argument(%n: index, %wg: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %p = pipeline.create {name = "kv"} : !P
  %is_producer = arith.cmpi eq, %wg, %c0 : index
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
  %is_consumer = arith.cmpi slt, %wg, %c1 : index
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
