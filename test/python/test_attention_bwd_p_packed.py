"""The attention backward with P^T packed to bf16 before dP^T's wait
(``p_packed``), without a GPU: P^T is masked as dV's packed register A
(``softmax_grad.packed_where``: a masked value's half of the i32 cleared)
and dS^T = P^T (dP^T - dPsum) reads P^T back from those registers
(``unpack_bf16``), so at 128-query steps (FA4's d 64 tile) P^T's 64 fp32
registers die before dP^T's accumulator is read. On the new candidates
(``attention_configs.BWD_D64_OPTION_SETS``, ``BWD_D128_OPTION_SETS``) it
builds through ptxas with spills bounded and fewer than without it, the
checker and the simulator accept it on the ragged GQA shape, and the
backward's planted mistakes that apply (test_attention_bwd.py), the dQ
hand-off's (test_attention_bwd_reduce_warp.py) and the dS^T hand-over's
are still rejected on it. The packed mask is folded on constants against
the fp32 mask before packing. Measured on an H200 it is slower than the
same sets without it (docs/attention.md): off; the set without it,
``M128_ALL``, is the op's d 64 full backward (``BWD_FULL_OPTIONS``), and
its build and planted mistakes are checked here too.
"""

import re
import struct

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

PK = ("p_packed",)
M128 = ("block_m128", "min_ctas", "dq_reduce_warp", "ds_one_barrier")
# FA4's d 64 tile with the shuffle and the rows on the tiles' stages: the
# lever; and the same without p_packed, its twin for the spills.
M128_ALL = M128 + ("stat_shuffle", "stats_with_tiles")
# The op's d 64 causal set: FA4's tile with the rows on the tiles' stages,
# P^T packed early and the key blocks longest first (lpt_order).
D64_CAUSAL = M128 + ("stats_with_tiles",) + PK + ("lpt_order",)
D128 = ("dq_split", "min_ctas", "dq_reduce_warp", "stats_with_tiles")   # d 128 default
NEW_SETS = {64: (M128_ALL + PK, M128 + ("stat_shuffle",) + PK,
                 M128 + ("stats_with_tiles",) + PK, M128_ALL),
            128: (D128 + PK,)}
# ptxas spill stores (bytes), full / causal: M128_ALL 56 / 60, with p_packed
# 4 / 16; without the shuffle 16 / 56; d 128 4 / 36 (its default 4 / 44).
SPILL_BOUND = {M128_ALL + PK: 16, D128 + PK: 44}


def ids(x):
    return "+".join(x) if isinstance(x, tuple) else str(x)


def test_the_sets_are_cached_candidates():
    """Each new set is a candidate of its head dim in the kernel cache;
    ``p_packed`` is tagged ``pk``, off in the op's defaults."""
    for d, sets in NEW_SETS.items():
        for opts in sets:
            assert opts in attention_configs.bwd_option_sets(d)
            for c in (False, True):
                name, over = attention_configs.bwd_variant(d, c, options=opts)
                assert attention_configs.BWD_CANDIDATES[name] == over
                assert ("p_packed" in opts) is name.endswith("_pk")
                assert ab.AttentionBwdConfig(**over).name.endswith("_pk") is ("p_packed" in opts)
    for d in (64, 128, 256):
        for c in (False, True):
            # only d 64 causal (FA4's tile, rows on the tiles' stages, lpt_order)
            on = (d, c) == (64, True)
            assert ("p_packed" in attention_configs.bwd_default_options(d, c)) is on
            assert cfg_of(d, c, attention_configs.bwd_default_options(d, c)).p_packed is on


CASES = [(64, c, M128_ALL + PK) for c in (False, True)] + [(128, True, D128 + PK)]


@pytest.mark.parametrize("head_dim,causal,opts", CASES, ids=ids)
def test_checks_simulates_and_assembles(head_dim, causal, opts, ptx_of):
    """Checked (``to_ptx``), simulated clean on the ragged GQA shape,
    shared memory as planned; ptxas spills within the bound and below the
    same set's without ``p_packed``."""
    cfg = cfg_of(head_dim, causal, opts)
    k = ab.build(cfg)
    k.verify()
    assert k.smem_bytes <= cfg.smem_bytes() <= SMEM_PER_BLOCK
    (report,) = k.simulate(SIM_ARGS, schedules=SCHEDULES)
    assert report.ok and report.schedules == SCHEDULES, report
    spills = spill_bytes(ptx_of(head_dim, causal, opts))
    if spills is None:
        pytest.skip("ptxas not installed")
    assert spills <= SPILL_BOUND[opts], spills
    base = spill_bytes(ptx_of(head_dim, causal, tuple(o for o in opts if o != "p_packed")))
    assert spills < base, (spills, base)


def test_the_packed_p_is_what_dv_and_ds_read(ptx_of):
    """In the PTX of the 128-query lever, P^T is converted to bf16 pairs
    once (``cvt.rn.bf16x2.f32``, 64 per step: P^T's and dS^T's 32 each) and
    widened back for dS^T by bit shifts / masks, not a second conversion
    from fp32: the same count as without p_packed."""
    with_pk = ptx_of(64, False, M128_ALL + PK)
    without = ptx_of(64, False, M128_ALL)
    cvt = r"cvt\.rn\.bf16x2\.f32"
    assert len(re.findall(cvt, with_pk)) == len(re.findall(cvt, without)), (
        len(re.findall(cvt, with_pk)), len(re.findall(cvt, without)))


def _bf16_bits(x):
    """bf16 of ``x`` (round to nearest even), as 16 bits."""
    b = struct.unpack("<I", struct.pack("<f", x))[0]
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) & 0xFFFF


def test_packed_where_clears_exactly_the_masked_halves():
    """``packed_where`` on constant registers, folded: each i32 keeps the
    bf16 halves whose (row, column) ``keep`` holds and has +0 in the others
    (the bits ``Fragment.where(keep, 0.0)`` then packing gives), for
    Python-bool and runtime (i1) conditions alike."""
    import mlir.ir as ir
    from mlir.dialects import arith, func
    from mlir.passmanager import PassManager

    from pipeline_mlir.kernel.fragment import Fragment, OperandA
    from pipeline_mlir.kernels.attention_bwd.softmax_grad import packed_where

    n = 32                                        # 2 k-slices, 16 values a thread
    values = [0.5 + 0.37 * i * (-1) ** i for i in range(n // 2)]
    words = [_bf16_bits(values[2 * j]) | (_bf16_bits(values[2 * j + 1]) << 16)
             for j in range(n // 4)]

    def keep_of(r, c):
        return (r + 3 * c) % 5 != 0               # a pattern over rows and columns

    with ir.Context(), ir.Location.unknown():
        module = ir.Module.create()
        i32t, i1t = ir.IntegerType.get_signless(32), ir.IntegerType.get_signless(1)
        with ir.InsertionPoint(module.body):
            f = func.FuncOp("probe", ([], [i32t] * len(words)))
            with ir.InsertionPoint(f.add_entry_block()):
                regs = [arith.constant(i32t, w - (1 << 32) if w >= 1 << 31 else w)
                        for w in words]
                op = OperandA("bf16", [regs[4 * s:4 * s + 4] for s in range(len(regs) // 4)])

                def keep(r, c):
                    k = keep_of(r, c)
                    # Odd columns as i1 constants (runtime selects), even
                    # ones as Python bools (no op or a plain clear).
                    return arith.constant(i1t, int(k)) if c % 2 else k
                out = packed_where(op, keep)
                func.ReturnOp([r for sl in out.slices for r in sl])
        PassManager.parse("builtin.module(canonicalize)").run(module.operation)
        ret = re.search(r"return (.*) :", str(module)).group(1).split(", ")
        consts = dict(re.findall(r"(%[\w-]+) = arith\.constant (-?\d+) : i32", str(module)))
        got = [int(consts[r]) & 0xFFFFFFFF for r in ret]
    want = []
    for j, w in enumerate(words):
        row, col = Fragment.element_offset(2 * j)
        lo = w & 0xFFFF if keep_of(row, col) else 0
        hi = w >> 16 if keep_of(row, col + 1) else 0
        want.append(lo | (hi << 16))
    assert got == want, [hex(x) for x in got]
    assert any(x != w for x, w in zip(want, words))   # something was masked


# Planted on the lever: 128-query full (the mask's tail only) and causal
# (the diagonal too).
PLANT_IN = [(64, False, M128_ALL + PK), (64, True, M128_ALL + PK)]


@pytest.mark.parametrize("head_dim,causal,opts", PLANT_IN, ids=ids)
@pytest.mark.parametrize("mistake", sorted(set(CAUGHT) - {"dq_reduce_before_fence"}))
def test_backward_mistakes_are_rejected(mistake, head_dim, causal, opts):
    """The dO release before dP^T retired (checker), the epilogue race
    (simulator), and the LSE row read from Q's released stage (checker)."""
    who, pattern = CAUGHT[mistake]
    if mistake == "lse_read_after_release":
        # (at 128-query steps the message keeps the checker's own name of
        # the verb, consumer.release, the same without p_packed)
        pattern = LSE_ON_Q_CAUGHT.replace("consumer_release", "consumer[._]release")
    k = build_with_mistake(mistake, cfg_of(head_dim, causal, opts))
    assert_caught(k, who, pattern)


@pytest.mark.parametrize("mistake", sorted(HAND_OFF_CAUGHT))
def test_dropped_hand_off_waits_are_rejected(mistake):
    """The reduce warp not waiting on "dQ full", a consumer not waiting on
    "dQ empty": the checker's barrier counts."""
    from pipeline_mlir.compiler import CompileError

    k = build_with_mistake(mistake, cfg_of(*PLANT_IN[1][:2], PLANT_IN[1][2]))
    with pytest.raises(CompileError) as err:
        k.to_ptx()
    assert re.search(HAND_OFF_CAUGHT[mistake], str(err.value)), str(err.value)


@pytest.mark.parametrize("mistake", sorted(RACE_CAUGHT))
def test_misplaced_hand_off_is_a_race(mistake):
    """The dQ hand-off's waits, arrive or proxy fence misplaced: the
    simulator's race detector, every schedule."""
    k = build_with_mistake(mistake, cfg_of(*PLANT_IN[0][:2], PLANT_IN[0][2]))
    k.to_ptx()
    (report,) = k.simulate(SIM_ARGS, schedules=SCHEDULES, check=False)
    assert report.counts == {"smem-race": SCHEDULES}, report
    assert re.search(RACE_CAUGHT[mistake], report.findings[0].message), \
        report.findings[0].message


def test_d64_full_runs_fa4s_tile_with_the_rows_on_the_tiles_stages(ptx_of):
    """The op's d 64 full backward (``bwd_default_options(64, False)``) is
    ``M128_ALL`` without p_packed, measured faster than the d 64 set on the
    full row (two passes), slower causal. Causal runs the same tile
    without the shuffle and with P^T packed early and the key blocks
    longest first (``D64_CAUSAL``). The full build checks, simulates clean
    on the ragged GQA shape (full and causal), and spills at most 64 bytes
    (56 full)."""
    pick = attention_configs.bwd_default_options
    # (since with the shuffles' source lanes as immediates, full with dQ
    # in the accumulator's order too: test_attention_bwd_shuffle_imm.py)
    assert pick(64, False) == M128_ALL + ("shuffle_imm", "dq_acc_order")
    assert set(pick(64, True)) == set(D64_CAUSAL + ("stat_shuffle", "shuffle_imm"))
    assert cfg_of(64, True, D64_CAUSAL).block_m == 128
    for c in (False, True):
        cfg = cfg_of(64, c, M128_ALL)
        assert cfg.block_m == 128 and cfg.stats_with_tiles and cfg.stat_shuffle
        assert not cfg.p_packed
        k = ab.build(cfg)
        (report,) = k.simulate(SIM_ARGS, schedules=SCHEDULES)
        assert report.ok and report.schedules == SCHEDULES, report
        spills = spill_bytes(ptx_of(64, c, M128_ALL))
        assert spills is None or spills <= 64, spills


@pytest.mark.parametrize("mistake", sorted(set(CAUGHT) - {"dq_reduce_before_fence"})
                         + sorted(HAND_OFF_CAUGHT) + sorted(RACE_CAUGHT))
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_mistakes_are_rejected_on_the_d64_defaults(mistake, causal):
    """The planted backward and hand-off mistakes on the op's d 64 builds
    (full: ``M128_ALL``; causal: ``D64_CAUSAL``, with P^T packed early):
    the same verdicts as on the lever (checker or simulator)."""
    opts = attention_configs.bwd_default_options(64, causal)
    if mistake in CAUGHT:
        test_backward_mistakes_are_rejected(mistake, 64, causal, opts)
        return
    from pipeline_mlir.compiler import CompileError

    k = build_with_mistake(mistake, cfg_of(64, causal, opts))
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
def test_ds_hand_over_mistakes_are_races(mistake):
    """The dS^T hand-over's three wrong versions (one barrier, two
    buffers): races in every schedule."""
    cfg = cfg_of(64, True, M128_ALL + PK)
    assert cfg.shared_ds and cfg.ds_one_barrier
    k = build_with_mistake(mistake, cfg)
    k.to_ptx()
    (report,) = k.simulate(SIM_ARGS, schedules=SCHEDULES, check=False)
    assert report.counts == {"smem-race": SCHEDULES}, report
