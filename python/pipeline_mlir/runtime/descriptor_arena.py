"""Device copies of TMA descriptors, written in stream order.

A kernel that takes a descriptor by pointer (the dialect's ``!llvm.ptr``
descriptor operand) reads 128 bytes from global memory. Giving each new
descriptor its own ``cuMemAlloc`` + synchronous ``cuMemcpyHtoD``
(``TmaDescriptor.device_copy``) is fine once, but not per call and not
inside CUDA stream capture, where both are illegal. The arena holds a ring
of 128-byte device slots and as many pinned host slots: ``put`` writes the
descriptor into a host slot and enqueues an asynchronous copy to the device
slot on the launch's stream, so the kernel after it on that stream sees it,
and under capture the copy becomes a node of the graph that replays it.

A slot is reused after ``slots`` later puts (the caller's descriptor cache
forgets the entry it held, ``on_evict``); a graph captured that long ago
that still names the slot would read the newer descriptor, so keep the
arena larger than the number of distinct descriptors live graphs use.
"""

import ctypes

from .tensormap import DESCRIPTOR_BYTES


class DescriptorArena:
    def __init__(self, device, slots=4096, driver=None):
        from .fastlaunch import native
        from .memory import DeviceBuffer, HostMappedBuffer

        self.slots = slots
        self.device_buffer = DeviceBuffer(slots * DESCRIPTOR_BYTES, device)  # 256-aligned
        self.host_buffer = HostMappedBuffer(slots * DESCRIPTOR_BYTES, device)
        self._driver = driver or native()
        self._next = 0
        self._owner = [None] * slots

    def put(self, data, stream, owner=None, on_evict=None):
        """The device address of a copy of ``data`` (128 bytes), made
        before anything later on ``stream``. ``on_evict(owner)`` is called
        for the entry whose slot this put takes over."""
        i = self._next % self.slots
        self._next += 1
        old = self._owner[i]
        if old is not None and on_evict is not None:
            on_evict(old)
        self._owner[i] = owner
        host = self.host_buffer.host_address + i * DESCRIPTOR_BYTES
        dev = self.device_buffer.address + i * DESCRIPTOR_BYTES
        ctypes.memmove(host, bytes(data), DESCRIPTOR_BYTES)
        self._driver.copy_to_device_async(dev, host, DESCRIPTOR_BYTES, stream)
        return dev
