"""The FP8 forward's d 128 no-LSE kernels since run 19 of docs/attention.md's
"FP8 forward": P V's wait held on the e4m3 registers of P's first 3
k-slices (``p_early=3, hold_pv_on_e4m3``) with 4 of 16 exponentials by the
polynomial on f16 pairs in causal attention (candidate ``nhp8e3p4``), 2 of
16 in full attention since run 20 (``nhp8e3p2``), without a GPU.

Checked: the op's configurations are those; every f16x2 pair converted as
one (the early and the late part); no spills or serialized wgmmas; in SASS
(where nvdisasm is installed, ``NVDISASM=`` its path) the wait between the
two halves of the softmax, the full loop in fewer instructions than the
kernel before (no hold, 6 of 16: 773) and the causal one than run 18's (5
of 16: 928), and without the hold (the planted mistake) the wait before
every exponential again; the protocol checker and the simulator accept the
full kernel (the causal one: test_attention_fp8_hold.py, on 5 of 16)."""

import re

import pytest

from _example_checks import protocol_warnings, simulate, verify_protocol
from _ptxas import report as _ptxas_info
from test_attention_fp8_hold import VALUES, _loop_instructions, _loop_ops_around_the_wait, _sass

from pipeline_mlir.kernels import attention_fwd
from pipeline_mlir.kernels.attention_fwd import AttentionConfig, mainloop
from pipeline_mlir.kernels.attention_fwd.exponentials import half_pair_slots
from pipeline_mlir.ops import attention_fp8_configs

# mode -> (variant, share of 16 on f16 pairs, the loop's SASS instructions
# of the kernel before the hold: full's run 18, causal's run 18)
MODES = {"full": ("fp8_d128_nolse", 2, 773), "causal": ("fp8_d128c_nolse", 4, 928)}


def _cfg(mode):
    return AttentionConfig(dtype="e4m3", **attention_fp8_configs.VARIANTS[MODES[mode][0]])


@pytest.fixture(scope="module")
def kernels():
    return {mode: attention_fwd.build(_cfg(mode)) for mode in MODES}


@pytest.mark.parametrize("mode", MODES)
def test_the_op_holds_on_three_slices_with_its_share(mode):
    cfg = _cfg(mode)
    assert (cfg.hold_pv_on_e4m3, cfg.p_early, cfg.hold_pv_last) == (True, 3, 0)
    assert (cfg.exp2_poly, cfg.exp2_poly_half, cfg.row_sum_fold) == (MODES[mode][1], True, True)


@pytest.mark.parametrize("mode", MODES)
def test_every_pair_converted_once(kernels, mode):
    ptx = kernels[mode].to_ptx()
    pairs = 2 * (VALUES // 32) * len(half_pair_slots(MODES[mode][1]))  # block 0 and the loop
    assert pairs == {"full": 12, "causal": 24}[mode]
    assert len(re.findall(r"cvt\.rn\.satfinite\.e4m3x2\.f16x2", ptx)) == pairs
    assert len(re.findall(r"cvt\.rn\.satfinite\.e4m3x2\.f32", ptx)) == VALUES - pairs


@pytest.mark.parametrize("mode", MODES)
def test_no_spills_and_the_wait_inside_the_softmax_in_fewer_instructions(kernels, mode,
                                                                         monkeypatch):
    ptx = kernels[mode].to_ptx()
    info = _ptxas_info(ptx)
    if info is None:
        pytest.skip("ptxas not installed")
    assert not re.search(r"C75[12]\d", info), info
    assert re.findall(r"(\d+) bytes spill stores", info) == ["0"]
    sass = _sass(ptx)
    if sass is None:
        pytest.skip("nvdisasm not installed (NVDISASM= its path)")
    before, after = _loop_ops_around_the_wait(sass, "MUFU.EX2")
    assert before >= 30 and after >= 30, (before, after)
    assert _loop_ops_around_the_wait(sass, "F2FP")[0] >= 30
    assert _loop_instructions(sass) < MODES[mode][2], _loop_instructions(sass)
    if mode == "full":
        monkeypatch.setattr(mainloop, "hold_after_values", lambda values, sign_bits=None: None)
        unheld = _sass(attention_fwd.build(_cfg(mode)).to_ptx())
        assert _loop_ops_around_the_wait(unheld, "MUFU.EX2")[0] == 0


def test_the_full_kernel_checks_and_simulates_clean(kernels):
    text = str(kernels["full"].module)
    assert verify_protocol(text) == [] and protocol_warnings(text) == []
    (report,) = simulate(text, schedules=1, args={5: 1, 6: 4, 7: 2, 8: 200, 9: 300}).values()
    assert report.ok and report.schedules == 1, report
