// A single-CTA pipeline whose consumers arrive synchronously needs no
// producer.tail (every arrive is an instruction of a thread of this CTA,
// which cannot exit before it retires): a warning by default, an error with
// single-cta-tail=true. A cluster pipeline needs it either way.
// CuTe DSL's PipelineAsync docstring example ends this way.
// RUN: pipeline-opt --pipeline-verify-protocol -split-input-file -verify-diagnostics %s
// RUN: not pipeline-opt --pipeline-verify-protocol=single-cta-tail=true -split-input-file %s 2>&1 | FileCheck %s --check-prefix=STRICT

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>

// STRICT: error: pipeline 'kv': producer role exits without pipeline.producer.tail: not needed here
func.func @single_cta_no_tail(%warp: index, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %p = pipeline.create {name = "kv"} : !P
  %is_producer = arith.cmpi eq, %warp, %c0 : index
  // expected-note @+1 {{producer role region}}
  scf.if %is_producer {
    %s0 = pipeline.state.make : !ps
    // expected-warning @+1 {{pipeline 'kv': producer role exits without pipeline.producer.tail: not needed here (one CTA, consumers arrive synchronously: nothing can arrive after the CTA exits), but CuTe DSL producers end with producer_tail (add pipeline.producer.tail with the state the producer ends with, after the loop)}}
    %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
      // expected-note @+1 {{last pipeline.producer.acquire of this role}}
      pipeline.producer.acquire %p, %s : !P, !ps
      pipeline.producer.commit %p, %s : !P, !ps
      %s1 = pipeline.state.advance %s : !ps
      scf.yield %s1 : !ps
    }
  } else {
    %c = pipeline.state.make : !cs
    %cN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %c) -> (!cs) {
      pipeline.consumer.wait %p, %s : !P, !cs
      pipeline.consumer.release %p, %s : !P, !cs
      %s1 = pipeline.state.advance %s : !cs
      scf.yield %s1 : !cs
    }
  }
  return
}

// -----

!C = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>, cluster = #pipeline.cluster<1, 2, 1, 1>>
!ps = !pipeline.state<2, producer>

// STRICT: error: pipeline 'remote': producer role exits without pipeline.producer.tail: consumers in peer CTAs
func.func @cluster_no_tail() {
  %p = pipeline.create {name = "remote"} : !C
  %s0 = pipeline.state.make : !ps
  // expected-error @+2 {{pipeline 'remote': producer role exits without pipeline.producer.tail: consumers in peer CTAs may still arrive on this CTA's barriers}}
  // expected-note @+1 {{last pipeline.producer.acquire of this role}}
  pipeline.producer.acquire %p, %s0 : !C, !ps
  pipeline.producer.commit %p, %s0 : !C, !ps
  return
}
