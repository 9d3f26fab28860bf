// Property 9, second part: a warp that only syncs on a named barrier needs,
// for each of its syncs, one arrival of every warp the barrier counts.
// Warp 0 fills a buffer and arrives on id 1; warp 1 waits on id 1, reads
// it and arrives on id 2; warp 0 waits on id 2 before refilling (not
// before the first tile). A chunk without expected-* lines is a correct
// twin: any diagnostic fails it.
// RUN: pipeline-opt --pipeline-verify-protocol -split-input-file -verify-diagnostics %s

// The bug: warp 1's sync on id 1 doubled. It syncs 2 * n times, warp 0
// arrives n times: its last syncs never complete.
gpu.module @m {
  gpu.func @sync_doubled(%n: index) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %c32 = arith.constant 32 : i32
    %i0 = arith.constant 0 : index
    %i1 = arith.constant 1 : index
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %warp = arith.divui %tid, %c32 : i32
    %last = arith.subi %n, %i1 : index
    %isp = arith.cmpi eq, %warp, %c0 : i32
    scf.if %isp {
      scf.for %k = %i0 to %n step %i1 {
        %notfirst = arith.cmpi ugt, %k, %i0 : index
        scf.if %notfirst {
          pipeline.named_barrier.sync id = 2, threads = 64
        }
        // expected-note @+1 {{reached by warp 0, %arg0 times}}
        pipeline.named_barrier.arrive id = 1, threads = 64
      }
    }
    %isc = arith.cmpi eq, %warp, %c1 : i32
    scf.if %isc {
      scf.for %k = %i0 to %n step %i1 {
        // expected-error @+1 {{named barrier id 1 counts 64 threads (warps 0-1); warp 1 only syncs on it}}
        pipeline.named_barrier.sync id = 1, threads = 64
        // expected-note @+1 {{reached by warp 1}}
        pipeline.named_barrier.sync id = 1, threads = 64
        %notlast = arith.cmpi ult, %k, %last : index
        scf.if %notlast {
          pipeline.named_barrier.arrive id = 2, threads = 64
        }
      }
    }
    gpu.return
  }
}

// -----

// The bug: warp 1's arrive on id 2 dropped. Warp 0 syncs on id 2 with
// nobody to meet it.
gpu.module @m {
  gpu.func @arrive_dropped(%n: index) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %c32 = arith.constant 32 : i32
    %i0 = arith.constant 0 : index
    %i1 = arith.constant 1 : index
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %warp = arith.divui %tid, %c32 : i32
    %isp = arith.cmpi eq, %warp, %c0 : i32
    scf.if %isp {
      scf.for %k = %i0 to %n step %i1 {
        %notfirst = arith.cmpi ugt, %k, %i0 : index
        scf.if %notfirst {
          // expected-error @+1 {{named barrier id 2 counts 64 threads but only warp 0 (32 threads) reach it: this sync never completes}}
          pipeline.named_barrier.sync id = 2, threads = 64
        }
        pipeline.named_barrier.arrive id = 1, threads = 64
      }
    }
    %isc = arith.cmpi eq, %warp, %c1 : i32
    scf.if %isc {
      scf.for %k = %i0 to %n step %i1 {
        pipeline.named_barrier.sync id = 1, threads = 64
      }
    }
    gpu.return
  }
}

// -----

// The correct twin: n arrivals for n syncs on id 1, n - 1 for n - 1 on
// id 2.
gpu.module @m {
  gpu.func @hand_over(%n: index) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %c32 = arith.constant 32 : i32
    %i0 = arith.constant 0 : index
    %i1 = arith.constant 1 : index
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %warp = arith.divui %tid, %c32 : i32
    %last = arith.subi %n, %i1 : index
    %isp = arith.cmpi eq, %warp, %c0 : i32
    scf.if %isp {
      scf.for %k = %i0 to %n step %i1 {
        %notfirst = arith.cmpi ugt, %k, %i0 : index
        scf.if %notfirst {
          pipeline.named_barrier.sync id = 2, threads = 64
        }
        pipeline.named_barrier.arrive id = 1, threads = 64
      }
    }
    %isc = arith.cmpi eq, %warp, %c1 : i32
    scf.if %isc {
      scf.for %k = %i0 to %n step %i1 {
        pipeline.named_barrier.sync id = 1, threads = 64
        %notlast = arith.cmpi ult, %k, %last : index
        scf.if %notlast {
          pipeline.named_barrier.arrive id = 2, threads = 64
        }
      }
    }
    gpu.return
  }
}

// -----

// A dangling arrive: warp 0 arrives once more than warp 1 syncs (a start
// signal). Nothing hangs, but nothing holds warp 0 back in its loop: two of
// its arrivals can complete a generation on their own, and warp 1's sync
// can pair with the start signal and run before warp 0's work of that
// iteration (the simulator reports the arrive count). Refused by the rule
// of an arrive-only role (named-barrier-arrive-only.mlir).
gpu.module @m {
  gpu.func @extra_arrive(%n: index) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %c32 = arith.constant 32 : i32
    %i0 = arith.constant 0 : index
    %i1 = arith.constant 1 : index
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %warp = arith.divui %tid, %c32 : i32
    %isp = arith.cmpi eq, %warp, %c0 : i32
    scf.if %isp {
      pipeline.named_barrier.arrive id = 1, threads = 64
      // expected-note @+1 {{the arriving warps' loop}}
      scf.for %k = %i0 to %n step %i1 {
        // expected-error @+1 {{named barrier 1: warp 0 arrive on it in each iteration of this loop and never wait there on anything the warps that sync on it (warp 1) signal: an arrive-only role can run ahead a whole phase}}
        pipeline.named_barrier.arrive id = 1, threads = 64
      }
    }
    %isc = arith.cmpi eq, %warp, %c1 : i32
    scf.if %isc {
      scf.for %k = %i0 to %n step %i1 {
        // expected-note @+1 {{the other side syncs on it here}}
        pipeline.named_barrier.sync id = 1, threads = 64
      }
    }
    gpu.return
  }
}

// -----

// The bug: warp 0's arrive doubled. Its two arrivals complete each
// generation of id 1 on their own (64 threads), so warp 1's sync waits for
// a generation its partner already passed.
gpu.module @m {
  gpu.func @arrive_doubled(%n: index) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %c32 = arith.constant 32 : i32
    %i0 = arith.constant 0 : index
    %i1 = arith.constant 1 : index
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %warp = arith.divui %tid, %c32 : i32
    %isp = arith.cmpi eq, %warp, %c0 : i32
    scf.if %isp {
      // expected-note @+1 {{the arriving warps' loop}}
      scf.for %k = %i0 to %n step %i1 {
        // expected-error @+2 {{named barrier id 1 counts 64 threads (warps 0-1); warp 1 only syncs on it, %arg0 times, but the warps arrive 3 * %arg0 times in all, %arg0 more than its syncs use: a warp arrives twice in one generation}}
        // expected-error @+1 {{named barrier 1: warp 0 arrive on it in each iteration of this loop and never wait there on anything the warps that sync on it (warp 1) signal: an arrive-only role can run ahead a whole phase}}
        pipeline.named_barrier.arrive id = 1, threads = 64
        // expected-note @+1 {{reached by warp 0, %arg0 times}}
        pipeline.named_barrier.arrive id = 1, threads = 64
      }
    }
    %isc = arith.cmpi eq, %warp, %c1 : i32
    scf.if %isc {
      scf.for %k = %i0 to %n step %i1 {
        // expected-note @+2 {{reached by warp 1, %arg0 times}}
        // expected-note @+1 {{the other side syncs on it here}}
        pipeline.named_barrier.sync id = 1, threads = 64
      }
    }
    gpu.return
  }
}
