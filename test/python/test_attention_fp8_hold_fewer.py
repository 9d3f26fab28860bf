"""The FP8 forward's run 20 candidates (docs/attention.md's "FP8 forward"),
without a GPU: P V's wait held on the e4m3 registers of P's first 3
k-slices with 3 or 2 of 16 exponentials by the polynomial on f16 pairs
(``nhp8e3p3``, ``nhp8e3p2``), the hold on 4 k-slices on 3 of 16
(``nhp8e4p3``), and the no-LSE kernels' hold on the LSE configuration with
4 of 16 (``lhp8e3p4``), in full attention.

Checked: each candidate is what its name says on top of its mode's
configuration; no spills or serialized wgmmas; in SASS (where nvdisasm is
installed, ``NVDISASM=`` its path) the no-LSE ones wait between the two
halves of the softmax, each share fewer of 16 a loop with fewer
instructions than the op's (761: every f16 pair given back to MUFU drops
more instructions than it adds), and the LSE one waits after P's
exponentials in fewer instructions than the LSE op's loop (888, no hold on
8 of 16); without the hold (the planted mistake) the wait before every
exponential again; the protocol checker and the simulator accept ``nhp8e3p2``."""

import importlib.util
import os
import re
import sys

import pytest

from _example_checks import protocol_warnings, simulate, verify_protocol
from _ptxas import report as _ptxas_info
from test_attention_fp8_hold import _loop_instructions, _loop_ops_around_the_wait, _sass

from pipeline_mlir.kernels import attention_fwd
from pipeline_mlir.kernels.attention_fwd import AttentionConfig, mainloop
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
def tags():
    return {tag: cfg for tag, cfg, _ in _bench().fp8_variants()
            if tag.startswith("fp8cand d128 ") and tag.split()[-1] in CANDIDATES}


@pytest.fixture(scope="module")
def ptxs(tags):
    return {name: attention_fwd.build(tags[f"fp8cand d128 {name}"]).to_ptx()
            for name in CANDIDATES}


def test_each_candidate_is_its_name_on_its_mode(tags):
    nolse = AttentionConfig(**attention_fp8_configs.variant(128, False, lse=False)[1],
                            dtype="e4m3")
    lse = AttentionConfig(**attention_fp8_configs.variant(128, False)[1], dtype="e4m3")
    for name, (slices, share, on_lse) in CANDIDATES.items():
        cfg = tags[f"fp8cand d128 {name}"]
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


def test_fewer_of_16_fewer_instructions_and_unheld_waits_first(ptxs, tags, monkeypatch):
    """2 of 16 runs fewer instructions than 3; the planted mistake, 2 of 16
    without the hold: ptxas waits before every exponential again."""
    sass = {n: _sass(ptxs[n]) for n in ("nhp8e3p3", "nhp8e3p2")}
    if None in sass.values():
        pytest.skip("ptxas or nvdisasm not installed")
    assert _loop_instructions(sass["nhp8e3p2"]) < _loop_instructions(sass["nhp8e3p3"])
    monkeypatch.setattr(mainloop, "hold_after_values", lambda values, sign_bits=None: None)
    unheld = _sass(attention_fwd.build(tags["fp8cand d128 nhp8e3p2"]).to_ptx())
    assert _loop_ops_around_the_wait(unheld, "MUFU.EX2")[0] == 0


def test_two_of_16_checks_and_simulates_clean(tags):
    text = str(attention_fwd.build(tags["fp8cand d128 nhp8e3p2"]).module)
    assert verify_protocol(text) == [] and protocol_warnings(text) == []
    (report,) = simulate(text, schedules=1, args={5: 1, 6: 4, 7: 2, 8: 200, 9: 300}).values()
    assert report.ok and report.schedules == 1, report
