"""Attention-specific mistakes, each next to its correct
twin, on FlashAttention-3's synchronization skeleton
(test/python/skeletons/fa3_hopper_fwd.py: intra-warpgroup overlap of S and
P V, inter-warpgroup ping-pong, persistent tiles).

The correct kernel gets no finding from the protocol checker and runs to
the end in the simulator; each planted mistake is rejected by both, with a
message naming what was released (or which barrier) too early.
"""

import re

import pytest

from _example_checks import protocol_warnings, simulate, verify_protocol
from skeletons import fa3_hopper_fwd

SIM_ARGS = {4: 3}  # n_blocks: block 0, two mainloop iterations, the last P V
SCHEDULES = 4

# (checker message prefix, simulator error kind, simulator message pattern)
CAUGHT = {
    "k_released_before_s_retired": (
        "pipeline.consumer.release hands back a stage of pipeline 'k' while "
        "nvvm.wgmma.mma_async may still read it asynchronously: its wgmma group is committed "
        "but not retired; add nvvm.wgmma.wait.group.sync.aligned N with N <= 1",
        "async-read",
        r"consumer warp \d+ of CTA 0 runs pipeline.consumer.release on stage \d of pipeline 'k' "
        r"while nvvm.wgmma.mma_async may still read that stage asynchronously"),
    "v_released_before_pv_retired": (
        "pipeline.consumer.release hands back a stage of pipeline 'v' while "
        "nvvm.wgmma.mma_async may still read it asynchronously: its wgmma group is committed "
        "but not retired; add nvvm.wgmma.wait.group.sync.aligned N with N <= 0",
        "async-read",
        r"consumer warp \d+ of CTA 0 runs pipeline.consumer.release on stage \d of pipeline 'v' "
        r"while nvvm.wgmma.mma_async may still read that stage asynchronously"),
    "pingpong_barriers_crossed": (
        "named barrier id 3 waits for 256 threads but only 128 (warps 8-11) reach it: it never "
        "completes",
        # each warpgroup arrives where it syncs: its sync counts it a second
        # time in the phase its own arrive opened
        "arrive-count",
        r"warp \d+ of CTA 0 arrives on named barrier \d of CTA 0 twice in one phase"),
    "q_rearmed_while_read": (
        "pipeline.consumer.release hands back a stage of pipeline 'q' while "
        "nvvm.wgmma.mma_async may still read it asynchronously: its wgmma group is committed "
        "but not retired; add nvvm.wgmma.wait.group.sync.aligned N with N <= 0",
        "async-read",
        r"consumer warp \d+ of CTA 0 runs pipeline.consumer.release on stage 0 of pipeline 'q' "
        r"while nvvm.wgmma.mma_async may still read that stage asynchronously"),
}


def ir(mistake=None, num_stages=2):
    kernel = fa3_hopper_fwd.build(num_stages=num_stages, mistake=mistake)
    kernel.verify()
    return str(kernel.module)


def test_every_mistake_has_its_case():
    assert set(CAUGHT) == set(fa3_hopper_fwd.MISTAKES)


@pytest.mark.parametrize("num_stages", [2, 3])
def test_the_correct_twin_is_clean(num_stages):
    text = ir(num_stages=num_stages)
    assert verify_protocol(text) == []
    assert protocol_warnings(text) == []
    report = simulate(text, schedules=SCHEDULES, args=SIM_ARGS)["fa3_hopper_fwd"]
    assert report.ok and report.schedules == SCHEDULES, report


def test_the_correct_twin_releases_after_the_retiring_wait():
    """The order the mistakes break: in the mainloop, S then P V are
    committed; wait_group(1) retires S and K goes back; wait_group(0)
    retires P V and V goes back. Q goes back after the mainloop."""
    text = ir()
    assert re.search(r"nvvm.wgmma.wait.group.sync.aligned 1\n\s+pipeline.consumer.release %\d+, "
                     r"%\S+ : <tma_async, stages = 2, [^\n]*\n"
                     r"\s+nvvm.wgmma.wait.group.sync.aligned 0\n\s+pipeline.consumer.release "
                     r"%\d+, %\S+ : <tma_async, stages = 2,", text)
    assert re.search(r"\}\n\s+pipeline.consumer.release %\d+, %\S+ : <tma_async, stages = 1,",
                     text)


@pytest.mark.parametrize("mistake", sorted(CAUGHT))
def test_the_checker_rejects_the_mistake(mistake):
    message = CAUGHT[mistake][0]
    errors = verify_protocol(ir(mistake))
    assert errors and errors[0].startswith(message), errors


@pytest.mark.parametrize("mistake", sorted(CAUGHT))
def test_the_simulator_rejects_the_mistake(mistake):
    _, kind, pattern = CAUGHT[mistake]
    report = simulate(ir(mistake), schedules=SCHEDULES, args=SIM_ARGS)["fa3_hopper_fwd"]
    assert report.counts[kind] == SCHEDULES, report
    assert re.search(pattern, str(report.first[kind][1])), report.first[kind][1]


def test_an_unknown_mistake_is_refused():
    with pytest.raises(ValueError, match="mistake must be None or one of"):
        fa3_hopper_fwd.build(mistake="k_released_early")


# -- the same mistakes in the library's attention forward -----------------------
# (pipeline_mlir/kernels/attention_fwd/, also examples/attention_fwd.py),
# each planted by replacing one of its stages (_attention_mistakes.py).

import sys  # noqa: E402

from _example_checks import EXAMPLES_DIR  # noqa: E402

if EXAMPLES_DIR not in sys.path:
    sys.path.insert(0, EXAMPLES_DIR)

import attention_fwd  # noqa: E402
from _attention_mistakes import STAGES_WITH, build_with_mistake  # noqa: E402

# batch 1, 2 query heads on 1 K/V head (GQA), ragged 200 query / 300 key rows.
EXAMPLE_ARGS = {5: 1, 6: 2, 7: 1, 8: 200, 9: 300}
# What differs from the skeleton's messages: the example's scheduler
# barrier ids, and P V is the register-A wgmma (an inline asm block).
EXAMPLE_CHECKER = {
    "k_released_before_s_retired": CAUGHT["k_released_before_s_retired"][0].replace(
        "N <= 1", "N <= 0"),
    "v_released_before_pv_retired": CAUGHT["v_released_before_pv_retired"][0].replace(
        "nvvm.wgmma.mma_async may",
        "wgmma.mma_async with A in registers (llvm.inline_asm) may"),
    "pingpong_barriers_crossed": "named barrier id 1 waits for 256 threads but only 128 "
                                 "(warps 8-11) reach it: it never completes",
    "q_rearmed_while_read": CAUGHT["q_rearmed_while_read"][0],
}


def example_ir(mistake=None, **cfg):
    cfg = attention_fwd.AttentionConfig(**cfg)
    kernel = attention_fwd.build(cfg) if mistake is None else build_with_mistake(mistake, cfg)
    return str(kernel.module)


def test_every_example_mistake_has_its_case():
    assert set(EXAMPLE_CHECKER) == set(STAGES_WITH)


@pytest.mark.parametrize("mistake", sorted(STAGES_WITH))
def test_the_kernel_holds_no_mistake_and_a_planted_one_changes_it(mistake):
    """The kernel holds no mistake: the production build is the default
    stages', and each planted one differs from it (while keeping its name);
    a configuration cannot ask for one."""
    from dataclasses import fields

    assert "mistake" not in {f.name for f in fields(attention_fwd.AttentionConfig)}
    clean = example_ir()
    assert str(attention_fwd.build(stages=attention_fwd.STAGES).module) == clean
    planted = example_ir(mistake=mistake)
    assert planted != clean
    assert attention_fwd.AttentionConfig().name in planted


@pytest.mark.parametrize("head_dim", [64, 128, 256])
@pytest.mark.parametrize("causal", [False, True])
def test_the_example_checks_clean(head_dim, causal):
    text = example_ir(head_dim=head_dim, causal=causal)
    assert verify_protocol(text) == []
    assert protocol_warnings(text) == []


@pytest.mark.parametrize("cfg", [dict(), dict(head_dim=64, causal=True)])
def test_the_example_simulates_clean(cfg):
    (report,) = simulate(example_ir(**cfg), schedules=2, args=EXAMPLE_ARGS).values()
    assert report.ok and report.schedules == 2, report


@pytest.mark.parametrize("mistake", sorted(EXAMPLE_CHECKER))
def test_the_checker_rejects_the_mistake_in_the_example(mistake):
    errors = verify_protocol(example_ir(mistake=mistake))
    assert errors and errors[0].startswith(EXAMPLE_CHECKER[mistake]), errors


@pytest.mark.parametrize("mistake", sorted(EXAMPLE_CHECKER))
def test_the_simulator_rejects_the_mistake_in_the_example(mistake):
    _, kind, pattern = CAUGHT[mistake]
    pattern = pattern.replace("named barrier 4", "named barrier 2")
    (report,) = simulate(example_ir(mistake=mistake), schedules=2,
                         args=EXAMPLE_ARGS).values()
    assert report.counts[kind] == 2, report
    assert re.search(pattern, str(report.first[kind][1])), report.first[kind][1]
