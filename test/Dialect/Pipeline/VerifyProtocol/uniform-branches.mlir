// Property 1, both branches decided: an scf.if whose condition is the same for
// every thread (constants and kernel arguments through arith, not a thread,
// lane, warp or CTA id, nor a helper function's arguments, which may be
// thread ids) is not a warp-role split, so each branch must do the
// same with each pipeline. A release in one branch only leaves the stage held
// whenever the other branch runs.
// RUN: pipeline-opt --pipeline-verify-protocol -split-input-file -verify-diagnostics %s

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!cs = !pipeline.state<2, consumer>

gpu.module @k {
gpu.func @release_in_one_branch(%n: index, %flag: i1) kernel {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %p = pipeline.create {name = "kv"} : !P
  %c = pipeline.state.make : !cs
  %cN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %c) -> (!cs) {
    pipeline.consumer.wait %p, %s : !P, !cs
    // expected-note @+1 {{branches on a uniform condition here}}
    scf.if %flag {
      // expected-error @+1 {{pipeline 'kv': pipeline.consumer.release in the then branch of an scf.if has no match in the else branch; the condition is the same for every thread (not a warp-role split), so whenever the else branch runs that pipeline.consumer.release does not happen and the pipeline deadlocks (do it in both branches, or move it out of the scf.if)}}
      pipeline.consumer.release %p, %s : !P, !cs
    }
    %s1 = pipeline.state.advance %s : !cs
    scf.yield %s1 : !cs
  }
  gpu.return
}
}

// -----

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!ps = !pipeline.state<2, producer>

// A condition computed from kernel arguments; the commit is in the else
// branch only.
gpu.module @k {
gpu.func @commit_in_else_only(%n: index, %m: index) kernel {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %p = pipeline.create {name = "kv"} : !P
  %s0 = pipeline.state.make : !ps
  %small = arith.cmpi ult, %m, %n : index
  %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) {
    pipeline.producer.acquire %p, %s : !P, !ps
    // expected-note @+1 {{branches on a uniform condition here}}
    scf.if %small {
      %z = arith.addi %m, %c1 : index
    } else {
      // expected-error @+1 {{pipeline 'kv': pipeline.producer.commit in the else branch of an scf.if has no match in the then branch}}
      pipeline.producer.commit %p, %s : !P, !ps
    }
    %s1 = pipeline.state.advance %s : !ps
    scf.yield %s1 : !ps
  }
  pipeline.producer.tail %p, %sN : !P, !ps
  gpu.return
}
}

// -----

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 1>, consumer = #pipeline.group<thread, 32>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>

// Correct twins: both branches release; a whole pair under the condition;
// a peeled first iteration (a condition on the loop variable is not
// decided); an elect guard around a commit (a guard, not a branch on data);
// warp roles in the two branches of a warp test.
gpu.module @k {
gpu.func @uniform_branches_ok(%n: index, %flag: i1) kernel {
  %tid = gpu.thread_id x
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %p = pipeline.create {name = "kv"} : !P
  %q = pipeline.create {name = "q"} : !P
  %warp = arith.divui %tid, %c32 : index
  %is_producer = arith.cmpi eq, %warp, %c0 : index
  scf.if %is_producer {
    %s0 = pipeline.state.make : !ps
    %sN:2 = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0, %t = %s0) -> (!ps, !ps) {
      pipeline.producer.acquire %p, %s : !P, !ps
      %elected = nvvm.elect.sync -> i1
      scf.if %elected {
        pipeline.producer.commit %p, %s : !P, !ps
      }
      %t1 = scf.if %flag -> (!ps) {
        pipeline.producer.acquire %q, %t : !P, !ps
        pipeline.producer.commit %q, %t {elect_one} : !P, !ps
        %t2 = pipeline.state.advance %t : !ps
        scf.yield %t2 : !ps
      } else {
        scf.yield %t : !ps
      }
      %s1 = pipeline.state.advance %s : !ps
      scf.yield %s1, %t1 : !ps, !ps
    }
    pipeline.producer.tail %p, %sN#0 : !P, !ps
    pipeline.producer.tail %q, %sN#1 : !P, !ps
  } else {
    %c = pipeline.state.make : !cs
    pipeline.consumer.wait %p, %c : !P, !cs
    %last = scf.for %i = %c1 to %n step %c1 iter_args(%prev = %c) -> (!cs) {
      %next = pipeline.state.advance %prev : !cs
      pipeline.consumer.wait %p, %next : !P, !cs
      scf.if %flag {
        pipeline.consumer.release %p, %prev : !P, !cs
      } else {
        pipeline.consumer.release %p, %prev : !P, !cs
      }
      scf.yield %next : !cs
    }
    pipeline.consumer.release %p, %last : !P, !cs
    %d = pipeline.state.make : !cs
    %dN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %d) -> (!cs) {
      scf.if %flag {
        pipeline.consumer.wait %q, %s : !P, !cs
        pipeline.consumer.release %q, %s : !P, !cs
      }
      %s1 = pipeline.state.advance %s : !cs
      scf.yield %s1 : !cs
    }
  }
  gpu.return
}
}

// -----

!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!cs = !pipeline.state<2, consumer>

// Correct: a release that lags its wait by one iteration, peeled with a
// condition on the loop variable (k > 0), the last stage released after the
// loop.
gpu.module @k {
gpu.func @peeled_release(%n: index) kernel {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %p = pipeline.create {name = "kv"} : !P
  %c = pipeline.state.make : !cs
  %r:2 = scf.for %k = %c0 to %n step %c1 iter_args(%s = %c, %prev = %c) -> (!cs, !cs) {
    pipeline.consumer.wait %p, %s : !P, !cs
    %later = arith.cmpi ugt, %k, %c0 : index
    scf.if %later {
      pipeline.consumer.release %p, %prev : !P, !cs
    }
    %s1 = pipeline.state.advance %s : !cs
    scf.yield %s1, %s : !cs, !cs
  }
  pipeline.consumer.release %p, %r#1 : !P, !cs
  gpu.return
}
}
