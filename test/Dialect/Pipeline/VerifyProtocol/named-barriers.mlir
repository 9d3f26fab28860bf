// Property 9: named barrier ids, thread counts and the warps that reach them
// (256-thread blocks: warps 0-7). Each bug has its correct twin.
// RUN: pipeline-opt --pipeline-verify-protocol=block-dim=256 -split-input-file -verify-diagnostics %s

// Two warpgroups each sync "their" 128-thread barrier, both on id 1: every
// phase completes with a mix of both (the one-launch-in-dozens hang).
func.func @two_roles_one_id() {
  %tid = gpu.thread_id x
  %c128 = arith.constant 128 : index
  %wg0 = arith.cmpi ult, %tid, %c128 : index
  scf.if %wg0 {
    // expected-error @+1 {{named barrier id 1 counts 128 threads but 256 threads (warps 0-7) reach it: this pipeline.named_barrier.sync (warps 0-3) and pipeline.named_barrier.sync (warps 4-7) are roles that run at the same time on one id; give each its own id}}
    pipeline.named_barrier.sync id = 1, threads = 128
  } else {
    // expected-note @+1 {{the other user of id 1}}
    pipeline.named_barrier.sync id = 1, threads = 128
  }
  return
}

// -----

// Twin: one id per warpgroup.
func.func @two_roles_two_ids() {
  %tid = gpu.thread_id x
  %c128 = arith.constant 128 : index
  %wg0 = arith.cmpi ult, %tid, %c128 : index
  scf.if %wg0 {
    pipeline.named_barrier.sync id = 1, threads = 128
  } else {
    pipeline.named_barrier.sync id = 2, threads = 128
  }
  return
}

// -----

// Per-role barriers `1 + index` (as the Hopper GEMM's epilogue), one per
// pair of consumer warps, with the index planted wrong ((warp / 2 - 2) / 2:
// 0 for both pairs).
func.func @indexed_ids_collide() {
  %tid = gpu.thread_id x
  %c2 = arith.constant 2 : index
  %c32 = arith.constant 32 : index
  %c128 = arith.constant 128 : index
  %warp = arith.divui %tid, %c32 : index
  %in_wg = arith.cmpi uge, %tid, %c128 : index
  scf.if %in_wg {
    %pair = arith.divui %warp, %c2 : index
    %cw = arith.subi %pair, %c2 : index
    %bad = arith.divui %cw, %c2 : index
    %i = arith.index_cast %bad : index to i32
    // expected-error @+1 {{named barrier id 1 counts 64 threads but 128 threads (warps 4-7) reach it; num_threads must equal the threads of the warps that reach it}}
    pipeline.named_barrier.sync id = 1, threads = 64 index %i
  }
  return
}

// -----

// Twin: `1 + (warp / 2 - 2)` gives warps 4-5 id 1 and warps 6-7 id 2.
func.func @indexed_ids_distinct() {
  %tid = gpu.thread_id x
  %c2 = arith.constant 2 : index
  %c32 = arith.constant 32 : index
  %c128 = arith.constant 128 : index
  %warp = arith.divui %tid, %c32 : index
  %in_wg = arith.cmpi uge, %tid, %c128 : index
  scf.if %in_wg {
    %pair = arith.divui %warp, %c2 : index
    %cw = arith.subi %pair, %c2 : index
    %i = arith.index_cast %cw : index to i32
    pipeline.named_barrier.sync id = 1, threads = 64 index %i
  }
  return
}

// -----

// Id 0 is __syncthreads' barrier.
func.func @id_zero_next_to_syncthreads() {
  %tid = gpu.thread_id x
  %c128 = arith.constant 128 : index
  // expected-note @+1 {{the block-wide use of id 0}}
  gpu.barrier
  %wg0 = arith.cmpi ult, %tid, %c128 : index
  scf.if %wg0 {
    // expected-error @+1 {{pipeline.named_barrier.sync uses barrier id 0, which gpu.barrier also uses as the block-wide barrier (bar.sync 0, all threads): the two collide; use an id in 1..15}}
    pipeline.named_barrier.sync id = 0, threads = 128
  }
  return
}

// -----

// Twin: any other id.
func.func @id_three_next_to_syncthreads() {
  %tid = gpu.thread_id x
  %c128 = arith.constant 128 : index
  gpu.barrier
  %wg0 = arith.cmpi ult, %tid, %c128 : index
  scf.if %wg0 {
    pipeline.named_barrier.sync id = 3, threads = 128
  }
  return
}

// -----

// A producer warpgroup arrives, a consumer warpgroup syncs, but the count
// says 128: two barriers' worth of threads on one.
func.func @arrive_sync_count_too_small() {
  %tid = gpu.thread_id x
  %c128 = arith.constant 128 : index
  %wg0 = arith.cmpi ult, %tid, %c128 : index
  scf.if %wg0 {
    // expected-error @+1 {{named barrier id 4 counts 128 threads but 256 threads (warps 0-7) reach it}}
    pipeline.named_barrier.arrive id = 4, threads = 128
  } else {
    // expected-note @+1 {{the other user of id 4}}
    pipeline.named_barrier.sync id = 4, threads = 128
  }
  return
}

// -----

// Twin: the count is both warpgroups.
func.func @arrive_sync_count_right() {
  %tid = gpu.thread_id x
  %c128 = arith.constant 128 : index
  %wg0 = arith.cmpi ult, %tid, %c128 : index
  scf.if %wg0 {
    pipeline.named_barrier.arrive id = 4, threads = 256
  } else {
    pipeline.named_barrier.sync id = 4, threads = 256
  }
  return
}

// -----

// Only one warpgroup reaches a 256-thread barrier: it never completes.
func.func @count_too_large() {
  %tid = gpu.thread_id x
  %c128 = arith.constant 128 : index
  %wg1 = arith.cmpi uge, %tid, %c128 : index
  scf.if %wg1 {
    // expected-error @+1 {{named barrier id 2 waits for 256 threads but only 128 (warps 4-7) reach it: it never completes}}
    pipeline.named_barrier.sync id = 2, threads = 256
  }
  return
}

// -----

// One id, two counts.
func.func @one_id_two_counts() {
  %tid = gpu.thread_id x
  %c128 = arith.constant 128 : index
  %wg0 = arith.cmpi ult, %tid, %c128 : index
  scf.if %wg0 {
    // expected-note @+1 {{the other user of id 5}}
    pipeline.named_barrier.sync id = 5, threads = 128
  } else {
    // expected-error @+1 {{named barrier id 5 is used with 256 threads here (warps 4-7) and with 128 threads by another pipeline.named_barrier.sync (warps 0-3): two barriers share one id; give each its own id}}
    pipeline.named_barrier.sync id = 5, threads = 256
  }
  return
}

// -----

// An aligned bar.sync from one elected lane.
func.func @aligned_bar_in_one_lane() {
  %e = nvvm.elect.sync -> i1
  scf.if %e {
    // expected-error @+1 {{pipeline.named_barrier.arrive is executed by 1 lanes of warp 0: an aligned bar.sync / bar.arrive needs every lane of the warp}}
    pipeline.named_barrier.arrive id = 6, threads = 256
  }
  return
}
