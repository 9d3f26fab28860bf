"""The FP8 forward's row sum folded into P V (``AttentionConfig.row_sum_fold``)
and P's conversion split around P V's wait (``p_early``), without a GPU.

With ``row_sum_fold`` every V stage holds V^T's d rows (the TMA's) and 8
rows of e4m3 ones below each box (written once by the producer warp), so P
V is one m64n136k32 wgmma per k-slice whose last 8 columns are the row sum
of P as rounded to e4m3 (``row_sum_mma``'s sum, without its six m64n8k32
wgmmas). The options' range; the shared-memory plan (the TMA's bytes, the
ones' rows, what the descriptor reads); the kernels compile without spills
or serialized wgmmas, with no n8 wgmma left; the sums' columns are zeroed
before every P V (the sum fresh each block, as
test_attention_fp8_nolse.online_nolse models it) and a planted mistake
(the rescale that leaves them) is found; the protocol checker and the
simulator accept them. The GPU check is
benchmarks/attention/run_attention_fp8.py (every candidate against fp32 of
the dequantized inputs)."""

import re

import pytest

from _example_checks import protocol_warnings, simulate, verify_protocol
from _ptxas import report as _ptxas_info

from pipeline_mlir.kernels import attention_fwd
from pipeline_mlir.kernels.attention_fwd import AttentionConfig
from pipeline_mlir.kernels.attention_fwd import mainloop as mainloop_mod
from pipeline_mlir.ops import attention_fp8_configs

OPS = attention_fp8_configs.VARIANTS
# The op's no-LSE configurations fold the row sum since run 12
# (test_attention_fp8_nolse builds, checks and simulates them); here the
# causal one with P's conversion split around the wait, and the row sum's
# own n8 wgmmas without the fold (the candidates before run 12).
FOLD = {"full": OPS["fp8_d128_nolse"],
        "causal_pe3": dict(OPS["fp8_d128c_nolse"], p_early=3)}
UNFOLDED = dict(OPS["fp8_d128_nolse"], row_sum_fold=False)


def _cfg(over):
    return AttentionConfig(dtype="e4m3", **over)


# -- the options -------------------------------------------------------------------

@pytest.mark.parametrize("over, message", [
    (dict(OPS["fp8_d128"], row_sum_fold=True), "row_sum_mma"),
    (dict(OPS["fp8_d128_nolse"], row_sum_mma=False), "row_sum_mma"),
    (dict(OPS["fp8_d256"], row_sum_mma=True, hold_pv_wait=False, row_sum_fold=True), "d 128"),
    (dict(OPS["fp8_d128_nolse"], row_sum_fold=True, intra_overlap=False), "intra_overlap"),
    (dict(OPS["fp8_d128_nolse"], p_early=6), "1..5"),
    (dict(OPS["fp8_d128_nolse"], p_early=2, double_p=True), "double_p"),
])
def test_the_options_are_refused_outside_their_range(over, message):
    with pytest.raises(ValueError, match=message):
        _cfg(over)


def test_the_stage_holds_the_ones_below_what_the_tma_loads():
    """A V stage is three 64-key boxes of 136 rows: the TMA's 128 rows of
    V^T (its transaction bytes, the host's tensor map box) and the 8 rows
    of ones the m64n136 descriptor reads below them; no separate ones
    block."""
    cfg = _cfg(FOLD["full"])
    v, pv = cfg.v_layout(), cfg.pv_layout()
    assert (v.rows, v.cols, v.swizzle) == (128, 192, 64) and (pv.rows, pv.cols) == (136, 192)
    assert v.box == (128, 64) and v.bytes == 3 * 128 * 64
    assert pv.box_offsets() == [(0, 0), (64, 136 * 64), (128, 2 * 136 * 64)]
    # Every byte P V's B operand reads past the TMA's rows is in the ones'
    # rows of its box (any swizzle of them: every byte is e4m3 1.0).
    for row in range(128, 136):
        for col in range(0, 64, 16):
            assert 128 * 64 <= pv.swizzled_offset(row, col) < 136 * 64
    plain = _cfg(UNFOLDED)
    assert cfg.smem_bytes() - plain.smem_bytes() == \
        cfg.stages * (pv.bytes - v.bytes) - cfg.consumer_warpgroups * cfg.ones_layout().bytes
    assert cfg.smem_bytes() <= cfg.smem_limit


# -- the kernels ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def kernels():
    return {"causal_pe3": attention_fwd.build(_cfg(FOLD["causal_pe3"]))}


N136 = re.compile(r"wgmma\.mma_async\.sync\.aligned\.m64n136k32\.f32\.e4m3\.e4m3 "
                  r"\{([^}]*)\}, \{([^}]*)\}")


def unzeroed_sums(ptx):
    """The P V groups (m64n136k32 wgmmas, six a block) whose accumulator's
    last 4 registers (the sums' 8 columns) are not each set to 0 by a
    ``mov.f32 reg, 0f00000000`` since the previous wgmma commit: a list of
    (group, register), empty where every block's sum starts fresh."""
    missing, groups = [], []
    for m in N136.finditer(ptx):
        if groups and ptx.rfind("commit_group", 0, m.start()) < groups[-1][-1].start():
            groups[-1].append(m)
        else:
            groups.append([m])
    for g, group in enumerate(groups):
        accs = {m.group(1) for m in group}
        assert len(group) == 6 and len(accs) == 1, (g, len(group), len(accs))
        window = ptx[ptx.rfind("commit_group", 0, group[0].start()):group[0].start()]
        regs = [r.strip() for r in group[0].group(1).split(",")]
        assert len(regs) == 68
        missing += [(g, r) for r in regs[-4:]
                    if not re.search(rf"mov\.f32 {re.escape(r)}, 0f00000000;", window)]
    return missing, len(groups)


def _no_spills_or_serialization(ptx):
    info = _ptxas_info(ptx)
    if info is not None:
        assert not re.search(r"C75[12]\d", info), info
        assert re.findall(r"(\d+) bytes spill stores", info) == ["0"]


def test_p_v_computes_the_sums_fresh_each_block_without_spills(kernels):
    """With P's first 3 k-slices converted before the wait: two P V blocks
    in the PTX (the overlapped one and the last), six m64n136k32 each on
    P's registers, no m64n8k32 left; the sums' 4 registers zeroed before
    each; ptxas neither spills nor serializes. (The op's no-LSE kernels:
    test_attention_fp8_nolse.)"""
    ptx = kernels["causal_pe3"].to_ptx()
    assert "m64n8k32" not in ptx
    missing, groups = unzeroed_sums(ptx)
    assert groups == 2 and missing == []
    _no_spills_or_serialization(ptx)


def test_the_unfolded_row_sum_keeps_its_own_wgmmas():
    """``row_sum_mma`` without the fold: one m64n8k32 wgmma beside each of
    the 12 m64n128k32 ones of P V on the same P registers, no spills or
    serialized wgmmas."""
    ptx = attention_fwd.build(_cfg(UNFOLDED)).to_ptx()
    n8 = re.findall(r"wgmma\.mma_async\.sync\.aligned\.m64n8k32\.f32\.e4m3\.e4m3 "
                    r"\{[^}]*\}, \{([^}]*)\}", ptx)
    n128 = re.findall(r"wgmma\.mma_async\.sync\.aligned\.m64n128k32\.f32\.e4m3\.e4m3 "
                      r"\{[^}]*\}, \{([^}]*)\}", ptx)
    assert len(n8) == len(n128) == 12 and n8 == n128 and "m64n136" not in ptx
    _no_spills_or_serialization(ptx)


def test_d256_causal_takes_two_q_buffers_and_two_stages():
    """Run 12's pick at d 256: causal two Q buffers with two K/V stages
    (the next tile's Q loaded under this one), full one Q buffer with
    three; both within one CTA's shared memory."""
    full, causal = (_cfg(attention_fp8_configs.variant(256, c)[1]) for c in (False, True))
    assert (full.q_buffers, full.stages, causal.q_buffers, causal.stages) == (1, 3, 2, 2)
    assert attention_fp8_configs.variant(256, True, lse=False) == \
        attention_fp8_configs.variant(256, True)
    assert max(full.smem_bytes(), causal.smem_bytes()) <= full.smem_limit


def test_a_rescale_that_leaves_the_sums_is_found(monkeypatch):
    """The planted mistake: the rescale's asm without the zeros, so the
    sums' columns carry every block's sum in the FP8 accumulator (which
    lost 2% of a long row's sum on an H200: ``Mainloop.issue_pv``)."""
    real = mainloop_mod.rescale_unless_one
    monkeypatch.setattr(mainloop_mod, "rescale_unless_one",
                        lambda o, corr, zero_last=0: real(o, corr))
    missing, groups = unzeroed_sums(attention_fwd.build(_cfg(FOLD["full"])).to_ptx())
    assert groups == 2 and len(missing) == 8


def test_the_split_conversion_checks_and_simulates_clean(kernels):
    """A ragged GQA shape: 4 query heads on 2 K/V heads, 200 queries, 300
    keys (the causal kernel with masked blocks and P's conversion split
    around the wait)."""
    text = str(kernels["causal_pe3"].module)
    assert verify_protocol(text) == [] and protocol_warnings(text) == []
    (report,) = simulate(text, schedules=2, args={5: 1, 6: 4, 7: 2, 8: 200, 9: 300}).values()
    assert report.ok and report.schedules == 2, report
