"""The simulator: a warp that arrives twice in one phase of a named barrier.

A named barrier counts threads: a warp arriving again before the phase
completes stands in for a warp that has not arrived, and the phase completes
early (the syncing role goes ahead before its partner's turn). A doubled
``bar.arrive`` does it, and the static checks skip the case where every warp
both syncs and arrives (a ping-pong's turn barriers): the attention forward
kernel with its turn arrive doubled inside the main loop passed both tools
in the mutation campaign's second sample. Each bug has its twin.
"""

import os
import sys
import tempfile

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
for d in (os.path.join(HERE, "..", "..", "examples"), os.path.join(HERE, "..", "gpu"), HERE):
    if d not in sys.path:
        sys.path.insert(0, d)


def _turns(arrives_per_turn):
    """Two warps take turns (a ping-pong of one warp each): warp 1 gives the
    first turn, then each syncs on its own barrier and hands the turn over by
    arriving on the other's, ``arrives_per_turn`` times for warp 0."""
    from pipeline_mlir.kernel import Int32, Kernel
    from pipeline_mlir.pipeline import NamedBarrier

    k = Kernel("turns", block_dim=64, params={"ntiles": Int32()})
    with k:
        (ntiles,) = k.args
        mine = [NamedBarrier(barrier_id=1, num_threads=64),
                NamedBarrier(barrier_id=2, num_threads=64)]
        warp = k.warp_idx()
        with k.if_(warp == 1):
            mine[0].arrive()
        with k.if_(warp == 0):
            for _ in k.range(ntiles):
                mine[0].arrive_and_wait()
                for _ in range(arrives_per_turn):
                    mine[1].arrive()
        with k.if_(warp == 1):
            for _ in k.range(ntiles):
                mine[1].arrive_and_wait()
                mine[0].arrive()
    return k


def test_a_warp_arriving_twice_in_one_phase_is_reported():
    from pipeline_mlir.sim import SimulationFailed

    with pytest.raises(SimulationFailed) as e:
        _turns(2).simulate({"ntiles": 4}, schedules=5)
    finding = e.value.result.findings[0]
    assert finding.kind == "arrive-count"
    assert "warp 0 of CTA 0 arrives on named barrier 2 of CTA 0 twice in one phase" \
        in finding.message


def test_one_arrive_per_turn_twin_is_clean():
    # (a warp that only arrives, never waiting for the other, is the bug
    # too: it may arrive again before the other warp's sync)
    assert _turns(1).simulate({"ntiles": 4}, schedules=20).ok


def _attention(double_turn):
    """The attention forward kernel's IR, its main loop's turn arrive (the
    ping-pong's hand-over to the other warpgroup) doubled or not."""
    import test_stage_balance

    text = test_stage_balance._kernels()["examples/attention_fwd"]()
    lines = text.split("\n")
    arrives = [i for i, x in enumerate(lines) if "pipeline.named_barrier.arrive" in x]
    deepest = max(arrives, key=lambda i: len(lines[i]) - len(lines[i].lstrip()))
    if double_turn:
        lines.insert(deepest, lines[deepest])
    return "\n".join(lines)


@pytest.mark.parametrize("double_turn", [True, False])
def test_the_attention_with_its_turn_arrive_doubled(double_turn, capsys):
    from pipeline_mlir.sim import cli

    with tempfile.NamedTemporaryFile("w", suffix=".mlir", delete=False) as f:
        f.write(_attention(double_turn))
    try:
        # 384 keys: three blocks, so the main loop (from the second) runs
        rc = cli.main([f.name, "--schedules", "2", "--max-steps", "100000", "--arg", "9=384"])
    except SystemExit as e:
        rc = e.code
    finally:
        os.unlink(f.name)
    out = capsys.readouterr()
    if double_turn:
        assert rc == 1
        assert "twice in one phase" in out.out + out.err
    else:
        assert rc == 0, out.out + out.err
