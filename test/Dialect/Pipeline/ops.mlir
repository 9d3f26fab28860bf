// RUN: pipeline-opt %s | pipeline-opt | FileCheck %s
// RUN: pipeline-opt %s --mlir-print-op-generic | pipeline-opt | FileCheck %s
// RUN: pipeline-opt %s --mlir-print-op-generic | FileCheck %s --check-prefix=GENERIC

// Round trip of every op of the pipeline dialect and of every pipeline kind.
// The printer elides the `!pipeline.pipeline` / `#pipeline.group` prefixes
// where the op or the type already names them, so CHECK lines match the
// short forms that the printer really produces.

!async = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 128>, consumer = #pipeline.group<warp, 4>>
!ps2 = !pipeline.state<2, producer>
!cs2 = !pipeline.state<2, consumer>

//===----------------------------------------------------------------------===//
// Creation and initialization
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @create_forms
// CHECK-SAME: (%[[SMEM:.*]]: !llvm.ptr<3>)
func.func @create_forms(%smem: !llvm.ptr<3>) {
  // CHECK: pipeline.create storage(%[[SMEM]] : !llvm.ptr<3>) {defer_sync, name = "ab"} : <async, stages = 2, producer = <thread, 128>, consumer = <warp, 4>>
  %0 = pipeline.create storage(%smem : !llvm.ptr<3>) {defer_sync, name = "ab"} : !async
  // CHECK: pipeline.create storage(%[[SMEM]] : !llvm.ptr<3>) : <async, stages = 2,
  %1 = pipeline.create storage(%smem : !llvm.ptr<3>) : !async
  // CHECK: pipeline.create {defer_sync} : <async, stages = 2,
  %2 = pipeline.create {defer_sync} : !async
  // CHECK: pipeline.create : <async, stages = 2,
  %3 = pipeline.create : !async
  // CHECK: pipeline.init_arrive{{$}}
  pipeline.init_arrive
  // CHECK: pipeline.init_arrive {cluster_size = 2 : i64, relaxed}
  pipeline.init_arrive {cluster_size = 2, relaxed}
  // CHECK: pipeline.init_wait{{$}}
  pipeline.init_wait {cluster_size = 1}
  // CHECK: pipeline.init_wait {cluster_size = 16 : i64}
  pipeline.init_wait {cluster_size = 16}
  return
}

//===----------------------------------------------------------------------===//
// Pipeline state
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @state_ops
// CHECK-SAME: (%[[I:.*]]: i32, %[[PH:.*]]: i32, %[[C:.*]]: i32)
func.func @state_ops(%i: i32, %ph: i32, %c: i32) -> (i32, i32, i32) {
  // CHECK: %[[S0:.*]] = pipeline.state.make : <4, producer>
  %s0 = pipeline.state.make : !pipeline.state<4, producer>
  // CHECK: pipeline.state.make index %[[I]] phase %[[PH]] : <4, consumer>
  %s1 = pipeline.state.make index %i phase %ph : !pipeline.state<4, consumer>
  // CHECK: pipeline.state.make index %[[I]] phase %[[PH]] count %[[C]] : <4, producer_consumer>
  %s2 = pipeline.state.make index %i phase %ph count %c : !pipeline.state<4, producer_consumer>
  // CHECK: pipeline.state.make : <1, producer, simple>
  %s3 = pipeline.state.make : !pipeline.state<1, producer, simple>
  // CHECK: %[[S4:.*]] = pipeline.state.make index %[[I]] : <2, consumer, simple>
  %s4 = pipeline.state.make index %i : !pipeline.state<2, consumer, simple>
  // CHECK: %[[A1:.*]] = pipeline.state.advance %[[S0]] : <4, producer>
  %a1 = pipeline.state.advance %s0 : !pipeline.state<4, producer>
  // CHECK: %[[A2:.*]] = pipeline.state.advance %[[A1]] by %[[C]] : <4, producer>
  %a2 = pipeline.state.advance %a1 by %c : !pipeline.state<4, producer>
  // CHECK: pipeline.state.advance %[[S4]] by %[[C]] : <2, consumer, simple>
  %a3 = pipeline.state.advance %s4 by %c : !pipeline.state<2, consumer, simple>
  // CHECK: %[[IDX:.*]] = pipeline.state.index %[[A2]] : <4, producer>
  %idx = pipeline.state.index %a2 : !pipeline.state<4, producer>
  // CHECK: %[[PHASE:.*]] = pipeline.state.phase %[[A2]] : <4, producer>
  %phase = pipeline.state.phase %a2 : !pipeline.state<4, producer>
  // CHECK: %[[CNT:.*]] = pipeline.state.count %[[A2]] : <4, producer>
  %cnt = pipeline.state.count %a2 : !pipeline.state<4, producer>
  // CHECK: return %[[IDX]], %[[PHASE]], %[[CNT]] : i32, i32, i32
  return %idx, %phase, %cnt : i32, i32, i32
}

// The state is an SSA value threaded through loops as an iter_arg.
// CHECK-LABEL: func.func @state_in_loop
// CHECK: scf.for {{.*}} iter_args(%[[IT:.*]] = %{{.*}}) -> (!pipeline.state<2, producer>)
// CHECK:   pipeline.producer.acquire %{{.*}}, %[[IT]] : <async,
// CHECK:   %[[NXT:.*]] = pipeline.state.advance %[[IT]] : <2, producer>
// CHECK:   scf.yield %[[NXT]] : !pipeline.state<2, producer>
func.func @state_in_loop(%n: index) -> !ps2 {
  %p = pipeline.create : !async
  %s = pipeline.state.make : !ps2
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %k = %c0 to %n step %c1 iter_args(%it = %s) -> (!ps2) {
    pipeline.producer.acquire %p, %it : !async, !ps2
    pipeline.producer.commit %p, %it : !async, !ps2
    %nxt = pipeline.state.advance %it : !ps2
    scf.yield %nxt : !ps2
  }
  return %r : !ps2
}

//===----------------------------------------------------------------------===//
// PipelineAsync: every producer and consumer verb
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @async_verbs
func.func @async_verbs() -> !llvm.ptr<3> {
  // CHECK: %[[P:.*]] = pipeline.create : <async, stages = 2, producer = <thread, 128>, consumer = <warp, 4>>
  %p = pipeline.create : !async
  // CHECK: %[[PS:.*]] = pipeline.state.make : <2, producer>
  %ps = pipeline.state.make : !ps2
  // CHECK: %[[CS:.*]] = pipeline.state.make : <2, consumer>
  %cs = pipeline.state.make : !cs2
  // CHECK: %[[TOK:.*]] = pipeline.producer.try_acquire %[[P]], %[[PS]] : <async, {{.*}}>, <2, producer>
  %tok = pipeline.producer.try_acquire %p, %ps : !async, !ps2
  // CHECK: pipeline.producer.acquire %[[P]], %[[PS]] : <async, {{.*}}>, <2, producer>
  pipeline.producer.acquire %p, %ps : !async, !ps2
  // CHECK: pipeline.producer.acquire %[[P]], %[[PS]] token %[[TOK]] : <async,
  pipeline.producer.acquire %p, %ps token %tok : !async, !ps2
  // CHECK: %[[BAR:.*]] = pipeline.producer.barrier %[[P]], %[[PS]] : <async,
  %bar = pipeline.producer.barrier %p, %ps : !async, !ps2
  // CHECK: pipeline.producer.commit %[[P]], %[[PS]] : <async,
  pipeline.producer.commit %p, %ps : !async, !ps2
  // CHECK: pipeline.producer.commit %[[P]], %[[PS]] {elect_one} : <async,
  pipeline.producer.commit %p, %ps {elect_one} : !async, !ps2
  // CHECK: pipeline.producer.commit %[[P]], %[[PS]] {elect_one, syncwarp_before} : <async,
  pipeline.producer.commit %p, %ps {elect_one, syncwarp_before} : !async, !ps2
  // CHECK: pipeline.producer.tail %[[P]], %[[PS]] : <async,
  pipeline.producer.tail %p, %ps : !async, !ps2
  // CHECK: %[[CTOK:.*]] = pipeline.consumer.try_wait %[[P]], %[[CS]] : <async, {{.*}}>, <2, consumer>
  %ctok = pipeline.consumer.try_wait %p, %cs : !async, !cs2
  // CHECK: pipeline.consumer.wait %[[P]], %[[CS]] : <async,
  pipeline.consumer.wait %p, %cs : !async, !cs2
  // CHECK: pipeline.consumer.wait %[[P]], %[[CS]] token %[[CTOK]] : <async,
  pipeline.consumer.wait %p, %cs token %ctok : !async, !cs2
  // CHECK: pipeline.consumer.release %[[P]], %[[CS]] : <async,
  pipeline.consumer.release %p, %cs : !async, !cs2
  // CHECK: pipeline.consumer.release %[[P]], %[[CS]] {elect_one, syncwarp_before} : <async,
  pipeline.consumer.release %p, %cs {elect_one, syncwarp_before} : !async, !cs2
  // CHECK: pipeline.consumer.release %[[P]], %[[CS]] {op_type = #pipeline.op_type<async_thread>} : <async,
  pipeline.consumer.release %p, %cs {op_type = #pipeline.op_type<async_thread>} : !async, !cs2
  // A producer_consumer state may drive both sides.
  // CHECK: %[[PC:.*]] = pipeline.state.make index %[[ZERO:.*]] phase %[[ZERO]] : <2, producer_consumer>
  %zero = arith.constant 0 : i32
  %pc = pipeline.state.make index %zero phase %zero : !pipeline.state<2, producer_consumer>
  // CHECK: pipeline.producer.acquire %[[P]], %[[PC]] : <async, {{.*}}>, <2, producer_consumer>
  pipeline.producer.acquire %p, %pc : !async, !pipeline.state<2, producer_consumer>
  // CHECK: pipeline.consumer.wait %[[P]], %[[PC]] : <async, {{.*}}>, <2, producer_consumer>
  pipeline.consumer.wait %p, %pc : !async, !pipeline.state<2, producer_consumer>
  // CHECK: return %[[BAR]] : !llvm.ptr<3>
  return %bar : !llvm.ptr<3>
}

// Every agent in a cooperative group.
// CHECK-LABEL: func.func @agents
func.func @agents() {
  // CHECK: pipeline.create : <async, stages = 3, producer = <threadblock, 1>, consumer = <cluster, 1>, cluster = <1, 2, 1, 1>>
  %0 = pipeline.create : !pipeline.pipeline<async, stages = 3, producer = #pipeline.group<threadblock, 1>, consumer = #pipeline.group<cluster, 1>, cluster = #pipeline.cluster<1, 2, 1, 1>>
  return
}

//===----------------------------------------------------------------------===//
// PipelineCpAsync
//===----------------------------------------------------------------------===//

!cpasync = !pipeline.pipeline<cp_async, stages = 3, producer = #pipeline.group<thread, 128>, consumer = #pipeline.group<thread, 128>>
!ps3 = !pipeline.state<3, producer>
!cs3 = !pipeline.state<3, consumer>

// CHECK-LABEL: func.func @cp_async
func.func @cp_async() {
  // CHECK: %[[P:.*]] = pipeline.create : <cp_async, stages = 3, producer = <thread, 128>, consumer = <thread, 128>>
  %p = pipeline.create : !cpasync
  %ps = pipeline.state.make : !ps3
  %cs = pipeline.state.make : !cs3
  // CHECK: pipeline.producer.acquire %[[P]], %{{.*}} : <cp_async,
  pipeline.producer.acquire %p, %ps : !cpasync, !ps3
  // CHECK: pipeline.producer.commit %[[P]], %{{.*}} : <cp_async,
  pipeline.producer.commit %p, %ps : !cpasync, !ps3
  // CHECK: pipeline.consumer.wait %[[P]], %{{.*}} : <cp_async,
  pipeline.consumer.wait %p, %cs : !cpasync, !cs3
  // CHECK: pipeline.consumer.release %[[P]], %{{.*}} : <cp_async,
  pipeline.consumer.release %p, %cs : !cpasync, !cs3
  return
}

//===----------------------------------------------------------------------===//
// PipelineTmaAsync with a cluster, multicast along M
//===----------------------------------------------------------------------===//

!tma = !pipeline.pipeline<tma_async, stages = 4, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<warp, 4>, tx_count = 16384, cluster = #pipeline.cluster<1, 2, 1, 1>, multicast = m>
!ps4 = !pipeline.state<4, producer>
!cs4 = !pipeline.state<4, consumer>

// CHECK-LABEL: func.func @tma_async
// CHECK-SAME: (%[[DESC:[^:]*]]: !llvm.ptr, %[[DST:[^:]*]]: !llvm.ptr<3>, %[[SRC:[^:]*]]: !llvm.ptr<1>, %[[X:[^:]*]]: i32, %[[Y:[^:]*]]: i32, %[[MASK:[^:]*]]: i16)
func.func @tma_async(%desc: !llvm.ptr, %dst: !llvm.ptr<3>, %src: !llvm.ptr<1>, %x: i32, %y: i32, %mask: i16) {
  // CHECK: %[[P:.*]] = pipeline.create {defer_sync} : <tma_async, stages = 4, producer = <thread, 1>, consumer = <warp, 4>, tx_count = 16384, cluster = <1, 2, 1, 1>, multicast = m>
  %p = pipeline.create {defer_sync} : !tma
  // CHECK: pipeline.init_arrive {cluster_size = 2 : i64}
  pipeline.init_arrive {cluster_size = 2}
  // CHECK: pipeline.init_wait {cluster_size = 2 : i64}
  pipeline.init_wait {cluster_size = 2}
  // CHECK: %[[PS:.*]] = pipeline.state.make : <4, producer>
  %ps = pipeline.state.make : !ps4
  %cs = pipeline.state.make : !cs4
  // CHECK: pipeline.producer.acquire %[[P]], %[[PS]] extra_tx %[[X]] : <tma_async,
  pipeline.producer.acquire %p, %ps extra_tx %x : !tma, !ps4
  // CHECK: %[[T:.*]] = pipeline.producer.try_acquire %[[P]], %[[PS]]
  %t = pipeline.producer.try_acquire %p, %ps : !tma, !ps4
  // CHECK: pipeline.producer.acquire %[[P]], %[[PS]] token %[[T]] extra_tx %[[Y]] : <tma_async,
  pipeline.producer.acquire %p, %ps token %t extra_tx %y : !tma, !ps4
  // CHECK: pipeline.copy.tma_load %[[P]], %[[PS]], %[[DESC]][%[[X]], %[[Y]]] to %[[DST]] {bytes = 8192 : i64} : <tma_async, {{.*}}>, <4, producer>, !llvm.ptr, <3>
  pipeline.copy.tma_load %p, %ps, %desc[%x, %y] to %dst {bytes = 8192} : !tma, !ps4, !llvm.ptr, !llvm.ptr<3>
  // CHECK: pipeline.copy.tma_load %[[P]], %[[PS]], %[[DESC]][%[[X]], %[[Y]], %[[X]], %[[Y]], %[[X]]] to %[[DST]] multicast %[[MASK]] {bytes = 4096 : i64} : <tma_async,
  pipeline.copy.tma_load %p, %ps, %desc[%x, %y, %x, %y, %x] to %dst multicast %mask {bytes = 4096} : !tma, !ps4, !llvm.ptr, !llvm.ptr<3>
  // CHECK: pipeline.copy.bulk %[[P]], %[[PS]], %[[SRC]] to %[[DST]], %[[X]] : <tma_async, {{.*}}>, <4, producer>, <1>, <3>
  pipeline.copy.bulk %p, %ps, %src to %dst, %x : !tma, !ps4, !llvm.ptr<1>, !llvm.ptr<3>
  // CHECK: pipeline.producer.commit %[[P]], %[[PS]] : <tma_async,
  pipeline.producer.commit %p, %ps : !tma, !ps4
  // CHECK: pipeline.consumer.wait %[[P]], %{{.*}} : <tma_async,
  pipeline.consumer.wait %p, %cs : !tma, !cs4
  // CHECK: pipeline.consumer.release %[[P]], %{{.*}} : <tma_async,
  pipeline.consumer.release %p, %cs : !tma, !cs4
  // CHECK: pipeline.producer.tail %[[P]], %[[PS]] : <tma_async,
  pipeline.producer.tail %p, %ps : !tma, !ps4
  return
}

//===----------------------------------------------------------------------===//
// PipelineTmaStore and the bulk-group ops
//===----------------------------------------------------------------------===//

!store = !pipeline.pipeline<tma_store, stages = 2>

// CHECK-LABEL: func.func @tma_store
// CHECK-SAME: (%[[DESC:[^:]*]]: !llvm.ptr, %[[SRC:[^:]*]]: !llvm.ptr<3>, %[[X:[^:]*]]: i32)
func.func @tma_store(%desc: !llvm.ptr, %src: !llvm.ptr<3>, %x: i32) {
  // CHECK: %[[P:.*]] = pipeline.create : <tma_store, stages = 2>
  %p = pipeline.create : !store
  %ps = pipeline.state.make : !ps2
  // CHECK: pipeline.producer.acquire %[[P]], %{{.*}} : <tma_store, stages = 2>, <2, producer>
  pipeline.producer.acquire %p, %ps : !store, !ps2
  // CHECK: pipeline.copy.tma_store %[[DESC]][%[[X]]] from %[[SRC]] : !llvm.ptr, <3>
  pipeline.copy.tma_store %desc[%x] from %src : !llvm.ptr, !llvm.ptr<3>
  // CHECK: pipeline.producer.commit %[[P]], %{{.*}} : <tma_store, stages = 2>, <2, producer>
  pipeline.producer.commit %p, %ps : !store, !ps2
  // CHECK: pipeline.producer.tail %[[P]], %{{.*}} : <tma_store, stages = 2>, <2, producer>
  pipeline.producer.tail %p, %ps : !store, !ps2
  // CHECK: pipeline.copy.tma_store %[[DESC]][%[[X]], %[[X]], %[[X]], %[[X]], %[[X]]] from %[[SRC]]
  pipeline.copy.tma_store %desc[%x, %x, %x, %x, %x] from %src : !llvm.ptr, !llvm.ptr<3>
  // CHECK: pipeline.bulk_group.commit{{$}}
  pipeline.bulk_group.commit
  // CHECK: pipeline.bulk_group.wait {pending = 1 : i64, read}
  pipeline.bulk_group.wait {pending = 1, read}
  // CHECK: pipeline.bulk_group.wait{{$}}
  pipeline.bulk_group.wait
  // CHECK: pipeline.bulk_group.wait {pending = 63 : i64}
  pipeline.bulk_group.wait {pending = 63}
  return
}

//===----------------------------------------------------------------------===//
// PipelineOrder
//===----------------------------------------------------------------------===//

!order = !pipeline.pipeline<order, stages = 2, producer = #pipeline.group<thread, 128>, length = 3>
!os = !pipeline.state<2, producer_consumer>

// CHECK-LABEL: func.func @order
// CHECK-SAME: (%[[GID:.*]]: i32)
func.func @order(%gid: i32) {
  // CHECK: %[[P:.*]] = pipeline.create : <order, stages = 2, producer = <thread, 128>, length = 3>
  %p = pipeline.create : !order
  // CHECK: %[[S:.*]] = pipeline.order.state %[[P]], %[[GID]] : <order, stages = 2, producer = <thread, 128>, length = 3> -> <2, producer_consumer>
  %s = pipeline.order.state %p, %gid : !order -> !os
  // CHECK: pipeline.order.wait %[[P]], %[[S]], %[[GID]] : <order, {{.*}}>, <2, producer_consumer>
  pipeline.order.wait %p, %s, %gid : !order, !os
  // CHECK: %[[S1:.*]] = pipeline.order.arrive %[[P]], %[[S]], %[[GID]] : <order, {{.*}}>, <2, producer_consumer>
  %s1 = pipeline.order.arrive %p, %s, %gid : !order, !os
  // CHECK: pipeline.order.wait %[[P]], %[[S1]], %[[GID]]
  pipeline.order.wait %p, %s1, %gid : !order, !os
  return
}

//===----------------------------------------------------------------------===//
// tcgen05 (UMMA) kinds: 2-CTA pairs, multicast along M, N and both
//===----------------------------------------------------------------------===//

!tmaumma = !pipeline.pipeline<tma_umma, stages = 4, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 1>, tx_count = 32768, cluster = #pipeline.cluster<2, 2, 2, 1>, multicast = mn, cta_group = 2>

// CHECK-LABEL: func.func @tma_umma_2cta
func.func @tma_umma_2cta(%desc: !llvm.ptr, %dst: !llvm.ptr<3>, %x: i32, %mask: i16) {
  // CHECK: %[[P:.*]] = pipeline.create : <tma_umma, stages = 4, producer = <thread, 1>, consumer = <thread, 1>, tx_count = 32768, cluster = <2, 2, 2, 1>, multicast = mn, cta_group = 2>
  %p = pipeline.create : !tmaumma
  %ps = pipeline.state.make : !ps4
  %cs = pipeline.state.make : !cs4
  // CHECK: pipeline.producer.acquire %[[P]], %{{.*}} : <tma_umma,
  pipeline.producer.acquire %p, %ps : !tmaumma, !ps4
  // CHECK: pipeline.copy.tma_load %[[P]], %{{.*}}, %{{.*}}[%{{.*}}] to %{{.*}} multicast %{{.*}} {bytes = 16384 : i64} : <tma_umma,
  pipeline.copy.tma_load %p, %ps, %desc[%x] to %dst multicast %mask {bytes = 16384} : !tmaumma, !ps4, !llvm.ptr, !llvm.ptr<3>
  // CHECK: pipeline.consumer.wait %[[P]], %{{.*}} : <tma_umma,
  pipeline.consumer.wait %p, %cs : !tmaumma, !cs4
  // CHECK: pipeline.consumer.release %[[P]], %{{.*}} {op_type = #pipeline.op_type<tcgen05_mma>} : <tma_umma,
  pipeline.consumer.release %p, %cs {op_type = #pipeline.op_type<tcgen05_mma>} : !tmaumma, !cs4
  return
}

!asyncumma = !pipeline.pipeline<async_umma, stages = 2, producer = #pipeline.group<warp, 4>, consumer = #pipeline.group<thread, 1>, cluster = #pipeline.cluster<1, 2, 1, 1>, multicast = m>
!ummaasync = !pipeline.pipeline<umma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<warp, 8>, cluster = #pipeline.cluster<2, 1, 2, 1>, multicast = n, cta_group = 2>

// CHECK-LABEL: func.func @umma_kinds
func.func @umma_kinds() {
  // CHECK: %[[AU:.*]] = pipeline.create : <async_umma, stages = 2, producer = <warp, 4>, consumer = <thread, 1>, cluster = <1, 2, 1, 1>, multicast = m>
  %au = pipeline.create : !asyncumma
  // CHECK: %[[UA:.*]] = pipeline.create : <umma_async, stages = 2, producer = <thread, 1>, consumer = <warp, 8>, cluster = <2, 1, 2, 1>, multicast = n, cta_group = 2>
  %ua = pipeline.create : !ummaasync
  %ps = pipeline.state.make : !ps2
  %cs = pipeline.state.make : !cs2
  // CHECK: pipeline.producer.commit %[[AU]], %{{.*}} {elect_one} : <async_umma,
  pipeline.producer.commit %au, %ps {elect_one} : !asyncumma, !ps2
  // CHECK: pipeline.consumer.release %[[AU]], %{{.*}} : <async_umma,
  pipeline.consumer.release %au, %cs : !asyncumma, !cs2
  // CHECK: pipeline.producer.commit %[[UA]], %{{.*}} : <umma_async,
  pipeline.producer.commit %ua, %ps : !ummaasync, !ps2
  // CHECK: pipeline.producer.tail %[[UA]], %{{.*}} : <umma_async,
  pipeline.producer.tail %ua, %ps : !ummaasync, !ps2
  // CHECK: pipeline.consumer.release %[[UA]], %{{.*}} {elect_one} : <umma_async,
  pipeline.consumer.release %ua, %cs {elect_one} : !ummaasync, !cs2
  return
}

!multi = !pipeline.pipeline<tma_multi_consumers_async, stages = 3, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 5>, tx_count = 24576>

// CHECK-LABEL: func.func @tma_multi_consumers
func.func @tma_multi_consumers() {
  // CHECK: %[[P:.*]] = pipeline.create : <tma_multi_consumers_async, stages = 3, producer = <thread, 1>, consumer = <thread, 5>, tx_count = 24576>
  %p = pipeline.create : !multi
  %cs = pipeline.state.make : !cs3
  // CHECK: pipeline.consumer.release %[[P]], %{{.*}} {op_type = #pipeline.op_type<tcgen05_mma>} : <tma_multi_consumers_async,
  pipeline.consumer.release %p, %cs {op_type = #pipeline.op_type<tcgen05_mma>} : !multi, !cs3
  // CHECK: pipeline.consumer.release %[[P]], %{{.*}} {elect_one, op_type = #pipeline.op_type<async_thread>} : <tma_multi_consumers_async,
  pipeline.consumer.release %p, %cs {op_type = #pipeline.op_type<async_thread>, elect_one} : !multi, !cs3
  return
}

!clc = !pipeline.pipeline<clc_fetch_async, stages = 1, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 256>, tx_count = 16, cluster = #pipeline.cluster<1, 2, 2, 1>>

// CHECK-LABEL: func.func @clc_fetch
func.func @clc_fetch() {
  // CHECK: %[[P:.*]] = pipeline.create : <clc_fetch_async, stages = 1, producer = <thread, 1>, consumer = <thread, 256>, tx_count = 16, cluster = <1, 2, 2, 1>>
  %p = pipeline.create : !clc
  %ps = pipeline.state.make : !pipeline.state<1, producer>
  %cs = pipeline.state.make : !pipeline.state<1, consumer>
  // CHECK: pipeline.producer.acquire %[[P]], %{{.*}} extra_tx %{{.*}} : <clc_fetch_async,
  %e = arith.constant 0 : i32
  pipeline.producer.acquire %p, %ps extra_tx %e : !clc, !pipeline.state<1, producer>
  // CHECK: pipeline.consumer.wait %[[P]], %{{.*}} : <clc_fetch_async,
  pipeline.consumer.wait %p, %cs : !clc, !pipeline.state<1, consumer>
  // CHECK: pipeline.consumer.release %[[P]], %{{.*}} : <clc_fetch_async,
  pipeline.consumer.release %p, %cs : !clc, !pipeline.state<1, consumer>
  return
}

//===----------------------------------------------------------------------===//
// NamedBarrier
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @named_barriers
// CHECK-SAME: (%[[IDX:.*]]: i32)
func.func @named_barriers(%idx: i32) {
  // CHECK: pipeline.named_barrier.arrive id = 1, threads = 256{{$}}
  pipeline.named_barrier.arrive id = 1, threads = 256
  // CHECK: pipeline.named_barrier.sync id = 0, threads = 1024{{$}}
  pipeline.named_barrier.sync id = 0, threads = 1024
  // CHECK: pipeline.named_barrier.arrive id = 2, threads = 64 index %[[IDX]]{{$}}
  pipeline.named_barrier.arrive id = 2, threads = 64 index %idx
  // CHECK: pipeline.named_barrier.sync id = 15, threads = 32 {unaligned}
  pipeline.named_barrier.sync id = 15, threads = 32 {unaligned}
  // CHECK: pipeline.named_barrier.arrive id = 3, threads = 128 index %[[IDX]] {unaligned}
  pipeline.named_barrier.arrive id = 3, threads = 128 index %idx {unaligned}
  return
}

// The enum attributes print as `#pipeline.<enum><case>`.
// CHECK-LABEL: func.func private @enum_attrs()
// CHECK-SAME: a = #pipeline.agent<threadblock>
// CHECK-SAME: k = #pipeline.kind<tma_multi_consumers_async>
// CHECK-SAME: m = #pipeline.multicast<mn>
// CHECK-SAME: o = #pipeline.op_type<clc_load>
// CHECK-SAME: r = #pipeline.role<producer_consumer>
func.func private @enum_attrs() attributes {a = #pipeline.agent<threadblock>, k = #pipeline.kind<tma_multi_consumers_async>, m = #pipeline.multicast<mn>, o = #pipeline.op_type<clc_load>, r = #pipeline.role<producer_consumer>}

// The generic form spells out the properties that the custom form hides.
// GENERIC-LABEL: sym_name = "state_ops"
// GENERIC: "pipeline.state.make"() <{operandSegmentSizes = array<i32: 0, 0, 0>}> : () -> !pipeline.state<4, producer>
// GENERIC: "pipeline.state.make"(%{{.*}}, %{{.*}}, %{{.*}}) <{operandSegmentSizes = array<i32: 1, 1, 1>}> : (i32, i32, i32) -> !pipeline.state<4, producer_consumer>
// GENERIC-LABEL: sym_name = "tma_async"
// GENERIC: "pipeline.producer.acquire"(%{{.*}}, %{{.*}}, %{{.*}}) <{operandSegmentSizes = array<i32: 1, 1, 0, 1>}> : (!pipeline.pipeline<tma_async, {{.*}}>, !pipeline.state<4, producer>, i32) -> ()
// GENERIC: "pipeline.copy.tma_load"({{.*}}) <{bytes = 4096 : i64, operandSegmentSizes = array<i32: 1, 1, 1, 5, 1, 1>}>
// GENERIC-LABEL: sym_name = "named_barriers"
// GENERIC: "pipeline.named_barrier.sync"() <{barrier_id = 15 : i64, num_threads = 32 : i64, unaligned}> : () -> ()
