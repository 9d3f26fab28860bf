"""The attention backward's LSE and dPsum shuffles with immediate source
lanes (``shuffle_imm``), without a GPU. With ``stat_shuffle`` a value of
column group ``j`` comes from lane ``lane % 4 + 4 (j // g)``: a register per
distinct source (8 at 128-query steps), which ptxas spilled around dP^T's
wait on FA4's d 64 tile. ``shfl.sync.idx`` with segment mask 3 (``c`` =
0x31f) keeps the reading lane's own ``lane % 4`` and takes only ``4 (j //
g)`` from ``b``, a constant. Here: the PTX ISA's lane rule, walked over
every lane and value, reads the lane ``ShuffledColumns.source`` names (and
without the segment mask it does not); the option is refused without
``stat_shuffle`` and off in the op's defaults; its sets check, simulate
clean on the ragged GQA shape, shuffle with immediates only and spill less
than the same sets without it; the eight planted backward mistakes are
still rejected on it. Measured on an H200 (docs/attention.md) d 64 takes
it: full with dQ in the accumulator's order, causal on its set with the
shuffle.
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
from pipeline_mlir.kernels.attention_bwd.softmax_grad import ShuffledColumns
from pipeline_mlir.ops import attention_configs

SHI = ("shuffle_imm",)
M128 = ("block_m128", "min_ctas", "dq_reduce_warp", "ds_one_barrier")
D64_FULL = M128 + ("stat_shuffle", "stats_with_tiles")           # the op's d 64 full set
D64_CAUSAL_SSH = M128 + ("stat_shuffle", "stats_with_tiles", "p_packed", "lpt_order")
NEW_SETS = (D64_FULL + SHI, D64_FULL + SHI + ("dq_acc_order",),
            D64_CAUSAL_SSH + SHI, D64_CAUSAL_SSH + SHI + ("dq_acc_order",))
# ptxas spill stores (bytes), full / causal build of each set: 24 / 44,
# 0 / 40, 0 / 12, 0 / 0; the same sets without shuffle_imm 56 / 60,
# 20 / 32, 4 / 16, 0 / 12 (the 8 source lanes were the spilled values).
# Checked on the mask each set is meant for.
CASES = [(False, D64_FULL + SHI, 24), (False, D64_FULL + SHI + ("dq_acc_order",), 0),
         (True, D64_CAUSAL_SSH + SHI, 12), (True, D64_CAUSAL_SSH + SHI + ("dq_acc_order",), 0)]


def ids(x):
    return "+".join(x) if isinstance(x, tuple) else str(x)


@pytest.mark.parametrize("n", [64, 128])
def test_immediates_read_the_source_lane(n):
    """For every lane and every value ``k`` of its ColVector, the lane that
    ``shfl.sync.idx`` reads with ``immediates``' b and c (the PTX ISA's
    rule, ``shfl_idx_source``) is ``source``'s lane, and the held value is
    ``source``'s; with the plain clamp (c = 0x1F) the same b reads another
    lane for every lane with ``lane % 4`` != 0."""
    wrong = 0
    for lane in range(32):
        for k in range(n // 4):
            b, c, h = ShuffledColumns.immediates(n, k)
            src, held = ShuffledColumns.source(lane, n, k)
            assert (ShuffledColumns.shfl_idx_source(lane, b, c), h) == (src, held), (lane, k)
            assert 0 <= b < 32 and b % 4 == 0
            wrong += ShuffledColumns.shfl_idx_source(lane, b, 0x1F) != src
    assert wrong == 24 * (n // 4)
    # and the lane read holds that column: the held columns of the source
    col = ShuffledColumns.held_columns
    for lane in range(32):
        for k in range(n // 4):
            src, held = ShuffledColumns.source(lane, n, k)
            assert col(src, n, held) == (lane % 4) * 2 + 8 * (k // 2) + k % 2


def test_refused_without_the_shuffle_and_the_d64_defaults_take_it():
    """Refused without ``stat_shuffle``; its sets are cached candidates
    tagged ``shi``; d 64 full runs it with dQ in the accumulator's order
    and causal with the shuffle on its set (each measured faster on its
    row in two passes), no other head dim."""
    with pytest.raises(ValueError, match="shuffle_imm"):
        ab.AttentionBwdConfig(head_dim=64, block_m=128, shuffle_imm=True)
    for opts in NEW_SETS:
        assert opts in attention_configs.bwd_option_sets(64)
        for c in (False, True):
            name, over = attention_configs.bwd_variant(64, c, options=opts)
            assert attention_configs.BWD_CANDIDATES[name] == over
            assert name.endswith("_shi") and ab.AttentionBwdConfig(**over).name.endswith("_shi")
    pick = attention_configs.bwd_default_options
    assert pick(64, False) == D64_FULL + SHI + ("dq_acc_order",)
    assert pick(64, True) == D64_CAUSAL_SSH + SHI
    for d in (128, 256):
        for c in (False, True):
            assert "shuffle_imm" not in pick(d, c)


@pytest.mark.parametrize("causal,opts,bound", CASES, ids=ids)
def test_checks_simulates_and_spills_less(causal, opts, bound, ptx_of):
    """Checked, simulated clean on the ragged GQA shape, within its shared
    memory; every ``shfl.sync.idx`` of LSE and dPsum has an immediate b and
    c = 799 (0x31f), as many as without the option; ptxas spills within
    the bound and less than the same set without the option."""
    cfg = cfg_of(64, causal, opts)
    k = ab.build(cfg)
    k.verify()
    assert k.smem_bytes <= cfg.smem_bytes() <= SMEM_PER_BLOCK
    (report,) = k.simulate(SIM_ARGS, schedules=SCHEDULES)
    assert report.ok and report.schedules == SCHEDULES, report
    ptx = ptx_of(64, causal, opts)
    base_opts = tuple(o for o in opts if o != "shuffle_imm")
    base = ptx_of(64, causal, base_opts)
    imm = re.findall(r"shfl\.sync\.idx\.b32\s+%r\d+, %r\d+, \d+, 799, -1;", ptx)
    plain = re.findall(r"shfl\.sync\.idx\.b32\s+%r\d+, %r\d+, %r\d+, 31, -1;", base)
    assert len(imm) == len(plain) > 0, (len(imm), len(plain))
    assert not re.search(r"shfl\.sync\.idx\.b32\s+%r\d+, %r\d+, %r\d+, 31, -1;", ptx)
    spills = spill_bytes(ptx)
    if spills is None:
        pytest.skip("ptxas not installed")
    assert spills <= bound, spills
    assert spills < spill_bytes(base), (spills, spill_bytes(base))


# The eight planted mistakes, on d 64 full's set with the option (the one
# build that runs every kind of step: 128-query full, masked tail).
PLANT = D64_FULL + SHI


def assert_planted_mistake_caught(k, mistake):
    """A planted backward mistake on a set with LSE and dPsum on Q's and
    dO's stages and the dQ reduce warp: the checker's patterns (CAUGHT,
    the LSE read from Q's released stage, the reduce warp's dropped waits)
    or the simulator's race detector in every schedule (RACE_CAUGHT)."""
    from pipeline_mlir.compiler import CompileError

    if mistake in CAUGHT:
        who, pattern = CAUGHT[mistake]
        if mistake == "lse_read_after_release":
            pattern = LSE_ON_Q_CAUGHT.replace("consumer_release", "consumer[._]release")
        assert_caught(k, who, pattern)
    elif mistake in HAND_OFF_CAUGHT:
        with pytest.raises(CompileError) as err:
            k.to_ptx()
        assert re.search(HAND_OFF_CAUGHT[mistake], str(err.value)), str(err.value)
    else:
        k.to_ptx()
        (report,) = k.simulate(SIM_ARGS, schedules=SCHEDULES, check=False)
        assert report.counts == {"smem-race": SCHEDULES}, report
        assert re.search(RACE_CAUGHT[mistake], report.findings[0].message), \
            report.findings[0].message


@pytest.mark.parametrize("mistake", sorted(set(CAUGHT) - {"dq_reduce_before_fence"})
                         + sorted(HAND_OFF_CAUGHT) + sorted(RACE_CAUGHT))
def test_mistakes_are_rejected(mistake):
    """The dO release before dP^T retired, the LSE row read from Q's
    released stage (checker), the epilogue race (simulator), the reduce
    warp's dropped waits (checker), its misplaced waits and dropped proxy
    fence (race detector, every schedule)."""
    assert_planted_mistake_caught(build_with_mistake(mistake, cfg_of(64, False, PLANT)),
                                  mistake)
