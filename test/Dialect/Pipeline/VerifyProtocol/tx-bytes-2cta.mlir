// Property 5 with 2-CTA (cta_group = 2) pipelines: both CTAs of the pair
// issue the same copies and all of them complete on the leader's full
// barrier, the only one armed with tx_count, so tx_count is the pair's bytes.
// RUN: pipeline-opt --pipeline-verify-protocol -split-input-file -verify-diagnostics %s

!T = !pipeline.pipeline<tma_umma, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 1>, tx_count = 8192, cluster = #pipeline.cluster<2, 1, 1, 1>, cta_group = 2>
!ps = !pipeline.state<2, producer>

// The bug: tx_count counts one CTA's copies (A + B = 8192 bytes), but the
// leader receives the peer's 8192 bytes too: the phase completes while the
// peer's half is still landing and the MMA reads a partly filled stage.
func.func @pair_bytes_counted_once(%n: index, %da: !llvm.ptr, %db: !llvm.ptr, %a: !llvm.ptr<3>, %b: !llvm.ptr<3>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %x = arith.constant 0 : i32
  // expected-note @+1 {{pipeline 'ab' is created here}}
  %p = pipeline.create {name = "ab"} : !T
  %s0 = pipeline.state.make : !ps
  %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
    // expected-error @+1 {{pipeline 'ab': producer.acquire expects 8192 bytes (tx_count 8192) but the 2 copies bound to this stage deliver 16384: the phase completes before every byte landed}}
    pipeline.producer.acquire %p, %s : !T, !ps
    %e = nvvm.elect.sync -> i1
    scf.if %e {
      // expected-note @+1 {{copy of 4096 bytes x 2 CTAs of the pair (cta_group 2)}}
      pipeline.copy.tma_load %p, %s, %da[%x, %x] to %a {bytes = 4096 : i64} : !T, !ps, !llvm.ptr, !llvm.ptr<3>
      // expected-note @+1 {{copy of 4096 bytes x 2 CTAs of the pair (cta_group 2)}}
      pipeline.copy.tma_load %p, %s, %db[%x, %x] to %b {bytes = 4096 : i64} : !T, !ps, !llvm.ptr, !llvm.ptr<3>
    }
    %s1 = pipeline.state.advance %s : !ps
    scf.yield %s1 : !ps
  }
  pipeline.producer.tail %p, %sN : !T, !ps
  return
}

// -----

!T = !pipeline.pipeline<tma_umma, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 1>, tx_count = 16384, cluster = #pipeline.cluster<2, 1, 1, 1>, cta_group = 2>
!ps = !pipeline.state<2, producer>

// The correct twin: tx_count = (A + B) x 2 CTAs of the pair.
func.func @pair_bytes_counted_twice(%n: index, %da: !llvm.ptr, %db: !llvm.ptr, %a: !llvm.ptr<3>, %b: !llvm.ptr<3>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %x = arith.constant 0 : i32
  %p = pipeline.create {name = "ab"} : !T
  %s0 = pipeline.state.make : !ps
  %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
    pipeline.producer.acquire %p, %s : !T, !ps
    %e = nvvm.elect.sync -> i1
    scf.if %e {
      pipeline.copy.tma_load %p, %s, %da[%x, %x] to %a {bytes = 4096 : i64} : !T, !ps, !llvm.ptr, !llvm.ptr<3>
      pipeline.copy.tma_load %p, %s, %db[%x, %x] to %b {bytes = 4096 : i64} : !T, !ps, !llvm.ptr, !llvm.ptr<3>
    }
    %s1 = pipeline.state.advance %s : !ps
    scf.yield %s1 : !ps
  }
  pipeline.producer.tail %p, %sN : !T, !ps
  return
}

// -----

!M = !pipeline.pipeline<tma_async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 256>, tx_count = 16384, cluster = #pipeline.cluster<1, 2, 1, 1>, multicast = m>
!ps = !pipeline.state<2, producer>

// Multicast, correct: this CTA's half of B (4096 bytes) goes to both CTAs of
// the mask, and the peer sends its half: each stage receives 2 x 4096 of B
// plus this CTA's 8192 bytes of A.
func.func @multicast_receivers_counted(%da: !llvm.ptr, %db: !llvm.ptr, %a: !llvm.ptr<3>, %b: !llvm.ptr<3>) {
  %x = arith.constant 0 : i32
  %both = arith.constant 3 : i16
  %p = pipeline.create {name = "mc"} : !M
  %s0 = pipeline.state.make : !ps
  pipeline.producer.acquire %p, %s0 : !M, !ps
  pipeline.copy.tma_load %p, %s0, %da[%x, %x] to %a {bytes = 8192 : i64} : !M, !ps, !llvm.ptr, !llvm.ptr<3>
  pipeline.copy.tma_load %p, %s0, %db[%x, %x] to %b multicast %both {bytes = 4096 : i64} : !M, !ps, !llvm.ptr, !llvm.ptr<3>
  pipeline.producer.tail %p, %s0 : !M, !ps
  return
}
