"""Deviceless: the GEMM launcher's per-call path (ops/hopper_gemm_host.py)
and the prepared launches under it (runtime/fastlaunch.py).

A mock driver (test_runtime_fastpath.MockDriver) records each launch's
configuration and parameter bytes; fake tensors stand for torch CUDA
tensors and count the tensor maps encoded for them. The checks: the first
call with a set of tensors runs every check and prepares the launch, a
repeat launches the very same bytes through one driver call and encodes
nothing; any change of address, shape, dtype, contiguity, device or stream
goes back through the checks (with their messages); ``gemm()``-style
calls allocate C through ``new_empty``; evicted descriptor slots drop the
prepared launch; asynchronous CompiledKernel calls reuse prepared launches
and record no events; and (a sanity bound on a mock, not a speed claim:
benchmarks/gemm/launch_overhead.py measures on the GPU) a repeat costs a
few microseconds of Python.
"""

import ctypes
import struct
import sys
import time
import types

import pytest

from pipeline_mlir import runtime as rt
from pipeline_mlir.ops import hopper_gemm_host as hg
from pipeline_mlir.runtime import compiled as rc
from pipeline_mlir.runtime import descriptor_arena as da
from pipeline_mlir.runtime import fastlaunch as fl
from pipeline_mlir.runtime import launch_cache as lc

from test_runtime_fastpath import IMAGE, FakeDevice, FakeFunction, MockDriver

SIGNATURE = ["tma", "tma", "tma", "ptr", "i32", "i32", "i32"]
META = {"name": "gemm_bf16_128x256", "dtype": "bf16", "block_m": 128, "block_n": 256,
        "cluster_m": 1, "threads": 384, "smem": 200 << 10,
        "params": [[n, k] for n, k in zip(("a", "b", "c", "c_ptr", "m", "n", "k"), SIGNATURE)],
        "layouts": {x: {"dtype": "bf16", "major": "K", "swizzle": 128, "rows": r, "cols": c}
                    for x, r, c in (("a", 128, 64), ("b", 256, 64), ("c", 64, 256))}}


class Dtype:
    def __init__(self, name, size):
        self.name, self.size = name, size

    def __repr__(self):
        return f"torch.{self.name}"


BF16, F16 = Dtype("bfloat16", 2), Dtype("float16", 2)


class CudaDevice:
    type = "cuda"

    def __init__(self, index):
        self.index = index

    def __str__(self):
        return f"cuda:{self.index}"


class Tensor:
    """Stands for a torch CUDA tensor: the attributes the launcher reads."""

    __module__ = "torch"
    allocated = 0x9000_0000

    def __init__(self, shape, dtype=BF16, address=None, ordinal=0, contiguous=True):
        self.shape, self.dtype, self.ordinal, self.contiguous = tuple(shape), dtype, ordinal, \
            contiguous
        if address is None:
            address = Tensor.allocated
            Tensor.allocated += 1 << 20
        self.address = address
        self.is_cuda = True
        self.device = CudaDevice(ordinal)

    def data_ptr(self):
        return self.address

    def is_contiguous(self):
        return self.contiguous

    def get_device(self):
        return self.ordinal

    def dim(self):
        return len(self.shape)

    def size(self, d):
        return self.shape[d]

    def element_size(self):
        return self.dtype.size

    def new_empty(self, shape, dtype=None):
        return Tensor(shape, dtype or self.dtype, ordinal=self.ordinal)


@pytest.fixture
def gemm(monkeypatch):
    """A HopperGemm on a mock driver: (gemm, driver, encoded tensor maps, arena puts)."""
    return mock_gemm(monkeypatch, META)


def mock_gemm(monkeypatch, meta):
    """``gemm``'s fixture for the variant ``meta`` (its params, bound by name)."""
    drv = MockDriver([kind for _, kind in meta["params"]])
    torch = types.SimpleNamespace(
        Tensor=Tensor, bfloat16=BF16, float16=F16,
        empty=lambda m, n, device, dtype: Tensor((m, n), dtype, ordinal=device.index),
        cuda=types.SimpleNamespace(is_initialized=lambda: True),
        _C=types.SimpleNamespace(_cuda_getCurrentRawStream=lambda ordinal: 0x5000 + ordinal))
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.setattr(rc.CompiledKernel, "function", lambda self, device=None: FakeFunction())
    monkeypatch.setattr(rc, "default_device", lambda ordinal=0: FakeDevice(ordinal))
    real_init = fl.Launcher.__init__
    monkeypatch.setattr(fl.Launcher, "__init__",
                        lambda self, image, device, fn, driver=None:
                        real_init(self, image, device, fn, driver=drv))
    encoded, puts = [], []

    def descriptors(self, a, b, c):
        encoded.append((a.address, b.address, c.address))
        return tuple(types.SimpleNamespace(bytes=bytes([len(encoded)]) * 128) for _ in "abc")

    real_put = da.DescriptorArena.put

    def put(self, data, on_reuse=None):
        puts.append(on_reuse)
        return real_put(self, data, on_reuse)

    class CopyDriver:
        """Copies recorded nowhere; nothing is ever pending."""

        def copy_to_device_async(self, *a):
            pass

        def is_capturing(self, stream):
            return drv.capturing

        def create_event(self):
            return 1

        def destroy_event(self, event):
            pass

        def record(self, event, stream):
            pass

        def event_done(self, event):
            return True

    hosts = []

    def allocate(nbytes):
        hosts.append(ctypes.create_string_buffer(nbytes))
        return 0xD0000 + 0x10000 * len(hosts), ctypes.addressof(hosts[-1])

    arenas = da.StreamArenas(None, slots=64, driver=CopyDriver(), allocate=allocate)
    monkeypatch.setattr(da.DescriptorArena, "put", put)
    monkeypatch.setattr(lc, "device_arena", lambda device: arenas)
    monkeypatch.setattr(hg.HopperGemm, "descriptors", descriptors)
    rc.CompiledKernel._cache.clear()
    g = hg.HopperGemm(IMAGE, meta, device=FakeDevice(0))
    return g, drv, encoded, puts


def operands(m=256, n=512, k=128, dtype=BF16):
    return Tensor((m, k), dtype), Tensor((n, k), dtype), Tensor((m, n), dtype)


def test_a_repeat_launches_the_prepared_bytes_and_encodes_nothing(gemm):
    g, drv, encoded, _ = gemm
    a, b, c = operands()
    assert g(a, b, c) is c
    assert len(encoded) == 1 and len(drv.launches) == 1
    for _ in range(3):
        g(a, b, c)
    assert len(encoded) == 1 and len(drv.launches) == 4
    assert all(x == drv.launches[0] for x in drv.launches)
    grid, block, cluster, smem, stream, _, blobs = drv.launches[0]
    # 256 x 512 in 128 x 256 tiles: 4 CTAs; torch's current stream of GPU 0
    assert (grid, block, cluster, smem, stream) == ((4, 1, 1), (384, 1, 1), None, 200 << 10,
                                                    0x5000)
    assert blobs[3:] == [struct.pack("<Q", c.address), *(struct.pack("<i", v)
                                                         for v in (256, 512, 128))]
    assert drv.records == []          # no events on the GEMM path


@pytest.mark.parametrize("change", ["address", "shape", "stream"])
def test_a_new_fact_prepares_a_new_launch(gemm, change):
    g, drv, encoded, _ = gemm
    a, b, c = operands()
    g(a, b, c)
    if change == "address":
        a = Tensor(a.shape)
        g(a, b, c)
    elif change == "shape":
        a, c = Tensor((128, 128)), Tensor((128, 512))
        g(a, b, c)
    else:
        g(a, b, c, stream=0x77)
    assert len(encoded) == 2 and drv.launches[-1] != drv.launches[0]
    assert drv.launches[-1][4] == (0x77 if change == "stream" else 0x5000)


BAD = [
    (lambda a, b, c: (Tensor(a.shape, F16, a.address), b, c),
     TypeError, r"gemm_bf16_128x256: a must be torch.bfloat16, got torch.float16"),
    (lambda a, b, c: (a, b, Tensor(c.shape, address=c.address, contiguous=False)),
     ValueError, r"c must be a contiguous 2-D CUDA tensor"),
    # (another GPU's tensor has another address: unified virtual addressing)
    (lambda a, b, c: (a, Tensor(b.shape, ordinal=1), c),
     ValueError, r"b is on cuda:1, but this GEMM is loaded on GPU 0"),
    (lambda a, b, c: (a, Tensor((512, 64), address=b.address), c),
     ValueError, r"shapes do not match: a \(256, 128\), b \(512, 64\) \(N x K\), c \(256, 512\)"),
    (lambda a, b, c: ("a", b, c), AttributeError, r"'str' object has no attribute"),
]


@pytest.mark.parametrize("bad,exc,msg", BAD)
def test_bad_arguments_after_a_warm_call_get_the_checks_message(gemm, bad, exc, msg):
    g, drv, encoded, _ = gemm
    a, b, c = operands()
    g(a, b, c)
    g(a, b, c)
    with pytest.raises(exc, match=msg):
        g(*bad(a, b, c))
    assert len(drv.launches) == 2 and len(encoded) == 1


def test_without_out_c_is_allocated_like_a_and_prepared_once(gemm):
    g, drv, encoded, _ = gemm
    a, b, _ = operands()
    c1 = g(a, b)
    assert c1.shape == (256, 512) and c1.dtype is BF16
    c2 = g(a, b)                       # a new C (a new address): a new prepared launch
    assert c2.address != c1.address and len(encoded) == 2
    g(a, b, c1)                        # C at an address seen before: prepared
    assert len(encoded) == 2 and drv.launches[-1] == drv.launches[0]


def test_an_evicted_descriptor_slot_drops_the_prepared_launch(gemm):
    g, drv, encoded, puts = gemm
    a, b, c = operands()
    g(a, b, c)
    puts[1]()                          # the arena gave the launch's B slot to someone else
    assert len(g.launches) == 0
    g(a, b, c)
    assert len(encoded) == 2 and len(puts) == 6
    g(a, b, c)                         # the new launch stays
    assert len(encoded) == 2 and len(g.launches) == 1


def test_sync_calls_wait_through_the_timed_path(gemm, monkeypatch):
    g, drv, encoded, _ = gemm
    waited = []
    monkeypatch.setattr(rt.launch.Launch, "wait", lambda self, timeout=None: waited.append(self))
    a, b, c = operands()
    g(a, b, c, sync=True)
    g(a, b, c, sync=True)
    assert len(waited) == 2 and len(drv.records) == 4 and len(encoded) == 1
    assert drv.launches[0] == drv.launches[1]


def test_a_prepared_gemm_call_costs_microseconds_of_python(gemm):
    """A sanity bound with a mock driver (no speed claim: the GPU-host
    number is benchmarks/gemm/launch_overhead.py's)."""
    g, drv, _, _ = gemm
    a, b, c = operands()
    g(a, b, c)
    drv.launch_at = lambda context, config, function, params: 0   # count Python only
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(1000):
            g(a, b, c)
        best = min(best, (time.perf_counter() - t0) / 1000)
    print(f"prepared GEMM call with a mock driver: {best * 1e6:.2f} us")
    assert best < 20e-6


# --- CompiledKernel: prepared asynchronous launches -----------------------------

class DeviceCopy:
    """A descriptor's device copy (a DeviceBuffer: hashed by identity)."""

    def __init__(self, address):
        self.address = address


def test_async_calls_reuse_one_prepared_launch_per_argument_set(gemm):
    g, drv, _, _ = gemm
    fn = g.compiled
    desc = rt.TmaDescriptor(bytes(128), {"shape": (8,), "box_shape": (8,), "dtype": "float32",
                                         "swizzle": 0})
    desc._device_copy = DeviceCopy(0xDE00)
    args = (desc, desc, desc, 0x1000, 1, 2, 3)
    fn(*args, grid=2, sync=False)                 # the checked path, then the fast one
    launcher = g.launcher
    before = len(launcher._prepared)
    runs = [fn(*args, grid=2, sync=False) for _ in range(3)]
    assert len(launcher._prepared) == before + 1 and drv.records == []
    assert all(not r.timed and not r.done for r in runs)
    assert drv.launches[-1][6][:3] == [struct.pack("<Q", 0xDE00)] * 3
    desc._device_copy = DeviceCopy(0xDF00)   # freed and made again
    fn(*args, grid=2, sync=False)
    assert len(launcher._prepared) == before + 2
    assert drv.launches[-1][6][:3] == [struct.pack("<Q", 0xDF00)] * 3


def test_waiting_for_an_untimed_launch_records_its_completion_then(gemm, monkeypatch):
    g, drv, _, _ = gemm
    from pipeline_mlir.runtime import watchdog

    polled = []
    monkeypatch.setattr(watchdog, "wait_event",
                        lambda ev, timeout, describe, poll=None: polled.append(ev) or (1, "x"))
    monkeypatch.setattr(watchdog, "fault_error", lambda *a: RuntimeError("fault"))
    g.launcher.fn.module._watchdog = g.launcher.fn.module.watchdog_names = None
    run = g.launcher.launch((0xD0, 0xD1, 0xD2, 0x1000, 1, 2, 3), (2, 1, 1), 0x42, False,
                            None, timed=False)
    assert drv.records == []
    with pytest.raises(RuntimeError, match="fault"):   # the stand-in reports a device error
        run.wait()
    assert drv.records == [(0xE1, 0x42)] and polled
    drv.capturing = True
    run = g.launcher.launch((0xD0, 0xD1, 0xD2, 0x1000, 1, 2, 3), (2, 1, 1), 0x42, False,
                            None, timed=False)
    assert run.captured and run.wait() is run and len(drv.records) == 1


def test_mock_driver_reads_the_prepared_config_by_address(gemm):
    g, drv, _, _ = gemm
    p = g.launcher.prepare((0xD0, 0xD1, 0xD2, 0x1000, 1, 2, 3), (6, 1, 1), 0x9)
    assert fl.LaunchConfig.from_address(p.config_address).gridDimX == 6
    assert p.params_address == ctypes.addressof(p.params.array)


# A variant with a fused epilogue: its extra parameters after m, n, k, in
# the kernel's order (kernels/hopper_gemm.py, kernel.epilogue.kernel_params).
EPILOGUE_META = dict(META, name="gemm_bf16_128x256_alpha_bias_res_relu", params=[
    *META["params"], ["alpha", "f32"], ["bias", "ptr:4"], ["residual", "ptr:4"]])


def test_epilogue_arguments_are_bound_by_name_and_prepared_once(monkeypatch):
    """pipeline_mlir.gemm passes alpha, bias and residual as a dict: each
    lands in its named parameter's slot, whatever the dict's order; a
    repeat reuses the prepared bytes; a new alpha, or the two pointers
    swapped between the names, prepares a new launch."""
    g, drv, encoded, _ = mock_gemm(monkeypatch, EPILOGUE_META)
    assert g.extra_names == ("alpha", "bias", "residual")
    a, b, c = operands()
    bias, res = Tensor((512,)), Tensor((256, 512))
    g.launch(a, b, c, {"alpha": 0.5, "bias": bias, "residual": res}, None, False)
    blobs = drv.launches[-1][6]
    assert blobs[7:] == [struct.pack("<f", 0.5), struct.pack("<Q", bias.address),
                         struct.pack("<Q", res.address)]
    g.launch(a, b, c, {"residual": res, "alpha": 0.5, "bias": bias}, None, False)
    assert drv.launches[-1] == drv.launches[0] and len(encoded) == 1   # dict order: same
    g.launch(a, b, c, {"alpha": 2.0, "bias": bias, "residual": res}, None, False)
    assert drv.launches[-1][6][7] == struct.pack("<f", 2.0)
    g.launch(a, b, c, {"alpha": 0.5, "bias": res, "residual": bias}, None, False)
    assert drv.launches[-1][6][8:] == [struct.pack("<Q", res.address),
                                       struct.pack("<Q", bias.address)]
    with pytest.raises(ValueError, match=r"missing \['residual'\], unknown \[\]"):
        g.launch(a, b, Tensor(c.shape), {"alpha": 0.5, "bias": bias}, None, False)


def test_a_meta_without_the_gemm_parameters_is_refused(monkeypatch):
    meta = dict(META, params=[p for p in META["params"] if p[0] != "c_ptr"])
    with pytest.raises(ValueError, match=r"has no parameters \['c_ptr'\]: not a GEMM of this "
                                         "launcher"):
        mock_gemm(monkeypatch, meta)
