"""The simulator's reports on a row ring name the user's lines.

A :class:`RowRing` emits its ops (the stage loads and stores, the bulk
store out, the block reductions) several calls below the user's code; they
carry the user's line of the call that emitted them (``user_line`` on the
ring's methods, ``UserLine`` around the stretches of ``RowRing.rows``
between its yields), so a finding on them points at the kernel's
``ring.produce(...)`` and ``stage.store(...)`` lines, not at ``unknown`` or
the enclosing ``for``. Planted in a ring whose rows leave through their
stage (``store="bulk"``): the consumers' fence for the async proxy dropped,
so the producer's bulk store reads the row's generic writes unfenced
(``smem-race``).
"""

from pipeline_mlir.kernel import GlobalPtr, Int32, Kernel, RowRing, row_plan

from _held_out_bugs import _next_line


def _ring_kernel():
    rows, _, stages = row_plan(8192, "bf16", stages=2)
    k = Kernel("ring_lines", block_dim=RowRing.block_threads(rows),
               params={"src": GlobalPtr(), "dst": GlobalPtr(), "m": Int32()})
    lines = {}
    with k:
        src, dst, m = k.args
        ring = RowRing(rows, k, stages, store="bulk")
        lines["produce"] = _next_line()
        ring.produce(src, m, dst=dst)
        with ring.consumers():
            for row, stage in ring.rows(m):
                x = stage.load()
                lines["store"] = _next_line()
                stage.store(x * 2.0, dst, row)
    return k, lines, {"m": 2 * stages + 1}


def _simulate():
    k, lines, args = _ring_kernel()
    return k.simulate(args, schedules=2, check=False), lines


def test_the_unplanted_ring_is_clean():
    r, _ = _simulate()
    assert r.ok, str(r)


def test_unfenced_row_names_the_store_and_the_bulk_store_lines(monkeypatch):
    monkeypatch.setattr(RowRing, "_fence", lambda self: None)
    r, lines = _simulate()
    assert {f.kind for f in r.findings} == {"smem-race"}, str(r)
    f = r.findings[0]
    produce, store = (f"{__file__}:{lines[x]}:" for x in ("produce", "store"))
    assert (f"nvvm.cp.async.bulk.global.shared.cta at {produce}" in f.message
            and f"llvm.store at {store}" in f.message), f.message
    assert any(produce in w for w in f.where) and any(store in w for w in f.where), f.where

