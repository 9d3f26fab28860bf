"""Host side of pipeline tracing (``pipeline_mlir.trace.instrument``):
arm a loaded module's trace buffer, read the records back, and write them
as a Chrome / Perfetto trace (``chrome://tracing``, ui.perfetto.dev) and as
a PNG of stage occupancy over time.

    traced, names = pipeline_mlir.trace.instrument(kernel.module)  # compile side
    mod = runtime.Module(compiler.to_cubin(traced))
    tb = TraceBuffer(mod, capacity=1 << 20)
    ... launch ...
    recs = tb.records()
    write_chrome_trace(recs, names, "trace.json")
    write_occupancy_png(recs, names, "occupancy.png")

Needs only cuda-bindings (and zlib from the standard library for the PNG).
"""

import ctypes
import json
import struct
import zlib
from dataclasses import dataclass

from . import _driver
from .memory import DeviceBuffer

BUFFER_SYMBOL = "__pipeline_trace_buffer"   # as pipeline_mlir.trace
RECORD_BYTES = 16
HEADER_BYTES = 16
VERBS = ("producer.acquire", "producer.commit", "consumer.wait", "consumer.release")


@dataclass(frozen=True)
class TraceRecord:
    time_ns: int
    verb: str
    pipeline: int
    stage: int
    warp: int
    cta: int


def decode(raw, count):
    """Records from the buffer's bytes (``count`` of them, header skipped)."""
    out = []
    for i in range(count):
        t, info, cta = struct.unpack_from("<QII", raw, HEADER_BYTES + i * RECORD_BYTES)
        out.append(TraceRecord(t, VERBS[info & 3], (info >> 2) & 63, (info >> 8) & 0xFF,
                               info >> 16, cta))
    out.sort(key=lambda r: r.time_ns)
    return out


class TraceBuffer:
    """The device buffer behind a traced module's ``__pipeline_trace_buffer``."""

    def __init__(self, module, capacity=1 << 20):
        if not isinstance(capacity, int) or not 0 < capacity < 2**31:
            raise ValueError(f"capacity must be a positive int below 2^31, got {capacity!r}")
        g = module._global(BUFFER_SYMBOL)
        if g is None:
            raise ValueError(f"{module.label} has no {BUFFER_SYMBOL}: compile the module "
                             "returned by pipeline_mlir.trace.instrument")
        self.module, self.capacity = module, capacity
        self.buffer = DeviceBuffer(HEADER_BYTES + capacity * RECORD_BYTES, module.device)
        self.reset()
        ptr = ctypes.c_uint64(self.buffer.address)
        _driver.check(_driver.cuda().cuMemcpyHtoD(g[0], ctypes.addressof(ptr), 8),
                      "cuMemcpyHtoD(trace buffer)")

    def reset(self):
        """Forget the records (before the next launch)."""
        self.buffer.copy_bytes_from_host(struct.pack("<II", 0, self.capacity) + bytes(8))

    def records(self):
        """The records of the launches since the last reset, by time; raises
        if the buffer overflowed (records were dropped)."""
        head = ctypes.create_string_buffer(HEADER_BYTES)
        drv = _driver.cuda()
        _driver.check(drv.cuMemcpyDtoH(ctypes.addressof(head), self.buffer.address,
                                       HEADER_BYTES), "cuMemcpyDtoH(trace header)")
        count = struct.unpack_from("<I", head.raw)[0]
        if count > self.capacity:
            raise OverflowError(f"the trace buffer holds {self.capacity} records but "
                                f"{count} were written: raise capacity")
        raw = ctypes.create_string_buffer(HEADER_BYTES + count * RECORD_BYTES)
        _driver.check(drv.cuMemcpyDtoH(ctypes.addressof(raw), self.buffer.address,
                                       len(raw)), "cuMemcpyDtoH(trace records)")
        return decode(raw.raw, count)

    def free(self):
        self.buffer.free()


def spans(records):
    """``(pipeline, stage, cta, kind, start_ns, end_ns, warp)`` intervals:
    'fill' from a producer's acquire of a stage to its commit, 'full' from
    the commit to the producer's next acquire of that stage (which returns
    once every consumer released it), or to the last release when no
    acquire follows (the end of the kernel)."""
    out, acquired, committed, last_release = [], {}, {}, {}
    for r in records:
        key = (r.pipeline, r.stage, r.cta)
        if r.verb == "producer.acquire":
            if key in committed:
                out.append((*key, "full", committed.pop(key), r.time_ns, r.warp))
            acquired[key] = (r.time_ns, r.warp)
        elif r.verb == "producer.commit":
            if key in acquired:
                t0, w = acquired.pop(key)
                out.append((*key, "fill", t0, r.time_ns, w))
            committed.setdefault(key, r.time_ns)
        elif r.verb == "consumer.release":
            last_release[key] = r.time_ns
    for key, t0 in committed.items():
        if last_release.get(key, 0) > t0:
            out.append((*key, "full", t0, last_release[key], -1))
    return out


def write_chrome_trace(records, names, path):
    """Chrome trace JSON: one process per CTA, one thread per warp, a
    complete event per fill/hold interval and an instant per verb."""
    if not records:
        raise ValueError("no trace records")
    t0 = records[0].time_ns
    events, holding = [], {}
    for r in records:
        name = names[r.pipeline] if r.pipeline < len(names) else f"p{r.pipeline}"
        base = {"pid": r.cta, "tid": r.warp, "ts": (r.time_ns - t0) / 1000.0}
        events.append({**base, "ph": "i", "s": "t", "name": f"{name}.{r.verb}[{r.stage}]"})
        key = (r.cta, r.warp, r.pipeline, r.stage)
        if r.verb in ("producer.acquire", "consumer.wait"):
            holding[key] = r.time_ns
        elif r.verb in ("producer.commit", "consumer.release") and key in holding:
            start = holding.pop(key)
            what = "fill" if r.verb == "producer.commit" else "hold"
            events.append({"pid": r.cta, "tid": r.warp, "ph": "X",
                           "ts": (start - t0) / 1000.0, "dur": (r.time_ns - start) / 1000.0,
                           "name": f"{name} {what} stage {r.stage}"})
    for cta in sorted({r.cta for r in records}):
        events.append({"pid": cta, "ph": "M", "name": "process_name",
                       "args": {"name": f"CTA {cta}"}})
    with open(path, "w") as f:
        json.dump({"traceEvents": events, "displayTimeUnit": "ns"}, f)
    return len(events)


_COLORS = {"fill": (66, 133, 244), "full": (244, 160, 0)}


def _png(width, height, rows):
    raw = b"".join(b"\0" + bytes(row) for row in rows)
    chunk = lambda kind, data: (struct.pack(">I", len(data)) + kind + data +  # noqa: E731
                                struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2,
                                                              0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def write_occupancy_png(records, names, path, cta=0, width=1600, row_height=14):
    """PNG: one row per (pipeline, stage) of CTA ``cta``, time left to right;
    blue while the producer fills the stage (acquire -> commit), orange while
    it is full (commit -> last release). Returns (rows, time span in ns)."""
    sp = [s for s in spans(records) if s[2] == cta]
    if not sp:
        raise ValueError(f"no complete stage intervals for CTA {cta}")
    keys = sorted({(s[0], s[1]) for s in sp})
    t0 = min(s[4] for s in sp)
    t1 = max(s[5] for s in sp)
    scale = (width - 1) / max(1, t1 - t0)
    height = row_height * len(keys)
    rows = [bytearray([255] * (3 * width)) for _ in range(height)]
    for p, stage, _, kind, a, b, _ in sp:
        y = keys.index((p, stage)) * row_height
        x0, x1 = int((a - t0) * scale), max(int((a - t0) * scale) + 1, int((b - t0) * scale))
        for yy in range(y + 1, y + row_height - 1):
            for x in range(x0, min(x1, width)):
                rows[yy][3 * x:3 * x + 3] = bytes(_COLORS[kind])
    for i in range(1, len(keys)):  # row separators
        rows[i * row_height] = bytearray([200] * (3 * width))
    with open(path, "wb") as f:
        f.write(_png(width, height, rows))
    return [f"{names[p] if p < len(names) else p}[{s}]" for p, s in keys], t1 - t0
