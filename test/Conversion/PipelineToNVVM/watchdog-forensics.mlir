// The watchdog's forensic dump (docs/watchdog.md, "The forensic dump"): with
// watchdog=true each kernel clears its warp's wait-table word at entry and
// thread 0 the pipes table; pipeline.create records its barrier array
// (address + 1) in the pipes table; each bounded wait marks the warp waiting
// on (role, pipeline id + 1, stage, phase) before the loop and done after it;
// each return sets the warp's exited bit; the claim's winner calls
// __pipeline_watchdog_dump, which copies the wait table, five calibration
// samples of a scratch mbarrier and, for every barrier of the pipelines of
// its own gpu.module, a header, two test_wait.parity probes and then its
// state: expect_tx of 1 byte (so that what follows cannot complete the
// phase), arrive -> state token, pending_count of the token (the LLVM NVPTX
// intrinsic: MLIR 22 has no NVVM op for it). Loads of the mbarrier word read
// 0 on sm_90 (docs/watchdog.md): the dump never loads one.
// Off: none of it.
// RUN: pipeline-opt %s --convert-pipeline-to-nvvm="watchdog=true" | FileCheck %s
// RUN: pipeline-opt %s --convert-pipeline-to-nvvm | FileCheck %s --check-prefix=OFF
// RUN: pipeline-opt %s --pipeline-to-cubin="chip=sm_90a format=isa watchdog=true" | %python %S/Inputs/ptx.py | FileCheck %s --check-prefix=PTX
// RUN: %if ptxas %{ pipeline-opt %s --pipeline-to-cubin="chip=sm_90a format=bin watchdog=true" | FileCheck %s --check-prefix=BIN %}

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<warp, 1>,
                        consumer = #pipeline.group<warp, 1>>
!PS = !pipeline.state<2, producer>
module attributes {gpu.container_module} {
gpu.module @a {
  gpu.func @kernel() kernel attributes {known_block_size = array<i32: 32, 1, 1>} {
    %p = pipeline.create {name = "ab"} : !P
    %cs = pipeline.state.make : !pipeline.state<2, consumer>
    pipeline.consumer.wait %p, %cs : !P, !pipeline.state<2, consumer>
    pipeline.consumer.release %p, %cs : !P, !pipeline.state<2, consumer>
    gpu.return
  }
}
gpu.module @b {
  gpu.func @other() kernel attributes {known_block_size = array<i32: 32, 1, 1>} {
    %q = pipeline.create {name = "cd"} : !P
    %st = pipeline.state.make : !PS
    pipeline.producer.acquire %q, %st : !P, !PS
    pipeline.producer.commit %q, %st : !P, !PS
    gpu.return
  }
}
}

// CHECK-LABEL: gpu.module @a
// CHECK-DAG: llvm.mlir.global internal @__pipeline_watchdog_probe() {addr_space = 3 : i32, alignment = 8 : i64} : !llvm.array<2 x i64>
// CHECK-DAG: llvm.mlir.global internal @__pipeline_watchdog_warps() {addr_space = 3 : i32, alignment = 8 : i64} : !llvm.array<32 x i32>
// CHECK-DAG: llvm.mlir.global internal @__pipeline_watchdog_pipes() {addr_space = 3 : i32, alignment = 8 : i64} : !llvm.array<2 x i32>
// CHECK: gpu.func @kernel()
// Entry: the warp's wait-table word, then (thread 0) both pipes entries.
// CHECK: %[[TX:.*]] = nvvm.read.ptx.sreg.tid.x : i32
// CHECK-NEXT: %[[C32:.*]] = arith.constant 32 : i32
// CHECK-NEXT: %[[WARP:.*]] = arith.divui %[[TX]], %[[C32]] : i32
// CHECK-NEXT: %[[TABLE:.*]] = llvm.mlir.addressof @__pipeline_watchdog_warps : !llvm.ptr<3>
// CHECK-NEXT: %[[SLOT:.*]] = llvm.getelementptr %[[TABLE]][%[[WARP]]] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i32
// CHECK-NEXT: %[[ZERO:.*]] = arith.constant 0 : i32
// CHECK-NEXT: llvm.store volatile %[[ZERO]], %[[SLOT]] {alignment = 4 : i64} : i32, !llvm.ptr<3>
// CHECK: scf.if
// CHECK: llvm.mlir.addressof @__pipeline_watchdog_pipes
// CHECK: llvm.getelementptr %{{.*}}[%c0_i32{{.*}}]
// CHECK: llvm.store volatile %c0_i32
// CHECK: llvm.mlir.addressof @__pipeline_watchdog_pipes
// CHECK: llvm.getelementptr %{{.*}}[%c1_i32{{.*}}]
// CHECK: llvm.store volatile %c0_i32
// pipeline.create: thread 0 stores the array's address + 1 at id 0, before
// the inits and the CTA sync.
// CHECK: %[[BARS:.*]] = llvm.mlir.addressof @__pipeline_barriers_ab : !llvm.ptr<3>
// CHECK: scf.if
// CHECK-NEXT: %[[ADDR:.*]] = llvm.ptrtoint %[[BARS]] : !llvm.ptr<3> to i32
// CHECK-NEXT: %[[ONE:.*]] = arith.constant 1 : i32
// CHECK-NEXT: %[[TAGGED:.*]] = arith.addi %[[ADDR]], %[[ONE]] : i32
// CHECK-NEXT: %[[ID0:.*]] = arith.constant 0 : i32
// CHECK-NEXT: %[[PIPES:.*]] = llvm.mlir.addressof @__pipeline_watchdog_pipes : !llvm.ptr<3>
// CHECK-NEXT: %[[ENTRY:.*]] = llvm.getelementptr %[[PIPES]][%[[ID0]]]
// CHECK-NEXT: llvm.store volatile %[[TAGGED]], %[[ENTRY]]
// CHECK: nvvm.mbarrier.init
// CHECK: nvvm.barrier0
// The consumer wait: waiting | valid | role 1 << 27 | (id 0 + 1) << 19 =
// 0xC8080000 before the loop, 0x48080000 after it.
// CHECK: %[[W:.*]] = arith.constant -938999808 : i32
// CHECK-NEXT: %[[MARK:.*]] = arith.ori %{{.*}}, %[[W]] : i32
// CHECK: llvm.store volatile %[[MARK]], %{{.*}} {alignment = 4 : i64} : i32, !llvm.ptr<3>
// CHECK-NEXT: nvvm.read.ptx.sreg.globaltimer
// CHECK-NEXT: scf.while
// CHECK: llvm.call @__pipeline_watchdog_dump(%{{.*}}) : (!llvm.ptr) -> ()
// CHECK: llvm.intr.trap
// CHECK: scf.condition
// CHECK: %[[D:.*]] = arith.constant 1208483840 : i32
// CHECK-NEXT: %[[DONE:.*]] = arith.ori %{{.*}}, %[[D]] : i32
// CHECK: llvm.store volatile %[[DONE]], %{{.*}} {alignment = 4 : i64} : i32, !llvm.ptr<3>
// The return marks the warp exited (bit 29).
// CHECK: %[[EXIT:.*]] = arith.constant 536870912 : i32
// CHECK: llvm.atomicrmw _or %{{.*}}, %[[EXIT]] monotonic : !llvm.ptr<3>, i32
// CHECK-NEXT: gpu.return
// The dump: warps in the CTA (word 11), the 32 wait-table words (16..47) ...
// CHECK: llvm.func internal @__pipeline_watchdog_dump(%[[REC:.*]]: !llvm.ptr) {
// CHECK: llvm.getelementptr %[[REC]][11]
// CHECK: llvm.load volatile %{{.*}} : !llvm.ptr<3> -> i32
// CHECK-NEXT: llvm.getelementptr %[[REC]][16]
// CHECK: llvm.getelementptr %[[REC]][47]
// ... the calibration samples of the scratch barrier (words 48..62: token
// low, high, pending count), each read by expect_tx 1, arrive,
// pending_count ...
// CHECK: %[[P0:.*]] = llvm.getelementptr %{{.*}}[%c0_i32{{.*}}] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i64
// CHECK: %[[P1:.*]] = llvm.getelementptr %{{.*}}[%c1_i32{{.*}}] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i64
// CHECK: nvvm.mbarrier.init %[[P0]], %{{.*}}1048575
// CHECK-NEXT: %[[ONE0:.*]] = arith.constant 1 : i32
// CHECK-NEXT: nvvm.mbarrier.expect_tx %[[P0]], %[[ONE0]]
// CHECK-NEXT: %[[TOK0:.*]] = nvvm.mbarrier.arrive %[[P0]] : !llvm.ptr<3> -> i64
// CHECK-NEXT: %[[LO0:.*]] = arith.trunci %[[TOK0]] : i64 to i32
// CHECK-NEXT: %[[W48:.*]] = llvm.getelementptr %[[REC]][48]
// CHECK-NEXT: llvm.store volatile %[[LO0]], %[[W48]]
// CHECK: %[[HI0:.*]] = arith.trunci %{{.*}} : i64 to i32
// CHECK-NEXT: %[[W49:.*]] = llvm.getelementptr %[[REC]][49]
// CHECK-NEXT: llvm.store volatile %[[HI0]], %[[W49]]
// CHECK-NEXT: %[[PEND0:.*]] = llvm.call_intrinsic "llvm.nvvm.mbarrier.pending.count"(%[[TOK0]]) : (i64) -> i32
// CHECK-NEXT: %[[W50:.*]] = llvm.getelementptr %[[REC]][50]
// CHECK-NEXT: llvm.store volatile %[[PEND0]], %[[W50]]
// CHECK: nvvm.mbarrier.expect_tx %[[P0]], %{{.*}}1048573
// CHECK: nvvm.mbarrier.expect_tx %[[P0]]
// CHECK: nvvm.mbarrier.arrive %[[P0]]
// CHECK: llvm.getelementptr %[[REC]][51]
// CHECK: llvm.getelementptr %[[REC]][53]
// CHECK: %[[C:.*]] = arith.constant 74565 : i32
// CHECK-NEXT: nvvm.mbarrier.complete_tx %[[P0]], %[[C]]
// CHECK: llvm.getelementptr %[[REC]][54]
// CHECK: llvm.getelementptr %[[REC]][56]
// CHECK: nvvm.mbarrier.init %[[P1]], %{{.*}}5
// CHECK: nvvm.mbarrier.expect_tx %[[P1]], %{{.*}}100
// CHECK: nvvm.mbarrier.expect_tx %[[P1]]
// CHECK: nvvm.mbarrier.arrive %[[P1]]
// CHECK: llvm.getelementptr %[[REC]][57]
// CHECK: llvm.getelementptr %[[REC]][59]
// CHECK: nvvm.mbarrier.complete_tx %[[P1]], %{{.*}}101
// CHECK-NEXT: nvvm.mbarrier.arrive %[[P1]]
// CHECK-NEXT: nvvm.mbarrier.arrive %[[P1]]
// CHECK-NEXT: nvvm.mbarrier.arrive %[[P1]]
// CHECK-NEXT: nvvm.mbarrier.arrive %[[P1]]
// CHECK: nvvm.mbarrier.expect_tx %[[P1]]
// CHECK: llvm.getelementptr %[[REC]][60]
// CHECK: llvm.getelementptr %[[REC]][62]
// CHECK: llvm.getelementptr %[[REC]][13]
// ... and pipeline 0 ('ab', 2 stages: 4 barriers): the header (stages 2,
// created bit 14) at words 64, 73, 82, 91, then, when created, the probes
// (before the dump's arrive changes the barrier; bit 2: the entry has a
// ledger), the four ledger words (watchdog-ledger.mlir) and the state: 9
// words per barrier. Pipeline 1 ('cd') lives in @b: not dumped here.
// CHECK: llvm.mlir.addressof @__pipeline_watchdog_pipes
// CHECK: %[[T:.*]] = llvm.load volatile
// CHECK: %[[CREATED:.*]] = arith.cmpi ne, %[[T]], %{{.*}} : i32
// CHECK: %[[STAGES:.*]] = arith.constant 2 : i32
// CHECK-NEXT: %[[HEAD:.*]] = arith.ori %[[STAGES]], %{{.*}} : i32
// CHECK-NEXT: llvm.getelementptr %[[REC]][64]
// CHECK-NEXT: llvm.store volatile %[[HEAD]]
// CHECK-NEXT: llvm.getelementptr %[[REC]][73]
// CHECK-NEXT: llvm.store volatile %[[HEAD]]
// CHECK-NEXT: llvm.getelementptr %[[REC]][82]
// CHECK-NEXT: llvm.store volatile %[[HEAD]]
// CHECK-NEXT: llvm.getelementptr %[[REC]][91]
// CHECK-NEXT: llvm.store volatile %[[HEAD]]
// CHECK-NEXT: scf.if %[[CREATED]] {
// CHECK: %[[BAR0:.*]] = llvm.inttoptr %{{.*}} : i32 to !llvm.ptr<3>
// CHECK: nvvm.mbarrier.test.wait %[[BAR0]], %{{.*}} : !llvm.ptr<3>, i32 -> i1
// CHECK: nvvm.mbarrier.test.wait %[[BAR0]], %{{.*}} : !llvm.ptr<3>, i32 -> i1
// CHECK: llvm.getelementptr %[[REC]][65]
// CHECK: llvm.mlir.addressof @__pipeline_watchdog_ledger
// CHECK: llvm.getelementptr %[[REC]][72]
// CHECK-NOT: llvm.load
// CHECK: %[[ONE:.*]] = arith.constant 1 : i32
// CHECK-NEXT: nvvm.mbarrier.expect_tx %[[BAR0]], %[[ONE]]
// CHECK-NEXT: %[[TOK:.*]] = nvvm.mbarrier.arrive %[[BAR0]] : !llvm.ptr<3> -> i64
// CHECK: llvm.getelementptr %[[REC]][66]
// CHECK: llvm.getelementptr %[[REC]][67]
// CHECK: llvm.call_intrinsic "llvm.nvvm.mbarrier.pending.count"(%[[TOK]]) : (i64) -> i32
// CHECK-NEXT: llvm.getelementptr %[[REC]][68]
// CHECK: llvm.getelementptr %[[REC]][95]
// CHECK: %[[N:.*]] = arith.constant 4 : i32
// CHECK-NEXT: llvm.getelementptr %[[REC]][12]
// CHECK-NEXT: llvm.store volatile %[[N]]
// CHECK-NEXT: llvm.return

// In @b only 'cd' (id 1: header 1 << 16 | 2 = 65538), and the producer
// acquire marks role 0: 0xC0100000.
// CHECK-LABEL: gpu.module @b
// CHECK: arith.constant -1072693248 : i32
// CHECK: llvm.func internal @__pipeline_watchdog_dump
// CHECK: arith.constant 65538 : i32
// CHECK: llvm.getelementptr %{{.*}}[95]
// CHECK-NOT: [96]
// CHECK: %[[NB:.*]] = arith.constant 4 : i32
// CHECK-NEXT: llvm.getelementptr %{{.*}}[12]
// CHECK-NEXT: llvm.store volatile %[[NB]]

// OFF-NOT: __pipeline_watchdog
// OFF-NOT: atomicrmw
// OFF-NOT: mbarrier.test.wait
// OFF-NOT: ptrtoint

// PTX-LABEL: // gpu.binary @a sm_90a
// PTX: .shared .align 8 .b8 __pipeline_watchdog_warps[128];
// PTX: .shared .align 8 .b8 __pipeline_watchdog_pipes[8];
// PTX: call.uni __pipeline_watchdog_dump, (param0);
// PTX: atom.shared.or.b32 {{%r[0-9]+}}, [{{.*}}], 536870912;
// PTX: .func __pipeline_watchdog_dump(
// PTX: mbarrier.init.shared.b64 [__pipeline_watchdog_probe], {{%r[0-9]+}};
// PTX-NOT: ld.volatile.shared.b64
// PTX-NEXT: mov.b32 [[ONE:%r[0-9]+]], 1;
// PTX-NEXT: mbarrier.expect_tx{{.*}} [__pipeline_watchdog_probe], [[ONE]];
// PTX-NEXT: mbarrier.arrive{{.*}}.b64 [[T:%rd[0-9]+]], [__pipeline_watchdog_probe];
// PTX: mbarrier.pending_count.b64 {{%r[0-9]+}}, [[T]];
// PTX: mbarrier.complete_tx
// PTX: mbarrier.test_wait.parity.shared.b64
// PTX: mbarrier.test_wait.parity.shared.b64
// PTX: mbarrier.expect_tx
// PTX: mbarrier.arrive
// PTX: mbarrier.pending_count.b64
// PTX-LABEL: // gpu.binary @b sm_90a

// BIN: gpu.binary @a [#gpu.object<#nvvm.target<chip = "sm_90a", features = "+ptx88">, {{.*}}bin = "\7FELF
// BIN: gpu.binary @b [#gpu.object<#nvvm.target<chip = "sm_90a", features = "+ptx88">, {{.*}}bin = "\7FELF
