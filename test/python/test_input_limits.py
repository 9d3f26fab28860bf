"""Regressions found by fuzzing: out-of-range and ill-typed inputs to the Python
layers raise the project's errors (or TypeError/ValueError naming the
argument) instead of aborting the interpreter or leaking C++ signatures."""

import re
import subprocess
import sys

import pytest

from pipeline_mlir.dialects import pipeline as pl
from pipeline_mlir.kernel import Kernel
from pipeline_mlir.pipeline import (
    Agent, CooperativeGroup, PipelineAsync, PipelineError, PipelineOrder,
    PipelineTmaAsync, PipelineUserType, make_pipeline_state)
from pipeline_mlir.sim.interp import Launch

T32 = CooperativeGroup(Agent.Thread, 32)


# -- native constructors ------------------------------------------------------

@pytest.mark.parametrize("kind", [10, 99, -1, 1 << 31])
def test_pipeline_type_rejects_unknown_kind(ctx, kind):
    with pytest.raises(ValueError, match=r"kind"):
        pl.PipelineType.get(kind, 2, producer=pl.CooperativeGroupAttr.get(0, 32),
                            consumer=pl.CooperativeGroupAttr.get(0, 32))


def test_pipeline_type_rejects_unknown_multicast(ctx):
    g = pl.CooperativeGroupAttr.get(0, 1)
    with pytest.raises(ValueError, match=r"multicast = 7 is not a Multicast"):
        pl.PipelineType.get(pl.PipelineKind.TmaAsync, 2, producer=g, consumer=g,
                            tx_count=64, multicast=7)


@pytest.mark.parametrize("agent", [4, 7, -3])
def test_group_rejects_unknown_agent(ctx, agent):
    with pytest.raises(ValueError, match=rf"agent = {agent} is not a Agent"):
        pl.CooperativeGroupAttr.get(agent, 32)


@pytest.mark.parametrize("role", [3, 42, -1])
def test_state_type_rejects_unknown_role(ctx, role):
    with pytest.raises(ValueError, match=rf"role = {role} is not a Role"):
        pl.StateType.get(2, role)


@pytest.mark.parametrize("call, arg", [
    (lambda: pl.StateType.get(10 ** 20, 0), "stages"),
    (lambda: pl.StateType.get("2", 0), "stages"),
    (lambda: pl.CooperativeGroupAttr.get(0, 10 ** 30), "size"),
    (lambda: pl.ClusterLayoutAttr.get(1, 2.0, 1, 1), "m"),
    (lambda: pl.PipelineType.get(0, 2, tx_count=10 ** 30), "tx_count"),
    (lambda: pl.PipelineType.get(0, 2, producer="thread"), "producer"),
    (lambda: pl.StateType.get(2, 0, simple=1), "simple"),
])
def test_native_gets_name_the_bad_argument(ctx, call, arg):
    with pytest.raises((TypeError, ValueError), match=rf"^{arg}\b"):
        call()


def test_verifier_limits_reach_python(ctx):
    g = pl.CooperativeGroupAttr.get(0, 32)
    with pytest.raises(ValueError, match="at most 14528 stages"):
        pl.PipelineType.get(0, 14529, producer=g, consumer=g)
    assert pl.PipelineType.get(0, 14528, producer=g, consumer=g).stages == 14528
    with pytest.raises(ValueError, match="exceeds the 14528 stages"):
        pl.StateType.get(2 ** 31 - 1, 0)
    with pytest.raises(ValueError, match="arrival-count limit"):
        pl.CooperativeGroupAttr.get(1, 1 << 15)


def test_bad_enum_does_not_abort_the_interpreter():
    # The reproducer of the issue: agent 7 used to pass Kernel.verify() and
    # hit UNREACHABLE in to_ptx(), killing Python. Run it in a child so an
    # abort shows as a return code instead of taking pytest down.
    code = (
        "from pipeline_mlir.dialects import pipeline as pl\n"
        "import pipeline_mlir, mlir.ir as ir\n"
        "with pipeline_mlir.make_context(), ir.Location.unknown():\n"
        "    try:\n"
        "        pl.CooperativeGroupAttr.get(7, 32)\n"
        "    except ValueError as e:\n"
        "        print('ValueError:', e)\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    assert "ValueError: agent = 7 is not a Agent" in p.stdout


# -- builders -------------------------------------------------------------------

@pytest.fixture
def k():
    kern = Kernel("k", chip="sm_90a", block_dim=128)
    with kern:
        yield kern


def test_builder_huge_tx_count(k):
    with pytest.raises(PipelineError, match=r"tx_count = 10{30} exceeds the mbarrier limit"):
        PipelineTmaAsync.create(num_stages=2, producer_group=CooperativeGroup(Agent.Thread),
                                consumer_group=T32, tx_count=10 ** 30)


def test_builder_huge_num_stages(k):
    with pytest.raises(PipelineError, match=r"num_stages = 10{20} exceeds 14528"):
        PipelineAsync.create(num_stages=10 ** 20, producer_group=T32, consumer_group=T32)
    with pytest.raises(PipelineError, match=r"depth = 10{20} exceeds 14528"):
        PipelineOrder.create(None, 10 ** 20, 2, 0, T32)
    with pytest.raises(PipelineError, match=r"stages = 10{20} exceeds 14528"):
        make_pipeline_state(PipelineUserType.Producer, 10 ** 20)


@pytest.mark.parametrize("name", [42, b"ab", ["ab"]])
def test_builder_name_must_be_str(k, name):
    with pytest.raises(TypeError, match=r"name must be a str or None"):
        PipelineAsync.create(num_stages=2, producer_group=T32, consumer_group=T32,
                             name=name)


def test_builder_group_size_limit():
    with pytest.raises(PipelineError, match="implies more than 1048575 arrivals"):
        CooperativeGroup(Agent.Warp, 1 << 15)


def test_huge_python_int_operand(k):
    p = PipelineTmaAsync.create(num_stages=2, producer_group=CooperativeGroup(Agent.Thread),
                                consumer_group=T32, tx_count=64)
    s = make_pipeline_state(PipelineUserType.Producer, 2)
    with pytest.raises(ValueError, match=r"extra_tx_count: 10{30} does not fit in i32"):
        p.producer_acquire(s, extra_tx_count=10 ** 30)


def test_kernel_block_dim_bound():
    # known_block_size = 2^31 asserts in upstream gpu.thread_id lowering: the
    # Kernel builder never emits it.
    with pytest.raises(ValueError, match="exceeds 1024 threads"):
        Kernel("k", block_dim=1 << 31)


# -- simulator --------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, match", [
    (dict(block_dim=(1025, 1, 1), cluster=(1, 1, 1)), "block_dim .* 1025 threads"),
    (dict(block_dim=(64, 64, 1), cluster=(1, 1, 1)), "4096 threads"),
    (dict(block_dim=(0, 1, 1), cluster=(1, 1, 1)), "block_dim must be 3 positive"),
    (dict(block_dim=(128, 1, 1), cluster=(17, 1, 1)), "cluster .* 17 CTAs"),
    (dict(block_dim=(128, 1, 1), cluster=(1, 1, 1), trip_count=-3), "trip_count"),
])
def test_sim_launch_limits(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Launch(**kwargs)


SIM_KERNEL = """
!P = !pipeline.pipeline<async, stages = 2, producer = #pipeline.group<warp, 1>,
                        consumer = #pipeline.group<warp, 1>>
gpu.module @m {
  gpu.func @k() kernel attributes {known_block_size = array<i32: 2048, 1, 1>} {
    %p = pipeline.create : !P
    gpu.return
  }
}
"""


def _sim(tmp_path, *args):
    f = tmp_path / "k.mlir"
    f.write_text(SIM_KERNEL)
    return subprocess.run([sys.executable, "-m", "pipeline_mlir.sim", str(f), *args],
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("args, match", [
    (["--block-dim", "63295"], r"--block-dim: a CTA holds at most 1024 threads"),
    (["--block-dim", "64", "--max-steps", "-5"], r"--max-steps: must be at least 1, got -5"),
    (["--block-dim", "64", "--trip-count", "-2"], r"--trip-count: must be at least 0"),
    (["--block-dim", "64", "--cluster", "32"], r"--cluster: a cluster holds at most 16"),
    ([], r"@k: Launch: block_dim \(2048, 1, 1\) has 2048 threads"),
])
def test_sim_cli_rejects(tmp_path, args, match):
    p = _sim(tmp_path, *args)
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert re.search(match, p.stderr), p.stderr
