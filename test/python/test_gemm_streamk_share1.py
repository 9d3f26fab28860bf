"""Stream-K's shared fix-up with one arrival a warp, deviceless
(GemmConfig.sk_one_arrival, ``<tile>_streamk_share1``;
kernels/streamk_fixup.stream_k_share, kernel/arrival_counter.py): the warp
whose arrival completes a tile's count resets the counter at once
(``release_reset``, a relaxed store after its acquire fence) and sums its
share; the others poll until they read the full count or the reset
(``wait_full_or_reset``). No second arrival.

Checked here: the variants build and pass the protocol checker, ptxas
takes them without spills, the PTX has one arrival, one poll and the
strong reset; the simulator (sim/gmem.py, which follows the workspace and
the counters) runs one tile over three CTAs clean, every counter back at 0
at the end and every CTA's warps reading the others' partials after an
acquire; and finds the planted mistakes: a plain reset store (the waiters
that read it acquire nothing), the poll without its fence, and the share
read without waiting at all. The two-arrival shared fix-up is
test_gemm_streamk_share.py."""

import random
from dataclasses import replace

import pytest

from _ptxas import spill_bytes

from pipeline_mlir.kernel import arrival_counter as ac
from pipeline_mlir.kernels import hopper_gemm as hg
from pipeline_mlir.kernels import streamk_fixup as skf
from pipeline_mlir.ops import gemm_configs
from pipeline_mlir.sim import simulate
from test_gemm_streamk import _poll_is_warp_uniform, _wait_then_fence_then_loads

VARIANT = "128x128_streamk_share1"      # and its grouped sums, VARIANT + "v4"
# (CTAs, m, n, k): one 128 x 128 tile shared by three CTAs (k = 4 K blocks).
ONE_TILE = (3, 128, 128, 512)


def _build(variant=VARIANT, dtype="bf16"):
    cfg = replace(hg.GemmConfig(dtype=dtype), **gemm_configs.overrides(variant))
    return cfg, hg.build(cfg)


@pytest.fixture(scope="module", params=[VARIANT, f"{VARIANT}v4"])
def share1(request):
    return _build(request.param)[1]


def _sim(k, ctas, m, n, kdim, schedules=2):
    return simulate(k.module, args={4: m, 5: n, 6: kdim, 9: ctas, 10: 0},
                    cluster=(ctas, 1, 1), schedules=schedules, check=False)


def one_tile_world(k, tile=ONE_TILE, seed=1):
    """One simulated run of ``tile`` (CTAs, m, n, k) in a seeded schedule:
    the world at its end, for reading global memory's words."""
    from pipeline_mlir.sim.engine import run_one
    from pipeline_mlir.sim.frontend import kernels as sim_kernels
    from pipeline_mlir.sim.interp import Launch, make_world_factory

    ctas, m, n, kdim = tile
    with k.module.context:
        sk, = sim_kernels(k.module)
    make = make_world_factory(sk, Launch(sk.block_dim, (ctas, 1, 1), None,
                                         {4: m, 5: n, 6: kdim, 9: ctas, 10: 0}))
    rng = random.Random(seed)
    return run_one(make, lambda n_, cont: rng.randrange(n_), 0)


def cross_cta_readers(w):
    """CTA -> the agents of it that read a workspace word (argument 7)
    another CTA wrote: who took partials from whom."""
    readers = {}
    for key, wd in w.gmem.words.items():
        if key[0] == 7 and wd.w >= 0:
            for r in wd.reads:
                if w.agents[r].cta != w.agents[wd.w].cta:
                    readers.setdefault(w.agents[r].cta, set()).add(r)
    return readers


def test_the_variants_are_the_share_variants_with_one_arrival():
    share = set(gemm_configs.STREAM_K_SHARE_VARIANTS) | {"64x128_streamk_share"}
    one = {v for v in gemm_configs.STREAM_K_SHARE1_VARIANTS if v.endswith("_share1")}
    assert {v[:-1] for v in one} == share
    assert set(gemm_configs.STREAM_K_SHARE1_VARIANTS) == one | {f"{v}v4" for v in one}
    for v in one:
        assert gemm_configs.overrides(v) == dict(gemm_configs.overrides(v[:-1]),
                                                 sk_one_arrival=True)
        assert gemm_configs.overrides(f"{v}v4") == dict(gemm_configs.overrides(v),
                                                        sk_share_vectors=4)
    # candidates only: never the pick's, nor the GPU suite's list
    assert not set(gemm_configs.STREAM_K_SHARE1_VARIANTS) & set(gemm_configs.STREAM_K_VARIANTS)


@pytest.mark.parametrize("variant", [VARIANT, f"{VARIANT}v4", "64x128_streamk_share1v4"])
def test_share1_builds_checks_and_assembles_without_spills(variant):
    """to_ptx runs the protocol checker; ptxas -v, no spill; one arrival
    (bar.warp.sync, membar.gl, atomic add, membar.gl), one poll (relaxed,
    warp-uniform, then membar.gl) before the partial loads, the reset a
    relaxed gpu-scope store, C's column pairs stored from registers: two
    per vector, one vector at a time (SHARE_BATCH loads together) or four
    (sk_share_vectors: SHARE_LOADS loads together, in one run of the PTX)."""
    cfg, k = _build(variant, dtype="f16")
    k.verify()
    ptx = k.to_ptx()
    vecs = cfg.sk_share_vectors
    assert cfg.name.endswith(variant[variant.index("_"):]) and cfg.sk_one_arrival
    assert ptx.count("atom.global.add.u32") == 1 and ptx.count("membar.gl") == 3
    assert ptx.count("ld.relaxed.gpu.global.b32") == 1
    assert ptx.count("st.relaxed.gpu.global.b32") == 1
    assert ptx.count("st.global.b32") == 2 * vecs        # column pairs, no plain reset
    assert ptx.count("st.global.v4.b32") == cfg.block_n // 8
    loads = [i for i, line in enumerate(ptx.splitlines()) if "ld.global.v4.b32" in line]
    assert len(loads) == (skf.SHARE_BATCH if vecs == 1 else skf.SHARE_LOADS)
    body = ptx.splitlines()[loads[0]:loads[-1]]
    assert not any("st.global" in line or "add.rn.f32" in line or "add.f32" in line
                   for line in body)                    # issued before any add or store
    assert _wait_then_fence_then_loads(ptx) and _poll_is_warp_uniform(ptx)
    assert spill_bytes(ptx) in (None, 0)                 # None: no ptxas here


def test_one_arrival_and_grouped_sums_need_the_shared_fixup():
    cfg = replace(hg.GemmConfig(), **gemm_configs.overrides("128x128_streamk"))
    with pytest.raises(ValueError, match="sk_one_arrival is the shared fix-up's protocol"):
        hg.build(replace(cfg, sk_one_arrival=True))
    with pytest.raises(ValueError, match="sk_share_vectors"):
        hg.build(replace(cfg, sk_share_vectors=4))
    with pytest.raises(ValueError, match="sk_share_vectors"):
        hg.build(replace(cfg, sk_share=True, sk_share_vectors=9))


def test_share1_simulates_clean_and_resets_its_counters(share1):
    """One tile over three CTAs, clean over two schedules; in one run,
    every counter (argument 8) the launch touched reads 0 at its end,
    every CTA reads partials another CTA wrote, all 24 consumer warps
    acquired through global memory, and C is written whole."""
    res = _sim(share1, *ONE_TILE)
    assert res.ok, str(res)
    ctas, m, n, kdim = ONE_TILE
    w = one_tile_world(share1)
    g = w.gmem
    counters = [wd for key, wd in g.words.items() if key[0] == 8 and wd.written]
    assert len(counters) == 8 and all(wd.value == 0 for wd in counters)
    assert set(cross_cta_readers(w)) == {0, 1, 2}
    assert sum(g.warp(a).acquired for a in w.agents) == 24
    # every word of C (bf16, argument 3) written once: a second writer
    # would be a gmem-race above
    c = [wd for key, wd in g.words.items() if key[0] == 3 and wd.written]
    assert len(c) == m * n * 2 // 4


def _planted(monkeypatch, kind):
    if kind == "plain reset":
        def reset(counters, index, lane):
            ac.reset(counters, index, lane)          # a plain store: releases nothing
        monkeypatch.setattr(ac, "release_reset", reset)
    elif kind == "poll without acquire":
        real = ac._fence_gpu

        def wait(counters, index, count, lane):
            monkeypatch.setattr(ac, "_fence_gpu", lambda: None)
            try:
                real_wait(counters, index, count, lane)
            finally:
                monkeypatch.setattr(ac, "_fence_gpu", real)
        real_wait = ac.wait_full_or_reset
        monkeypatch.setattr(ac, "wait_full_or_reset", wait)
    else:     # the share read before its flag: no wait at all
        monkeypatch.setattr(ac, "wait_full_or_reset", lambda *a: None)
    return _build()[1]


@pytest.mark.parametrize("kind", ["plain reset", "poll without acquire", "no wait"])
def test_planted_mistakes_are_found(kind, monkeypatch):
    """Each planted mistake is a gmem-race on the workspace (argument 7):
    a waiter's share read not ordered after another contributor's store."""
    res = _sim(_planted(monkeypatch, kind), *ONE_TILE, schedules=2)
    races = [f for f in res.findings if f.kind == "gmem-race"]
    assert races, str(res)
    assert any("reads `sk_workspace` (argument 7)" in f.message for f in races), str(res)


# The pick (gemm_configs.choose_share1), on the shapes measured on an H200
# (docs/gemm.md, "One arrival a warp and the sums four vectors at a time"):
# the nine class (b) shapes of run18 it was fitted on (128x128_streamk
# before, 4-7 contributors a tile) and the fresh draw it was checked on
# (class_shapes.py --class b --seed 7272): the shapes whose pick it changes
# and, unchanged, those whose pick is not a 128x128 stream-K one.
FITTED = [(432, 568, 7312), (144, 1072, 5752), (408, 592, 4408), (504, 568, 13056),
          (864, 360, 14448), (632, 408, 10464), (216, 1384, 6352), (552, 520, 4344),
          (584, 712, 4600)]
FRESH = {(808, 328, 7408): ("128x128_streamk", "128x128_streamk_share1v4"),        # 0.89-0.90
         (272, 136, 7384): ("128x128_streamk_share", "128x128_streamk_share1"),    # 0.91-0.95
         (312, 280, 9368): ("128x128_streamk_share", "128x128_streamk_share1"),    # 0.93-0.94
         (144, 704, 6928): ("128x128_streamk_share", "128x128_streamk_share1"),    # 0.94-0.95
         (160, 432, 2240): ("64x128",) * 2, (360, 1616, 2912): ("64x128",) * 2,
         (1440, 928, 4632): ("128x96c2n",) * 2, (2928, 264, 4912): ("128x96c2n",) * 2,
         (3832, 344, 5200): ("128x96c2n",) * 2, (744, 1168, 3752): ("128x96c2n",) * 2}


def test_the_pick_takes_the_one_arrival_fixup_where_measured(monkeypatch):
    assert gemm_configs.AUTO_SHARE1
    for dtype in ("bf16", "f16"):
        for shape in FITTED:
            assert gemm_configs.choose(*shape, dtype) == "128x128_streamk_share1v4", shape
        for shape, (_, now) in FRESH.items():
            assert gemm_configs.choose(*shape, dtype) == now, shape
            assert not gemm_configs.is_stream_k(gemm_configs.choose(*shape, dtype, fused=True))
    monkeypatch.setattr(gemm_configs, "AUTO_SHARE1", False)
    for dtype in ("bf16", "f16"):
        for shape in FITTED:
            assert gemm_configs.choose(*shape, dtype) == "128x128_streamk", shape
        for shape, (before, _) in FRESH.items():
            assert gemm_configs.choose(*shape, dtype) == before, shape


def test_the_one_arrival_rules_bounds():
    """Only the 128x128 stream-K picks, fewer tiles than the wave, at least
    SHARE1_MIN_PIECES pieces a tile (sms // tiles, at most the K blocks)."""
    c = gemm_configs.choose_share1
    assert c(432, 568, 7312, 132, "128x128_streamk") == "128x128_streamk_share1v4"  # 20 tiles
    assert c(224, 168, 14872, 132, "128x128_streamk_share") == "128x128_streamk_share1"
    assert c(1024, 640, 7312, 132, "128x128_streamk") is None          # 40 tiles: 3 pieces
    assert c(384, 1408, 7312, 132, "128x128_streamk") == "128x128_streamk_share1v4"  # 33: 4
    assert c(432, 568, 192, 132, "128x128_streamk") is None            # 3 K blocks
    assert c(2048, 2048, 7312, 132, "128x128_streamk") is None         # 256 tiles
    assert c(432, 568, 7312, 132, "128x96c2x2_streamk") is None
    assert c(432, 568, 7312, 132, "128x128") is None
    assert c(432, 568, 7312, 132, "128x128_streamk_share1v4") is None


# The held-out draw (class_shapes.py --share1 12 8 6 --seed 8181; docs/gemm.md,
# "The one-arrival rule held out"), measured on an H200 after the rule was
# fixed: 12 shapes it turns to _share1v4 (4-7 pieces; 0.86-0.98 of
# 128x128_streamk's time in CUDA graphs, 24 of 24 runs faster), 8 it turns
# to _share1 (8-33 pieces; 0.91-0.97 of _share's, 16 of 16), and 6 with 2-3
# pieces it leaves alone (_share1v4 0.98-1.04 there, 2 of 12 faster).
HELD_OUT_V4 = [(1072, 320, 12400), (144, 1920, 5360), (664, 576, 4856), (1056, 248, 6288),
               (512, 608, 9840), (448, 760, 12816), (712, 464, 4672), (784, 320, 14176),
               (968, 448, 4912), (184, 1616, 8480), (128, 2056, 5024), (128, 3128, 4312)]
HELD_OUT_SHARE1 = [(144, 248, 10624), (560, 248, 10304), (904, 176, 4040), (240, 200, 11752),
                   (216, 760, 7360), (272, 488, 4496), (272, 176, 9168), (208, 312, 5512)]
HELD_OUT_PIECES23 = [(1088, 392, 8560), (208, 3680, 12640), (1672, 328, 15744),
                     (1632, 368, 6352), (712, 888, 4760), (728, 656, 9744)]


def test_the_pick_on_the_held_out_draw(monkeypatch):
    for on in (True, False):
        monkeypatch.setattr(gemm_configs, "AUTO_SHARE1", on)
        for dtype in ("bf16", "f16"):
            for shapes, before, now in (
                    (HELD_OUT_V4, "128x128_streamk", "128x128_streamk_share1v4"),
                    (HELD_OUT_SHARE1, "128x128_streamk_share", "128x128_streamk_share1"),
                    (HELD_OUT_PIECES23, "128x128_streamk", "128x128_streamk")):
                for shape in shapes:
                    assert gemm_configs.choose(*shape, dtype) == (now if on else before), shape


def test_the_held_out_draw_is_what_class_shapes_draws():
    """The documented command draws these shapes (and none measured before)."""
    import importlib.util
    import os
    import sys

    here = os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks", "gemm")
    sys.path.insert(0, here)
    try:
        spec = importlib.util.spec_from_file_location(
            "class_shapes", os.path.join(here, "class_shapes.py"))
        cs = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(cs)
        from random_sweep import DEFAULT_COUNT, DEFAULT_SEED, draw
        from sweep import SHAPES
    finally:
        sys.path.remove(here)
    seen = set(draw(DEFAULT_COUNT, DEFAULT_SEED)) | {s[:3] for s in SHAPES}
    got = cs.share1_draw((12, 8, 6), 8181, seen | set(cs.SHARE1_MEASURED))
    assert [s for s, _ in got["v4"]] == HELD_OUT_V4
    assert [s for s, _ in got["share1"]] == HELD_OUT_SHARE1
    assert [s for s, _ in got["pieces23"]] == HELD_OUT_PIECES23
    assert [p for _, p in got["pieces23"]] == [3, 2, 3, 3, 3, 3]
    assert not set(FITTED) & {s for g in got.values() for s, _ in g}
