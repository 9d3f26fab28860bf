"""The one-wave busy-CTA rule of the cluster along N
(``gemm_configs.AUTO_CLUSTER_N_BUSY``, off: measured on an H200 it sped up
the half of one-wave run1 it was fitted on and not the other half; see the
comment at the switch). Deviceless, no kernel built: the CTAs a plain tile
keeps busy in one wave (``one_wave_ctas``), the factor ``cluster_n_time``
puts on a cluster along N, and the picks it changes, on shapes that are
neither in the random sweep nor in any measured run."""

import pytest

from pipeline_mlir.ops import gemm_configs as gc

SMS = 132


def test_one_wave_ctas_counts_a_clusters_ctas_and_refuses_a_second_wave():
    # 2776 x 448: 22 tile rows; 128x128 4 columns, 88 CTAs; 128x96c2n 3
    # pairs of 96 columns (576 >= 448), 66 pairs = 132 CTAs: one wave of 66
    assert gc.one_wave_ctas("128x128", 2776, 448, SMS) == 88
    assert gc.one_wave_ctas("128x96c2n", 2776, 448, SMS) == 132
    assert gc.one_wave_ctas("128x112c2x2", 2776, 448, SMS) == 88    # 11 x 2 units x 4
    # 67 pairs (134 CTAs) are a second round of pairs, 133 tiles a second wave
    assert gc.one_wave_ctas("128x96c2n", 128 * 67, 192, SMS) is None
    assert gc.one_wave_ctas("128x128", 128 * 133, 128, SMS) is None
    assert gc.cluster_units("128x96c2n", 2776, 448) == 66


def test_cluster_n_time_charges_only_the_extra_ctas_in_one_wave(monkeypatch):
    m, n, k = 2776, 448, 6768
    est = gc.estimate("128x96c2n", m, n, SMS, k)
    assert gc.cluster_n_time("128x96c2n", m, n, k, SMS, "128x128") == est    # off
    monkeypatch.setattr(gc, "AUTO_CLUSTER_N_BUSY", True)
    got = gc.cluster_n_time("128x96c2n", m, n, k, SMS, "128x128")
    assert got == pytest.approx(est * (1 + gc.CLUSTER_N_BUSY * (132 - 88) / SMS))
    # as many CTAs as the pick (128x112c2n: 2 pairs of 112 cover 448): no charge
    assert gc.cluster_n_time("128x112c2n", m, n, k, SMS, "128x128") == \
        gc.estimate("128x112c2n", m, n, SMS, k)
    # the 2x2 cluster and a pick past one wave are not charged
    assert gc.cluster_n_time("128x96c2x2", m, n, k, SMS, "128x128") == \
        gc.estimate("128x96c2x2", m, n, SMS, k)
    assert gc.cluster_n_time("128x96c2n", m, n, k, SMS, "64x128") == est


# Shapes no run measured: (the pick with the rule off, with it on). Where
# the narrow pair keeps more CTAs busy than the one-CTA pick in one wave
# the pick stays; where it keeps as many (tall narrow outputs, the pair
# covering N as the one-CTA tiles do) the pair stays.
BUSY = {
    (288, 3608, 6624): ("128x96c2n", "128x128"),       # 114 CTAs against 87
    (1664, 784, 4736): ("128x96c2n", "128x128"),       # 130 against 91
    (720, 3544, 10192): ("192x112c2n", "192x128"),     # 128 against 112
    (1168, 2792, 9760): ("192x160c2n", "128x256"),     # 126 against 110
    (6552, 176, 2608): ("128x96c2n", "128x96c2n"),     # 104 and 104
    (11736, 160, 5968): ("192x96c2n", "192x96c2n"),    # 124 and 124
}


@pytest.mark.parametrize("shape", sorted(BUSY))
def test_busy_rule_keeps_the_pick_where_the_pair_adds_ctas(shape, monkeypatch):
    m, n, k = shape
    before, now = BUSY[shape]
    for dtype in ("bf16", "f16"):
        assert gc.choose(m, n, k, dtype) == before           # off by default
    monkeypatch.setattr(gc, "AUTO_CLUSTER_N_BUSY", True)
    for dtype in ("bf16", "f16"):
        assert gc.choose(m, n, k, dtype) == now
    # a factor of 0 is the rule off
    monkeypatch.setattr(gc, "CLUSTER_N_BUSY", 0.0)
    assert gc.choose(m, n, k, "bf16") == before
