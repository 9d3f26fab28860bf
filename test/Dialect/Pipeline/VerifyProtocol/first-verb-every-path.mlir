// Check 2, the second verb of a pair only where its first verb ran: a
// producer_commit (consumer_release) after a branch whose one side holds
// the acquire (wait) of its stage and whose other side does not signals,
// where the other side is taken, a stage nobody acquired (waited on)
// (pytorch/helion#3621: the tail dq_empty wait skipped for 1-step tiles).
// And check 2's every-path rule where the loop's advances run through a
// nested loop: a branch that can differ between iterations, one side of
// which uses more stages of a state than the other, the state advanced
// after it on every path.
// Each tile's loop of all but the last step runs inside the tile loop (the
// reports' form; a flat loop with the same branch is check 2's every-path
// rule's). Each bug sits next to its correct twin and kernels on the other
// side of the rule's boundary; they must stay silent.
// RUN: pipeline-opt --pipeline-verify-protocol -split-input-file -verify-diagnostics %s
!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>

// Bug (pytorch/helion#3621): each tile's loop covers all but the last step;
// the tail's acquire of the dQ slot is skipped on one-step tiles, its commit
// and advance are not: there the commit signals a stage never acquired.
gpu.module @m {
  gpu.func @acquire_skipped_on_short_tiles(%tiles: index) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c3 = arith.constant 3 : index
    %c32 = arith.constant 32 : index
    %p = pipeline.create {name = "dq"} : !P
    %tid = gpu.thread_id x
    %w = arith.divui %tid, %c32 : index
    %isp = arith.cmpi eq, %w, %c0 : index
    scf.if %isp {
      %s0 = pipeline.state.make : !ps
      %sN = scf.for %t = %c0 to %tiles step %c1 iter_args(%s = %s0) -> (!ps) {
        // Odd tiles take one step, even tiles three.
        %odd = arith.remui %t, %c2 : index
        %short = arith.muli %odd, %c2 : index
        %steps = arith.subi %c3, %short : index
        %head = arith.subi %steps, %c1 : index
        %sh = scf.for %j = %c0 to %head step %c1 iter_args(%a = %s) -> (!ps) {
          pipeline.producer.acquire %p, %a : !P, !ps
          pipeline.producer.commit %p, %a : !P, !ps
          %an = pipeline.state.advance %a : !ps
          scf.yield %an : !ps
        }
        %long = arith.cmpi ugt, %steps, %c1 : index
        // expected-error @+1 {{pipeline 'dq': the producer_acquire of a stage runs only on one side of this branch, but its producer_commit runs after the branch on every path (rule: the second verb of a pair runs only where its first verb ran)}}
        scf.if %long {
          // expected-note @+1 {{the producer_acquire, on one side only}}
          pipeline.producer.acquire %p, %sh : !P, !ps
        }
        // expected-note @+1 {{the producer_commit of that stage, on every path}}
        pipeline.producer.commit %p, %sh : !P, !ps
        %sn = pipeline.state.advance %sh : !ps
        scf.yield %sn : !ps
      }
      pipeline.producer.tail %p, %sN : !P, !ps
    } else {
      %c0s = pipeline.state.make : !cs
      %cN = scf.for %t = %c0 to %tiles step %c1 iter_args(%c = %c0s) -> (!cs) {
        %odd = arith.remui %t, %c2 : index
        %short = arith.muli %odd, %c2 : index
        %steps = arith.subi %c3, %short : index
        %head = arith.subi %steps, %c1 : index
        %ch = scf.for %j = %c0 to %head step %c1 iter_args(%b = %c) -> (!cs) {
          pipeline.consumer.wait %p, %b : !P, !cs
          pipeline.consumer.release %p, %b : !P, !cs
          %bn = pipeline.state.advance %b : !cs
          scf.yield %bn : !cs
        }
        %long = arith.cmpi ugt, %steps, %c1 : index
        pipeline.consumer.wait %p, %ch : !P, !cs
        pipeline.consumer.release %p, %ch : !P, !cs
        %cn = pipeline.state.advance %ch : !cs
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

// Bug: the consumer's form: the tail's wait is skipped on one-step tiles and
// the release is not: there it hands back a stage whose data may not have
// arrived.
gpu.module @m {
  gpu.func @wait_skipped_on_short_tiles(%tiles: index) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c3 = arith.constant 3 : index
    %c32 = arith.constant 32 : index
    %p = pipeline.create {name = "dq"} : !P
    %tid = gpu.thread_id x
    %w = arith.divui %tid, %c32 : index
    %isp = arith.cmpi eq, %w, %c0 : index
    scf.if %isp {
      %s0 = pipeline.state.make : !ps
      %sN = scf.for %t = %c0 to %tiles step %c1 iter_args(%s = %s0) -> (!ps) {
        // Odd tiles take one step, even tiles three.
        %odd = arith.remui %t, %c2 : index
        %short = arith.muli %odd, %c2 : index
        %steps = arith.subi %c3, %short : index
        %head = arith.subi %steps, %c1 : index
        %sh = scf.for %j = %c0 to %head step %c1 iter_args(%a = %s) -> (!ps) {
          pipeline.producer.acquire %p, %a : !P, !ps
          pipeline.producer.commit %p, %a : !P, !ps
          %an = pipeline.state.advance %a : !ps
          scf.yield %an : !ps
        }
        %long = arith.cmpi ugt, %steps, %c1 : index
        pipeline.producer.acquire %p, %sh : !P, !ps
        pipeline.producer.commit %p, %sh : !P, !ps
        %sn = pipeline.state.advance %sh : !ps
        scf.yield %sn : !ps
      }
      pipeline.producer.tail %p, %sN : !P, !ps
    } else {
      %c0s = pipeline.state.make : !cs
      %cN = scf.for %t = %c0 to %tiles step %c1 iter_args(%c = %c0s) -> (!cs) {
        %odd = arith.remui %t, %c2 : index
        %short = arith.muli %odd, %c2 : index
        %steps = arith.subi %c3, %short : index
        %head = arith.subi %steps, %c1 : index
        %ch = scf.for %j = %c0 to %head step %c1 iter_args(%b = %c) -> (!cs) {
          pipeline.consumer.wait %p, %b : !P, !cs
          pipeline.consumer.release %p, %b : !P, !cs
          %bn = pipeline.state.advance %b : !cs
          scf.yield %bn : !cs
        }
        %long = arith.cmpi ugt, %steps, %c1 : index
        // expected-error @+1 {{pipeline 'dq': the consumer_wait of a stage runs only on one side of this branch, but its consumer_release runs after the branch on every path}}
        scf.if %long {
          // expected-note @+1 {{the consumer_wait, on one side only}}
          pipeline.consumer.wait %p, %ch : !P, !cs
        }
        // expected-note @+1 {{the consumer_release of that stage, on every path}}
        pipeline.consumer.release %p, %ch : !P, !cs
        %cn = pipeline.state.advance %ch : !cs
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

// Twin: the tails acquire and wait on every path.
gpu.module @m {
  gpu.func @tail_on_every_path(%tiles: index) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c3 = arith.constant 3 : index
    %c32 = arith.constant 32 : index
    %p = pipeline.create {name = "dq"} : !P
    %tid = gpu.thread_id x
    %w = arith.divui %tid, %c32 : index
    %isp = arith.cmpi eq, %w, %c0 : index
    scf.if %isp {
      %s0 = pipeline.state.make : !ps
      %sN = scf.for %t = %c0 to %tiles step %c1 iter_args(%s = %s0) -> (!ps) {
        // Odd tiles take one step, even tiles three.
        %odd = arith.remui %t, %c2 : index
        %short = arith.muli %odd, %c2 : index
        %steps = arith.subi %c3, %short : index
        %head = arith.subi %steps, %c1 : index
        %sh = scf.for %j = %c0 to %head step %c1 iter_args(%a = %s) -> (!ps) {
          pipeline.producer.acquire %p, %a : !P, !ps
          pipeline.producer.commit %p, %a : !P, !ps
          %an = pipeline.state.advance %a : !ps
          scf.yield %an : !ps
        }
        %long = arith.cmpi ugt, %steps, %c1 : index
        pipeline.producer.acquire %p, %sh : !P, !ps
        pipeline.producer.commit %p, %sh : !P, !ps
        %sn = pipeline.state.advance %sh : !ps
        scf.yield %sn : !ps
      }
      pipeline.producer.tail %p, %sN : !P, !ps
    } else {
      %c0s = pipeline.state.make : !cs
      %cN = scf.for %t = %c0 to %tiles step %c1 iter_args(%c = %c0s) -> (!cs) {
        %odd = arith.remui %t, %c2 : index
        %short = arith.muli %odd, %c2 : index
        %steps = arith.subi %c3, %short : index
        %head = arith.subi %steps, %c1 : index
        %ch = scf.for %j = %c0 to %head step %c1 iter_args(%b = %c) -> (!cs) {
          pipeline.consumer.wait %p, %b : !P, !cs
          pipeline.consumer.release %p, %b : !P, !cs
          %bn = pipeline.state.advance %b : !cs
          scf.yield %bn : !cs
        }
        %long = arith.cmpi ugt, %steps, %c1 : index
        pipeline.consumer.wait %p, %ch : !P, !cs
        pipeline.consumer.release %p, %ch : !P, !cs
        %cn = pipeline.state.advance %ch : !cs
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

// Boundary: both sides of the branch acquire (two paths of one tile): the
// commit after it is covered on every path.
gpu.module @m {
  gpu.func @acquire_on_both_sides(%tiles: index) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c3 = arith.constant 3 : index
    %c32 = arith.constant 32 : index
    %p = pipeline.create {name = "dq"} : !P
    %tid = gpu.thread_id x
    %w = arith.divui %tid, %c32 : index
    %isp = arith.cmpi eq, %w, %c0 : index
    scf.if %isp {
      %s0 = pipeline.state.make : !ps
      %sN = scf.for %t = %c0 to %tiles step %c1 iter_args(%s = %s0) -> (!ps) {
        // Odd tiles take one step, even tiles three.
        %odd = arith.remui %t, %c2 : index
        %short = arith.muli %odd, %c2 : index
        %steps = arith.subi %c3, %short : index
        %head = arith.subi %steps, %c1 : index
        %sh = scf.for %j = %c0 to %head step %c1 iter_args(%a = %s) -> (!ps) {
          pipeline.producer.acquire %p, %a : !P, !ps
          pipeline.producer.commit %p, %a : !P, !ps
          %an = pipeline.state.advance %a : !ps
          scf.yield %an : !ps
        }
        %long = arith.cmpi ugt, %steps, %c1 : index
        scf.if %long {
          pipeline.producer.acquire %p, %sh : !P, !ps
        } else {
          pipeline.producer.acquire %p, %sh : !P, !ps
        }
        pipeline.producer.commit %p, %sh : !P, !ps
        %sn = pipeline.state.advance %sh : !ps
        scf.yield %sn : !ps
      }
      pipeline.producer.tail %p, %sN : !P, !ps
    } else {
      %c0s = pipeline.state.make : !cs
      %cN = scf.for %t = %c0 to %tiles step %c1 iter_args(%c = %c0s) -> (!cs) {
        %odd = arith.remui %t, %c2 : index
        %short = arith.muli %odd, %c2 : index
        %steps = arith.subi %c3, %short : index
        %head = arith.subi %steps, %c1 : index
        %ch = scf.for %j = %c0 to %head step %c1 iter_args(%b = %c) -> (!cs) {
          pipeline.consumer.wait %p, %b : !P, !cs
          pipeline.consumer.release %p, %b : !P, !cs
          %bn = pipeline.state.advance %b : !cs
          scf.yield %bn : !cs
        }
        %long = arith.cmpi ugt, %steps, %c1 : index
        pipeline.consumer.wait %p, %ch : !P, !cs
        pipeline.consumer.release %p, %ch : !P, !cs
        %cn = pipeline.state.advance %ch : !cs
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

// Boundary: a lane guard around the acquire is no choice between paths
// (the other lanes do not take another path through the pipeline; what they
// signal is the arrive-count checks'): this rule stays silent.
gpu.module @m {
  gpu.func @acquire_under_a_lane_guard(%tiles: index) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c3 = arith.constant 3 : index
    %c32 = arith.constant 32 : index
    %p = pipeline.create {name = "dq"} : !P
    %tid = gpu.thread_id x
    %w = arith.divui %tid, %c32 : index
    %isp = arith.cmpi eq, %w, %c0 : index
    scf.if %isp {
      %s0 = pipeline.state.make : !ps
      %sN = scf.for %t = %c0 to %tiles step %c1 iter_args(%s = %s0) -> (!ps) {
        // Odd tiles take one step, even tiles three.
        %odd = arith.remui %t, %c2 : index
        %short = arith.muli %odd, %c2 : index
        %steps = arith.subi %c3, %short : index
        %head = arith.subi %steps, %c1 : index
        %sh = scf.for %j = %c0 to %head step %c1 iter_args(%a = %s) -> (!ps) {
          pipeline.producer.acquire %p, %a : !P, !ps
          pipeline.producer.commit %p, %a : !P, !ps
          %an = pipeline.state.advance %a : !ps
          scf.yield %an : !ps
        }
        %long = arith.cmpi ugt, %steps, %c1 : index
        %lane = arith.remui %tid, %c32 : index
        %first = arith.cmpi eq, %lane, %c0 : index
        scf.if %first {
          pipeline.producer.acquire %p, %sh : !P, !ps
        }
        pipeline.producer.commit %p, %sh : !P, !ps
        %sn = pipeline.state.advance %sh : !ps
        scf.yield %sn : !ps
      }
      pipeline.producer.tail %p, %sN : !P, !ps
    } else {
      %c0s = pipeline.state.make : !cs
      %cN = scf.for %t = %c0 to %tiles step %c1 iter_args(%c = %c0s) -> (!cs) {
        %odd = arith.remui %t, %c2 : index
        %short = arith.muli %odd, %c2 : index
        %steps = arith.subi %c3, %short : index
        %head = arith.subi %steps, %c1 : index
        %ch = scf.for %j = %c0 to %head step %c1 iter_args(%b = %c) -> (!cs) {
          pipeline.consumer.wait %p, %b : !P, !cs
          pipeline.consumer.release %p, %b : !P, !cs
          %bn = pipeline.state.advance %b : !cs
          scf.yield %bn : !cs
        }
        %long = arith.cmpi ugt, %steps, %c1 : index
        pipeline.consumer.wait %p, %ch : !P, !cs
        pipeline.consumer.release %p, %ch : !P, !cs
        %cn = pipeline.state.advance %ch : !cs
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

// Boundary: the commit sits under a second branch on the same condition as
// the acquire (both take the same side), the advances too: silent.
gpu.module @m {
  gpu.func @commit_under_the_same_condition(%tiles: index) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c3 = arith.constant 3 : index
    %c32 = arith.constant 32 : index
    %p = pipeline.create {name = "dq"} : !P
    %tid = gpu.thread_id x
    %w = arith.divui %tid, %c32 : index
    %isp = arith.cmpi eq, %w, %c0 : index
    scf.if %isp {
      %s0 = pipeline.state.make : !ps
      %sN = scf.for %t = %c0 to %tiles step %c1 iter_args(%s = %s0) -> (!ps) {
        // Odd tiles take one step, even tiles three.
        %odd = arith.remui %t, %c2 : index
        %short = arith.muli %odd, %c2 : index
        %steps = arith.subi %c3, %short : index
        %head = arith.subi %steps, %c1 : index
        %sh = scf.for %j = %c0 to %head step %c1 iter_args(%a = %s) -> (!ps) {
          pipeline.producer.acquire %p, %a : !P, !ps
          pipeline.producer.commit %p, %a : !P, !ps
          %an = pipeline.state.advance %a : !ps
          scf.yield %an : !ps
        }
        %long = arith.cmpi ugt, %steps, %c1 : index
        scf.if %long {
          pipeline.producer.acquire %p, %sh : !P, !ps
        }
        scf.if %long {
          pipeline.producer.commit %p, %sh : !P, !ps
        }
        %sn = scf.if %long -> (!ps) {
          %sa = pipeline.state.advance %sh : !ps
          scf.yield %sa : !ps
        } else {
          scf.yield %sh : !ps
        }
        scf.yield %sn : !ps
      }
      pipeline.producer.tail %p, %sN : !P, !ps
    } else {
      %c0s = pipeline.state.make : !cs
      %cN = scf.for %t = %c0 to %tiles step %c1 iter_args(%c = %c0s) -> (!cs) {
        %odd = arith.remui %t, %c2 : index
        %short = arith.muli %odd, %c2 : index
        %steps = arith.subi %c3, %short : index
        %head = arith.subi %steps, %c1 : index
        %ch = scf.for %j = %c0 to %head step %c1 iter_args(%b = %c) -> (!cs) {
          pipeline.consumer.wait %p, %b : !P, !cs
          pipeline.consumer.release %p, %b : !P, !cs
          %bn = pipeline.state.advance %b : !cs
          scf.yield %bn : !cs
        }
        %long = arith.cmpi ugt, %steps, %c1 : index
        %cn = scf.if %long -> (!cs) {
          pipeline.consumer.wait %p, %ch : !P, !cs
          pipeline.consumer.release %p, %ch : !P, !cs
          %ca = pipeline.state.advance %ch : !cs
          scf.yield %ca : !cs
        } else {
          scf.yield %ch : !cs
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

// Bug (the every-path rule where the tile loop's advances run through the
// nested loop): the tail's acquire and commit are skipped on one-step tiles,
// the advance is not: those tiles move the state past a stage nobody used.
gpu.module @m {
  gpu.func @tail_pair_skipped_advance_kept(%tiles: index) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c3 = arith.constant 3 : index
    %c32 = arith.constant 32 : index
    %p = pipeline.create {name = "dq"} : !P
    %tid = gpu.thread_id x
    %w = arith.divui %tid, %c32 : index
    %isp = arith.cmpi eq, %w, %c0 : index
    scf.if %isp {
      %s0 = pipeline.state.make : !ps
      %sN = scf.for %t = %c0 to %tiles step %c1 iter_args(%s = %s0) -> (!ps) {
        // Odd tiles take one step, even tiles three.
        %odd = arith.remui %t, %c2 : index
        %short = arith.muli %odd, %c2 : index
        %steps = arith.subi %c3, %short : index
        %head = arith.subi %steps, %c1 : index
        %sh = scf.for %j = %c0 to %head step %c1 iter_args(%a = %s) -> (!ps) {
          pipeline.producer.acquire %p, %a : !P, !ps
          pipeline.producer.commit %p, %a : !P, !ps
          %an = pipeline.state.advance %a : !ps
          scf.yield %an : !ps
        }
        %long = arith.cmpi ugt, %steps, %c1 : index
        // expected-note @+1 {{the branch whose sides use different numbers of stages}}
        scf.if %long {
          // expected-note @+1 {{the stage is used here}}
          pipeline.producer.acquire %p, %sh : !P, !ps
          pipeline.producer.commit %p, %sh : !P, !ps
        }
        // expected-error @+1 {{pipeline 'dq': the state advances here on every path after a branch that acquires 1 stage on one side and 0 on the other (rule: a state advances once per stage the iteration uses, on every path)}}
        %sn = pipeline.state.advance %sh : !ps
        scf.yield %sn : !ps
      }
      pipeline.producer.tail %p, %sN : !P, !ps
    } else {
      %c0s = pipeline.state.make : !cs
      %cN = scf.for %t = %c0 to %tiles step %c1 iter_args(%c = %c0s) -> (!cs) {
        %odd = arith.remui %t, %c2 : index
        %short = arith.muli %odd, %c2 : index
        %steps = arith.subi %c3, %short : index
        %head = arith.subi %steps, %c1 : index
        %ch = scf.for %j = %c0 to %head step %c1 iter_args(%b = %c) -> (!cs) {
          pipeline.consumer.wait %p, %b : !P, !cs
          pipeline.consumer.release %p, %b : !P, !cs
          %bn = pipeline.state.advance %b : !cs
          scf.yield %bn : !cs
        }
        %long = arith.cmpi ugt, %steps, %c1 : index
        %cn = scf.if %long -> (!cs) {
          pipeline.consumer.wait %p, %ch : !P, !cs
          pipeline.consumer.release %p, %ch : !P, !cs
          %ca = pipeline.state.advance %ch : !cs
          scf.yield %ca : !cs
        } else {
          scf.yield %ch : !cs
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

// Twin: the tail's pair and its advance under the branch (the branch
// yields the state), on both sides.
gpu.module @m {
  gpu.func @tail_pair_advanced_in_the_branch(%tiles: index) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c3 = arith.constant 3 : index
    %c32 = arith.constant 32 : index
    %p = pipeline.create {name = "dq"} : !P
    %tid = gpu.thread_id x
    %w = arith.divui %tid, %c32 : index
    %isp = arith.cmpi eq, %w, %c0 : index
    scf.if %isp {
      %s0 = pipeline.state.make : !ps
      %sN = scf.for %t = %c0 to %tiles step %c1 iter_args(%s = %s0) -> (!ps) {
        // Odd tiles take one step, even tiles three.
        %odd = arith.remui %t, %c2 : index
        %short = arith.muli %odd, %c2 : index
        %steps = arith.subi %c3, %short : index
        %head = arith.subi %steps, %c1 : index
        %sh = scf.for %j = %c0 to %head step %c1 iter_args(%a = %s) -> (!ps) {
          pipeline.producer.acquire %p, %a : !P, !ps
          pipeline.producer.commit %p, %a : !P, !ps
          %an = pipeline.state.advance %a : !ps
          scf.yield %an : !ps
        }
        %long = arith.cmpi ugt, %steps, %c1 : index
        %sn = scf.if %long -> (!ps) {
          pipeline.producer.acquire %p, %sh : !P, !ps
          pipeline.producer.commit %p, %sh : !P, !ps
          %sa = pipeline.state.advance %sh : !ps
          scf.yield %sa : !ps
        } else {
          scf.yield %sh : !ps
        }
        scf.yield %sn : !ps
      }
      pipeline.producer.tail %p, %sN : !P, !ps
    } else {
      %c0s = pipeline.state.make : !cs
      %cN = scf.for %t = %c0 to %tiles step %c1 iter_args(%c = %c0s) -> (!cs) {
        %odd = arith.remui %t, %c2 : index
        %short = arith.muli %odd, %c2 : index
        %steps = arith.subi %c3, %short : index
        %head = arith.subi %steps, %c1 : index
        %ch = scf.for %j = %c0 to %head step %c1 iter_args(%b = %c) -> (!cs) {
          pipeline.consumer.wait %p, %b : !P, !cs
          pipeline.consumer.release %p, %b : !P, !cs
          %bn = pipeline.state.advance %b : !cs
          scf.yield %bn : !cs
        }
        %long = arith.cmpi ugt, %steps, %c1 : index
        %cn = scf.if %long -> (!cs) {
          pipeline.consumer.wait %p, %ch : !P, !cs
          pipeline.consumer.release %p, %ch : !P, !cs
          %ca = pipeline.state.advance %ch : !cs
          scf.yield %ca : !cs
        } else {
          scf.yield %ch : !cs
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

// Boundary: the consumer's tail tries the wait first and waits only where
// that failed (the same stage on both paths), then releases and advances:
// silent.
gpu.module @m {
  gpu.func @try_wait_then_wait(%tiles: index) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c3 = arith.constant 3 : index
    %c32 = arith.constant 32 : index
    %true = arith.constant true
    %p = pipeline.create {name = "dq"} : !P
    %tid = gpu.thread_id x
    %w = arith.divui %tid, %c32 : index
    %isp = arith.cmpi eq, %w, %c0 : index
    scf.if %isp {
      %s0 = pipeline.state.make : !ps
      %sN = scf.for %t = %c0 to %tiles step %c1 iter_args(%s = %s0) -> (!ps) {
        // Odd tiles take one step, even tiles three.
        %odd = arith.remui %t, %c2 : index
        %short = arith.muli %odd, %c2 : index
        %steps = arith.subi %c3, %short : index
        %head = arith.subi %steps, %c1 : index
        %sh = scf.for %j = %c0 to %head step %c1 iter_args(%a = %s) -> (!ps) {
          pipeline.producer.acquire %p, %a : !P, !ps
          pipeline.producer.commit %p, %a : !P, !ps
          %an = pipeline.state.advance %a : !ps
          scf.yield %an : !ps
        }
        %long = arith.cmpi ugt, %steps, %c1 : index
        pipeline.producer.acquire %p, %sh : !P, !ps
        pipeline.producer.commit %p, %sh : !P, !ps
        %sn = pipeline.state.advance %sh : !ps
        scf.yield %sn : !ps
      }
      pipeline.producer.tail %p, %sN : !P, !ps
    } else {
      %c0s = pipeline.state.make : !cs
      %cN = scf.for %t = %c0 to %tiles step %c1 iter_args(%c = %c0s) -> (!cs) {
        %odd = arith.remui %t, %c2 : index
        %short = arith.muli %odd, %c2 : index
        %steps = arith.subi %c3, %short : index
        %head = arith.subi %steps, %c1 : index
        %ch = scf.for %j = %c0 to %head step %c1 iter_args(%b = %c) -> (!cs) {
          pipeline.consumer.wait %p, %b : !P, !cs
          pipeline.consumer.release %p, %b : !P, !cs
          %bn = pipeline.state.advance %b : !cs
          scf.yield %bn : !cs
        }
        %long = arith.cmpi ugt, %steps, %c1 : index
        %ready = pipeline.consumer.try_wait %p, %ch : !P, !cs
        %missed = arith.xori %ready, %true : i1
        scf.if %missed {
          pipeline.consumer.wait %p, %ch : !P, !cs
        }
        pipeline.consumer.release %p, %ch : !P, !cs
        %cn = pipeline.state.advance %ch : !cs
        scf.yield %cn : !cs
      }
    }
    gpu.return
  }
}
