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
docs/attention.md's "FP8 forward").

Two forms of it after that run (candidates ``nhpp2``..``nhpp4``, ``nhp8``,
``nhp8e3``, ``lhp8``: run 17): the hold on the first k-slices' exponentials
only (``hold_pv_part``: the wait in the middle of the softmax, the rest and
every conversion after it), and the hold on P's e4m3 registers converted
before the wait into ``double_p``'s copy (``hold_pv_on_e4m3``: the wait
after every conversion too). Checked: their range; the partial hold reads
exactly its slices' values; the OR of the e4m3 hold reads every register
of the copy; in SASS the wait between the two halves' MUFU.EX2, and no
F2FP after the e4m3 hold's wait; no spills or serialized wgmmas, and
without ``mainloop.keep_live`` (the planted mistake: P_{j-1}'s registers
not kept live to the wait) ptxas serializes them; the protocol checker
and the simulator accept the e4m3 hold on p_early's slices.

The e4m3 hold on the last register converted before the wait alone
(``hold_pv_last=1``, candidates ``nhp8l1``, ``nhp8e2l1``..``nhp8e4l1``:
run 18): no OR, the trap's test reads the last register packed; in SASS
the wait still between the halves of the softmax, at most 8 instructions
more in the loop than the op's kernel, and without the hold (planted) the
wait before the softmax again."""

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

# The full no-LSE kernel before run 19 (no hold, 6 of 16 on f16 pairs): the
# holds below are on it.
FULL = AttentionConfig(dtype="e4m3", **{**attention_fp8_configs.VARIANTS["fp8_d128_nolse"],
                                        "hold_pv_on_e4m3": False, "p_early": 0,
                                        "exp2_poly": 6})
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
    (dict(dtype="e4m3", hold_pv_part=3), "hold_pv_part"),                      # no hold
    (dict(dtype="e4m3", block_n=192, hold_pv_on_p=True, hold_pv_part=6), "hold_pv_part"),
    (dict(dtype="e4m3", hold_pv_on_e4m3=True), "hold_pv_on_e4m3"),             # no copy
    (dict(hold_pv_on_e4m3=True, double_p=True), "hold_pv_on_e4m3"),            # bf16
    (dict(dtype="e4m3", hold_pv_on_e4m3=True, double_p=True, hold_pv_on_p=True),
     "hold_pv_on_e4m3"),
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
    # On the causal configuration before run 18 (its hold replaced).
    cfg = AttentionConfig(dtype="e4m3", **{**attention_fp8_configs.VARIANTS["fp8_d128c_nolse"],
                                           "hold_pv_on_e4m3": False, "p_early": 0,
                                           "hold_pv_on_p": True})
    text = str(attention_fwd.build(cfg).module)
    assert verify_protocol(text) == [] and protocol_warnings(text) == []
    (report,) = simulate(text, schedules=1, args={5: 1, 6: 4, 7: 2, 8: 200, 9: 300}).values()
    assert report.ok and report.schedules == 1, report


PART = replace(FULL, hold_pv_on_p=True, hold_pv_part=3)
E4M3 = replace(FULL, hold_pv_on_e4m3=True, double_p=True)


@pytest.fixture(scope="module")
def part_ptxs():
    """PTX of the op's full no-LSE kernel with the hold on half of P's
    k-slices, and with the hold on P's e4m3 copy."""
    return attention_fwd.build(PART).to_ptx(), attention_fwd.build(E4M3).to_ptx()


def test_the_partial_hold_reads_its_slices_values(part_ptxs, ptxs):
    """Its first 3 k-slices of 6: 48 values a thread, the f16x2 pairs
    among them once each."""
    slots = half_pair_slots(FULL.exp2_poly)
    pairs = sum(1 for lo in range(48) if lo % 32 in slots)
    assert _ors(part_ptxs[0]) - _ors(ptxs[0]) == 48 - pairs - 1 == 38


def test_the_e4m3_hold_reads_every_register_of_the_copy(part_ptxs, ptxs):
    """P as e4m3: 6 k-slices of 4 registers, ORed (23 ORs) and tested on
    every byte's sign bit."""
    e4m3 = part_ptxs[1]
    assert _ors(e4m3) - _ors(ptxs[0]) == 24 - 1
    assert len(re.findall(r"and\.b32\s+t, %r\d+, 0x80808080;", e4m3)) == 1
    assert "trap" in e4m3


def _loop_ops_around_the_wait(sass, op):
    """Like ``_loop_ex2_around_the_wait``, for any opcode."""
    lines = sass.splitlines()
    start = next(i for i, l in enumerate(lines) if "WARPGROUP.DEPBAR.LE gsb0, 0x1" in l)
    end = next(i for i in range(start, len(lines)) if "QGMMA" in lines[i])
    body = lines[start:end]
    wait = next(i for i, l in enumerate(body) if "WARPGROUP.DEPBAR.LE gsb0, 0x0" in l)
    return (sum(op in l for l in body[:wait]), sum(op in l for l in body[wait:]))


def test_no_spills_and_where_the_partial_and_e4m3_holds_wait(part_ptxs):
    part, e4m3 = part_ptxs
    for ptx in part_ptxs:
        info = _ptxas_info(ptx)
        if info is None:
            pytest.skip("ptxas not installed")
        assert not re.search(r"C75[12]\d", info), info
        assert re.findall(r"(\d+) bytes spill stores", info) == ["0"]
    sass_part, sass_e4m3 = _sass(part), _sass(e4m3)
    if sass_part is None:
        pytest.skip("nvdisasm not installed (NVDISASM= its path)")
    # 30 of the held half's 48 values by MUFU (18 on f16 pairs), 30 of the
    # other half's: the wait between them (the op's kernel: 0 before it).
    before, after = _loop_ex2_around_the_wait(sass_part)
    assert before >= 30 and after >= 30, (before, after)
    # Every conversion (48 to e4m3, 18 to f16x2) before the e4m3 hold's
    # wait and none between it and the next S issue (the plain hold: 48
    # after it).
    assert _loop_ops_around_the_wait(sass_e4m3, "F2FP") == (66, 0)
    assert _loop_ex2_around_the_wait(sass_e4m3)[0] >= 60


def test_without_keep_live_ptxas_serializes_the_e4m3_hold(monkeypatch):
    """The planted mistake: P_{j-1}'s registers not kept live to P V's
    wait. ptxas gives P_j's copy their registers and serializes the
    wgmmas (C7513) to keep the GEMM's input intact."""
    if not shutil.which("ptxas"):
        pytest.skip("ptxas not installed")
    monkeypatch.setattr(mainloop, "keep_live", lambda regs: None)
    info = _ptxas_info(attention_fwd.build(E4M3).to_ptx())
    assert re.search(r"C75[12]\d", info), info


def test_the_e4m3_hold_on_early_slices_checks_and_simulates_clean():
    """The op's causal no-LSE kernel of run 18 (nhp8e3 on 5 of 16; 4 since
    run 19). Also: every f16x2 pair converted as one where P is converted
    in two parts. 5 of 16 on pairs repeat every 32 values, and the late
    part starts at value 48: read from its own first value (the fix after
    run 17's GPU check, where the causal kernel's O was NaN), the pairs
    are others, half-f32 values converted as f16x2 (31 and 65 conversions
    where 30 and 66 are right)."""
    cfg = AttentionConfig(dtype="e4m3", **{**attention_fp8_configs.VARIANTS["fp8_d128c_nolse"],
                                           "exp2_poly": 5})
    assert cfg.hold_pv_on_e4m3 and cfg.p_early == 3 and not cfg.hold_pv_last
    kernel = attention_fwd.build(cfg)
    ptx = kernel.to_ptx()
    pairs = 2 * (VALUES // 32) * len(half_pair_slots(cfg.exp2_poly))   # block 0 and the loop
    assert len(re.findall(r"cvt\.rn\.satfinite\.e4m3x2\.f16x2", ptx)) == pairs == 30
    # The other values two at a time: (2 x 96 - 2 x 30) / 2.
    assert len(re.findall(r"cvt\.rn\.satfinite\.e4m3x2\.f32", ptx)) == VALUES - pairs == 66
    text = str(kernel.module)
    assert verify_protocol(text) == [] and protocol_warnings(text) == []
    (report,) = simulate(text, schedules=1, args={5: 1, 6: 4, 7: 2, 8: 200, 9: 300}).values()
    assert report.ok and report.schedules == 1, report


# -- the hold on one register (hold_pv_last: run 18) ------------------------------

@pytest.mark.parametrize("over", [
    dict(hold_pv_last=1),                                                   # no e4m3 hold
    dict(hold_pv_on_e4m3=True, p_early=3, hold_pv_last=13),                 # 12 held
    dict(hold_pv_on_e4m3=True, double_p=True, hold_pv_last=25),             # 24 held
])
def test_the_last_register_hold_is_refused_outside_its_range(over):
    with pytest.raises(ValueError, match="hold_pv_last"):
        replace(FULL, **over)


LAST1 = replace(FULL, hold_pv_on_e4m3=True, p_early=3, hold_pv_last=1)


@pytest.fixture(scope="module")
def last1_ptx():
    return attention_fwd.build(LAST1).to_ptx()


def test_the_last_register_hold_tests_the_last_register_converted(last1_ptx, ptxs):
    """No OR: the trap's test reads one register, the last of P's e4m3
    registers packed before the wait (``mov.b32 {lo, hi}`` of its two
    conversions); none is packed between the test and the wait."""
    assert _ors(last1_ptx) == _ors(ptxs[0])
    (test,) = re.finditer(r"setp\.lt\.s32 p, (%r\d+), 0;.*trap", last1_ptx)
    reg = test.group(1)
    packs = [m for m in re.finditer(r"mov\.b32\s+(%r\d+), \{%rs\d+, %rs\d+\};", last1_ptx)
             if m.start() < test.start()]
    assert packs[-1].group(1) == reg
    wait = last1_ptx.index("wgmma.wait_group.sync.aligned \t0;", test.end())
    assert not re.search(r"mov\.b32\s+%r\d+, \{%rs", last1_ptx[test.end():wait])
    # The planted mistake: two registers held, one OR more.
    two = attention_fwd.build(replace(LAST1, hold_pv_last=2)).to_ptx()
    assert _ors(two) == _ors(ptxs[0]) + 1


def _loop_instructions(sass):
    lines = sass.splitlines()
    start = next(i for i, l in enumerate(lines) if "WARPGROUP.DEPBAR.LE gsb0, 0x1" in l)
    end = next(i for i in range(start, len(lines)) if "QGMMA" in lines[i])
    return sum(bool(re.search(r"/\*[0-9a-f]{4}\*/", l)) for l in lines[start:end])


def test_the_last_register_hold_places_the_wait_with_few_instructions(monkeypatch, last1_ptx,
                                                                    ptxs):
    """The wait between the two halves of the softmax (as with every
    register held, nhp8e3), at most 8 instructions more in the loop than
    the op's kernel (the OR and the copy's moves: 36). The planted
    mistake: without the hold ptxas waits before the softmax again."""
    info = _ptxas_info(last1_ptx)
    if info is None:
        pytest.skip("ptxas not installed")
    assert not re.search(r"C75[12]\d", info), info
    assert re.findall(r"(\d+) bytes spill stores", info) == ["0"]
    sass = _sass(last1_ptx)
    if sass is None:
        pytest.skip("nvdisasm not installed (NVDISASM= its path)")
    before, after = _loop_ex2_around_the_wait(sass)
    assert before >= 28 and after >= 28, (before, after)
    assert _loop_instructions(sass) <= _loop_instructions(_sass(ptxs[0])) + 8
    monkeypatch.setattr(mainloop, "hold_after_values", lambda values, sign_bits=None: None)
    unheld = _sass(attention_fwd.build(LAST1).to_ptx())
    assert _loop_ex2_around_the_wait(unheld)[0] == 0
