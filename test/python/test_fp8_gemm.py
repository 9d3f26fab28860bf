"""The FP8 GEMM (examples/fp8_gemm.py), deviceless: what the e4m3 layouts
make of the kernel (k32 wgmma, 128-element k-blocks, tx bytes), the two
accumulation modes in the lowered PTX, the scales in the signature, the
configuration checks, the simulator on the promoted mainloop, and the
host's error bound. The GPU check is test/gpu/test_gpu.py::
test_fp8_gemm_matches_the_dequantized_reference; the lit test
test/Conversion/PipelineToNVVM/kernels/fp8_gemm.test pins the PTX through
ptxas."""

import os
import re
import sys
from dataclasses import replace

import pytest

EXAMPLES = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
sys.path.insert(0, EXAMPLES)
import fp8_gemm  # noqa: E402
import fp8_gemm_host  # noqa: E402
import hopper_gemm  # noqa: E402
import hopper_gemm_host  # noqa: E402


def test_layouts_follow_from_e4m3():
    a, b, c = fp8_gemm.FAST.layouts()
    # One 128-byte swizzle span of K = 128 e4m3; 4 wgmma of k32 per k-block.
    assert (a.k, a.k_per_instruction, a.k_slices) == (128, 32, 4)
    # Same bytes per stage as the 16-bit kernel's 128 x 64 + 256 x 64 bf16.
    assert a.bytes + b.bytes == 128 * 128 + 256 * 128 == 49152
    assert (c.dtype, c.box) == ("bf16", (64, 64))


@pytest.mark.parametrize("name", sorted(fp8_gemm.CONFIGS))
def test_variant_builds_checks_and_lowers(name):
    cfg = fp8_gemm.CONFIGS[name]
    k = fp8_gemm.build(cfg)
    k.verify()
    ptx = k.to_ptx()
    shape = f"m64n{cfg.block_n}k32.f32.e4m3.e4m3"
    # 4 wgmma per k-block: fast issues the first k-block outside the loop.
    count = 8 if cfg.accumulation == "fast" else 4
    assert ptx.count(f"wgmma.mma_async.sync.aligned.{shape}") == count
    # Promoted: scale-d = 0 on the first wgmma of each k-block, N/2 fp32 adds.
    assert ptx.count("setp.ne.b32 p, 0, 0;") == (1 if cfg.accumulation == "promoted" else 0)
    adds = len(re.findall(r"add\.rn\.f32", ptx))
    assert adds == (cfg.block_n // 2 if cfg.accumulation == "promoted" else 0)
    # The two scales, read once; every output multiplied before bf16.
    assert ptx.count("ld.global.b32") == 2
    assert len(re.findall(r"mul\.rn\.f32", ptx)) == 1 + cfg.block_n // 2
    assert k.smem_bytes <= hopper_gemm.SMEM_LIMIT
    meta = hopper_gemm_host.meta_of(cfg, k)
    assert meta["signature"][-2:] == ["ptr:4", "ptr:4"]
    assert meta["layouts"]["a"]["dtype"] == "e4m3"


def test_promoted_mainloop_in_the_simulator():
    """The promoted mainloop releases each stage right after wait_group(0)
    (no lag): the simulator runs it to the end, ragged K included."""
    from pipeline_mlir.sim.cli import main as sim_main

    k = fp8_gemm.build(fp8_gemm.PROMOTED)
    path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"fp8_{os.getpid()}.mlir")
    with open(path, "w") as f:
        f.write(str(k))
    try:
        assert sim_main([path, "--arg", "4=256", "--arg", "5=384", "--arg", "6=520",
                         "--schedules", "2"]) == 0
    finally:
        os.remove(path)


@pytest.mark.parametrize("cfg, match", [
    (replace(fp8_gemm.FAST, dtype="bf16", out_dtype=""), "dtype must be an 8-bit type"),
    (replace(fp8_gemm.FAST, scaled=False), "takes per-tensor scales"),
    (replace(fp8_gemm.FAST, out_dtype="e4m3"), "takes per-tensor scales"),
    (replace(fp8_gemm.FAST, accumulation="slow"), "accumulation must be one of"),
    (replace(fp8_gemm.PROMOTED, out_dtype="f32"), "output dtype must be 'bf16' or 'f16'"),
    # 3 C boxes: passes of 2 and 1 are allowed (tiles cut to the shape), 4 leave one empty
    (replace(fp8_gemm.PROMOTED_192, epilogue_passes=4), "3 C boxes do not split into 4"),
])
def test_bad_configurations_are_refused(cfg, match):
    with pytest.raises(ValueError, match=match):
        fp8_gemm.build(cfg)


def test_error_bound():
    """The bound of fp8_gemm_host (its docstring derives it): bf16 output
    rounding plus K / 32 truncating accumulator steps (fast) or 4 steps per
    k-block and fp32 promotions (promoted)."""
    assert fp8_gemm_host.error_bound(8192, "fast") == 2 ** -8 + 256 * 2 ** -13
    assert fp8_gemm_host.error_bound(8192, "promoted") == 2 ** -8 + 4 * 2 ** -13 + 64 * 2 ** -24
    assert fp8_gemm_host.error_bound(1040, "fast") == 2 ** -8 + 33 * 2 ** -13
    # A lost k-block shows at every K the suites and the benchmark check.
    for k in (16, 128, 256, 520, 1024, 1040, 2048, 4096, 4112, 8192):
        for mode in ("fast", "promoted"):
            assert fp8_gemm_host.bound_detects_a_k_block(k, mode), (k, mode)
    # ... but not for a much larger K with fast accumulation (the bound grows
    # linearly): the check says so rather than passing silently.
    assert not fp8_gemm_host.bound_detects_a_k_block(65536, "fast")
    with pytest.raises(ValueError, match="accumulation must be"):
        fp8_gemm_host.error_bound(128, "exact")


def test_the_host_bound_reads_its_k_geometry_from_the_kernel_layout():
    """The host's bound is the kernel's A tile's: K per wgmma and per
    k-block come from the OperandLayout the kernel is built from (the
    launcher's ``layouts['a']``), and the module's default layout has the
    K geometry of every variant's kernel."""
    from pipeline_mlir.ops import fp8_configs

    default = fp8_gemm_host.E4M3_A
    for name, overrides in fp8_configs.VARIANTS.items():
        a = replace(fp8_gemm.FAST, **overrides).layouts()[0]
        assert (a.dtype, a.k, a.k_per_instruction) == (
            default.dtype, default.k, default.k_per_instruction), name
    # A kernel of another K geometry gets its own bound: e5m2 in a 64-byte
    # swizzle has 64-element k-blocks, so promotion happens twice as often.
    narrow = hopper_gemm.GemmConfig(dtype="e4m3", swizzle=64).layouts()[0]
    assert narrow.k == 64
    assert fp8_gemm_host.error_bound(8192, "promoted", narrow) == \
        2 ** -8 + 2 * 2 ** -13 + 128 * 2 ** -24
    gemm = fp8_gemm_host.Fp8Gemm.__new__(fp8_gemm_host.Fp8Gemm)
    gemm.meta, gemm.layouts = {"accumulation": "promoted"}, {"a": narrow}
    assert gemm.error_bound(8192) == fp8_gemm_host.error_bound(8192, "promoted", narrow)


def test_quantize_takes_its_range_from_the_dtype_table():
    torch = pytest.importorskip("torch")
    from pipeline_mlir.layout import FP8_MAX

    x = torch.tensor([[1.0, -3.0], [0.5, 2.0]])
    q, scale = fp8_gemm_host.quantize(x, fp8_gemm.FAST.layouts()[0])
    assert q.dtype == torch.float8_e4m3fn
    assert scale.item() == pytest.approx(3.0 / FP8_MAX["e4m3"])
    q5, _ = fp8_gemm_host.quantize(x, "e5m2")
    assert q5.dtype == torch.float8_e5m2


def test_the_pick_takes_a_cluster_tile_where_k_rows_are_not_whole_l2_sectors():
    """fp8_configs' rule uses the 16-bit model's misalignment predicate and
    factor (one fact, in gemm_configs): where a row of K e4m3 values is not
    a whole number of 32-byte sectors the one-CTA tiles pay MISALIGNED_K,
    so the rule takes a 2-CTA cluster tile (measured: 3008 x 2064 x 4112
    fast ran 0.889x cuBLASLt on 128x192, 1.152x on 128x192c2)."""
    from pipeline_mlir.ops import fp8_configs, gemm_configs

    assert fp8_configs.misaligned_k is gemm_configs.misaligned_k
    assert fp8_configs.MISALIGNED_K is gemm_configs.MISALIGNED_K
    assert gemm_configs.misaligned_k(4112, element_bytes=1)          # 4112 % 32 = 16
    assert not gemm_configs.misaligned_k(4128, element_bytes=1)      # sectors whole
    assert not gemm_configs.misaligned_k(4112)                       # 8224 bytes in 16-bit
    for m, n in ((3008, 2064), (4096, 4096), (2048, 14336), (16384, 1024)):
        for acc in ("fast", "promoted"):
            picked = fp8_configs.choose(m, n, 4112, acc)
            assert fp8_configs.cluster_of(picked) == 2, (m, n, acc, picked)
    # K a multiple of 32: the one-CTA tile where the pairs would waste a wave
    assert fp8_configs.choose(3008, 2064, 4096, "fast") == "fast_128x192"
    assert fp8_configs.estimate("fast_128x192", 3008, 2064, 4112, 132) == pytest.approx(
        gemm_configs.MISALIGNED_K * fp8_configs.estimate("fast_128x192", 3008, 2064, 4096, 132))


def test_the_rule_and_the_tuned_table_name_variants_of_their_mode():
    from pipeline_mlir.ops import fp8_configs

    for v in fp8_configs.RULE_VARIANTS:
        assert v in fp8_configs.VARIANTS and v in fp8_configs.EFFICIENCY, v
    for (m, n, k, acc), v in fp8_configs.TUNED.items():
        assert fp8_configs.VARIANTS[v]["accumulation"] == acc, (m, n, k, v)
        assert fp8_configs.choose(m, n, k, acc) == v
    for v, over in fp8_configs.VARIANTS.items():
        assert v.startswith(over["accumulation"] + "_")
        bm, bn = fp8_configs.tile(v)
        assert v.endswith(f"{bm}x{bn}" + ("c2" if fp8_configs.cluster_of(v) == 2 else "")
                          + ("o" if over.get("promotion_overlap") else ""))


@pytest.mark.parametrize("variant", ["fast_128x256c2", "fast_128x192c2", "promoted_128x192c2",
                                     "promoted_128x128c2", "promoted_192x128"])
def test_cluster_and_192_row_variants_lower_without_spills(variant):
    """The 2-CTA variants multicast B to the pair (one multicast load, a
    cluster of 2 in the PTX); the 192-row one runs three consumer
    warpgroups in 128 entry registers a thread. None spills (ptxas -v,
    where ptxas is on PATH); their bias builds are test_ops_tables'."""
    from pipeline_mlir.ops import fp8_configs
    from test_gemm_epilogue import _ptxas_spills

    cfg = replace(fp8_gemm.FAST, **fp8_configs.VARIANTS[variant])
    k = fp8_gemm.build(cfg)
    ptx = k.to_ptx()
    assert k.smem_bytes <= hopper_gemm.SMEM_LIMIT
    clustered = fp8_configs.cluster_of(variant) == 2
    assert ptx.count("multicast::cluster") == (1 if clustered else 0)
    assert (".reqnctapercluster 2, 1, 1" in ptx) == clustered
    assert f"m64n{cfg.block_n}k32.f32.e4m3.e4m3" in ptx
    assert cfg.threads == 128 * (1 + cfg.consumer_warpgroups)
    assert _ptxas_spills(ptx) in (None, 0)


OVERLAPPED = ["promoted_128x128o", "promoted_128x128c2o"]


@pytest.mark.parametrize("variant", OVERLAPPED)
def test_overlapped_promotion_lowers_without_spills_or_serialized_wgmma(variant):
    """``promotion_overlap`` (kernels/promoted_mainloop.py): k-block kb's
    wgmma is issued before k-block kb-1's partial is added, so the loop
    keeps one group in flight (wait_group 1) and two partials beside the
    total: 192 fp32 a thread at N 128, in the consumers' 232 registers
    without a spill, and no register an in-flight wgmma writes is read or
    moved (ptxas would say it serialized the wgmma)."""
    from pipeline_mlir.ops import fp8_configs
    from test_attention_pv_wait import _ptxas_info

    cfg = replace(fp8_gemm.FAST, **fp8_configs.VARIANTS[variant])
    ptx = fp8_gemm.build(cfg).to_ptx()
    shape = "m64n128k32.f32.e4m3.e4m3"
    # 4 wgmma per k-block: the first k-block, the loop's two, the tail's one.
    assert ptx.count(f"wgmma.mma_async.sync.aligned.{shape}") == 16
    assert len(re.findall(r"wgmma\.wait_group\.sync\.aligned\s+1;", ptx)) == 3
    assert len(re.findall(r"wgmma\.wait_group\.sync\.aligned\s+0;", ptx)) == 2
    # scale-d = 0 on each k-block's first wgmma; N/2 adds per promotion
    # (the loop's two, the tail's two and the even count's one).
    assert ptx.count("setp.ne.b32 p, 0, 0;") == 4
    assert len(re.findall(r"add\.rn\.f32", ptx)) == 5 * cfg.block_n // 2
    info = _ptxas_info(ptx)
    if info is not None:
        assert "serialized" not in info, info
        assert re.search(r" 0 bytes spill stores", info), info


def test_overlap_is_promoted_only_and_its_twin_is_the_plain_tile():
    from pipeline_mlir.ops import fp8_configs

    with pytest.raises(ValueError, match="promotion_overlap overlaps the promoted"):
        fp8_gemm.build(replace(fp8_gemm.FAST, promotion_overlap=True))
    assert fp8_configs.plain_twin("promoted_128x128o") == "promoted_128x128"
    assert fp8_configs.plain_twin("promoted_128x128c2o") == "promoted_128x128c2"
    assert fp8_configs.plain_twin("promoted_128x128") is None
    # Off by default: the name, and so every existing variant's kernel, unchanged.
    assert "overlap" not in fp8_gemm.PROMOTED.name
    assert replace(fp8_gemm.PROMOTED, promotion_overlap=True).name == \
        fp8_gemm.PROMOTED.name + "_overlap"


def _overlapped_kernel_text(monkeypatch, mainloop=None):
    from pipeline_mlir.kernels import hopper_gemm as library_gemm

    if mainloop is not None:
        monkeypatch.setattr(library_gemm, "OverlappedPromotion", mainloop)
    return str(fp8_gemm.build(replace(fp8_gemm.PROMOTED, promotion_overlap=True)).module)


def _released_while_read():
    """The planted mistake: after wait_group(1), the stage of the k-block
    just issued is released instead of the previous one's (its group is
    still in flight: TMA may overwrite operands the wgmma reads)."""
    from pipeline_mlir.kernel import wgmma
    from pipeline_mlir.kernels import promoted_mainloop

    class ReleasedWhileRead(promoted_mainloop.OverlappedPromotion):
        def retire_previous(self, done, total, read, release):
            wgmma.wait_group(1)
            self.ring.consumer_release(read)        # wrong: kb's group reads it
            total += promoted_mainloop.pinned(done)
            total.set(promoted_mainloop.pinned(total))
            read.advance()
            release.advance()

    return ReleasedWhileRead


# K = 128, 256, 384, 520: one k-block (no loop, no tail), two (the tail
# only), three (one pair) and five (two pairs).
@pytest.mark.parametrize("k", [128, 256, 384, 520])
def test_overlapped_promotion_checks_and_simulates_clean(monkeypatch, k):
    from _example_checks import protocol_warnings, simulate, verify_protocol

    text = _overlapped_kernel_text(monkeypatch)
    if k == 128:
        assert verify_protocol(text) == [] and protocol_warnings(text) == []
    (report,) = simulate(text, schedules=2, args={4: 256, 5: 384, 6: k}).values()
    assert report.ok and report.schedules == 2, report


def test_overlapped_promotion_releasing_the_stage_in_flight_is_rejected(monkeypatch):
    from _example_checks import messages, simulate, verify_protocol

    text = _overlapped_kernel_text(monkeypatch, _released_while_read())
    errors = verify_protocol(text)
    assert errors and all("may still read it asynchronously" in e for e in errors), errors
    (report,) = simulate(text, schedules=2, args={4: 256, 5: 384, 6: 520}).values()
    assert not report.ok
    assert "still read that stage asynchronously" in messages(report)["async-read"]


# --- split-K (fp8_configs.SPLIT_VARIANTS) -------------------------------------------

SPLIT_BUILDS = ["fast_128x256_sk4", "fast_128x128_sk2", "promoted_128x128o_sk3"]


def _split_cfg(variant):
    from pipeline_mlir.ops import fp8_configs

    return fp8_gemm.split_config(replace(fp8_gemm.FAST, **fp8_configs.overrides(variant)))


@pytest.mark.parametrize("variant", SPLIT_BUILDS)
def test_split_variant_scales_each_partial_once_and_does_not_spill(variant):
    """A split-K FP8 unit stores its fp32 accumulator times scale_a *
    scale_b into its workspace slice: the scales read once, one product of
    the two, one multiplication per accumulator value (N / 2 a thread) and
    no other, one 8-byte store per value pair (no TMA store, no C buffer).
    The reduction then takes no scale (below). ptxas -v: no spills, no
    serialized wgmma (the overlapped promotion's registers beside the
    store's addresses)."""
    from pipeline_mlir.ops import fp8_configs
    from test_attention_pv_wait import _ptxas_info

    cfg = _split_cfg(variant)
    k = fp8_gemm.build(cfg)
    k.verify()
    ptx = k.to_ptx()
    assert cfg.c_dtype == "f32" and cfg.epilogue_bytes() == 0
    assert cfg.name.endswith(f"_sk{fp8_configs.splits_of(variant)}") and "bf16" not in cfg.name
    assert ptx.count("ld.global.b32") == 2
    assert len(re.findall(r"mul\.rn\.f32", ptx)) == 1 + cfg.block_n // 2
    assert ptx.count("st.global.v2.b32") == cfg.block_n // 4
    assert "cp.async.bulk.tensor.2d.global.shared" not in ptx
    assert f"m64n{cfg.block_n}k32.f32.e4m3.e4m3" in ptx
    assert [n for n, _ in k.params] == ["a", "b", "c", "c_ptr", "m", "n", "k",
                                        "scale_a", "scale_b"]
    info = _ptxas_info(ptx)
    if info is not None:
        assert "serialized" not in info, info
        assert re.search(r" 0 bytes spill stores", info), info


def test_split_reduction_takes_no_scale():
    """The reduction of FP8 partials is the 16-bit GEMM's: (ws, out,
    groups, n) and no multiplication (the partials carry the scales; a
    second scaling would square them)."""
    from pipeline_mlir.kernels import splitk_reduce

    k = splitk_reduce.build(splitk_reduce.ReduceConfig(splits=3, out_dtype="bf16"))
    assert [n for n, _ in k.params] == ["ws", "out", "groups", "n"]
    assert not re.findall(r"\bmul\.(rn\.)?f32", k.to_ptx())


@pytest.mark.parametrize("variant, k", [("fast_128x128_sk2", 384),
                                        ("promoted_128x128o_sk3", 640),
                                        ("promoted_128x128o_sk3", 256)])
def test_split_variant_checks_and_simulates_clean(variant, k):
    """The protocol checker finds nothing; pipeline-sim runs splits of one
    and two K blocks (K = 384 in 2: 1 + 2; 640 in 3: 1 + 2 + 2; 256 in 3:
    two splits of one block, the host's min(S, K blocks)) to the end."""
    from _example_checks import protocol_warnings, simulate, verify_protocol

    text = str(fp8_gemm.build(_split_cfg(variant)).module)
    assert verify_protocol(text) == [] and protocol_warnings(text) == []
    (report,) = simulate(text, schedules=2, args={4: 256, 5: 384, 6: k}).values()
    assert report.ok and report.schedules == 2, report


def test_split_variant_meta_and_one_kernel_for_both_outputs():
    from pipeline_mlir.ops import fp8_configs

    over = fp8_configs.overrides("fast_128x128_sk2")
    image, meta = fp8_gemm.build_variant(over, "e4m3-bf16", "sm_90a")
    assert meta["split_k"] == 2 and meta["layouts"]["c"]["dtype"] == "f32"
    assert meta["accumulation"] == "fast" and meta["layouts"]["a"]["dtype"] == "e4m3"
    _, f16 = fp8_gemm.build_variant(over, "e4m3-f16", "sm_90a")
    assert f16["name"] == meta["name"]        # the reduction picks the output type
    _, plain = fp8_gemm.build_variant(fp8_configs.VARIANTS["fast_128x128"], "e4m3-bf16",
                                      "sm_90a")
    assert "split_k" not in plain and plain["layouts"]["c"]["dtype"] == "bf16"


def test_split_variants_are_named_by_tile_and_refuse_a_bias():
    from pipeline_mlir.ops import fp8_configs

    assert set(fp8_configs.SPLIT_VARIANTS) == {
        f"{t}_sk{s}" for mode in ("fast", "promoted")
        for t in fp8_configs.SPLIT_TILES[mode] for s in fp8_configs.SPLITS}
    for v, over in fp8_configs.SPLIT_VARIANTS.items():
        tile, s = v.split("_sk")
        assert over == dict(fp8_configs.VARIANTS[tile], split_k=int(s))
        assert fp8_configs.splits_of(v) == int(s) and fp8_configs.tile(v) == \
            fp8_configs.tile(tile)
        assert fp8_configs.cluster_of(v) == 1
        with pytest.raises(ValueError, match="split-K variant, built without a fused"):
            fp8_configs.fused(v, fp8_configs.BIAS)
    assert fp8_configs.fused("fast_128x128_sk2", None) == (
        "fast_128x128_sk2", fp8_configs.SPLIT_VARIANTS["fast_128x128_sk2"])


@pytest.mark.parametrize("acc", ["fast", "promoted"])
def test_the_rule_does_not_split_as_measured(acc):
    """The split variants measured slower than the plain tiles where the
    model would take them (fp8_configs.SPLIT_K_IN_RULE): the op's pick
    keeps the plain tile while the model still answers a split."""
    from pipeline_mlir.ops import fp8_configs

    assert fp8_configs.SPLIT_K_IN_RULE is False
    for m, n, k in [(64, 4096, 4096), (96, 8192, 8192)]:
        v = fp8_configs.choose(m, n, k, acc)
        assert fp8_configs.splits_of(v) == 1, (m, n, k, v)
        assert v == fp8_configs.choose(m, n, k, acc, split=False)
    plain = fp8_configs.choose(64, 4096, 4096, acc)
    assert fp8_configs.splits_of(fp8_configs.choose_split(64, 4096, 4096, acc, 132, plain)) == 4


@pytest.mark.parametrize("acc", ["fast", "promoted"])
def test_the_pick_splits_where_the_tiles_leave_sms_idle(acc, monkeypatch):
    """The 16-bit GEMM's rule (gemm_configs.choose_split, the FP8 K seen as
    K / 2): 96 x 8192 x 8192 fast (64 tiles of 128x128 on 132 SMs) and 64
    x 4096 x 4096 (32) split; shapes whose tiles fill the SMs do not, nor
    does a call with a bias (split=False), nor a TUNED shape; a split
    leaves each unit at least MIN_SPLIT_K_BLOCKS and fits one wave."""
    import math

    from pipeline_mlir.ops import fp8_configs, gemm_configs

    monkeypatch.setattr(fp8_configs, "SPLIT_K_IN_RULE", True)
    assert fp8_configs.choose(64, 4096, 4096, acc) == \
        ("fast_128x128_sk4" if acc == "fast" else "promoted_128x128o_sk4")
    # 96 x 8192 x 8192: the plain pick is 64x128 in both modes now (128
    # tiles, one wave), so the split model declines.
    assert fp8_configs.choose(96, 8192, 8192, acc) == f"{acc}_64x128"
    for m, n, k in [(4096, 4096, 4096), (2048, 8192, 28672), (1008, 1040, 1056),
                    (16384, 1024, 4096), (64, 8, 16)]:
        assert fp8_configs.splits_of(fp8_configs.choose(m, n, k, acc)) == 1, (m, n, k)
    for m, n, k in [(96, 8192, 8192), (64, 4096, 4096), (128, 8192, 8192)]:
        plain = fp8_configs.choose(m, n, k, acc, split=False)
        assert fp8_configs.splits_of(plain) == 1
        v = fp8_configs.choose(m, n, k, acc)
        s = fp8_configs.splits_of(v)
        if s > 1:
            bm, bn = fp8_configs.tile(v)
            assert math.ceil(m / bm) * math.ceil(n / bn) * s <= 132
            assert math.ceil(k / 128) // s >= gemm_configs.MIN_SPLIT_K_BLOCKS
            assert fp8_configs.VARIANTS[v.split("_sk")[0]]["accumulation"] == acc
    assert fp8_configs.choose(512, 4096, 4096, "fast") == "fast_64x256"      # TUNED


@pytest.mark.parametrize("m, n, k, fast, promoted", [
    # 128x128 leaves half the SMs idle (64 tiles on 132): 64x128 fills them
    (96, 8192, 8192, "fast_64x128", "promoted_64x128"),
    (128, 8192, 8192, "fast_64x128", "promoted_64x128"),
    (32, 8192, 8192, "fast_64x128", "promoted_64x128"),
    (200, 4096, 4096, "fast_64x128", "promoted_64x128"),
    (128, 4096, 4096, "fast_64x128", "promoted_64x128"),
    # 128 tiles of 128x128 already fill a wave: 64x128 would take two
    (256, 8192, 8192, "fast_128x128", "promoted_128x128o"),
    (4096, 4096, 4096, "fast_128x256", "promoted_128x128o"),
])
def test_a_short_m_takes_the_64_row_tile_where_it_fills_the_sms(m, n, k, fast, promoted):
    """The wave rule over both modes' 64-row tiles (measured, H200, in one
    process with cuBLASLt: fast_64x128 1.29x / 1.11x at 96 x 8192 x 8192
    where fast_128x128 ran 1.13x / 0.96x, 1.67x against 1.34x at 128 x
    8192 x 8192, a tie at 256 x 8192 x 8192; docs/gemm.md)."""
    from pipeline_mlir.ops import fp8_configs

    assert fp8_configs.choose(m, n, k, "fast") == fast
    assert fp8_configs.choose(m, n, k, "promoted") == promoted


def test_the_pick_is_the_16_bit_rule_not_a_copy(monkeypatch):
    """fp8_configs asks gemm_configs.choose_split (its tiles as 16-bit tile
    names, K / 2, its split values and DRAM rate), and takes its answer."""
    from pipeline_mlir.ops import fp8_configs, gemm_configs

    calls = []

    def rule(m, n, k, sms, plain, tiles, splits, dram_bytes_per_s):
        calls.append((m, n, k, sms, plain, tiles, splits, dram_bytes_per_s))
        return None

    monkeypatch.setattr(fp8_configs, "SPLIT_K_IN_RULE", True)
    monkeypatch.setattr(gemm_configs, "choose_split", rule)
    assert fp8_configs.choose(96, 8192, 8192, "fast") == "fast_64x128"
    assert calls == [(96, 8192, 4096, 132, "64x128", ("128x256", "128x128"), (2, 3, 4),
                      fp8_configs.DRAM_BYTES_PER_S)]
    monkeypatch.setattr(gemm_configs, "choose_split", lambda *a, **kw: "128x256_sk3")
    assert fp8_configs.choose(96, 8192, 8192, "fast") == "fast_128x256_sk3"


class _Stream:
    """What the split-K host needs of a tensor (no torch here)."""

    def __init__(self, shape, dtype="bf16", base=0x7000_0000):
        self.shape, self.dtype, self.base, self.device = tuple(shape), dtype, base, "cuda:0"

    def data_ptr(self):
        return self.base

    def is_contiguous(self):
        return True


def test_split_host_gives_the_scales_to_the_gemm_and_counts_128_k_blocks(monkeypatch):
    """Fp8SplitKGemm: the scales go to the GEMM (with slice 0 of the
    workspace as C), nothing to the reduction; a K of 256 (two e4m3 K
    blocks) runs 2 of the variant's 3 splits and reduces 2 (the 16-bit
    k-block of 64 would have said 3, leaving a slice unwritten)."""
    from pipeline_mlir.layout import OperandLayout
    from pipeline_mlir.ops import fp8_gemm_host, splitk_host

    log = []

    class Gemm:
        meta = {"name": "gemm_e4m3_sk3", "split_k": 3}
        layouts = {"a": OperandLayout.one_box("e4m3", "K", 128, 128)}
        device = type("D", (), {"ordinal": 0})()

        def launch(self, a, b, c, extra, stream, sync):
            log.append(("gemm", c, extra, stream))

    class Reduce:
        def __init__(self, splits):
            self.splits = splits

        def launch(self, ws, out, groups, n, extra, stream, sync):
            log.append(("reduce", self.splits, ws, out, extra, stream))

    def workspace(a, splits, m, n, stream):
        ws = _Stream((splits, m, n), "f32")
        return ws, _Stream((m, n), "f32", ws.base)

    monkeypatch.setattr(splitk_host, "workspace", workspace)
    g = fp8_gemm_host.Fp8SplitKGemm(Gemm(), Reduce, "bf16")
    a, w, out = _Stream((96, 256), "e4m3"), _Stream((512, 256), "e4m3"), _Stream((96, 512))
    scales = {"scale_a": object(), "scale_b": object()}
    assert g.launch(a, w, out, scales, 7, False) is out
    (_, c, gemm_extra, gs), (_, splits, ws, rout, rextra, rs) = log
    assert gemm_extra is scales and rextra == () and (gs, rs) == (7, 7) and rout is out
    assert splits == 2 and ws.shape == (2, 96, 512) and c.data_ptr() == ws.data_ptr()
    log.clear()
    g.launch(_Stream((96, 1024), "e4m3"), _Stream((512, 1024), "e4m3"), out, scales, 7,
             False)
    assert log[1][1] == 3
    with pytest.raises(ValueError, match="a split-K variant takes no bias"):
        g(a, w, None, None, bias=object())


def test_the_cache_builds_split_variants_their_reductions_and_no_split_bias():
    import argparse
    import importlib.util

    from pipeline_mlir.ops import fp8_configs

    spec = importlib.util.spec_from_file_location(
        "build_gemm_cache", os.path.join(EXAMPLES, "..", "scripts", "build-gemm-cache.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    found = mod.wanted(argparse.Namespace(kernel=["fp8_gemm"], all=True, shape=[], sms=132,
                                          dtype=["bf16", "f16"], epilogues=False))
    names = {(k, v, d) for k, v, _, d in found}
    for v in fp8_configs.SPLIT_VARIANTS:
        assert {("fp8_gemm", v, "e4m3-bf16"), ("fp8_gemm", v, "e4m3-f16")} <= names
        assert not any(n.startswith(v + "_") for _, n, _ in names)     # no bias entry
    assert {("splitk_reduce", f"sum{s}", d) for s in range(1, 5) for d in ("bf16", "f16")} \
        <= names
    assert ("fp8_gemm", "fast_128x128_bias", "e4m3-bf16") in names
    shaped = mod.wanted(argparse.Namespace(kernel=["fp8_gemm"], all=False,
                                           shape=[(64, 4096, 4096)], sms=132,
                                           dtype=["bf16"], epilogues=False))
    assert {v for _, v, _, _ in shaped} >= {"fast_128x128_sk4", "fast_64x128",
                                           "fast_64x128_bias", "sum4"}
