// RUN: %python -m pipeline_mlir.sim %s --kernel tmem_ok --schedules 10 | FileCheck %s --check-prefix=OK
// RUN: not %python -m pipeline_mlir.sim %s --kernel tmem_unwaited --schedules 5 | FileCheck %s --check-prefix=LD
// RUN: not %python -m pipeline_mlir.sim %s --kernel tmem_no_barrier --schedules 5 | FileCheck %s --check-prefix=ADDR
// RUN: not %python -m pipeline_mlir.sim %s --kernel tmem_pair --cluster 2 --schedules 5 | FileCheck %s --check-prefix=PAIR

// Tensor memory (sim/tmem.py). Two warps: warp 0 allocates 32 columns
// (tcgen05.alloc writes their address to shared memory byte 0) and gives up
// the permit; after fence / bar.sync 0 / fence each warp reads the address,
// loads its 32 lanes (tcgen05.ld), waits (tcgen05.wait::ld) and stores the
// value; after another bar.sync 0 warp 0 frees the columns.
// - tmem_unwaited stores the loaded value before the wait;
// - tmem_no_barrier reads the address with no barrier after the alloc;
// - tmem_pair allocates cta_group::2 columns for a CTA pair before any
//   cluster barrier wait (the peer may not have launched), and frees them
//   after a CTA barrier only (the peer's alloc is not ordered before it).

// OK: pipeline-sim: OK: 10 schedules, 0 deadlocks (@tmem_ok, 1 CTA(s) x 2 warp(s); random, seed 0)
// LD: pipeline-sim: tcgen05.ld used before its wait: tcgen05 wait: llvm.store uses the registers it loads while the tcgen05.ld at {{.*}}tmem.mlir:[[LDU:[0-9]+]]:{{[0-9]+}} of warp 0 of CTA 0 may still be in flight in lanes 0-31 (no tcgen05.wait::ld in those lanes before it)
// LD-NEXT: pipeline-sim: note: warp 0 of CTA 0 at {{.*}}tmem.mlir:[[STU:[0-9]+]]
// LD-NEXT: pipeline-sim: note: tcgen05.ld at {{.*}}tmem.mlir:[[LDU]]
// LD: pipeline-sim: FAILED: 5 schedules, 5 tcgen05-ld (@tmem_unwaited, 1 CTA(s) x 2 warp(s); random, seed 0)
// ADDR: pipeline-sim: race on plain shared memory: {{.*}}tcgen05.alloc at {{.*}}tmem.mlir:{{[0-9]+}}
// ADDR: pipeline-sim: FAILED: 5 schedules
// PAIR: pipeline-sim: tensor memory allocation: TMEM dealloc: warp 0 of CTA {{[01]}}'s tcgen05.dealloc.cta_group::2 frees tensor memory
// PAIR: pipeline-sim: cta_group::2 alloc before a cluster barrier: TMEM alloc: this tcgen05.alloc.cta_group::2 allocates for the CTA pair 0,1 before warp 0 of CTA {{[01]}} passed a cluster barrier wait
// PAIR: pipeline-sim: FAILED: 5 schedules, 5 pair-alloc, 5 tmem (@tmem_pair, 2 CTA(s) x 2 warp(s); random, seed 0)

module attributes {gpu.container_module} {
  gpu.module @kernels [#nvvm.target<chip = "sm_100a">] {
    llvm.mlir.global external @__pipeline_dynamic_smem() {addr_space = 3 : i32, alignment = 1024 : i64} : !llvm.array<0 x i8>

    gpu.func @tmem_ok() kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
      %smem = llvm.mlir.addressof @__pipeline_dynamic_smem : !llvm.ptr<3>
      %c16 = arith.constant 16 : i32
      %c32 = arith.constant 32 : i32
      %c0 = arith.constant 0 : i32
      %out = llvm.getelementptr %smem[%c16] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
      %tid = nvvm.read.ptx.sreg.tid.x : i32
      %warp = arith.divui %tid, %c32 : i32
      %w0 = arith.cmpi eq, %warp, %c0 : i32
      scf.if %w0 {
        nvvm.tcgen05.alloc %smem, %c32 : !llvm.ptr<3>, i32
        nvvm.tcgen05.relinquish_alloc_permit
      }
      nvvm.tcgen05.fence <before>
      nvvm.barrier0
      nvvm.tcgen05.fence <after>
      %addr = llvm.load %smem : !llvm.ptr<3> -> i32
      %rows = llvm.inttoptr %addr : i32 to !llvm.ptr<6>
      %v = nvvm.tcgen05.ld %rows {shape = #nvvm.tcgen05_ldst_shape<shape_32x32b>} : i32
      nvvm.tcgen05.wait <load>
      %slot = llvm.getelementptr %out[%tid] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i32
      llvm.store %v, %slot : i32, !llvm.ptr<3>
      nvvm.tcgen05.fence <before>
      nvvm.barrier0
      scf.if %w0 {
        nvvm.tcgen05.fence <after>
        %a2 = llvm.load %smem : !llvm.ptr<3> -> i32
        %t = llvm.inttoptr %a2 : i32 to !llvm.ptr<6>
        nvvm.tcgen05.dealloc %t, %c32 : !llvm.ptr<6>, i32
      }
      gpu.return
    }

    gpu.func @tmem_unwaited() kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
      %smem = llvm.mlir.addressof @__pipeline_dynamic_smem : !llvm.ptr<3>
      %c16 = arith.constant 16 : i32
      %c32 = arith.constant 32 : i32
      %c0 = arith.constant 0 : i32
      %out = llvm.getelementptr %smem[%c16] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
      %tid = nvvm.read.ptx.sreg.tid.x : i32
      %warp = arith.divui %tid, %c32 : i32
      %w0 = arith.cmpi eq, %warp, %c0 : i32
      scf.if %w0 {
        nvvm.tcgen05.alloc %smem, %c32 : !llvm.ptr<3>, i32
        nvvm.tcgen05.relinquish_alloc_permit
      }
      nvvm.tcgen05.fence <before>
      nvvm.barrier0
      nvvm.tcgen05.fence <after>
      %addr = llvm.load %smem : !llvm.ptr<3> -> i32
      %rows = llvm.inttoptr %addr : i32 to !llvm.ptr<6>
      %v = nvvm.tcgen05.ld %rows {shape = #nvvm.tcgen05_ldst_shape<shape_32x32b>} : i32
      %slot = llvm.getelementptr %out[%tid] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i32
      llvm.store %v, %slot : i32, !llvm.ptr<3>
      nvvm.tcgen05.wait <load>
      nvvm.tcgen05.fence <before>
      nvvm.barrier0
      scf.if %w0 {
        nvvm.tcgen05.fence <after>
        %a2 = llvm.load %smem : !llvm.ptr<3> -> i32
        %t = llvm.inttoptr %a2 : i32 to !llvm.ptr<6>
        nvvm.tcgen05.dealloc %t, %c32 : !llvm.ptr<6>, i32
      }
      gpu.return
    }

    gpu.func @tmem_no_barrier() kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
      %smem = llvm.mlir.addressof @__pipeline_dynamic_smem : !llvm.ptr<3>
      %c32 = arith.constant 32 : i32
      %c0 = arith.constant 0 : i32
      %tid = nvvm.read.ptx.sreg.tid.x : i32
      %warp = arith.divui %tid, %c32 : i32
      %w0 = arith.cmpi eq, %warp, %c0 : i32
      scf.if %w0 {
        nvvm.tcgen05.alloc %smem, %c32 : !llvm.ptr<3>, i32
        nvvm.tcgen05.relinquish_alloc_permit
      }
      %addr = llvm.load %smem : !llvm.ptr<3> -> i32
      %rows = llvm.inttoptr %addr : i32 to !llvm.ptr<6>
      %v = nvvm.tcgen05.ld %rows {shape = #nvvm.tcgen05_ldst_shape<shape_32x32b>} : i32
      nvvm.tcgen05.wait <load>
      nvvm.tcgen05.fence <before>
      nvvm.barrier0
      scf.if %w0 {
        nvvm.tcgen05.fence <after>
        nvvm.tcgen05.dealloc %rows, %c32 : !llvm.ptr<6>, i32
      }
      gpu.return
    }

    gpu.func @tmem_pair() kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
      %smem = llvm.mlir.addressof @__pipeline_dynamic_smem : !llvm.ptr<3>
      %c32 = arith.constant 32 : i32
      %c0 = arith.constant 0 : i32
      %tid = nvvm.read.ptx.sreg.tid.x : i32
      %warp = arith.divui %tid, %c32 : i32
      %w0 = arith.cmpi eq, %warp, %c0 : i32
      scf.if %w0 {
        nvvm.tcgen05.alloc %smem, %c32 {group = #nvvm.cta_group<cta_2>} : !llvm.ptr<3>, i32
        nvvm.tcgen05.relinquish_alloc_permit {group = #nvvm.cta_group<cta_2>}
      }
      nvvm.tcgen05.fence <before>
      nvvm.barrier0
      nvvm.tcgen05.fence <after>
      nvvm.tcgen05.fence <before>
      nvvm.barrier0
      scf.if %w0 {
        nvvm.tcgen05.fence <after>
        %addr = llvm.load %smem : !llvm.ptr<3> -> i32
        %t = llvm.inttoptr %addr : i32 to !llvm.ptr<6>
        nvvm.tcgen05.dealloc %t, %c32 {group = #nvvm.cta_group<cta_2>} : !llvm.ptr<6>, i32
      }
      gpu.return
    }
  }
}
