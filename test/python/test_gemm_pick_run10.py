"""The pick on the shapes of run10's oracle (docs/gemm.md, "Run10"): every
table variant timed beside cuBLAS on an H200 at the random sweep's shapes
under 0.95x and ten neighbours. CPU only: gemm_configs.choose and its
model."""

import math

import pytest

from pipeline_mlir.ops import gemm_configs as gc

# (M, N, K) -> the pick in both dtypes, and what the oracle measured
# (ratio to cuBLAS, bf16 / fp16)
PICKS = {
    # K = 7224 is not a multiple of 16: 192x192 15 waves, 0.987 / 0.974;
    # 192x192c2 16 rounds of pairs (the last half full), 0.952 / 0.951
    (5128, 13896, 7224): "192x192",
    # 7 whole waves of 192x192: 0.991 / 1.003 (the cluster 0.920 / 0.896)
    (2072, 16040, 3464): "192x192",
    # 29 rounds of pairs: 1.010 / 0.988 (192x192c2 1.032 / 0.987)
    (8600, 14032, 4984): "128x256c2",
    # 0.895 / 0.898, no variant at 0.95 (192x192c2 even 0.930 / 0.899)
    (1048, 6504, 11408): "128x256",
    # 0.906 / 0.891 (128x256c2 even 0.913 / 0.907)
    (592, 9560, 3864): "128x256c2",
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


def test_stream_k_rounds_of_the_cluster_and_192_row_tiles_cost_more():
    """STREAM_K_ROUND: on shapes of many waves the stream-K launches of
    128x256c2, 192x192 and 192x192c2 ran 1.01-1.13x their plain tile, so
    the model's stream-K estimate of those tiles is at least the plain
    one's there, and no such shape takes stream-K; the one-CTA 128x256
    tile's whole rounds cost what the plain tile's waves do."""
    for m, n, k in ((5128, 13896, 7224), (8600, 14032, 4984), (3464, 12520, 5736),
                    (6032, 16120, 3320), (2072, 16040, 3464)):
        for v in ("128x256c2", "192x192", "192x192c2"):
            assert gc.estimate_time_stream_k(v, m, n, k, 132) > gc.estimate(v, m, n, 132, k)
        assert not gc.is_stream_k(gc.choose(m, n, k, "bf16"))
    assert "128x256" not in gc.STREAM_K_ROUND
    m, n, k = 1536, 5632, 4096             # 264 tiles: 2 whole rounds, no run
    assert gc.estimate_time_stream_k("128x256", m, n, k, 132) == gc.estimate(
        "128x256", m, n, 132, k)
