"""pipeline_mlir.sim's front end and CLI on real IR (needs the MLIR bindings)."""

import os

import mlir.ir as ir

from pipeline_mlir.sim import cli
from pipeline_mlir.sim.frontend import Launch, kernels, make_world_factory
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
