"""Stream-K on the clusters along N and 2x2 (gemm_configs
``CLUSTER_STREAM_K_VARIANTS``, ``<tile>c2n_streamk`` / ``<tile>c2x2_streamk``
and their ``_share`` fix-ups): the schedule's units are the cluster's tiles,
every CTA of the cluster walks the same K blocks (its loads are multicast),
and each CTA keeps workspace slots and counters of its own
(``streamk_fixup.own_index``). Deviceless: 128x160c2x2_streamk and
128x128c2n_streamk are built once each, assembled (ptxas where it is on
PATH: no spills), checked by pipeline-verify-protocol and run by the
simulator on their whole-tile path (the partial path across two clusters,
its counters in global memory: test_sim_grid.py); a planted transaction
count is rejected; every CTA's slots and counters are distinct on the
launches the host makes (a planted cluster size of two for the 2x2 cluster
is caught); the host's grid and tile name; the rule's picks with
``AUTO_CLUSTER_STREAM_K`` on and off, on shapes no run measured."""

from dataclasses import replace
import types

import pytest

from _example_checks import messages, protocol_warnings, simulate, verify_protocol
from _ptxas import spill_bytes
from pipeline_mlir.kernel.tile_scheduler import StreamKSchedule
from pipeline_mlir.kernels import hopper_gemm as hg
from pipeline_mlir.kernels import streamk_fixup as skf
from pipeline_mlir.ops import gemm_configs as gc

SK_PARAMS = ["sk_workspace", "sk_counters", "sk_ctas", "sk_rounds"]


def _cfg(variant):
    return replace(hg.GemmConfig(), **gc.overrides(variant))


@pytest.fixture(scope="module")
def built():
    out = {}
    for v in ("128x160c2x2_streamk", "128x128c2n_streamk"):
        k = hg.build(_cfg(v))
        out[v] = (_cfg(v), k, str(k.module), k.to_ptx())
    return out


def test_the_variants_are_stream_k_on_the_clusters():
    for name, o in gc.CLUSTER_STREAM_K_VARIANTS.items():
        tile = gc.tile_variant(name)
        assert tile in gc.CLUSTER_STREAM_K_TILES and gc.is_stream_k(name)
        assert gc.cluster_of(tile) in (2, 4) and (gc.along_n(tile) or gc.cluster_n_of(tile) == 2)
        assert o == dict(gc.VARIANTS[tile], stream_k=True, **(
            {"sk_share": True} if name.endswith("_share") else {}))
        assert name not in gc.STREAM_K_VARIANTS      # the GPU suite's list is unchanged
    cfg = _cfg("128x160c2n_streamk")
    cfg.check()
    for bad in (dict(sk_prefetch=True), dict(split_k=2)):
        with pytest.raises(ValueError, match="cluster_along_n|split_k needs cluster_m=1"):
            replace(cfg, **bad).check()
    with pytest.raises(ValueError, match="2x2 cluster"):
        replace(_cfg("128x160c2x2_streamk"), sk_prefetch=True).check()


@pytest.mark.parametrize("variant, cluster, args", [
    # 3 x 3 tiles of 128x160: 2 x 2 units of 2x2 tiles on one cluster, four
    # whole-tile rounds (sk_rounds, argument 10), 7 k-blocks (the ring wraps)
    ("128x160c2x2_streamk", 4, {4: 300, 5: 420, 6: 448, 9: 1, 10: 4}),
    # 2 tile rows x 3 columns of 128x128 (the last pair's second tile past
    # N): 4 units of pairs along N on one cluster
    ("128x128c2n_streamk", 2, {4: 200, 5: 300, 6: 512, 9: 1, 10: 4}),
])
def test_builds_checks_and_simulates(built, variant, cluster, args):
    cfg, k, text, ptx = built[variant]
    assert [n for n, _ in k.params][7:] == SK_PARAMS and cfg.cluster_size == cluster
    assert spill_bytes(ptx) in (None, 0)
    assert verify_protocol(text) == [] and protocol_warnings(text) == []
    # the last contributor's wait and the partials' stores and loads
    assert ptx.count("ld.relaxed.gpu.global.b32") == 1
    assert ptx.count("st.global.v4.b32") == ptx.count("ld.global.v4.b32") == cfg.block_n // 8
    (report,) = simulate(text, schedules=2, args=args, cluster=(cluster, 1, 1)).values()
    assert report.ok and report.schedules == 2, report


def test_a_transaction_count_without_the_peers_half_of_b_is_rejected(built):
    _, _, text, _ = built["128x160c2x2_streamk"]
    whole, b_half = 36864, 80 * 128
    planted = text.replace(f"tx_count = {whole},", f"tx_count = {whole - b_half},")
    assert planted != text
    (report,) = simulate(planted, schedules=2, args={4: 300, 5: 420, 6: 448, 9: 1, 10: 4},
                         cluster=(4, 1, 1)).values()
    found = messages(report)
    assert f"expect_tx armed only {whole - b_half}" in found.get("tx-count", ""), found


def _indices(own, ranks, units, k_blocks, wave, tile):
    """Every workspace slot and counter row the fix-up touches on the host's
    launch of ``units`` units (``own(x, rank)``: a unit's slot or stream-K
    tile as CTA ``rank`` of its cluster indexes it; ``ranks`` CTAs a
    cluster), each checked to belong to one (cluster, rank, x) only;
    returns (CTAs of the launch, slots, counter rows)."""
    grid, sk_ctas, rounds = gc.stream_k_launch(units, k_blocks, wave, tile)
    slots, counters = {}, {}
    for cta in range(grid):
        s = StreamKSchedule(units, k_blocks, grid, cta, sk_ctas, rounds)
        for i in range(s.units):
            _, _, _, partial, slot, sk_tile = s.unit(i)
            if not partial:
                continue
            for rank in range(ranks):
                for table, x, who in ((slots, slot, cta), (counters, sk_tile, None)):
                    index = own(x, rank)
                    assert table.setdefault(index, (who, rank, x)) == (who, rank, x), \
                        f"index {index} of {(who, rank, x)} and {table[index]}"
    return grid * ranks, slots, counters


@pytest.mark.parametrize("variant", ["128x160c2x2_streamk", "128x128c2n_streamk_share"])
def test_every_cta_has_its_own_slots_and_counters(variant):
    """On launches of a whole wave and a leftover, a leftover alone, and the
    even kind: each (CTA, rank) writes its own slots, within the 2 x CTAs
    the host allocates, and each tile's rank has its own counter row."""
    cfg = _cfg(variant)
    tile = gc.tile_variant(variant)
    for units, k_blocks, wave in ((45, 120, 30), (12, 200, 30), (97, 100, 66), (7, 150, 66)):
        ctas, slots, counters = _indices(lambda x, r: skf.own_index(cfg, x, r),
                                         cfg.cluster_size, units, k_blocks, wave, tile)
        assert slots and max(slots) < 2 * ctas and max(counters) < 2 * ctas


def test_a_cluster_size_of_two_for_the_2x2_cluster_collides():
    """Planted: each rank's slot computed as for a pair (cluster_m, 2, in
    place of the 2x2 cluster's 4 CTAs): two ranks write one slot."""
    pair = types.SimpleNamespace(cluster_size=2)
    with pytest.raises(AssertionError, match="index"):
        _indices(lambda x, r: skf.own_index(pair, x, r), 4, 45, 120, 30, "128x160c2x2")


def test_the_host_grid_and_tile_name():
    from pipeline_mlir.layout import OperandLayout
    from pipeline_mlir.ops.hopper_gemm_host import HopperGemm, meta_units, stream_k_tile

    lay = {"a": OperandLayout.one_box("bf16", "K", 128, 128)}
    for variant, resident in (("128x160c2x2_streamk", 30), ("128x128c2n_streamk", 66)):
        cfg = _cfg(variant)
        meta = {"block_m": cfg.block_m, "block_n": cfg.block_n, "cluster_m": 2,
                "stream_k": True}
        if cfg.cluster_n > 1:
            meta["cluster_n"] = 2
        else:
            meta["cluster_along_n"] = True
        tile = gc.tile_variant(variant)
        assert stream_k_tile(meta) == tile
        fake = types.SimpleNamespace(meta=meta, persistent=True, _resident=resident,
                                     layouts=lay)
        fake.stream_k_wave = types.MethodType(HopperGemm.stream_k_wave, fake)
        for m, n, k in ((6408, 264, 7064), (13008, 304, 13440), (1592, 240, 12968)):
            units, wave = gc.stream_k_units(tile, m, n, 132)
            assert units == meta_units(meta, m, n)
            grid = gc.stream_k_launch(units, -(-k // 64), resident, tile)[0]
            assert HopperGemm.grid(fake, m, n, 132, k) == (grid * cfg.cluster_size, 1, 1)
    assert stream_k_tile({"block_m": 128, "block_n": 256, "cluster_m": 2}) == "128x256c2"
    assert stream_k_tile({"block_m": 128, "block_n": 128, "cluster_m": 1}) == "128x128"


# Shapes no run measured: (both rules, the stream-K one alone, the one over
# stream-K alone, neither).
PICKS = {
    # narrow output, long K: the pair along M's stream-K gives way to the
    # plain 2x2 cluster (N at most CLUSTER_OVER_STREAM_K_MAX_N)
    (7000, 184, 9000): ("128x96c2x2", "192x192c2_streamk", "128x96c2x2", "192x192c2_streamk"),
    # N of 296: past that bound; the cluster along N as stream-K
    (3000, 296, 12000): ("192x160c2n_streamk", "192x160c2n_streamk", "192x192c2_streamk",
                         "192x192c2_streamk"),
    # (without the cluster stream-K rule, 128x128_streamk: 32 tiles of 4
    # pieces, which the one-arrival shared fix-up's rule takes)
    (2000, 232, 9000): ("128x128c2n_streamk", "128x128c2n_streamk", "128x128_streamk_share1v4",
                        "128x128_streamk_share1v4"),
    # unchanged: a shared fix-up pick (a small output of a long K: with one
    # arrival a warp, choose_share1), whole waves, a one-wave c2n pick, a cut tile
    (200, 200, 9000): ("128x128_streamk_share1",) * 4,
    (8192, 8192, 8192): ("128x256c2",) * 4,
    (4000, 200, 1500): ("128x96c2n",) * 4,
    (700, 9000, 14000): ("128x208c2",) * 4,
}


@pytest.mark.parametrize("shape", sorted(PICKS))
def test_the_pick_on_shapes_no_run_measured(shape, monkeypatch):
    m, n, k = shape
    for (sk, over), want in zip(((True, True), (True, False), (False, True), (False, False)),
                                PICKS[shape]):
        monkeypatch.setattr(gc, "AUTO_CLUSTER_STREAM_K", sk)
        monkeypatch.setattr(gc, "AUTO_CLUSTER_OVER_STREAM_K", over)
        assert gc.choose(m, n, k, "bf16") == want, (sk, over)
        assert gc.choose(m, n, k, "f16") == want, (sk, over)
        assert gc.choose(m, n, k, "bf16", fused=True) not in gc.UNFUSED
        assert not gc.is_stream_k(gc.choose(m, n, k, "bf16", fused=True))
        assert not gc.is_stream_k(gc.choose(m, n, k, "bf16", stream_k=False))


def test_the_bounds_of_the_rule_over_stream_k(monkeypatch):
    """Only 2x2 tiles (CLUSTER_OVER_STREAM_K_2X2_ONLY), whose columns are at
    least CLUSTER_OVER_STREAM_K_MIN_FILL of the tiles' (column_fill), and no
    shared fix-up of a cluster tile (CLUSTER_STREAM_K_SHARE)."""
    assert gc.column_fill("128x96c2x2", 184) == 184 / 192
    assert gc.column_fill("128x96c2n", 216) == 216 / 384
    assert gc.column_fill("128x160c2x2", 264) == 264 / 320
    m, n, k = 7000, 184, 9000
    monkeypatch.setattr(gc, "CLUSTER_OVER_STREAM_K_2X2_ONLY", False)
    assert gc.choose(m, n, k, "bf16") == "128x96c2n"
    monkeypatch.setattr(gc, "CLUSTER_OVER_STREAM_K_MIN_FILL", 0.99)
    assert gc.choose(m, n, k, "bf16") == "192x192c2_streamk"
    monkeypatch.setattr(gc, "CLUSTER_STREAM_K_SHARE", True)
    assert gc.choose(200, 200, 9000, "bf16") == "128x128_streamk_share1"  # a share pick stays
    monkeypatch.setattr(gc, "AUTO_STREAM_K", False)
    assert not gc.is_stream_k(gc.choose(3000, 296, 12000, "bf16"))


def test_the_rules_are_on():
    assert gc.AUTO_CLUSTER_STREAM_K and gc.AUTO_CLUSTER_OVER_STREAM_K
    assert gc.choose(6144, 176, 7680, "bf16") == "128x96c2x2"


def test_the_cache_s_all_builds_them():
    """scripts/build-gemm-cache.py --all (the GPU bundle's cache): every
    variant the pick may take, these among them."""
    import argparse
    import importlib.util
    import os

    root = os.path.join(os.path.dirname(__file__), "..", "..")
    spec = importlib.util.spec_from_file_location(
        "build_gemm_cache", os.path.join(root, "scripts", "build-gemm-cache.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    found = mod.wanted(argparse.Namespace(kernel=["hopper_gemm"], all=True, shape=[], sms=132,
                                          dtype=["bf16", "f16"], epilogues=False))
    names = {(v, d) for _, v, _, d in found}
    assert {(v, d) for v in gc.CLUSTER_STREAM_K_VARIANTS for d in ("bf16", "f16")} <= names
