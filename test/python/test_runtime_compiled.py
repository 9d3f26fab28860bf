"""Deviceless: a compiled kernel is a callable that knows its launch.

Everything before the first driver call is checked here: the signature
built from the Kernel's params, argument binding and its messages, launch
configuration, stream choice, caching by content hash and per-context
module loading. The launches themselves run in test/gpu.
"""

import inspect
import json
import os
import pickle
import sys
import types

import numpy as np
import pytest

from pipeline_mlir import runtime as rt
from pipeline_mlir.runtime import compiled as rc
from pipeline_mlir.runtime.launch import stream_address

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

IMAGE = b"\x7fELF" + bytes(60)  # never loaded: the device is a stand-in


def copy_fn(**kw):
    meta = dict(name="copy", params=[("src", "ptr"), ("dst", "ptr"), ("n", "i32")],
                block=64, smem=1024, chip="sm_90a")
    meta.update(kw)
    return rt.CompiledKernel(IMAGE, **meta)


class FakeCai:
    def __init__(self, address):
        self.__cuda_array_interface__ = {"data": (address, False), "shape": (16,),
                                         "typestr": "<f4", "version": 3, "strides": None}


FAKE = rt.Device.fake()


# --- what it is --------------------------------------------------------------

def test_it_is_the_image_and_knows_its_launch():
    fn = copy_fn(cluster=(2, 1))
    assert isinstance(fn, bytes) and fn == IMAGE and fn.image == IMAGE
    assert type(fn.image) is bytes
    assert fn.name == "copy" and fn.block == (64, 1, 1) and fn.cluster == (2, 1, 1)
    assert fn.smem == 1024 and fn.chip == "sm_90a"
    assert fn.params == (("src", "ptr"), ("dst", "ptr"), ("n", "i32"))
    assert fn.signature == ["ptr", "ptr", "i32"] and fn.param_names == ["src", "dst", "n"]
    assert str(inspect.signature(fn)) == (
        "(src, dst, n, *, grid, stream=None, sync=True, timeout=None, device=None, "
        "timed=None)")
    assert repr(fn) == ("CompiledKernel('copy', sm_90a, 64 B, params=(src: ptr, dst: ptr, "
                        "n: i32), block=(64, 1, 1), cluster=(2, 1, 1), smem=1024, "
                        f"hash={fn.key[:12]})")
    assert copy_fn(cluster=(1, 1, 1)).cluster is None
    assert rt.CompiledKernel(".version 8.0\n", name="k", params=["i32", "u64"],
                             block=32).params == (("arg0", "i32"), ("arg1", "u64"))


@pytest.mark.parametrize("kw,exc,msg", [
    (dict(params=[("n", "int")]), rt.ArgumentError, "signature entry 0 is 'int'"),
    (dict(params=[("a b", "i32")]), ValueError, "name 'a b' is not an identifier"),
    (dict(params=[("n", "i32"), ("n", "i64")]), ValueError, "name 'n' is used twice"),
    (dict(block=0), ValueError, "block must be 1-3 positive ints"),
    (dict(cluster=(1, 2, 3, 4)), ValueError, "cluster must be 1-3 positive ints"),
    (dict(smem=-1), ValueError, "smem must be a non-negative int"),
    (dict(name=""), ValueError, "name must be the kernel's symbol"),
])
def test_bad_metadata(kw, exc, msg):
    with pytest.raises(exc, match=msg):
        copy_fn(**kw)


def test_metadata_round_trips_and_is_cached_by_content(tmp_path):
    fn = rt.CompiledKernel.cached(IMAGE, **copy_fn().metadata())
    meta = json.loads(json.dumps(fn.metadata()))
    assert rt.CompiledKernel.from_metadata(IMAGE, meta) is fn
    assert rt.CompiledKernel.cached(IMAGE, **dict(meta, smem=2048)) is not fn
    assert rt.CompiledKernel.cached(IMAGE + b"x", **meta) is not fn
    assert fn.key == rc.content_key(IMAGE, meta) and len(fn.key) == 64
    path = fn.save(str(tmp_path / "copy.sm_90a.cubin"))
    assert json.loads((tmp_path / "copy.sm_90a.json").read_text()) == meta
    assert rt.CompiledKernel.from_file(path) is fn
    assert pickle.loads(pickle.dumps(fn)) is fn
    with pytest.raises(ValueError, match=r"unknown launch metadata \['grid'\]"):
        rt.CompiledKernel.from_metadata(IMAGE, dict(meta, grid=[1]))


# --- arguments ---------------------------------------------------------------

def test_arguments_by_position_and_keyword():
    fn = copy_fn()
    a = fn.bind(FakeCai(0x1000), 0x2000, 7)
    assert [x.kind for x in a] == ["ptr", "ptr", "i32"] and a[2].value == 7
    b = fn.bind(FakeCai(0x1000), n=np.int32(7), dst=rt.DevicePointer(0x2000))
    assert b[2].value == 7 and b[1].obj.address == 0x2000
    host = np.zeros(16, np.float32)          # host arrays are accepted (copied in and back)
    fn.bind(host, host, 1)


@pytest.mark.parametrize("args,kwargs,msg", [
    ((0, 0), {}, r"kernel 'copy' is missing argument\(s\) 'n' \(parameters: src: ptr, dst: ptr, "
                 r"n: i32\)"),
    ((0, 0, 1, 2), {}, r"kernel 'copy' takes 3 argument\(s\) \(src: ptr, dst: ptr, n: i32\), "
                       r"got 4"),
    ((0, 0), {"count": 1}, r"kernel 'copy' has no parameter 'count'; its parameters are"),
    ((0, 0, 1), {"n": 1}, r"argument 'n' was given twice"),
    ((0, 0, 2**31), {}, r"argument 2 \('n'\) of kernel 'copy': 2147483648 is out of range for i32"),
    ((0, 0, 1.5), {}, r"argument 2 \('n'\) of kernel 'copy': i32 needs an int, got float"),
    ((0, 0, np.zeros(3)), {}, r"argument 2 \('n'\) of kernel 'copy' is declared i32 but was "
                              r"given an array"),
    ((0, 1.0, 1), {}, r"argument 1 \('dst'\) of kernel 'copy' is declared ptr but was given "
                      r"float"),
    ((0, "x", 1), {}, r"argument 1 \('dst'\) of kernel 'copy' is declared ptr but was given str"),
    ((FakeCai(0x1000), FakeCai(0x2004), 1), {},
     r"argument 1 \('dst'\) of kernel 'copy': address 0x2004 is not 16-byte aligned"),
    ((0, -16, 1), {}, r"argument 1 \('dst'\) of kernel 'copy': device address -16 is negative"),
    ((0, object(), 1), {}, r"argument 1 \('dst'\) of kernel 'copy': cannot pass a object as a "
                           r"pointer"),
])
def test_wrong_arguments_name_the_parameter(args, kwargs, msg):
    fn = copy_fn()
    with pytest.raises(TypeError, match=msg):
        fn(*args, grid=1, device=FAKE, **kwargs)
    with pytest.raises(rt.ArgumentError, match=msg):
        fn.bind(*args, **kwargs)


def test_scalar_kinds_and_tma_descriptors():
    fn = rt.CompiledKernel(IMAGE, name="k", block=128,
                           params=[("desc", "tma"), ("scale", "f32"), ("n", "i64"),
                                   ("out", "ptr:4")])
    desc = rt.TmaDescriptor(bytes(128), {"shape": (64, 64), "box_shape": (8, 8),
                                         "dtype": "float32", "swizzle": 0})
    a = fn.bind(desc, 2, 2**40, FakeCai(0x1004))
    assert [x.kind for x in a] == ["tma", "f32", "i64", "ptr"] and a[1].value == 2.0
    assert fn.bind(rt.tma(desc), np.float32(0.5), np.int64(3), 0x1004)[0].desc is desc
    with pytest.raises(rt.ArgumentError, match=r"argument 0 \('desc'\) of kernel 'k': tma\(\) "
                       r"needs a TmaDescriptor \(make_tma_descriptor\), got FakeCai"):
        fn.bind(FakeCai(0x1000), 1.0, 1, 0x1004)
    with pytest.raises(rt.ArgumentError, match=r"argument 1 \('scale'\) of kernel 'k': f32 needs "
                       r"a number, got str"):
        fn.bind(desc, "1", 1, 0x1004)
    with pytest.raises(rt.ArgumentError, match=r"argument 2 \('n'\) .* is declared i64 but was "
                       r"given i32\(1\)"):
        fn.bind(desc, 1.0, rt.i32(1), 0x1004)


# --- launch configuration and the way to the driver --------------------------

def test_grid_is_required_and_checked_before_loading():
    fn = copy_fn(cluster=2)
    with pytest.raises(TypeError, match="missing 1 required keyword-only argument: 'grid'"):
        fn(0, 0, 1)
    with pytest.raises(rt.LaunchConfigError, match=r"kernel 'copy': every grid dimension must "
                       r"be >= 1"):
        fn(0, 0, 1, grid=0, device=FAKE)
    with pytest.raises(rt.LaunchConfigError, match=r"cluster \(2, 1, 1\) does not divide grid "
                       r"\(3, 1, 1\)"):
        fn(0, 0, 1, grid=3, device=FAKE)
    big = copy_fn(smem=240000)
    with pytest.raises(rt.LaunchConfigError, match="240000 bytes of dynamic shared memory"):
        big(0, 0, 1, grid=1, device=FAKE)
    # everything passed: the module load is the first driver call
    with pytest.raises(rt.NoGpuError, match="loading kernel 'copy': .* stand-in"):
        fn(0, 0, 1, grid=4, device=FAKE)


class _FakeContextDevice:
    """A 'real' device as far as CompiledKernel.module can tell."""

    def __init__(self, ctx, cc=(9, 0)):
        self.context, self.cc, self.ordinal = ctx, cc, 0
        self.limits, self.name = rt.DeviceLimits(), "fake"

    def require_real(self, what):
        pass


def test_module_loaded_once_per_context(monkeypatch):
    loads = []

    class FakeModule:
        def __init__(self, image, device, name, watchdog_names):
            loads.append((device.context, name, watchdog_names))

    monkeypatch.setattr(rc, "Module", FakeModule)
    fn = copy_fn(watchdog_names=["ab"])
    d1, d2 = _FakeContextDevice(0x100), _FakeContextDevice(0x200)
    m = fn.module(d1)
    assert fn.module(d1) is m and fn.module(d2) is not m
    assert loads == [(0x100, "copy", ["ab"]), (0x200, "copy", ["ab"])]


def test_call_launches_with_the_compiled_configuration(monkeypatch):
    launched = []

    class FakeFunction:
        def launch(self, **kw):
            launched.append(kw)
            return "launch"

    monkeypatch.setattr(rc.CompiledKernel, "function", lambda self, device=None: FakeFunction())
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    fn = copy_fn(cluster=(2, 1, 1))
    assert fn(FakeCai(0x1000), dst=0x2000, n=5, grid=(8,), device=FAKE) == "launch"
    kw = launched[-1]
    assert (kw["grid"], kw["block"], kw["cluster"], kw["smem"]) == ((8,), (64, 1, 1),
                                                                    (2, 1, 1), 1024)
    assert kw["stream"] is None and kw["sync"] is True and kw["timeout"] is None
    assert [a.kind for a in kw["args"]] == ["ptr", "ptr", "i32"]
    fn(0, 0, 1, grid=2, device=FAKE, stream=7, sync=False, timeout=3.0)
    last = launched[-1]
    assert (last["stream"], last["sync"], last["timeout"]) == (7, False, 3.0)


def test_device_follows_torch_tensors():
    class Tensor:  # stands for a torch tensor on cuda:1
        __module__ = "torch"
        device = types.SimpleNamespace(type="cuda", index=1)

    assert rc._tensor_ordinal([1, Tensor(), 2]) == 1
    assert rc._tensor_ordinal([np.zeros(2), 3]) is None


def test_stream_follows_torch_when_torch_uses_cuda(monkeypatch):
    stream = types.SimpleNamespace(cuda_stream=0xABC)
    state = {"init": False}
    cuda = types.SimpleNamespace(is_initialized=lambda: state["init"],
                                 current_stream=lambda ordinal: stream)
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    assert rt.current_stream(FAKE) is None           # no torch imported: default stream
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda))
    assert rt.current_stream(FAKE) is None           # torch has not touched CUDA
    state["init"] = True
    assert rt.current_stream(FAKE) is stream
    assert stream_address(stream) == 0xABC


def test_stream_handles():
    class Protocol:
        def __cuda_stream__(self):
            return (0, 0x55)

    assert stream_address(None) == 0 and stream_address(0x10) == 0x10
    assert stream_address(Protocol()) == 0x55
    assert stream_address(types.SimpleNamespace(getPtr=lambda: 0x77)) == 0x77
    with pytest.raises(rt.ArgumentError, match="stream must be None, a CUstream handle"):
        stream_address("default")


# --- from the kernel layer ---------------------------------------------------

@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PIPELINE_MLIR_CACHE_DIR", str(tmp_path / "cache"))


def test_kernel_compile_returns_the_callable(cache):
    pytest.importorskip("mlir.ir")
    from pipeline_mlir import compiler
    from pipeline_mlir.kernel import Float32, GlobalPtr, Int32, Int64, Kernel, TmaDescriptor

    k = Kernel("sig", chip="sm_90a", block_dim=(32, 2), cluster_dim=2,
               params={"a": GlobalPtr(), "b": GlobalPtr(align=4), "d": TmaDescriptor(),
                       "n": Int32(), "m": Int64(), "x": Float32()})
    with k:
        k.smem_alloc(512)
        k.sync_threads()
    fn = k.compile()
    assert isinstance(fn, rt.CompiledKernel) and fn[:4] == b"\x7fELF"
    assert fn == compiler.to_cubin(k.module, chip="sm_90a")
    assert fn.params == (("a", "ptr"), ("b", "ptr:4"), ("d", "tma"), ("n", "i32"),
                         ("m", "i64"), ("x", "f32"))
    assert (fn.name, fn.block, fn.cluster, fn.smem, fn.chip) == (
        "sig", (32, 2, 1), (2, 1, 1), k.smem_bytes, "sm_90a")
    assert k.compile() is fn                         # cached by content hash
    assert rt.image_target(fn).sm == "sm_90a"


def test_example_kernel_compiles_to_its_callable(cache):
    pytest.importorskip("mlir.ir")
    sys.path.insert(0, ROOT)
    from examples import async_participants

    k = async_participants.build()
    fn = k.compile()
    assert fn.params == (("out", "ptr"), ("n", "i32"))
    assert fn.block == (64, 1, 1) and fn.cluster is None and fn.smem == k.smem_bytes > 0
    with pytest.raises(rt.ArgumentError, match=r"argument 1 \('n'\) of kernel "
                       r"'async_participants': 4294967296 is out of range for i32"):
        fn(np.zeros(32, np.int32), 2**32, grid=1, device=FAKE)
    with pytest.raises(rt.NoGpuError, match="stand-in"):
        fn(np.zeros(32, np.int32), 10, grid=1, device=FAKE)


def test_global_ptr_alignment_is_checked():
    from pipeline_mlir.kernel import GlobalPtr

    assert GlobalPtr().kind == "ptr" and GlobalPtr(align=8).kind == "ptr:8"
    with pytest.raises(ValueError, match="align must be a power of two"):
        GlobalPtr(align=3)
