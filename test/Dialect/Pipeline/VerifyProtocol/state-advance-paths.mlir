// Check 2, advances on every path: a loop-carried state whose advances are
// the same on every path through the body must be used by the same number
// of stages on every path. A wait under a branch (a kernel argument, the
// loop variable, data) with the advance outside it moves the state past a
// stage nobody waited on whenever the branch is not taken
// (Dao-AILab/flash-attention#2258: the consumer phase flipped on a tile the
// producer skipped). Each bug sits next to its correct twin and a kernel on
// the other side of the rule's boundary; they must stay silent.
// RUN: pipeline-opt --pipeline-verify-protocol -split-input-file -verify-diagnostics %s
!P = !pipeline.pipeline<async, stages = 1, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!ps = !pipeline.state<1, producer>
!cs = !pipeline.state<1, consumer>

// Bug: tiles before %first have no work; the producer skips them, the
// consumer waits only on tiles with work but advances on every tile.
gpu.module @m {
  gpu.func @phase_flip_on_empty_tile(%tiles: index, %first: index) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c32 = arith.constant 32 : index
    %p = pipeline.create {name = "o_corr"} : !P
    %tid = gpu.thread_id x
    %w = arith.divui %tid, %c32 : index
    %isp = arith.cmpi eq, %w, %c0 : index
    scf.if %isp {
      %s0 = pipeline.state.make : !ps
      %sN = scf.for %t = %c0 to %tiles step %c1 iter_args(%s = %s0) -> (!ps) {
        %work = arith.cmpi uge, %t, %first : index
        %sn = scf.if %work -> (!ps) {
          pipeline.producer.acquire %p, %s : !P, !ps
          pipeline.producer.commit %p, %s : !P, !ps
          %a = pipeline.state.advance %s : !ps
          scf.yield %a : !ps
        } else {
          scf.yield %s : !ps
        }
        scf.yield %sn : !ps
      }
      pipeline.producer.tail %p, %sN : !P, !ps
    } else {
      %c0s = pipeline.state.make : !cs
      %cN = scf.for %t = %c0 to %tiles step %c1 iter_args(%c = %c0s) -> (!cs) {
        %work = arith.cmpi uge, %t, %first : index
        // expected-note @+1 {{the branch whose sides use different numbers of stages}}
        scf.if %work {
          // expected-note @+1 {{the stage is used here}}
          pipeline.consumer.wait %p, %c : !P, !cs
          pipeline.consumer.release %p, %c : !P, !cs
        }
        // expected-error @+1 {{pipeline 'o_corr': the state advances 1 stage on every path through the loop body, but the body waits on 1 stage on some paths and 0 on others (rule: a state advances once per stage the iteration uses, on every path)}}
        %cn = pipeline.state.advance %c : !cs
        scf.yield %cn : !cs
      }
    }
    gpu.return
  }
}

// -----

!P = !pipeline.pipeline<async, stages = 1, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!ps = !pipeline.state<1, producer>
!cs = !pipeline.state<1, consumer>

// Twin: the consumer advances inside the branch, with its wait.
gpu.module @m {
  gpu.func @advance_with_the_wait(%tiles: index, %first: index) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c32 = arith.constant 32 : index
    %p = pipeline.create {name = "o_corr"} : !P
    %tid = gpu.thread_id x
    %w = arith.divui %tid, %c32 : index
    %isp = arith.cmpi eq, %w, %c0 : index
    scf.if %isp {
      %s0 = pipeline.state.make : !ps
      %sN = scf.for %t = %c0 to %tiles step %c1 iter_args(%s = %s0) -> (!ps) {
        %work = arith.cmpi uge, %t, %first : index
        %sn = scf.if %work -> (!ps) {
          pipeline.producer.acquire %p, %s : !P, !ps
          pipeline.producer.commit %p, %s : !P, !ps
          %a = pipeline.state.advance %s : !ps
          scf.yield %a : !ps
        } else {
          scf.yield %s : !ps
        }
        scf.yield %sn : !ps
      }
      pipeline.producer.tail %p, %sN : !P, !ps
    } else {
      %c0s = pipeline.state.make : !cs
      %cN = scf.for %t = %c0 to %tiles step %c1 iter_args(%c = %c0s) -> (!cs) {
        %work = arith.cmpi uge, %t, %first : index
        %cn = scf.if %work -> (!cs) {
          pipeline.consumer.wait %p, %c : !P, !cs
          pipeline.consumer.release %p, %c : !P, !cs
          %a = pipeline.state.advance %c : !cs
          scf.yield %a : !cs
        } else {
          scf.yield %c : !cs
        }
        scf.yield %cn : !cs
      }
    }
    gpu.return
  }
}

// -----

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>

// Boundary: both sides of the branch wait on one stage (a different
// computation per side), and the one advance outside covers either.
gpu.module @m {
  gpu.func @both_sides_wait(%n: index, %first: index) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c32 = arith.constant 32 : index
    %p = pipeline.create {name = "kv"} : !P
    %tid = gpu.thread_id x
    %w = arith.divui %tid, %c32 : index
    %isp = arith.cmpi eq, %w, %c0 : index
    scf.if %isp {
      %s0 = pipeline.state.make : !ps
      %sN = scf.for %t = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
        pipeline.producer.acquire %p, %s : !P, !ps
        pipeline.producer.commit %p, %s : !P, !ps
        %a = pipeline.state.advance %s : !ps
        scf.yield %a : !ps
      }
      pipeline.producer.tail %p, %sN : !P, !ps
    } else {
      %c0s = pipeline.state.make : !cs
      %cN = scf.for %t = %c0 to %n step %c1 iter_args(%c = %c0s) -> (!cs) {
        %masked = arith.cmpi ult, %t, %first : index
        scf.if %masked {
          pipeline.consumer.wait %p, %c : !P, !cs
          pipeline.consumer.release %p, %c : !P, !cs
        } else {
          pipeline.consumer.wait %p, %c : !P, !cs
          pipeline.consumer.release %p, %c : !P, !cs
        }
        %cn = pipeline.state.advance %c : !cs
        scf.yield %cn : !cs
      }
    }
    gpu.return
  }
}
