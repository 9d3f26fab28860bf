// watchdog=true: every wait loop is bounded by %globaltimer and reports the
// stuck wait in __pipeline_watchdog before trapping. Off: no timer at all.
// RUN: pipeline-opt %s --convert-pipeline-to-nvvm="watchdog=true watchdog-timeout-ns=1000000" --cse | FileCheck %s
// RUN: pipeline-opt %s --convert-pipeline-to-nvvm | FileCheck %s --check-prefix=OFF
// RUN: pipeline-opt %s --pipeline-to-cubin="chip=sm_90a format=isa watchdog=true" | %python %S/Inputs/ptx.py | FileCheck %s --check-prefix=PTX
// RUN: %if ptxas %{ pipeline-opt %s --pipeline-to-cubin="chip=sm_90a format=bin watchdog=true" | FileCheck %s --check-prefix=BIN %}

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<warp, 1>,
                        consumer = #pipeline.group<warp, 1>>
module attributes {gpu.container_module} {
gpu.module @wd {
  gpu.func @kernel() kernel {
    %p0 = pipeline.create {name = "first"} : !P
    %p = pipeline.create {name = "second"} : !P
    %cs = pipeline.state.make : !pipeline.state<2, consumer>
    pipeline.consumer.wait %p, %cs : !P, !pipeline.state<2, consumer>
    pipeline.consumer.release %p, %cs : !P, !pipeline.state<2, consumer>
    gpu.return
  }
}
}

// The names table the runner reads: ids are positions.
// CHECK: module attributes {gpu.container_module, pipeline.watchdog_names = ["first", "second"]}
// CHECK: llvm.mlir.global external @__pipeline_watchdog() {addr_space = 1 : i32, alignment = 4 : i64} : !llvm.array<16 x i32>
// CHECK: gpu.func @kernel
// CHECK: %[[PHASE:.*]] = llvm.extractvalue %{{.*}}[1]
// CHECK: %[[START:.*]] = nvvm.read.ptx.sreg.globaltimer : i64
// CHECK: scf.while
// CHECK:   %[[DONE:.*]] = nvvm.mbarrier.try_wait
// CHECK:   %[[NOT:.*]] = arith.xori %[[DONE]], %{{.*}} : i1
// CHECK:   scf.if %[[NOT]] {
// CHECK:     %[[NOW:.*]] = nvvm.read.ptx.sreg.globaltimer : i64
// CHECK:     %[[DT:.*]] = arith.subi %[[NOW]], %[[START]] : i64
// CHECK:     %[[LIMIT:.*]] = arith.constant 1000000 : i64
// CHECK:     %[[EXPIRED:.*]] = arith.cmpi ugt, %[[DT]], %[[LIMIT]] : i64
// CHECK:     scf.if %[[EXPIRED]] {
// CHECK:       %[[BUF:.*]] = llvm.mlir.addressof @__pipeline_watchdog : !llvm.ptr<1>
// CHECK:       %[[MAGIC:.*]] = arith.constant 1346981957 : i32
// CHECK:       %[[CLAIM:.*]] = llvm.cmpxchg %[[BUF]], %{{.*}}, %[[MAGIC]] monotonic monotonic
// CHECK:       %[[WON:.*]] = llvm.extractvalue %[[CLAIM]][1]
// CHECK:       scf.if %[[WON]] {
// Pipeline id 1 ("second"), role 1 (consumer), stage, phase, ctaid, warp.
// CHECK:         %[[ID:.*]] = arith.constant 1 : i32
// CHECK:         llvm.store volatile %[[ID]], %{{.*}} : i32, !llvm.ptr<1>
// CHECK:         llvm.store volatile %[[ID]], %{{.*}} : i32, !llvm.ptr<1>
// CHECK:         llvm.store volatile %{{.*}}, %{{.*}} : i32, !llvm.ptr<1>
// CHECK:         llvm.store volatile %[[PHASE]], %{{.*}} : i32, !llvm.ptr<1>
// CHECK-COUNT-4: llvm.store volatile
// CHECK:       nvvm.memory.barrier <sys>
// CHECK:       llvm.intr.trap
// CHECK:   scf.condition

// OFF-NOT: globaltimer
// OFF-NOT: __pipeline_watchdog
// OFF-NOT: llvm.intr.trap
// OFF-NOT: pipeline.watchdog_names

// PTX: .visible .global .align 4 .b8 __pipeline_watchdog[64];
// PTX: mov.u64 {{.*}}, %globaltimer;
// PTX: mbarrier.try_wait.parity.shared.b64
// PTX: atom.{{.*}}global.cas.b32 {{.*}}[__pipeline_watchdog], 0, 1346981957;
// PTX: membar.sys;
// PTX: trap;

// BIN: gpu.binary @wd [#gpu.object<#nvvm.target<chip = "sm_90a", features = "+ptx88">, {{.*}}bin = "\7FELF
