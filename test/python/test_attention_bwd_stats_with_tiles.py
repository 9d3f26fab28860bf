"""The attention backward with LSE and dPsum on Q's and dO's stages
(``stats_with_tiles``, FA4's scheme), without a GPU: no 'lse' and 'dpsum'
pipelines; the producer's bulk copy of a step's LSE row lands on Q's full
barrier and dPsum's on dO's (each stage's tx_count counts its row: the
checker's check 5 holds them to it), into a row buffer per stage, and the
consumers read the rows between their Q / dO waits and those stages'
releases. On the d 64 and d 128 defaults
(``attention_configs.BWD_D64_OPTION_SETS``, ``BWD_D128_OPTION_SETS``) it
builds through ptxas with bounded spills, the checker and the simulator
accept it on the ragged GQA shape, the PTX has two waits and two releases
fewer per consumer step (and two acquires fewer per producer step), and
every planted backward mistake that applies is still rejected on it: the
LSE read from a released stage as Q's stage released before the LSE row on
it is loaded (the checker's load-after-release rule), each next to the
production build of the same set as its correct twin.
"""

import re

import pytest

from _attention_bwd_mistakes import SHARED_DS_STAGES_WITH, build_with_mistake
from _ptxas import spill_bytes
from test_attention_bwd import CAUGHT, SCHEDULES, SIM_ARGS, assert_caught
from test_attention_bwd_reduce_warp import DEFERRED_CAUGHT, HAND_OFF_CAUGHT, RACE_CAUGHT
from pipeline_mlir.chip_limits import SMEM_PER_BLOCK
from pipeline_mlir.kernels import attention_bwd as ab
from pipeline_mlir.ops import attention_configs

SWT = ("stats_with_tiles",)
# The defaults the option was measured against (H200, two passes: d 128
# 0.965-0.981x their time on all four rows, so d 128's default takes it; d
# 64 1.011-1.032x, so not there).
DEFAULTS = {64: ("dq_store_spread", "dq_deferred", "min_ctas", "dq_reduce_warp"),
            128: ("dq_split", "min_ctas", "dq_reduce_warp")}
# ptxas spill stores (bytes) on these builds: d 64 0 (as the default), d 128
# 4 full and 44 causal (the default 24 / 56).
SPILL_BOUND = {64: 0, 128: 64}
# With the rows on the tiles' stages the LSE mistake reads Q's released stage.
LSE_ON_Q_CAUGHT = (r"pipeline 'q': llvm.load reads the stage that consumer_release already "
                   r"handed back to the producer")


def cfg_of(head_dim, causal, opts):
    return ab.AttentionBwdConfig(**attention_configs.bwd_variant(head_dim, causal,
                                                                 options=opts)[1])


def ids(x):
    return "+".join(x) if isinstance(x, tuple) else str(x)


CASES = [(d, c) for d in (64, 128) for c in (False, True)]


def test_the_sets_are_cached_candidates():
    """The d 64 and d 128 defaults with the option are built into the kernel
    cache under the tag ``swt``."""
    for d in (64, 128):
        opts = DEFAULTS[d] + SWT
        assert opts in attention_configs.bwd_option_sets(d)
        for c in (False, True):
            name, over = attention_configs.bwd_variant(d, c, options=opts)
            assert attention_configs.BWD_CANDIDATES[name] == over
            assert name.endswith("_swt") and over["stats_with_tiles"] is True
            assert ab.AttentionBwdConfig(**over).name.endswith("_swt")


def test_the_op_takes_it_at_d64_and_d128():
    """``bwd_default_options``: d 128 (both masks) runs its measured set
    with the rows on the tiles' stages, and so does d 256 (with its score
    GEMMs split by queries, test_attention_bwd_split_scores.py); the kernel the op
    builds has no 'lse' or 'dpsum' pipeline (its name tagged ``_swt``).
    d 64 takes the rows on the tiles' stages with 128-query steps, full
    and causal (BWD_FULL_OPTIONS, BWD_CAUSAL_OPTIONS, measured there:
    test_attention_bwd_p_packed.py), not with its 64-query set."""
    pick = attention_configs.bwd_default_options
    for c in (False, True):
        # (causal: with the key blocks longest first, test_attention_bwd_lpt_order.py,
        # in FA4's order, test_attention_bwd_d128_candidates.py)
        # (full: FA4's 80-query step with dQ^T in the accumulator's order,
        # test_attention_bwd_m80.py)
        assert pick(128, c) == DEFAULTS[128] + SWT + (
            ("lpt_order", "dk_last", "ds_one_barrier") if c
            else ("dk_last", "ds_one_barrier", "block_m80", "dq_acc_order"))
        assert "stats_with_tiles" in pick(256, c) and "split_scores" in pick(256, c)
    assert "stats_with_tiles" not in attention_configs.BWD_DEFAULT_OPTIONS[64]
    for d, c in ((64, True), (128, False), (128, True), (64, False)):
        cfg = cfg_of(d, c, pick(d, c))
        assert cfg.stats_with_tiles and "_swt" in cfg.name
        assert cfg.block_m == (128 if d == 64 else 80 if not c else 64)


@pytest.mark.parametrize("head_dim,causal", CASES)
def test_checks_simulates_and_assembles(head_dim, causal):
    """Checked, assembled by ptxas with spills bounded (and no more than
    the default's), simulated clean; shared memory as planned."""
    from test_gemm_epilogue import _ptxas_spills

    cfg = cfg_of(head_dim, causal, DEFAULTS[head_dim] + SWT)
    k = ab.build(cfg)
    k.verify()
    assert len(k.compile()) > 0
    assert k.smem_bytes <= cfg.smem_bytes() <= SMEM_PER_BLOCK
    (report,) = k.simulate(SIM_ARGS, schedules=SCHEDULES)
    assert report.ok and report.schedules == SCHEDULES, report
    spills = _ptxas_spills(k.to_ptx()) or 0
    assert spills <= SPILL_BOUND[head_dim], spills
    base = _ptxas_spills(ab.build(cfg_of(head_dim, causal, DEFAULTS[head_dim])).to_ptx()) or 0
    assert spills <= base, (spills, base)


@pytest.mark.parametrize("head_dim,causal", [(128, False), (64, True)])
def test_two_waits_and_two_releases_fewer(head_dim, causal):
    """Against the default: the 'lse' and 'dpsum' pipelines are gone, so the
    PTX has one mbarrier wait site fewer for each of their waits (the
    consumers' two, the producer's two acquires, their two tails: 6) and
    two arrive sites fewer (the consumers' two releases, elected per warp),
    the same two bulk copies (now on Q's and dO's barriers), 4 x stages + 2
    fewer mbarriers (8 bytes each), and one LSE and one dPsum row buffer
    less."""
    plain_cfg = cfg_of(head_dim, causal, DEFAULTS[head_dim])
    cfg = cfg_of(head_dim, causal, DEFAULTS[head_dim] + SWT)
    plain_k, k = ab.build(plain_cfg), ab.build(cfg)
    plain, ptx = plain_k.to_ptx(), k.to_ptx()

    def count(pattern, text):
        return len(re.findall(pattern, text))
    waits = r"mbarrier\.try_wait"
    arrives = r"mbarrier\.arrive"
    bulk = r"cp\.async\.bulk\.shared::cluster\.global"
    # Each wait site loops on try_wait: count sites as the unique labels'
    # worth of try_wait instructions (the default's 21 against 11).
    assert count(waits, plain) - count(waits, ptx) == 10, (count(waits, plain),
                                                          count(waits, ptx))
    assert count(arrives, plain) - count(arrives, ptx) == 4, (count(arrives, plain),
                                                             count(arrives, ptx))
    assert count(bulk, plain) == count(bulk, ptx) == 2
    rows = 2 * cfg.row_bytes
    barriers = 8 * 2 * (2 * cfg.stages + 2)
    assert plain_cfg.smem_bytes() - cfg.smem_bytes() == rows + barriers
    # (the kernel's arena: also the alignment padding around the rows)
    assert plain_k.smem_bytes - k.smem_bytes >= rows + barriers


def test_the_rows_ride_on_the_tiles_stages():
    """The producer copies each row with its tile's pipeline and state, into
    the row buffer of that stage; Q's and dO's stages count the row's bytes
    (a stage of a tile and its row); the consumers' step takes LSE's state
    from Q's and dPsum's from dO's."""
    from pipeline_mlir.kernel import Kernel
    from pipeline_mlir.pipeline import PipelineUserType

    cfg = cfg_of(128, False, DEFAULTS[128] + SWT)
    k = Kernel("rings_probe", chip="sm_90a", block_dim=cfg.threads, params={})
    with k:
        rings = ab.Rings(k, cfg)
        states = rings.states(PipelineUserType.Consumer)
        q, lse, do, dpsum = rings.step_states(states)
    assert rings.lse.pipe is None and rings.dpsum.pipe is None
    assert rings.rows_of(rings.q) is rings.lse and rings.rows_of(rings.do) is rings.dpsum
    assert rings.lse.stages == rings.dpsum.stages == rings.q.stages == cfg.stages
    for ring in (rings.q, rings.do):
        assert ring.pipe.num_stages == cfg.stages
    assert len(states) == 2
    assert lse is q and dpsum is do and q is states[0] and do is states[1]


# The mistakes of test_attention_bwd.py that apply with the reduce warp
# (the consumers issue no reduce-add: their dropped fence is the hand-off's
# consumer_drops_dq_fence), planted on the d 128 causal and d 64 full builds.
PLANT_IN = [(128, True), (64, False)]


@pytest.mark.parametrize("head_dim,causal", PLANT_IN)
@pytest.mark.parametrize("mistake", sorted(set(CAUGHT) - {"dq_reduce_before_fence"}))
def test_backward_mistakes_are_rejected(mistake, head_dim, causal):
    """The dO release before dP^T retired (checker), the epilogue race
    (simulator), and the LSE read from a released stage: here Q's stage,
    which LSE's row rides on, released before the row is loaded (the
    checker's load-after-release rule, at the LSE loads)."""
    cfg = cfg_of(head_dim, causal, DEFAULTS[head_dim] + SWT)
    who, pattern = CAUGHT[mistake]
    if mistake == "lse_read_after_release":
        pattern = LSE_ON_Q_CAUGHT
    k = build_with_mistake(mistake, cfg)
    assert_caught(k, who, pattern)


def test_the_lse_mistake_is_the_tiles_release():
    """On this layout the LSE mistake is a Mainloop twin (no 'lse' ring to
    release), differing from the production stages in that one stage; on
    the default layout it stays SoftmaxGrad's."""
    import dataclasses

    from _attention_bwd_mistakes import STATS_WITH_TILES_STAGES_WITH, STAGES_WITH

    for name, stages in STATS_WITH_TILES_STAGES_WITH.items():
        assert name in STAGES_WITH
        changed = [f.name for f in dataclasses.fields(ab.Stages)
                   if getattr(stages, f.name) is not getattr(ab.STAGES, f.name)]
        assert changed == ["mainloop"], changed
    plain = build_with_mistake("lse_read_after_release", cfg_of(64, False, DEFAULTS[64]))
    from pipeline_mlir.compiler import CompileError
    with pytest.raises(CompileError) as err:
        plain.to_ptx()
    assert re.search(CAUGHT["lse_read_after_release"][1], str(err.value))


@pytest.mark.parametrize("head_dim,causal", PLANT_IN)
@pytest.mark.parametrize("mistake", sorted(HAND_OFF_CAUGHT))
def test_dropped_hand_off_waits_are_rejected(mistake, head_dim, causal):
    """The reduce warp not waiting on "dQ full", a consumer not waiting on
    "dQ empty": the checker's barrier counts (d 64 defers dQ: there the
    simulator's arrive counts, as on the default)."""
    from pipeline_mlir.compiler import CompileError

    cfg = cfg_of(head_dim, causal, DEFAULTS[head_dim] + SWT)
    k = build_with_mistake(mistake, cfg)
    if cfg.dq_deferred:
        k.to_ptx()
        (report,) = k.simulate(SIM_ARGS, schedules=SCHEDULES, check=False)
        assert report.counts == {"arrive-count": SCHEDULES}, report
        assert re.search(DEFERRED_CAUGHT, report.findings[0].message), \
            report.findings[0].message
        return
    with pytest.raises(CompileError) as err:
        k.to_ptx()
    assert re.search(HAND_OFF_CAUGHT[mistake], str(err.value)), str(err.value)


@pytest.mark.parametrize("head_dim,causal", PLANT_IN)
@pytest.mark.parametrize("mistake", sorted(RACE_CAUGHT))
def test_misplaced_hand_off_is_a_race(mistake, head_dim, causal):
    """The dQ hand-off's waits, arrive or proxy fence misplaced: the
    simulator's race detector, every schedule, between the consumer's
    stores and the reduce warp's reduce-add (either way round for the
    consumer's write before its wait on "dQ empty")."""
    k = build_with_mistake(mistake, cfg_of(head_dim, causal, DEFAULTS[head_dim] + SWT))
    k.to_ptx()
    (report,) = k.simulate(SIM_ARGS, schedules=SCHEDULES, check=False)
    assert report.counts == {"smem-race": SCHEDULES}, report
    message = report.findings[0].message
    assert re.search(RACE_CAUGHT[mistake], message), message


@pytest.mark.parametrize("mistake", sorted(SHARED_DS_STAGES_WITH))
def test_ds_hand_over_mistakes_are_races(mistake):
    """d 128 (dQ split by columns, two dS^T buffers): the hand-over's three
    wrong versions are still races in every schedule."""
    k = build_with_mistake(mistake, cfg_of(128, True, DEFAULTS[128] + SWT))
    k.to_ptx()
    (report,) = k.simulate(SIM_ARGS, schedules=SCHEDULES, check=False)
    assert report.counts == {"smem-race": SCHEDULES}, report


# The rows issued before their tiles' boxes (rows_first), on the sets it is
# a candidate on: the d 64 set and d 64 full's (FA4's d 64 tile), the d 128
# default, full and causal (with lpt_order).
RF = ("rows_first",)
M128_ALL = ("block_m128", "min_ctas", "dq_reduce_warp", "ds_one_barrier", "stat_shuffle",
            "stats_with_tiles")
RF_SETS = {64: (DEFAULTS[64] + SWT + RF, M128_ALL + RF),
           128: (DEFAULTS[128] + SWT + RF, DEFAULTS[128] + SWT + ("lpt_order",) + RF)}


def test_rows_first_sets_are_cached_and_need_the_rows_on_the_tiles():
    """Each ``rows_first`` set is a cached candidate tagged ``rf``; the
    option without ``stats_with_tiles`` (no row on a tile's stage) is
    refused."""
    for d, sets in RF_SETS.items():
        for opts in sets:
            assert opts in attention_configs.bwd_option_sets(d)
            for c in (False, True):
                name, over = attention_configs.bwd_variant(d, c, options=opts)
                assert attention_configs.BWD_CANDIDATES[name] == over
                assert name.endswith("_rf") and ab.AttentionBwdConfig(**over).name.endswith("_rf")
    with pytest.raises(ValueError, match="rows_first orders the LSE and dPsum row copies"):
        ab.AttentionBwdConfig(head_dim=64, rows_first=True)


def _load_order(ptx):
    """The kernel's loads into shared memory in PTX order: 'T' a tensor
    box, 'R' a row's bulk copy."""
    return "".join("T" if m.group(1) else "R" for m in re.finditer(
        r"cp\.async\.bulk\.(tensor\.\dd\.)?shared::cluster\.global", ptx))


@pytest.mark.parametrize("head_dim,opts", [(64, RF_SETS[64][0]), (128, RF_SETS[128][1])],
                         ids=ids)
def test_rows_first_issues_each_row_before_its_boxes(head_dim, opts):
    """Causal: checked and simulated clean on the ragged GQA shape; in the
    PTX K's and V's boxes, then per step LSE's row before Q's boxes and
    dPsum's before dO's (without the option each row after its boxes);
    ptxas spills those of the same set without it."""
    k = ab.build(cfg_of(head_dim, True, opts))
    (report,) = k.simulate(SIM_ARGS, schedules=SCHEDULES)
    assert report.ok and report.schedules == SCHEDULES, report
    ptx = k.to_ptx()
    base = ab.build(cfg_of(head_dim, True, opts[:-1])).to_ptx()
    assert re.fullmatch(r"T+(RT+){2}", _load_order(ptx)), _load_order(ptx)
    assert re.fullmatch(r"T+(T+R){2}", _load_order(base)), _load_order(base)
    spills = spill_bytes(ptx)
    if spills is not None:
        assert spills == spill_bytes(base)
