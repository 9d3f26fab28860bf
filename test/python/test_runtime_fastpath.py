"""Deviceless: the fast call path of a compiled kernel (runtime/fastlaunch.py).

A mock driver stands for libcuda: it records each cuLaunchKernelEx with the
configuration and the parameter bytes the kernel would read. The checks:
the fast path packs exactly what the checked path packs, it is taken from
the second call on, every bad argument still gets the checked path's
message (and launches nothing), grids are validated, stream capture
records no events, and (a sanity bound on a mock, not a speed claim) a
call costs microseconds, not the ~130 us of the old path.
"""

import ctypes
import struct
import sys
import time
import types

import numpy as np
import pytest

from pipeline_mlir import runtime as rt
from pipeline_mlir.runtime import compiled as rc
from pipeline_mlir.runtime import fastlaunch as fl

IMAGE = b"\x7fELF" + bytes(60)
_SIZES = {"ptr": 8, "tma": 8, "tma_byval": 128, **{k: struct.calcsize(f[0])
                                                  for k, f in rt.args.SCALARS.items()}}


class MockDriver:
    """Records launches: (grid, block, cluster, smem, stream, function, [param bytes])."""

    def __init__(self, signature, capturing=False):
        self.kinds = [k for k, _ in rt.args.parse_signature(signature)]
        self.launches, self.records, self.capturing = [], [], capturing
        self.current = None

    def set_current(self, context):
        self.current = context

    def is_capturing(self, stream):
        return self.capturing

    def record(self, event, stream):
        self.records.append((event, stream))

    def create_event_pair(self):
        return (0xE0, 0xE1)

    def launch_at(self, context, config, function, params):
        """A prepared launch: the config and parameter array by address."""
        self.set_current(context)
        return self.launch(fl.LaunchConfig.from_address(config), function, params)

    def launch(self, cfg, function, params):
        ptrs = (ctypes.c_void_p * len(self.kinds)).from_address(params)
        blobs = [ctypes.string_at(ptrs[i], _SIZES[k]) for i, k in enumerate(self.kinds)]
        for i, k in enumerate(self.kinds):  # each parameter at its natural alignment
            assert ptrs[i] % min(_SIZES[k], 64) == 0, (k, hex(ptrs[i]))
        cluster = (tuple(cfg.attrs[0].value[:3]) if cfg.numAttrs else None)
        self.launches.append(((cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ),
                              (cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ), cluster,
                              cfg.sharedMemBytes, cfg.hStream or 0, function, blobs))
        return 0


class FakeDevice:
    """A 'real' device as far as the runtime can tell; nothing reaches a GPU."""

    is_fake = False

    def __init__(self, ordinal=0):
        self.ordinal, self.context, self.cc = ordinal, 0xC0 + ordinal, (9, 0)
        self.limits, self.name = rt.DeviceLimits(), "mock H100"

    def require_real(self, what):
        pass

    def make_current(self):
        pass


class FakeFunction:
    """The loaded launch.Kernel: a handle and attributes."""

    def __init__(self):
        self.function, self.attrs = 0xF00, rt.FuncAttrs()
        self._dynamic_smem_set, self._nonportable_set = 48 * 1024, False
        self.set_attrs = []
        self.module = types.SimpleNamespace(has_watchdog=False)
        self.name = "k"
        self.device = FakeDevice()

    def _set_attr(self, name, value):
        self.set_attrs.append((name, value))

    # the real rule, over the recording _set_attr
    ensure_launch_attributes = rt.Kernel.ensure_launch_attributes

    def launch(self, **kw):
        raise AssertionError("the general path (host arrays) is not expected here")


@pytest.fixture
def mock(monkeypatch):
    """(kernel factory, devices): CompiledKernels whose launches the mock
    driver records; checked-path calls are counted."""
    made = {}
    funcs = {}

    def make(params, **kw):
        meta = dict(name="k", params=params, block=128, smem=64 << 10, chip="sm_90a")
        meta.update(kw)
        fn = rt.CompiledKernel(IMAGE, **meta)
        drv = MockDriver([k for _, k in fn.params] if isinstance(params[0], tuple) else params)
        made[id(fn)] = drv
        fn.checked_calls = 0
        return fn, drv

    def function(self, device=None):
        return funcs.setdefault((id(self), device.ordinal), FakeFunction())

    real_launcher_init = fl.Launcher.__init__

    def launcher_init(self, image, device, fn, driver=None):
        real_launcher_init(self, image, device, fn, driver=made[id(image)])

    real_checked = rc.CompiledKernel._call_checked

    def checked(self, *a, **kw):
        self.checked_calls += 1
        return real_checked(self, *a, **kw)

    monkeypatch.setattr(rc.CompiledKernel, "function", function)
    monkeypatch.setattr(fl.Launcher, "__init__", launcher_init)
    monkeypatch.setattr(rc.CompiledKernel, "_call_checked", checked)
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    devices = {0: FakeDevice(0), 1: FakeDevice(1)}
    monkeypatch.setattr(rc, "default_device", lambda ordinal=0: devices[ordinal])
    return make, funcs


COPY = [("src", "ptr"), ("dst", "ptr"), ("n", "i32")]


def test_fast_path_launches_what_the_checked_path_launches(mock):
    make, funcs = mock
    fn, drv = make(COPY, cluster=(2, 1, 1))
    buf = rt.DevicePointer(0x3000)
    r1 = fn(0x1000, buf, 1024, grid=(8,), sync=False)
    r2 = fn(0x1000, buf, 1024, grid=(8,), sync=False)
    assert fn.checked_calls == 1              # the second call took the fast path
    assert drv.launches[0] == drv.launches[1]
    grid, block, cluster, smem, stream, func, blobs = drv.launches[1]
    assert (grid, block, cluster, smem, stream, func) == ((8, 1, 1), (128, 1, 1), (2, 1, 1),
                                                          64 << 10, 0, 0xF00)
    assert blobs == [struct.pack("<Q", 0x1000), struct.pack("<Q", 0x3000),
                     struct.pack("<i", 1024)]
    assert drv.current == 0xC0
    # the function attributes a launch needs were set once, when the launcher was built
    assert funcs[(id(fn), 0)].set_attrs == [
        ("CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES", 64 << 10)]
    # asynchronous calls record no events (untimed); timed=True puts a pair around the kernel
    assert drv.records == [] and not r1.timed and not r2.timed
    r3 = fn(0x1000, buf, 1024, grid=(8,), sync=False, timed=True)
    assert drv.records == [(0xE0, 0), (0xE1, 0)] and r3.timed and drv.launches[2] == drv.launches[1]
    assert r1.grid == r2.grid == (8, 1, 1) and not r2.captured and not r2.done
    fn(0x2000, buf, 7, grid=16, sync=False, stream=0x77)
    assert fn.checked_calls == 1 and drv.launches[-1][0] == (16, 1, 1)
    with pytest.raises(RuntimeError, match=r"kernel 'k' was launched untimed .* pass timed=True"):
        r2.elapsed_ms
    assert drv.launches[-1][4] == 0x77 and drv.launches[-1][6][2] == struct.pack("<i", 7)


def test_every_scalar_kind_and_descriptor_is_packed_at_its_alignment(mock):
    make, _ = mock
    params = [("a", "i8"), ("b", "ptr:4"), ("c", "f16"), ("d", "tma_byval"), ("e", "u64"),
              ("f", "f64"), ("g", "tma"), ("h", "i16")]
    fn, drv = make(params)
    desc = rt.TmaDescriptor(bytes(range(128)), {"shape": (8,), "box_shape": (8,),
                                                 "dtype": "float32", "swizzle": 0})
    desc._device_copy = types.SimpleNamespace(address=0xD000)   # no device memory here
    args = (-3, 0x1004, 1.5, desc, 2**64 - 1, 2.25, desc, -2)
    fn(*args, grid=1, sync=False)
    fn(*args, grid=1, sync=False)
    assert fn.checked_calls == 1 and drv.launches[0] == drv.launches[1]
    assert drv.launches[1][6] == [struct.pack("<b", -3), struct.pack("<Q", 0x1004),
                                  struct.pack("<e", 1.5), bytes(range(128)),
                                  struct.pack("<Q", 2**64 - 1), struct.pack("<d", 2.25),
                                  struct.pack("<Q", 0xD000), struct.pack("<h", -2)]


class FakeTorchTensor:
    """Stands for a torch CUDA tensor (type checked by identity, like torch.Tensor)."""

    __module__ = "torch"

    def __init__(self, address, ordinal=0, contiguous=True):
        self.address, self.ordinal, self.contiguous = address, ordinal, contiguous
        self.is_cuda = True
        self.device = types.SimpleNamespace(type="cuda", index=ordinal)

    def is_contiguous(self):
        return self.contiguous

    def data_ptr(self):
        return self.address

    def get_device(self):
        return self.ordinal


@pytest.fixture
def fake_torch(monkeypatch):
    streams = {0: 0x5110, 1: 0x5111}
    torch = types.SimpleNamespace(
        Tensor=FakeTorchTensor,
        cuda=types.SimpleNamespace(is_initialized=lambda: True),
        _C=types.SimpleNamespace(_cuda_getCurrentRawStream=lambda ordinal: streams[ordinal]))
    monkeypatch.setitem(sys.modules, "torch", torch)
    return streams


def test_tensors_pick_their_device_and_torch_stream(mock, fake_torch):
    make, _ = mock
    fn, drv = make(COPY)
    for ordinal in (1, 1, 0, 0):
        fn(FakeTorchTensor(0x1000, ordinal), FakeTorchTensor(0x2000, ordinal), 3, grid=2,
           sync=False)
        assert drv.launches[-1][4] == fake_torch[ordinal] and drv.current == 0xC0 + ordinal
    assert fn.checked_calls == 2                 # once per device
    # a non-contiguous tensor is not the fast path's to judge: same message as before
    with pytest.raises(rt.ArgumentError, match=r"argument 1 \('dst'\) of kernel 'k': a "
                       r"non-contiguous torch tensor cannot be passed as a pointer"):
        fn(FakeTorchTensor(0x1000), FakeTorchTensor(0x2000, contiguous=False), 3, grid=2)
    assert len(drv.launches) == 4


BAD = [
    ((0, 0, 1, 2), {}, r"kernel 'k' takes 3 argument\(s\) \(src: ptr, dst: ptr, n: i32\), got 4"),
    ((0, 0), {}, r"kernel 'k' is missing argument\(s\) 'n'"),
    ((0, 0, 2**31), {}, r"argument 2 \('n'\) of kernel 'k': 2147483648 is out of range for i32"),
    ((0, 0, -2**31 - 1), {}, r"argument 2 \('n'\) of kernel 'k': -2147483649 is out of range"),
    ((0, 0, 1.5), {}, r"argument 2 \('n'\) of kernel 'k': i32 needs an int, got float"),
    ((0, 0, True), {}, r"argument 2 \('n'\) of kernel 'k': i32 needs an int, got bool"),
    ((0, 0, np.zeros(3)), {}, r"argument 2 \('n'\) of kernel 'k' is declared i32 but was "
                              r"given an array"),
    ((0, 1.0, 1), {}, r"argument 1 \('dst'\) of kernel 'k' is declared ptr but was given float"),
    ((0, "x", 1), {}, r"argument 1 \('dst'\) of kernel 'k' is declared ptr but was given str"),
    ((0, None, 1), {}, r"argument 1 \('dst'\) of kernel 'k' is declared ptr but was given "
                       r"NoneType"),
    ((0, 0x2004, 1), {}, r"argument 1 \('dst'\) of kernel 'k': address 0x2004 is not 16-byte "
                         r"aligned"),
    ((0, -16, 1), {}, r"argument 1 \('dst'\) of kernel 'k': device address -16 is negative"),
    ((0, object(), 1), {}, r"argument 1 \('dst'\) of kernel 'k': cannot pass a object as a "
                           r"pointer"),
    ((0, 0, 1), {"stream": "default"}, r"stream must be None, a CUstream handle"),
]


@pytest.mark.parametrize("args,kw,msg", BAD)
def test_bad_arguments_get_the_checked_message_after_the_fast_path_is_warm(mock, args, kw, msg):
    make, _ = mock
    fn, drv = make(COPY)
    fn(0x1000, 0x2000, 1, grid=1, sync=False)
    fn(0x1000, 0x2000, 1, grid=1, sync=False)   # warm: the fast path is installed
    with pytest.raises(TypeError, match=msg) as cold:
        make(COPY)[0](*args, grid=1, **kw)       # a kernel that never launched
    with pytest.raises(TypeError, match=msg) as warm:
        fn(*args, grid=1, **kw)
    assert str(warm.value) == str(cold.value)
    assert len(drv.launches) == 2                # nothing was launched


def test_bad_grids_are_refused_on_the_fast_path(mock):
    make, _ = mock
    fn, drv = make(COPY, cluster=2)
    fn(0, 0, 1, grid=2, sync=False)
    with pytest.raises(rt.LaunchConfigError, match=r"kernel 'k': cluster \(2, 1, 1\) does not "
                       r"divide grid \(3, 1, 1\)"):
        fn(0, 0, 1, grid=3)
    with pytest.raises(rt.LaunchConfigError, match=r"every grid dimension must be >= 1"):
        fn(0, 0, 1, grid=(0,))
    with pytest.raises(rt.LaunchConfigError, match=r"grid y = 70000 exceeds the device limit"):
        fn(0, 0, 1, grid=[2, 70000])
    assert len(drv.launches) == 1 and fn.checked_calls == 1


def test_float_out_of_range_for_f16_falls_back_and_says_why(mock):
    make, _ = mock
    fn, drv = make([("x", "f16")])
    fn(1.0, grid=1, sync=False)
    with pytest.raises(rt.ArgumentError, match=r"argument 0 \('x'\) of kernel 'k': "
                       r"10000000000.0 is out of range for f16"):
        fn(1e10, grid=1)
    assert len(drv.launches) == 1


def test_stream_capture_records_no_events_and_waits_for_nothing(mock):
    make, _ = mock
    fn, drv = make(COPY)
    drv.capturing = True
    run = fn(0x1000, 0x2000, 1, grid=1)          # sync=True: nothing to wait for in capture
    assert run.captured and run.done and drv.records == [] and len(drv.launches) == 1
    assert run.wait() is run
    with pytest.raises(RuntimeError, match="recorded into a CUDA graph"):
        run.elapsed_ms
    fn(0x1000, 0x2000, 1, grid=1)                 # and on the fast path
    assert drv.records == [] and len(drv.launches) == 2 and fn.checked_calls == 1


def test_event_pairs_are_reused():
    created = []
    pool = fl.EventPool(lambda: created.append(1) or (len(created), -len(created)))
    a = pool.acquire()
    pool.release(a)
    assert pool.acquire() == a and len(created) == 1
    assert pool.acquire() != a and len(created) == 2


def test_launch_raw_is_the_uncheck_path_for_callers_that_checked(mock):
    make, _ = mock
    fn, drv = make(COPY)
    launcher = fn.launcher(FakeDevice(0))
    launcher.launch_raw((0x1000, 0x2000, 9), (4, 1, 1), 0x99)
    assert drv.launches[-1][0] == (4, 1, 1) and drv.launches[-1][4] == 0x99
    assert drv.records == [] and fn.launcher(FakeDevice(0)) is launcher


def test_ctypes_structures_match_the_driver_api():
    # CUlaunchConfig: 7 unsigned, CUstream, CUlaunchAttribute*, unsigned -> 56 bytes;
    # CUlaunchAttribute: id + pad to 8, a 64-byte value union -> 72 bytes.
    assert ctypes.sizeof(fl.LaunchConfig) == 56
    assert fl.LaunchConfig.hStream.offset == 32 and fl.LaunchConfig.numAttrs.offset == 48
    assert ctypes.sizeof(fl._LaunchAttribute) == 72 and fl._LaunchAttribute.value.offset == 8


def test_cpu_time_per_fast_call_is_microseconds(mock, fake_torch):
    """A sanity bound on the Python side with a mock driver (no speed claim:
    the H100 measurement is benchmarks/gemm/launch_overhead.py). The old
    path cost ~130 us per call on the GPU host."""
    make, _ = mock
    fn, _ = make([("a", "ptr"), ("b", "ptr"), ("c", "ptr"), ("m", "i32"), ("n", "i32"),
                  ("k", "i32"), ("alpha", "f32")])
    a, b, c = (FakeTorchTensor(0x1000 * i) for i in (1, 2, 3))
    fn(a, b, c, 256, 256, 256, 1.0, grid=(132,), sync=False)
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(500):
            fn(a, b, c, 256, 256, 256, 1.0, grid=(132,), sync=False)
        best = min(best, (time.perf_counter() - t0) / 500)
    print(f"fast path with a mock driver: {best * 1e6:.1f} us per call")
    assert fn.checked_calls == 1
    assert best < 40e-6, f"{best * 1e6:.1f} us per call on the fast path"
