// The watchdog's ledger (docs/watchdog.md, "The ledger"): with
// watchdog=true, per barrier of every pipeline, four i32 words of the shared
// array __pipeline_watchdog_ledger (entry = pipeline's first entry + barrier
// index; word 0 init count, 1 arrivals, 2 bytes announced by
// arrive.expect_tx, 3 bytes of the copies issued towards it): thread 0
// zeroes it at kernel entry, pipeline.create's thread 0 stores the init
// counts, and each verb adds what it does with an atomic add in the same
// thread and branch as its arrive or copy; in a cluster, in the CTA whose
// barrier it signals (mapa + generic atom). The dump copies the four words
// of every barrier (words 5..8 of its entry).
// Off: not one op of it.
// RUN: pipeline-opt %s --convert-pipeline-to-nvvm="watchdog=true" --cse | FileCheck %s
// RUN: pipeline-opt %s --convert-pipeline-to-nvvm --cse | FileCheck %s --check-prefix=OFF
// RUN: pipeline-opt %s --pipeline-to-cubin="chip=sm_90a format=isa watchdog=true" | %python %S/Inputs/ptx.py | FileCheck %s --check-prefix=PTX
// RUN: pipeline-opt %s --pipeline-to-cubin="chip=sm_90a format=isa" | %python %S/Inputs/ptx.py | FileCheck %s --check-prefix=PTXOFF

!P1 = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>,
                         consumer = #pipeline.group<thread, 1>, tx_count = 4096>
!PM = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>,
                         consumer = #pipeline.group<thread, 2>, tx_count = 4096,
                         cluster = #pipeline.cluster<1, 2, 1, 1>, multicast = m>
!PS = !pipeline.state<2, producer>
!CS = !pipeline.state<2, consumer>

module attributes {gpu.container_module} {
gpu.module @one_cta {
  gpu.func @kernel(%desc: !llvm.ptr, %dst: !llvm.ptr<3>) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    %p = pipeline.create {name = "ab"} : !P1
    %c0 = arith.constant 0 : i32
    %ps = pipeline.state.make : !PS
    pipeline.producer.acquire %p, %ps : !P1, !PS
    pipeline.copy.tma_load %p, %ps, %desc[%c0, %c0] to %dst {bytes = 4096 : i64}
        : !P1, !PS, !llvm.ptr, !llvm.ptr<3>
    pipeline.producer.commit %p, %ps : !P1, !PS
    %cs = pipeline.state.make : !CS
    pipeline.consumer.wait %p, %cs : !P1, !CS
    pipeline.consumer.release %p, %cs : !P1, !CS
    gpu.return
  }
}
gpu.module @mcast {
  gpu.func @kernel(%desc: !llvm.ptr, %dst: !llvm.ptr<3>) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    %p = pipeline.create {name = "mc"} : !PM
    %c0 = arith.constant 0 : i32
    %both = arith.constant 3 : i16
    %ps = pipeline.state.make : !PS
    pipeline.producer.acquire %p, %ps : !PM, !PS
    pipeline.copy.tma_load %p, %ps, %desc[%c0, %c0] to %dst multicast %both {bytes = 2048 : i64}
        : !PM, !PS, !llvm.ptr, !llvm.ptr<3>
    %cs = pipeline.state.make : !CS
    pipeline.consumer.wait %p, %cs : !PM, !CS
    pipeline.consumer.release %p, %cs : !PM, !CS
    gpu.return
  }
}
}
