"""Pipeline tracing, deviceless: instrumentation adds one record per stage
verb and nothing when off; records decode into fill/full intervals, a
Chrome trace and a PNG. The GPU demonstration is benchmarks/trace/."""

import json
import os
import struct
import sys
import zlib

import pytest

from pipeline_mlir import compiler, trace
from pipeline_mlir.runtime import trace as rtrace

EXAMPLES = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
sys.path.insert(0, EXAMPLES)
import tma_reduction  # noqa: E402


def test_instrument_records_every_verb_and_nothing_when_off():
    k = tma_reduction.build()
    traced, names = trace.instrument(k.module)
    assert names == ["p0"]
    plain_ptx = compiler.to_ptx(k.module, chip="sm_90a")
    ptx = compiler.to_ptx(traced, chip="sm_90a")
    assert "globaltimer" not in plain_ptx and trace.BUFFER_SYMBOL not in plain_ptx
    # acquire, commit, wait, release: one record site each.
    assert ptx.count("%globaltimer") == 4
    assert f".visible .global .align 8 .u64 {trace.BUFFER_SYMBOL}" in ptx
    assert "atom." not in ptx          # slots from the state's count: stores only
    # The original module is untouched.
    assert trace.BUFFER_SYMBOL not in str(k.module)


def test_instrument_names_pipelines():
    import hopper_gemm

    traced, names = trace.instrument(hopper_gemm.build().module)
    assert names[0] == "ab"
    assert str(traced).count("nvvm.read.ptx.sreg.globaltimer") >= 6


def _raw(records, per_verb=8, warps_per_cta=2, ctas=1, pipelines=1):
    """The buffer as the device writes it: header, then per (warp, pipeline,
    verb) ``per_verb`` slots indexed by the state's count (here: the order
    of the records of that row)."""
    rows = {}
    for t, v, p, s, w, c in records:
        row = ((c * warps_per_cta + w) * pipelines + p) * 4 + v
        rows.setdefault(row, []).append(
            struct.pack("<QII", t, v | (p << 2) | (s << 8) | (w << 16), c))
    nrows = ctas * warps_per_cta * pipelines * 4
    body = b"".join(b"".join(rows.get(r, [])) + bytes(16 * (per_verb - len(rows.get(r, []))))
                    for r in range(nrows))
    return struct.pack("<IIII", per_verb, warps_per_cta, ctas, 0) + body


ACQ, COMMIT, WAIT, REL = range(4)
RECS = [  # time, verb, pipeline, stage, warp, cta
    (1000, ACQ, 0, 0, 0, 0), (1100, COMMIT, 0, 0, 0, 0),
    (1200, WAIT, 0, 0, 1, 0), (1300, REL, 0, 0, 1, 0),
    (1150, ACQ, 0, 1, 0, 0), (1250, COMMIT, 0, 1, 0, 0),
    (1400, ACQ, 0, 0, 0, 0), (1450, COMMIT, 0, 0, 0, 0),
    (1500, WAIT, 0, 1, 1, 0), (1600, REL, 0, 1, 1, 0),
]


def test_decode_and_spans():
    recs = rtrace.decode(_raw(RECS), 1)
    assert [r.time_ns for r in recs] == sorted(t for t, *_ in RECS)
    assert recs[0] == rtrace.TraceRecord(1000, "producer.acquire", 0, 0, 0, 0)
    sp = sorted(rtrace.spans(recs), key=lambda s: (s[1], s[4]))
    assert (0, 0, 0, "fill", 1000, 1100, 0) in sp
    # Stage 0 is full from its commit until the producer re-acquires it.
    assert (0, 0, 0, "full", 1100, 1400, 0) in sp
    # Stage 1: no later acquire, so full until its last release.
    assert (0, 1, 0, "full", 1250, 1600, -1) in sp


def test_chrome_trace_and_png(tmp_path):
    recs = rtrace.decode(_raw(RECS), 1)
    n = rtrace.write_chrome_trace(recs, ["ab"], tmp_path / "t.json")
    data = json.load(open(tmp_path / "t.json"))
    spans = [e for e in data["traceEvents"] if e["ph"] == "X"]
    assert n == len(data["traceEvents"]) and spans
    assert {"name": "ab fill stage 0", "ts": 0.0, "dur": 0.1} == \
        {k: spans[0][k] for k in ("name", "ts", "dur")}
    rows, span_ns = rtrace.write_occupancy_png(recs, ["ab"], tmp_path / "o.png", width=100)
    assert rows == ["ab[0]", "ab[1]"] and span_ns == 600
    png = (tmp_path / "o.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    width, height = struct.unpack(">II", png[16:24])
    assert (width, height) == (100, 28)
    idat = png[png.index(b"IDAT") + 4:png.index(b"IEND") - 8]
    assert len(zlib.decompress(idat)) == height * (1 + 3 * width)


def test_empty_slots_are_skipped():
    assert rtrace.decode(_raw([]), 1) == []
    assert len(rtrace.decode(_raw(RECS[:3], per_verb=4, ctas=2), 1)) == 3


def test_trace_buffer_needs_an_instrumented_module():
    class Plain:
        label = "plain.cubin"

        def _global(self, symbol):
            return None

    with pytest.raises(ValueError, match="compile the module returned by"):
        rtrace.TraceBuffer(Plain(), pipelines=1, ctas=1, warps_per_cta=4)
    with pytest.raises(ValueError, match="per_verb must be a positive int"):
        rtrace.TraceBuffer(Plain(), pipelines=1, ctas=1, warps_per_cta=4, per_verb=0)
