"""The 2x2 cluster (gemm_configs ``CLUSTER_2X2_VARIANTS``, ``<tile>c2x2``,
``GemmConfig.cluster_n=2``): two tiles along M by two along N, each CTA
loading half of its A tile's rows into its tile row's two CTAs and half of
its B tile's rows into its tile column's. Deviceless: 128x160c2x2 is built
once, assembled (ptxas where it is on PATH: no spills), checked by
pipeline-verify-protocol and run by the simulator on a 4-CTA cluster over a
ragged output (3 x 3 tiles: the second unit row and column half past the
edge); planted mistakes are rejected: a transaction count missing the peer's
half of B, A multicast to all four CTAs and B to none but
itself (the simulator), and masks swapped between the operands (the masks'
rule against the cluster layout's rank order). The launch grid counts units
of 2x2 tiles, and the pick is pinned on shapes no run measured."""

from dataclasses import replace
import types

import pytest
from mlir import ir
from mlir.dialects import arith

from _example_checks import messages, protocol_warnings, simulate, verify_protocol
from _ptxas import spill_bytes
from pipeline_mlir.kernels import gemm_mainloop as gm
from pipeline_mlir.kernels import hopper_gemm as hg
from pipeline_mlir.ops import gemm_configs as gc

# m, n, k (kernel arguments 4, 5, 6): 3 x 3 tiles of 128x160 (units of 2x2:
# the second unit row and column each one tile), 7 k-blocks (past the 5
# stages: the ring wraps inside a tile)
SIM_ARGS = {4: 300, 5: 420, 6: 448}
VARIANT = "128x160c2x2"


def _cfg(variant):
    return replace(hg.GemmConfig(), **gc.overrides(variant))


def _simulate(text):
    (report,) = simulate(text, schedules=2, args=SIM_ARGS, cluster=(4, 1, 1)).values()
    return report


@pytest.fixture(scope="module")
def built():
    cfg = _cfg(VARIANT)
    k = hg.build(cfg)
    return cfg, k, str(k.module), k.to_ptx()


def test_the_variants_are_the_2x2_cluster():
    for name, o in gc.CLUSTER_2X2_VARIANTS.items():
        cfg = _cfg(name)
        assert cfg.cluster_size == 4 and cfg.a_multicast == 2 and cfg.b_multicast == 2
        assert not cfg.cluster_along_n and cfg.releasing_ctas == 3
        assert f"{cfg.block_m}x{cfg.block_n}c2x2" == name and name in gc.UNFUSED
        assert gc.cluster_of(name) == 4 and gc.cluster_n_of(name) == 2
        assert cfg.num_stages() == o["stages"]
    # stream-K runs on it (test_gemm_cluster_streamk.py), the prefetch does not
    replace(_cfg(VARIANT), stream_k=True).check()
    with pytest.raises(ValueError, match="2x2 cluster"):
        replace(_cfg(VARIANT), stream_k=True, sk_prefetch=True).check()


@pytest.mark.parametrize("over, message", [
    (dict(cluster_m=0), "cluster_m must be 1 or 2"),
    (dict(cluster_m=3), "cluster_m must be 1 or 2"),
    (dict(cluster_n=0), "cluster_n must be 1 or 2"),
    (dict(cluster_n=2.0), "cluster_n must be 1 or 2"),
    (dict(group_m=0), "group_m"),
    (dict(group_m=1), "group_m must be even"),
    (dict(group_m=3), "group_m must be even"),
])
def test_a_cluster_shape_outside_the_rule_is_refused_by_name(over, message):
    with pytest.raises(ValueError, match=message):
        replace(_cfg(VARIANT), **over).check()


def test_builds_checks_and_simulates(built):
    cfg, k, text, ptx = built
    assert k.stages == 5 and k.smem_bytes <= hg.SMEM_LIMIT
    assert spill_bytes(ptx) in (None, 0)
    assert verify_protocol(text) == [] and protocol_warnings(text) == []
    # the ring's layout is 2 x 2 with both modes multicast; each stage is
    # released by the consumers of 3 CTAs (8 warps each)
    assert "tx_count = 36864," in text       # 128 rows of A + 160 of B, 128 bytes each
    report = _simulate(text)
    assert report.ok and report.schedules == 2, report


def test_a_transaction_count_without_the_peers_half_of_b_is_rejected(built):
    """The stage armed for this CTA's loads of B only (the masks are computed
    from the rank at run time, so the checker does not count the copies that
    land; the simulator runs each rank): the phase completes before the
    peer's half of B lands."""
    _, _, text, _ = built
    whole, b_half = 36864, 80 * 128
    planted = text.replace(f"tx_count = {whole},", f"tx_count = {whole - b_half},")
    assert planted != text
    found = messages(_simulate(planted))
    assert f"expect_tx armed only {whole - b_half}" in found.get("tx-count", ""), found


def _built_with(masks, monkeypatch):
    monkeypatch.setattr(gm, "cluster_2x2_masks", masks)
    return str(hg.build(_cfg(VARIANT)).module)


def test_a_multicast_to_every_cta_is_rejected(monkeypatch):
    """A's half into all four CTAs: each stage receives two A halves more
    than it expects, and its phase completes before the data landed."""
    orig = gm.cluster_2x2_masks

    def to_all(rank):
        return arith.constant(ir.IntegerType.get_signless(16), 15), orig(rank)[1]

    report = _simulate(_built_with(to_all, monkeypatch))
    assert "early-read" in messages(report), messages(report)


def test_b_loaded_into_this_cta_alone_is_rejected(monkeypatch):
    """B's half into its own CTA only (mask 1 << 0 for every rank): CTA 0's
    stage receives the other CTAs' halves while its consumers hold it."""
    orig = gm.cluster_2x2_masks

    def b_self(rank):
        return orig(rank)[0], arith.constant(ir.IntegerType.get_signless(16), 1)

    report = _simulate(_built_with(b_self, monkeypatch))
    assert "overwrite" in messages(report), messages(report)


def _masks_follow_the_layout(mask_values):
    """Each rank's A mask is the ranks of its tile row, its B mask those of
    its tile column, in the cluster layout's order (rank = m + 2 n:
    lib/Conversion/PipelineToNVVM/ClusterMasks.cpp), the order the
    scheduler gives tiles in (row offset rank % 2, column offset rank // 2)."""
    for r in range(4):
        a, b = mask_values(r)
        if a != sum(1 << s for s in range(4) if s % 2 == r % 2):
            return False
        if b != sum(1 << s for s in range(4) if s // 2 == r // 2):
            return False
    return True


def test_the_masks_follow_the_cluster_layout():
    assert _masks_follow_the_layout(gm.cluster_2x2_mask_values)
    # swapped between the operands: every CTA still receives two halves of
    # each (the protocol holds), but of the wrong tiles
    assert not _masks_follow_the_layout(lambda r: gm.cluster_2x2_mask_values(r)[::-1])


def test_the_grid_counts_units_of_2x2_tiles(built):
    from pipeline_mlir.ops.hopper_gemm_host import HopperGemm, cluster_size, meta_of

    cfg, k, _, _ = built
    meta = meta_of(cfg, k)
    assert meta["cluster_n"] == 2 and cluster_size(meta) == 4
    assert "cluster_n" not in meta_of(_cfg("128x112c2n"), hg.build(_cfg("128x112c2n")))
    fake = types.SimpleNamespace(meta=meta, persistent=True, _resident=33)
    # 6408 x 264: 26 unit rows x 1 unit column (320 columns), 4 CTAs each
    assert HopperGemm.grid(fake, 6408, 264, 132) == (4 * 26, 1, 1)
    assert HopperGemm.grid(fake, 16384, 264, 132) == (4 * 33, 1, 1)
    assert gc.estimate(VARIANT, 6408, 264, 132, 7064) < gc.estimate("128x160c2n", 6408, 264,
                                                                      132, 7064)


# Tall narrow outputs of a long K that no run measured: the 2x2 cluster
# where N is at most CLUSTER_2X2_MAX_N, K at least CLUSTER_2X2_MIN_K and its
# units fit the resident 4-CTA clusters (30 of 33 on 132 SMs), the cluster
# along N as before without AUTO_CLUSTER_2X2.
PICKS = {
    (6600, 300, 6000): ("128x160c2x2", "128x160c2n"),     # 26 units of 2x2
    (6600, 300, 1600): ("128x160c2n", "128x160c2n"),      # K short
    (8320, 300, 6000): ("128x160c2n", "128x160c2n"),      # 33 units: two rounds
}


@pytest.mark.parametrize("shape", sorted(PICKS))
def test_the_pick_takes_the_2x2_cluster_on_narrow_outputs(shape, monkeypatch):
    m, n, k = shape
    now, before = PICKS[shape]
    for dtype in ("bf16", "f16"):
        assert gc.choose(m, n, k, dtype) == now
        assert gc.choose(m, n, k, dtype, fused=True) not in gc.UNFUSED
    monkeypatch.setattr(gc, "AUTO_CLUSTER_2X2", False)
    assert gc.choose(m, n, k, "bf16") == before


def test_a_wave_of_2x2_clusters_is_the_resident_ones():
    assert gc.units_per_wave("128x160c2x2", 132) == 30
    assert gc.units_per_wave("128x160c2n", 132) == 66
    assert gc.estimate("128x160c2x2", 8320, 300, 132, 6000) > \
        1.5 * gc.estimate("128x160c2x2", 6600, 300, 132, 6000)


def test_wide_outputs_never_take_it():
    for m, n, k in ((4544, 1008, 7784), (1048, 6504, 11408), (2616, 512, 2640),
                    (8192, 8192, 8192), (4096, 4096, 4096)):
        assert gc.choose(m, n, k, "bf16") not in gc.CLUSTER_2X2_VARIANTS
