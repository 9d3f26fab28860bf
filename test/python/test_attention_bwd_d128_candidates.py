"""Candidates on the d 128 defaults (full: ``dq_split``, ``min_ctas``,
``dq_reduce_warp``, ``stats_with_tiles``, ``dq_acc_order``; causal the same
with ``lpt_order`` for ``dq_acc_order``), without a GPU:

- three stages of Q and dO (option ``stages3``: ``AttentionBwdConfig.
  stages = 3``). With LSE and dPsum on the tiles' stages a third stage
  fits: 226.6 KiB of the 227. The producer then runs up to two steps
  ahead of the slower consumer;
- the dS^T hand-over's one barrier (``ds_one_barrier``), alone and with
  dK's GEMM after dQ's (``dk_last``: FA4's order), measured before on the
  defaults of then (without the rows on the tiles' stages or dQ in the
  accumulator's order).

d 128 causal takes FA4's order (``BWD_CAUSAL_OPTIONS``). Here: the sets
are cached candidates (FA4's order the causal default); each builds,
checks and simulates clean on the ragged GQA shape within its
shared-memory plan, and spills no more than its default (FA4's order no
more than 8 bytes); the planted backward mistakes are still rejected on
d 128 causal with three stages and with FA4's order (there the dQ
hand-off's too), and the dS^T hand-over's three wrong versions are races
on d 128 full with the one barrier.
"""

import re

import pytest

from _attention_bwd_builds import cfg_of, ptx_of  # noqa: F401  (a fixture)
from _attention_bwd_mistakes import SHARED_DS_STAGES_WITH, build_with_mistake
from _ptxas import spill_bytes
from test_attention_bwd import CAUGHT, SCHEDULES, SIM_ARGS, assert_caught
from test_attention_bwd_reduce_warp import HAND_OFF_CAUGHT, RACE_CAUGHT
from test_attention_bwd_stats_with_tiles import LSE_ON_Q_CAUGHT
from pipeline_mlir.chip_limits import SMEM_PER_BLOCK
from pipeline_mlir.kernels import attention_bwd as ab
from pipeline_mlir.ops import attention_configs

S3 = ("stages3",)
DS1 = ("ds_one_barrier",)
FA4_ORDER = ("dk_last", "ds_one_barrier")
EXTRAS = (S3, DS1, FA4_ORDER)
# The defaults they were measured on (causal's before it took FA4's order).
BASES = {False: attention_configs.BWD_D128_FULL_M64,
         True: attention_configs.BWD_DEFAULT_OPTIONS[128] + ("lpt_order",)}
# ptxas spill stores (bytes) of the sets without stages3 where the default
# spills none (full): 4 with the one barrier, alone or in FA4's order.
SPILL_SLACK = {S3: 0, DS1: 8, FA4_ORDER: 8}


def test_the_sets_are_cached_candidates_not_defaults():
    """Each mask's default plus each extra is a d 128 candidate in the
    kernel cache; ``stages3`` tagged ``s3``, three stages, in no default;
    FA4's order is d 128 causal's default since it measured faster there."""
    for c, base in BASES.items():
        for extra in EXTRAS:
            name, over = attention_configs.bwd_variant(128, c, options=base + extra)
            assert base + extra in attention_configs.bwd_option_sets(128)
            assert attention_configs.BWD_CANDIDATES[name] == over
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
    # d 128 causal takes FA4's order (faster on both causal rows in two
    # passes), full does not (not faster in both on the 2, 16, 8192 row).
    assert attention_configs.bwd_default_options(128, True) == BASES[True] + FA4_ORDER
    # (Full has taken FA4's order since, at 80-query steps: test_attention_bwd_m80.py.)
    assert attention_configs.bwd_default_options(128, False) == (
        attention_configs.BWD_DEFAULT_OPTIONS[128] + FA4_ORDER + ("block_m80", "dq_acc_order"))
    # Without the rows on the tiles' stages it does not fit.
    over = attention_configs.bwd_variant(128, False, options=("dq_split", "dq_reduce_warp",
                                                              "stages3"))[1]
    assert ab.AttentionBwdConfig(**over).smem_bytes() > SMEM_PER_BLOCK


def ids(x):
    return "+".join(x) if isinstance(x, tuple) else str(x)


@pytest.mark.parametrize("extra", EXTRAS, ids=ids)
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_checks_simulates_and_assembles(causal, extra, ptx_of):
    """Checked, simulated clean on the ragged GQA shape, shared memory
    within its plan; ptxas spills no more than the mask's default (plus
    ``SPILL_SLACK``)."""
    cfg = cfg_of(128, causal, BASES[causal] + extra)
    k = ab.build(cfg)
    assert k.smem_bytes <= cfg.smem_bytes() <= SMEM_PER_BLOCK
    (report,) = k.simulate(SIM_ARGS, schedules=SCHEDULES)
    assert report.ok and report.schedules == SCHEDULES, report
    spills = spill_bytes(ptx_of(128, causal, BASES[causal] + extra))
    if spills is None:
        pytest.skip("ptxas not installed")
    assert spills <= spill_bytes(ptx_of(128, causal, BASES[causal])) + SPILL_SLACK[extra]


BACKWARD_MISTAKES = sorted(set(CAUGHT) - {"dq_reduce_before_fence"})
# (extra, mistake): the backward's planted mistakes on three stages and on
# FA4's order, the dQ hand-off's on FA4's order (dQ stored under dK).
PLANTED = ([(S3, m) for m in BACKWARD_MISTAKES]
           + [(FA4_ORDER, m) for m in BACKWARD_MISTAKES + sorted(HAND_OFF_CAUGHT)
              + sorted(RACE_CAUGHT)])


@pytest.mark.parametrize("extra,mistake", PLANTED, ids=ids)
def test_mistakes_are_rejected(extra, mistake):
    """On d 128 causal with the extra: the dO release and the LSE row read
    from Q's released stage (checker), the epilogue race (simulator), the
    reduce warp's dropped waits (checker), its misplaced waits and the
    dropped proxy fence (race detector, every schedule)."""
    from pipeline_mlir.compiler import CompileError

    k = build_with_mistake(mistake, cfg_of(128, True, BASES[True] + extra))
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


@pytest.mark.parametrize("mistake", sorted(SHARED_DS_STAGES_WITH))
def test_ds_hand_over_mistakes_are_races_with_one_barrier(mistake):
    """On d 128 full with the one barrier (dQ in the accumulator's order):
    the dS^T hand-over's three wrong versions (the barrier over both before
    the stores, over one warpgroup only, one dS^T buffer) are races in
    every schedule."""
    cfg = cfg_of(128, False, BASES[False] + DS1)
    assert cfg.shared_ds and cfg.ds_one_barrier and cfg.dq_acc_order
    k = build_with_mistake(mistake, cfg)
    k.to_ptx()
    (report,) = k.simulate(SIM_ARGS, schedules=SCHEDULES, check=False)
    assert report.counts == {"smem-race": SCHEDULES}, report


CAUSAL = attention_configs.BWD_CAUSAL_OPTIONS[128]
# d 128 causal's set without the key blocks longest first (the GPU test of
# lpt_order compares the two), and with dQ in the accumulator's order (the
# GPU test of the dQ postprocess loads each default with it): ptxas spill
# bounds (bytes; the set itself spills none).
AROUND_CAUSAL = {tuple(o for o in CAUSAL if o != "lpt_order"): 0,
                 CAUSAL + ("dq_acc_order",): 8}


@pytest.mark.parametrize("opts", sorted(AROUND_CAUSAL), ids=ids)
def test_sets_around_the_causal_default_check_and_simulate(opts, ptx_of):
    """Cached candidates that check and simulate clean, within their spill
    bounds."""
    assert opts in attention_configs.bwd_option_sets(128)
    k = ab.build(cfg_of(128, True, opts))
    (report,) = k.simulate(SIM_ARGS, schedules=SCHEDULES)
    assert report.ok and report.schedules == SCHEDULES, report
    spills = spill_bytes(ptx_of(128, True, opts))
    if spills is None:
        pytest.skip("ptxas not installed")
    assert spills <= AROUND_CAUSAL[opts], spills
