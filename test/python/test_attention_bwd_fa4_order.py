"""The attention backward in FA4's order per step, without a GPU: dK's GEMM
issued after dQ's (``dk_last``) with dQ's reduce-adds issued by the
producer warpgroup's reduce warp (``dq_reduce_warp``), so that the dQ
tile's stores and hand-off run under dK; with two dS^T buffers the
hand-over's barrier over both consumers alone (``ds_one_barrier``); and
LSE and dPsum held by 8 lanes each and shuffled to the lane that uses a
value (``stat_shuffle``, FA4's d 64 registers: the shuffle's lane map is
walked here for every lane and value). The candidates (``attention_configs.BWD_D64_OPTION_SETS``,
``BWD_D128_OPTION_SETS``) build through ptxas with bounded spills, the
checker and the simulator accept them on the ragged GQA shape, and the
backward's planted mistakes (test_attention_bwd.py), the dQ hand-off's
(test_attention_bwd_reduce_warp.py) and the dS^T hand-over's are still
rejected on them, each next to the production build of the same set as
its correct twin.
"""

import re

import pytest

from _attention_bwd_mistakes import SHARED_DS_STAGES_WITH, build_with_mistake
from test_attention_bwd import CAUGHT, SCHEDULES, SIM_ARGS, assert_caught
from test_attention_bwd_reduce_warp import HAND_OFF_CAUGHT, RACE_CAUGHT, norm
from pipeline_mlir.chip_limits import SMEM_PER_BLOCK
from pipeline_mlir.kernels import attention_bwd as ab
from pipeline_mlir.ops import attention_configs

D128 = ("dq_split", "min_ctas", "dq_reduce_warp")          # the d 128 default
D128_DKL = D128 + ("dk_last",)
D128_DS1 = D128 + ("ds_one_barrier",)
D128_BOTH = D128 + ("dk_last", "ds_one_barrier")
D64_DKL = ("dq_store_spread", "min_ctas", "dq_reduce_warp", "dk_last")
M128_DKL = ("block_m128", "min_ctas", "dq_reduce_warp", "dk_last")
M128_BOTH = M128_DKL + ("ds_one_barrier",)
# LSE and dPsum shuffled from 8 lanes (stat_shuffle).
D128_SSH = D128 + ("stat_shuffle",)
D128_ALL = D128_BOTH + ("stat_shuffle",)
D64_SSH = ("dq_store_spread", "dq_deferred", "min_ctas", "dq_reduce_warp", "stat_shuffle")
M128_SSH = ("block_m128", "min_ctas", "dq_reduce_warp", "stat_shuffle")
M128_DS1_SSH = ("block_m128", "min_ctas", "dq_reduce_warp", "ds_one_barrier", "stat_shuffle")
M128_ALL = M128_BOTH + ("stat_shuffle",)
NEW_SETS = {128: (D128_DKL, D128_DS1, D128_BOTH, D128_SSH, D128_ALL),
            64: (D64_DKL, M128_DKL, M128_BOTH, M128_SSH, M128_DS1_SSH, M128_ALL, D64_SSH)}
# ptxas spill stores (bytes) measured on these builds: d 128 4-48 (the
# default 24 / 56), d 64 with 64-query steps 0, 128-query steps 52-144
# (without dk_last or stat_shuffle 84-100).
SPILL_BOUND = {128: 64, 64: 160}


def cfg_of(head_dim, causal, opts):
    return ab.AttentionBwdConfig(**attention_configs.bwd_variant(head_dim, causal,
                                                                 options=opts)[1])


CASES = [(d, c, opts) for d, sets in NEW_SETS.items() for opts in sets for c in (False, True)]


def ids(x):
    return "+".join(x) if isinstance(x, tuple) else str(x)


def test_the_new_sets_are_cached_candidates():
    """Every new set is built into the kernel cache at its head dim, causal
    and not, under its tags."""
    for d, sets in NEW_SETS.items():
        for opts in sets:
            assert opts in attention_configs.bwd_option_sets(d)
            for c in (False, True):
                name, over = attention_configs.bwd_variant(d, c, options=opts)
                assert attention_configs.BWD_CANDIDATES[name] == over
                tail = ("_ssh" if "stat_shuffle" in opts else
                        "_dqr_ds1" if "ds_one_barrier" in opts else "_dkl_dqr")
                assert name.endswith(tail), name


@pytest.mark.parametrize("head_dim,causal,opts", CASES, ids=ids)
def test_fa4_order_checks_simulates_and_assembles(head_dim, causal, opts):
    """Checked, assembled by ptxas with bounded spills, simulated clean;
    with ``ds_one_barrier`` the loop has one 128-thread barrier less than the
    same set without it."""
    from test_gemm_epilogue import _ptxas_spills

    cfg = cfg_of(head_dim, causal, opts)
    k = ab.build(cfg)
    k.verify()
    assert len(k.compile()) > 0
    assert k.smem_bytes <= SMEM_PER_BLOCK
    (report,) = k.simulate(SIM_ARGS, schedules=SCHEDULES)
    assert report.ok and report.schedules == SCHEDULES, report
    ptx = k.to_ptx()
    spills = _ptxas_spills(ptx)
    assert spills is None or spills <= SPILL_BOUND[head_dim], spills
    if head_dim == 64 and cfg.block_m == 64:
        assert not spills, spills
    if cfg.ds_one_barrier:
        without = cfg_of(head_dim, causal, tuple(o for o in opts if o != "ds_one_barrier"))
        plain = norm(ab.build(without).to_ptx())
        bars = norm(ptx)
        assert (bars.count("bar.sync %r, 128;")
                == plain.count("bar.sync %r, 128;") - 1), (bars, plain)


def test_dk_last_issues_dk_after_dq():
    """``dk_last`` on the d 128 default: in the loop's PTX the dK GEMM's
    register-A wgmma come after the dQ GEMM's (both operands from shared
    memory), and a ``wgmma.wait_group.sync.aligned 1`` lets dK run while dQ
    is stored; the default issues dV and dK together before dQ."""
    def order(opts):
        ptx = cfg_of(128, False, opts)
        ptx = ab.build(ptx).to_ptx()
        kinds = []
        for m in re.finditer(r"wgmma\.mma_async\.sync\.aligned\.m64n\d+k16\.f32\.bf16\.bf16 "
                             r"\{[^}]*\}, (\{|%rd)", ptx):
            kinds.append("R" if m.group(1) == "{" else "S")
        return "".join(kinds), ptx
    dflt, _ = order(D128)
    dkl, ptx = order(D128_DKL)
    # S^T, dP^T (shared), dV + dK (register A), dQ (shared) per step by
    # default; dV (register), dQ (shared), dK (register) with dk_last.
    squeeze = lambda s: re.sub(r"(.)\1+", r"\1", s)                  # noqa: E731
    assert "SRS" in squeeze(dflt) and "SRSR" not in squeeze(dflt), squeeze(dflt)
    assert "SRSR" in squeeze(dkl), squeeze(dkl)
    assert re.search(r"wgmma\.wait_group\.sync\.aligned\s+1;", ptx)


def test_ds_one_barrier_is_refused_without_two_ds_buffers_or_the_reduce_warp():
    """Leaving out the barrier before the dS^T stores is right only with
    two dS^T buffers handed over by the barrier over both consumers and the
    dQ tile claimed from the reduce warp."""
    for ok in (dict(head_dim=128, dq_split=True, dq_reduce_warp=True),
               dict(head_dim=64, block_m=128, dq_reduce_warp=True)):
        assert ab.AttentionBwdConfig(ds_one_barrier=True, **ok).name.endswith("_ds1")
    for bad in (dict(head_dim=128, dq_split=True), dict(head_dim=64, block_m=128),
                dict(head_dim=64, dq_reduce_warp=True), dict(head_dim=128, dq_reduce_warp=True),
                dict(head_dim=256, stages=1, dq_reduce_warp=True)):
        with pytest.raises(ValueError, match="ds_one_barrier needs two dS"):
            ab.AttentionBwdConfig(ds_one_barrier=True, **bad)


# The two builds the mistakes are planted in: FA4's order with the
# hand-over's one barrier at d 128 (causal) and on 128-query steps at d 64,
# and dk_last with the reduce warp on 64-query steps.
PLANT_IN = [(128, True, D128_BOTH), (64, False, M128_BOTH), (64, True, D64_DKL)]


@pytest.mark.parametrize("head_dim,causal,opts", PLANT_IN, ids=ids)
@pytest.mark.parametrize("mistake", sorted(set(CAUGHT) - {"dq_reduce_before_fence"}))
def test_backward_mistakes_are_rejected_in_fa4_order(mistake, head_dim, causal, opts):
    """The backward's planted mistakes that apply with the reduce warp
    (the consumers issue no reduce-add: their dropped fence is
    ``consumer_drops_dq_fence`` below): rejected by the checker, or found
    by the simulator (the epilogue race in at least one schedule)."""
    who, pattern = CAUGHT[mistake]
    k = build_with_mistake(mistake, cfg_of(head_dim, causal, opts))
    assert_caught(k, who, pattern)


@pytest.mark.parametrize("head_dim,causal,opts", PLANT_IN, ids=ids)
@pytest.mark.parametrize("mistake", sorted(HAND_OFF_CAUGHT))
def test_dropped_hand_off_waits_are_rejected_in_fa4_order(mistake, head_dim, causal, opts):
    """The reduce warp not waiting on "dQ full", a consumer not waiting on
    "dQ empty": the checker's barrier counts."""
    from pipeline_mlir.compiler import CompileError

    k = build_with_mistake(mistake, cfg_of(head_dim, causal, opts))
    with pytest.raises(CompileError) as err:
        k.to_ptx()
    assert re.search(HAND_OFF_CAUGHT[mistake], str(err.value)), str(err.value)


@pytest.mark.parametrize("head_dim,causal,opts", PLANT_IN, ids=ids)
@pytest.mark.parametrize("mistake", sorted(RACE_CAUGHT))
def test_misplaced_hand_off_is_a_race_in_fa4_order(mistake, head_dim, causal, opts):
    """The dQ hand-off's waits, arrive or proxy fence misplaced (dQ now
    stored while dK runs): the simulator's race detector, every schedule."""
    k = build_with_mistake(mistake, cfg_of(head_dim, causal, opts))
    k.to_ptx()
    (report,) = k.simulate(SIM_ARGS, schedules=SCHEDULES, check=False)
    assert report.counts == {"smem-race": SCHEDULES}, report
    assert re.search(RACE_CAUGHT[mistake], report.findings[0].message), \
        report.findings[0].message


@pytest.mark.parametrize("head_dim,causal,opts", PLANT_IN[:2], ids=ids)
@pytest.mark.parametrize("mistake", sorted(SHARED_DS_STAGES_WITH))
def test_ds_hand_over_mistakes_are_races_with_one_barrier(mistake, head_dim, causal, opts):
    """Without the barrier before the dS^T stores, the hand-over's three
    wrong versions (the barrier over both before the stores, over one
    warpgroup only, one dS^T buffer) are still races in every schedule:
    the barrier that remains is what orders the tiles."""
    cfg = cfg_of(head_dim, causal, opts)
    assert cfg.shared_ds and cfg.ds_one_barrier
    k = build_with_mistake(mistake, cfg)
    k.to_ptx()
    (report,) = k.simulate(SIM_ARGS, schedules=SCHEDULES, check=False)
    assert report.counts == {"smem-race": SCHEDULES}, report


@pytest.mark.parametrize("n", [64, 128])
def test_shuffled_columns_reach_every_lane(n):
    """``ShuffledColumns``: each lane loads ``n / 32`` of the ``n`` values,
    the 8 lanes of one ``lane % 4`` together exactly the ``n / 4`` columns
    they all need, and every value a lane needs (ColVector index ``k``:
    column ``8 (k // 2) + 2 (lane % 4) + k % 2``) comes from a lane of the
    same ``lane % 4`` that holds that column."""
    from pipeline_mlir.kernels.attention_bwd.softmax_grad import ShuffledColumns

    per_lane = n // 32
    for q in range(4):
        needed = {8 * (k // 2) + 2 * q + k % 2 for k in range(n // 4)}
        held = [ShuffledColumns.held_columns(4 * t + q, n, h)
                for t in range(8) for h in range(per_lane)]
        assert sorted(held) == sorted(needed), (q, held)
    for lane in range(32):
        for k in range(n // 4):
            src, h = ShuffledColumns.source(lane, n, k)
            assert 0 <= src < 32 and src % 4 == lane % 4 and 0 <= h < per_lane
            assert (ShuffledColumns.held_columns(src, n, h)
                    == 8 * (k // 2) + 2 * (lane % 4) + k % 2), (lane, k)


@pytest.mark.parametrize("head_dim,causal,opts",
                         [(128, True, D128), (64, False, ("block_m128", "min_ctas",
                                                           "dq_reduce_warp"))], ids=ids)
def test_stat_shuffle_trades_registers_for_shuffles(head_dim, causal, opts):
    """With ``stat_shuffle`` each step shuffles every LSE and dPsum value a
    thread uses (``shfl.sync.idx``: ``block_m / 4`` of each), loads ``4 /
    32`` of them, and ptxas spills less: d 128 causal 20 bytes against 56,
    128-query steps 64 against 88."""
    from test_gemm_epilogue import _ptxas_spills

    plain = ab.build(cfg_of(head_dim, causal, opts)).to_ptx()
    cfg = cfg_of(head_dim, causal, opts + ("stat_shuffle",))
    shuffled = ab.build(cfg).to_ptx()
    idx = r"shfl\.sync\.idx\.b32"
    assert (len(re.findall(idx, shuffled)) - len(re.findall(idx, plain))
            == 2 * cfg.block_m // 4)
    before, after = _ptxas_spills(plain), _ptxas_spills(shuffled)
    if before is not None:
        assert after < before, (before, after)


@pytest.mark.parametrize("head_dim,causal,opts",
                         [(128, True, D128_ALL), (64, False, M128_ALL), (64, True, D64_SSH)],
                         ids=ids)
@pytest.mark.parametrize("mistake", sorted(set(CAUGHT) - {"dq_reduce_before_fence"}))
def test_backward_mistakes_are_rejected_with_stat_shuffle(mistake, head_dim, causal, opts):
    """The planted mistakes on builds with ``stat_shuffle``: the LSE stage
    released before its (now 8-lane) loads is still refused by the
    checker, the others as without it."""
    test_backward_mistakes_are_rejected_in_fa4_order(mistake, head_dim, causal, opts)
