"""Deviceless: TMA descriptor requests are validated before the driver."""

import numpy as np
import pytest

from pipeline_mlir import runtime as rt
from pipeline_mlir.runtime import tensormap as tma

GOOD = dict(address=0x10000, shape=(1024, 64), strides=(256, 4), dtype="float32",
            box_shape=(16, 64), swizzle=None)


def check(**changes):
    kw = dict(GOOD, **changes)
    return tma.validate(kw["address"], kw["shape"], kw["strides"], kw["dtype"], kw["box_shape"],
                        kw["swizzle"], kw.get("element_strides"))


def test_valid_request():
    assert check() == ("float32", 4, 0, (1, 1))
    assert check(box_shape=(16, 32), swizzle=128) == ("float32", 4, 128, (1, 1))
    assert check(dtype=np.dtype(np.float16), strides=(128, 2), box_shape=(8, 64),
                 swizzle="128B")[:3] == ("float16", 2, 128)


@pytest.mark.parametrize("changes,msg", [
    (dict(address=0x10008), r"global address 0x10008 is not 16-byte aligned \(it is 8 bytes past"),
    (dict(strides=(260, 4)), r"strides\[0\] = 260 bytes is not a multiple of 16 bytes"),
    (dict(strides=(256, 8)), r"innermost dimension must be contiguous: strides\[-1\] is 8 bytes"),
    (dict(box_shape=(16, 512), shape=(1024, 1024), strides=(4096, 4)),
     r"box_shape\[1\] = 512 is outside 1..256"),
    (dict(box_shape=(0, 64)), r"box_shape\[0\] = 0 is outside 1..256"),
    (dict(box_shape=(16, 2)), r"inner dimension is 8 bytes \(2 x 4\); it must be a multiple of 16"),
    (dict(swizzle=64), r"inner dimension is 256 bytes, more than the 64-byte swizzle span"),
    (dict(swizzle=96), r"swizzle 96 is not one of none, 32, 64, 128"),
    (dict(dtype="complex64"), r"dtype 'complex64' is not supported by TMA"),
    (dict(shape=(), strides=(), box_shape=()), r"TMA tensors have rank 1..5, got rank 0"),
    (dict(shape=(2,) * 6, strides=(16,) * 5 + (4,), box_shape=(1,) * 5 + (4,)),
     r"rank 1..5, got rank 6"),
    (dict(strides=(256,)), r"must all have rank 2"),
    (dict(shape=(0, 64)), r"shape\[0\] = 0 is outside 1..2\^32"),
    (dict(element_strides=(1, 9)), r"element_strides \(1, 9\) must be 2 values in 1..8"),
])
def test_invalid_requests(changes, msg):
    with pytest.raises(rt.TmaDescriptorError, match=msg):
        check(**changes)


def test_make_descriptor_checks_before_the_driver():
    with pytest.raises(rt.TmaDescriptorError, match="not 16-byte aligned"):
        rt.make_tma_descriptor(rt.DevicePointer(0x1004), shape=(64, 64), dtype="uint8",
                               box_shape=(8, 16))
    with pytest.raises(rt.TmaDescriptorError, match="TMA needs device memory"):
        rt.make_tma_descriptor(np.zeros((64, 64), np.float32), box_shape=(8, 8))
    with pytest.raises(rt.TmaDescriptorError, match="dtype is required"):
        rt.make_tma_descriptor(0x1000, shape=(64,), box_shape=(16,))
    # contiguous strides are derived from the shape (outermost first)
    with pytest.raises(rt.TmaDescriptorError, match=r"strides\[0\] = 40 bytes"):
        rt.make_tma_descriptor(0x1000, shape=(4, 10), dtype="float32", box_shape=(2, 8))
    # a valid request goes on to cuTensorMapEncodeTiled, which needs a GPU
    with pytest.raises(rt.NoGpuError):
        rt.make_tma_descriptor(0x1000, shape=(64, 64), dtype="float32", box_shape=(8, 32),
                               swizzle=128)


def test_descriptor_object():
    d = rt.TmaDescriptor(b"\0" * 128, {"shape": (1,), "box_shape": (1,), "dtype": "uint8",
                                       "swizzle": 0})
    assert len(d.bytes) == 128 and "TmaDescriptor(shape=(1,)" in repr(d)
    with pytest.raises(ValueError, match="128 bytes"):
        rt.TmaDescriptor(b"\0" * 64, {})
    # passed by value it is a 64-byte aligned 128-byte parameter
    assert rt.tma(d, by_value=True).kind == "tma_byval" and rt.tma(d).kind == "tma"
