// watchdog=true: every wait loop is bounded by %globaltimer; on expiry the
// first thread (xchg on __pipeline_watchdog_claim) writes the record of
// docs/watchdog.md through the host pointer in __pipeline_watchdog_buffer,
// words 1..10 then the magic, and sets the claim to 2; the others wait for
// that; every expired thread traps. Off: no timer.
// RUN: pipeline-opt %s --convert-pipeline-to-nvvm="watchdog=true watchdog-timeout-ns=1000000" | FileCheck %s
// RUN: pipeline-opt %s --convert-pipeline-to-nvvm | FileCheck %s --check-prefix=OFF
// RUN: pipeline-opt %s --pipeline-to-cubin="chip=sm_90a format=isa watchdog=true" | %python %S/Inputs/ptx.py | FileCheck %s --check-prefix=PTX
// RUN: %if ptxas %{ pipeline-opt %s --pipeline-to-cubin="chip=sm_90a format=bin watchdog=true" | FileCheck %s --check-prefix=BIN %}

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<warp, 1>,
                        consumer = #pipeline.group<warp, 1>>
!O = !pipeline.pipeline<order, stages = 2, producer = #pipeline.group<warp, 1>, length = 2>
!OS = !pipeline.state<2, producer_consumer>
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
gpu.module @ord {
  gpu.func @kernel(%gid: i32) kernel {
    %unused = pipeline.create {name = "unused"} : !O
    %p = pipeline.create {name = "turns"} : !O
    %s = pipeline.order.state %p, %gid : !O -> !OS
    pipeline.order.wait %p, %s, %gid : !O, !OS
    %next = pipeline.order.arrive %p, %s, %gid : !O, !OS
    gpu.return
  }
}
}

// Ids are positions in the module-wide names list.
// CHECK: module attributes {gpu.container_module, pipeline.watchdog_names = ["first", "second", "unused", "turns"]}
// CHECK-LABEL: gpu.module @wd
// CHECK-DAG: llvm.mlir.global internal @__pipeline_watchdog_claim(0 : i32) {addr_space = 1 : i32, alignment = 4 : i64} : i32
// CHECK-DAG: llvm.mlir.global external @__pipeline_watchdog_buffer(0 : i64) {addr_space = 1 : i32, alignment = 8 : i64} : i64
// CHECK-DAG: llvm.mlir.global external constant @__pipeline_watchdog_names("first\00second\00unused\00turns\00") {addr_space = 1 : i32, alignment = 1 : i64}
// CHECK: gpu.func @kernel
// CHECK: %[[STAGE:.*]] = llvm.extractvalue %{{.*}}[0]
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
// The claim: a device-global exchange, not a store to host memory.
// CHECK:       %[[CLAIM:.*]] = llvm.mlir.addressof @__pipeline_watchdog_claim : !llvm.ptr<1>
// CHECK:       %[[C1:.*]] = arith.constant 1 : i32
// CHECK:       %[[OLD:.*]] = llvm.atomicrmw xchg %[[CLAIM]], %[[C1]] monotonic : !llvm.ptr<1>, i32
// CHECK:       %[[C0:.*]] = arith.constant 0 : i32
// CHECK:       %[[WON:.*]] = arith.cmpi eq, %[[OLD]], %[[C0]] : i32
// CHECK:       scf.if %[[WON]] {
// CHECK:         %[[SLOT:.*]] = llvm.mlir.addressof @__pipeline_watchdog_buffer : !llvm.ptr<1>
// CHECK:         %[[ADDR:.*]] = llvm.load volatile %[[SLOT]] {alignment = 8 : i64} : !llvm.ptr<1> -> i64
// CHECK:         %[[NULL:.*]] = arith.constant 0 : i64
// CHECK:         %[[ARMED:.*]] = arith.cmpi ne, %[[ADDR]], %[[NULL]] : i64
// CHECK:         scf.if %[[ARMED]] {
// CHECK:           %[[REC:.*]] = llvm.inttoptr %[[ADDR]] : i64 to !llvm.ptr
// CHECK:           %[[US:.*]] = arith.divui %[[DT]], %{{.*}} : i64
// CHECK:           %[[SAT:.*]] = arith.minui %[[US]], %{{.*}} : i64
// Pipeline id 1 ("second"), role 1 (consumer), stage, phase, ctaid, warp,
// version 4, elapsed µs; then the forensic dump (words 11..,
// watchdog-forensics.mlir) and the magic 0x57444F47 at word 0.
// CHECK:           %[[ID:.*]] = arith.constant 1 : i32
// CHECK-NEXT:      %[[ROLE:.*]] = arith.constant 1 : i32
// CHECK-NEXT:      %[[BX:.*]] = nvvm.read.ptx.sreg.ctaid.x : i32
// CHECK-NEXT:      %[[BY:.*]] = nvvm.read.ptx.sreg.ctaid.y : i32
// CHECK-NEXT:      %[[BZ:.*]] = nvvm.read.ptx.sreg.ctaid.z : i32
// CHECK:           %[[WARP:.*]] = arith.divui %{{.*}}, %{{.*}} : i32
// CHECK-NEXT:      %[[VERSION:.*]] = arith.constant 4 : i32
// CHECK-NEXT:      %[[US32:.*]] = arith.trunci %[[SAT]] : i64 to i32
// CHECK-NEXT:      %[[W1:.*]] = llvm.getelementptr %[[REC]][1] : (!llvm.ptr) -> !llvm.ptr, i32
// CHECK-NEXT:      llvm.store volatile %[[ID]], %[[W1]] {alignment = 4 : i64} : i32, !llvm.ptr
// CHECK-NEXT:      %[[W2:.*]] = llvm.getelementptr %[[REC]][2]
// CHECK-NEXT:      llvm.store volatile %[[ROLE]], %[[W2]]
// CHECK-NEXT:      %[[W3:.*]] = llvm.getelementptr %[[REC]][3]
// CHECK-NEXT:      llvm.store volatile %[[STAGE]], %[[W3]]
// CHECK-NEXT:      %[[W4:.*]] = llvm.getelementptr %[[REC]][4]
// CHECK-NEXT:      llvm.store volatile %[[PHASE]], %[[W4]]
// CHECK-NEXT:      %[[W5:.*]] = llvm.getelementptr %[[REC]][5]
// CHECK-NEXT:      llvm.store volatile %[[BX]], %[[W5]]
// CHECK-NEXT:      %[[W6:.*]] = llvm.getelementptr %[[REC]][6]
// CHECK-NEXT:      llvm.store volatile %[[BY]], %[[W6]]
// CHECK-NEXT:      %[[W7:.*]] = llvm.getelementptr %[[REC]][7]
// CHECK-NEXT:      llvm.store volatile %[[BZ]], %[[W7]]
// CHECK-NEXT:      %[[W8:.*]] = llvm.getelementptr %[[REC]][8]
// CHECK-NEXT:      llvm.store volatile %[[WARP]], %[[W8]]
// CHECK-NEXT:      %[[W9:.*]] = llvm.getelementptr %[[REC]][9]
// CHECK-NEXT:      llvm.store volatile %[[VERSION]], %[[W9]]
// CHECK-NEXT:      %[[W10:.*]] = llvm.getelementptr %[[REC]][10]
// CHECK-NEXT:      llvm.store volatile %[[US32]], %[[W10]]
// CHECK-NEXT:      llvm.call @__pipeline_watchdog_dump(%[[REC]]) : (!llvm.ptr) -> ()
// CHECK-NEXT:      nvvm.memory.barrier <sys>
// CHECK-NEXT:      %[[MAGIC:.*]] = arith.constant 1464094535 : i32
// CHECK-NEXT:      %[[W0:.*]] = llvm.getelementptr %[[REC]][0]
// CHECK-NEXT:      llvm.store volatile %[[MAGIC]], %[[W0]]
// CHECK-NEXT:      nvvm.memory.barrier <sys>
// CHECK-NEXT:    }
// The winner marks the record done (claim = 2) ...
// CHECK-NEXT:    %[[DONE2:.*]] = arith.constant 2 : i32
// CHECK-NEXT:    llvm.atomicrmw xchg %[[CLAIM]], %[[DONE2]] monotonic : !llvm.ptr<1>, i32
// CHECK-NEXT:  } else {
// ... the losers wait for that (at most 20 ms) instead of trapping at once,
// which would abort the grid before the record reached the host ...
// CHECK-NEXT:    %[[SINCE:.*]] = nvvm.read.ptx.sreg.globaltimer : i64
// CHECK-NEXT:    scf.while : () -> () {
// CHECK-NEXT:      %[[STATE:.*]] = llvm.load volatile %[[CLAIM]] {alignment = 4 : i64} : !llvm.ptr<1> -> i32
// CHECK-NEXT:      %[[C2:.*]] = arith.constant 2 : i32
// CHECK-NEXT:      %[[PENDING:.*]] = arith.cmpi ne, %[[STATE]], %[[C2]] : i32
// CHECK-NEXT:      %[[T:.*]] = nvvm.read.ptx.sreg.globaltimer : i64
// CHECK-NEXT:      %[[WAITED:.*]] = arith.subi %[[T]], %[[SINCE]] : i64
// CHECK-NEXT:      %[[MS:.*]] = arith.constant 20000000 : i64
// CHECK-NEXT:      %[[PATIENT:.*]] = arith.cmpi ult, %[[WAITED]], %[[MS]] : i64
// CHECK-NEXT:      %[[AGAIN:.*]] = arith.andi %[[PENDING]], %[[PATIENT]] : i1
// CHECK-NEXT:      scf.condition(%[[AGAIN]])
// CHECK-NEXT:    } do {
// CHECK-NEXT:      scf.yield
// CHECK-NEXT:    }
// CHECK-NEXT:  }
// ... and every expired thread traps.
// CHECK-NEXT:  llvm.intr.trap
// CHECK-NEXT: }
// CHECK:   scf.condition

// The order wait reports role 2 and its own globals live in its gpu.module.
// CHECK-LABEL: gpu.module @ord
// CHECK-DAG: llvm.mlir.global internal @__pipeline_watchdog_claim(0 : i32)
// CHECK-DAG: llvm.mlir.global external @__pipeline_watchdog_buffer(0 : i64)
// CHECK-DAG: llvm.mlir.global external constant @__pipeline_watchdog_names("first\00second\00unused\00turns\00")
// CHECK: llvm.atomicrmw xchg
// CHECK: %[[OID:.*]] = arith.constant 3 : i32
// CHECK-NEXT: %[[OROLE:.*]] = arith.constant 2 : i32
// CHECK: llvm.store volatile %[[OID]], %{{.*}}
// CHECK-NEXT: llvm.getelementptr %{{.*}}[2]
// CHECK-NEXT: llvm.store volatile %[[OROLE]], %{{.*}}
// CHECK: llvm.intr.trap

// OFF-NOT: globaltimer
// OFF-NOT: __pipeline_watchdog
// OFF-NOT: llvm.intr.trap
// OFF-NOT: pipeline.watchdog_names

// The runner's view: a .visible u64 it can find and set, the names, the
// exchange on the claim, ten word stores through the pointer, the dump call,
// the magic last between membar.sys, then trap.
// PTX-LABEL: // gpu.binary @wd sm_90a
// PTX-DAG: .global .align 4 .u32 __pipeline_watchdog_claim;
// PTX-DAG: .visible .global .align 8 .u64 __pipeline_watchdog_buffer;
// PTX-DAG: .visible .global .align 1 .b8 __pipeline_watchdog_names[26] = {102, 105, 114, 115, 116, 0, 115, 101, 99, 111, 110, 100, 0, 117, 110, 117, 115, 101, 100, 0, 116, 117, 114, 110, 115};
// PTX: mov.u64 [[START:%rd[0-9]+]], %globaltimer;
// PTX: mbarrier.try_wait.parity.shared{{.*}}.b64
// PTX: mov.u64 {{%rd[0-9]+}}, %globaltimer;
// PTX: atom.global.exch.b32 {{%r[0-9]+}}, [__pipeline_watchdog_claim], 1;
// PTX: ld.volatile.global.{{[bu]}}64 [[P:%rd[0-9]+]], [__pipeline_watchdog_buffer];
// PTX: st.volatile.b32 [[[P]]+4], 1;
// PTX-NEXT: st.volatile.b32 [[[P]]+8], 1;
// PTX-NEXT: st.volatile.b32 [[[P]]+12],
// PTX-NEXT: st.volatile.b32 [[[P]]+16],
// PTX-NEXT: st.volatile.b32 [[[P]]+20],
// PTX-NEXT: st.volatile.b32 [[[P]]+24],
// PTX-NEXT: st.volatile.b32 [[[P]]+28],
// PTX-NEXT: st.volatile.b32 [[[P]]+32],
// PTX-NEXT: st.volatile.b32 [[[P]]+36], 4;
// PTX-NEXT: st.volatile.b32 [[[P]]+40],
// PTX: call.uni __pipeline_watchdog_dump, (param0);
// PTX-NEXT: } // callseq
// PTX-NEXT: membar.sys;
// PTX-NEXT: st.volatile.b32 [[[P]]], 1464094535;
// PTX-NEXT: membar.sys;
// PTX: atom.global.exch.b32 {{%r[0-9]+}}, [__pipeline_watchdog_claim], 2;
// PTX: ld.volatile.global.{{[bu]}}32 {{%r[0-9]+}}, [__pipeline_watchdog_claim];
// PTX: trap;
// PTX-LABEL: // gpu.binary @ord sm_90a
// PTX: .visible .global .align 8 .u64 __pipeline_watchdog_buffer;
// PTX: st.volatile.b32 [[[Q:%rd[0-9]+]]+4], 3;
// PTX-NEXT: st.volatile.b32 [[[Q]]+8], 2;
// PTX: trap;

// BIN: gpu.binary @wd [#gpu.object<#nvvm.target<chip = "sm_90a", features = "+ptx88">, {{.*}}bin = "\7FELF
// BIN: gpu.binary @ord [#gpu.object<#nvvm.target<chip = "sm_90a", features = "+ptx88">, {{.*}}bin = "\7FELF
