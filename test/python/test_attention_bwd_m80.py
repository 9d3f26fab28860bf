"""FA4's 80-query step at d 128 (option ``block_m80``:
``AttentionBwdConfig.block_m = 80``), without a GPU.

80 query rows are no wgmma M, so dQ is computed transposed, dQ^T = K^T dS^T
(``dq_transposed``: K as an MN-major A, both consumers' dS^T tiles as an
MN-major B of N = 80), and each consumer's m64n80 accumulator is stored
transposed into an 80 x 64 fp32 tile (``dq_tile_store.
store_fragment_f32_transposed``) that the reduce warp adds as the plain
tiles. The dS^T tiles' 160-byte rows take the 32-byte swizzle.

Here: the three sets (the d 128 full set without ``dq_acc_order``, the
same in FA4's order, and that with dQ^T in the accumulator's transposed
order, ``dq_acc_order``: its map in test_attention_bwd_m80_acc_order.py)
are cached candidates and no default; the
configuration refuses what it does not support; the transposed store's
map puts every value of the fragment at its own element of the tile, as
TMA's 128-byte swizzle reads it, without bank conflicts; the sets check and
simulate clean on the ragged GQA shape (200 queries: not whole 80-row
steps) within their shared-memory plan and spill bounds; and on the full
set and the third the planted backward mistakes, the dQ hand-off's dropped waits and the
dS^T hand-over's three wrong versions are still rejected; causal (built to
complete the sets) checks, assembles and simulates clean.
"""

import re

import pytest

from _attention_bwd_builds import cfg_of, ptx_of  # noqa: F401  (a fixture)
from _attention_bwd_mistakes import SHARED_DS_STAGES_WITH, build_with_mistake
from _ptxas import report as ptxas_report
from test_attention_bwd import CAUGHT, SCHEDULES, SIM_ARGS, assert_caught
from test_attention_bwd_reduce_warp import HAND_OFF_CAUGHT
from test_attention_bwd_stats_with_tiles import LSE_ON_Q_CAUGHT
from pipeline_mlir.chip_limits import SMEM_PER_BLOCK
from pipeline_mlir.kernel.fragment import Fragment
from pipeline_mlir.kernels import attention_bwd as ab
from pipeline_mlir.kernels.attention_bwd.dq_tile_store import transposed_offset
from pipeline_mlir.ops import attention_configs

SET = ("dq_split", "min_ctas", "dq_reduce_warp", "stats_with_tiles", "block_m80")
FA4 = SET[:-1] + ("dk_last", "ds_one_barrier", "block_m80")
# FA4's order with dQ^T in the accumulator's transposed order
# (test_attention_bwd_m80_acc_order.py: its map and postprocess).
DQA = FA4 + ("dq_acc_order",)
# ptxas -v spill stores (bytes) allowed: the sets spill 16, 52 and 32.
SPILLS = {SET: 16, FA4: 56, DQA: 32}
# ptxas's note that it serializes the wgmma instructions for want of
# registers: on the set in the default order (its dQ^T accumulator issued
# with dV's and dK's in flight), which measured 1.19-1.23x the d 128 full
# default's backward time on an H200; not in FA4's order.
SERIALIZED = "C7512"


def ids(x):
    return "+".join(x) if isinstance(x, tuple) else str(x)


def test_sets_are_candidates_and_d128_full_takes_the_third():
    assert SIM_ARGS["seqlen_q"] % 80                 # ragged: the last step is partial
    for opts in (SET, FA4, DQA):
        assert opts in attention_configs.bwd_option_sets(128)
        for c in (False, True):
            name, over = attention_configs.bwd_variant(128, c, options=opts)
            assert name.endswith("_m80") and attention_configs.BWD_CANDIDATES[name] == over
            cfg = ab.AttentionBwdConfig(**over)
            assert cfg.block_m == 80 and cfg.dq_transposed and "_128x80_" in cfg.name
            assert not cfg.dq_rows and cfg.shared_ds
            assert cfg.smem_bytes() <= SMEM_PER_BLOCK
            assert cfg.ds_layout().swizzle == 32 and cfg.ds_mn_layout().swizzle == 32
            assert (cfg.dq_layout().rows, cfg.dq_layout().cols) == (80, 64)
    # d 128 full runs FA4's order at 80 queries with dQ^T in the
    # accumulator's order (faster than the 64-query default on both full
    # rows in two passes on an H200); causal and the other head dims keep
    # 64-query steps.
    for d in (64, 128, 256):
        for c in (False, True):
            on = "block_m80" in attention_configs.bwd_default_options(d, c)
            assert on == (d == 128 and not c), (d, c)
    assert attention_configs.bwd_default_options(128, False) == DQA


@pytest.mark.parametrize("over", [
    dict(head_dim=64, block_m=80, dq_reduce_warp=True),
    dict(head_dim=128, block_m=80, dq_reduce_warp=True),               # no dq_split
    dict(head_dim=128, block_m=80, dq_split=True),                     # no reduce warp
    dict(head_dim=128, block_m=80, dq_split=True, dq_reduce_warp=True, dq_deferred=True),
    dict(head_dim=128, block_m=80, dq_split=True, dq_reduce_warp=True, stat_shuffle=True),
    dict(head_dim=128, block_m=96, dq_split=True, dq_reduce_warp=True),
], ids=range(6))
def test_refused(over):
    with pytest.raises(ValueError, match="block_m"):
        ab.AttentionBwdConfig(**over)


def test_transposed_store_map_walks_every_element():
    """Value ``i`` of thread ``t`` of the m64n80 dQ^T fragment (row: dQ
    column, column: query) lands on the fp32 tile's element (query, dQ
    column) as TMA reads the tile (boxes of 32 columns, each 80 rows of
    128 bytes, the 16-byte chunk XORed with the row's low 3 bits): every
    element once; and each warp's store (one value index) hits 32
    different banks."""
    layout = cfg_of(128, False, SET).dq_layout()
    n = layout.rows
    seen = {}
    for t in range(128):
        warp, lane = divmod(t, 32)
        row0, col0 = Fragment.thread_origin(warp, lane)
        for i in range(n // 2):
            dr, dc = Fragment.element_offset(i)
            row, col = row0 + dr, col0 + dc
            off = transposed_offset(layout, row, col)
            box, c = divmod(row, 32)
            linear = col * 128 + c * 4
            want = box * (n * 128) + (linear ^ (((linear >> 7) & 7) << 4))
            assert off == want, (t, i)
            assert off not in seen, (t, i, seen.get(off))
            seen[off] = (t, i)
    assert sorted(seen) == list(range(0, n * 64 * 4, 4))
    for warp in range(4):
        for i in range(n // 2):
            banks = set()
            for lane in range(32):
                row0, col0 = Fragment.thread_origin(warp, lane)
                dr, dc = Fragment.element_offset(i)
                banks.add(transposed_offset(layout, row0 + dr, col0 + dc) // 4 % 32)
            assert len(banks) == 32, (warp, i)


@pytest.mark.parametrize("opts", [SET, FA4, DQA], ids=ids)
def test_checks_simulates_and_assembles(opts, ptx_of):
    """Checked and simulated clean on the ragged GQA shape, shared memory
    within its plan; S^T, dP^T and dQ^T are m64n80 GEMMs (8 k slices each
    of S^T and dP^T, 8 of dQ^T over 128 keys); ptxas spills within bound
    and, in FA4's order, keeps the wgmma instructions asynchronous."""
    cfg = cfg_of(128, False, opts)
    k = ab.build(cfg)
    assert k.smem_bytes <= cfg.smem_bytes() <= SMEM_PER_BLOCK
    (report,) = k.simulate(SIM_ARGS, schedules=SCHEDULES)
    assert report.ok and report.schedules == SCHEDULES, report
    ptx = ptx_of(128, False, opts)
    assert len(re.findall(r"wgmma\.mma_async\.sync\.aligned\.m64n80k16", ptx)) == 24
    if opts == DQA:     # dQ^T's 10 16-byte stores, one reduce-add a consumer's tile
        assert ptx.count("st.shared.v4.b32") == 10
        assert ptx.count("cp.reduce.async.bulk.tensor.2d") == 2
    text = ptxas_report(ptx)
    if text is None:
        pytest.skip("ptxas not installed")
    spills = sum(int(x) for x in re.findall(r"(\d+) bytes spill stores", text))
    assert spills <= SPILLS[opts], spills
    assert (SERIALIZED in text) == (opts == SET), text


@pytest.mark.parametrize("opts", [SET, FA4], ids=ids)
def test_causal_checks_and_simulates(opts):
    """Causal too (built to complete the sets; FA4 runs 64 queries there):
    checked, assembled and simulated clean on the ragged GQA shape."""
    k = ab.build(cfg_of(128, True, opts))
    assert len(k.compile()) > 0
    (report,) = k.simulate(SIM_ARGS, schedules=SCHEDULES)
    assert report.ok and report.schedules == SCHEDULES, report


PLANTED = (sorted(set(CAUGHT) - {"dq_reduce_before_fence"}) + sorted(HAND_OFF_CAUGHT)
           + sorted(SHARED_DS_STAGES_WITH))


@pytest.mark.parametrize("opts", [SET, DQA], ids=["set", "dqa"])
@pytest.mark.parametrize("mistake", PLANTED)
def test_mistakes_are_rejected(mistake, opts):
    """On the full set, and on FA4's order with dQ^T in the accumulator's
    order: the dO release and the LSE row read from Q's
    released stage (checker), the epilogue race (simulator), the reduce
    warp's dropped waits (checker), and the dS^T hand-over's three wrong
    versions (races in every schedule)."""
    from pipeline_mlir.compiler import CompileError

    k = build_with_mistake(mistake, cfg_of(128, False, opts))
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
