"""The FP8 forward's candidates on top of its no-LSE configurations
(benchmarks/attention/variants.py ``FP8_NOLSE_CANDIDATES``, run 13 of
docs/attention.md's "FP8 forward"), without a GPU.

Each candidate is the op's no-LSE configuration of its mode (full: 5 of 16
exponentials by the polynomial, causal: 3 of 16 packed as halves; both
with the row sum folded into P V) with the candidate's switches, and no
candidate is either of the op's configurations. Three consumer warpgroups
(192-query tiles, 160 registers each) with 64-key blocks compile without
spills or serialized wgmmas, keep the fold (m64n136k32 P V, two k-slices a
block), and pass the protocol checker and the simulator on a ragged GQA
shape. The GPU check is benchmarks/attention/run_attention_fp8.py (every
candidate against fp32 of the dequantized inputs)."""

import importlib.util
import os
import re
import sys
from dataclasses import replace

import pytest

from _example_checks import protocol_warnings, simulate, verify_protocol
from _ptxas import report as _ptxas_info

from pipeline_mlir.kernels import attention_fwd
from pipeline_mlir.kernels.attention_fwd import AttentionConfig
from pipeline_mlir.ops import attention_fp8_configs

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _bench():
    """benchmarks/attention/variants.py (it imports examples/attention_fwd.py)."""
    examples = os.path.join(ROOT, "examples")
    if examples not in sys.path:
        sys.path.insert(0, examples)
    spec = importlib.util.spec_from_file_location(
        "attention_bench_variants_fp8", os.path.join(ROOT, "benchmarks", "attention",
                                                     "variants.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def bench():
    return _bench()


def test_the_candidates_sit_on_the_no_lse_configuration_of_their_mode(bench):
    """``fp8cand d128[ causal] <name>`` of an ``FP8_NOLSE_CANDIDATES`` name is
    ``variant(128, causal, lse=False)`` with the candidate's switches (so one
    name times each mode on its own configuration; one that places P V's
    wait or P's conversion its own way with the mode's own cleared first:
    causal's hold since run 18, full's since run 19), and none is the op's
    (one the op has adopted for a mode is not tagged there: ``nhp8e3`` in
    both modes since run 19, ``nhp8e3p4`` causal's, ``nhp8e3p2`` full's
    since run 20; ``r18``, ``r18c`` and ``r17c``
    are the kernels before: full's without the hold on 6 of 16, causal's
    with it and without on 5 of 16)."""
    tags = {tag: cfg for tag, cfg, _ in bench.fp8_variants()}
    names = bench.FP8_NOLSE_CANDIDATES[128]
    assert {"w3n64", "ns2", "nst4"} <= set(names)
    for c in ("", " causal"):
        assert f"fp8cand d128{c} nhp8e3" not in tags and f"fp8cand d128{c} nhp8e3p5" in tags
    # Since run 20 full holds on 2 of 16: nhp8e3p4 is its kernel before.
    assert "fp8cand d128 nhp8e3p2" not in tags and "fp8cand d128 causal nhp8e3p4" not in tags
    assert tags["fp8cand d128 nhp8e3p4"].exp2_poly == 4 and "fp8cand d128 causal nhp8e3p2" in tags
    r17c, r18, r18c = (tags[f"fp8cand d128{t}"] for t in (" causal r17c", " r18", " causal r18c"))
    assert not (r17c.hold_pv_on_e4m3 or r17c.p_early) and r17c.exp2_poly == 5
    assert not (r18.hold_pv_on_e4m3 or r18.p_early) and r18.exp2_poly == 6
    assert r18c.hold_pv_on_e4m3 and r18c.p_early == 3 and r18c.exp2_poly == 5
    assert not tags["fp8cand d128 causal w3n64"].p_early        # 64-key blocks: 2 slices
    for causal in (False, True):
        c = " causal" if causal else ""
        nolse = AttentionConfig(**attention_fp8_configs.variant(128, causal, lse=False)[1],
                                dtype="e4m3")
        lse = AttentionConfig(**attention_fp8_configs.variant(128, causal)[1], dtype="e4m3")
        for name, over in names.items():
            # A hold replaces the mode's own (bench.HOLDS first), and so
            # does a candidate the mode's own does not fit.
            try:
                assert not bench.HOLDS.keys() & over.keys()
                want = replace(nolse, **over)
            except (AssertionError, ValueError):
                want = replace(nolse, **{**bench.HOLDS, **over})
            if want == nolse:   # adopted: the op's own, not timed twice
                assert f"fp8cand d128{c} {name}" not in tags
                continue
            cfg = tags[f"fp8cand d128{c} {name}"]
            assert cfg not in (nolse, lse)
            assert cfg == want and cfg.row_sum_fold
            assert cfg.smem_bytes() <= cfg.smem_limit


@pytest.fixture(scope="module")
def w3n64(bench):
    over = bench.FP8_NOLSE_CANDIDATES[128]["w3n64"]
    # On the full no-LSE configuration without its hold (p_early's 3
    # k-slices do not fit 64-key blocks), as the bundle builds it.
    cfg = bench.on_nolse(AttentionConfig(**attention_fp8_configs.variant(128, False, lse=False)[1],
                                         dtype="e4m3"), over)
    assert not cfg.p_early
    return cfg, attention_fwd.build(cfg)


def test_three_warpgroups_with_64_key_blocks_compile_without_spills(w3n64):
    """192 query rows (three m64 warpgroups), 64-key blocks: S m64n64 (two
    k32 wgmmas at d 128), P V the fold's m64n136k32 on P's two k-slices;
    ptxas fits each consumer in its 160 registers."""
    cfg, k = w3n64
    assert (cfg.block_m, cfg.kv_block, cfg.threads) == (192, 64, 512)
    ptx = k.to_ptx()
    assert len(re.findall(r"wgmma\.mma_async\.sync\.aligned\.m64n136k32\.f32\.e4m3", ptx)) == 4
    assert "m64n8k32" not in ptx and "m64n128k32" not in ptx
    assert re.findall(r"setmaxnreg\.inc\.sync\.aligned\.u32\s+(\d+)", ptx) == ["160"]
    info = _ptxas_info(ptx)
    if info is not None:
        assert not re.search(r"C75[12]\d", info), info
        assert re.findall(r"(\d+) bytes spill stores", info) == ["0"]


def test_three_warpgroups_check_and_simulate_clean(w3n64):
    """A ragged GQA shape: 4 query heads on 2 K/V heads, 200 queries (two
    tiles of 192 rows, the second mostly past the end), 300 keys."""
    text = str(w3n64[1].module)
    assert verify_protocol(text) == [] and protocol_warnings(text) == []
    (report,) = simulate(text, schedules=2, args={5: 1, 6: 4, 7: 2, 8: 200, 9: 300}).values()
    assert report.ok and report.schedules == 2, report
