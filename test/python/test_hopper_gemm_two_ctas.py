"""Two CTAs per SM (``GemmConfig.ctas_per_sm=2``, the ``128x128x2`` variant
of ``gemm_configs.VARIANTS``): each CTA fits half the SM's shared memory
and registers, ptxas is told so (``.minnctapersm 2``) and spills nothing
with the fused epilogues it is picked for (a residual, which spills, is
refused), the launch facts carry the CTAs per SM, the persistent grid is
twice the SMs, and the fused pick takes it by its rule. Deviceless: the
kernels are built, checked and assembled here (ptxas where it is on
PATH)."""

import os
from dataclasses import replace

import pytest

from pipeline_mlir.kernels import hopper_gemm as hg
from pipeline_mlir.ops import gemm_configs, hopper_gemm_host
from pipeline_mlir.ops.epilogues import Epilogue
from _ptxas import registers_and_spills as _ptxas

VARIANT = "128x128x2"
FULL = Epilogue(alpha="param", bias="col", residual=True, activation="gelu_erf")
NO_RESIDUAL = replace(FULL, residual=False)
LINEAR_GELU = Epilogue(bias="col", activation="gelu_tanh")


def _cfg(epilogue=None):
    name, over = gemm_configs.fused(VARIANT, epilogue)
    over = dict(over)
    if over.get("epilogue") is not None:
        over["epilogue"] = Epilogue.from_json(over["epilogue"])
    return replace(hg.GemmConfig(), **over)


def test_half_an_sm_each():
    cfg = _cfg()
    assert cfg.ctas_per_sm == 2 and (cfg.block_m, cfg.block_n) == (128, 128)
    assert cfg.name.endswith("_x2")
    # 228 KiB per SM, 1 KiB reserved per CTA: 113 KiB each
    assert cfg.smem_limit == 115712
    # two consumer warpgroups, then the producer's lone warp: 288 threads
    assert cfg.threads == 288 and cfg.producer_warp == 8 and not cfg.setmaxnreg
    assert cfg.num_stages() == 3 and cfg.epilogue_bytes() == 16 * 1024
    assert replace(cfg, stages=6).num_stages() == 3        # no more fit
    k = hg.build(cfg)
    assert k.stages == 3
    # barriers in the first KiB, 3 x 32 KiB of operands, 16 KiB of C: to the byte
    assert k.smem_bytes == 1024 + 3 * 32768 + 16384 <= cfg.smem_limit
    ptx = k.to_ptx()
    assert ".minnctapersm 2" in ptx and ".reqntid 288, 1, 1" in ptx
    assert "setmaxnreg" not in ptx
    assert ptx.count("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16") == 8


@pytest.mark.parametrize("epilogue", [None, LINEAR_GELU, NO_RESIDUAL],
                         ids=["plain", "bias_gelu_tanh", "alpha_bias_gelu_erf"])
def test_fits_two_ctas_without_spills(epilogue):
    """ptxas keeps every thread within 96 registers (what it gives two
    CTAs of 288 threads; 65,536 / 576 = 113 before its allocation steps)
    and spills nothing, the fused epilogues without a residual included."""
    k = hg.build(_cfg(epilogue))
    found = _ptxas(k.to_ptx())
    if found is not None:
        regs, spills = found
        assert regs <= 96 and spills == 0, found
    assert k.compile()


def test_a_residual_is_refused():
    """With a residual the epilogue spills (200 bytes, ptxas -v): the table
    refuses it, and the pick never asks for it."""
    assert VARIANT in gemm_configs.NO_RESIDUAL
    with pytest.raises(ValueError, match="without a residual epilogue"):
        gemm_configs.fused(VARIANT, FULL)
    assert gemm_configs.choose(4096, 4096, 4096, "bf16", 132, fused=True,
                               activation="gelu_tanh", residual=True) == "128x256"
    found = _ptxas(hg.build(replace(_cfg(), epilogue=FULL, epilogue_passes=2)).to_ptx())
    if found is not None:
        assert found[1] > 0, found       # why: it spills


@pytest.mark.parametrize("shape, pick", [
    ((4096, 1024, 4096), "128x256"), ((2048, 2048, 2048), "128x128")])
def test_fused_activation_picks_two_ctas_over_one_cta_tiles(shape, pick):
    """A bias + gelu tanh / silu on shapes whose one-CTA pick is 128x256 or
    128x128 and whose 128x128 tiles fill the two CTAs of (nearly) every SM
    (run4, docs/gemm.md: 1.00-1.08x the one-CTA tile there); relu and gelu
    erf measured even there, and keep the pick. (Shapes of at least 4
    128x128 tiles an SM take the ping-pong tile first, for every
    activation: test_gemm_pingpong.py.)"""
    m, n, k = shape
    assert gemm_configs.choose(m, n, k, "bf16", 132) == pick       # plain: unchanged
    assert gemm_configs.choose(m, n, k, "bf16", 132, fused=True) == pick
    for act in ("relu", "gelu_erf"):
        assert gemm_configs.choose(m, n, k, "bf16", 132, fused=True, activation=act) == pick
    for act in ("gelu_tanh", "silu"):
        assert gemm_configs.choose(m, n, k, "bf16", 132, fused=True, activation=act) == VARIANT
        # fp16 where its pick is one of those tiles too (4096^3 f16 is TUNED to the cluster)
        f16 = gemm_configs.choose(m, n, k, "f16", 132, fused=True)
        assert gemm_configs.choose(m, n, k, "f16", 132, fused=True, activation=act) == (
            VARIANT if f16 in gemm_configs.TWO_CTA_OVER else f16)


@pytest.mark.parametrize("shape", [
    (512, 4096, 4096),      # 128 tiles: a CTA alone on its SM with 3 stages (0.76x)
    (128, 8192, 8192),      # 64 tiles (0.58x)
    (3072, 3072, 3072),     # 192x192's pick (0.85-0.89x)
    (4096, 14336, 4096),    # the 2-CTA cluster's (0.97-1.04x: mixed)
    (1000, 1032, 520)])
def test_fused_activation_keeps_the_pick_elsewhere(shape):
    m, n, k = shape
    pick = gemm_configs.choose(m, n, k, "bf16", 132, fused=True)
    assert pick != VARIANT
    assert gemm_configs.choose(m, n, k, "bf16", 132, fused=True, activation="gelu_tanh") == pick


def test_launch_facts_and_grid():
    cfg = _cfg(LINEAR_GELU)
    k = hg.build(cfg)
    meta = hopper_gemm_host.meta_of(cfg, k)
    assert meta["ctas_per_sm"] == 2 and meta["smem"] == k.smem_bytes
    assert [p[0] for p in meta["params"]][7:] == ["bias"]
    # a one-CTA variant's meta says nothing of it
    plain = replace(hg.GemmConfig(), **gemm_configs.VARIANTS["128x128"])
    assert "ctas_per_sm" not in hopper_gemm_host.meta_of(plain, hg.build(plain))
    g = object.__new__(hopper_gemm_host.HopperGemm)
    g.meta, g.persistent, g._resident = meta, True, None
    # 1024 x 11008: 8 x 86 = 688 tiles over 2 x 132 CTAs
    assert g.grid(1024, 11008, 132, 4096) == (264, 1, 1)
    assert g.grid(256, 1024, 132, 4096) == (16, 1, 1)       # fewer tiles than CTAs
    g.meta = hopper_gemm_host.meta_of(plain, hg.build(plain))
    g._resident = None
    assert g.grid(1024, 11008, 132, 4096) == (132, 1, 1)


def test_misuse_refused():
    base = _cfg()
    for change, match in ((dict(cluster_m=2), "without cluster_m"),
                          (dict(stream_k=True), "without cluster_m"),
                          (dict(split_k=2), "without cluster_m"),
                          (dict(ctas_per_sm=3), "must be 1 or 2"),
                          (dict(setmaxnreg=True), "setmaxnreg=False")):
        with pytest.raises(ValueError, match=match):
            replace(base, **change).check()


def test_one_cta_variants_are_unchanged():
    """ctas_per_sm=1 is the default: the other variants' names, stages and
    launch bounds are as before (their PTX was compared byte for byte by
    hand: docs/gemm.md, fused epilogues)."""
    for name, over in gemm_configs.VARIANTS.items():
        cfg = replace(hg.GemmConfig(), **over)
        if name == VARIANT:
            continue
        assert cfg.ctas_per_sm == 1 and not cfg.name.endswith("_x2")
        assert cfg.smem_limit == hg.SMEM_LIMIT
    ptx = hg.build(replace(hg.GemmConfig(), **gemm_configs.VARIANTS["128x128"])).to_ptx()
    assert ".minnctapersm" not in ptx


def test_the_cache_builder_prebuilds_the_two_cta_picks():
    """scripts/build-gemm-cache.py --epilogues builds what a GPU host
    without MLIR needs for a fused gelu tanh or silu: the two-CTA tile with the
    prebuilt epilogues that have no residual."""
    import argparse
    import importlib.util

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    spec = importlib.util.spec_from_file_location(
        "build_gemm_cache", os.path.join(root, "scripts", "build-gemm-cache.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    args = argparse.Namespace(kernel=["hopper_gemm"], dtype=["bf16"], all=False,
                              shape=[(4096, 1024, 4096)], sms=132, epilogues=True)
    names = {v for _, v, _, _ in mod.wanted(args)}
    assert {"128x256", "128x256_bias_relu", VARIANT, f"{VARIANT}_bias_gelu_tanh",
            f"{VARIANT}_bias_silu", f"{VARIANT}_alpha"} <= names
    assert not any(n.startswith(VARIANT) and "res" in n for n in names)
