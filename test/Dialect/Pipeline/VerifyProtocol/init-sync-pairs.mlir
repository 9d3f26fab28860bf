// Property 13, third part: in a cluster, the post-init sync after
// `pipeline.create {defer_sync}` is one pipeline.init_arrive (cluster
// arrive) and then one pipeline.init_wait (cluster wait) per thread. With
// one CTA init_arrive emits nothing and is not checked. A chunk without
// expected-* lines is a correct twin: any diagnostic fails it.
// RUN: pipeline-opt --pipeline-verify-protocol -split-input-file -verify-diagnostics %s

!T = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 1>, tx_count = 4096>
!ps = !pipeline.state<2, producer>

// The bug: the wait moved above the arrive.
func.func @wait_before_arrive() {
  %p = pipeline.create {defer_sync, name = "ab"} : !T
  // expected-error @+1 {{pipeline.init_wait with no pipeline.init_arrive before it (rule: one cluster arrive, then one cluster wait)}}
  pipeline.init_wait {cluster_size = 2 : i64}
  pipeline.init_arrive {cluster_size = 2 : i64}
  return
}

// -----

!T = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 1>, tx_count = 4096>

// The bug: the arrive doubled.
func.func @arrive_twice() {
  %p = pipeline.create {defer_sync, name = "ab"} : !T
  // expected-note @+1 {{the first pipeline.init_arrive}}
  pipeline.init_arrive {cluster_size = 2 : i64}
  // expected-error @+1 {{pipeline.init_arrive a second time before pipeline.init_wait (rule: one cluster arrive, then one cluster wait)}}
  pipeline.init_arrive {cluster_size = 2 : i64}
  pipeline.init_wait {cluster_size = 2 : i64}
  return
}

// -----

!T = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 1>, tx_count = 4096>

// The correct twins: the pair in order; with one CTA the wait alone (a CTA
// barrier) is the whole sync.
func.func @arrive_then_wait() {
  %p = pipeline.create {defer_sync, name = "ab"} : !T
  pipeline.init_arrive {cluster_size = 2 : i64}
  pipeline.init_wait {cluster_size = 2 : i64}
  return
}

func.func @one_cta_wait_only() {
  %p = pipeline.create {defer_sync, name = "ab"} : !T
  pipeline.init_wait
  return
}
