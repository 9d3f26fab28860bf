"""The GPU: compute capability and the limits launches are checked against.

``Device(0)`` opens the real device (its primary context, made current).
``Device.fake(cc=(9, 0))`` is a stand-in with Hopper's limits that never
touches the driver: the launch path runs up to the first driver call and
then raises NoGpuError, which is how the deviceless tests exercise it.
"""

from dataclasses import dataclass

from ..chip_limits import (MAX_CLUSTER_SIZE_NONPORTABLE, MAX_CLUSTER_SIZE_PORTABLE,
                           MULTIPROCESSORS, SMEM_PER_BLOCK)
from . import _driver
from .errors import NoGpuError


@dataclass(frozen=True)
class DeviceLimits:
    max_threads_per_block: int = 1024
    max_block_dims: tuple = (1024, 1024, 64)
    max_grid_dims: tuple = (2**31 - 1, 65535, 65535)
    max_smem_per_block_optin: int = SMEM_PER_BLOCK  # 227 KiB on sm_90 / sm_100
    max_cluster_size_portable: int = MAX_CLUSTER_SIZE_PORTABLE
    max_cluster_size_nonportable: int = MAX_CLUSTER_SIZE_NONPORTABLE
    multiprocessors: int = MULTIPROCESSORS["sm_90a"]


_ATTRS = {
    "max_threads_per_block": "CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK",
    "max_smem_per_block_optin": "CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN",
    "multiprocessors": "CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT",
}


class Device:
    """One GPU: ordinal, name, compute capability ``cc`` and ``limits``."""

    def __init__(self, ordinal=0, *, _fake=None):
        if _fake is not None:
            self.ordinal, self.name, self.cc, self.limits = _fake
            self.is_fake, self.handle, self.context = True, None, None
            return
        drv = _driver.cuda()
        count = _driver.device_count()
        if not 0 <= ordinal < count:
            raise NoGpuError(f"device {ordinal} does not exist ({count} present)")
        self.ordinal, self.is_fake = ordinal, False
        self.handle = _driver.check(drv.cuDeviceGet(ordinal), "cuDeviceGet")
        raw = _driver.check(drv.cuDeviceGetName(256, self.handle), "cuDeviceGetName")
        self.name = raw.split(b"\0", 1)[0].decode(errors="replace")
        attr = lambda n: _driver.check(  # noqa: E731
            drv.cuDeviceGetAttribute(getattr(drv.CUdevice_attribute, n), self.handle),
            "cuDeviceGetAttribute(" + n + ")")
        self.cc = (attr("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR"),
                   attr("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR"))
        values = {k: attr(v) for k, v in _ATTRS.items()}
        values["max_block_dims"] = tuple(attr(f"CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_{a}") for a in "XYZ")
        values["max_grid_dims"] = tuple(attr(f"CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_{a}") for a in "XYZ")
        self.limits = DeviceLimits(**values)
        self.context = _driver.check(drv.cuDevicePrimaryCtxRetain(self.handle),
                                     "cuDevicePrimaryCtxRetain")
        self.make_current()

    @classmethod
    def fake(cls, cc=(9, 0), name=None, limits=None):
        name = name or f"fake sm_{cc[0]}{cc[1]} device"
        return cls(_fake=(0, name, tuple(cc), limits or DeviceLimits()))

    def make_current(self):
        if self.is_fake:
            raise NoGpuError(f"{self.name} is a stand-in; nothing can run on it")
        _driver.check(_driver.cuda().cuCtxSetCurrent(self.context), "cuCtxSetCurrent")

    def require_real(self, what):
        if self.is_fake:
            raise NoGpuError(f"{what}: {self.name} is a stand-in (deviceless run); "
                             "every check before the driver call passed")

    @property
    def sm(self):
        return f"sm_{self.cc[0]}{self.cc[1]}"

    def mem_info(self):
        """(free, total) bytes of device memory."""
        self.require_real("cuMemGetInfo")
        self.make_current()
        return _driver.check(_driver.cuda().cuMemGetInfo(), "cuMemGetInfo")

    def synchronize(self):
        self.require_real("cuCtxSynchronize")
        _driver.check(_driver.cuda().cuCtxSynchronize(), "cuCtxSynchronize")

    def __repr__(self):
        return f"Device({self.ordinal}, {self.name!r}, {self.sm}{', fake' if self.is_fake else ''})"


_default = {}


def default_device(ordinal=0):
    """The process-wide Device for `ordinal` (opened once)."""
    if ordinal not in _default:
        _default[ordinal] = Device(ordinal)
    return _default[ordinal]
