"""The attention backward with dQ's reduce-adds issued by a warp of the
producer warpgroup (``AttentionBwdConfig.dq_reduce_warp``, FA4's hand-off;
pipeline_mlir/kernels/attention_bwd/dq_reduce_warp.py), without a GPU: the
checker and the simulator accept it on every head dim; its PTX holds the
hand-off (per consumer a "dQ full" barrier the consumer arrives on and the
reduce warp waits on, a "dQ empty" one the other way round, 160 threads
each) and none of the consumers' barriers before a reduce-add; the two
hand-off mistakes planted in it that drop a wait are rejected (by the
checker, or by the simulator where the consumers' waits sit behind a
condition on the step), the four that misplace a wait, an arrive or the
proxy fence by the simulator's race detector for plain shared memory, as
are three wrong dS^T hand-overs between the warpgroups (``shared_ds``),
and so are the backward's planted mistakes that apply to it.
"""

import re

import pytest

from _attention_bwd_mistakes import (REDUCE_WARP_STAGES_WITH, SHARED_DS_STAGES_WITH,
                                     build_with_mistake)
from test_attention_bwd import CAUGHT, SCHEDULES, SIM_ARGS, assert_caught
from pipeline_mlir.chip_limits import SMEM_PER_BLOCK
from pipeline_mlir.kernels import attention_bwd as ab
from pipeline_mlir.ops import attention_configs

REDUCE = "cp.reduce.async.bulk.tensor.3d.global.shared::cta.add"


def variant(head_dim, causal, opts):
    """The candidate's overrides (its kernel cache entry)."""
    return attention_configs.bwd_variant(head_dim, causal, options=opts)[1]


def without_reduce_warp(head_dim, causal, opts):
    return variant(head_dim, causal, tuple(o for o in opts if o != "dq_reduce_warp"))


# (head dim, causal, options): the op's d 64 and d 128 sets (with the
# reduce warp), 128-query steps, and d 256 (two column parts).
CASES = [(64, True, attention_configs.BWD_DEFAULT_OPTIONS[64]),
         (128, False, attention_configs.BWD_DEFAULT_OPTIONS[128]),
         (64, False, ("block_m128", "min_ctas", "dq_reduce_warp")),
         (256, True, ("dq_reduce_warp",))]


def norm(ptx):
    """The PTX's named-barrier ops, register ids dropped."""
    return [re.sub(r"%r\d+", "%r", re.sub(r"\s+", " ", b))
            for b in re.findall(r"\bbar\.(?:sync|arrive)[^;]*;", ptx)]


@pytest.mark.parametrize("head_dim,causal,opts", CASES,
                         ids=lambda x: "+".join(x) if isinstance(x, tuple) else str(x))
def test_reduce_warp_checks_simulates_and_hands_off(head_dim, causal, opts):
    """Checked, assembled and simulated clean (ragged GQA). In the PTX:
    the reduce warp waits on ids 7 and 8 and arrives on 9 and 10 (one
    arrive each before the loop: the start signal that the tile is free),
    the consumers arrive on 7 + cw and wait on 9 + cw (index: their
    warpgroup); every reduce-add is the reduce warp's (per step both
    consumers' tiles, each waited until read), and the consumers lost the
    128-thread barrier before each reduce-add. ptxas spills stay bounded
    (measured 0 at d 64 with 64-query steps, 24-120 elsewhere)."""
    from test_gemm_epilogue import _ptxas_spills

    want = variant(head_dim, causal, opts)
    k = ab.build(ab.AttentionBwdConfig(**want))
    k.verify()
    assert len(k.compile()) > 0
    (report,) = k.simulate(SIM_ARGS, schedules=SCHEDULES)
    assert report.ok and report.schedules == SCHEDULES, report
    ptx = k.to_ptx()
    bars = norm(ptx)
    for op in ("bar.sync 7, 160;", "bar.sync 8, 160;"):
        assert bars.count(op) == 1, bars
    for op in ("bar.arrive 9, 160;", "bar.arrive 10, 160;"):
        assert bars.count(op) == 2, bars
    assert "bar.arrive %r, 160;" in bars and "bar.sync %r, 160;" in bars
    cfg = k.config
    assert ptx.count(REDUCE) == 2 * cfg.dq_layout().boxes
    assert k.smem_bytes <= SMEM_PER_BLOCK and "_dqr" in cfg.name
    plain = norm(ab.build(ab.AttentionBwdConfig(
        **without_reduce_warp(head_dim, causal, opts))).to_ptx())
    # dq_deferred issues from two places (in the loop and after it).
    sites = 2 if cfg.dq_deferred else 1
    assert bars.count("bar.sync %r, 128;") == plain.count("bar.sync %r, 128;") - sites
    spills = _ptxas_spills(ptx)
    assert spills is None or spills <= 128, spills


def test_reduce_warp_is_refused_with_two_dq_tiles_or_deferred_parts():
    """One dQ tile per consumer, written whole in one step: not with
    ``dq_double_buffer``, nor ``dq_deferred`` where dQ has two parts a step
    (d 128 without the split, d 256)."""
    for ok in (dict(head_dim=64, dq_deferred=True), dict(head_dim=128, dq_split=True,
                                                          dq_deferred=True),
               dict(head_dim=128), dict(head_dim=256, stages=1), dict(head_dim=64, block_m=128)):
        assert ab.AttentionBwdConfig(dq_reduce_warp=True, **ok).dq_reduce_warp
    for bad in (dict(head_dim=64, dq_double_buffer=True),
                dict(head_dim=128, dq_split=True, dq_double_buffer=True),
                dict(head_dim=128, dq_deferred=True),
                dict(head_dim=256, stages=1, dq_deferred=True)):
        with pytest.raises(ValueError, match="dq_reduce_warp hands one dQ tile"):
            ab.AttentionBwdConfig(dq_reduce_warp=True, **bad)


HAND_OFF_CAUGHT = {
    # The consumers' arrivals on "dQ full" (128 threads) never complete it.
    "reduce_warp_skips_dq_full":
        r"named barrier id [78] waits for 160 threads but only 128 \(warps (4-7|8-11)\) "
        r"reach it: it never completes",
    # The reduce warp's arrivals on "dQ empty" (32 threads) never complete it.
    "consumer_skips_dq_empty":
        r"named barrier id (9|10) waits for 160 threads but only 32 \(warp 1\) reach it: "
        r"it never completes",
}
# With dq_deferred the consumers claim the tile inside ``if it > 0`` (a
# condition on the loop variable), which leaves ids 9 and 10 out of the
# checker's counts; the simulator sees the reduce warp arrive on "dQ
# empty" again before any consumer waited there.
DEFERRED_CAUGHT = (r"warp 1 of CTA 0 arrives on named barrier (9|10) of CTA 0 twice in one "
                   r"phase")


# Misplaced rather than dropped, every barrier count still matches: the
# simulator's race detector for plain shared memory (sim/smemrace.py)
# reports them, in every schedule, naming the two ops.
_WRITE_AFTER_REDUCE = (r"warp ([4-9]|1[01]) of CTA 0 writes shared memory at byte \d+ "
                       r"of CTA 0 with llvm.store at \S+ while nothing orders it after the read "
                       r"\(its end\) by warp 1 of CTA 0's nvvm.cp.async.bulk.tensor.reduce at ")
_READ_BEFORE_WRITE = (r"warp 1 of CTA 0 reads shared memory at byte \d+ of CTA 0 with "
                      r"nvvm.cp.async.bulk.tensor.reduce at \S+ while nothing orders it after "
                      r"the write by warp ([4-9]|1[01]) of CTA 0's llvm.store at ")
# The write found while the reduce-add still reads the words it lands on
# (the simulator follows a bulk read over the tile the store's source line
# wrote, not only its first word).
_WRITE_DURING_REDUCE = (r"warp ([4-9]|1[01]) of CTA 0 writes shared memory at byte \d+ "
                        r"of CTA 0 with llvm.store at \S+ while its asynchronous read is still "
                        r"in flight \(no wait retired it yet\): warp 1 of CTA 0's "
                        r"nvvm.cp.async.bulk.tensor.reduce at ")
RACE_CAUGHT = {
    # The reduce-add before the wait on "dQ full".
    "reduce_warp_issues_before_dq_full": _WRITE_AFTER_REDUCE,
    # "dQ empty" arrived before the bulk group's wait_group.read.
    "reduce_warp_gives_back_before_read": _WRITE_AFTER_REDUCE,
    # The consumer's wait on "dQ empty" after its writes of the tile: the
    # same race, reported from either side (with LSE and dPsum on the
    # tiles' stages at d 128, from the reduce-add's read; in FA4's order at
    # d 64 causal, while the reduce-add is still reading).
    "consumer_writes_before_dq_empty": "|".join((_WRITE_AFTER_REDUCE, _READ_BEFORE_WRITE,
                                                 _WRITE_DURING_REDUCE)),
    # The consumer's fence.proxy.async dropped (the checker's proxy-fence
    # rule does not see it: the reduce-add is another warp's).
    "consumer_drops_dq_fence":
        r"warp 1 of CTA 0 reads shared memory at byte \d+ of CTA 0 with "
        r"nvvm.cp.async.bulk.tensor.reduce at \S+ through the async proxy, and no "
        r"fence.proxy.async orders it after the generic write by warp "
        r"([4-9]|1[01]) of CTA 0's llvm.store at ",
}


def test_every_hand_off_mistake_has_its_case():
    assert set(HAND_OFF_CAUGHT) | set(RACE_CAUGHT) == set(REDUCE_WARP_STAGES_WITH)
    assert not set(HAND_OFF_CAUGHT) & set(RACE_CAUGHT)


@pytest.mark.parametrize("head_dim,causal,opts", CASES[:3],
                         ids=lambda x: "+".join(x) if isinstance(x, tuple) else str(x))
@pytest.mark.parametrize("mistake", sorted(HAND_OFF_CAUGHT))
def test_each_hand_off_mistake_is_rejected(mistake, head_dim, causal, opts):
    """The reduce warp issuing without waiting for "dQ full", and a
    consumer writing its tile without waiting for "dQ empty": the checker
    rejects both (a barrier only one side reaches), and where the
    consumers' side is behind a condition on the step (``dq_deferred``)
    the simulator does (``arrive-count``); the correct twin is the
    production build (``test_reduce_warp_checks_simulates_and_hands_off``).
    (Reordered rather than dropped, a wait after the reduce-add or the
    "dQ empty" arrive before the read, the counts still match: the dQ
    tiles are plain shared memory, whose hand-over between roles the
    simulator's race detector checks: ``test_each_misplaced_hand_off_is_a_race``.)"""
    from pipeline_mlir.compiler import CompileError

    cfg = ab.AttentionBwdConfig(**variant(head_dim, causal, opts))
    k = build_with_mistake(mistake, cfg)
    if not cfg.dq_deferred:
        with pytest.raises(CompileError) as err:
            k.to_ptx()
        assert re.search(HAND_OFF_CAUGHT[mistake], str(err.value)), str(err.value)
        return
    k.to_ptx()
    (report,) = k.simulate(SIM_ARGS, schedules=SCHEDULES, check=False)
    assert report.counts == {"arrive-count": SCHEDULES}, report
    assert re.search(DEFERRED_CAUGHT, report.findings[0].message), report.findings[0].message


@pytest.mark.parametrize("mistake", ["do_released_before_dp_retired", "epilogue_races_last_mma",
                                     "lse_read_after_release"])
def test_planted_mistakes_are_rejected_with_the_reduce_warp(mistake):
    """The backward's planted mistakes that do not concern the dQ
    reduce-add (test_attention_bwd.py) are rejected on the op's d 64
    set with the reduce warp too; the epilogue race by the simulator in
    at least one schedule (the reduce warp changes the interleavings)."""
    who, pattern = CAUGHT[mistake]
    cfg = ab.AttentionBwdConfig(**variant(64, True, attention_configs.BWD_DEFAULT_OPTIONS[64]))
    k = build_with_mistake(mistake, cfg)
    assert_caught(k, who, pattern)


@pytest.mark.parametrize("head_dim,causal,opts", CASES[:3],
                         ids=lambda x: "+".join(x) if isinstance(x, tuple) else str(x))
@pytest.mark.parametrize("mistake", sorted(RACE_CAUGHT))
def test_each_misplaced_hand_off_is_a_race(mistake, head_dim, causal, opts):
    """A wait, an arrive or the proxy fence of the dQ hand-off in the
    wrong place: the checker accepts the kernel (every barrier count
    matches), the simulator reports a race on the dQ tile in every
    schedule, naming both ops at the user's lines. The correct twin is the
    production build (``test_reduce_warp_checks_simulates_and_hands_off``)."""
    k = build_with_mistake(mistake, ab.AttentionBwdConfig(**variant(head_dim, causal, opts)))
    k.to_ptx()
    (report,) = k.simulate(SIM_ARGS, schedules=SCHEDULES, check=False)
    assert report.counts == {"smem-race": SCHEDULES}, report
    finding = report.findings[0]
    assert re.search(RACE_CAUGHT[mistake], finding.message), finding.message
    assert len(finding.where) == 2, finding.where


@pytest.mark.parametrize("head_dim,causal,opts", CASES[1:3],
                         ids=lambda x: "+".join(x) if isinstance(x, tuple) else str(x))
@pytest.mark.parametrize("mistake", sorted(SHARED_DS_STAGES_WITH))
def test_each_ds_hand_over_mistake_is_a_race(mistake, head_dim, causal, opts):
    """``shared_ds`` (dq_split at d 128, block_m128 at d 64): the barrier
    over both warpgroups before a warpgroup's dS^T stores instead of after
    them, that barrier over one warpgroup only, or one dS^T buffer for
    every step. The checker accepts them; the simulator reports the stores
    racing the other warpgroup's dQ GEMM (a wgmma reading the tile), or
    that GEMM reading before the stores, in every schedule. The twin is
    the production build, clean above."""
    cfg = ab.AttentionBwdConfig(**variant(head_dim, causal, opts))
    assert cfg.shared_ds
    k = build_with_mistake(mistake, cfg)
    k.to_ptx()
    (report,) = k.simulate(SIM_ARGS, schedules=SCHEDULES, check=False)
    assert report.counts == {"smem-race": SCHEDULES}, report
    pattern = (r"warp ([4-9]|1[01]) of CTA 0 (writes shared memory .* with llvm.store "
               r"at \S+ while nothing orders it after the read \(its end\) by|reads shared "
               r"memory .* with nvvm.wgmma.mma_async at \S+ while nothing orders it after the "
               r"write by) warp ([4-9]|1[01]) of CTA 0's")
    assert re.search(pattern, report.findings[0].message), report.findings[0].message
