"""Device and host-mapped memory owned by the runtime.

Every allocation is counted (``live_allocations()``) so the leak test can
check that launches give back what they take, beside cuMemGetInfo.
"""

import ctypes

from . import _driver

_live = {"device": 0, "host_mapped": 0}


def live_allocations():
    """Runtime-owned allocations not yet freed: {'device': n, 'host_mapped': n}."""
    return dict(_live)


class DevicePointer:
    """A raw device address (int) passed as a pointer parameter.

    ``owner`` keeps whatever backs the memory alive while the pointer is used.
    """

    __slots__ = ("address", "owner")

    def __init__(self, address, owner=None):
        self.address = int(address)
        self.owner = owner

    def __int__(self):
        return self.address

    def __repr__(self):
        return f"DevicePointer({self.address:#x})"


class DeviceBuffer:
    """``nbytes`` of device memory (cuMemAlloc), freed by ``free()``/GC."""

    def __init__(self, nbytes, device):
        device.require_real("cuMemAlloc")
        device.make_current()
        self.nbytes = int(nbytes)
        self.device = device
        self._ptr = _driver.check(_driver.cuda().cuMemAlloc(max(self.nbytes, 1)),
                                  f"cuMemAlloc({self.nbytes})")
        _live["device"] += 1

    @property
    def address(self):
        return int(self._ptr)

    def pointer(self):
        return DevicePointer(self.address, owner=self)

    def copy_from_host(self, array, stream=None):
        import numpy as np

        src = np.ascontiguousarray(array)
        if src.nbytes > self.nbytes:
            raise ValueError(f"{src.nbytes} bytes do not fit in a {self.nbytes}-byte buffer")
        drv = _driver.cuda()
        _driver.check(drv.cuMemcpyHtoD(self._ptr, src.ctypes.data, src.nbytes), "cuMemcpyHtoD")

    def copy_bytes_from_host(self, data):
        buf = ctypes.create_string_buffer(bytes(data), len(data))
        _driver.check(_driver.cuda().cuMemcpyHtoD(self._ptr, ctypes.addressof(buf), len(data)),
                      "cuMemcpyHtoD")

    def copy_to_host(self, array):
        """Copy into the C-contiguous numpy array `array` (in place)."""
        if not array.flags["C_CONTIGUOUS"] or not array.flags["WRITEABLE"]:
            raise ValueError("copy_to_host needs a writeable C-contiguous array")
        _driver.check(_driver.cuda().cuMemcpyDtoH(array.ctypes.data, self._ptr,
                                                  min(array.nbytes, self.nbytes)),
                      "cuMemcpyDtoH")

    def free(self):
        if self._ptr is not None:
            ptr, self._ptr = self._ptr, None
            _live["device"] -= 1
            try:
                _driver.cuda().cuMemFree(ptr)
            except Exception:  # interpreter shutdown / dead context
                pass

    def __del__(self):
        if getattr(self, "_ptr", None) is not None:
            self.free()


class HostMappedBuffer:
    """Pinned host memory mapped into the device address space
    (cuMemHostAlloc(DEVICEMAP) + cuMemHostGetDevicePointer). It stays
    readable from the host after a kernel traps, which is why the watchdog
    record lives here."""

    def __init__(self, nbytes, device):
        device.require_real("cuMemHostAlloc")
        device.make_current()
        drv = _driver.cuda()
        self.nbytes = int(nbytes)
        flags = drv.CU_MEMHOSTALLOC_DEVICEMAP | drv.CU_MEMHOSTALLOC_PORTABLE
        self._host = _driver.check(drv.cuMemHostAlloc(self.nbytes, flags), "cuMemHostAlloc")
        _live["host_mapped"] += 1
        self.device_address = int(_driver.check(
            drv.cuMemHostGetDevicePointer(self._host, 0), "cuMemHostGetDevicePointer"))
        ctypes.memset(self.host_address, 0, self.nbytes)

    @property
    def host_address(self):
        return int(self._host)

    def read(self):
        return ctypes.string_at(self.host_address, self.nbytes)

    def clear(self):
        ctypes.memset(self.host_address, 0, self.nbytes)

    def free(self):
        if self._host is not None:
            host, self._host = self._host, None
            _live["host_mapped"] -= 1
            try:
                _driver.cuda().cuMemFreeHost(host)
            except Exception:
                pass

    def __del__(self):
        if getattr(self, "_host", None) is not None:
            self.free()
