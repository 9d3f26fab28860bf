"""``Kernel.simulate``: the CPU simulator (the engine of ``pipeline-sim``) on
a kernel built from Python, and printed kernels that keep the user's lines
so that ``pipeline-sim`` on the printed text names them too."""

import inspect
import os
import sys

import pytest

from pipeline_mlir.kernel import GlobalPtr, Int32, Kernel
from pipeline_mlir.pipeline import (Agent, CooperativeGroup, PipelineAsync,
                                    PipelineUserType, make_pipeline_state)
from pipeline_mlir.sim import SimResult, SimulationFailed

HERE = __file__
EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "examples")


def _line():
    """The caller's next line."""
    return inspect.currentframe().f_back.f_lineno + 1


def ring(release=True):
    """A two-warp PipelineAsync ring over ``n`` iterations; without
    ``release`` the consumer never frees a stage, so the producer's third
    acquire waits forever. Returns the kernel and the lines of the
    producer's acquire and the consumer's wait."""
    k = Kernel("ring", block_dim=64, params={"out": GlobalPtr(), "n": Int32()})
    with k:
        _, n = k.args
        pipe = PipelineAsync.create(num_stages=2,
                                    producer_group=CooperativeGroup(Agent.Thread, 32),
                                    consumer_group=CooperativeGroup(Agent.Thread, 32))
        with k.if_(k.warp_idx() == 0):
            state = make_pipeline_state(PipelineUserType.Producer, 2)
            for _, (state,) in k.range(n, carry=[state]):
                acquire_line = _line()
                pipe.producer_acquire(state)
                pipe.producer_commit(state)
                state.advance()
            pipe.producer_tail(state)
        with k.if_(k.warp_idx() == 1):
            state = make_pipeline_state(PipelineUserType.Consumer, 2)
            for _, (state,) in k.range(n, carry=[state]):
                wait_line = _line()
                pipe.consumer_wait(state)
                if release:
                    pipe.consumer_release(state)
                state.advance()
    return k, acquire_line, wait_line


def test_a_correct_ring_passes_every_schedule():
    k, _, _ = ring()
    result = k.simulate({"n": 6}, schedules=20, seed=4)
    assert isinstance(result, SimResult) and result.ok
    (one,) = result
    assert one.kernel == "ring" and one.schedules == 20 and one.deadlocks == 0
    assert str(result) == ("pipeline-sim: OK: 20 schedules, 0 deadlocks "
                           "(@ring, 1 CTA(s) x 2 warp(s); random, seed 4)")


def test_a_deadlock_raises_naming_it_and_the_users_lines():
    k, acquire_line, wait_line = ring(release=False)
    with pytest.raises(SimulationFailed) as err:
        k.simulate({"n": 6}, schedules=5)
    text = str(err.value)
    assert text.startswith("pipeline-sim: deadlock: producer warp 0 of CTA 0 waits on ")
    assert f"producer warp 0 of CTA 0 at {HERE}:{acquire_line}:" in text
    assert f"FAILED: 5 schedules, 5 deadlock (@ring" in text
    (finding,) = err.value.result.findings
    assert finding.kind == "deadlock" and finding.title == "deadlock"
    assert any(f"{HERE}:{acquire_line}:" in w for w in finding.where)


def test_check_false_returns_the_failed_result():
    k, _, _ = ring(release=False)
    result = k.simulate([None, 6], schedules=3, check=False)  # positional: out, n
    assert not result.ok and result[0].deadlocks == 3


def test_two_iterations_fit_the_two_stages_so_no_deadlock():
    # The twin of the test above: the argument, not a guessed trip count,
    # decides. Two acquires fit two stages without a release: no deadlock,
    # only the consumer's unreleased stage at exit.
    k, _, _ = ring(release=False)
    (one,) = k.simulate({"n": 2}, schedules=3, check=False)
    assert one.deadlocks == 0 and one.counts == {"unbalanced": 3}
    assert "consumer.wait without consumer.release" in one.findings[0].message


@pytest.mark.parametrize("args,error,match", [
    ({"m": 3}, ValueError, r"kernel 'ring' has no parameter 'm' \(its parameters: out, n\)"),
    ({"n": 2.5}, TypeError, r"argument 'n' must be a Python int"),
    ([None, 1, 2], ValueError, r"3 arguments for the 2 parameters of kernel 'ring'"),
])
def test_bad_arguments_are_named(args, error, match):
    k, _, _ = ring()
    with pytest.raises(error, match=match):
        k.simulate(args)


def test_bad_schedule_count_is_named():
    k, _, _ = ring()
    with pytest.raises(ValueError, match="schedules must be an int >= 1, got 0"):
        k.simulate({"n": 2}, schedules=0)


def test_the_example_copy_ring_simulates_from_python():
    sys.path.insert(0, EXAMPLES)
    try:
        import copy_ring
    finally:
        sys.path.remove(EXAMPLES)
    k = copy_ring.build("tma", 4, 16384, consumer_warps=4, schedule="persistent",
                        per_warp=True)
    assert k.simulate({"ntiles": 9}, schedules=4).ok


# --- Printing keeps the locations the simulator reports -----------------------

def _sim_cli(text, tmp_path, capsys):
    from pipeline_mlir.sim.cli import main

    path = tmp_path / "printed.mlir"
    path.write_text(text)
    rc = main([str(path), "--arg", "1=6", "--schedules", "2"])
    return rc, capsys.readouterr().out, str(path)


def test_printed_kernel_reparsed_by_pipeline_sim_names_the_users_lines(tmp_path, capsys):
    k, acquire_line, wait_line = ring(release=False)
    rc, out, _ = _sim_cli(str(k), tmp_path, capsys)
    assert rc == 1 and "pipeline-sim: deadlock:" in out
    assert f"producer warp 0 of CTA 0 at {HERE}:{acquire_line}:" in out
    assert f"consumer warp 1 of CTA 0 at {HERE}:{wait_line}:" in out


def test_without_locations_the_report_names_the_printed_file(tmp_path, capsys):
    # The twin: what printing used to do (bare IR) loses the Python lines.
    k, _, _ = ring(release=False)
    text = k.mlir(locations=False)
    assert "loc(" not in text and "loc(" in k.mlir()
    rc, out, path = _sim_cli(text, tmp_path, capsys)
    assert rc == 1 and HERE not in out and f"at {path}:" in out
