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
        assert v in gc.RULE_VARIANTS
        assert all(gc.estimate(v, m, n, sms, k) <= gc.estimate(o, m, n, sms, k)
                   for o in gc.RULE_VARIANTS), (m, n, k, v)


def test_big_shapes_get_the_big_tile_and_small_ones_fill_the_sms():
    for cube in (2048, 4096, 8192):
        assert gc.estimate("128x256", cube, cube, 132) == min(
            gc.estimate(v, cube, cube, 132) for v in gc.RULE_VARIANTS)
    # 256^2: one 128x256 tile would run on 1 SM of 132; 64x128 tiles use 8
    v = gc.choose(256, 256, 256, "bf16")
    bm, bn = gc.tile(v)
    assert math.ceil(256 / bm) * math.ceil(256 / bn) == 8 and v == "64x128"


def test_3072_cube_takes_the_tile_that_fills_its_last_wave():
    # 128x192: 384 tiles = 3 waves of 132, the last 97% full (128x256: 288
    # tiles, 3 waves, 18% full; 128x128: 576 tiles, 5 waves, 36% full)
    for dtype in ("bf16", "f16"):
        assert gc.choose(3072, 3072, 3072, dtype) == "128x192"
    assert math.ceil(24 * 16 / 132) == 3 and 24 * 16 - 2 * 132 == 120
    # the cubes above it keep the 128x256 tile (or their measured variant)
    assert gc.choose(4096, 4096, 4096, "bf16") == "128x256"


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
