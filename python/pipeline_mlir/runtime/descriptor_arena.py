"""Device copies of TMA descriptors, written in stream order, in slots whose
ownership is exact under any interleaving of any number of owners.

A kernel that takes a descriptor by pointer (the dialect's ``!llvm.ptr``
descriptor operand) reads 128 bytes from global memory. Giving each new
descriptor its own ``cuMemAlloc`` + synchronous ``cuMemcpyHtoD``
(``TmaDescriptor.device_copy``) is fine once, but not per call and not
inside CUDA stream capture, where both are illegal. The arena holds a ring
of 128-byte device slots and as many pinned host slots: ``put`` writes the
descriptor into a host slot and enqueues an asynchronous copy to the device
slot on the launch's stream, so the kernel after it on that stream sees it,
and under capture the copy becomes a node of the graph that replays it.

Each ring belongs to one stream (``StreamArenas`` keeps one per stream in
use, a bounded number), so a slot's copy and every kernel that reads it are
ordered by that stream: a copy that reuses a slot runs after every kernel
enqueued before it that named the slot. Three more rules make a slot safe
to hand out again:

- **The holder of a slot is told, not the taker.** Each slot remembers the
  ``on_reuse`` callback of the put that filled it; when the ring comes back
  to the slot, that callback (the previous holder's) runs before the slot
  is overwritten, so the launch that named the slot is forgotten by the
  cache that held it (``LaunchCache`` revokes it). Every slot also has a
  generation, bumped on each reuse, for holders that prefer to check
  (``current``).
- **A host slot is rewritten only after its last copy ran.** The ring is
  cut into chunks; each put records an event after its copy. Entering a
  chunk again first waits (with a deadline: a stream stuck behind a hung
  kernel raises ``KernelTimeoutError``, it does not hang the caller) for
  the copies made from it on the previous pass.
- **A slot a CUDA graph names is never reused.** A put made while the
  stream is being captured, and a slot whose launch is fired into a
  capture (``pin``), is pinned: a graph replays its copy and its kernel
  with these addresses for as long as it lives, which the arena cannot
  know. Pinned slots stay out of the ring until ``release_pinned()`` (call
  it after destroying the graphs); ``stats()`` counts them. When every slot
  is pinned, ``put`` raises instead of reusing one.
"""

import ctypes
import time

from .errors import KernelTimeoutError
from .tensormap import DESCRIPTOR_BYTES

CHUNK_SLOTS = 64
DEFAULT_SLOTS = 2048
DEFAULT_STREAMS = 8


class ArenaFullError(RuntimeError):
    """Every slot is pinned by a CUDA graph capture."""


def _wait(driver, event, timeout, what):
    """Poll ``event`` until done, or raise KernelTimeoutError after ``timeout`` s."""
    start, sleep = time.monotonic(), 20e-6
    while not driver.event_done(event):
        if time.monotonic() - start > timeout:
            raise KernelTimeoutError(
                f"{what} did not run within {timeout:.1f} s: a kernel before it on the "
                "stream is probably hung (the descriptor slots cannot be reused safely)")
        time.sleep(sleep)
        sleep = min(sleep * 2, 2e-3)


def _default_timeout():
    from .launch import default_timeout

    return default_timeout()


class DescriptorArena:
    """``slots`` 128-byte descriptor slots for the launches on one ``stream``.

    ``driver``: the ``fastlaunch.NativeDriver`` (or a stand-in with
    ``copy_to_device_async``, ``is_capturing``, ``create_event``,
    ``record``, ``event_done``); ``buffers``: ``(device address, host
    address)`` of two ``slots * 128``-byte regions (``StreamArenas``
    allocates them)."""

    def __init__(self, stream, slots, driver, buffers, timeout=None):
        if not isinstance(slots, int) or slots < 1:
            raise ValueError(f"DescriptorArena: slots must be a positive int, got {slots!r}")
        self.stream, self.slots, self._driver = stream, slots, driver
        self._dev, self._host = buffers
        self.timeout = timeout   # None: launch.default_timeout()
        self._next = 0
        self._on_reuse = [None] * slots
        self.generation = [0] * slots
        self._pinned = bytearray(slots)
        self._pinned_count = 0
        self.pin_epoch = 0       # bumped by release_pinned: earlier pins are void
        self._events = [None] * (-(-slots // CHUNK_SLOTS))   # chunk -> event after its copies
        self._chunk = self._last = -1
        self.puts = self.reuses = 0

    # -- addresses ------------------------------------------------------------

    def address(self, slot):
        return self._dev + slot * DESCRIPTOR_BYTES

    def current(self, slot, generation):
        """Whether ``slot`` still holds what the put of ``generation`` wrote."""
        return self.generation[slot] == generation

    def pinned(self, slot):
        return bool(self._pinned[slot])

    # -- put --------------------------------------------------------------------

    def put(self, data, on_reuse=None):
        """``(slot, generation)`` of a device copy of ``data`` (128 bytes)
        made before anything enqueued later on the stream; ``address(slot)``
        is what the kernel takes. ``on_reuse()`` runs when the slot is
        taken by a later put (never for a pinned slot)."""
        data = bytes(data)
        if len(data) != DESCRIPTOR_BYTES:
            raise ValueError(f"a TMA descriptor is {DESCRIPTOR_BYTES} bytes, got {len(data)}")
        capturing = self.capturing()
        slot = self._take()
        previous, self._on_reuse[slot] = self._on_reuse[slot], None
        if previous is not None:
            self.reuses += 1
            previous()
        self.generation[slot] += 1
        host = self._host + slot * DESCRIPTOR_BYTES
        ctypes.memmove(host, data, DESCRIPTOR_BYTES)
        self._driver.copy_to_device_async(self.address(slot), host, DESCRIPTOR_BYTES,
                                          self.stream)
        self.puts += 1
        if capturing:
            # The graph replays this copy from the host slot: keep both.
            self._pin(slot)
        else:
            self._on_reuse[slot] = on_reuse
            chunk = slot // CHUNK_SLOTS
            if self._events[chunk] is None:
                self._events[chunk] = self._driver.create_event()
            self._driver.record(self._events[chunk], self.stream)   # after the latest copy
        return slot, self.generation[slot]

    def _take(self):
        """The next unpinned slot of the ring, its chunk's earlier copies done."""
        for _ in range(self.slots):
            slot = self._next % self.slots
            self._next += 1
            if self._pinned[slot]:
                continue
            chunk = slot // CHUNK_SLOTS
            if chunk != self._chunk or slot <= self._last:   # a new pass over the chunk
                event = self._events[chunk]
                if event is not None:
                    _wait(self._driver, event, self.timeout or _default_timeout(),
                          f"TMA descriptor copies enqueued on stream {self.stream:#x}")
                self._chunk = chunk
            self._last = slot
            return slot
        raise ArenaFullError(
            f"all {self.slots} TMA descriptor slots of stream {self.stream:#x} are pinned by "
            "CUDA graph captures (each captured launch keeps its descriptors for the graph's "
            "life): call release_pinned() after destroying graphs you no longer replay")

    def capturing(self):
        try:
            return bool(self._driver.is_capturing(self.stream))
        except Exception:  # noqa: BLE001 - an illegal stream: the launch reports it
            return False

    # -- pinning ------------------------------------------------------------------

    def pin(self, slot):
        """Keep ``slot`` out of the ring (a graph names it)."""
        if not self._pinned[slot]:
            self._pin(slot)

    def _pin(self, slot):
        # The holder stays registered: after release_pinned() a reuse of the
        # slot must still revoke the launch that names it.
        self._pinned[slot] = 1
        self._pinned_count += 1

    def release_pinned(self):
        """Return every pinned slot to the ring: only once no CUDA graph that
        was captured with them will be replayed again."""
        self._pinned = bytearray(self.slots)
        self._pinned_count = 0
        self.pin_epoch += 1

    # -- retiring -----------------------------------------------------------------

    def retire(self):
        """Wait until the stream ran everything enqueued so far, then revoke
        every holder: the buffers may serve another stream."""
        event = self._driver.create_event()
        self._driver.record(event, self.stream)
        _wait(self._driver, event, self.timeout or _default_timeout(),
              f"the work enqueued on stream {self.stream:#x}")
        self._driver.destroy_event(event)
        for slot, held in enumerate(self._on_reuse):
            if held is not None:
                self._on_reuse[slot] = None
                held()
        for event in self._events:
            if event is not None:
                self._driver.destroy_event(event)
        self._events = [None] * len(self._events)

    def stats(self):
        return {"slots": self.slots, "pinned": self._pinned_count, "puts": self.puts,
                "reuses": self.reuses, "events": sum(e is not None for e in self._events)}


class StreamArenas:
    """The descriptor arenas of one device, one per stream in use.

    At most ``streams`` arenas: a launch on a new stream beyond that retires
    the least recently used arena without pinned slots (waiting for its
    stream, revoking its launches) and reuses its memory. ``allocate(nbytes)
    -> (device address, host address)`` replaces the device and pinned host
    allocations (tests)."""

    def __init__(self, device, slots=DEFAULT_SLOTS, streams=DEFAULT_STREAMS, driver=None,
                 allocate=None, timeout=None):
        if driver is None:
            from .fastlaunch import native

            driver = native()
        self.device, self.slots, self.max_streams = device, slots, streams
        self._driver, self._allocate, self.timeout = driver, allocate, timeout
        self._arenas = {}    # stream -> DescriptorArena, least recently used first
        self._keep = []      # the buffers' owners
        self._regions = 0
        self._free = []      # rings' (device, host) addresses not yet given to a stream
        self.retired = 0

    def for_stream(self, stream):
        arena = self._arenas.pop(stream, None)
        if arena is None:
            arena = DescriptorArena(stream, self.slots, self._driver, self._buffers(),
                                    self.timeout)
        self._arenas[stream] = arena    # most recently used last
        return arena

    def _buffers(self):
        if len(self._arenas) >= self.max_streams:
            for stream, arena in self._arenas.items():
                if not arena._pinned_count:
                    arena.retire()
                    del self._arenas[stream]
                    self.retired += 1
                    return arena._dev, arena._host
        ring = self.slots * DESCRIPTOR_BYTES
        if not self._free:
            # Every ring of the device at once, at the first call: a later
            # first call on a new stream may be inside a stream capture,
            # where allocating memory is not allowed.
            count = 1 if self._regions else self.max_streams   # (all rings pinned: one more)
            self._regions += 1
            if self._allocate is not None:
                dev, host = self._allocate(ring * count)
            else:
                from .memory import DeviceBuffer, HostMappedBuffer

                d = DeviceBuffer(ring * count, self.device)
                h = HostMappedBuffer(ring * count, self.device)
                self._keep.append((d, h))
                dev, host = d.address, h.host_address
            self._free = [(dev + i * ring, host + i * ring) for i in range(count)]
        return self._free.pop(0)

    def release_pinned(self):
        for arena in self._arenas.values():
            arena.release_pinned()

    def stats(self):
        out = {"streams": len(self._arenas), "retired": self.retired}
        for arena in self._arenas.values():
            for k, v in arena.stats().items():
                out[k] = out.get(k, 0) + v
        return out
