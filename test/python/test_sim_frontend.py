"""pipeline_mlir.sim's front end and CLI on real IR (needs the MLIR bindings)."""

import os

import mlir.ir as ir

from pipeline_mlir.sim import cli
from pipeline_mlir.sim.frontend import kernels
from pipeline_mlir.sim.interp import Launch, make_world_factory
from pipeline_mlir.sim import explore

SIM = os.path.join(os.path.dirname(__file__), "..", "Sim")


def parse(name):
    return ir.Module.parseFile(os.path.join(SIM, name))


def test_specs_come_from_the_type_classes(ctx):
    (k,) = kernels(parse("tma_umma.mlir"))
    assert k.name == "umma_2cta" and k.block_dim == (128, 1, 1) and k.cluster_size == 2
    ab, acc = k.pipes[0], k.pipes[1]
    assert (ab.name, ab.kind, ab.stages, ab.tx_count, ab.cluster, ab.multicast) == \
        ("ab", "tma_umma", 3, 16384, (1, 2, 1, 1), "m")
    assert (ab.producer.agent, ab.producer.size, ab.consumer.size) == ("thread", 1, 2)
    assert (acc.kind, acc.consumer.agent, acc.consumer.size, acc.cluster) == \
        ("umma_async", "warp", 2, None)


def test_lanes_and_elect_shape_the_arrivals(ctx):
    # Elected copies and signalling lanes: the kernel is correct only if the
    # front end gives one copy per warp and one release per consumer warp.
    (k,) = kernels(parse("tma_async.mlir"))
    make = make_world_factory(k, Launch((96, 1, 1), (1, 1, 1), trip_count=3))
    assert explore(make, seed=11, schedules=30).ok
    # Launching 2 warps less makes the consumer count (2) unreachable.
    make = make_world_factory(k, Launch((64, 1, 1), (1, 1, 1), trip_count=3))
    rep = explore(make, seed=11, schedules=5)
    assert rep.counts["deadlock"] == 5


def test_cli_exit_codes(capsys):
    assert cli.main([os.path.join(SIM, "async.mlir"), "--schedules", "5"]) == 0
    assert "pipeline-sim: OK: 5 schedules" in capsys.readouterr().out
    assert cli.main([os.path.join(SIM, "bug_role.mlir"), "--schedules", "5"]) == 1
    assert "wrong role" in capsys.readouterr().out
    assert cli.main([os.path.join(SIM, "async.mlir"), "--kernel", "nope"]) == 2


LATE_LAP_STORE = """
!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<thread, 32>, consumer = #pipeline.group<thread, 32>>
!ps = !pipeline.state<2, producer>
!cs = !pipeline.state<2, consumer>
gpu.module @kernels {
  gpu.func @early(%ring: !llvm.ptr<3>, %n: index) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    %c0 = arith.constant 0 : i32
    %c32 = arith.constant 32 : i32
    %c128 = arith.constant 128 : i32
    %v = arith.constant 7 : i32
    %lb = arith.constant 0 : index
    %one = arith.constant 1 : index
    %p = pipeline.create {name = "ring"} : !P
    %tid = gpu.thread_id x
    %tid32 = arith.index_cast %tid : index to i32
    %warp = arith.divui %tid32, %c32 : i32
    %is_producer = arith.cmpi eq, %warp, %c0 : i32
    scf.if %is_producer {
      %s0 = pipeline.state.make : !ps
      %sN = scf.for %k = %lb to %n step %one iter_args(%s = %s0) -> (!ps) {
        %idx = pipeline.state.index %s : !ps
        %off = arith.muli %idx, %c128 : i32
        %stage = llvm.getelementptr %ring[%off] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
        llvm.store %v, %stage : i32, !llvm.ptr<3>
        pipeline.producer.acquire %p, %s : !P, !ps
        pipeline.producer.commit %p, %s : !P, !ps
        %next = pipeline.state.advance %s : !ps
        scf.yield %next : !ps
      }
      pipeline.producer.tail %p, %sN : !P, !ps
    } else {
      %s0 = pipeline.state.make : !cs
      %sN = scf.for %k = %lb to %n step %one iter_args(%s = %s0) -> (!cs) {
        pipeline.consumer.wait %p, %s : !P, !cs
        pipeline.consumer.release %p, %s : !P, !cs
        %next = pipeline.state.advance %s : !cs
        scf.yield %next : !cs
      }
    }
    gpu.return
  }
}
"""


def test_store_before_acquire_is_seen_from_the_second_lap(ctx):
    # The static checker looks only after a commit in its block; the
    # simulator follows the run: the store at the top of iteration k writes
    # the stage committed one lap (2 stages) earlier, before acquiring it.
    (k,) = kernels(ir.Module.parse(LATE_LAP_STORE))
    lap = make_world_factory(k, Launch((64, 1, 1), (1, 1, 1), trip_count=2))
    assert explore(lap, seed=3, schedules=10).ok  # first lap: nothing committed yet
    laps = make_world_factory(k, Launch((64, 1, 1), (1, 1, 1), trip_count=3))
    rep = explore(laps, seed=3, schedules=10)
    assert rep.counts == {"commit-before-write": 10}
