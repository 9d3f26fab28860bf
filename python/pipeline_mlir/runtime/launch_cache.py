"""Prepared launches of one kernel, keyed by the caller's facts, with their
TMA descriptors in the device's shared ``DescriptorArena``.

The library ops (the GEMM, FP8 GEMM and attention launchers) check a call's
tensors once, encode their tensor maps, and keep the result as a
``fastlaunch.PreparedLaunch``; a later call with the same facts (addresses,
shapes, dtypes, stream: the caller builds the key) fires it with two driver
calls. This class owns that cache, so every op gets the same guarantees:

- bounded: at most ``capacity`` launches, the oldest dropped first;
- a launch never outlives its descriptors: each slot it names was filled by
  a put whose ``on_reuse`` revokes this launch, so when the stream's arena
  (shared by every variant of every op on the device) hands one of its
  slots to anyone else, or is retired, the launch leaves the cache and is
  never fired again;
- CUDA graphs: a launch fired while its stream is being captured has its
  slots pinned (the arena keeps them out of the ring for the graph's life;
  ``StreamArenas.release_pinned`` returns them); a launch prepared under
  capture is pinned by its puts and not kept, since its descriptor copies
  run only when the graph does.
"""

from .descriptor_arena import StreamArenas

DEFAULT_CAPACITY = 1024
_ARENAS = {}   # device ordinal -> StreamArenas


def device_arena(device):
    """The descriptor arenas (one per stream) of ``device``, shared by every
    op's launches."""
    found = _ARENAS.get(device.ordinal)
    if found is None:
        found = _ARENAS[device.ordinal] = StreamArenas(device)
    return found


class _Holder:
    """What one prepared launch holds in the arena: its slots. ``revoke``
    is the slots' ``on_reuse``: the first reused slot drops the launch.
    ``pinned``: the arena's pin epoch in which its slots were pinned (-1:
    not pinned; a ``release_pinned`` since voids it)."""

    __slots__ = ("cache", "key", "arena", "launch", "slots", "pinned", "revoked")

    def __init__(self, cache, key, arena):
        self.cache, self.key, self.arena = cache, key, arena
        self.launch, self.slots, self.pinned, self.revoked = None, [], -1, False

    def revoke(self):
        if self.revoked:
            return
        self.revoked = True
        ready = self.cache._ready
        if ready.get(self.key) is self.launch:
            del ready[self.key]


class LaunchCache:
    """Prepared launches of ``launcher`` (a ``fastlaunch.Launcher``).

    ``get(key)`` is the per-call lookup; ``prepare(key, values, grid,
    stream)`` builds and keeps a launch (the 'tma' parameters of ``values``
    given as 128-byte descriptors or ``TmaDescriptor``s, placed in arena
    slots); ``fire(p)`` launches one."""

    def __init__(self, launcher, capacity=DEFAULT_CAPACITY, arena=None):
        if not isinstance(capacity, int) or capacity < 1:
            raise ValueError(f"LaunchCache: capacity must be a positive int, got {capacity!r}")
        self.launcher, self.capacity = launcher, capacity
        self._arena = arena
        self._ready = {}

    @property
    def arena(self):
        if self._arena is None:
            self._arena = device_arena(self.launcher.device)
        return self._arena

    def __len__(self):
        return len(self._ready)

    def get(self, key):
        return self._ready.get(key)

    def lookup(self):
        """The bound ``get`` of the cache's dict (the per-call path of an op
        saves a method call; the dict is never replaced)."""
        return self._ready.get

    def prepare(self, key, values, grid, stream):
        """Put the descriptors, prepare the launch, keep it under ``key``."""
        launcher = self.launcher
        if key in self._ready:
            return self._ready[key]
        if len(self._ready) >= self.capacity:
            self._ready.pop(next(iter(self._ready)))   # the oldest
        arena = self.arena.for_stream(stream)
        holder = _Holder(self, key, arena)
        values = list(values)
        for i in launcher.tma_params:
            desc = values[i]
            slot, _ = arena.put(getattr(desc, "bytes", desc), holder.revoke)
            holder.slots.append(slot)
            values[i] = arena.address(slot)
        p = launcher.prepare(values, grid, stream)
        holder.launch = p
        captured = all(arena.pinned(s) for s in holder.slots)
        p.holder = holder
        if holder.revoked:   # a put of this launch took another of its slots
            raise RuntimeError(f"a descriptor arena of {arena.slots} slots cannot hold the "
                               f"{len(holder.slots)} descriptors of one launch")
        if not captured:
            self._ready[key] = p
        # else: prepared inside a stream capture, its descriptor copies are
        # nodes of the graph and have not run: it serves this capture only
        # (a later call prepares its own, with copies that run).
        return p

    def fire(self, p):
        """Launch ``p``; inside a stream capture, pin its slots first. (The
        legacy default stream, 0, is never captured: no driver query.)"""
        holder = p.holder
        if holder.revoked:   # a stale launch is never fired (its slots name others' maps)
            raise RuntimeError("internal error: a revoked prepared launch was fired")
        if p.stream and holder.pinned != holder.arena.pin_epoch:
            self.pin_if_capturing(p)
        self.launcher.fire(p)

    def pin_if_capturing(self, p):
        holder = p.holder
        arena = holder.arena
        if holder.slots and arena.capturing():
            for s in holder.slots:
                arena.pin(s)
            holder.pinned = arena.pin_epoch
