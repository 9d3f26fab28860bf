"""Deviceless: benchmarks/run_bench.py's streaming path on a fake GPU.

A --quick bundle (benchmarks/build_bundle.py) runs in a child process with
its own pure-Python runtime, a numpy-backed fake ``torch`` and fake driver
calls. The fake kernels model the streaming kernels' copies from what the
host gives them: a pointer kernel copies ``ntiles`` contiguous tiles; a
tensor-map kernel (``tma2d``) reads tile ``t`` as the box at row
``t * box_rows`` of the tensor described by the bytes the fake
``cuTensorMapEncodeTiled`` packed, so a descriptor whose shape, row pitch or
box does not fit the kernel's tiles fails run_bench's bit-exact check.
"""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from pipeline_mlir.kernel import has_pipeline_to_cubin

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

CHILD = textwrap.dedent(r'''
    import ctypes, json, struct, sys, types
    import numpy as np

    bundle, out, mib = sys.argv[1], sys.argv[2], sys.argv[3]
    sys.path.insert(0, bundle)

    def view(addr, n):
        return np.ctypeslib.as_array((ctypes.c_uint8 * n).from_address(addr))

    # ---- fake torch: int32 / int64 tensors in host memory -------------------------------
    class Tensor:
        def __init__(self, a):
            self.a = a
        dtype = property(lambda self: self.a.dtype)
        shape = property(lambda self: self.a.shape)
        is_cuda = True
        def data_ptr(self): return self.a.ctypes.data
        def is_contiguous(self): return self.a.flags["C_CONTIGUOUS"]
        def element_size(self): return self.a.itemsize
        def stride(self): return tuple(s // self.a.itemsize for s in self.a.strides)
        def numel(self): return self.a.size
        def view(self, *shape): return Tensor(self.a.reshape(shape))
        def fill_(self, v): self.a.fill(v); return self
        def zero_(self): return self.fill_(0)
        def copy_(self, o): self.a[...] = o.a; return self
        def cpu(self): return self
        def tolist(self): return self.a.tolist()
    Tensor.__module__ = "torch"

    class Event:
        def __init__(self, enable_timing=False): pass
        def record(self): pass
        def elapsed_time(self, other): return 1.0

    torch = types.ModuleType("torch")
    torch.__version__, torch.version = "fake", types.SimpleNamespace(cuda="fake")
    torch.int32, torch.int64 = np.dtype(np.int32), np.dtype(np.int64)
    torch.Tensor = Tensor
    torch.randint = lambda lo, hi, shape, dtype, device: Tensor(
        np.random.default_rng(1).integers(lo, hi, shape, dtype=dtype))
    torch.empty_like = lambda t: Tensor(np.empty_like(t.a))
    torch.zeros = lambda n, dtype, device: Tensor(np.zeros(n, dtype))
    torch.equal = lambda x, y: bool(np.array_equal(x.a, y.a))
    torch.cuda = types.SimpleNamespace(
        init=lambda: None, synchronize=lambda: None, empty_cache=lambda: None,
        Event=Event, current_stream=lambda: types.SimpleNamespace(cuda_stream=0),
        get_device_properties=lambda i: types.SimpleNamespace(
            name="FakeGPU", multi_processor_count=4, major=9, minor=0))
    sys.modules["torch"] = torch

    # ---- fake driver: cuTensorMapEncodeTiled packs its arguments ------------------------
    from pipeline_mlir import runtime as rt
    from pipeline_mlir.runtime import _driver, memory, tensormap
    assert rt.__file__.startswith(bundle), rt.__file__  # the bundle's runtime
    ELEM = {v[0]: v[1] for v in tensormap.DTYPES.values()}
    FMT = "<QI5Q5Q5II"  # address, rank, dims, strides, box (innermost first), elem bytes
    keep = []

    def encode(dtype, rank, address, dims, strides, box, estrides, *modes):
        pad = lambda xs: list(xs) + [0] * (5 - len(xs))
        packed = struct.pack(FMT, address, rank, *pad(dims), *pad([0] + strides[:rank - 1]),
                             *pad(box), ELEM[dtype])
        buf = ctypes.create_string_buffer(packed.ljust(128, b"\0"), 128)
        keep.append(buf)
        return 0, types.SimpleNamespace(getPtr=lambda: ctypes.addressof(buf))

    class Names:
        def __getattr__(self, name): return name
    drv = types.SimpleNamespace(
        cuTensorMapEncodeTiled=encode, cuuint64_t=int, cuuint32_t=int,
        CUtensorMapDataType=Names(), CUtensorMapInterleave=Names(),
        CUtensorMapSwizzle=Names(), CUtensorMapL2promotion=Names(),
        CUtensorMapFloatOOBfill=Names(), CUstream=lambda s: s,
        cuMemcpyDtoDAsync=lambda d, s, n, st: (0,))
    _driver.cuda = lambda: drv
    _driver.device_count = lambda: 1
    rt.default_device = lambda ordinal=0: None

    class DeviceBuffer:  # the descriptor's device copy: host bytes here
        def __init__(self, n, device): self.b = ctypes.create_string_buffer(n)
        address = property(lambda self: ctypes.addressof(self.b))
        def copy_bytes_from_host(self, data): ctypes.memmove(self.b, data, len(data))
        def free(self): FREED.append(self)
    FREED = []
    memory.DeviceBuffer = DeviceBuffer

    # ---- fake kernels ------------------------------------------------------------------
    LAUNCHED = {}

    class Kernel:
        def __init__(self, name, signature):
            self.name, self.signature = name, signature
        def launch(self, grid, block, smem, args, timeout=None, sync=True):
            from pipeline_mlir.runtime.args import Tma, bind
            bound = bind(args, self.signature, self.name)
            if not self.name.startswith("stream_"):  # the ping-pong: nothing to model
                return types.SimpleNamespace(elapsed_ms=1.0)
            first, dst, ntiles = bound
            d = dst.obj.a.view(np.uint8).reshape(-1)
            tile = next(e["tile"] for e in MANIFEST["stream"] if e["name"] == self.name)
            if isinstance(first, Tma):
                # the kernel reads the descriptor through the pointer it is given
                addr = first.desc.device_copy(None).address
                f = struct.unpack(FMT, ctypes.string_at(addr, struct.calcsize(FMT)))
                base, rank, dims, pitch, box, elem = f[0], f[1], f[2:7], f[8], f[12:17], f[17]
                assert rank == 2, rank
                rows, row_bytes = box[1], box[0] * elem
                for t in range(ntiles.value):
                    for r in range(rows):
                        y = t * rows + r
                        if y < dims[1]:  # TMA zero-fills rows out of bounds
                            o = (t * rows + r) * row_bytes
                            d[o:o + row_bytes] = view(base + y * pitch, row_bytes)
                LAUNCHED[self.name] = (dims[:2], pitch, box[:2], elem)
            else:
                n = ntiles.value * tile
                d[:n] = view(first.obj.data_ptr(), n)
                LAUNCHED[self.name] = "ptr"
            return types.SimpleNamespace(elapsed_ms=1.0)

    class Module:
        def __init__(self, path): pass
        def kernel(self, name, signature): return Kernel(name, signature)
    rt.Module = Module

    import run_bench
    MANIFEST = json.load(open(bundle + "/manifest.json"))
    sys.argv = ["run_bench.py", "--out", out, "--mib", mib, "--reps", "2", "--no-cute",
                "--only", "tma", "--pingpong-n", "10"]
    rc = run_bench.main()
    freed, launched = len(FREED), dict(LAUNCHED)
    import profile_stream  # the best tma2d row, as `ncu ... profile_stream.py --kind tma2d`
    LAUNCHED.clear()
    sys.argv = ["profile_stream.py", "--bench", out + "/bench.json", "--kind", "tma2d",
                "--mib", mib]
    profile_rc = profile_stream.main()
    json.dump({"rc": rc, "launched": launched, "freed": freed,
               "profile_rc": profile_rc, "profiled": list(LAUNCHED)},
              open(out + "/child.json", "w"))
''')


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    if not has_pipeline_to_cubin():
        pytest.skip("the installed pipeline_mlir cannot compile kernels")
    tmp = tmp_path_factory.mktemp("bench")
    bundle, out = str(tmp / "bundle"), str(tmp / "out")
    subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "build_bundle.py"),
                    "--out", bundle, "--quick"], check=True, capture_output=True)
    child = subprocess.run([sys.executable, "-c", CHILD, bundle, out, "1"],
                           capture_output=True, text=True, cwd=str(tmp), timeout=300)
    assert child.returncode == 0, child.stdout[-3000:] + child.stderr[-3000:]
    return (json.load(open(os.path.join(bundle, "manifest.json"))),
            json.load(open(os.path.join(out, "bench.json"))),
            json.load(open(os.path.join(out, "child.json"))), child.stdout)


def test_tma2d_gets_a_tensor_map_that_fits_its_tiles(bench):
    manifest, result, child, _ = bench
    tma2d = [e for e in manifest["stream"] if e["kind"] == "tma2d"]
    assert tma2d and all(e["signature"] == ["tma", "ptr", "i32"] for e in tma2d)
    assert all("tensor_map" not in e for e in manifest["stream"] if e["kind"] != "tma2d")
    for e in tma2d:
        rows = e["tile"] // 1024
        # innermost first: 256 int32 columns, (1 MiB / 1 KiB) rows, 1 KiB pitch
        assert child["launched"][e["name"]] == [[256, 1024], 1024, [256, rows], 4]
    got = {x["name"] for x in result["stream"] if x["kind"] == "tma2d"}
    assert got == {e["name"] for e in tma2d}
    assert child["freed"] == len(tma2d)  # one descriptor per kernel, freed after its rows


def test_every_kernel_checks_bit_exact(bench):
    _, result, child, _ = bench
    assert child["rc"] == 0
    kinds = {x["kind"] for x in result["stream"]}
    assert kinds == {"tma", "tma2d"}  # --only tma
    bad = [(x["name"], x.get("error")) for x in result["stream"] if not x.get("correct")]
    assert not bad


def test_profile_stream_launches_the_best_tma2d_row(bench):
    _, _, child, stdout = bench
    assert child["profile_rc"] == 0  # its output check passed
    assert child["profiled"] and all("tma2d" in n for n in child["profiled"])
    assert "output OK" in stdout


def test_summary_names_tma2d(bench):
    stdout = bench[3]
    assert "BEST tma2d    stream_tma2d_" in stdout
    assert "FAILED checks" not in stdout
