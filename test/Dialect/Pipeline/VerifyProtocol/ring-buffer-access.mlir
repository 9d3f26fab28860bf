// Property 16 (accesses): a plain load or store into a ring whose buffers
// the stages pick (addressed as c * state.index), made while a role holds a
// stage (between producer.acquire and producer.commit, or consumer.wait and
// consumer.release), takes its buffer from that state's index. A chunk
// without expected-* lines is a correct twin: any diagnostic fails it.
// RUN: pipeline-opt --pipeline-verify-protocol -split-input-file -verify-diagnostics %s

!A = !pipeline.pipeline<async, stages = 4, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!ps = !pipeline.state<4, producer>
!cs = !pipeline.state<4, consumer>

// The bug: the producer picks its buffer as i % 2 (double buffering) on a
// ring of 4 stages; the consumer reads the buffer of its state.
gpu.module @m {
  llvm.mlir.global internal @ring() {addr_space = 3 : i32, alignment = 128 : i64} : !llvm.array<16384 x i8>
  gpu.func @buffer_from_iteration(%n: i32, %v: i32) kernel {
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %c2 = arith.constant 2 : i32
    %c4096 = arith.constant 4096 : i32
    %ring = llvm.mlir.addressof @ring : !llvm.ptr<3>
    %p = pipeline.create {name = "ab"} : !A
    %lane = nvvm.read.ptx.sreg.laneid : i32
    %warp = nvvm.read.ptx.sreg.warpid : i32
    %is0 = arith.cmpi eq, %warp, %c0 : i32
    scf.if %is0 {
      %s0 = pipeline.state.make : !ps
      %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) : i32 {
        // expected-note @+1 {{the stage is held from here}}
        pipeline.producer.acquire %p, %s : !A, !ps
        %b = arith.remui %i, %c2 : i32
        %off = arith.muli %b, %c4096 : i32
        %buf = llvm.getelementptr %ring[%off] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
        %a = llvm.getelementptr %buf[%lane] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i32
        // expected-error @+1 {{pipeline 'ab': llvm.store reaches the ring whose buffers the stages pick (buffers of 4096 bytes, addressed from state.index), while this role holds a stage, but its address is computed from no state's index: it may touch a buffer the role does not hold, one another role is filling or still reading (take the buffer from the held state: ring.stage(state.index, stage_bytes))}}
        llvm.store %v, %a : i32, !llvm.ptr<3>
        pipeline.producer.commit %p, %s : !A, !ps
        %s1 = pipeline.state.advance %s : !ps
        scf.yield %s1 : !ps
      }
      pipeline.producer.tail %p, %sN : !A, !ps
    }
    %is1 = arith.cmpi eq, %warp, %c1 : i32
    scf.if %is1 {
      %t0 = pipeline.state.make : !cs
      %tN = scf.for %i = %c0 to %n step %c1 iter_args(%t = %t0) -> (!cs) : i32 {
        pipeline.consumer.wait %p, %t : !A, !cs
        %idx = pipeline.state.index %t : !cs
        %off = arith.muli %idx, %c4096 : i32
        // expected-note @+1 {{the ring's buffers are addressed from state.index here}}
        %buf = llvm.getelementptr %ring[%off] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
        %a = llvm.getelementptr %buf[%lane] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i32
        %x = llvm.load %a : !llvm.ptr<3> -> i32
        pipeline.consumer.release %p, %t : !A, !cs
        %t1 = pipeline.state.advance %t : !cs
        scf.yield %t1 : !cs
      }
    }
    gpu.return
  }
}

// -----

!A = !pipeline.pipeline<async, stages = 4, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!ps = !pipeline.state<4, producer>
!cs = !pipeline.state<4, consumer>

// The twins: the producer's buffer from its state; a store into the ring
// before any stage is held (zeroing it); a consumer on explicit
// (index, phase) pairs whose buffer comes from the same index value.
gpu.module @m {
  llvm.mlir.global internal @ring() {addr_space = 3 : i32, alignment = 128 : i64} : !llvm.array<16384 x i8>
  gpu.func @buffers_from_the_state(%n: i32, %v: i32) kernel {
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %c2 = arith.constant 2 : i32
    %c4 = arith.constant 4 : i32
    %c4096 = arith.constant 4096 : i32
    %ring = llvm.mlir.addressof @ring : !llvm.ptr<3>
    %p = pipeline.create {name = "ab"} : !A
    %lane = nvvm.read.ptx.sreg.laneid : i32
    %warp = nvvm.read.ptx.sreg.warpid : i32
    %z = llvm.getelementptr %ring[%lane] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i32
    llvm.store %c0, %z : i32, !llvm.ptr<3>
    %is0 = arith.cmpi eq, %warp, %c0 : i32
    scf.if %is0 {
      %s0 = pipeline.state.make : !ps
      %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) : i32 {
        pipeline.producer.acquire %p, %s : !A, !ps
        %idx = pipeline.state.index %s : !ps
        %off = arith.muli %idx, %c4096 : i32
        %buf = llvm.getelementptr %ring[%off] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
        %a = llvm.getelementptr %buf[%lane] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i32
        llvm.store %v, %a : i32, !llvm.ptr<3>
        pipeline.producer.commit %p, %s : !A, !ps
        %s1 = pipeline.state.advance %s : !ps
        scf.yield %s1 : !ps
      }
      pipeline.producer.tail %p, %sN : !A, !ps
    }
    %is1 = arith.cmpi eq, %warp, %c1 : i32
    scf.if %is1 {
      scf.for %i = %c0 to %n step %c1 : i32 {
        %k = arith.remui %i, %c4 : i32
        %q = arith.divui %i, %c4 : i32
        %ph = arith.remui %q, %c2 : i32
        %t = pipeline.state.make index %k phase %ph : !cs
        pipeline.consumer.wait %p, %t : !A, !cs
        %off = arith.muli %k, %c4096 : i32
        %buf = llvm.getelementptr %ring[%off] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
        %a = llvm.getelementptr %buf[%lane] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i32
        %x = llvm.load %a : !llvm.ptr<3> -> i32
        pipeline.consumer.release %p, %t : !A, !cs
      }
    }
    gpu.return
  }
}

// -----

!A = !pipeline.pipeline<async, stages = 4, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!ps = !pipeline.state<4, producer>
!cs = !pipeline.state<4, consumer>

// The bug: a consumer waits on pipeline 'a' and reads the buffer of ring
// B (which pipeline 'b' fills) with a's state, before waiting on 'b'. The
// twin's read follows b's wait, with b's state.
gpu.module @m {
  llvm.mlir.global internal @ring_b() {addr_space = 3 : i32, alignment = 128 : i64} : !llvm.array<16384 x i8>
  gpu.func @other_ring(%n: i32, %v: i32, %bug: i1) kernel {
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %c2 = arith.constant 2 : i32
    %c4096 = arith.constant 4096 : i32
    %rb = llvm.mlir.addressof @ring_b : !llvm.ptr<3>
    %a = pipeline.create {name = "a"} : !A
    // expected-note @+1 {{pipeline 'b' is created here}}
    %b = pipeline.create {name = "b"} : !A
    %lane = nvvm.read.ptx.sreg.laneid : i32
    %warp = nvvm.read.ptx.sreg.warpid : i32
    %is0 = arith.cmpi eq, %warp, %c0 : i32
    scf.if %is0 {
      %s0 = pipeline.state.make : !ps
      %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) : i32 {
        pipeline.producer.acquire %a, %s : !A, !ps
        pipeline.producer.commit %a, %s : !A, !ps
        %s1 = pipeline.state.advance %s : !ps
        scf.yield %s1 : !ps
      }
      pipeline.producer.tail %a, %sN : !A, !ps
    }
    %is1 = arith.cmpi eq, %warp, %c1 : i32
    scf.if %is1 {
      %s0 = pipeline.state.make : !ps
      %sN = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0) -> (!ps) : i32 {
        pipeline.producer.acquire %b, %s : !A, !ps
        %idx = pipeline.state.index %s : !ps
        %off = arith.muli %idx, %c4096 : i32
        %buf = llvm.getelementptr %rb[%off] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
        %p = llvm.getelementptr %buf[%lane] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i32
        llvm.store %v, %p : i32, !llvm.ptr<3>
        pipeline.producer.commit %b, %s : !A, !ps
        %s1 = pipeline.state.advance %s : !ps
        scf.yield %s1 : !ps
      }
      pipeline.producer.tail %b, %sN : !A, !ps
    }
    %is2 = arith.cmpi eq, %warp, %c2 : i32
    scf.if %is2 {
      %t0 = pipeline.state.make : !cs
      %tN:2 = scf.for %i = %c0 to %n step %c1 iter_args(%ta = %t0, %tb = %t0) -> (!cs, !cs) : i32 {
        // expected-note @+1 {{the stage held here is of another pipeline}}
        pipeline.consumer.wait %a, %ta : !A, !cs
        %ia = pipeline.state.index %ta : !cs
        %offa = arith.muli %ia, %c4096 : i32
        %bufa = llvm.getelementptr %rb[%offa] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
        %pa = llvm.getelementptr %bufa[%lane] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i32
        // expected-error @+1 {{pipeline 'a': llvm.load touches a buffer of the ring that pipeline 'b' fills (its producer addresses it from state.index), while this role holds a stage of pipeline 'a' but none of pipeline 'b': the buffer may not be filled yet, or be refilled under the access (wait on pipeline 'b' first, and take the buffer from its own state)}}
        %x = llvm.load %pa : !llvm.ptr<3> -> i32
        pipeline.consumer.release %a, %ta : !A, !cs
        pipeline.consumer.wait %b, %tb : !A, !cs
        %ib = pipeline.state.index %tb : !cs
        %offb = arith.muli %ib, %c4096 : i32
        %bufb = llvm.getelementptr %rb[%offb] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
        %pb = llvm.getelementptr %bufb[%lane] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i32
        %y = llvm.load %pb : !llvm.ptr<3> -> i32
        pipeline.consumer.release %b, %tb : !A, !cs
        %ta1 = pipeline.state.advance %ta : !cs
        %tb1 = pipeline.state.advance %tb : !cs
        scf.yield %ta1, %tb1 : !cs, !cs
      }
    }
    gpu.return
  }
}
