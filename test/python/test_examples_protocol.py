"""Every example kernel passes both protocol tools with no finding.

pipeline-verify-protocol checks the IR statically; pipeline_mlir.sim runs the
kernel's warps as agents over a barrier model (tcgen05 kinds included: the
simulator is the only way to execute tma_umma_mainloop without a Blackwell
GPU). test_planted_bugs.py shows that both tools fail on copies of these
examples with one bug planted, so passing here is not vacuous.
"""

import os
import re
import subprocess
import sys

import pytest

from _example_checks import EXAMPLES, EXAMPLES_DIR, TRIP_COUNT, example_ir, simulate, \
    verify_protocol

from pipeline_mlir.sim.interp import _shuffle


@pytest.mark.parametrize("case", sorted(EXAMPLES))
def test_example_passes_verify_protocol(case):
    assert verify_protocol(example_ir(case)) == []


@pytest.mark.parametrize("case", sorted(EXAMPLES))
def test_example_passes_the_simulator(case):
    reports = simulate(example_ir(case), schedules=40, seed=3)
    assert list(reports) == [case]
    rep = reports[case]
    assert rep.schedules == 40
    assert rep.ok, {kind: err.message for kind, (_, err) in rep.first.items()}


def test_umma_example_passes_every_schedule_up_to_two_preemptions():
    from pipeline_mlir.sim.engine import explore
    from pipeline_mlir.sim.frontend import kernels
    from pipeline_mlir.sim.interp import Launch, make_world_factory
    import mlir.ir as ir
    import pipeline_mlir
    with pipeline_mlir.make_context():
        (k,) = kernels(ir.Module.parse(example_ir("tma_umma_mainloop")))
        rep = explore(make_world_factory(k, Launch(k.block_dim, (1, 1, 1), 4)),
                      exhaustive_bound=2, schedules=400)
    assert rep.ok and rep.schedules > 1


def test_cluster_example_runs_two_ctas():
    # The 2-CTA variant must be simulated as a cluster (the multicast
    # arrivals cross CTAs); the shape comes from the pipeline type.
    from pipeline_mlir.sim.frontend import kernels
    import mlir.ir as ir
    import pipeline_mlir
    with pipeline_mlir.make_context():
        (k,) = kernels(ir.Module.parse(example_ir("tma_reduction_cluster")))
    assert k.cluster_size == 2 and k.block_dim == (160, 1, 1)


@pytest.mark.parametrize("script,args", [("async_participants.py", []),
                                         ("tma_reduction.py", ["--cluster"]),
                                         ("tma_umma_mainloop.py", [])])
def test_print_ir_pipes_into_the_simulator(script, args, tmp_path):
    ir_text = subprocess.run([sys.executable, os.path.join(EXAMPLES_DIR, script), "--print-ir",
                              "--out", str(tmp_path), *args], check=True,
                             capture_output=True, text=True).stdout
    # Attribute aliases (the loops' unroll annotation) may precede the module.
    assert re.match(r"(#\w+ = [^\n]*\n)*module", ir_text.lstrip())
    sim = subprocess.run([sys.executable, "-m", "pipeline_mlir.sim", "-", "--trip-count",
                          str(TRIP_COUNT), "--schedules", "10"], input=ir_text,
                         capture_output=True, text=True)
    assert sim.returncode == 0, sim.stdout + sim.stderr
    assert sim.stdout.startswith("pipeline-sim: OK: 10 schedules, 0 deadlocks (@")


def test_shuffle_follows_the_ptx_rule():
    lanes = tuple(range(32))
    from pipeline_mlir.sim.frontend import Lanes
    warp = Lanes(t // 32 for t in range(64, 96))  # tid / 32 in warp 2
    assert _shuffle("idx", warp, 0, 31) == 2  # uniform: back as a scalar
    v = Lanes(lanes)
    assert _shuffle("idx", v, 5, 31) == 5
    assert list(_shuffle("down", v, 1, 31)) == list(range(1, 32)) + [31]
    assert list(_shuffle("up", v, 1, 0)) == [0] + list(range(31))
    assert list(_shuffle("bfly", v, 1, 31)) == [i ^ 1 for i in range(32)]
    # Width 16 (c = (32 - 16) << 8 | 15): idx 3 reads lane 3 of each half.
    assert list(_shuffle("idx", v, 3, (16 << 8) | 15)) == [3] * 16 + [19] * 16


def test_examples_write_where_out_says_and_never_into_the_checkout(tmp_path):
    # --out DIR takes the cubin and its metadata; without it the default is
    # outside the source tree.
    sys.path.insert(0, EXAMPLES_DIR)
    try:
        import _common
    finally:
        sys.path.remove(EXAMPLES_DIR)
    root = os.path.realpath(os.path.join(EXAMPLES_DIR, ".."))
    assert not os.path.realpath(_common.DEFAULT_OUT).startswith(root + os.sep)
    assert _common.options([]).out == _common.DEFAULT_OUT
    out = tmp_path / "kernels"
    run = subprocess.run([sys.executable, os.path.join(EXAMPLES_DIR, "pingpong.py"),
                          "--out", str(out)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    if "not lowered" in run.stdout:
        pytest.skip("this build has no pipeline-to-cubin")
    assert sorted(p.name for p in out.iterdir()) == ["pingpong.sm_90a.cubin",
                                                     "pingpong.sm_90a.json"]
    assert f"-> {out}/pingpong.sm_90a.cubin" in run.stdout
