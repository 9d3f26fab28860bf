// Property 11 per CTA of a cluster (docs/VerifyProtocol.md): a ring of its
// own in every CTA (no multicast, no CTA pair) needs a producer in every
// CTA where a consumer waits on it. The roles' branches on the CTA rank
// (%cluster_ctarank compared with constants) are evaluated for each rank of
// the cluster (known_cluster_size). Each bug sits next to its correct twin,
// which must stay silent.
// RUN: pipeline-opt --pipeline-verify-protocol -split-input-file -verify-diagnostics %s
!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>

// Bug: the producer sits under `rank == 0` (as a multicast leader would),
// the consumer runs in both CTAs of the cluster: CTA 1's consumer waits on
// stages nobody fills.
gpu.module @k {
gpu.func @producer_in_rank0_only(%n: index) kernel attributes {known_block_size = array<i32: 64, 1, 1>, known_cluster_size = array<i32: 2, 1, 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %r0 = arith.constant 0 : i32
  // expected-note @+1 {{pipeline 'ab' is created here}}
  %p = pipeline.create {name = "ab"} : !P
  %rank = nvvm.read.ptx.sreg.cluster.ctarank : i32
  %tid = gpu.thread_id x
  %w = arith.divui %tid, %c32 : index
  %is0 = arith.cmpi eq, %w, %c0 : index
  scf.if %is0 {
    %lead = arith.cmpi eq, %rank, %r0 : i32
    // expected-error @+1 {{pipeline 'ab': its producer role runs in CTA 0 of the cluster of 2 only (this branch on the CTA rank), but the ring is per CTA (not multicast) and its consumers also wait in CTA 1: they wait on stages nobody fills in their CTA (run the producer in every CTA whose consumers use the ring, or multicast the loads to them)}}
    scf.if %lead {
      %s0 = pipeline.state.make : !ps
      %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
        // expected-note @+1 {{the producer}}
        pipeline.producer.acquire %p, %s : !P, !ps
        pipeline.producer.commit %p, %s : !P, !ps
        %sn = pipeline.state.advance %s : !ps
        scf.yield %sn : !ps
      }
      pipeline.producer.tail %p, %sN : !P, !ps
    }
  } else {
    %c = pipeline.state.make : !cs
    %cN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %c) -> (!cs) {
      // expected-note @+1 {{the consumer waits here, in every CTA of the cluster}}
      pipeline.consumer.wait %p, %s : !P, !cs
      pipeline.consumer.release %p, %s : !P, !cs
      %sn = pipeline.state.advance %s : !cs
      scf.yield %sn : !cs
    }
  }
  gpu.return
}
}

// -----

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>

// Twin: the producer runs in every CTA, each filling its own ring.
gpu.module @k {
gpu.func @producer_in_every_cta(%n: index) kernel attributes {known_block_size = array<i32: 64, 1, 1>, known_cluster_size = array<i32: 2, 1, 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %p = pipeline.create {name = "ab"} : !P
  %tid = gpu.thread_id x
  %w = arith.divui %tid, %c32 : index
  %is0 = arith.cmpi eq, %w, %c0 : index
  scf.if %is0 {
    %s0 = pipeline.state.make : !ps
    %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
      pipeline.producer.acquire %p, %s : !P, !ps
      pipeline.producer.commit %p, %s : !P, !ps
      %sn = pipeline.state.advance %s : !ps
      scf.yield %sn : !ps
    }
    pipeline.producer.tail %p, %sN : !P, !ps
  } else {
    %c = pipeline.state.make : !cs
    %cN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %c) -> (!cs) {
      pipeline.consumer.wait %p, %s : !P, !cs
      pipeline.consumer.release %p, %s : !P, !cs
      %sn = pipeline.state.advance %s : !cs
      scf.yield %sn : !cs
    }
  }
  gpu.return
}
}

// -----

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>

// Twin: both roles run in CTA 0 only (the other CTA has other work): no
// CTA has a consumer without its producer.
gpu.module @k {
gpu.func @both_roles_in_rank0(%n: index) kernel attributes {known_block_size = array<i32: 64, 1, 1>, known_cluster_size = array<i32: 2, 1, 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %r0 = arith.constant 0 : i32
  %p = pipeline.create {name = "ab"} : !P
  %rank = nvvm.read.ptx.sreg.cluster.ctarank : i32
  %lead = arith.cmpi eq, %rank, %r0 : i32
  scf.if %lead {
    %tid = gpu.thread_id x
    %w = arith.divui %tid, %c32 : index
    %is0 = arith.cmpi eq, %w, %c0 : index
    scf.if %is0 {
      %s0 = pipeline.state.make : !ps
      %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
        pipeline.producer.acquire %p, %s : !P, !ps
        pipeline.producer.commit %p, %s : !P, !ps
        %sn = pipeline.state.advance %s : !ps
        scf.yield %sn : !ps
      }
      pipeline.producer.tail %p, %sN : !P, !ps
    } else {
      %c = pipeline.state.make : !cs
      %cN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %c) -> (!cs) {
        pipeline.consumer.wait %p, %s : !P, !cs
        pipeline.consumer.release %p, %s : !P, !cs
        %sn = pipeline.state.advance %s : !cs
        scf.yield %sn : !cs
      }
    }
  }
  gpu.return
}
}

// -----

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>

// Bug, the other direction: the consumer sits under `rank == 0`, the
// producer fills the ring in both CTAs: CTA 1's producer waits on stages
// nobody releases once the ring is full, and its tail never completes.
gpu.module @k {
gpu.func @consumer_in_rank0_only(%n: index) kernel attributes {known_block_size = array<i32: 64, 1, 1>, known_cluster_size = array<i32: 2, 1, 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %r0 = arith.constant 0 : i32
  // expected-note @+1 {{pipeline 'ab' is created here}}
  %p = pipeline.create {name = "ab"} : !P
  %rank = nvvm.read.ptx.sreg.cluster.ctarank : i32
  %tid = gpu.thread_id x
  %w = arith.divui %tid, %c32 : index
  %is0 = arith.cmpi eq, %w, %c0 : index
  scf.if %is0 {
    %s0 = pipeline.state.make : !ps
    %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
      // expected-note @+1 {{the producer acquires here, in every CTA of the cluster}}
      pipeline.producer.acquire %p, %s : !P, !ps
      pipeline.producer.commit %p, %s : !P, !ps
      %sn = pipeline.state.advance %s : !ps
      scf.yield %sn : !ps
    }
    pipeline.producer.tail %p, %sN : !P, !ps
  } else {
    %lead = arith.cmpi eq, %rank, %r0 : i32
    // expected-error @+1 {{pipeline 'ab': its consumer role runs in CTA 0 of the cluster of 2 only (this branch on the CTA rank), but the ring is per CTA (not multicast) and its producer also fills it in CTA 1: nobody releases the stages there}}
    scf.if %lead {
      %c = pipeline.state.make : !cs
      %cN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %c) -> (!cs) {
        // expected-note @+1 {{the consumer}}
        pipeline.consumer.wait %p, %s : !P, !cs
        pipeline.consumer.release %p, %s : !P, !cs
        %sn = pipeline.state.advance %s : !cs
        scf.yield %sn : !cs
      }
    }
  }
  gpu.return
}
}

// -----

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>

// Twin: both roles under `rank == 0` (the ring is used in CTA 0 only).
gpu.module @k {
gpu.func @both_roles_in_rank0(%n: index) kernel attributes {known_block_size = array<i32: 64, 1, 1>, known_cluster_size = array<i32: 2, 1, 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %r0 = arith.constant 0 : i32
  %p = pipeline.create {name = "ab"} : !P
  %rank = nvvm.read.ptx.sreg.cluster.ctarank : i32
  %lead = arith.cmpi eq, %rank, %r0 : i32
  %tid = gpu.thread_id x
  %w = arith.divui %tid, %c32 : index
  %is0 = arith.cmpi eq, %w, %c0 : index
  scf.if %lead {
    scf.if %is0 {
      %s0 = pipeline.state.make : !ps
      %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
        pipeline.producer.acquire %p, %s : !P, !ps
        pipeline.producer.commit %p, %s : !P, !ps
        %sn = pipeline.state.advance %s : !ps
        scf.yield %sn : !ps
      }
      pipeline.producer.tail %p, %sN : !P, !ps
    } else {
      %c = pipeline.state.make : !cs
      %cN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %c) -> (!cs) {
        pipeline.consumer.wait %p, %s : !P, !cs
        pipeline.consumer.release %p, %s : !P, !cs
        %sn = pipeline.state.advance %s : !cs
        scf.yield %sn : !cs
      }
    }
  }
  gpu.return
}
}
