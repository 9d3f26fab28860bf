"""Deviceless: what pipeline_mlir.gemm decides before the GPU runs anything.

The variant table's rule, the persistent cache of compiled variants (hit,
miss with the command that fills it, torn files, a registered builder), the
cache-filling script on one variant, the descriptor arena's stream-ordered
copies and slot reuse, and the torch op schema of a compiled kernel. The
launches themselves run in test/gpu (test_gemm_entry_point and the graph /
torch.compile tests).
"""

import ctypes
import importlib.util
import math
import os

import pytest

from _gemm_pick_rules import before_cluster_n_any  # noqa: F401 (autouse)
from pipeline_mlir import runtime as rt
from pipeline_mlir.ops import gemm_configs as gc
from pipeline_mlir.ops import kernel_cache as kc

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PIPELINE_MLIR_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(kc, "_builders", {"hopper_gemm": None})   # no builder until one is registered
    return tmp_path / "cache"


# --- the table ---------------------------------------------------------------

SHAPES = [(m, n, k) for m in (16, 128, 256, 1024, 2048, 4096, 8192)
          for n in (256, 1024, 4096, 14336) for k in (512, 8192)]


@pytest.mark.parametrize("sms", [132, 114])
def test_the_rule_picks_the_cheapest_estimate(sms):
    # the plain rule; split-K and stream-K (over it) are
    # test/python/test_gemm_splitk.py's and test_gemm_streamk.py's
    for m, n, k in SHAPES:
        v = gc.choose(m, n, k, "bf16", sms, split=False, stream_k=False)
        if v in gc.CUT_VARIANTS:
            # a tile cut to the shape beats every table tile by CUT_MARGIN
            # (test_gemm_cut_tiles.py), and is the cheapest of its family
            assert all(gc.estimate(v, m, n, sms, k) < gc.CUT_MARGIN * gc.estimate(
                o, m, n, sms, k) for o in gc.RULE_VARIANTS), (m, n, k, v)
            assert all(gc.estimate(v, m, n, sms, k) <= gc.estimate(o, m, n, sms, k)
                       for o in gc.CUT_VARIANTS), (m, n, k, v)
            continue
        assert v in gc.RULE_VARIANTS
        assert all(gc.estimate(v, m, n, sms, k) <= gc.estimate(o, m, n, sms, k)
                   for o in gc.RULE_VARIANTS), (m, n, k, v)


def test_big_shapes_get_the_big_tile_and_small_ones_fill_the_sms():
    # (8192^3 is TUNED to the cluster; the rule's 192x128 there, 1% cheaper
    # in the model, ran 2% faster than it on an H200: h200-random-sweep-run5)
    for cube in (2048, 4096):
        assert gc.estimate("128x256", cube, cube, 132, cube) == min(
            gc.estimate(v, cube, cube, 132, cube) for v in gc.RULE_VARIANTS)
    assert gc.choose(8192, 8192, 8192, "bf16") == "128x256c2"
    # 256^2: one 128x256 tile would run on 1 SM of 132; 64x128 tiles use 8
    v = gc.choose(256, 256, 256, "bf16")
    bm, bn = gc.tile(v)
    assert math.ceil(256 / bm) * math.ceil(256 / bn) == 8 and v == "64x128"


def test_3072_cube_takes_a_tile_that_fills_its_last_wave():
    # 192x192: 256 tiles = 2 waves of 132, the last 94% full; 128x192: 384
    # tiles = 3 waves, the last 91% full (128x256: 288 tiles, 3 waves, 18%
    # full; 128x128: 576 tiles, 5 waves, 36% full). Measured alike on an
    # H200 (h200-random-sweep-run5.log: 0.0779 ms and 0.0784 ms; run6:
    # 192x192c2 1.02-1.10x cuBLAS, 192x192 1.02-1.07x); the model takes the
    # larger tile's fewer waves.
    for dtype in ("bf16", "f16"):
        assert gc.choose(3072, 3072, 3072, dtype) in ("192x192", "192x192c2")
        assert gc.choose(3072, 3072, 3072, dtype, fused=True) == "192x192"
    assert 16 * 16 - 132 == 124 and math.ceil(24 * 16 / 132) == 3 and 24 * 16 - 2 * 132 == 120
    assert gc.estimate("192x192", 3072, 3072, 132, 3072) < gc.estimate(
        "128x192", 3072, 3072, 132, 3072)
    # the cubes above it keep the 128x256 tile (or their measured variant)
    assert gc.choose(4096, 4096, 4096, "bf16") == "128x256"


def test_narrow_outputs_take_a_192_row_tile():
    """Three consumer warpgroups (192 rows): an N of a few hundred on a tall
    M, and an M of 129..192 on a wide N, run in fewer or fuller tiles than
    any 128-row tile gives. The shapes measured on an H200
    (h200-random-sweep-run5.log and run6, bf16 and fp16: 192x192 and its
    2-CTA cluster 0.98-1.07x cuBLAS on 10528 x 320 x 3024 where the 128-row
    tiles ran at most 0.74x, 1.01-1.03x on 760 x 6192 x 4656 against
    0.80-0.83x, 192x128 0.96-0.97x on 184 x 11464 x 5424 against 0.82-0.84x)
    take them, a fused call the one-CTA tile (192x192c2 is UNFUSED), and so
    does their family."""
    for dtype in ("bf16", "f16"):
        for m, n, k in ((10528, 320, 3024), (760, 6192, 4656)):
            assert gc.choose(m, n, k, dtype) in ("192x192", "192x192c2")
            assert gc.choose(m, n, k, dtype, fused=True) == "192x192"
        assert gc.choose(184, 11464, 5424, dtype) == "192x128"
    for m in range(6144, 16385, 1024):
        for n in range(264, 385, 24):
            for k in (2048, 3024, 6000):
                # the pick, or the tile of its stream-K variant (the even
                # launch: 13312 x 264..384 x 6000 on 192x128)
                assert gc.tile(gc.tile_variant(gc.choose(m, n, k, "bf16")))[0] == 192
                v = gc.choose(m, n, k, "bf16", stream_k=False)
                assert gc.tile(v)[0] == 192, (m, n, k, v)
                assert all(gc.estimate(v, m, n, 132, k) < gc.estimate(o, m, n, 132, k)
                           for o in gc.RULE_VARIANTS if gc.tile(o)[0] != 192)
    for m in range(168, 193, 8):
        for n in range(12288, 16385, 1024):
            assert gc.choose(m, n, 5424, "bf16") == "192x128", (m, n)


def test_192_row_tiles_fit_the_register_file():
    """512 threads enter with 128 registers each; the producer gives up
    what the three consumer warpgroups take (32 + 3 x 160 = 4 x 128)."""
    from pipeline_mlir.chip_limits import REGISTER_FILE

    for name in ("192x192", "192x128"):
        over = gc.VARIANTS[name]
        assert over["consumer_warpgroups"] == 3 and gc.tile(name)[0] == 192
        threads = 128 * (1 + over["consumer_warpgroups"])
        entry = REGISTER_FILE // threads // 8 * 8
        assert over["producer_registers"] + 3 * over["consumer_registers"] <= 4 * entry == 512


def test_a_fused_pick_leaves_out_the_unfused_tiles(monkeypatch):
    """A call with a fused epilogue never runs stream-K nor a tile whose
    fused kernels spill (UNFUSED), also where the plain pick or TUNED
    would; the same shapes without an epilogue keep them."""
    shapes = [(m, n, k) for m in (760, 1664, 3072, 6208, 10528)
              for n in (320, 1112, 1800, 6192) for k in (1192, 3024, 12456)]
    seen = set()
    for m, n, k in shapes:
        v = gc.choose(m, n, k, "bf16")
        seen.add(v)
        f = gc.choose(m, n, k, "bf16", fused=True)
        assert f not in gc.UNFUSED and not gc.is_stream_k(f), (m, n, k, f)
        plain = gc.choose(m, n, k, "bf16", stream_k=False)
        # or the ping-pong tile over it (gemm_configs.choose_pingpong)
        assert f == plain or plain in gc.UNFUSED or \
            f == gc.choose_pingpong(m, n, k, 132, plain), (m, n, k, f)
    assert seen & set(gc.UNFUSED) and any(gc.is_stream_k(v) for v in seen)
    monkeypatch.setitem(gc.TUNED, (6208, 1800, 1192, "bf16"), "192x192c2")
    assert gc.choose(6208, 1800, 1192, "bf16") == "192x192c2"
    assert gc.choose(6208, 1800, 1192, "bf16", fused=True) not in gc.UNFUSED


def test_tuned_table_names_real_variants_and_wins_over_the_rule():
    assert gc.TUNED, "the sweep's measured winners are in the table"
    for (m, n, k, dtype), v in gc.TUNED.items():
        assert v in gc.VARIANTS and dtype in ("bf16", "f16")
        assert gc.choose(m, n, k, dtype) == v
    # an exact-shape table: a neighbouring shape goes to the rule
    assert gc.choose(2048, 2048, 2056, "bf16") == gc.choose(2048, 2048, 2056, "bf16", 132)
    assert gc.choose(2048, 2048, 2056, "bf16") in gc.RULE_VARIANTS


def test_tuned_entries_come_first(monkeypatch):
    # a shape with no entry of its own takes the rule's pick
    assert (4096, 4096, 4096, "bf16") not in gc.TUNED
    assert gc.choose(4096, 4096, 4096, "bf16") == "128x256"
    monkeypatch.setitem(gc.TUNED, (4096, 4096, 4096, "bf16"), "128x64")
    assert gc.choose(4096, 4096, 4096, "bf16") == "128x64"


def test_every_variant_is_a_valid_config():
    pytest.importorskip("mlir.ir")
    import sys
    from dataclasses import replace

    sys.path.insert(0, os.path.join(ROOT, "examples"))
    import hopper_gemm

    for name, over in gc.VARIANTS.items():
        cfg = replace(hopper_gemm.GemmConfig(), **over)
        assert (cfg.block_m, cfg.block_n) == gc.tile(name)
        assert cfg.num_stages() >= 2


# --- the cache -----------------------------------------------------------------

def test_cache_round_trip_and_keys(cache):
    over = gc.VARIANTS["128x128"]
    assert kc.load("128x128", over, "bf16", "sm_90a") is None
    path = kc.store("128x128", over, "bf16", "sm_90a", b"\x7fELF-image", {"name": "g"})
    assert path.startswith(str(cache / "gemm"))
    assert kc.load("128x128", over, "bf16", "sm_90a") == (b"\x7fELF-image", {"name": "g"})
    keys = {kc.variant_key(over, "bf16", "sm_90a"), kc.variant_key(over, "f16", "sm_90a"),
            kc.variant_key(over, "bf16", "sm_100a"),
            kc.variant_key(dict(over, stages=5), "bf16", "sm_90a")}
    assert len(keys) == 4
    with open(path, "wb") as f:      # a torn write: not used
        f.write(b"\x7fELF-ima")
    assert kc.load("128x128", over, "bf16", "sm_90a") is None


def test_a_miss_says_how_to_fill_the_cache(cache):
    with pytest.raises(LookupError, match=r"no compiled GEMM variant 64x128 \(f16, sm_90a\) in "
                       r".*gemm: compile it where MLIR is installed \(python "
                       r"scripts/build-gemm-cache.py --shape M N K --dtype f16\)"):
        kc.get("64x128", gc.VARIANTS["64x128"], "f16", "sm_90a")


def test_a_registered_builder_fills_a_miss_once(cache):
    calls = []

    def build(over, dtype, chip):
        calls.append((over, dtype, chip))
        return b"cubin:" + dtype.encode(), {"name": f"g_{dtype}"}

    kc.register_builder(build)
    over = gc.VARIANTS["64x256"]
    assert kc.get("64x256", over, "f16", "sm_90a") == (b"cubin:f16", {"name": "g_f16"})
    assert kc.get("64x256", over, "f16", "sm_90a") == (b"cubin:f16", {"name": "g_f16"})
    assert calls == [(over, "f16", "sm_90a")]


def test_build_script_fills_the_cache_for_a_shape(tmp_path, monkeypatch):
    pytest.importorskip("mlir.ir")
    spec = importlib.util.spec_from_file_location(
        "build_gemm_cache", os.path.join(ROOT, "scripts", "build-gemm-cache.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    monkeypatch.delenv("PIPELINE_MLIR_CACHE_DIR", raising=False)
    assert mod.main(["--shape", "256", "256", "256", "--dtype", "f16",
                     "--dir", str(tmp_path / "c")]) == 0
    monkeypatch.setenv("PIPELINE_MLIR_CACHE_DIR", str(tmp_path / "c"))
    image, meta = kc.load("64x128", gc.VARIANTS["64x128"], "f16", "sm_90a")
    assert image[:4] == b"\x7fELF" and rt.image_target(image).sm == "sm_90a"
    assert (meta["dtype"], meta["block_m"], meta["block_n"], meta["threads"]) == (
        "f16", 64, 128, 256)
    assert os.listdir(tmp_path / "c" / "gemm") and len(os.listdir(tmp_path / "c" / "gemm")) == 2


# --- the descriptor arena --------------------------------------------------------

def test_descriptor_arena_copies_in_stream_order_and_reuses_slots():
    from pipeline_mlir.runtime import descriptor_arena as da

    copies, records = [], []

    class Driver:
        def copy_to_device_async(self, *a):
            copies.append(a)

        def is_capturing(self, stream):
            return False

        def create_event(self):
            return 0xEE

        def record(self, event, stream):
            records.append((event, stream))

        def event_done(self, event):
            return True

    raw = ctypes.create_string_buffer(2 * 128)
    host = ctypes.addressof(raw)
    arena = da.DescriptorArena(0x5, slots=2, driver=Driver(), buffers=(0x10000, host))
    told = []
    slots = [arena.put(bytes([i]) * 128, on_reuse=lambda i=i: told.append(i))
             for i in range(3)]
    assert slots == [(0, 1), (1, 1), (0, 2)]              # the third reuses slot 0
    assert told == [0]                                    # its holder (put 0) is told
    assert not arena.current(0, 1) and arena.current(0, 2)
    assert [arena.address(s) for s, _ in slots] == [0x10000, 0x10080, 0x10000]
    assert copies == [(0x10000, host, 128, 0x5), (0x10080, host + 128, 128, 0x5),
                      (0x10000, host, 128, 0x5)]
    assert records == [(0xEE, 0x5)] * 3                   # one event per (chunk, stream)
    assert ctypes.string_at(host, 128) == bytes([2]) * 128
    with pytest.raises(ValueError, match="128 bytes"):
        arena.put(b"short")


# --- torch op schema ---------------------------------------------------------------

def test_torch_op_schema_from_the_kernel_params():
    from pipeline_mlir.runtime.torch_op import _schema

    fn = rt.CompiledKernel(b"\x7fELF" + bytes(60), name="k", block=32,
                           params=[("src", "ptr"), ("dst", "ptr:4"), ("aux", "ptr"),
                                   ("n", "i32"), ("scale", "f32")])
    assert _schema(fn, ("dst", "aux")) == (
        "(Tensor src, Tensor(a!) dst, Tensor(b!) aux, int n, float scale) -> ()")
    with pytest.raises(rt.ArgumentError, match="mutates names 'n', a i32 parameter"):
        _schema(fn, ("n",))
    tma = rt.CompiledKernel(b"\x7fELF" + bytes(60), name="t", block=32,
                            params=[("d", "tma"), ("n", "i32")])
    with pytest.raises(rt.ArgumentError, match="parameter 'd' is a TMA descriptor"):
        _schema(tma, ())
