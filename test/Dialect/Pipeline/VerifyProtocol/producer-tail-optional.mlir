// single-cta-tail=false: a single-CTA PipelineAsync producer may end without
// producer.tail (nothing can arrive after the CTA exits); a cluster pipeline
// still needs it.
// RUN: pipeline-opt --pipeline-verify-protocol=single-cta-tail=false -split-input-file -verify-diagnostics %s
// RUN: not pipeline-opt --pipeline-verify-protocol -split-input-file %s 2>&1 | FileCheck %s --check-prefix=STRICT

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!ps = !pipeline.state<2, producer>

// STRICT: error: pipeline 'kv': producer role exits without pipeline.producer.tail
func.func @single_cta_no_tail() {
  %p = pipeline.create {name = "kv"} : !P
  %s0 = pipeline.state.make : !ps
  pipeline.producer.acquire %p, %s0 : !P, !ps
  pipeline.producer.commit %p, %s0 : !P, !ps
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
