// The register budget of a warp-specialized kernel: the registers every
// warpgroup holds after its setmaxnreg (the launch's when it runs none:
// 65,536 / threads in steps of 8, at most 256) times 128 threads fit the
// 65,536-register file, or setmaxnreg.inc waits forever. Which warpgroups
// run a setmaxnreg comes from the thread conditions around it. Each bug has
// its twin; the check runs on kernels without pipelines too.
// RUN: pipeline-opt --pipeline-verify-protocol -split-input-file -verify-diagnostics %s

// The producer's setmaxnreg.dec dropped: warpgroup 0 keeps the launch's 168
// registers while the two consumer warpgroups raise theirs to 232.
gpu.module @m {
  gpu.func @producer_keeps_its_registers() kernel attributes {known_block_size = array<i32: 384, 1, 1>} {
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %c128 = arith.constant 128 : i32
    %c0 = arith.constant 0 : i32
    %wg = arith.divui %tid, %c128 : i32
    %producer = arith.cmpi eq, %wg, %c0 : i32
    scf.if %producer {
    } else {
      // expected-error @+2 {{register budget: warpgroups 1-2 at 232 registers per thread and warpgroup 0 at 168 (not resized: the entry registers) need 128 threads x (2 x 232 + 168) = 80896 > 65536 registers (the 65,536-register file of an SM): setmaxnreg.inc waits until the registers it asks for are free, and no warpgroup gives them back, so the kernel hangs (give warpgroup 0 a setmaxnreg.dec to at most 48, or lower the setmaxnreg.inc of warpgroups 1-2 to at most 168)}}
      // expected-note @+1 {{setmaxnreg.inc 232 runs in warpgroups 1-2 (warps 4-11)}}
      nvvm.setmaxregister increase 232
    }
    gpu.return
  }
}

// -----

// The twin: the producer gives registers back (40 + 2 x 232 = 504 per
// thread of a warpgroup, 64,512 registers).
gpu.module @m {
  gpu.func @producer_gives_registers_back() kernel attributes {known_block_size = array<i32: 384, 1, 1>} {
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %c128 = arith.constant 128 : i32
    %c0 = arith.constant 0 : i32
    %wg = arith.divui %tid, %c128 : i32
    %producer = arith.cmpi eq, %wg, %c0 : i32
    scf.if %producer {
      nvvm.setmaxregister decrease 40
    } else {
      nvvm.setmaxregister increase 232
    }
    gpu.return
  }
}

// -----

// Every warpgroup resized, still too many: four consumers at 160 and a
// producer at 40.
gpu.module @m {
  gpu.func @four_consumers_at_160() kernel attributes {known_block_size = array<i32: 640, 1, 1>} {
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %c128 = arith.constant 128 : i32
    %c0 = arith.constant 0 : i32
    %wg = arith.divui %tid, %c128 : i32
    %producer = arith.cmpi eq, %wg, %c0 : i32
    scf.if %producer {
      // expected-note @+1 {{setmaxnreg.dec 40 runs in warpgroup 0 (warps 0-3)}}
      nvvm.setmaxregister decrease 40
    } else {
      // expected-error @+2 {{register budget: warpgroups 1-4 at 160 registers per thread and warpgroup 0 at 40 need 128 threads x (4 x 160 + 40) = 87040 > 65536 registers (the 65,536-register file of an SM): setmaxnreg.inc waits until the registers it asks for are free, and no warpgroup gives them back, so the kernel hangs (lower the setmaxnreg.inc of warpgroups 1-4 to at most 112, or give the kernel fewer warpgroups)}}
      // expected-note @+1 {{setmaxnreg.inc 160 runs in warpgroups 1-4 (warps 4-19)}}
      nvvm.setmaxregister increase 160
    }
    gpu.return
  }
}

// -----

// The twin: the consumers ask for 112 (4 x 112 + 40 = 488, 62,464).
gpu.module @m {
  gpu.func @four_consumers_at_112() kernel attributes {known_block_size = array<i32: 640, 1, 1>} {
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %c128 = arith.constant 128 : i32
    %c0 = arith.constant 0 : i32
    %wg = arith.divui %tid, %c128 : i32
    %producer = arith.cmpi eq, %wg, %c0 : i32
    scf.if %producer {
      nvvm.setmaxregister decrease 40
    } else {
      nvvm.setmaxregister increase 112
    }
    gpu.return
  }
}

// -----

// Who runs the setmaxnreg depends on a kernel argument: not decided, not
// guessed.
gpu.module @m {
  gpu.func @roles_on_an_argument(%flag: i1) kernel attributes {known_block_size = array<i32: 640, 1, 1>} {
    scf.if %flag {
      nvvm.setmaxregister increase 240
    }
    gpu.return
  }
}
