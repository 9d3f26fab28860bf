// The parameter names the Python Kernel records for the checker's messages
// (`{pipeline.name = "..."}` in the gpu.func's arg_attrs) change nothing
// below the checker: the gpu.func lowering leaves argument attributes
// behind, and the PTX of a kernel with names is the PTX of one without.
// RUN: pipeline-opt %s --pipeline-to-nvvm | FileCheck %s --check-prefix=NVVM
// RUN: pipeline-opt %s --pipeline-to-cubin="chip=sm_90a format=isa" | %python %S/Inputs/ptx.py > %t.named
// RUN: sed -e 's/ {pipeline.name = "[a-z_]*"}//g' %s | pipeline-opt --pipeline-to-cubin="chip=sm_90a format=isa" | %python %S/Inputs/ptx.py > %t.bare
// RUN: diff %t.named %t.bare
// RUN: FileCheck %s --check-prefix=PTX < %t.named

// NVVM: llvm.func @named(%arg0: !llvm.ptr, %arg1: i32)
// NVVM-NOT: pipeline.name
// PTX: .entry named(
// PTX: mbarrier.init.shared.b64

!P = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>,
                        consumer = #pipeline.group<thread, 1>, tx_count = 8192>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>

gpu.module @kernels {
  gpu.func @named(%desc: !llvm.ptr {pipeline.name = "a"}, %n: i32 {pipeline.name = "k_tiles"}) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %c32 = arith.constant 32 : i32
    %smem = llvm.mlir.addressof @__pipeline_dynamic_smem : !llvm.ptr<3>
    %p = pipeline.create {name = "ab"} : !P
    %tid = gpu.thread_id x
    %tid32 = arith.index_cast %tid : index to i32
    %w = arith.divui %tid32, %c32 : i32
    %is0 = arith.cmpi eq, %w, %c0 : i32
    scf.if %is0 {
      %s0 = pipeline.state.make : !ps
      %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) : i32 {
        pipeline.producer.acquire %p, %s : !P, !ps
        %e = nvvm.elect.sync -> i1
        scf.if %e {
          pipeline.copy.tma_load %p, %s, %desc[%c0, %c0] to %smem {bytes = 8192 : i64} : !P, !ps, !llvm.ptr, !llvm.ptr<3>
        }
        pipeline.producer.commit %p, %s : !P, !ps
        %s1 = pipeline.state.advance %s : !ps
        scf.yield %s1 : !ps
      }
      pipeline.producer.tail %p, %sN : !P, !ps
    } else {
      %c = pipeline.state.make : !cs
      %cN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %c) -> (!cs) : i32 {
        pipeline.consumer.wait %p, %s : !P, !cs
        pipeline.consumer.release %p, %s : !P, !cs
        %s1 = pipeline.state.advance %s : !cs
        scf.yield %s1 : !cs
      }
    }
    gpu.return
  }
  llvm.mlir.global external @__pipeline_dynamic_smem() {addr_space = 3 : i32, alignment = 1024 : i64} : !llvm.array<0 x i8>
}
