"""The classes of the random sweep's runs under 0.95x cuBLAS
(docs/gemm.md, "The runs under 0.95x cuBLAS, by class"): the cluster
stream-K rule's margin (``gemm_configs.CLUSTER_STREAM_K_MARGIN``, 5% where
the tile's modelled time is at least ``CLUSTER_STREAM_K_MARGIN_MIN_S``, else
``STREAM_K_MARGIN``; off, ``AUTO_CLUSTER_STREAM_K_MARGIN``, since its
held-out draw ran slower), pinned on shapes the sweep does not hold (those
the H200 measured, drawn by benchmarks/gemm/class_shapes.py); the sweep's and
sweep.py's shapes keep their picks; the 64x128 stream-K experiment
variants (``SMALL_STREAM_K_VARIANTS``) build, pass the protocol checker and
the simulator, assemble without spills, and are never picked."""

import pathlib
import sys
from dataclasses import replace

import pytest

from _ptxas import spill_bytes
from pipeline_mlir.kernels import hopper_gemm as hg
from pipeline_mlir.ops import gemm_configs as gc
from test_gemm_streamk import _poll_is_warp_uniform, _wait_then_fence_then_loads

BENCH = str(pathlib.Path(__file__).parents[2] / "benchmarks" / "gemm")

# shape: (the pick, the pick at a margin of STREAM_K_MARGIN); measured on an
# H200 in both dtypes, the pick's time over the one before's in brackets.
MARGIN_PICKS = {
    (2880, 1584, 4392): ("192x160c2n_streamk", "192x192_streamk"),      # 0.77-0.81
    (6904, 624, 6832): ("192x160c2n_streamk", "192x128_streamk"),       # 0.93-0.96
    (264, 2960, 15728): ("192x192c2n_streamk", "64x128"),               # 0.65-0.73
    (136, 4248, 9552): ("192x128c2n_streamk", "64x128"),                # 0.74-0.76
    (1208, 880, 13296): ("128x160c2n_streamk", "128x256_streamk"),      # 0.87-0.90
    (200, 2976, 11384): ("128x192c2n_streamk", "128x256c2_streamk"),    # 1.07-1.08
    # below CLUSTER_STREAM_K_MARGIN_MIN_S (calls of about 20 us): unchanged
    # (the one-arrival shared fix-up's rule then takes them: choose_share1)
    (552, 520, 4344): ("128x128_streamk_share1v4", "128x128_streamk_share1v4"),
    (408, 592, 4408): ("128x128_streamk_share1v4", "128x128_streamk_share1v4"),
}


# The held-out draw (class_shapes.py --changed 12 --seed 5151): shape ->
# (the pick with the margin on, the pick: the margin off); with it on, the
# pick's time over the one before's on an H200, bf16 | f16 (the one
# before 128x128_streamk where the one-arrival shared fix-up's rule,
# choose_share1, now takes 128x128_streamk_share1v4).
HELD_OUT_PICKS = {
    (320, 2104, 12216): ("128x160c2n_streamk", "192x192c2_streamk"),    # 1.16 | 1.14
    (2264, 184, 11232): ("128x96c2x2_streamk", "128x192_streamk"),      # 0.86 | 0.86
    (672, 1592, 7336): ("128x160c2n_streamk", "128x256c2_streamk"),     # 1.08 | 1.08
    (392, 616, 15048): ("128x128c2n_streamk", "128x128_streamk_share1v4"),  # 1.17 | 1.17
    (16128, 360, 6504): ("128x192c2n_streamk", "192x192c2_streamk"),    # 1.07 | 1.02
    (144, 7552, 7016): ("192x128c2n_streamk", "192x192_streamk"),       # 0.92 | 0.92
    (912, 864, 9216): ("192x128c2n_streamk", "64x128"),                 # 1.22 | 1.27
    (360, 776, 10600): ("128x160c2n_streamk", "128x128_streamk_share1v4"),  # 1.06 | 1.07
    (13016, 312, 12464): ("192x160c2n_streamk", "128x160c2n_streamk"),  # 0.99 | 0.98
    (480, 3376, 7896): ("192x160c2n_streamk", "128x256c2_streamk"),     # 0.97 | 0.99
    (1960, 2376, 4744): ("128x160c2n_streamk", "128x256c2_streamk"),    # 1.19 | 1.21
    (440, 2280, 8520): ("128x160c2n_streamk", "128x256c2_streamk"),     # 1.17 | 1.15
}


@pytest.mark.parametrize("shape", sorted(MARGIN_PICKS))
def test_the_cluster_stream_k_margin_on_shapes_the_sweep_does_not_hold(shape, monkeypatch):
    m, n, k = shape
    rule, before = MARGIN_PICKS[shape]
    for dtype in ("bf16", "f16"):
        assert gc.choose(m, n, k, dtype) == before, dtype      # off
    monkeypatch.setattr(gc, "AUTO_CLUSTER_STREAM_K_MARGIN", True)
    for dtype in ("bf16", "f16"):
        assert gc.choose(m, n, k, dtype) == rule, dtype


def test_the_margin_is_off_on_its_held_out_draw(monkeypatch):
    """Off, the held-out shapes keep the picks that ran faster on 16 of
    their 24 runs; on, the rule takes the cluster tiles it was drawn for."""
    assert not gc.AUTO_CLUSTER_STREAM_K_MARGIN
    for (m, n, k), (rule, pick) in HELD_OUT_PICKS.items():
        assert [gc.choose(m, n, k, d) for d in ("bf16", "f16")] == [pick, pick]
    monkeypatch.setattr(gc, "AUTO_CLUSTER_STREAM_K_MARGIN", True)
    for (m, n, k), (rule, pick) in HELD_OUT_PICKS.items():
        assert [gc.choose(m, n, k, d) for d in ("bf16", "f16")] == [rule, rule]


def test_the_margin_s_time_bound(monkeypatch):
    """Under CLUSTER_STREAM_K_MARGIN_MIN_S the one-CTA margin: 128x128c2n
    stream-K in place of 128x128's on calls of about 20 us ran 0.95-1.12 of
    its time; without the bound the rule takes it."""
    monkeypatch.setattr(gc, "AUTO_CLUSTER_STREAM_K_MARGIN", True)
    assert gc.STREAM_K_MARGIN < gc.CLUSTER_STREAM_K_MARGIN < 1
    assert gc.estimate_time_stream_k("128x128c2n", 552, 520, 4344, 132) \
        < gc.CLUSTER_STREAM_K_MARGIN_MIN_S
    monkeypatch.setattr(gc, "CLUSTER_STREAM_K_MARGIN_MIN_S", 0)
    assert gc.choose(552, 520, 4344, "bf16") == "128x128c2n_streamk"


def test_the_sweep_s_shapes_keep_their_picks(monkeypatch):
    """The random sweep's draw and sweep.py's cubes and model shapes: no
    pick changes with the margin (none of their runs was measured for it)."""
    sys.path.insert(0, BENCH)
    try:
        from random_sweep import DEFAULT_COUNT, DEFAULT_SEED, draw
        from sweep import SHAPES
    finally:
        sys.path.remove(BENCH)
    shapes = [*draw(DEFAULT_COUNT, DEFAULT_SEED), *(s[:3] for s in SHAPES)]
    now = [gc.choose(*s, d) for s in shapes for d in ("bf16", "f16")]
    monkeypatch.setattr(gc, "AUTO_CLUSTER_STREAM_K_MARGIN", True)
    assert now == [gc.choose(*s, d) for s in shapes for d in ("bf16", "f16")]
    assert len(shapes) >= 70


def test_class_shapes_draws_away_from_the_sweep():
    """benchmarks/gemm/class_shapes.py: the drawn shapes are of their class
    and not the sweep's; --changed finds shapes whose pick the margin
    changes."""
    sys.path.insert(0, BENCH)
    try:
        import class_shapes
        from random_sweep import DEFAULT_COUNT, DEFAULT_SEED, draw
    finally:
        sys.path.remove(BENCH)
    seen = set(draw(DEFAULT_COUNT, DEFAULT_SEED))
    assert class_shapes.classify(8840, 4808, 1936) == "a"
    assert class_shapes.classify(432, 568, 7312) == "b"
    assert class_shapes.classify(1048, 6504, 11408) == "c"
    found = class_shapes.changed(3, 5151, seen)
    assert len(found) == 3
    for shape, picks in found:
        assert shape not in seen
        assert any(before != now for before, now in picks.values())
        assert picks["bf16"][1] == class_shapes.pick_rule(*shape, "bf16")
    assert [s for s, _ in found] == list(HELD_OUT_PICKS)[:3]


@pytest.fixture(scope="module", params=sorted(gc.SMALL_STREAM_K_VARIANTS))
def small(request):
    cfg = replace(hg.GemmConfig(dtype="f16"), **gc.overrides(request.param))
    k = hg.build(cfg)
    k.verify()
    return request.param, cfg, k, k.to_ptx()


def test_the_64_row_stream_k_variants_build_check_and_assemble(small):
    """Checked (to_ptx runs the protocol checker), no spill; one consumer
    warpgroup's stream-K kernel with the fix-up's wait before its loads."""
    name, cfg, k, ptx = small
    assert gc.tile(name) == (64, 128) and gc.is_stream_k(name)
    assert [n for n, _ in k.params][-4:] == ["sk_workspace", "sk_counters", "sk_ctas",
                                             "sk_rounds"]
    assert _wait_then_fence_then_loads(ptx) and _poll_is_warp_uniform(ptx)
    assert cfg.sk_share == name.endswith("_share")
    assert spill_bytes(ptx) in (None, 0)            # None: no ptxas here


def test_the_simulator_runs_a_64_row_stream_k_variant(small):
    import os
    import tempfile

    from pipeline_mlir.sim.cli import main as sim_main

    name, _, k, _ = small
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "k.mlir")
        with open(path, "w") as f:
            f.write(str(k))
        assert sim_main([path, "--arg", "4=192", "--arg", "5=256", "--arg", "6=640",
                         "--arg", "9=1", "--arg", "10=6", "--schedules", "2"]) == 0, name


def test_the_64_row_stream_k_variants_are_never_picked():
    assert not set(gc.SMALL_STREAM_K_VARIANTS) & set(gc.STREAM_K_VARIANTS)
    assert "64x128" not in gc.RULE_STREAM_K_TILES
    for m, n, k in ((464, 208, 2920), (128, 1392, 2584), (280, 136, 5728), (432, 568, 7312)):
        assert gc.choose(m, n, k, "bf16") not in gc.SMALL_STREAM_K_VARIANTS


@pytest.mark.parametrize("plant", ["no fence after the poll", "loads before the wait"])
def test_a_planted_early_read_of_the_64_row_share_is_rejected(plant, monkeypatch):
    """test_gemm_streamk_share.py's planted mistakes, on the 64-row tile's
    shared fix-up: the PTX-order check refuses both."""
    import test_gemm_streamk_share as share

    real = share._share_ptx
    monkeypatch.setattr(share, "_share_ptx", lambda *a: real("64x128_streamk_share"))
    share.test_planted_early_share_read_is_rejected(plant, monkeypatch)
