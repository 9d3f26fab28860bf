"""Deviceless: kernel arguments and launch configurations are checked,
with clear messages, before any driver call."""

import ctypes
import struct

import numpy as np
import pytest

from pipeline_mlir import runtime as rt
from pipeline_mlir.runtime.args import bind, parse_signature
from pipeline_mlir.runtime.launch import _ParamPack, plan_arguments


def stub(signature=None, cc=(9, 0), **attrs):
    return rt.Kernel(None, "copy", signature, device=rt.Device.fake(cc=cc),
                     attrs=rt.FuncAttrs(**attrs))


class FakeCai:
    def __init__(self, address):
        self.__cuda_array_interface__ = {"data": (address, False), "shape": (16,),
                                         "typestr": "<f4", "version": 3, "strides": None}


# --- binding -----------------------------------------------------------------

def test_argument_count():
    with pytest.raises(rt.ArgumentError,
                       match=r"kernel 'copy' takes 3 argument\(s\) \(ptr, ptr, i32\), got 2"):
        bind([0, 0], ["ptr", "ptr", "i32"], "copy")


def test_bare_number_needs_a_type():
    with pytest.raises(rt.ArgumentError, match=r"argument 1 of kernel 'copy' is a bare int \(5\); "
                       r"say its type, e.g. i32\(5\)"):
        bind([rt.DevicePointer(256), 5], None, "copy")


def test_declared_types_are_enforced():
    with pytest.raises(rt.ArgumentError, match="argument 0 of kernel 'k' is declared i32 but "
                       "was given an array"):
        bind([np.zeros(4)], ["i32"], "k")
    with pytest.raises(rt.ArgumentError, match=r"argument 0 of kernel 'k': 2147483648 is out of "
                       r"range for i32"):
        bind([2**31], ["i32"], "k")
    with pytest.raises(rt.ArgumentError, match="is declared ptr but was given float"):
        bind([1.5], ["ptr"], "k")
    with pytest.raises(rt.ArgumentError, match="is declared i64 but was given i32"):
        bind([rt.i32(1)], ["i64"], "k")
    with pytest.raises(rt.ArgumentError, match="needs a TmaDescriptor"):
        bind([rt.DevicePointer(0)], ["tma"], "k")
    with pytest.raises(rt.ArgumentError, match="u8 needs an int, got float"):
        rt.u8(1.0)
    with pytest.raises(rt.ArgumentError, match="f32 needs a number, got str"):
        rt.f32("1")


def test_signature_syntax():
    assert parse_signature(["ptr", "ptr:4", "i32", "tma", "tma_byval"]) == [
        ("ptr", 16), ("ptr", 4), ("i32", 16), ("tma", 16), ("tma_byval", 16)]
    with pytest.raises(rt.ArgumentError, match="signature entry 1 is 'int'"):
        parse_signature(["ptr", "int"])
    with pytest.raises(rt.ArgumentError, match="only 'ptr:N' takes a suffix"):
        parse_signature(["i32:4"])


def test_scalar_packing():
    assert rt.i32(-1).pack() == (b"\xff\xff\xff\xff", 4)
    assert rt.u64(2**64 - 1).pack() == (b"\xff" * 8, 8)
    assert rt.f16(1.0).pack() == (np.float16(1.0).tobytes(), 2)
    assert rt.f32(0.5).pack() == (struct.pack("<f", 0.5), 4)
    assert rt.i16(np.int16(-3)).pack() == (struct.pack("<h", -3), 2)


def test_parameter_storage_is_aligned():
    desc = b"\x01" * 128
    pack = _ParamPack([(struct.pack("<Q", 0x1234), 8), (desc, 64), (struct.pack("<i", 7), 4)])
    addrs = [pack.array[i] for i in range(3)]
    assert addrs[1] % 64 == 0 and addrs[0] % 8 == 0
    assert ctypes.string_at(addrs[0], 8) == struct.pack("<Q", 0x1234)
    assert ctypes.string_at(addrs[1], 128) == desc
    assert ctypes.string_at(addrs[2], 4) == struct.pack("<i", 7)


# --- pointers ----------------------------------------------------------------

def test_misaligned_pointer_is_refused():
    k = stub(["ptr", "ptr", "i32"])
    with pytest.raises(rt.ArgumentError, match=r"argument 1 of kernel 'copy': address 0x1004 is "
                       r"not 16-byte aligned \(4 bytes past\)"):
        k.launch(grid=1, block=64, args=[rt.DevicePointer(0x1000), rt.DevicePointer(0x1004), 1])
    with pytest.raises(rt.ArgumentError, match="address 0x2008 is not 16-byte aligned"):
        k.launch(grid=1, block=64, args=[FakeCai(0x2000), FakeCai(0x2008), 1])
    # a declared smaller alignment passes the check and reaches the driver
    k4 = stub(["ptr:4", "ptr:4", "i32"])
    with pytest.raises(rt.NoGpuError, match="launch of kernel 'copy'.*stand-in"):
        k4.launch(grid=1, block=64, args=[0x1004, FakeCai(0x2008), 1])


def test_pointer_sources():
    planned = plan_arguments("k", bind([np.arange(8, dtype=np.int32), FakeCai(0x100),
                                        rt.DevicePointer(0x200), 0x300],
                                       ["ptr", "ptr", "ptr", "ptr"], "k"))
    (_, a0, h0), (_, a1, h1), (_, a2, _), (_, a3, _) = planned
    assert a0 is None and h0.dtype == np.int32  # host array: copied in and out
    assert (a1, a2, a3) == (0x100, 0x200, 0x300) and h1 is None
    with pytest.raises(rt.ArgumentError, match="non-contiguous numpy array"):
        plan_arguments("k", bind([np.zeros((4, 4))[:, 1]], ["ptr"], "k"))
    with pytest.raises(rt.ArgumentError, match="cannot pass a str as a pointer"):
        plan_arguments("k", [rt.ptr("abc")])
    with pytest.raises(rt.ArgumentError, match="power of two"):
        rt.ptr(0, align=3)


def test_cpu_dlpack_is_a_host_array():
    x = np.arange(4, dtype=np.float32)

    class OnlyDlpack:
        def __dlpack__(self, **kw):
            return x.__dlpack__(**kw)

        def __dlpack_device__(self):
            return x.__dlpack_device__()

    (_, addr, host), = plan_arguments("k", [rt.ptr(OnlyDlpack())])
    assert addr is None and np.array_equal(host, x)


def test_cuda_dlpack_address_read_from_the_capsule():
    """kDLCUDA producers: the address is DLTensor.data + byte_offset."""
    from pipeline_mlir.runtime import args as rargs

    x = np.arange(16, dtype=np.uint8)

    class CudaLike:
        def __dlpack__(self, **kw):
            return x[4:].__dlpack__()

        def __dlpack_device__(self):
            return (2, 0)

    assert rargs.device_address(CudaLike()) == (x.ctypes.data + 4, None)


# --- launch configuration ----------------------------------------------------

@pytest.mark.parametrize("kw,msg", [
    (dict(grid=0, block=64), r"every grid dimension must be >= 1"),
    (dict(grid=(1, 2, 3, 4), block=64), r"grid has 4 dimensions"),
    (dict(grid=1, block=(1025,)), r"block x = 1025 exceeds the device limit 1024"),
    (dict(grid=1, block=(32, 32, 2)), r"block \(32, 32, 2\) has 2048 threads, more than the 1024"),
    (dict(grid=(1, 70000), block=32), r"grid y = 70000 exceeds the device limit 65535"),
    (dict(grid=1, block=64, smem=240000), r"240000 bytes of dynamic shared memory \+ 0 static = "
     r"240000 bytes, more than the 232448 bytes a block can have on fake sm_90 device"),
    (dict(grid=1, block=64, smem=-1), r"smem must be a non-negative int"),
    (dict(grid=(3, 1, 1), block=64, cluster=(2, 1, 1)),
     r"cluster \(2, 1, 1\) does not divide grid \(3, 1, 1\) in x \(3 % 2 != 0\)"),
    (dict(grid=(32, 1, 1), block=64, cluster=(32, 1, 1)), r"cluster .* has 32 blocks; at most 16"),
])
def test_launch_config_errors(kw, msg):
    k = stub(["ptr"])
    with pytest.raises(rt.LaunchConfigError, match=r"kernel 'copy': " + msg):
        k.launch(args=[0], **kw)


def test_static_smem_counts_against_the_limit():
    with pytest.raises(rt.NoGpuError):  # exactly at the limit is allowed
        stub(["ptr"]).launch(grid=1, block=64, smem=232448, args=[0])
    k = stub(["ptr"], static_smem=16384)
    with pytest.raises(rt.LaunchConfigError, match=r"220000 bytes of dynamic shared memory \+ "
                       r"16384 static = 236384 bytes"):
        k.launch(grid=1, block=64, smem=220000, args=[0])


def test_kernel_register_limit_and_cluster_rules():
    k = stub(["ptr"], max_threads_per_block=512, num_regs=128)
    with pytest.raises(rt.LaunchConfigError, match=r"1024 threads, more than the 512 allowed "
                       r"\(the kernel uses 128 registers per thread\)"):
        k.launch(grid=1, block=1024, args=[0])
    with pytest.raises(rt.LaunchConfigError, match="clusters need compute capability 9.0"):
        stub(["ptr"], cc=(8, 0)).launch(grid=2, block=32, cluster=2, args=[0])
    req = stub(["ptr"], required_cluster=(2, 1, 1))
    with pytest.raises(rt.LaunchConfigError, match=r"compiled for cluster \(2, 1, 1\), launched "
                       r"with \(4, 1, 1\)"):
        req.launch(grid=4, block=32, cluster=4, args=[0])


def test_valid_configurations_normalize():
    dev = rt.Device.fake()
    attrs = rt.FuncAttrs()
    assert rt.validate_config("k", dev, attrs, 4, (64,), (1, 1, 1), 0) == (
        (4, 1, 1), (64, 1, 1), None, 0)
    assert rt.validate_config("k", dev, attrs, (16, 2), 128, (16, 1), 1 << 17) == (
        (16, 2, 1), (128, 1, 1), (16, 1, 1), 1 << 17)  # non-portable cluster of 16 is allowed


def test_sm100_launch_path_reaches_the_driver():
    """The sm_100 path is the same code: every check passes on a stand-in
    Blackwell device and the launch stops at the first driver call."""
    k = stub(["ptr", "i32"], cc=(10, 0))
    with pytest.raises(rt.NoGpuError, match="stand-in"):
        k.launch(grid=(4, 1, 1), block=128, cluster=(2, 1, 1), smem=100 << 10,
                 args=[rt.DevicePointer(0x10000), 3])
