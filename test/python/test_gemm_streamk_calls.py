"""Deviceless: what one ``pipeline_mlir.gemm`` call of a stream-K pick
costs the driver and the allocator, and the stream-K buffer pool under a
long adversarial call pattern.

The op (ops/gemm.py) runs on a stand-in torch over the real launcher
(HopperGemm on test_runtime_fastpath.MockDriver, as
test_gemm_host_fastpath.py does) and the real StreamKGemm: a call after
the first is one driver launch, no allocation, no tensor map, no event,
no memset (the counters are zeroed once, when made: the kernel leaves them
zero), and the launch's parameters are the pool's workspace and counters
and the shape's share. Then many streams, tile shapes and operand shapes
in a random order: the pool never holds more than ``_BUFFERS`` sets,
every launch names a set the pool holds (never a dropped one), a dropped
set's tensors are let go, the per-variant call table stays bounded, and
every allocation is a new set's.
"""

import gc
import importlib
import random
import struct
import sys
import types
import weakref

import pytest

import pipeline_mlir.ops as ops_package
from pipeline_mlir.ops import gemm_configs, streamk_host

import test_gemm_host_fastpath as fast

SK_META = dict(fast.META, name="gemm_bf16_128x128_streamk", block_n=128, stream_k=True,
               params=[*fast.META["params"], ["sk_workspace", "ptr"], ["sk_counters", "ptr:4"],
                       ["sk_ctas", "i32"], ["sk_rounds", "i32"]])
SHAPE = (432, 568, 7312)      # run16's class (b): 128x128_streamk, 20 us on an H200


class _CustomOp:
    def __init__(self, fn):
        pass

    def register_fake(self, fn):
        return fn


@pytest.fixture
def op(monkeypatch):
    """ops.gemm on the stand-in torch, its pick loaded on the mock driver:
    (module, driver, tensor maps encoded, allocations made)."""
    g, drv, encoded, _ = fast.mock_gemm(monkeypatch, SK_META)
    torch = sys.modules["torch"]
    made = []

    def alloc(kind):
        def f(n, device=None, dtype=None):
            made.append((kind, n, dtype))
            return fast.Tensor((n,), fast.BF16, ordinal=device.index)
        return f

    torch.empty, torch.zeros = alloc("empty"), alloc("zeros")
    torch.float32, torch.int32, torch._check = "f32", "i32", None
    torch.compiler = types.SimpleNamespace(is_compiling=lambda: False)
    torch.library = types.SimpleNamespace(custom_op=lambda name, mutates_args: _CustomOp)
    monkeypatch.setattr(streamk_host, "_buffers", {})
    monkeypatch.delitem(sys.modules, "pipeline_mlir.ops.gemm", raising=False)
    monkeypatch.setattr(ops_package, "gemm", None, raising=False)
    mod = importlib.import_module("pipeline_mlir.ops.gemm")
    monkeypatch.delitem(sys.modules, "pipeline_mlir.ops.gemm")   # next import: real torch
    monkeypatch.setattr(mod, "DTYPES", {fast.BF16: "bf16", fast.F16: "f16"})
    monkeypatch.setattr(mod.runtime, "default_device", lambda ordinal=0: g.device)
    asked = []

    def get(name, overrides, dtype, chip):
        asked.append(name)
        return fast.IMAGE, SK_META

    monkeypatch.setattr(mod.kernel_cache, "get", get)
    monkeypatch.setattr(mod, "HopperGemm", lambda image, meta, device: g)
    return mod, drv, encoded, made, asked


def test_a_stream_k_call_is_one_launch_and_allocates_nothing(op, monkeypatch):
    mod, drv, encoded, made, asked = op
    m, n, k = SHAPE
    # the last contributor's launch (SK_META); the pick's one-arrival shared
    # fix-up (choose_share1) calls through the same path with the share launch
    monkeypatch.setattr(gemm_configs, "AUTO_SHARE1", False)
    a, b, c = fast.Tensor((m, k)), fast.Tensor((n, k)), fast.Tensor((m, n))
    assert gemm_configs.choose(m, n, k, "bf16", 132) == "128x128_streamk"
    assert mod.gemm(a, b, out=c) is c
    assert asked == ["128x128_streamk"]
    # the first call makes the stream's set: 2 x 132 fp32 tiles, 132 x 2 x 8 counters
    assert made == [("empty", 2 * 132 * 128 * 128, "f32"), ("zeros", 2 * 132 * 8, "i32")]
    assert len(encoded) == 1 and len(drv.launches) == 1
    for _ in range(50):
        mod.gemm(a, b, out=c)
    assert len(drv.launches) == 51 and len(made) == 2 and len(encoded) == 1
    assert drv.records == []               # no events, no waits
    assert all(x == drv.launches[0] for x in drv.launches)
    blobs = drv.launches[0][6]
    (ws, counters), = streamk_host._buffers.values()    # as the GPU suite reads them
    sk_ctas, sk_rounds = gemm_configs.stream_k_launch(4 * 5, -(-k // gemm_configs.K_BLOCK),
                                                      132, "128x128")[1:]
    assert blobs[7:] == [struct.pack("<Q", ws.data_ptr()), struct.pack("<Q", counters.data_ptr()),
                         struct.pack("<i", sk_ctas), struct.pack("<i", sk_rounds)]
    # another stream: its own set and launch; back on the first: nothing new
    g = mod._picks[(a.shape, b.shape, a.dtype, 0)]
    g.launch(a, b, c, (), 0x77, False)
    assert len(made) == 4 and drv.launches[-1][7:] != blobs[7:]
    mod.gemm(a, b, out=c)
    assert len(made) == 4 and drv.launches[-1] == drv.launches[0]


def test_a_long_adversarial_call_pattern_stays_bounded(monkeypatch):
    """3,000 calls over 20 streams, 3 tile shapes and 6 operand shapes in
    a random order (the pool holds 8 sets, each variant's call table 16
    entries here)."""
    live = []

    class Tensor:
        _next = 0x7000_0000

        def __init__(self, shape, dtype=None):
            self.shape, self.dtype, self.device = tuple(shape), dtype, "cuda:0"
            self.base = Tensor._next
            Tensor._next += 1 << 24

        def get_device(self):
            return 0

        def data_ptr(self):
            return self.base

    torch = types.ModuleType("torch")
    torch.float32, torch.int32 = "f32", "i32"
    made = []

    def alloc(kind):
        def f(n, device=None, dtype=None):
            t = Tensor((n,), dtype)
            made.append(kind)
            live.append(weakref.ref(t))
            return t
        return f

    torch.empty, torch.zeros = alloc("empty"), alloc("zeros")
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.setattr(streamk_host, "_buffers", {})
    monkeypatch.setattr(streamk_host, "_CALLS", 16)

    def variant(block_n):
        class Gemm:
            meta = {"name": f"gemm_streamk_{block_n}", "block_m": 128, "block_n": block_n,
                    "cluster_m": 1}
            device = types.SimpleNamespace(ordinal=0, limits=types.SimpleNamespace(
                multiprocessors=132))
            launches = []

            def stream_k_wave(self, sms):
                return sms

            def launch(self, a, b, c, extra, stream, sync):
                self.launches.append((a, b, extra, stream))
                return c
        return streamk_host.StreamKGemm(Gemm())

    variants = [variant(bn) for bn in (128, 192, 256)]
    shapes = [(432, 568, 7312), (144, 1072, 5752), (1424, 168, 2440), (4544, 1008, 7784),
              (408, 592, 4408), (280, 136, 5728)]
    ops = {s: (Tensor((s[0], s[2])), Tensor((s[1], s[2])), Tensor((s[0], s[1]))) for s in shapes}
    rng = random.Random(5)
    sets_made = 0
    for i in range(3000):
        g = rng.choice(variants)
        stream = rng.choice(range(1, 21)) if rng.random() < 0.7 else rng.choice((1, 2))
        shape = rng.choice(shapes)
        a, b, c = ops[shape]
        before = len(made)
        g.launch(a, b, c, (), stream, False)
        sets_made += (len(made) - before) // 2
        assert made[before:] in ([], ["empty", "zeros"])   # only a new set allocates
        _, _, extra, s = g.gemm.launches[-1]
        assert s == stream
        held = streamk_host._buffers[(0, stream, 128, g.meta["block_n"], 132)]
        assert held.live and extra[:2] == held.addresses        # a set the pool holds
        m, n, k = shape
        assert extra[2:] == g.share(m, n, k)
        assert len(streamk_host._buffers) <= streamk_host._BUFFERS
        assert all(len(v._calls) <= 16 for v in variants)
        if i % 50 == 49:
            gc.collect()
            alive = sum(r() is not None for r in live)
            assert alive == 2 * len(streamk_host._buffers)   # dropped sets are let go
            stale = [h for v in variants for h, _ in v._calls.values() if not h.live]
            assert all(h.ws is None and h.counters is None for h in stale)
    assert 16 < sets_made < 3000       # the pool was turned over, not made per call
    assert len(made) == 2 * sets_made


def test_a_negative_stream_handle_is_still_refused(op):
    """The launcher takes an int stream as a handle without asking it for
    attributes; a negative one still gets stream_address's message."""
    mod, drv, _, _, _ = op
    m, n, k = SHAPE
    a, b, c = fast.Tensor((m, k)), fast.Tensor((n, k)), fast.Tensor((m, n))
    mod.gemm(a, b, out=c)
    g = mod._picks[(a.shape, b.shape, a.dtype, 0)]
    with pytest.raises(Exception, match="stream must be None, a CUstream handle"):
        g.gemm.launch(a, b, c, (1, 2, 3, 4), -1, False)
    assert len(drv.launches) == 1
