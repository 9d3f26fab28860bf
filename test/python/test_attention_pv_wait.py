"""``AttentionConfig.hold_pv_wait``, without a GPU: the forward's
``wgmma.wait_group 0`` that retires P_{j-1} V_{j-1} stays after the softmax
of S_j. Nsight Compute found ptxas scheduling that wait before the
exponentials (it interleaves P's conversion into the registers the
in-flight GEMM reads with them), so the softmax ran after the GEMM rather
than under it (docs/attention.md, "Where the forward stalls"). The option
puts a warp-uniform trap on the new row sums (never taken: sums of
exponentials are >= 0) just before the wait: in the kernel's PTX the wait
directly follows it, the kernel still passes the checker
and the simulator, and the bf16 configurations without the option are what
they were. Where the SASS keeps the wait is the GPU host's to see
(``cuobjdump -sass``); the timings are docs/attention.md's."""

import re

import pytest

from _example_checks import protocol_warnings, simulate, verify_protocol
from test_gemm_epilogue import _ptxas_spills

from pipeline_mlir.kernels import attention_fwd
from pipeline_mlir.kernels.attention_fwd import AttentionConfig
from pipeline_mlir.ops import attention_configs, attention_fp8_configs
from _ptxas import report as _ptxas_info

HELD = [dict(head_dim=128, causal=True, hold_pv_wait=True),
        dict(head_dim=128, block_n=192, stages=3, dtype="e4m3", hold_pv_wait=True),
        dict(head_dim=256, stages=3, q_stages=1, dtype="e4m3", hold_pv_wait=True)]
# P_j converted before the held wait, into other registers (double_p).
DOUBLE = [dict(head_dim=128, causal=True, block_n=192, stages=3, dtype="e4m3",
               hold_pv_wait=True, double_p=True),
          dict(head_dim=256, stages=3, q_stages=1, dtype="e4m3", hold_pv_wait=True,
               double_p=True, exp2_poly=2)]


@pytest.mark.parametrize("cfg", HELD, ids=str)
def test_the_held_wait_follows_the_trap_on_the_row_sums(cfg):
    c = AttentionConfig(**cfg)
    ptx = attention_fwd.build(c).to_ptx()
    plain = attention_fwd.build(AttentionConfig(**dict(cfg, hold_pv_wait=False))).to_ptx()
    assert ptx.count("vote.sync.any.pred") == 1 and ptx.count("trap;") == 1
    vote = ptx.index("vote.sync.any.pred")
    pv_wait = ptx.index("wgmma.wait_group.sync.aligned \t0", vote)
    # The loop's P V wait comes right after the trap, in its basic block:
    # nothing converts or exponentiates in between, no label splits them.
    between = ptx[vote:pv_wait]
    assert "ex2.approx" not in between and "cvt.rn" not in between
    assert "$L__BB" not in between
    # The trap reads the new row sums, which add every exponential of the
    # block: the same exponentials as without the option, none moved after.
    assert ptx.count("ex2.approx") == plain.count("ex2.approx")
    assert _ptxas_spills(ptx) in (None, 0)


@pytest.mark.parametrize("cfg", HELD[:2], ids=str)
def test_held_wait_kernels_check_and_simulate_clean(cfg):
    text = str(attention_fwd.build(AttentionConfig(**cfg)).module)
    assert verify_protocol(text) == [] and protocol_warnings(text) == []
    args = {5: 1, 6: 4, 7: 2, 8: 200, 9: 300}
    (report,) = simulate(text, schedules=2, args=args).values()
    assert report.ok and report.schedules == 2, report


def test_the_option_is_off_in_the_bf16_op_and_named():
    assert not any(o.get("hold_pv_wait") for o in attention_configs.VARIANTS.values())
    plain = AttentionConfig(head_dim=128)
    assert "vote.sync" not in attention_fwd.build(plain).to_ptx()
    assert AttentionConfig(head_dim=128, hold_pv_wait=True).name.endswith("_hw")


def test_the_fp8_op_holds_where_it_was_measured_faster():
    held = {n for n, o in attention_fp8_configs.VARIANTS.items() if o.get("hold_pv_wait")}
    assert held == {"fp8_d256"}


def test_the_fp8_op_does_not_double_p():
    """double_p with the held wait was faster on every row of no head dim
    and mode (docs/attention.md, "FP8 forward", run 7): off in every FP8
    configuration until a run says otherwise."""
    assert not any(o.get("double_p") for o in attention_fp8_configs.VARIANTS.values())


@pytest.mark.parametrize("cfg", DOUBLE, ids=str)
def test_p_converted_before_the_held_wait(cfg):
    """With double_p the block's e4m3 conversions come before the trap and
    the wait (P_j goes to registers the in-flight GEMM does not read), and
    ptxas neither spills nor serializes the wgmmas for it (C7513/C7514:
    "defining"/"reading" registers of a wgmma in flight)."""
    c = AttentionConfig(**cfg)
    ptx = attention_fwd.build(c).to_ptx()
    single = attention_fwd.build(AttentionConfig(**dict(cfg, double_p=False))).to_ptx()
    vote = ptx.index("vote.sync.any.pred")
    pv_wait = ptx.index("wgmma.wait_group.sync.aligned \t0", vote)
    label = ptx.rfind("$L__BB", 0, vote)
    conversions = "cvt.rn.satfinite.e4m3x2.f32"
    # in the trap's block, before it: every conversion of the block's P
    # (two per register of the operand: bn / 32 slices of four); none
    # between it and the wait; without double_p none before it
    assert ptx[label:vote].count(conversions) == 2 * 4 * c.kv_block // 32
    assert conversions not in ptx[vote:pv_wait]
    s_vote = single.index("vote.sync.any.pred")
    assert conversions not in single[single.rfind("$L__BB", 0, s_vote):s_vote]
    info = _ptxas_info(ptx)
    if info is not None:
        assert not re.search(r"C751[34]", info), info
        assert re.findall(r"(\d+) bytes spill stores", info) == ["0"]


def test_double_p_kernel_checks_and_simulates_clean():
    text = str(attention_fwd.build(AttentionConfig(**DOUBLE[0])).module)
    assert verify_protocol(text) == [] and protocol_warnings(text) == []
    args = {5: 1, 6: 4, 7: 2, 8: 200, 9: 300}
    (report,) = simulate(text, schedules=2, args=args).values()
    assert report.ok and report.schedules == 2, report


def test_double_p_needs_the_overlapped_mainloop():
    with pytest.raises(ValueError, match="double_p"):
        AttentionConfig(double_p=True, intra_overlap=False)
