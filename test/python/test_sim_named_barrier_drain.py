"""The simulator's named-barrier drain: a phase left half-arrived at the
CTA's exit.

A ``bar.arrive`` does not wait: the arriving warps rely on another role's
``bar.sync`` to complete the phase. The named-barrier ring (examples'
tile_copies.named_barrier) drains its last stages with one sync each, as
``producer_tail`` drains a pipeline; without one of those syncs the
consumer's last arrive on that stage's "empty" barrier is never met. The
simulator reports it when the CTA exits, at the user's line of that arrive.
A ping-pong schedule's first turn (a ``bar.arrive`` outside every loop) is
left pending by the last turn by design: the ping-pong kernels stay clean.
"""

import inspect
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(HERE, "..", "..", "examples")
if EXAMPLES not in sys.path:
    sys.path.insert(0, EXAMPLES)


def _ring(drain_stages, num_stages=3):
    """tile_copies.named_barrier with the producer's final syncs for
    ``drain_stages`` only. Returns (kernel, line of the consumer's
    arrive on the empty barrier)."""
    from tile_copies import TILE, TILE_VECS, _params, _warp_copy

    from pipeline_mlir.kernel import Kernel
    from pipeline_mlir.pipeline import NamedBarrier

    k = Kernel("ring_drain", block_dim=64, params=_params("src", "dst", "ntiles"))
    with k:
        src, dst, ntiles = k.args
        ring = k.smem_alloc(num_stages * TILE, align=128, name="ring")
        full = NamedBarrier(barrier_id=1, num_threads=64)
        empty = NamedBarrier(barrier_id=1 + num_stages, num_threads=64)
        warp, lane = k.warp_idx(), k.lane_idx()
        first = k.block_idx() * ntiles
        with k.if_(warp == 0):
            for t in k.range(ntiles):
                s = t % num_stages
                with k.if_(t >= num_stages):
                    empty.arrive_and_wait_w_index(s)
                _warp_copy(src, (first + t) * TILE_VECS, ring.stage(s, TILE), 0, lane)
                full.arrive_w_index(s)
            for s in drain_stages:
                empty.arrive_and_wait_w_index(s)
        with k.if_(warp == 1):
            for t in k.range(ntiles):
                s = t % num_stages
                full.arrive_and_wait_w_index(s)
                _warp_copy(ring.stage(s, TILE), 0, dst, (first + t) * TILE_VECS, lane)
                empty.arrive_w_index(s); line = inspect.currentframe().f_lineno
    return k, line


def test_the_ring_without_one_final_sync_is_reported_at_the_arrive():
    from pipeline_mlir.sim import SimulationFailed

    k, line = _ring(drain_stages=[0, 2])
    with pytest.raises(SimulationFailed) as e:
        k.simulate({"ntiles": 8}, schedules=5)
    (finding,) = e.value.result.findings
    assert finding.kind == "named-barrier"
    assert ("CTA 0 exits while named barrier 5 of CTA 0 holds 32 of 64 threads' arrivals "
            "of a phase no sync completes") in finding.message
    assert any(f"test_sim_named_barrier_drain.py:{line}:" in w for w in finding.where), \
        finding.where


def test_the_drained_ring_twin_is_clean():
    k, _ = _ring(drain_stages=[0, 1, 2])
    assert k.simulate({"ntiles": 8}, schedules=5).ok


@pytest.mark.parametrize("name", ["skeleton fa3_hopper_fwd", "examples/pingpong",
                                  "gpu builder named_barrier", "gpu dialect named_barrier_copy"])
def test_kernels_with_named_barriers_stay_clean(name, tmp_path, capsys):
    """The FlashAttention-3 skeleton's ping-pong leaves its first turn
    pending at exit (a start signal); the ring kernels drain. Simulated as
    pipeline-sim runs them (it picks small argument values itself)."""
    from pipeline_mlir.sim import cli
    from test_stage_balance import KERNELS

    path = tmp_path / "kernel.mlir"
    path.write_text(KERNELS[name]())
    extra = ["--arg", "2=8"] if name == "gpu builder named_barrier" else []
    try:
        rc = cli.main([str(path), "--schedules", "3", *extra])
    except SystemExit as e:
        rc = e.code
    assert rc == 0, capsys.readouterr().out
