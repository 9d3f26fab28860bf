"""Softmax over the last dimension of an M x N tensor, on register rows.

    python examples/row_softmax.py [--n 4096] [--dtype bf16] [--out DIR] [--print-ir]

Each row is read once and written once; the math is fp32 and numerically
stable: ``max``, ``exp2((x - max) log2 e)`` (one ``fma`` and one
``ex2.approx`` per element), ``sum``, and one reciprocal per row. A warp
handles a row up to 2048 columns (its reductions are five shuffles), a
CTA beyond (``rows.row_threads``: a warp's registers cannot hold the row;
the CTA reduces through shared memory). A CTA per row takes its rows
through a ring of shared-memory stages (``RowRing``: a producer warp
bulk-copies the next rows while the row's threads reduce and store this
one) where ``ring_stages`` says so, a row longer than 512 threads hold
in parts. A row longer than 48 KiB is split over a cluster of two or four
CTAs (``row_cluster``), each taking its slice of every row through its
own ring, the row's max and sum exchanged through distributed shared
memory. The kernel is built per row length N, so only a ragged last chunk
is masked.

``build(n, dtype)`` returns the Kernel; ``softmax(x)`` runs it on a torch
tensor (building and compiling it on first use where MLIR is installed);
``RowSoftmax(cubin, meta)`` runs a compiled one where only the runtime is.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rows_host  # noqa: E402

LOG2_E = 1.4426950408889634


def build(n=4096, dtype="bf16", threads=None, stages=None, stream=None, parts=None,
          store=None, cluster=None, chip="sm_90a", name=None):
    """The softmax kernel for rows of ``n`` elements (default 4096) of ``dtype``:
    parameters ``(src, dst, m)``, any grid (a grid-stride loop over the
    ``m`` rows); ``threads`` per row (of a part) defaults to ``row_threads``,
    ``stages`` of the shared-memory ring to ``ring_stages`` (0: no ring,
    each row loaded straight into registers); ``row_plan`` says which.
    ``stream`` (a ring only): read the row twice from shared memory (online
    statistics, then the output) rather than hold its exponentials in
    registers; by default for a row in parts, whose exponentials do not
    fit. On an H200 (bf16, benchmarks/rows/bench_rows.py --alt) holding
    them was as fast or faster from 12288 to 32768 columns (16384: 0.91
    of a copy's bandwidth held, 0.88 streamed). ``cluster``: CTAs a row
    is split over (default ``row_cluster`` when no plan is asked for; 1:
    the row in one CTA). ``store="bulk"``: the output over the row in its
    stage, bulk-copied out by the producer (measured, off by default:
    RowRing)."""
    from pipeline_mlir.kernel import GlobalPtr, Int32, Kernel, RowRing, row_cluster, row_plan

    if cluster is None:
        cluster = row_cluster(n, dtype) if threads is None and stages is None and \
            parts is None else 1
    if cluster > 1:                      # each CTA of a cluster a slice of each row
        if n % cluster:
            raise ValueError(f"row_softmax.build: {n} columns do not split over {cluster} CTAs")
        rows, parts, stages = row_plan(n // cluster, dtype, threads, stages, parts=parts)
        if not stages:
            raise ValueError(f"row_softmax.build: a slice of {n // cluster} columns takes no "
                             "ring; a row split over a cluster needs one")
    else:
        rows, parts, stages = row_plan(n, dtype, threads, stages, parts=parts)
    if stream is None:
        stream = parts > 1
    stream = bool(stream and stages)
    # A warp per row: 4 warps per CTA, 4 rows at once; a CTA per row: the
    # row's threads, and with a ring a producer warp.
    block = 128 if rows.per_warp else RowRing.block_threads(rows) if stages else rows.threads
    k = Kernel(name or f"row_softmax_{dtype}_{n}", chip=chip, block_dim=block,
               cluster_dim=cluster if cluster > 1 else None,
               params={"src": GlobalPtr(), "dst": GlobalPtr(), "m": Int32()})
    with k:
        src, dst, m = k.args
        if stages:
            ring = RowRing(rows, k, stages, parts, store=store or "global", cluster=cluster,
                           exchanges=2)
            ring.produce(src, m, dst=dst)        # the producer warp: rows into the ring
            with ring.consumers():
                for row, stage in ring.rows(m):
                    if stream:
                        _softmax_streamed(stage, dst, row)
                    else:
                        _softmax_row(rows, stage.load(fill=float("-inf")), dst, row, stage)
            ring.cluster_end()
        else:
            for row in rows.grid_stride(k, m):
                _softmax_row(rows, rows.load(src, row, fill=float("-inf")), dst, row)
    k.rows, k.parts, k.stages, k.stream = rows, parts, stages, stream
    k.store = ring.store_kind if stages else "global"
    k.cluster = cluster
    return k


def _softmax_row(rows, x, dst, row, stage=None):
    """Store the softmax of the row ``x`` (its out-of-row values -inf),
    through ``stage`` (a ring's) where given."""
    from pipeline_mlir.kernel.rows import reciprocal

    top = x.max()
    p = x.fma(LOG2_E, -(top * LOG2_E)).exp2()     # exp2((x - max) log2 e)
    (stage or rows).store(p * reciprocal(p.sum()), dst, row)


def _softmax_streamed(stage, dst, row):
    """The softmax of a row in the ring's stage(s), read twice from shared
    memory: the row's max and sum of exponentials in one pass (online, a
    chunk of values live at a time), then each part's output."""
    from pipeline_mlir.kernel.rows import reciprocal

    top, total = stage.max_sum_exp2(LOG2_E)
    scale, shift = reciprocal(total), -(top * LOG2_E)
    for part in range(stage.parts):
        x = stage.load(part, fill=float("-inf"))
        stage.store(x.fma(LOG2_E, shift).exp2() * scale, dst, row, part)


class RowSoftmax(rows_host.RowKernel):
    """A compiled softmax (cubin and ``meta``: ``rows_host.meta_of``) as a
    function of torch tensors; needs the runtime and torch, no MLIR."""

    def __call__(self, x, out=None):
        rows = rows_host.check_rows(x, self.meta, "softmax")
        y = rows_host.output_like(rows, out, x.shape, "softmax")
        m = rows.shape[0]
        if m:
            self.fn(rows, y, m, grid=rows_host.grid_for(m, self.meta, self.fn, x.device),
                    sync=False)
        return y.view(x.shape)


_COMPILED = {}


def softmax(x, out=None):
    """``torch.softmax(x, -1)`` for a CUDA bf16 / f16 / f32 tensor, with the
    kernel for its row length built and compiled on first use (MLIR needed)."""
    dtype = {v: k for k, v in rows_host.DTYPES.items()}[str(x.dtype).split(".")[-1]]
    key = (x.shape[-1], dtype)
    if key not in _COMPILED:
        k = build(*key)
        _COMPILED[key] = RowSoftmax(k.compile(), rows_host.meta_of(k.rows, k))
    return _COMPILED[key](x, out)


if __name__ == "__main__":
    import argparse

    from _common import main

    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--dtype", default="bf16", choices=sorted(rows_host.DTYPES))
    opts, _ = ap.parse_known_args()
    sys.exit(main(build(opts.n, opts.dtype), "row_softmax"))
