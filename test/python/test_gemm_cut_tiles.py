"""The GEMM tiles cut to the shape (ops/gemm_configs.CUT_VARIANTS): 128 rows
and 160-240 columns, one CTA and the 2-CTA cluster. Deviceless: two of the
kernels are built once (a 32-byte C swizzle with uneven epilogue passes, and
a 64-byte one on the cluster), assembled (ptxas where it is on PATH: no
spills), checked by pipeline-verify-protocol and run by the simulator on a
ragged output; planted mistakes of the uneven last pass are rejected; the
table's own variants keep their C layout; the pick takes a cut tile where
its waves say so (run12's oracle on an H200) and nowhere else."""

import math
import re
import sys
import textwrap
from dataclasses import replace

import pytest

from _example_checks import messages, protocol_warnings, simulate, verify_protocol
from _ptxas import spill_bytes
from pipeline_mlir.kernels import gemm_store, hopper_gemm as hg
from pipeline_mlir.ops import gemm_configs as gc


@pytest.fixture(autouse=True)
def _before_cluster_n_any():
    """The picks pinned here are the rules' before a plain pick may become
    a tile of the cluster along N (``gemm_configs.AUTO_CLUSTER_N_ANY``;
    test_gemm_cluster_n_tiles.py pins that rule and what it changes), and
    before the cluster stream-K tiles' own margin
    (``CLUSTER_STREAM_K_MARGIN``, test_gemm_under_class.py). Set outside
    ``monkeypatch``, whose ``undo`` the tests call."""
    saved = gc.AUTO_CLUSTER_N_ANY, gc.CLUSTER_STREAM_K_MARGIN
    gc.AUTO_CLUSTER_N_ANY, gc.CLUSTER_STREAM_K_MARGIN = False, gc.STREAM_K_MARGIN
    yield
    gc.AUTO_CLUSTER_N_ANY, gc.CLUSTER_STREAM_K_MARGIN = saved


# m, n, k (kernel arguments 4, 5, 6): a ragged tile along M and N, 5
# k-blocks (past the 4 stages of 128x208: the ring wraps inside a tile)
SIM_ARGS = {4: 256, 5: 624, 6: 320}


def _cfg(variant):
    return replace(hg.GemmConfig(), **gc.overrides(variant))


@pytest.fixture(scope="module")
def built():
    """{variant: (config, kernel, MLIR text, PTX)} of two cut tiles."""
    out = {}
    for v in ("128x208", "128x224c2"):
        cfg = _cfg(v)
        k = hg.build(cfg)
        out[v] = (cfg, k, str(k.module), k.to_ptx())
    return out


def test_the_family_is_every_width_in_both_forms():
    assert gc.CUT_WIDTHS == (160, 176, 208, 224, 240)
    assert sorted(gc.CUT_VARIANTS) == sorted(f"128x{n}{c}" for n in gc.CUT_WIDTHS
                                             for c in ("", "c2"))
    for v, over in gc.CUT_VARIANTS.items():
        cfg = _cfg(v)
        assert gc.tile(v) == (128, over["block_n"]) and v in gc.VARIANTS
        assert gc.cluster_of(v) == (2 if v.endswith("c2") else 1)
        # the cluster's half of B is whole 8-row groups
        assert cfg.layouts()[1].rows == over["block_n"] // gc.cluster_of(v)
        # the C box: the widest swizzle span that divides the width
        c = cfg.layouts()[2]
        assert c.swizzle == (64 if over["block_n"] % 32 == 0 else 32)
        assert c.boxes * c.box_cols == over["block_n"]
        # every pass holds boxes, the last one may hold fewer
        passes = [range(p * cfg.pass_boxes, min((p + 1) * cfg.pass_boxes, c.boxes))
                  for p in range(cfg.epilogue_passes)]
        assert all(passes) and sum(map(len, passes)) == c.boxes
        assert cfg.epilogue_bytes() == 2 * cfg.pass_boxes * c.box_bytes
        assert cfg.num_stages() == over["stages"]        # all of them fit 227 KiB
        assert v in gc.UNFUSED and gc.EFFICIENCY[v] < 1


def test_the_table_tiles_keep_their_c_layout():
    """A width that the operands' 128-byte span divides keeps that span, and
    even passes keep their buffer: the existing variants' kernels are the
    same (their PTX was compared byte for byte when the family came in)."""
    for v in (*gc.VARIANTS, *gc.STREAM_K_VARIANTS, "128x256_sk2"):
        if v in gc.CUT_VARIANTS or v in gc.CLUSTER_N_VARIANTS or v in gc.CLUSTER_2X2_VARIANTS:
            continue
        cfg = replace(hg.GemmConfig(), **gc.overrides(v))
        c = cfg.layouts()[2]
        assert cfg.c_swizzle == cfg.swizzle == c.swizzle
        if cfg.tma_store_epilogue and cfg.split_k == 1:
            assert c.boxes % cfg.epilogue_passes == 0
            assert cfg.epilogue_bytes() == cfg.consumer_warpgroups * c.bytes \
                // cfg.epilogue_passes


def test_passes_that_leave_one_empty_or_fuse_an_epilogue_are_refused():
    from pipeline_mlir.ops.epilogues import Epilogue

    # 13 boxes: passes of 3 (5 passes: 3+3+3+3+1) pass, 6 passes of 3 leave one empty
    hg.build(replace(_cfg("128x208"), epilogue_passes=5, stages=5))
    with pytest.raises(ValueError, match="do not split into 6 epilogue passes"):
        replace(_cfg("128x208"), epilogue_passes=6).check()
    with pytest.raises(ValueError, match="uneven epilogue passes are built without a fused"):
        replace(_cfg("128x208"), epilogue=Epilogue(bias="col")).check()
    with pytest.raises(ValueError, match="built without fused epilogues"):
        gc.fused("128x240c2", Epilogue(bias="col"))


@pytest.mark.parametrize("variant", ["128x208", "128x224c2"])
def test_kernel_lowers_assembles_and_is_checked(built, variant):
    cfg, k, text, ptx = built[variant]
    n = cfg.block_n
    assert ptx.count(f"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.bf16.bf16") == 8
    # one TMA store per C box (16 or 32 columns) of each warpgroup's passes
    assert ptx.count("cp.async.bulk.tensor.2d.global.shared::cta") == cfg.layouts()[2].boxes
    assert ("multicast::cluster" in ptx) == (cfg.cluster_m > 1)
    assert k.smem_bytes <= hg.SMEM_LIMIT and k.stages == cfg.num_stages()
    assert spill_bytes(ptx) in (None, 0)
    assert verify_protocol(text) == [] and protocol_warnings(text) == []
    (report,) = simulate(text, schedules=2, args=SIM_ARGS,
                         cluster=(cfg.cluster_m, 1, 1)).values()
    assert report.ok and report.schedules == 2, report


# --- planted mistakes: the uneven last pass ----------------------------------------

def _planted(monkeypatch, old, new):
    """gemm_store.store_tile with ``old`` replaced by ``new`` (its last pass
    only), and the 128x208 kernel built with it."""
    src = open(gemm_store.__file__).read()
    code = textwrap.dedent(src[src.index("def store_tile("):src.index("def store_partial_global(")])
    assert old in code
    code = code.replace(old, new)
    ns = dict(vars(gemm_store))
    exec(compile(code, gemm_store.__file__, "exec"), ns)
    monkeypatch.setattr(hg, "store_tile", ns["store_tile"])
    return str(hg.build(_cfg("128x208")).module)


def test_a_last_pass_that_does_not_wait_for_the_stores_reading_is_rejected(monkeypatch):
    """The last (shorter) pass writes the C buffer while the previous pass's
    TMA stores may still read it: the checker and the simulator say so."""
    text = _planted(monkeypatch, """        with k.if_(leader):
            store.producer_acquire()""", """        if p != cfg.epilogue_passes - 1:
            with k.if_(leader):
                store.producer_acquire()""")
    errors = verify_protocol(text)
    assert any("an earlier TMA store may still be reading" in e for e in errors), errors
    (report,) = simulate(text, schedules=2, args=SIM_ARGS).values()
    assert not report.ok
    assert re.search(r"writes shared memory at byte \d+ of CTA 0 with llvm.store while its "
                     r"asynchronous read is still in flight", messages(report)["smem-race"])


def test_a_last_pass_stored_before_every_warp_wrote_is_rejected(monkeypatch):
    text = _planted(monkeypatch, """        fence_view_async_shared()
        epi_sync.arrive_and_wait_w_index(cw)""", """        fence_view_async_shared()
        if p != cfg.epilogue_passes - 1:
            epi_sync.arrive_and_wait_w_index(cw)""")
    errors = verify_protocol(text)
    assert any("this TMA store reads shared memory that warps 4-11 write" in e
               for e in errors), errors


# --- the pick ------------------------------------------------------------------------

# (M, N, K) -> the pick in both dtypes, and its time over the table's pick's
# measured on an H200 in one process (run12's A/B, bf16 / fp16)
CUT_PICKS = {
    # 5 x 43 = 215 tiles of 128x224 as 129 pairs (1.95 rounds of 66) against
    # 114 pairs of 128x256c2 (1.7 rounds): 1.002 / 0.995
    (592, 9560, 3864): "128x224c2",
    (8672, 4880, 2208): "128x240c2",      # against 192x128: 0.978 / 0.982
    (1752, 5776, 568): "128x208c2",       # against 128x256c2: 0.973 / 0.952
    (1528, 7920, 2656): "128x240c2",      # against 128x256: 1.001 / 0.979
    (880, 6304, 616): "128x208c2",        # against 128x256c2: 0.986 / 0.997
    (8408, 2576, 624): "128x224c2",       # against 192x192c2: 0.966 / 0.958
    (3464, 12520, 5736): "128x224c2",     # against 128x256c2: 0.967 / 0.960
}
# Where the table's pick stands: the stream-K picks (a cut tile is weighed
# after them, against the table's plain pick), measured faster than any cut
# tile there (run12's oracle, ratio to cuBLAS bf16 / fp16), an output of
# one wave, and the narrow cut tiles, which the rule leaves out.
KEPT = {
    (1048, 6504, 11408): "192x192c2_streamk",    # 0.971 / 0.944; 128x240 0.785 / 0.803
    (4544, 1008, 7784): "128x256c2_streamk",     # 0.942 / 0.956; 128x176c2 0.795 / 0.834
    (1664, 1112, 12456): "192x192c2_streamk",    # 1.006 / 1.097; 128x160c2 0.970 / 1.043
    (720, 7440, 5256): "192x192c2_streamk",      # 1.088 / 0.989; 128x176c2 1.056 / 1.013
    # fewer tiles than SMs: 128x208c2 1.553 / 1.202 against 1.709 / 1.266
    (136, 12192, 952): "128x256c2",
    # no cut tile; 192x192 turned into its cluster along N (choose_cluster_n,
    # test_gemm_cluster_n.py)
    (2072, 16040, 3464): "192x192c2n",
    # 128x176c2, the model's pick among all ten: 1.114 / 1.140 the time of 192x128
    (4408, 1208, 992): "192x128",
}


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
def test_the_pick_takes_a_cut_tile_where_it_saves_a_wave(dtype):
    for shape, v in CUT_PICKS.items():
        assert gc.choose(*shape, dtype) == v, shape
        plain = min(gc.RULE_VARIANTS, key=lambda o: gc.estimate(o, *shape[:2], 132, shape[2]))
        assert gc.estimate(v, *shape[:2], 132, shape[2]) < gc.estimate(
            plain, *shape[:2], 132, shape[2])
    for shape, v in KEPT.items():
        assert gc.choose(*shape, dtype) == v, shape


def test_592_x_9560_fills_two_rounds_of_pairs():
    """M = 592 is 3 pair rows of 256; 9560 is 38 columns of 256 (114 pairs:
    1.7 rounds of 66) or 43 of 224 (129 pairs: 1.95 rounds, each tile 12.5%
    smaller): the same two rounds, the cut tile's shorter."""
    m, n, k = 592, 9560, 3864
    assert math.ceil(m / 256) * math.ceil(n / 256) == 114
    assert math.ceil(m / 256) * math.ceil(n / 224) == 129
    assert gc.estimate("128x224c2", m, n, 132, k) < gc.estimate("128x256c2", m, n, 132, k)


def test_the_rule_leaves_out_the_narrow_widths(monkeypatch):
    assert set(gc.CUT_RULE_VARIANTS) == {v for v in gc.CUT_VARIANTS
                                         if gc.tile(v)[1] >= 208}
    monkeypatch.setattr(gc, "CUT_RULE_VARIANTS", tuple(gc.CUT_VARIANTS))
    assert gc.choose(4408, 1208, 992, "bf16") == "128x176c2"


def test_the_switch_the_margin_and_the_fused_pick(monkeypatch):
    shape = (592, 9560, 3864)
    # the rules after the cut tiles' (test_gemm_cluster_n_tiles.py and
    # test_gemm_cluster_streamk.py pin them) off
    monkeypatch.setattr(gc, "AUTO_CLUSTER_STREAM_K", False)
    monkeypatch.setattr(gc, "AUTO_CUT", False)
    assert gc.choose(*shape, "bf16") == "128x256c2"
    monkeypatch.setattr(gc, "AUTO_CUT", True)
    monkeypatch.setattr(gc, "CUT_MARGIN", 0.8)
    assert gc.choose(*shape, "bf16") == "128x256c2"
    monkeypatch.undo()
    for s in (*CUT_PICKS, *KEPT):
        assert gc.choose(*s, "bf16", fused=True) not in gc.CUT_VARIANTS


def test_cubes_and_model_shapes_keep_their_picks(monkeypatch):
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parents[2]
                           / "benchmarks" / "gemm"))
    import sweep

    on = {(s[:3], d): gc.choose(*s[:3], d) for s in sweep.SHAPES for d in ("bf16", "f16")}
    monkeypatch.setattr(gc, "AUTO_CUT", False)
    off = {(s[:3], d): gc.choose(*s[:3], d) for s in sweep.SHAPES for d in ("bf16", "f16")}
    assert on == off and not set(on.values()) & set(gc.CUT_VARIANTS)
