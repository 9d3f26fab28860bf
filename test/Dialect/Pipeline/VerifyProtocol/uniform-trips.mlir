// Check 19, every participant reaches a barrier equally often
// (UniformTripChecks.cpp): a block-wide bar.sync 0 under a warp-role
// branch (NVIDIA/Fuser#4187); a named barrier synced in a loop whose trip
// count differs between the warps it counts (intel/sycl-tla#830); a ring
// whose barriers the CTAs of a cluster share, in a loop whose trip count
// differs between those CTAs (deepseek-ai/DeepGEMM#415), or under a branch
// whose condition differs between them (DeepGEMM#415's second form); an
// aligned named barrier synced at different sites by warps of different
// roles (mlc-ai/TIRx-kernels#21). Each bug sits next
// to its correct twin, and each rule next to a kernel just on the other
// side of its boundary; they must stay silent.
// RUN: pipeline-opt --pipeline-verify-protocol -split-input-file -verify-diagnostics %s

// Bug: the compute warps' read-after-write sync is a block-wide barrier
// inside their branch; warp 4 never reaches it.
gpu.module @m {
  gpu.func @block_sync_in_role(%n: index) kernel attributes {known_block_size = array<i32: 160, 1, 1>} {
    %c4 = arith.constant 4 : i32
    %c32 = arith.constant 32 : i32
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %warp = arith.divui %tid, %c32 : i32
    %compute = arith.cmpi ult, %warp, %c4 : i32
    // expected-note @+1 {{the warp-role branch starts here}}
    scf.if %compute {
      pipeline.named_barrier.sync id = 2, threads = 128
      // expected-error @+1 {{block-wide barrier (bar.sync 0, k.sync_threads()) inside a warp-role branch, reached by warps 0-3 of the CTA's 5 (rule: bar.sync 0 is an aligned barrier over every thread of the CTA}}
      gpu.barrier
    }
    gpu.return
  }
}

// -----

// Twin: the compute warps sync on a named barrier of their own.
gpu.module @m {
  gpu.func @named_sync_in_role(%n: index) kernel attributes {known_block_size = array<i32: 160, 1, 1>} {
    %c4 = arith.constant 4 : i32
    %c32 = arith.constant 32 : i32
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %warp = arith.divui %tid, %c32 : i32
    %compute = arith.cmpi ult, %warp, %c4 : i32
    scf.if %compute {
      pipeline.named_barrier.sync id = 2, threads = 128
      pipeline.named_barrier.sync id = 1, threads = 128
    }
    gpu.return
  }
}

// -----

// Boundary: a branch every warp of the block takes (`warp < 5` in a block
// of 5 warps) is no role split; its block-wide barrier is reached by all.
gpu.module @m {
  gpu.func @block_sync_all_warps(%n: index) kernel attributes {known_block_size = array<i32: 160, 1, 1>} {
    %c5 = arith.constant 5 : i32
    %c32 = arith.constant 32 : i32
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %warp = arith.divui %tid, %c32 : i32
    %all = arith.cmpi ult, %warp, %c5 : i32
    scf.if %all {
      pipeline.named_barrier.sync id = 2, threads = 160
      gpu.barrier
    }
    gpu.return
  }
}

// -----

// Bug: each warp bounds its k-loop by its own causal diagonal (q * 4 + warp
// + 1) and syncs the four warps inside it.
gpu.module @m {
  gpu.func @barrier_in_per_warp_loop(%q: i32) kernel attributes {known_block_size = array<i32: 128, 1, 1>} {
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %c4 = arith.constant 4 : i32
    %c32 = arith.constant 32 : i32
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %warp = arith.divui %tid, %c32 : i32
    %q4 = arith.muli %q, %c4 : i32
    %diag = arith.addi %q4, %warp : i32
    %n = arith.addi %diag, %c1 : i32
    // expected-note @+1 {{the loop whose bounds depend on the warp}}
    scf.for %kb = %c0 to %n step %c1 : i32 {
      // expected-error @+1 {{named barrier 1 (128 threads) synced inside a loop whose trip count differs between the warps it counts: warp 0 runs the loop 5 times, warp 1 6 times (with %arg0 = 1)}}
      pipeline.named_barrier.sync id = 1, threads = 128
    }
    gpu.return
  }
}

// -----

// Bug: the same loop around the block-wide barrier of the whole CTA (the
// work-group barrier of intel/sycl-tla#830).
gpu.module @m {
  gpu.func @block_sync_in_per_warp_loop(%q: i32) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %c32 = arith.constant 32 : i32
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %warp = arith.divui %tid, %c32 : i32
    %n = arith.addi %q, %warp : i32
    pipeline.named_barrier.sync id = 1, threads = 64
    // expected-note @+1 {{the loop whose bounds depend on the warp}}
    scf.for %kb = %c0 to %n step %c1 : i32 {
      // expected-error @+1 {{block-wide barrier (bar.sync 0, k.sync_threads()) synced inside a loop whose trip count differs between the warps it counts: warp 0 runs the loop 1 times, warp 1 2 times (with %arg0 = 1)}}
      gpu.barrier
    }
    gpu.return
  }
}

// -----

// Twin: every warp runs to the CTA's last diagonal (q * 4 + 4).
gpu.module @m {
  gpu.func @barrier_in_cta_loop(%q: i32) kernel attributes {known_block_size = array<i32: 128, 1, 1>} {
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %c4 = arith.constant 4 : i32
    %q4 = arith.muli %q, %c4 : i32
    %n = arith.addi %q4, %c4 : i32
    scf.for %kb = %c0 to %n step %c1 : i32 {
      pipeline.named_barrier.sync id = 1, threads = 128
    }
    gpu.return
  }
}

// -----

// Boundary: a ping-pong loop (`range(warpgroup, n, 2)`) differs between the
// two warpgroups, but each warpgroup syncs on a barrier that counts its own
// four warps only: within one barrier's warps the trip count is the same.
gpu.module @m {
  gpu.func @pingpong_own_barriers(%n: i32) kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %c2 = arith.constant 2 : i32
    %c128 = arith.constant 128 : i32
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %wg = arith.divui %tid, %c128 : i32
    %is0 = arith.cmpi eq, %wg, %c0 : i32
    scf.for %t = %wg to %n step %c2 : i32 {
      scf.if %is0 {
        pipeline.named_barrier.sync id = 1, threads = 128
      } else {
        pipeline.named_barrier.sync id = 2, threads = 128
      }
    }
    gpu.return
  }
}

// -----

!T = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 8>, tx_count = 4096, cluster = #pipeline.cluster<1, 2, 1, 1>, multicast = m>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>

// Bug: a multicast ring shared by the two CTAs of the cluster; each CTA's
// k-loop has n + block_id k-blocks (its own tile's group).
gpu.module @m {
  gpu.func @multicast_trips_per_cta(%n: index, %desc: !llvm.ptr, %buf: !llvm.ptr<3>) kernel attributes {known_block_size = array<i32: 160, 1, 1>, known_cluster_size = array<i32: 2, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c4 = arith.constant 4 : index
    %c32 = arith.constant 32 : index
    %x = arith.constant 0 : i32
    %mask = arith.constant 3 : i16
    // expected-note @+1 {{pipeline 'ab' is created here}}
    %p = pipeline.create {name = "ab"} : !T
    %bid = gpu.block_id x
    %k = arith.addi %n, %bid : index
    %tid = gpu.thread_id x
    %w = arith.divui %tid, %c32 : index
    %isp = arith.cmpi eq, %w, %c4 : index
    scf.if %isp {
      %s0 = pipeline.state.make : !ps
      // expected-note @+1 {{the loop whose trip count differs between the CTAs}}
      %sN = scf.for %i = %c0 to %k step %c1 iter_args(%s = %s0) -> (!ps) {
        // expected-error @+1 {{pipeline 'ab': its barriers are shared by the 2 CTAs of the cluster (multicast loads land in every CTA of the mask and the consumers release the stage in each of them, or a 2-CTA pair), but a loop around this verb runs a number of times that differs between those CTAs: the CTA of rank 0 runs it 1 times, the CTA of rank 1 2 times (block ids 0..1, %arg0 = 1)}}
        pipeline.producer.acquire %p, %s : !T, !ps
        %elected = nvvm.elect.sync -> i1
        scf.if %elected {
          pipeline.copy.tma_load %p, %s, %desc[%x, %x] to %buf multicast %mask {bytes = 2048 : i64} : !T, !ps, !llvm.ptr, !llvm.ptr<3>
        }
        pipeline.producer.commit %p, %s : !T, !ps
        %sn = pipeline.state.advance %s : !ps
        scf.yield %sn : !ps
      }
      pipeline.producer.tail %p, %sN : !T, !ps
    } else {
      %c0s = pipeline.state.make : !cs
      %cN = scf.for %i = %c0 to %k step %c1 iter_args(%c = %c0s) -> (!cs) {
        pipeline.consumer.wait %p, %c : !T, !cs
        pipeline.consumer.release %p, %c : !T, !cs
        %cn = pipeline.state.advance %c : !cs
        scf.yield %cn : !cs
      }
    }
    gpu.return
  }
}

// -----

!T = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 8>, tx_count = 4096, cluster = #pipeline.cluster<1, 2, 1, 1>, multicast = m>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>

// Twin: the k-loop length comes from the cluster's first tile
// (block_id / 2 * 2), the same in both CTAs.
gpu.module @m {
  gpu.func @multicast_trips_per_cluster(%n: index, %desc: !llvm.ptr, %buf: !llvm.ptr<3>) kernel attributes {known_block_size = array<i32: 160, 1, 1>, known_cluster_size = array<i32: 2, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c4 = arith.constant 4 : index
    %c32 = arith.constant 32 : index
    %x = arith.constant 0 : i32
    %mask = arith.constant 3 : i16
    %p = pipeline.create {name = "ab"} : !T
    %bid = gpu.block_id x
    %pair = arith.divui %bid, %c2 : index
    %first = arith.muli %pair, %c2 : index
    %k = arith.addi %n, %first : index
    %tid = gpu.thread_id x
    %w = arith.divui %tid, %c32 : index
    %isp = arith.cmpi eq, %w, %c4 : index
    scf.if %isp {
      %s0 = pipeline.state.make : !ps
      %sN = scf.for %i = %c0 to %k step %c1 iter_args(%s = %s0) -> (!ps) {
        pipeline.producer.acquire %p, %s : !T, !ps
        %elected = nvvm.elect.sync -> i1
        scf.if %elected {
          pipeline.copy.tma_load %p, %s, %desc[%x, %x] to %buf multicast %mask {bytes = 2048 : i64} : !T, !ps, !llvm.ptr, !llvm.ptr<3>
        }
        pipeline.producer.commit %p, %s : !T, !ps
        %sn = pipeline.state.advance %s : !ps
        scf.yield %sn : !ps
      }
      pipeline.producer.tail %p, %sN : !T, !ps
    } else {
      %c0s = pipeline.state.make : !cs
      %cN = scf.for %i = %c0 to %k step %c1 iter_args(%c = %c0s) -> (!cs) {
        pipeline.consumer.wait %p, %c : !T, !cs
        pipeline.consumer.release %p, %c : !T, !cs
        %cn = pipeline.state.advance %c : !cs
        scf.yield %cn : !cs
      }
    }
    gpu.return
  }
}

// -----

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 128>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>

// Boundary: a ring of its own in every CTA (no multicast) may run a
// different number of stages in each CTA of the cluster.
gpu.module @m {
  gpu.func @local_ring_trips_per_cta(%n: index) kernel attributes {known_block_size = array<i32: 160, 1, 1>, known_cluster_size = array<i32: 2, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c4 = arith.constant 4 : index
    %c32 = arith.constant 32 : index
    %p = pipeline.create {name = "ab"} : !P
    %bid = gpu.block_id x
    %k = arith.addi %n, %bid : index
    %tid = gpu.thread_id x
    %w = arith.divui %tid, %c32 : index
    %isp = arith.cmpi eq, %w, %c4 : index
    scf.if %isp {
      %s0 = pipeline.state.make : !ps
      %sN = scf.for %i = %c0 to %k step %c1 iter_args(%s = %s0) -> (!ps) {
        pipeline.producer.acquire %p, %s : !P, !ps
        pipeline.producer.commit %p, %s : !P, !ps
        %sn = pipeline.state.advance %s : !ps
        scf.yield %sn : !ps
      }
      pipeline.producer.tail %p, %sN : !P, !ps
    } else {
      %c0s = pipeline.state.make : !cs
      %cN = scf.for %i = %c0 to %k step %c1 iter_args(%c = %c0s) -> (!cs) {
        pipeline.consumer.wait %p, %c : !P, !cs
        pipeline.consumer.release %p, %c : !P, !cs
        %cn = pipeline.state.advance %c : !cs
        scf.yield %cn : !cs
      }
    }
    gpu.return
  }
}

// -----

!T = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 8>, tx_count = 4096, cluster = #pipeline.cluster<1, 2, 1, 1>, multicast = m>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>

// Bug (DeepGEMM#415, the second form): each CTA decides from its own tile
// whether multicast is valid (the next tile of its group exists); where a
// cluster straddles two groups, one CTA multicasts half the tile into both
// CTAs while its peer loads the whole tile alone: the first CTA's barrier
// waits for bytes its peer never sends.
gpu.module @m {
  gpu.func @multicast_valid_per_cta(%n: index, %tpg: index, %desc: !llvm.ptr, %buf: !llvm.ptr<3>) kernel attributes {known_block_size = array<i32: 160, 1, 1>, known_cluster_size = array<i32: 2, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c4 = arith.constant 4 : index
    %c32 = arith.constant 32 : index
    %x = arith.constant 0 : i32
    %mask = arith.constant 3 : i16
    // expected-note @+1 {{pipeline 'ab' is created here}}
    %p = pipeline.create {name = "ab"} : !T
    %bid = gpu.block_id x
    %tile = arith.addi %bid, %c0 : index
    %in = arith.remui %tile, %tpg : index
    %next = arith.addi %in, %c1 : index
    %valid = arith.cmpi ult, %next, %tpg : index
    %tid = gpu.thread_id x
    %w = arith.divui %tid, %c32 : index
    %isp = arith.cmpi eq, %w, %c4 : index
    scf.if %isp {
      %s0 = pipeline.state.make : !ps
      %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
        pipeline.producer.acquire %p, %s : !T, !ps
        %elected = nvvm.elect.sync -> i1
        scf.if %elected {
          // expected-note @+1 {{the branch whose condition differs between the CTAs}}
          scf.if %valid {
            // expected-error @+1 {{pipeline 'ab': its barriers are shared by the 2 CTAs of the cluster (multicast loads land in every CTA of the mask and the consumers release the stage in each of them, or a 2-CTA pair), but this op sits under a branch whose condition differs between those CTAs: in the cluster of block ids 2..3 (%arg1 = 4), the CTA of rank 0 runs this op, the CTA of rank 1 skips it, while in other clusters the ranks agree (rule: the CTAs that share a ring's barriers make the same arrivals and copies; a split by rank is the same in every cluster)}}
            pipeline.copy.tma_load %p, %s, %desc[%x, %x] to %buf multicast %mask {bytes = 2048 : i64} : !T, !ps, !llvm.ptr, !llvm.ptr<3>
          } else {
            pipeline.copy.tma_load %p, %s, %desc[%x, %x] to %buf {bytes = 4096 : i64} : !T, !ps, !llvm.ptr, !llvm.ptr<3>
          }
        }
        pipeline.producer.commit %p, %s : !T, !ps
        %sn = pipeline.state.advance %s : !ps
        scf.yield %sn : !ps
      }
      pipeline.producer.tail %p, %sN : !T, !ps
    } else {
      %c0s = pipeline.state.make : !cs
      %cN = scf.for %i = %c0 to %n step %c1 iter_args(%c = %c0s) -> (!cs) {
        pipeline.consumer.wait %p, %c : !T, !cs
        pipeline.consumer.release %p, %c : !T, !cs
        %cn = pipeline.state.advance %c : !cs
        scf.yield %cn : !cs
      }
    }
    gpu.return
  }
}

// -----

!T = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 8>, tx_count = 4096, cluster = #pipeline.cluster<1, 2, 1, 1>, multicast = m>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>

// Twin: the decision comes from the cluster's first tile (block_id / 2 * 2),
// the same in both CTAs.
gpu.module @m {
  gpu.func @multicast_valid_per_cluster(%n: index, %tpg: index, %desc: !llvm.ptr, %buf: !llvm.ptr<3>) kernel attributes {known_block_size = array<i32: 160, 1, 1>, known_cluster_size = array<i32: 2, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c4 = arith.constant 4 : index
    %c32 = arith.constant 32 : index
    %x = arith.constant 0 : i32
    %mask = arith.constant 3 : i16
    %p = pipeline.create {name = "ab"} : !T
    %bid = gpu.block_id x
    %pair = arith.divui %bid, %c2 : index
    %tile = arith.muli %pair, %c2 : index
    %in = arith.remui %tile, %tpg : index
    %next = arith.addi %in, %c1 : index
    %valid = arith.cmpi ult, %next, %tpg : index
    %tid = gpu.thread_id x
    %w = arith.divui %tid, %c32 : index
    %isp = arith.cmpi eq, %w, %c4 : index
    scf.if %isp {
      %s0 = pipeline.state.make : !ps
      %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
        pipeline.producer.acquire %p, %s : !T, !ps
        %elected = nvvm.elect.sync -> i1
        scf.if %elected {
          scf.if %valid {
            pipeline.copy.tma_load %p, %s, %desc[%x, %x] to %buf multicast %mask {bytes = 2048 : i64} : !T, !ps, !llvm.ptr, !llvm.ptr<3>
          } else {
            pipeline.copy.tma_load %p, %s, %desc[%x, %x] to %buf {bytes = 4096 : i64} : !T, !ps, !llvm.ptr, !llvm.ptr<3>
          }
        }
        pipeline.producer.commit %p, %s : !T, !ps
        %sn = pipeline.state.advance %s : !ps
        scf.yield %sn : !ps
      }
      pipeline.producer.tail %p, %sN : !T, !ps
    } else {
      %c0s = pipeline.state.make : !cs
      %cN = scf.for %i = %c0 to %n step %c1 iter_args(%c = %c0s) -> (!cs) {
        pipeline.consumer.wait %p, %c : !T, !cs
        pipeline.consumer.release %p, %c : !T, !cs
        %cn = pipeline.state.advance %c : !cs
        scf.yield %cn : !cs
      }
    }
    gpu.return
  }
}

// -----

!T = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 8>, tx_count = 4096, cluster = #pipeline.cluster<1, 2, 1, 1>, multicast = m>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>

// Boundary: a branch on the CTA's rank alone differs between the CTAs of a
// cluster the same way in every cluster: a designed split (check 11 counts
// its stages per rank), not a disagreement.
gpu.module @m {
  gpu.func @multicast_split_by_rank(%n: index, %tpg: index, %desc: !llvm.ptr, %buf: !llvm.ptr<3>) kernel attributes {known_block_size = array<i32: 160, 1, 1>, known_cluster_size = array<i32: 2, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c4 = arith.constant 4 : index
    %c32 = arith.constant 32 : index
    %x = arith.constant 0 : i32
    %mask = arith.constant 3 : i16
    %p = pipeline.create {name = "ab"} : !T
    %bid = gpu.block_id x
    %r = nvvm.read.ptx.sreg.cluster.ctarank : i32
    %tile = arith.index_cast %r : i32 to index
    %in = arith.remui %tile, %tpg : index
    %next = arith.addi %in, %c1 : index
    %valid = arith.cmpi ult, %next, %tpg : index
    %tid = gpu.thread_id x
    %w = arith.divui %tid, %c32 : index
    %isp = arith.cmpi eq, %w, %c4 : index
    scf.if %isp {
      %s0 = pipeline.state.make : !ps
      %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
        pipeline.producer.acquire %p, %s : !T, !ps
        %elected = nvvm.elect.sync -> i1
        scf.if %elected {
          scf.if %valid {
            pipeline.copy.tma_load %p, %s, %desc[%x, %x] to %buf multicast %mask {bytes = 2048 : i64} : !T, !ps, !llvm.ptr, !llvm.ptr<3>
          } else {
            pipeline.copy.tma_load %p, %s, %desc[%x, %x] to %buf {bytes = 4096 : i64} : !T, !ps, !llvm.ptr, !llvm.ptr<3>
          }
        }
        pipeline.producer.commit %p, %s : !T, !ps
        %sn = pipeline.state.advance %s : !ps
        scf.yield %sn : !ps
      }
      pipeline.producer.tail %p, %sN : !T, !ps
    } else {
      %c0s = pipeline.state.make : !cs
      %cN = scf.for %i = %c0 to %n step %c1 iter_args(%c = %c0s) -> (!cs) {
        pipeline.consumer.wait %p, %c : !T, !cs
        pipeline.consumer.release %p, %c : !T, !cs
        %cn = pipeline.state.advance %c : !cs
        scf.yield %cn : !cs
      }
    }
    gpu.return
  }
}

// -----

// Bug (mlc-ai/TIRx-kernels#21): named barrier 3 counts the four compute
// warps and the producer warp, which sync on it at their own sites in their
// own role branches; `bar.sync` is aligned, so the blocking participants
// of one generation must run the same instruction.
gpu.module @m {
  gpu.func @aligned_sync_across_roles(%n: index) kernel attributes {known_block_size = array<i32: 160, 1, 1>} {
    %c4 = arith.constant 4 : i32
    %c32 = arith.constant 32 : i32
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %warp = arith.divui %tid, %c32 : i32
    %isp = arith.cmpi eq, %warp, %c4 : i32
    scf.if %isp {
      // expected-note @+1 {{the other site of that generation, in another role}}
      pipeline.named_barrier.sync id = 3, threads = 160
    } else {
      // expected-error @+1 {{aligned named barrier 3 (bar.sync 3, 160) synced by warps 0-3 here and by warp 4 at another site, in one generation (rule: the blocking participants of an aligned barrier run the same barrier instruction; warps of different roles syncing at their own sites is undefined, a divergent barrier): use the unaligned form at these sites (NamedBarrier.wait_unaligned(), `unaligned` on pipeline.named_barrier.sync: barrier.cta.sync), or let all sides but the one that waits arrive (NamedBarrier.arrive(): bar.arrive)}}
      pipeline.named_barrier.sync id = 3, threads = 160
    }
    gpu.return
  }
}

// -----

// Twin: the same hand-over with the unaligned form at both sites.
gpu.module @m {
  gpu.func @unaligned_sync_across_roles(%n: index) kernel attributes {known_block_size = array<i32: 160, 1, 1>} {
    %c4 = arith.constant 4 : i32
    %c32 = arith.constant 32 : i32
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %warp = arith.divui %tid, %c32 : i32
    %isp = arith.cmpi eq, %warp, %c4 : i32
    scf.if %isp {
      pipeline.named_barrier.sync id = 3, threads = 160 {unaligned}
    } else {
      pipeline.named_barrier.sync id = 3, threads = 160 {unaligned}
    }
    gpu.return
  }
}

// -----

// Twin: the producer warp arrives (bar.arrive), only the compute warps
// block, at one site.
gpu.module @m {
  gpu.func @arrive_then_sync_across_roles(%n: index) kernel attributes {known_block_size = array<i32: 160, 1, 1>} {
    %c4 = arith.constant 4 : i32
    %c32 = arith.constant 32 : i32
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %warp = arith.divui %tid, %c32 : i32
    %isp = arith.cmpi eq, %warp, %c4 : i32
    scf.if %isp {
      pipeline.named_barrier.arrive id = 3, threads = 160
    } else {
      pipeline.named_barrier.sync id = 3, threads = 160
    }
    gpu.return
  }
}

// -----

// Boundary: two aligned sites on one id reached by the same warps (one
// role's barrier used twice, each generation completed at one site) are no
// divergent barrier.
gpu.module @m {
  gpu.func @aligned_sync_one_role_two_sites(%n: index) kernel attributes {known_block_size = array<i32: 160, 1, 1>} {
    %c4 = arith.constant 4 : i32
    %c32 = arith.constant 32 : i32
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %warp = arith.divui %tid, %c32 : i32
    %compute = arith.cmpi ult, %warp, %c4 : i32
    scf.if %compute {
      pipeline.named_barrier.sync id = 3, threads = 128
      pipeline.named_barrier.sync id = 3, threads = 128
    }
    gpu.return
  }
}
