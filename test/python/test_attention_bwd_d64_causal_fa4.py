"""FA4's order on d 64 causal's set, without a GPU. d 64 causal runs FA4's
d 64 tile (128-query steps, the dS^T hand-over's one barrier, LSE and
dPsum shuffled from 8 lanes by immediate source lanes, P^T packed early,
the key blocks longest first). The candidates add dK's GEMM after dQ's
(``dk_last``: dQ's stores and hand-off run under dK) with dQ in the
accumulator's order (``dq_acc_order``), and the same with the rows
issued before their tiles' boxes (``rows_first``). With ``dk_last`` alone
ptxas spills 16 bytes; with dQ in the accumulator's order none.

Here: the sets are cached candidates and not the causal default; each
checks and simulates clean on the ragged GQA shape within its
shared-memory plan, dK's GEMM comes after dQ's in its PTX, ptxas spills
nothing and serializes no wgmma; the eight planted backward mistakes are
still rejected on the first set. Measured on an H200 (docs/attention.md):
0.997-1.005x the set's backward time in two passes, not taken.
"""

import re

import pytest

from _attention_bwd_builds import cfg_of, ptx_of  # noqa: F401  (a fixture)
from _attention_bwd_mistakes import build_with_mistake
from _ptxas import report as ptxas_report, spill_bytes
from test_attention_bwd import CAUGHT, SCHEDULES, SIM_ARGS
from test_attention_bwd_reduce_warp import HAND_OFF_CAUGHT, RACE_CAUGHT
from test_attention_bwd_shuffle_imm import assert_planted_mistake_caught
from pipeline_mlir.chip_limits import SMEM_PER_BLOCK
from pipeline_mlir.ops import attention_configs
from pipeline_mlir.kernels import attention_bwd as ab

CAUSAL = ("block_m128", "min_ctas", "dq_reduce_warp", "ds_one_barrier", "stat_shuffle",
          "stats_with_tiles", "p_packed", "lpt_order", "shuffle_imm")
FA4 = CAUSAL + ("dk_last", "dq_acc_order")
SETS = (FA4, FA4 + ("rows_first",))
# ptxas's note that it serializes the wgmma instructions for want of registers.
SERIALIZED = "C7512"


def ids(x):
    return "+".join(x) if isinstance(x, tuple) else str(x)


def test_the_sets_are_cached_candidates_not_defaults():
    """Both sets (full and causal builds) are d 64 candidates in the
    kernel cache, tagged ``dkl`` and ``dqa``; d 64 causal's default is its
    set without them."""
    assert attention_configs.bwd_default_options(64, True) == CAUSAL
    for opts in SETS:
        assert opts in attention_configs.bwd_option_sets(64)
        for c in (False, True):
            name, over = attention_configs.bwd_variant(64, c, options=opts)
            assert attention_configs.BWD_CANDIDATES[name] == over
            assert "_dkl" in name and "_dqa" in name
            cfg = ab.AttentionBwdConfig(**over)
            assert cfg.dk_last and cfg.dq_acc_order and cfg.block_m == 128


@pytest.mark.parametrize("opts", SETS, ids=ids)
def test_checks_simulates_and_assembles_without_spills(opts, ptx_of):
    """Checked and simulated clean on the ragged GQA shape, shared memory
    within its plan; ptxas spills no bytes and serializes no wgmma, where
    the set with dk_last alone spills."""
    cfg = cfg_of(64, True, opts)
    k = ab.build(cfg)
    k.verify()
    assert k.smem_bytes <= cfg.smem_bytes() <= SMEM_PER_BLOCK
    (report,) = k.simulate(SIM_ARGS, schedules=SCHEDULES)
    assert report.ok and report.schedules == SCHEDULES, report
    ptx = ptx_of(64, True, opts)
    text = ptxas_report(ptx)
    if text is None:
        pytest.skip("ptxas not installed")
    assert SERIALIZED not in text, text
    assert spill_bytes(ptx) == 0
    assert spill_bytes(ptx_of(64, True, CAUSAL + ("dk_last",))) > 0


def wgmma_order(ptx):
    """The kernel's wgmma in PTX order, runs of one kind squeezed: R for a
    register A, S for both operands from shared memory, with N (at d 64
    dV and dK are R64, dQ S64, S^T and dP^T S128)."""
    kinds = [("R" if a == "{" else "S") + n for n, a in re.findall(
        r"wgmma\.mma_async\.sync\.aligned\.m64n(\d+)k16\.f32\.bf16\.bf16 "
        r"\{[^}]*\}, (\{|%rd)", ptx)]
    return " ".join(k for i, k in enumerate(kinds) if i == 0 or kinds[i - 1] != k)


def test_dk_gemm_after_dq_gemm(ptx_of):
    """FA4's order in the PTX: dV (register A), dQ (shared), dK (register
    A), and a wait_group 1 lets dK run while dQ is stored; the set issues
    dV and dK together before dQ."""
    assert wgmma_order(ptx_of(64, True, FA4)) == "R64 S64 R64 S128"
    assert wgmma_order(ptx_of(64, True, CAUSAL)) == "R64 S64 S128"
    assert re.search(r"wgmma\.wait_group\.sync\.aligned\s+1;", ptx_of(64, True, FA4))


# The eight planted mistakes: the backward's (less the dQ fence, which the
# reduce warp's own cover), the reduce warp's hand-off and race ones.
MISTAKES = (sorted(set(CAUGHT) - {"dq_reduce_before_fence"}) + sorted(HAND_OFF_CAUGHT)
            + sorted(RACE_CAUGHT))


@pytest.mark.parametrize("mistake", MISTAKES)
def test_mistakes_are_rejected(mistake):
    """On the first set (causal): the dO release before dP^T retired and
    the LSE row read from Q's released stage (checker), the epilogue race
    (simulator), the reduce warp's dropped waits (checker), its misplaced
    waits and dropped proxy fence (race detector, every schedule)."""
    assert_planted_mistake_caught(build_with_mistake(mistake, cfg_of(64, True, FA4)), mistake)
