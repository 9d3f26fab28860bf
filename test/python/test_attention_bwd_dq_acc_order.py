"""The attention backward with dQ in the accumulator's order
(``dq_acc_order``, FA4's dQ scheme on existing ops), without a GPU: each
consumer writes its fp32 dQ fragment in the wgmma accumulator's own order
(8 unswizzled 16-byte stores a thread), the reduce warp adds a tile's 16
KiB with one 2-D TMA tensor reduce-add over a flat view of the
accumulator, and the host un-permutes while converting to bf16
(``attention_bwd_host.dq_from_acc_order``).

Here: the order's addresses (a bijection onto the tile, each store one
thread's 16 contiguous bytes, a quarter-warp's 8 stores 128 contiguous
bytes: no bank conflict); the CPU reference of the permutation (a dQ array
scattered by the kernel's address arithmetic and the wgmma fragment's
element map, then un-permuted by the host, is the array again); the
candidate sets build, check, simulate clean on the ragged GQA shape and
spill no more than the same sets without the option; and the planted
backward and dQ hand-off mistakes are still rejected on it.
"""

import re

import numpy as np
import pytest

from _attention_bwd_builds import cfg_of, ptx_of  # noqa: F401  (a fixture)
from _attention_bwd_mistakes import SHARED_DS_STAGES_WITH, build_with_mistake
from _ptxas import spill_bytes
from test_attention_bwd import CAUGHT, SCHEDULES, SIM_ARGS, assert_caught
from test_attention_bwd_reduce_warp import HAND_OFF_CAUGHT, RACE_CAUGHT
from test_attention_bwd_stats_with_tiles import LSE_ON_Q_CAUGHT
from pipeline_mlir.chip_limits import SMEM_PER_BLOCK
from pipeline_mlir.kernel.fragment import Fragment
from pipeline_mlir.kernels import attention_bwd as ab
from pipeline_mlir.kernels.attention_bwd import dq_acc_order as acc
from pipeline_mlir.ops import attention_bwd_host as host
from pipeline_mlir.ops import attention_configs

DQA = ("dq_acc_order",)
# The sets the option was measured on: each head dim's and mask's default
# without it (d 128 full's default has taken it since; d 128 causal's
# default as it was then, before FA4's order: test_attention_bwd_d128_candidates.py).
BASES = {(d, c): tuple(o for o in attention_configs.bwd_default_options(d, c)
                       if o != "dq_acc_order")
         for d in (64, 128) for c in (False, True)}
BASES[(128, True)] = attention_configs.BWD_DEFAULT_OPTIONS[128] + ("lpt_order",)
# d 128 full's default before it took the 80-query step (test_attention_bwd_m80.py).
BASES[(128, False)] = attention_configs.BWD_DEFAULT_OPTIONS[128]
REDUCE_2D = "cp.reduce.async.bulk.tensor.2d.global.shared::cta.add"


def test_the_sets_are_cached_candidates_and_d128_full_takes_it():
    """The option on each head dim's defaults (both masks) is a cached
    candidate tagged ``dqa``; of the defaults d 128 full takes it
    (measured faster there with the postprocess kernel, slower causal and
    even at d 64) and d 64 full since its shuffles take immediate source
    lanes (then 0.94-0.95x the time without it); it is refused without the
    reduce warp or with dQ tiles other than 64 columns."""
    for (d, c), base in BASES.items():
        opts = base + DQA
        assert opts in attention_configs.bwd_option_sets(d)
        name, over = attention_configs.bwd_variant(d, c, options=opts)
        # (the tag before ``shi``'s where the set has shuffle_imm: d 64)
        assert re.search(r"_dqa(_shi)?$", name) and attention_configs.BWD_CANDIDATES[name] == over
        cfg = ab.AttentionBwdConfig(**over)
        assert re.search(r"_dqa(_shi)?$", cfg.name) and cfg.dq_acc_order
        assert not cfg_of(d, c, base).dq_acc_order
        on = ("dq_acc_order" in attention_configs.bwd_default_options(d, c))
        assert on == (not c), (d, c)
    for bad in (dict(head_dim=64, dq_acc_order=True),                 # no reduce warp
                dict(head_dim=128, dq_reduce_warp=True, dq_acc_order=True),   # 128 columns
                dict(head_dim=256, stages=1, dq_reduce_warp=True, dq_acc_order=True)):
        with pytest.raises(ValueError, match="dq_acc_order needs dq_reduce_warp"):
            ab.AttentionBwdConfig(**bad)


def test_the_order_is_a_bijection_of_16_byte_conflict_free_stores():
    """Every (thread, value) of a 64 x 64 fragment has its own float of the
    tile; each store (``chunk_values``) is 4 consecutive floats of one
    thread; at each store the 8 threads of a quarter-warp cover 128
    contiguous bytes (32 banks once: one wavefront)."""
    seen = set()
    for t in range(128):
        for c in range(8):
            floats = [acc.acc_order_float(t, i) for i in acc.chunk_values(c)]
            assert floats == list(range(floats[0], floats[0] + 4)) and floats[0] % 4 == 0
            seen.update(floats)
    assert seen == set(range(acc.TILE_FLOATS))
    for c in range(8):
        for quarter in range(16):
            starts = sorted(acc.acc_order_float(t, acc.chunk_values(c)[0]) * 4
                            for t in range(8 * quarter, 8 * quarter + 8))
            assert starts == list(range(starts[0], starts[0] + 128, 16))
            assert starts[0] % 128 == 0
    # The tile is whole rows of the accumulator's 2-D view.
    assert acc.TILE_ROWS * acc.ACC_ROW == acc.TILE_FLOATS
    assert (host.ACC_ROW, host.ACC_TILE_ROWS) == (acc.ACC_ROW, acc.TILE_ROWS)


def test_one_order_read_by_the_kernel_the_host_and_the_postprocess():
    """The order lives once (``ops/attention_bwd_acc_order.ACC_ORDER``):
    the main kernel's stores, the postprocess's loads and tile order, and
    the host's view read it; its tile is a warpgroup's ``m64 x 64``
    fragment, and the tiles' order is the inverse of the postprocess's."""
    from pipeline_mlir.chip_limits import WGMMA_M
    from pipeline_mlir.kernel.warpgroup import THREADS_PER_WARPGROUP
    from pipeline_mlir.kernels import attention_bwd_dq_convert as conv
    from pipeline_mlir.ops.attention_bwd_acc_order import ACC_ORDER
    assert (ACC_ORDER.tile, ACC_ORDER.threads) == (WGMMA_M, THREADS_PER_WARPGROUP)
    assert acc.acc_order_float == ACC_ORDER.value_float
    assert conv.tile_coords == ACC_ORDER.tile_coords
    assert (conv.TILE, conv.CHUNKS, host.ACC_TILE) == (acc.ACC_COLS, 8, acc.ACC_COLS)
    for t in range(128):
        for c in range(8):
            assert conv.read_float(3, t, c) - 3 * acc.TILE_FLOATS == \
                acc.acc_order_float(t, acc.chunk_values(c)[0])
    tiles_per_batch, heads, groups = 3, 5, 2
    for b in range(2):
        for mt in range(tiles_per_batch):
            for h in range(heads):
                for g in range(groups):
                    tile = ACC_ORDER.tile_index(b * tiles_per_batch + mt, heads, h, groups, g)
                    assert conv.tile_coords(tile, tiles_per_batch, heads, groups) == (b, mt, h, g)


@pytest.mark.parametrize("head_dim,opts", [(64, BASES[(64, False)]),
                                           (128, BASES[(128, False)])],
                         ids=["d64-rows", "d128-split"])
def test_postprocess_unpermutes_the_accumulator_order(head_dim, opts):
    """CPU reference: a random dQ (batch, padded rows, heads, d) written
    into a flat accumulator as the kernel writes it (per step and consumer
    tile ``acc_tile_row`` with Python ints, within the tile
    ``acc_order_float`` of each thread's fragment values, whose (row,
    column) is the wgmma fragment's own map ``Fragment.thread_origin`` +
    ``element_offset``) is given back by the host's un-permute exactly."""
    cfg = cfg_of(head_dim, False, opts + DQA)
    b, heads, sq = 2, 3, 200                     # ragged: padded to whole query blocks
    padded = -(-sq // cfg.block_m) * cfg.block_m
    rng = np.random.default_rng(0)
    dq = rng.standard_normal((b, padded, heads, head_dim)).astype(np.float32)
    flat = np.full(b * padded * heads * head_dim, np.nan, dtype=np.float32)
    for bb in range(b):
        for h in range(heads):
            for m_block in range(padded // cfg.block_m):
                for cw in range(2):
                    row0 = acc.acc_tile_row(cfg, bb, heads, padded, h, m_block, cw) * acc.ACC_ROW
                    r0 = ab.dq_row(cfg, m_block, cw)
                    c0 = ab.dq_column(cfg, h, cw, 0) - h * head_dim
                    for t in range(128):
                        tr, tc = Fragment.thread_origin(t // 32, t % 32)
                        for i in range(32):
                            dr, dc = Fragment.element_offset(i)
                            flat[row0 + acc.acc_order_float(t, i)] = \
                                dq[bb, r0 + tr + dr, h, c0 + tc + dc]
    assert not np.isnan(flat).any()              # every float written
    got = host.dq_from_acc_order(flat, b, padded, heads, head_dim)
    assert np.array_equal(got, dq)
    # A wrong axis order is not the identity (the check can fail).
    wrong = flat.reshape(b, heads, padded, head_dim).transpose(0, 2, 1, 3)
    assert not np.array_equal(wrong, dq)


CASES = [(d, c) for d in (64, 128) for c in (False, True)]


@pytest.mark.parametrize("head_dim,causal", CASES,
                         ids=[f"d{d}{'c' if c else ''}" for d, c in CASES])
def test_checks_simulates_and_assembles(head_dim, causal, ptx_of):
    """Checked, simulated clean on the ragged GQA shape, shared memory as
    planned; in the PTX 8 ``st.shared.v4`` stores (one site: the consumers'
    code is one) and one 2-D reduce-add per consumer tile (no 3-D ones);
    ptxas spills no more than the same set without the option."""
    base = BASES[(head_dim, causal)]
    cfg = cfg_of(head_dim, causal, base + DQA)
    k = ab.build(cfg)
    assert k.smem_bytes <= cfg.smem_bytes() <= SMEM_PER_BLOCK
    (report,) = k.simulate(SIM_ARGS, schedules=SCHEDULES)
    assert report.ok and report.schedules == SCHEDULES, report
    ptx = ptx_of(head_dim, causal, base + DQA)
    assert len(re.findall(r"st\.shared\.v4\.b32", ptx)) == 8
    assert ptx.count(REDUCE_2D) == 2 and "reduce.async.bulk.tensor.3d" not in ptx
    spills, before = spill_bytes(ptx), spill_bytes(ptx_of(head_dim, causal, base))
    if spills is None:
        pytest.skip("ptxas not installed")
    assert spills <= before, (spills, before)


# Planted on d 128 causal (dQ split by columns, the rows on the tiles'
# stages) and d 64 full (128-query steps, dQ split by rows).
PLANT_IN = [(128, True), (64, False)]


@pytest.mark.parametrize("head_dim,causal", PLANT_IN, ids=["d128c", "d64"])
@pytest.mark.parametrize("mistake", sorted(set(CAUGHT) - {"dq_reduce_before_fence"})
                         + sorted(HAND_OFF_CAUGHT) + sorted(RACE_CAUGHT))
def test_mistakes_are_rejected(mistake, head_dim, causal):
    """The backward's planted mistakes that apply (the dO release and the
    LSE row read from Q's released stage: checker; the epilogue race:
    simulator), the reduce warp's dropped waits (checker) and its
    misplaced waits and the dropped proxy fence (race detector, every
    schedule), on builds with the option."""
    from pipeline_mlir.compiler import CompileError

    cfg = cfg_of(head_dim, causal, BASES[(head_dim, causal)] + DQA)
    k = build_with_mistake(mistake, cfg)
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
def test_ds_hand_over_mistakes_are_races(mistake):
    """The dS^T hand-over's three wrong versions on d 128 causal with the
    option: races in every schedule."""
    k = build_with_mistake(mistake, cfg_of(128, True, BASES[(128, True)] + DQA))
    k.to_ptx()
    (report,) = k.simulate(SIM_ARGS, schedules=SCHEDULES, check=False)
    assert report.counts == {"smem-race": SCHEDULES}, report
