// The register budget of a CTA that shares its SM: `register-file` is the
// share one CTA may hold (two CTAs per SM: 32,768 registers each). Python's
// check_register_budget asks the same rule this way for a kernel launched
// with min_ctas_per_sm = 2.
// RUN: pipeline-opt --pipeline-verify-protocol="register-file=32768" -split-input-file -verify-diagnostics %s

// 40 + 2 x 104 = 248 per thread of a warpgroup: 31,744 registers fit half
// the file.
gpu.module @m {
  gpu.func @fits_half_the_file() kernel attributes {known_block_size = array<i32: 384, 1, 1>} {
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %c128 = arith.constant 128 : i32
    %c0 = arith.constant 0 : i32
    %wg = arith.divui %tid, %c128 : i32
    %producer = arith.cmpi eq, %wg, %c0 : i32
    scf.if %producer {
      nvvm.setmaxregister decrease 40
    } else {
      nvvm.setmaxregister increase 104
    }
    gpu.return
  }
}

// -----

// The twin: 40 + 2 x 112 = 264 per thread, 33,792 registers, over the
// share (the whole file would hold them).
gpu.module @m {
  gpu.func @over_half_the_file() kernel attributes {known_block_size = array<i32: 384, 1, 1>} {
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %c128 = arith.constant 128 : i32
    %c0 = arith.constant 0 : i32
    %wg = arith.divui %tid, %c128 : i32
    %producer = arith.cmpi eq, %wg, %c0 : i32
    scf.if %producer {
      // expected-note @+1 {{setmaxnreg.dec 40 runs in warpgroup 0 (warps 0-3)}}
      nvvm.setmaxregister decrease 40
    } else {
      // expected-error @+2 {{register budget: warpgroups 1-2 at 112 registers per thread and warpgroup 0 at 40 need 128 threads x (2 x 112 + 40) = 33792 > 32768 registers (the 32,768-register file of an SM): setmaxnreg.inc waits until the registers it asks for are free, and no warpgroup gives them back, so the kernel hangs (lower the setmaxnreg.inc of warpgroups 1-2 to at most 104, or give the kernel fewer warpgroups)}}
      // expected-note @+1 {{setmaxnreg.inc 112 runs in warpgroups 1-2 (warps 4-11)}}
      nvvm.setmaxregister increase 112
    }
    gpu.return
  }
}
