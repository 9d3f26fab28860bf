"""The FP8 forward's run 20 candidates (docs/attention.md's "FP8 forward"),
without a GPU, in full attention: P V's wait held on the e4m3 registers of
P's first 3 k-slices with 3 or 2 of 16 exponentials by the polynomial on
f16 pairs (``nhp8e3p3``; ``nhp8e3p2``, the op's since run 20), the hold on
4 k-slices on 3 of 16 (``nhp8e4p3``), and the no-LSE kernels' hold on the
LSE configuration with 4 of 16 (``lhp8e3p4``).

Checked: each candidate is what its name says on top of its mode's
configuration (as the bundle builds it); no spills or serialized wgmmas;
in SASS (where nvdisasm is installed, ``NVDISASM=`` its path) the no-LSE
ones wait between the two halves of the softmax, each with fewer of 16 on
pairs in a loop with fewer instructions than run 19's kernel (761: every
f16 pair given back to MUFU drops more instructions than it adds), and the
LSE one waits after P's exponentials in fewer instructions than the LSE
op's loop (888, no hold, 8 of 16); the protocol checker and the simulator
accept ``nhp8e4p3`` (the op's kernel: test_attention_fp8_hold_share.py,
with the planted mistake, the hold left out)."""

import importlib.util
import os
import re
import sys
from dataclasses import replace

import pytest

from _example_checks import protocol_warnings, simulate, verify_protocol
from _ptxas import report as _ptxas_info
from test_attention_fp8_hold import _loop_instructions, _loop_ops_around_the_wait, _sass

from pipeline_mlir.kernels import attention_fwd
from pipeline_mlir.kernels.attention_fwd import AttentionConfig
from pipeline_mlir.ops import attention_fp8_configs

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# name -> (k-slices held, share of 16, LSE configuration)
CANDIDATES = {"nhp8e3p3": (3, 3, False), "nhp8e3p2": (3, 2, False),
              "nhp8e4p3": (4, 3, False), "lhp8e3p4": (3, 4, True)}


def _bench():
    examples = os.path.join(ROOT, "examples")
    if examples not in sys.path:
        sys.path.insert(0, examples)
    spec = importlib.util.spec_from_file_location(
        "attention_bench_variants_fp8_fewer", os.path.join(ROOT, "benchmarks", "attention",
                                                           "variants.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def cfgs():
    """The candidates on full attention's configurations, as the bundle
    builds them (variants.fp8_variants: on_nolse, or the LSE one's
    switches over NO_PH)."""
    bench = _bench()
    nolse = AttentionConfig(**attention_fp8_configs.variant(128, False, lse=False)[1],
                            dtype="e4m3")
    lse = AttentionConfig(**attention_fp8_configs.variant(128, False)[1], dtype="e4m3")
    out = {n: bench.on_nolse(nolse, bench.FP8_NOLSE_CANDIDATES[128][n])
           for n in CANDIDATES if not CANDIDATES[n][2]}
    out.update({n: replace(lse, **{**bench.NO_PH, **bench.FP8_CANDIDATES[128][n]})
                for n in CANDIDATES if CANDIDATES[n][2]})
    assert out["nhp8e3p2"] == nolse                     # taken in run 20
    return out


@pytest.fixture(scope="module")
def ptxs(cfgs):
    return {name: attention_fwd.build(cfg).to_ptx() for name, cfg in cfgs.items()}


def test_each_candidate_is_its_name_on_its_mode(cfgs):
    nolse = AttentionConfig(**attention_fp8_configs.variant(128, False, lse=False)[1],
                            dtype="e4m3")
    lse = AttentionConfig(**attention_fp8_configs.variant(128, False)[1], dtype="e4m3")
    for name, (slices, share, on_lse) in CANDIDATES.items():
        cfg = cfgs[name]
        assert (cfg.hold_pv_on_e4m3, cfg.p_early, cfg.hold_pv_last) == (True, slices, 0)
        assert (cfg.exp2_poly, cfg.exp2_poly_half, cfg.double_p) == (share, True, False)
        assert cfg.row_sum_mma is not on_lse and cfg.row_sum_fold is not on_lse
        base = lse if on_lse else nolse
        assert cfg.rescale_threshold == base.rescale_threshold
        assert cfg.exp2_poly_degree == base.exp2_poly_degree


@pytest.mark.parametrize("name", CANDIDATES)
def test_no_spills_and_the_wait_where_the_hold_puts_it(ptxs, name):
    info = _ptxas_info(ptxs[name])
    if info is None:
        pytest.skip("ptxas not installed")
    assert not re.search(r"C75[12]\d", info), info
    assert re.findall(r"(\d+) bytes spill stores", info) == ["0"]
    sass = _sass(ptxs[name])
    if sass is None:
        pytest.skip("nvdisasm not installed (NVDISASM= its path)")
    before, after = _loop_ops_around_the_wait(sass, "MUFU.EX2")
    if CANDIDATES[name][2]:
        # The LSE's row sum on the FMA pipe reads every exponential: ptxas
        # runs them all before the wait (the op's loop: 0 before it).
        assert before >= 70 and after <= 2, (before, after)
        assert _loop_instructions(sass) < 888, _loop_instructions(sass)
    else:
        assert before >= 37 and after >= 25, (before, after)
        assert _loop_ops_around_the_wait(sass, "F2FP")[0] >= 30
        assert _loop_instructions(sass) < 761, _loop_instructions(sass)


def test_fewer_of_16_fewer_instructions(ptxs):
    sass = {n: _sass(ptxs[n]) for n in ("nhp8e3p3", "nhp8e3p2")}
    if None in sass.values():
        pytest.skip("ptxas or nvdisasm not installed")
    assert _loop_instructions(sass["nhp8e3p2"]) < _loop_instructions(sass["nhp8e3p3"])


def test_the_hold_on_four_slices_checks_and_simulates_clean(cfgs):
    text = str(attention_fwd.build(cfgs["nhp8e4p3"]).module)
    assert verify_protocol(text) == [] and protocol_warnings(text) == []
    (report,) = simulate(text, schedules=1, args={5: 1, 6: 4, 7: 2, 8: 200, 9: 300}).values()
    assert report.ok and report.schedules == 1, report
