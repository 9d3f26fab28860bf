"""The FP8 forward's P V wait held after the exponentials where no FMA-pipe
row sum exists to hold on (``AttentionConfig.hold_pv_on_p``,
``attention_fwd.mainloop.hold_after_values``), without a GPU.

The no-LSE kernels (``row_sum_mma``, the sums from P V's ones) cannot take
``hold_pv_wait`` (its trap reads the FMA pipe's row sum), and without a
hold ptxas puts P_{j-1} V_{j-1}'s ``WARPGROUP.DEPBAR.LE gsb0, 0x0`` before
S_j's row max (SASS of the op's full no-LSE kernel): the softmax then does
not run under its own warpgroup's P V. The option ORs the bits of every
exponential of P_j (f32 values, and each f16x2 pair once) and traps on the
OR's sign bit (never set: P >= +0). Checked here: the option's range; the
OR covers every distinct value of the loop's softmax (a hold over part of
them, planted, is found); no spills or serialized wgmmas; in SASS (where
nvdisasm is installed) the wait after every MUFU.EX2 of the loop, where the
op's kernel has it before them; the protocol checker and the simulator
accept the held kernel. The GPU check is
benchmarks/attention/run_attention_fp8.py (candidate ``nhp``: run 16 of
docs/attention.md's "FP8 forward")."""

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import replace

import pytest

from _example_checks import protocol_warnings, simulate, verify_protocol
from _ptxas import report as _ptxas_info

from pipeline_mlir.kernels import attention_fwd
from pipeline_mlir.kernels.attention_fwd import AttentionConfig, mainloop
from pipeline_mlir.kernels.attention_fwd.exponentials import half_pair_slots
from pipeline_mlir.ops import attention_fp8_configs

FULL = AttentionConfig(dtype="e4m3", **attention_fp8_configs.VARIANTS["fp8_d128_nolse"])
VALUES = 96                      # of S a thread holds per 192-key block


def _ors(ptx):
    return len(re.findall(r"\bor\.b32\b", ptx))


@pytest.fixture(scope="module")
def ptxs():
    """PTX of the op's full no-LSE kernel, without and with the hold."""
    return (attention_fwd.build(FULL).to_ptx(),
            attention_fwd.build(replace(FULL, hold_pv_on_p=True)).to_ptx())


@pytest.mark.parametrize("over, message", [
    (dict(hold_pv_on_p=True), "hold_pv_on_p"),                                  # bf16
    (dict(dtype="e4m3", hold_pv_on_p=True, hold_pv_wait=True), "hold_pv_on_p"),
    (dict(dtype="e4m3", hold_pv_on_p=True, intra_overlap=False, pingpong=False),
     "hold_pv_on_p"),
])
def test_the_option_is_refused_outside_its_range(over, message):
    with pytest.raises(ValueError, match=message):
        AttentionConfig(**over)


def _expected_ors(cfg):
    """One OR fewer than the distinct values of one softmax (an f16x2
    pair is one value): the loop's copy only (block 0 has no P V)."""
    pairs = (VALUES // 32) * len(half_pair_slots(cfg.exp2_poly)) if cfg.exp2_poly_half else 0
    return VALUES - pairs - 1


def test_the_hold_reads_every_exponential(ptxs):
    plain, held = ptxs
    assert _ors(held) - _ors(plain) == _expected_ors(FULL) == 77
    assert len(re.findall(r"setp\.lt\.s32\s+p, %r\d+, 0;", held)) == 1
    assert "trap" in held and "trap" not in plain


def test_a_hold_over_part_of_the_values_is_found(monkeypatch, ptxs):
    """The planted mistake: the hold reads half of P's values."""
    real = mainloop.hold_after_values
    monkeypatch.setattr(mainloop, "hold_after_values", lambda v: real(v[:len(v) // 2]))
    partial = attention_fwd.build(replace(FULL, hold_pv_on_p=True)).to_ptx()
    assert _ors(partial) - _ors(ptxs[0]) != _expected_ors(FULL)


def _sass(ptx):
    nvdisasm = os.environ.get("NVDISASM") or shutil.which("nvdisasm")
    if not (nvdisasm and shutil.which("ptxas")):
        return None
    with tempfile.TemporaryDirectory() as d:
        src, obj = os.path.join(d, "k.ptx"), os.path.join(d, "k.cubin")
        with open(src, "w") as f:
            f.write(ptx)
        subprocess.run(["ptxas", "-arch=sm_90a", src, "-o", obj], check=True)
        return subprocess.run([nvdisasm, "-c", obj], capture_output=True, text=True,
                              check=True).stdout


def _loop_ex2_around_the_wait(sass):
    """In the main loop (from S_j's wait, ``DEPBAR.LE gsb0, 0x1``, to the
    next QGMMA): the MUFU.EX2 before and after P V's wait."""
    lines = sass.splitlines()
    start = next(i for i, l in enumerate(lines) if "WARPGROUP.DEPBAR.LE gsb0, 0x1" in l)
    end = next(i for i in range(start, len(lines)) if "QGMMA" in lines[i])
    body = lines[start:end]
    wait = next(i for i, l in enumerate(body) if "WARPGROUP.DEPBAR.LE gsb0, 0x0" in l)
    return (sum("MUFU.EX2" in l for l in body[:wait]),
            sum("MUFU.EX2" in l for l in body[wait:]))


def test_no_spills_and_the_wait_after_the_exponentials_in_sass(ptxs):
    plain, held = ptxs
    info = _ptxas_info(held)
    if info is None:
        pytest.skip("ptxas not installed")
    assert not re.search(r"C75[12]\d", info), info
    assert re.findall(r"(\d+) bytes spill stores", info) == ["0"]
    sass_plain, sass_held = _sass(plain), _sass(held)
    if sass_held is None:
        pytest.skip("nvdisasm not installed (NVDISASM= its path)")
    # 60 of P's 96 values by MUFU (36 on f16 pairs), and the two rows'
    # corrections: the op's kernel waits before all of them, the held one
    # after P's (the corrections, which O's next rescale reads, after it).
    assert _loop_ex2_around_the_wait(sass_plain) == (0, 62)
    assert _loop_ex2_around_the_wait(sass_held) == (60, 2)


def test_the_held_causal_kernel_checks_and_simulates_clean():
    cfg = AttentionConfig(dtype="e4m3", **attention_fp8_configs.VARIANTS["fp8_d128c_nolse"],
                          hold_pv_on_p=True)
    text = str(attention_fwd.build(cfg).module)
    assert verify_protocol(text) == [] and protocol_warnings(text) == []
    (report,) = simulate(text, schedules=1, args={5: 1, 6: 4, 7: 2, 8: 200, 9: 300}).values()
    assert report.ok and report.schedules == 1, report
