"""RMSNorm over the last dimension of an M x N tensor, on register rows.

    python examples/rmsnorm.py [--n 4096] [--dtype bf16] [--out DIR] [--print-ir]

``y = x * rsqrt(mean(x^2) + eps) * weight`` (``torch.nn.functional.rms_norm``),
the input, weight and output in ``dtype`` and the math in fp32. The weight
is loaded once per CTA, before the loop over rows, in the layout of a row
(``Rows.load_columns``): each thread holds the columns it multiplies. A
warp per row up to 2048 columns, a CTA beyond, long rows through a ring
of shared-memory stages (two: measured), as examples/row_softmax.py.

``build(n, dtype)`` returns the Kernel; ``rms_norm(x, weight, eps)`` runs it
on torch tensors (compiling on first use where MLIR is installed);
``RmsNorm(cubin, meta)`` runs a compiled one where only the runtime is.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rows_host  # noqa: E402


# Stages of the RMSNorm's ring at most: on an H200 two stages ran at 0.88-0.90
# of copy bandwidth from 8192 to 16384 columns, the softmax's deeper ring
# (three or four) at 0.85-0.87 (benchmarks/rows/bench_rows.py --alt).
RING_STAGES = 2


def build(n=4096, dtype="bf16", threads=None, stages=None, parts=None, store=None,
          chip="sm_90a", name=None):
    """The RMSNorm kernel for rows of ``n`` elements of ``dtype``:
    parameters ``(src, weight, dst, m, eps)``, any grid; ``threads`` and
    ``stages`` as in examples/row_softmax.py (the ring: at most
    ``RING_STAGES`` stages, a part and one more for a row in parts)."""
    from pipeline_mlir.kernel import Float32, GlobalPtr, Int32, Kernel, RowRing, row_plan

    rows, parts, stages = row_plan(n, dtype, threads, stages, most=RING_STAGES, parts=parts)
    block = 128 if rows.per_warp else RowRing.block_threads(rows) if stages else rows.threads
    k = Kernel(name or f"rmsnorm_{dtype}_{n}", chip=chip, block_dim=block,
               params={"src": GlobalPtr(), "weight": GlobalPtr(), "dst": GlobalPtr(),
                       "m": Int32(), "eps": Float32()})
    with k:
        src, weight, dst, m, eps = k.args
        if stages:
            ring = RowRing(rows, k, stages, parts, store=store or "global")
            ring.produce(src, m, dst=dst)              # the producer warp
            with ring.consumers():
                # the weight once per CTA, reused by every row, one Columns per part
                w = [rows.load_columns(_at(weight, p * rows.n * rows.elem_bytes))
                     for p in range(parts)]
                for row, stage in ring.rows(m):
                    # read twice from shared memory: x need not live across the sum
                    scale = rsqrt_mean(stage.sum(lambda x: x * x), n, eps)
                    for p in range(parts):
                        stage.store(stage.load(p) * scale * w[p], dst, row, p)
        else:
            w = rows.load_columns(weight)
            for row in rows.grid_stride(k, m):
                x = rows.load(src, row)                # out-of-row values: 0
                rows.store(x * rsqrt_mean((x * x).sum(), n, eps) * w, dst, row)
    k.rows, k.parts, k.stages = rows, parts, stages
    k.store = ring.store_kind if stages else "global"
    return k


def rsqrt_mean(total, n, eps):
    """``rsqrt(total / n + eps)``: the RMSNorm's scale from the row's sum of squares."""
    from pipeline_mlir.kernel.rows import rsqrt

    return rsqrt(total * (1.0 / n) + eps)


def _at(ptr, byte_offset):
    """``ptr + byte_offset`` (a global pointer)."""
    from pipeline_mlir.kernel import Rows, to_value

    return Rows._at(to_value(ptr), byte_offset)


class RmsNorm(rows_host.RowKernel):
    """A compiled RMSNorm (cubin and ``meta``: ``rows_host.meta_of``) as a
    function of torch tensors; needs the runtime and torch, no MLIR."""

    def __call__(self, x, weight, eps=1e-6, out=None):
        rows = rows_host.check_rows(x, self.meta, "rms_norm")
        w = rows_host.check_rows(weight, self.meta, "rms_norm weight")
        y = rows_host.output_like(rows, out, x.shape, "rms_norm")
        m = rows.shape[0]
        if m:
            self.fn(rows, w, y, m, float(eps),
                    grid=rows_host.grid_for(m, self.meta, self.fn, x.device), sync=False)
        return y.view(x.shape)


_COMPILED = {}


def rms_norm(x, weight, eps=1e-6, out=None):
    """``F.rms_norm(x, (N,), weight, eps)`` for CUDA bf16 / f16 / f32 tensors,
    with the kernel for the row length built and compiled on first use."""
    dtype = {v: k for k, v in rows_host.DTYPES.items()}[str(x.dtype).split(".")[-1]]
    key = (x.shape[-1], dtype)
    if key not in _COMPILED:
        k = build(*key)
        _COMPILED[key] = RmsNorm(k.compile(), rows_host.meta_of(k.rows, k))
    return _COMPILED[key](x, weight, eps, out)


if __name__ == "__main__":
    import argparse

    from _common import main

    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--dtype", default="bf16", choices=sorted(rows_host.DTYPES))
    opts, _ = ap.parse_known_args()
    sys.exit(main(build(opts.n, opts.dtype), "rmsnorm"))
