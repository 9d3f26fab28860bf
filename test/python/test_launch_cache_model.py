"""Deviceless, model-based: the descriptor arena and the prepared-launch
caches of several GEMM variants under random interleavings.

A model GPU (``ModelGpu``) stands for the driver: copies, event records and
kernel launches are queued per stream and run later, in random steps, the
way a GPU trails the host; a copy reads its host slot when it runs, not
when it is enqueued; a launch enqueued while its stream is being captured
goes into a graph that the test replays later. Each model kernel, when it
runs, reads its three descriptor slots from model device memory and
compares them with the tensors it was called with.

The property: **every kernel that runs (and every graph replay) reads the
descriptors of its own tensors**, whatever the interleaving of variants
(owners), tensor sets (keys), streams, captures, slot reuses (evictions)
and GPU progress. A small arena and small caches make every path common.
The hang this replaced (``put`` told the *new* caller to forget the *old*
owner's key, so the holder kept firing a launch whose slots held another
variant's maps) is planted back in one test, which must fail.
"""

import ctypes
import random
import struct
import sys
import types

import pytest

from pipeline_mlir import runtime as rt
from pipeline_mlir.ops import hopper_gemm_host as hg
from pipeline_mlir.runtime import compiled as rc
from pipeline_mlir.runtime import descriptor_arena as da
from pipeline_mlir.runtime import fastlaunch as fl
from pipeline_mlir.runtime import launch_cache as lc

from test_gemm_host_fastpath import BF16, F16, META, Tensor
from test_runtime_fastpath import IMAGE, FakeDevice, FakeFunction

DESC = rt.tensormap.DESCRIPTOR_BYTES


def descriptor_of(t):
    """A stand-in tensor map: the tensor's address and shape, padded to 128 bytes."""
    return struct.pack("<QQQ", t.address, *t.shape).ljust(DESC, b"\0")


class ModelGpu:
    """The driver interface of the arena and the launcher, over queues that
    run when ``progress`` says so."""

    def __init__(self, rng, nbytes=1 << 16):
        self.rng = rng
        self.device = ctypes.create_string_buffer(nbytes)
        self.hosts = []
        self.dev_base = 0x7000_0000
        self.allocated = 0
        self.queues = {}                 # stream -> [op]
        self.capturing = set()           # streams being captured
        self.graphs = []                 # [[op]]: one per capture
        self.events = {}                 # event -> (token issued, token done)
        self.ran = self.failures = 0
        self.expect = None               # (a, b, c) of the call being made
        self.errors = []

    # -- the arena's calls ------------------------------------------------------
    def allocate(self, nbytes):
        """(device address, host address) of a new pair of regions."""
        dev = self.dev_base + self.allocated
        self.allocated += nbytes
        assert self.allocated <= len(self.device)
        self.hosts.append(ctypes.create_string_buffer(nbytes))
        return dev, ctypes.addressof(self.hosts[-1])

    def destroy_event(self, event):
        pass

    def copy_to_device_async(self, dst, src, nbytes, stream):
        def op():
            off = dst - self.dev_base
            ctypes.memmove(ctypes.addressof(self.device) + off, src, nbytes)
        self._enqueue(stream, op)

    def is_capturing(self, stream):
        return stream in self.capturing

    def create_event(self):
        ev = len(self.events) + 1
        self.events[ev] = [0, 0]
        return ev

    def record(self, event, stream):
        if stream in self.capturing:
            raise AssertionError("an event recorded on a capturing stream")
        state = self.events[event]
        state[0] += 1
        token = state[0]

        def op():
            state[1] = max(state[1], token)
        self._enqueue(stream, op)

    def event_done(self, event):
        self.progress()                 # the GPU moves while the host polls
        issued, done = self.events[event]
        return done >= issued

    # -- the launcher's calls ---------------------------------------------------
    def set_current(self, context):
        pass

    def create_event_pair(self):
        return (0xE0, 0xE1)

    def launch_at(self, context, config, function, params):
        cfg = fl.LaunchConfig.from_address(config)
        ptrs = (ctypes.c_void_p * 3).from_address(params)
        slots = [struct.unpack("<Q", ctypes.string_at(ptrs[i], 8))[0] for i in range(3)]
        want = [descriptor_of(t) for t in self.expect]
        stream = cfg.hStream or 0
        where = "graph" if stream in self.capturing else "queue"

        def kernel():
            got = [ctypes.string_at(ctypes.addressof(self.device) + s - self.dev_base, DESC)
                   for s in slots]
            self.ran += 1
            if got != want:
                self.errors.append(("kernel read another call's descriptors", where,
                                    [hex(x) for x in slots]))
        self._enqueue(stream, kernel)
        return 0

    # -- the model's time -------------------------------------------------------
    def _enqueue(self, stream, op):
        if stream in self.capturing:
            self.graphs[-1].append(op)
        else:
            self.queues.setdefault(stream, []).append(op)

    def progress(self, steps=None):
        for _ in range(self.rng.randint(0, 6) if steps is None else steps):
            busy = [q for q in self.queues.values() if q]
            if not busy:
                return
            self.rng.choice(busy).pop(0)()

    def drain(self):
        while any(self.queues.values()):
            self.progress(1)

    def begin_capture(self, stream):
        self.drain_stream(stream)
        self.capturing.add(stream)
        self.graphs.append([])

    def end_capture(self, stream):
        self.capturing.discard(stream)

    def drain_stream(self, stream):
        for op in self.queues.pop(stream, []):
            op()

    def replay(self, graph):
        for op in graph:
            op()


@pytest.fixture
def world(monkeypatch):
    """A factory of (ModelGpu, arena, [HopperGemm variants]) sharing one arena."""
    torch = types.SimpleNamespace(
        Tensor=Tensor, bfloat16=BF16, float16=F16,
        empty=lambda m, n, device, dtype: Tensor((m, n), dtype, ordinal=device.index),
        cuda=types.SimpleNamespace(is_initialized=lambda: True),
        _C=types.SimpleNamespace(_cuda_getCurrentRawStream=lambda ordinal: 0x5000 + ordinal))
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.setattr(rc.CompiledKernel, "function", lambda self, device=None: FakeFunction())
    monkeypatch.setattr(rc, "default_device", lambda ordinal=0: FakeDevice(ordinal))
    monkeypatch.setattr(hg.HopperGemm, "descriptors",
                        lambda self, a, b, c: tuple(descriptor_of(t) for t in (a, b, c)))

    real_init = fl.Launcher.__init__

    def make(seed, slots, capacity, variants, streams=8):
        rng = random.Random(seed)
        gpu = ModelGpu(rng)
        monkeypatch.setattr(fl.Launcher, "__init__",
                            lambda self, image, device, fn, driver=None:
                            real_init(self, image, device, fn, driver=gpu))
        arena = da.StreamArenas(None, slots=slots, streams=streams, driver=gpu, timeout=5.0,
                                allocate=gpu.allocate)
        monkeypatch.setattr(lc, "device_arena", lambda device: arena)
        monkeypatch.setattr(hg, "_LAUNCH_CACHE", capacity)
        rc.CompiledKernel._cache.clear()
        gemms = []
        for i in range(variants):
            meta = dict(META, name=f"gemm_v{i}", block_n=128 * (i + 1))
            gemms.append(hg.HopperGemm(IMAGE + bytes([i]), meta, device=FakeDevice(0)))
        return gpu, arena, gemms

    return make


def tensor_sets(rng, count):
    """``count`` (a, b, c) triples of a few shapes; addresses drawn from a
    small pool, so that the same address comes back with other partners
    (the churn of an allocator)."""
    pool = [0x9000_0000 + (i << 24) for i in range(12)]
    sets = []
    for _ in range(count):
        m, n, k = rng.choice([(256, 512, 128), (128, 256, 64), (512, 256, 256)])
        a, b, c = rng.sample(pool, 3)
        sets.append((Tensor((m, k), address=a), Tensor((n, k), address=b),
                     Tensor((m, n), address=c)))
    return sets


def run_campaign(make, seed, steps=600, slots=12, capacity=4, variants=3,
                 streams=(0, 0x5000, 0x77, 0x78), max_streams=8, captures=True, sets=6):
    gpu, arena, gemms = make(seed, slots, capacity, variants, max_streams)
    rng = gpu.rng
    sets = tensor_sets(rng, sets)
    graphs = []
    for _ in range(steps):
        what = rng.random()
        if what < 0.75 or not captures:
            g = rng.choice(gemms)
            a, b, c = rng.choice(sets)
            s = rng.choice(streams)
            gpu.expect = (a, b, c)
            try:
                g(a, b, c, stream=s)
            except da.ArenaFullError:
                arena.release_pinned()
                graphs.clear()        # the user destroyed their graphs
        elif what < 0.80 and len(graphs) < 3:
            # capture one to three calls on a side stream, then keep the graph
            s = 0x77
            gpu.begin_capture(s)
            for _ in range(rng.randint(1, 3)):
                g = rng.choice(gemms)
                a, b, c = rng.choice(sets)
                gpu.expect = (a, b, c)
                try:
                    g(a, b, c, stream=s)
                except da.ArenaFullError:
                    break
            gpu.end_capture(s)
            graphs.append(gpu.graphs[-1])
        elif graphs:
            gpu.drain()
            gpu.replay(rng.choice(graphs))
        gpu.progress()
    gpu.drain()
    for graph in graphs:
        gpu.replay(graph)
    return gpu, arena


@pytest.mark.parametrize("seed", range(12))
def test_every_kernel_reads_its_own_descriptors(world, seed):
    # caches smaller, then larger, than the rings: both evictions paths
    gpu, arena = run_campaign(world, seed, capacity=(4, 12)[seed % 2])
    assert gpu.errors == []
    stats = arena.stats()
    assert gpu.ran > 300 and stats["reuses"] > 50     # slots were reused, often
    assert stats["events"] <= stats["streams"] * (arena.slots // da.CHUNK_SLOTS + 1)


def test_without_captures_many_owners_and_a_one_chunk_ring(world):
    gpu, arena = run_campaign(world, 99, steps=1500, slots=7, capacity=3, variants=5,
                              captures=False)
    assert gpu.errors == [] and arena.stats()["reuses"] > 500


@pytest.mark.parametrize("seed", range(4))
def test_more_streams_than_arenas_retires_the_oldest(world, seed):
    """Five streams, three arenas: streams take each other's rings (after
    waiting for them), and no kernel reads a retired ring's new contents."""
    gpu, arena = run_campaign(world, 200 + seed, steps=800, max_streams=3,
                              streams=(0x5000, 0x71, 0x72, 0x73, 0x74), captures=False)
    assert gpu.errors == [] and arena.retired > 20 and arena.stats()["streams"] <= 3


def test_the_original_eviction_bug_is_caught(world, monkeypatch):
    """Plant the old eviction bug back (the taker's callback told, not the
    holder's): the model must see a kernel read another call's maps."""
    real_put = da.DescriptorArena.put

    def buggy_put(self, data, on_reuse=None):
        # the slot's holder is never told (the old code told the new caller)
        self._on_reuse[self._next % self.slots] = None
        return real_put(self, data, on_reuse)

    monkeypatch.setattr(da.DescriptorArena, "put", buggy_put)
    found = 0
    for seed in range(6):
        gpu, _ = run_campaign(world, seed, capacity=12, captures=False)
        found += bool(gpu.errors)
    assert found == 6


def test_a_host_slot_is_not_rewritten_before_its_copy_ran(world):
    """Without the chunk events the model's late copies read a rewritten
    host slot; with them, a put waits (the model GPU advances while polled)."""
    gpu, arena, (g,) = world(5, slots=4, capacity=2, variants=1)
    sets = tensor_sets(gpu.rng, 8)
    for a, b, c in sets * 3:             # never let the GPU run between calls
        gpu.expect = (a, b, c)
        g(a, b, c, stream=0x5000)
    gpu.drain()
    assert gpu.errors == [] and gpu.ran == 24


def test_a_hung_stream_makes_put_raise_not_hang(world):
    gpu, arena, (g,) = world(6, slots=3, capacity=1, variants=1)
    arena.timeout = 0.05
    gpu.event_done = lambda event: False      # the stream never gets there
    sets = tensor_sets(gpu.rng, 4)
    with pytest.raises(rt.KernelTimeoutError, match="probably hung"):
        for a, b, c in sets:
            gpu.expect = (a, b, c)
            g(a, b, c, stream=0x5000)


def test_captured_launches_pin_their_slots_and_say_when_full(world):
    gpu, arena, (g,) = world(7, slots=6, capacity=8, variants=1)
    sets = tensor_sets(gpu.rng, 3)
    gpu.begin_capture(0x77)
    for a, b, c in sets[:2]:
        gpu.expect = (a, b, c)
        g(a, b, c, stream=0x77)
    gpu.end_capture(0x77)
    assert arena.stats()["pinned"] == 6
    gpu.expect = sets[2]
    with pytest.raises(da.ArenaFullError, match="release_pinned"):
        g(*sets[2], stream=0x77)
    g(*sets[2], stream=0x5000)               # another stream: its own ring
    arena.release_pinned()
    g(*sets[2], stream=0x77)
    gpu.drain()
    assert gpu.errors == []


def test_a_launch_fired_into_a_capture_pins_the_slots_it_names(world):
    gpu, arena, (g,) = world(8, slots=9, capacity=8, variants=1)
    (a, b, c), *others = tensor_sets(gpu.rng, 6)
    gpu.expect = (a, b, c)
    g(a, b, c, stream=0x77)                   # prepared outside the capture
    gpu.begin_capture(0x77)
    g(a, b, c, stream=0x77)                   # fired into it: pinned now
    gpu.end_capture(0x77)
    graph = gpu.graphs[-1]
    assert arena.stats()["pinned"] == 3
    for x in others:                          # wrap the ring twice
        gpu.expect = x
        g(*x, stream=0x5000)
    gpu.drain()
    gpu.expect = (a, b, c)
    gpu.replay(graph)
    assert gpu.errors == []


def test_ragged_shapes_and_fresh_tensors_keep_every_table_bounded(world):
    """A serving loop: a new M (batch) and new tensors on every call. The
    shape plans, prepared launches and descriptor rings stay within their
    limits, and every kernel still reads its own maps."""
    from pipeline_mlir.runtime.bounded import put_bounded

    gpu, arena, (g,) = world(9, slots=24, capacity=8, variants=1)
    for i in range(3000):
        m = 8 * (1 + i % 700)
        a, b, c = Tensor((m, 64)), Tensor((128, 64)), Tensor((m, 128))
        gpu.expect = (a, b, c)
        g(a, b, c, stream=(0, 0x5000)[i % 2])
        if i % 7 == 0:
            gpu.progress(20)
    gpu.drain()
    assert gpu.errors == [] and gpu.ran == 3000
    assert len(g._shapes) <= 8 and len(g.launches) <= 8
    assert arena.stats()["streams"] == 2 and arena.stats()["slots"] == 48
    table = {}
    for i in range(100):
        put_bounded(table, i, i, 10)
    assert list(table) == list(range(90, 100))
    put_bounded(table, 95, -1, 10)            # an existing key: nothing dropped
    assert len(table) == 10 and table[95] == -1
