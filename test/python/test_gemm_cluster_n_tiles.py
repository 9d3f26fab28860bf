"""The 2-CTA cluster along N on the other tiles (gemm_configs
``CLUSTER_N_VARIANTS``, ``<tile>c2n``: 128 or 192 rows, 96-224 columns).
Deviceless: the narrowest 128-row one with 16-column C boxes (128x112c2n)
is built once, assembled (ptxas where it is on PATH: no spills), checked by
pipeline-verify-protocol and run by the simulator on an output whose last
pair's second tile lies wholly past N (3 tile columns: the rank-1 CTA's
loads are all out of bounds, its stores clipped away); a planted mistake
(the stage's transaction count left at this CTA's own loads: the phase
would complete before the peer's multicast half of A landed) is rejected; the launch grid
counts tile rows x column pairs; the pick's rule is pinned on shapes that
are not in the random sweep."""

from dataclasses import replace
import types

import pytest

from _example_checks import protocol_warnings, simulate, verify_protocol
from _ptxas import spill_bytes
from pipeline_mlir.kernels import hopper_gemm as hg
from pipeline_mlir.ops import gemm_configs as gc

# m, n, k (kernel arguments 4, 5, 6): two tile rows (the second ragged),
# three tile columns (two pairs, the last one's second tile past N), 7
# k-blocks (past the 6 stages: the ring wraps inside a tile)
SIM_ARGS = {4: 200, 5: 300, 6: 448}


def _cfg(variant):
    return replace(hg.GemmConfig(), **gc.overrides(variant))


@pytest.fixture(scope="module")
def built():
    cfg = _cfg("128x112c2n")
    k = hg.build(cfg)
    return cfg, k, str(k.module), k.to_ptx()


def test_the_variants_are_the_cluster_along_n():
    for name, o in gc.CLUSTER_N_VARIANTS.items():
        cfg = _cfg(name)
        assert cfg.cluster_along_n and cfg.cluster_m == 2 and cfg.a_multicast == 2
        assert f"{cfg.block_m}x{cfg.block_n}c2n" == name
        assert gc.along_n(name) and gc.cluster_of(name) == 2 and name in gc.UNFUSED
        assert cfg.num_stages() == o["stages"]      # the table's stages all fit


def test_narrow_tile_builds_checks_and_simulates(built):
    cfg, k, text, ptx = built
    assert cfg.c_swizzle == 32 and k.stages == 6 and k.smem_bytes <= hg.SMEM_LIMIT
    assert spill_bytes(ptx) in (None, 0)
    assert verify_protocol(text) == [] and protocol_warnings(text) == []
    (report,) = simulate(text, schedules=2, args=SIM_ARGS, cluster=(2, 1, 1)).values()
    assert report.ok and report.schedules == 2, report


def test_a_one_cta_transaction_count_is_rejected(built):
    """The stage's full barrier armed for this CTA's own loads only (B and
    its half of A): the phase would complete before the peer's multicast
    half landed. The checker refuses it."""
    _, _, text, _ = built
    a_half = 64 * 128       # 64 rows of 128 bytes
    whole = 2 * a_half + 112 * 128
    assert f"tx_count = {whole}," in text
    planted = text.replace(f"tx_count = {whole},", f"tx_count = {whole - a_half},")
    try:
        errors = verify_protocol(planted)
    except Exception as e:  # the pass fails on it
        errors = [str(e)]
    assert any(f"expects {whole - a_half} bytes (tx_count {whole - a_half}) but the 2 copies "
               f"bound to this stage deliver {whole}" in e for e in errors), errors


def test_the_grid_counts_tile_rows_times_column_pairs():
    """HopperGemm.grid of a cluster-along-N meta: tile rows x column pairs
    clusters, at most the resident ones; a pair along M is as before. 9
    rows x 3 columns of 128x112 (1152 x 336): 18 pairs along N, where the
    count of pairs along M (5 x 3 = 15) would leave 3 for a second round."""
    from pipeline_mlir.ops.hopper_gemm_host import HopperGemm

    fake = types.SimpleNamespace(
        meta={"block_m": 128, "block_n": 112, "cluster_m": 2, "cluster_along_n": True},
        persistent=True, _resident=66)
    assert HopperGemm.grid(fake, 1152, 336, 132) == (2 * 18, 1, 1)
    assert HopperGemm.grid(fake, 16384, 336, 132) == (2 * 66, 1, 1)
    del fake.meta["cluster_along_n"]
    assert HopperGemm.grid(fake, 1152, 336, 132) == (2 * 15, 1, 1)


def test_the_meta_says_the_pair_is_along_n(built):
    from pipeline_mlir.ops.hopper_gemm_host import meta_of

    cfg, k, _, _ = built
    assert meta_of(cfg, k)["cluster_along_n"] is True
    assert "cluster_along_n" not in meta_of(_cfg("128x256c2"), hg.build(_cfg("128x256c2")))


# Shapes outside the random sweep's draw, measured on an H200 beside the
# pick before (docs/gemm.md, "The cluster along N on every width"): the
# rule's pick and its ratio to cuBLAS there against the pick before's,
# bf16 / fp16.
PICKS = {
    (6712, 304, 2152): "128x160c2n",     # 1.033 / 1.081 against 128x256c2's 0.605 / 0.609
    (5888, 640, 6232): "192x160c2n",     # 1.241 / 1.085 against 192x192c2's 0.963 / 0.922
    (5696, 392, 11112): "192x112c2n",    # 0.938 / 0.825 against 128x256c2's 0.758 / 0.696
    (3208, 168, 3848): "128x96c2n",      # 1.422 / 0.806 against 64x128's 0.955 / 0.534
    (7344, 864, 1496): "128x224c2n",     # 1.248 / 1.219 against 128x256c2's 1.065 / 1.065
    (14152, 584, 6840): "192x112c2n",    # 0.852 / 0.825 against 128x256c2's 0.802 / 0.790
}


@pytest.mark.parametrize("shape", sorted(PICKS))
def test_the_pick_takes_the_cluster_along_n(shape, monkeypatch):
    m, n, k = shape
    # the rule before the 2x2 cluster (test_gemm_cluster_2x2.py pins it)
    # and before cluster stream-K (test_gemm_cluster_streamk.py)
    monkeypatch.setattr(gc, "AUTO_CLUSTER_2X2", False)
    monkeypatch.setattr(gc, "AUTO_CLUSTER_STREAM_K", False)
    for dtype in ("bf16", "f16"):
        assert gc.choose(m, n, k, dtype) == PICKS[shape]
        assert gc.choose(m, n, k, dtype, fused=True) not in gc.UNFUSED
    monkeypatch.setattr(gc, "AUTO_CLUSTER_N_ANY", False)
    assert gc.choose(m, n, k, "bf16") not in gc.CLUSTER_N_VARIANTS


def test_the_rule_is_the_least_estimate_past_the_margin(monkeypatch):
    """Where the cluster along N's best estimate does not beat the plain
    pick's, the pick stands (the cubes and model shapes of sweep.py keep
    theirs); a stream-K or split-K pick is never turned; the choice is the
    c2n tile of least estimate."""
    import pathlib

    monkeypatch.setattr(gc, "AUTO_CLUSTER_2X2", False)
    import sys

    sys.path.insert(0, str(pathlib.Path(__file__).parents[2] / "benchmarks" / "gemm"))
    import sweep

    for m, n, k, *_ in sweep.SHAPES:
        pick = gc.choose(m, n, k, "bf16")
        assert pick not in gc.CLUSTER_N_VARIANTS, (m, n, k, pick)
    assert gc.choose_cluster_n(4544, 1008, 7784, 132, "128x256c2_streamk") is None
    assert gc.choose_cluster_n(4544, 1008, 7784, 132, "128x256_sk4") is None
    m, n, k = 6712, 304, 2152
    best = min(gc.CLUSTER_N_RULE_VARIANTS, key=lambda v: gc.estimate(v, m, n, 132, k))
    assert gc.choose_cluster_n(m, n, k, 132, "128x256c2") == best == "128x160c2n"
    monkeypatch.setattr(gc, "CLUSTER_N_MARGIN",
                        gc.estimate(best, m, n, 132, k) / gc.estimate("128x256c2", m, n, 132, k))
    assert gc.choose_cluster_n(m, n, k, 132, "128x256c2") is None


# The one-wave rule (gemm_configs.AUTO_CLUSTER_N_ONE_WAVE, off: it did not
# pay on shapes measured after it was fitted), on shapes no run had measured
# when it was written: one wave of a one-CTA pick of at most 128x128 whose K rows are
# whole L2 sectors keeps that pick unless the pair reads at most 3/4 of its
# operand rows (a tall narrow output, where 128x128's two tile columns
# each read all of A); a misaligned K or a wider pick keeps the pair.
ONE_WAVE = {
    (432, 2808, 3792): ("128x128", "128x96c2n"),       # rows share 0.854
    (1752, 656, 6864): ("128x128", "128x96c2n"),       # 0.822
    (336, 4872, 11760): ("128x128", "128x112c2n"),     # 0.794
    (8424, 136, 7568): ("128x96c2n", "128x96c2n"),     # 0.69: A read once
    (8400, 200, 6832): ("128x112c2n", "128x112c2n"),
    (432, 2808, 3768): ("128x96c2n", "128x96c2n"),     # K misaligned
}


@pytest.mark.parametrize("shape", sorted(ONE_WAVE))
def test_one_wave_keeps_the_narrow_pick_unless_the_pair_reads_less(shape, monkeypatch):
    m, n, k = shape
    monkeypatch.setattr(gc, "AUTO_CLUSTER_2X2", False)
    now, before = ONE_WAVE[shape]
    assert gc.choose(m, n, k, "bf16") == before          # off by default
    monkeypatch.setattr(gc, "AUTO_CLUSTER_N_ONE_WAVE", True)
    for dtype in ("bf16", "f16"):
        assert gc.choose(m, n, k, dtype) == now
    monkeypatch.setattr(gc, "CLUSTER_N_ONE_WAVE_ROWS", float("inf"))
    assert gc.choose(m, n, k, "bf16") == before


def test_operand_rows_count_each_shared_operand_once():
    # 3 tile rows x 4 columns of 128x128 on 384 x 512: A's 384 rows read by
    # 4 columns, B's 512 by 3 rows; the pair along N reads A once per pair.
    assert gc.operand_rows("128x128", 384, 512) == 4 * 384 + 3 * 512
    assert gc.operand_rows("128x128c2n", 384, 512) == 2 * 384 + 3 * 512
    assert gc.operand_rows("128x256c2", 384, 512) == 2 * 384 + 2 * 512
    # a wider pick (192x128) is left to the estimate: 184 x 11464 x 5424
    # (192x96c2n measured 5% faster there at a share of 0.80)
    assert gc.choose(184, 11464, 5424, "bf16") == "192x96c2n"
