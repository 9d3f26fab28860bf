"""The pick on the shapes of run10's oracle (docs/gemm.md, "Run10"): every
table variant timed beside cuBLAS on an H200 at the random sweep's shapes
under 0.95x and ten neighbours. CPU only: gemm_configs.choose and its
model."""

import math

import pytest

from _gemm_pick_rules import before_cluster_n_any  # noqa: F401 (autouse)
from pipeline_mlir.ops import gemm_configs as gc


# (M, N, K) -> the pick in both dtypes, and what the oracle measured
# (ratio to cuBLAS, bf16 / fp16)
PICKS = {
    # K = 7224 is not a multiple of 16: 192x192 15 waves, 0.987 / 0.974;
    # 192x192c2 16 rounds of pairs (the last half full), 0.952 / 0.951
    (5128, 13896, 7224): "192x192",
    # 7 whole waves of 192x192: 0.991 / 1.003 (the cluster 0.920 / 0.896);
    # since the cluster along N (7 rounds of pairs, A multicast), which ran
    # 0.90x 192x192's time (test_gemm_cluster_n.py): 192x192c2n
    (2072, 16040, 3464): "192x192c2n",
    # 29 rounds of pairs: 1.010 / 0.988 (192x192c2 1.032 / 0.987)
    (8600, 14032, 4984): "128x256c2",
    # 234 tiles of 128x256 (1.8 waves): 128x256 0.903 / 0.895; 192x192c2
    # stream-K, 102 pairs on 66 clusters, the even launch after one round
    # (the stream-K kernels' whole tiles at the plain ones' rate): 0.947 / 0.980
    (1048, 6504, 11408): "192x192c2_streamk",
    # 168 pairs of 128x256c2 (2.5 rounds): 0.890 / 0.899; its stream-K
    # (even: 36 pairs over 66 clusters after two rounds) 1.017 / 1.007
    (1416, 7160, 7256): "128x256c2_streamk",
    # 0.906 / 0.891 (128x256c2 even 0.913 / 0.907); the tile cut to the
    # shape since run12's oracle: 128x224c2, 0.906 / 0.932 against 128x256c2's
    # 0.908 / 0.902 in the same process (test_gemm_cut_tiles.py)
    (592, 9560, 3864): "128x224c2",
    # one wave of 90 tiles: 0.977 / 0.908; every stream-K launch slower
    (5648, 216, 8832): "128x128",
    # 1.09 tiles a CTA, the spread launch: 0.964 / 0.968
    (4544, 1008, 7784): "128x256c2_streamk",
    # 621 tiles of 192x128 (4.7 waves): 1.019 / 0.971 (128x192 1.019 / 1.025)
    (1680, 8736, 8944): "192x128",
}


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
@pytest.mark.parametrize("shape", sorted(PICKS))
def test_pick_on_the_oracle_shapes(shape, dtype):
    assert gc.choose(*shape, dtype) == PICKS[shape]


def test_192x192_loses_little_to_a_misaligned_k(monkeypatch):
    """5128 x 13896 x 7224: 27 x 73 = 1971 tiles of 192x192 (15 waves of
    132, the last 93% full) against 14 x 73 = 1022 pairs of 192x192c2 (16
    rounds of 66, the last 48% full). At the one-CTA tile's measured
    misalignment cost (MISALIGNED_K_OF, 1.04) 15 waves beat 16 rounds; at
    the 1.1 of run6 and run7 they did not (15 x 1.1 > 16)."""
    m, n, k = 5128, 13896, 7224
    assert gc.misaligned_k(k)
    assert math.ceil(m / 192) * math.ceil(n / 192) == 1971 and math.ceil(1971 / 132) == 15
    assert math.ceil(m / 384) * math.ceil(n / 192) == 1022 and math.ceil(1022 / 66) == 16
    assert gc.estimate("192x192", m, n, 132, k) < gc.estimate("192x192c2", m, n, 132, k)
    monkeypatch.setitem(gc.MISALIGNED_K_OF, "192x192", 1.1)
    assert gc.choose(m, n, k, "bf16") == "192x192c2"


def test_an_even_stream_k_launch_takes_a_smaller_margin(monkeypatch):
    """STREAM_K_MARGIN_EVEN: a stream-K pick whose launch is the even kind
    (after the whole rounds, the leftover shared by the wave) is taken at a
    3% modelled gain (1416 x 7160 x 7256, measured 13% faster than the
    plain cluster tile); at the other kinds' 10% it would not. The other
    kinds keep 10% (5648 x 216 x 8832, fewer tiles than the SMs, keeps the
    plain 128x128 tile: 192x128 stream-K measured slower there)."""
    m, n, k = 1416, 7160, 7256
    v = gc.choose(m, n, k, "bf16")
    assert v == "128x256c2_streamk"
    # the stream-K pick is weighed against the table's plain pick (a tile
    # cut to the shape comes after it)
    monkeypatch.setattr(gc, "AUTO_CUT", False)
    plain = gc.choose(m, n, k, "bf16", stream_k=False)
    monkeypatch.undo()
    ratio = gc.estimate_time_stream_k("128x256c2", m, n, k, 132) / gc.estimate(plain, m, n, 132, k)
    assert gc.STREAM_K_MARGIN_EVEN > ratio > gc.STREAM_K_MARGIN
    units = math.ceil(m / 256) * math.ceil(n / 256)
    assert units == 168 and gc.stream_k_launch(units, math.ceil(k / 64), 66,
                                               "128x256c2") == (66, 66, 2)
    assert gc.is_even_launch(units, math.ceil(k / 64), 66, "128x256c2")
    monkeypatch.setattr(gc, "STREAM_K_MARGIN_EVEN", gc.STREAM_K_MARGIN)
    # then the tile cut to the shape (run12's oracle: 0.956 / 0.971x against
    # 128x256c2's 0.890 / 0.899x in run11), or without it the table's
    assert gc.choose(m, n, k, "bf16") == "128x224c2"
    monkeypatch.setattr(gc, "AUTO_CUT", False)
    assert gc.choose(m, n, k, "bf16") == plain == "128x256c2"
    monkeypatch.undo()
    for dtype in ("bf16", "f16"):
        assert gc.choose(5648, 216, 8832, dtype) == "128x128"
    monkeypatch.setattr(gc, "STREAM_K_MARGIN", gc.STREAM_K_MARGIN_EVEN)
    assert gc.is_stream_k(gc.choose(5648, 216, 8832, "bf16"))


def test_stream_k_whole_rounds_cost_a_little_more_than_plain_waves():
    """STREAM_K_ROUND: measured 0.98-1.04x the plain kernel's whole waves
    (1.07x before the counter wait stopped diverging), modelled 1.02x; a
    shape of whole waves (264 tiles of 128x256: two rounds, no stream-K
    run) gains nothing from stream-K, and the big shapes of many rounds
    keep their plain tile."""
    assert 1.0 < gc.STREAM_K_ROUND < 1.05
    m, n, k = 1536, 5632, 4096
    assert gc.estimate_time_stream_k("128x256", m, n, k, 132) == pytest.approx(
        gc.STREAM_K_ROUND * gc.estimate("128x256", m, n, 132, k))
    for m, n, k in ((5128, 13896, 7224), (8600, 14032, 4984), (3464, 12520, 5736),
                    (6032, 16120, 3320), (2072, 16040, 3464)):
        assert not gc.is_stream_k(gc.choose(m, n, k, "bf16"))
