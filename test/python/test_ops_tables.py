"""Deviceless: the library ops' variant tables (ops/fp8_configs.py,
ops/attention_configs.py) and the kernel cache's families. Every variant
the ops can pick builds, verifies and passes the protocol checker; a
family without a registered builder compiles on demand where MLIR is
installed; the ops' launch facts are what their launchers need."""

import pytest

from pipeline_mlir.ops import attention_configs, fp8_configs, kernel_cache

pytest.importorskip("mlir.ir", reason="building the variants needs MLIR")


@pytest.mark.parametrize("acc", ["fast", "promoted"])
def test_fp8_rule_picks_within_its_accumulation_mode(acc):
    shapes = [(m, n, k) for m in (128, 1024, 3072, 8192) for n in (256, 3072, 8192)
              for k in (512, 4096)]
    picked = {fp8_configs.choose(m, n, k, acc) for m, n, k in shapes}
    assert picked and all(fp8_configs.overrides(v)["accumulation"] == acc for v in picked)
    assert len(picked) >= 2          # the shape matters
    # a 3072-square output: 128x192 tiles fill 3 waves (the 128x256 ones leave 18% idle)
    assert fp8_configs.choose(3072, 3072, 3072, acc).endswith("128x192")
    with pytest.raises(ValueError, match="accumulation must be 'fast' or 'promoted'"):
        fp8_configs.choose(128, 128, 128, "exact")


def test_attention_variants_cover_every_head_dim_and_mask():
    # Per head dim and mask: the plain tiles, GQA-packed for each group,
    # and the two the pick takes by shape.
    plain = {"d64", "d64c", "d128", "d128c", "d256", "d256c"}
    assert set(attention_configs.VARIANTS) == plain | {
        f"{p}_gqa{g}" for p in plain for g in attention_configs.GROUPS} | {
        "d64c_m128", "d128c_bn64"}
    name, over = attention_configs.variant(64, True)
    assert name == "d64c" and over["causal"] and over["consumer_warpgroups"] == 3
    with pytest.raises(ValueError, match="head_dim must be one of"):
        attention_configs.variant(96, False)


@pytest.mark.parametrize("variant", sorted(fp8_configs.VARIANTS))
def test_every_fp8_variant_builds_and_checks_clean(variant):
    from dataclasses import replace

    from pipeline_mlir.kernels import fp8_gemm

    cfg = replace(fp8_gemm.FAST, **fp8_configs.VARIANTS[variant])
    k = fp8_gemm.build(cfg)
    assert k.smem_bytes <= 227 * 1024
    assert "wgmma" in k.to_ptx()       # through the protocol checker (on by default)


@pytest.mark.parametrize("name", sorted(attention_configs.VARIANTS))
def test_every_attention_variant_builds(name):
    from pipeline_mlir.kernels import attention_fwd

    cfg = attention_fwd.AttentionConfig(**attention_configs.VARIANTS[name])
    k = attention_fwd.build(cfg)
    meta = cfg.meta(k)
    assert meta["head_dim"] == attention_configs.VARIANTS[name]["head_dim"]
    assert meta["causal"] == name.split("_")[0].endswith("c")


def test_families_compile_on_demand_into_their_folders(tmp_path, monkeypatch):
    monkeypatch.setenv("PIPELINE_MLIR_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(kernel_cache, "_builders", {})
    found = kernel_cache.builder("fp8_gemm")
    assert found is not None and found.build.__module__ == "pipeline_mlir.kernels.fp8_gemm"
    over = fp8_configs.VARIANTS["promoted_128x128"]
    image, meta = kernel_cache.get("promoted_128x128", over, "e4m3-bf16", "sm_90a",
                                   kernel="fp8_gemm")
    assert image[:4] == b"\x7fELF" and meta["accumulation"] == "promoted"
    assert meta["layouts"]["a"]["dtype"] == "e4m3" and meta["layouts"]["c"]["dtype"] == "bf16"
    path = kernel_cache.entry_path("promoted_128x128", over, "e4m3-bf16", "sm_90a",
                                   kernel="fp8_gemm")
    assert path.startswith(str(tmp_path / "fp8_gemm")) and (tmp_path / "fp8_gemm").is_dir()
    # a second get is the cache's, not a build
    assert kernel_cache.load("promoted_128x128", over, "e4m3-bf16", "sm_90a",
                             kernel="fp8_gemm") == (image, meta)
    assert kernel_cache.get("promoted_128x128", over, "e4m3-bf16", "sm_90a",
                            kernel="fp8_gemm") == (image, meta)
    with pytest.raises(ValueError, match="unknown kernel family"):
        kernel_cache.entry_path("x", {}, "bf16", "sm_90a", kernel="softmax")


def test_a_family_without_a_builder_says_how_to_fill_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PIPELINE_MLIR_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(kernel_cache, "_builders", {"attention_fwd": None})
    name, over = attention_configs.variant(128, True)
    with pytest.raises(LookupError, match=r"no compiled attention variant d128c .*"
                       r"build-gemm-cache.py --all --kernel attention_fwd"):
        kernel_cache.get(name, over, "bf16", "sm_90a", kernel="attention_fwd")


def test_the_fp8_bias_is_its_own_cache_entry_and_none_changes_nothing():
    plain = fp8_configs.VARIANTS["fast_128x256"]
    assert fp8_configs.fused("fast_128x256", None) == ("fast_128x256", plain)
    name, over = fp8_configs.fused("fast_128x256", fp8_configs.BIAS)
    assert name == "fast_128x256_bias" and over == dict(plain, epilogue={"bias": "col"})
    assert kernel_cache.entry_path(name, over, "e4m3-bf16", "sm_90a", kernel="fp8_gemm") != \
        kernel_cache.entry_path("fast_128x256", plain, "e4m3-bf16", "sm_90a",
                                kernel="fp8_gemm")


@pytest.mark.parametrize("variant", sorted(fp8_configs.VARIANTS))
def test_every_fp8_variant_fuses_the_bias(variant):
    """scaled_mm's bias in the kernel: each variant of the table with
    fp8_configs.BIAS builds from its cache-key form, takes ``bias`` after
    the scales (bound by name), loads one bias pair per column pair in its
    epilogue after the scales' multiply, passes the checker and (where
    ptxas is on PATH) does not spill; without it the kernel is as before."""
    import json
    import re
    from dataclasses import replace

    from pipeline_mlir.kernels import fp8_gemm
    from test_gemm_epilogue import _ptxas_spills

    name, over = fp8_configs.fused(variant, fp8_configs.BIAS)
    image, meta = fp8_gemm.build_variant(json.loads(json.dumps(over)), "e4m3-bf16", "sm_90a")
    assert image[:4] == b"\x7fELF"
    assert [p[0] for p in meta["params"]][7:] == ["scale_a", "scale_b", "bias"]
    assert meta["epilogue"] == {"bias": "col"} and meta["name"].endswith("_bias")
    cfg = replace(fp8_gemm.FAST, **dict(over, epilogue=fp8_configs.BIAS))
    ptx = fp8_gemm.build(cfg).to_ptx()
    plain_ptx = fp8_gemm.build(replace(fp8_gemm.FAST, **fp8_configs.VARIANTS[variant])).to_ptx()
    bias_loads = len(re.findall(r"ld\.global\.v2\.b16", ptx))
    assert bias_loads == cfg.block_n // 8 and not re.search(r"ld\.global\.v2\.b16", plain_ptx)
    spills = _ptxas_spills(ptx)
    assert spills in (None, 0), f"{name}: {spills} bytes of spill stores"
