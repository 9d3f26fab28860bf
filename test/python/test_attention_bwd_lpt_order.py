"""The attention backward's key blocks in longest-first order
(``AttentionBwdConfig.lpt_order``, ``schedule.key_block_of``), without a
GPU: the order is a permutation of the grid's (pair, key block) CTAs that
starts each group of ``LPT_PAIRS`` (batch, K/V head) pairs on its longest
causal CTAs and ends the grid on the shortest, the kernel's arithmetic
(folded on constants) gives the same pairs and key blocks as the Python
one, and the candidates (``attention_configs`` sets with ``lpt_order``)
build, check, simulate clean and assemble with the spills of the same sets
without it. The option adds no barrier and no shared memory: the order of
the grid is all it changes (dK and dV land where the block's pair and key
block say; the GPU tests compare them with fp32 on ragged GQA shapes).
"""

import re

import pytest

from _ptxas import spill_bytes
from test_attention_bwd import SCHEDULES
from pipeline_mlir.kernels import attention_bwd as ab
from pipeline_mlir.kernels.attention_bwd.schedule import LPT_PAIRS, key_block_of
from pipeline_mlir.ops import attention_configs

LPT = ("lpt_order",)
# The sets it is a candidate on: the d 64 set, d 64 full's set, the d 128
# default, d 256's plain configuration.
D64 = ("dq_store_spread", "dq_deferred", "min_ctas", "dq_reduce_warp")
M128_ALL = ("block_m128", "min_ctas", "dq_reduce_warp", "ds_one_barrier", "stat_shuffle",
            "stats_with_tiles")
D128 = ("dq_split", "min_ctas", "dq_reduce_warp", "stats_with_tiles")
M128_PK = ("block_m128", "min_ctas", "dq_reduce_warp", "ds_one_barrier", "stats_with_tiles",
           "p_packed")
NEW_SETS = {64: (D64 + LPT, M128_ALL + LPT, M128_PK + LPT), 128: (D128 + LPT,), 256: (LPT,)}
# 3 batch entries x 2 K/V heads: six pairs, a full group and a partial one.
SIM_ARGS = {"batch": 3, "heads": 4, "heads_kv": 2, "seqlen_q": 200, "seqlen_k": 300}


def cfg_of(head_dim, causal, opts):
    return ab.AttentionBwdConfig(**attention_configs.bwd_variant(head_dim, causal,
                                                                 options=opts)[1])


def steps_of(n_block, n_blocks, block_n=128, block_m=64, seqlen=None):
    """Causal steps of key block ``n_block`` (square: queries = keys)."""
    seqlen = seqlen or n_blocks * block_n
    m_blocks = -(-seqlen // block_m)
    return m_blocks - n_block * block_n // block_m


def order_faults(mapping, pairs, n_blocks):
    """What is wrong with ``mapping`` (cta -> (pair, n_block)) as an
    lpt order: not a permutation of the grid, or a group whose causal
    steps grow along block order, or a grid not ending on the lightest."""
    got = [mapping(c) for c in range(pairs * n_blocks)]
    faults = []
    if sorted(got) != [(p, n) for p in range(pairs) for n in range(n_blocks)]:
        faults.append("not a permutation")
    span = LPT_PAIRS * n_blocks
    for g in range(0, len(got), span):
        work = [steps_of(n, n_blocks) for _, n in got[g:g + span]]
        if work != sorted(work, reverse=True):
            faults.append(f"group at {g} not longest first")
    last = pairs - (pairs - 1) // LPT_PAIRS * LPT_PAIRS    # pairs in the last group
    if any(n != n_blocks - 1 for _, n in got[-last:]):
        faults.append("the grid does not end on the last key blocks")
    return faults


def test_the_sets_are_cached_candidates():
    """Each new set is a candidate of its head dim in the kernel cache,
    tagged ``lpt``."""
    for d, sets in NEW_SETS.items():
        for opts in sets:
            assert opts in attention_configs.bwd_option_sets(d)
            for c in (False, True):
                name, over = attention_configs.bwd_variant(d, c, options=opts)
                assert attention_configs.BWD_CANDIDATES[name] == over
                assert "_lpt" in name and ab.AttentionBwdConfig(**over).name.endswith("_lpt")


@pytest.mark.parametrize("pairs", [1, 3, 4, 6, 9])
@pytest.mark.parametrize("n_blocks", [1, 2, 5])
def test_key_block_order(pairs, n_blocks):
    """``key_block_of`` with ``lpt_order``: every (pair, key block) once,
    each group longest first, the grid ending on the last key blocks; the
    default order (each pair's blocks in turn) is not that when a group
    has more than one pair and a pair more than one block; and an order
    that ignores the short last group is caught by the same check."""
    assert order_faults(lambda c: key_block_of(c, n_blocks, pairs, True), pairs,
                        n_blocks) == []
    assert [key_block_of(c, n_blocks, pairs, False) for c in range(pairs * n_blocks)] == [
        (p, n) for p in range(pairs) for n in range(n_blocks)]
    if pairs > 1 and n_blocks > 1:
        assert order_faults(lambda c: key_block_of(c, n_blocks, pairs, False), pairs,
                            n_blocks)

    def full_groups_only(c):               # the group's width taken as LPT_PAIRS always
        span = LPT_PAIRS * n_blocks
        at = c % span
        return c // span * LPT_PAIRS + at % LPT_PAIRS, at // LPT_PAIRS
    if pairs % LPT_PAIRS and n_blocks > 1:
        assert "not a permutation" in order_faults(full_groups_only, pairs, n_blocks)


def test_the_kernel_arithmetic_is_the_same():
    """``key_block_of`` on kernel values (i32 constants, canonicalized):
    the pairs and key blocks of the Python ints, for every block index of
    a grid with a partial last group."""
    import mlir.ir as ir
    from mlir.dialects import func
    from mlir.passmanager import PassManager

    from pipeline_mlir.kernel import Scalar

    pairs, n_blocks = 6, 3
    ctas = range(pairs * n_blocks)
    with ir.Context(), ir.Location.unknown():
        module = ir.Module.create()
        i32t = ir.IntegerType.get_signless(32)
        with ir.InsertionPoint(module.body):
            f = func.FuncOp("probe", ([], [i32t] * (2 * len(ctas))))
            with ir.InsertionPoint(f.add_entry_block()):
                out = []
                for c in ctas:
                    out += key_block_of(Scalar(c), Scalar(n_blocks), Scalar(pairs), True)
                func.ReturnOp([v.ir_value for v in out])
        PassManager.parse("builtin.module(canonicalize)").run(module.operation)
        ret = re.search(r"return (.*) :", str(module)).group(1).split(", ")
        consts = dict(re.findall(r"(%[\w-]+) = arith\.constant (-?\d+) : i32", str(module)))
        got = [int(consts[r]) for r in ret]
    want = [x for c in ctas for x in key_block_of(c, n_blocks, pairs, True)]
    assert got == want


@pytest.mark.parametrize("head_dim,opts", [(64, D64), (128, D128), (256, ())])
def test_checks_simulates_and_assembles(head_dim, opts):
    """Causal (where the order matters), with six (batch, K/V head) pairs:
    checked, simulated clean, ptxas spills those of the same set without
    ``lpt_order``; the order's integer divisions are in the kernel."""
    cfg = cfg_of(head_dim, True, opts + LPT)
    k = ab.build(cfg)
    k.verify()
    if head_dim != 256:                      # (the simulator's time: two of three)
        (report,) = k.simulate(SIM_ARGS, schedules=SCHEDULES)
        assert report.ok and report.schedules == SCHEDULES, report
    ptx = k.to_ptx()
    base = ab.build(cfg_of(head_dim, True, opts)).to_ptx()
    # the group's width (a runtime min) and the divisions by it
    assert len(re.findall(r"\bmin\.s32", ptx)) > len(re.findall(r"\bmin\.s32", base))
    spills = spill_bytes(ptx)
    if spills is None:
        pytest.skip("ptxas not installed")
    assert spills == spill_bytes(base), (spills, spill_bytes(base))
