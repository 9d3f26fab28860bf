// RUN: not %python -m pipeline_mlir.sim %s --kernel issuer_only --arg 1=3 --schedules 20 | FileCheck %s --check-prefix=BUG
// RUN: %python -m pipeline_mlir.sim %s --kernel with_barrier --arg 1=3 --schedules 20 | FileCheck %s --check-prefix=OK

// A bulk or TMA store reads the whole tile the same source line wrote before
// it (sim/smemrace.py _tile), not only its first word. A warpgroup stages a
// tile (a word per thread), thread 0 TMA-stores it and waits for its reads
// (cp.async.bulk.wait_group.read); that wait orders thread 0 only, so the
// other warps' refill of the next tile needs a barrier after it
// (tile-ai/TileOPs#1550). issuer_only has none: warp 1's store (line 33)
// races the TMA store (line 37). with_barrier meets a barrier first.

// BUG: race on plain shared memory: warp {{[1-3]}} of CTA 0 writes shared memory at byte {{[0-9]+}} of CTA 0 with llvm.store at {{.*}}store_tile.mlir:33:{{[0-9]+}} while {{.*}} warp 0 of CTA 0's pipeline.copy.tma_store at {{.*}}store_tile.mlir:37:{{[0-9]+}}
// BUG: FAILED: 20 schedules, {{[0-9]+}} smem-race (@issuer_only, 1 CTA(s) x 4 warp(s); random, seed 0)
// OK: pipeline-sim: OK: 20 schedules, 0 deadlocks (@with_barrier, 1 CTA(s) x 4 warp(s); random, seed 0)

module attributes {gpu.container_module} {
  gpu.module @kernels [#nvvm.target<chip = "sm_90a">] {
    llvm.mlir.global external @__pipeline_dynamic_smem() {addr_space = 3 : i32, alignment = 1024 : i64} : !llvm.array<0 x i8>
    gpu.func @issuer_only(%arg0: !llvm.ptr, %arg1: i32) kernel attributes {known_block_size = array<i32: 128, 1, 1>} {
      %0 = llvm.mlir.addressof @__pipeline_dynamic_smem : !llvm.ptr<3>
      %c0 = arith.constant 0 : i32
      %c1 = arith.constant 1 : i32
      %c128 = arith.constant 128 : i32
      %tid = nvvm.read.ptx.sreg.tid.x : i32
      %first = arith.cmpi eq, %tid, %c0 : i32
      scf.for %t = %c0 to %arg1 step %c1 : i32 {
        scf.if %first {
          pipeline.bulk_group.wait {read}
        }
        %v = arith.muli %t, %c128 : i32
        %w = arith.addi %v, %tid : i32
        %p = llvm.getelementptr %0[%tid] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i32
        llvm.store %w, %p : i32, !llvm.ptr<3>
        nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
        nvvm.barrier0
        scf.if %first {
          pipeline.copy.tma_store %arg0[%c0, %t] from %0 : !llvm.ptr, <3>
          pipeline.bulk_group.commit
        }
      }
      scf.if %first {
        pipeline.bulk_group.wait
      }
      gpu.return
    }
    gpu.func @with_barrier(%arg0: !llvm.ptr, %arg1: i32) kernel attributes {known_block_size = array<i32: 128, 1, 1>} {
      %0 = llvm.mlir.addressof @__pipeline_dynamic_smem : !llvm.ptr<3>
      %c0 = arith.constant 0 : i32
      %c1 = arith.constant 1 : i32
      %c128 = arith.constant 128 : i32
      %tid = nvvm.read.ptx.sreg.tid.x : i32
      %first = arith.cmpi eq, %tid, %c0 : i32
      scf.for %t = %c0 to %arg1 step %c1 : i32 {
        scf.if %first {
          pipeline.bulk_group.wait {read}
        }
        nvvm.barrier0
        %v = arith.muli %t, %c128 : i32
        %w = arith.addi %v, %tid : i32
        %p = llvm.getelementptr %0[%tid] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i32
        llvm.store %w, %p : i32, !llvm.ptr<3>
        nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
        nvvm.barrier0
        scf.if %first {
          pipeline.copy.tma_store %arg0[%c0, %t] from %0 : !llvm.ptr, <3>
          pipeline.bulk_group.commit
        }
      }
      scf.if %first {
        pipeline.bulk_group.wait
      }
      gpu.return
    }
  }
}
