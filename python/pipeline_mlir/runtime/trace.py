"""Host side of pipeline tracing (``pipeline_mlir.trace.instrument``):
arm a loaded module's trace buffer, read the records back, and write them
as a Chrome / Perfetto trace (``chrome://tracing``, ui.perfetto.dev) and as
a PNG of stage occupancy over time.

    traced, names = pipeline_mlir.trace.instrument(kernel.module)  # compile side
    mod = runtime.Module(compiler.to_cubin(traced))
    tb = TraceBuffer(mod, pipelines=len(names), ctas=grid, warps_per_cta=block // 32)
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


RECORD_DTYPE = [("t", "<u8"), ("info", "<u4"), ("cta", "<u4")]


def decode(raw, pipelines):
    """Records from the whole buffer's bytes, by time (``pipelines``: how
    many pipelines the instrumented module has, ``len(names)``). Slots
    whose timestamp is 0 were not written."""
    import numpy as np

    cap, per_cta, ctas = struct.unpack_from("<III", raw)
    n = per_cta * ctas * pipelines * len(VERBS) * cap
    recs = np.frombuffer(raw, dtype=RECORD_DTYPE, count=n, offset=HEADER_BYTES)
    recs = recs[recs["t"] != 0]
    recs = recs[np.argsort(recs["t"], kind="stable")]
    return [TraceRecord(int(t), VERBS[int(info) & 3], (int(info) >> 2) & 63,
                        (int(info) >> 8) & 0xFF, int(info) >> 16, int(cta))
            for t, info, cta in recs.tolist()]


class TraceBuffer:
    """The device buffer behind a traced module's ``__pipeline_trace_buffer``:
    ``per_verb`` records for each verb of each of ``pipelines`` pipelines
    in each of ``warps_per_cta`` warps of ``ctas`` CTAs (a record's slot is
    its state's count; later counts, warps and CTAs record nothing)."""

    def __init__(self, module, pipelines, ctas, warps_per_cta, per_verb=4096):
        for name, v in (("pipelines", pipelines), ("ctas", ctas),
                        ("warps_per_cta", warps_per_cta), ("per_verb", per_verb)):
            if not isinstance(v, int) or not 0 < v < 2**31:
                raise ValueError(f"{name} must be a positive int below 2^31, got {v!r}")
        g = module._global(BUFFER_SYMBOL)
        if g is None:
            raise ValueError(f"{module.label} has no {BUFFER_SYMBOL}: compile the module "
                             "returned by pipeline_mlir.trace.instrument")
        self.module, self.pipelines = module, pipelines
        self.header = struct.pack("<IIII", per_verb, warps_per_cta, ctas, 0)
        self.nbytes = HEADER_BYTES + (ctas * warps_per_cta * pipelines * len(VERBS) *
                                      per_verb * RECORD_BYTES)
        self.buffer = DeviceBuffer(self.nbytes, module.device)
        self.reset()
        ptr = ctypes.c_uint64(self.buffer.address)
        _driver.check(_driver.cuda().cuMemcpyHtoD(g[0], ctypes.addressof(ptr), 8),
                      "cuMemcpyHtoD(trace buffer)")

    def reset(self):
        """Forget the records (before the next launch): zero the buffer."""
        drv = _driver.cuda()
        _driver.check(drv.cuMemsetD8(self.buffer.address, 0, self.nbytes), "cuMemsetD8(trace)")
        self.buffer.copy_bytes_from_host(self.header)

    def records(self):
        """The records of the launches since the last reset, by time."""
        raw = ctypes.create_string_buffer(self.nbytes)
        _driver.check(_driver.cuda().cuMemcpyDtoH(ctypes.addressof(raw), self.buffer.address,
                                                  self.nbytes), "cuMemcpyDtoH(trace)")
        return decode(raw.raw, self.pipelines)

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
