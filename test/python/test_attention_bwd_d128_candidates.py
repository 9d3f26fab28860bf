"""The attention backward at d 128 with three stages of Q and dO
(option ``stages3``: ``AttentionBwdConfig.stages = 3``), without a GPU.
With LSE and dPsum on the tiles' stages (d 128's default) a third stage
fits: 226.6 KiB of the 227. The producer then runs up to two steps ahead
of the slower consumer.

Here: the two sets (d 128 full's and causal's defaults plus the option)
are cached candidates, not the op's defaults; each builds, checks and
simulates clean on the ragged GQA shape within its shared-memory plan, and
spills no more than its default; the planted backward and dQ hand-off
mistakes are still rejected on the causal one.
"""

import re

import pytest

from _attention_bwd_builds import cfg_of, ptx_of  # noqa: F401  (a fixture)
from _attention_bwd_mistakes import build_with_mistake
from _ptxas import spill_bytes
from test_attention_bwd import CAUGHT, SCHEDULES, SIM_ARGS, assert_caught
from test_attention_bwd_reduce_warp import HAND_OFF_CAUGHT, RACE_CAUGHT
from test_attention_bwd_stats_with_tiles import LSE_ON_Q_CAUGHT
from pipeline_mlir.chip_limits import SMEM_PER_BLOCK
from pipeline_mlir.kernels import attention_bwd as ab
from pipeline_mlir.ops import attention_configs

S3 = ("stages3",)
BASES = {c: attention_configs.bwd_default_options(128, c) for c in (False, True)}


def test_the_sets_are_cached_candidates_not_defaults():
    """Each mask's default plus ``stages3`` is a d 128 candidate in the
    kernel cache, tagged ``s3``, three stages; no default has it."""
    for c, base in BASES.items():
        opts = base + S3
        assert opts in attention_configs.bwd_option_sets(128)
        name, over = attention_configs.bwd_variant(128, c, options=opts)
        assert name.endswith("_s3") and attention_configs.BWD_CANDIDATES[name] == over
        cfg = ab.AttentionBwdConfig(**over)
        assert cfg.stages == 3 and "x64_s3_" in cfg.name
        assert cfg.smem_bytes() <= SMEM_PER_BLOCK
    for d in (64, 128, 256):
        for c in (False, True):
            assert "stages3" not in attention_configs.bwd_default_options(d, c)
    # Without the rows on the tiles' stages it does not fit.
    over = attention_configs.bwd_variant(128, False, options=("dq_split", "dq_reduce_warp",
                                                              "stages3"))[1]
    assert ab.AttentionBwdConfig(**over).smem_bytes() > SMEM_PER_BLOCK


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_checks_simulates_and_assembles(causal, ptx_of):
    """Checked, simulated clean on the ragged GQA shape, shared memory
    within its plan; ptxas spills no more than the mask's default."""
    cfg = cfg_of(128, causal, BASES[causal] + S3)
    k = ab.build(cfg)
    assert k.smem_bytes <= cfg.smem_bytes() <= SMEM_PER_BLOCK
    (report,) = k.simulate(SIM_ARGS, schedules=SCHEDULES)
    assert report.ok and report.schedules == SCHEDULES, report
    spills = spill_bytes(ptx_of(128, causal, BASES[causal] + S3))
    if spills is None:
        pytest.skip("ptxas not installed")
    assert spills <= spill_bytes(ptx_of(128, causal, BASES[causal]))


@pytest.mark.parametrize("mistake", sorted(set(CAUGHT) - {"dq_reduce_before_fence"})
                         + sorted(HAND_OFF_CAUGHT) + sorted(RACE_CAUGHT))
def test_mistakes_are_rejected(mistake):
    """On d 128 causal with three stages: the dO release and the LSE row
    read from Q's released stage (checker), the epilogue race (simulator),
    the reduce warp's dropped waits (checker), its misplaced waits and the
    dropped proxy fence (race detector, every schedule)."""
    from pipeline_mlir.compiler import CompileError

    k = build_with_mistake(mistake, cfg_of(128, True, BASES[True] + S3))
    if mistake in CAUGHT:
        who, pattern = CAUGHT[mistake]
        if mistake == "lse_read_after_release":
            pattern = LSE_ON_Q_CAUGHT.replace("consumer_release", "consumer[._]release")
        assert_caught(k, who, pattern)
        return
    if mistake in HAND_OFF_CAUGHT:
        with pytest.raises(CompileError) as err:
            k.to_ptx()
        assert re.search(HAND_OFF_CAUGHT[mistake], str(err.value)), str(err.value)
        return
    k.to_ptx()
    (report,) = k.simulate(SIM_ARGS, schedules=SCHEDULES, check=False)
    assert report.counts == {"smem-race": SCHEDULES}, report
    assert re.search(RACE_CAUGHT[mistake], report.findings[0].message), \
        report.findings[0].message
