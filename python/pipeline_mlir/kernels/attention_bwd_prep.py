"""The attention backward's preprocess, on register rows: for every row
(batch b, query s, head h) of O and dO,

    dpsum[b, h, s]    = sum over d of dO * O          (fp32)
    lse_log2[b, h, s] = LSE[b, h, s] * log2(e), or +inf where LSE is -inf

written into the (batch, heads, padded rows) buffers the main kernel
(``attention_bwd``) reads. A warp per row (``Rows``: 16-byte loads of O and
dO, the product summed in fp32, a warp reduction); lane 0 converts the LSE
and writes both values. Rows past ``seqlen`` (the padding of the last query
block) are the host's to fill (dPsum 0, LSE +inf).

One pass over O and dO: in torch, the same takes upcasts, a product and a
sum over fp32 temporaries, about eight times the bytes.
"""

from mlir.dialects import arith

from pipeline_mlir.kernel import GlobalPtr, Int32, Kernel, Rows
from pipeline_mlir.kernel.memory import load, store
from pipeline_mlir.kernel.values import f32

LOG2_E = 1.4426950408889634
WARPS_PER_CTA = 4          # ops/attention_bwd_host.py sizes the grid by it


def build(head_dim, chip="sm_90a"):
    """The preprocess for rows of ``head_dim`` bf16 values: parameters
    ``(o, do, lse, lse_log2, dpsum, rows, heads, seqlen, padded)``, any
    grid (a grid-stride loop over ``rows = batch * seqlen * heads``)."""
    rows = Rows(head_dim, "bf16", threads=32)
    k = Kernel(f"attn_bwd_prep_d{head_dim}", chip=chip, block_dim=32 * WARPS_PER_CTA,
               params={"o": GlobalPtr(), "do": GlobalPtr(), "lse": GlobalPtr(align=4),
                       "lse_log2": GlobalPtr(align=4), "dpsum": GlobalPtr(align=4),
                       "rows": Int32(), "heads": Int32(), "seqlen": Int32(),
                       "padded": Int32()})
    with k:
        o, do, lse, lse_log2, dpsum, m, heads, seqlen, padded = k.args
        lane = k.lane_idx()
        for row in rows.grid_stride(k, m):
            total = (rows.load(o, row) * rows.load(do, row)).sum()
            # row = (b * seqlen + s) * heads + h
            h = row % heads
            bs = row // heads
            s = bs % seqlen
            bh = (bs // seqlen) * heads + h
            with k.if_(lane == 0):
                x = load(lse, f32(), bh * seqlen + s)
                neg_inf = arith.cmpf(arith.CmpFPredicate.OEQ, x,
                                     arith.constant(f32(), float("-inf")))
                scaled = arith.mulf(x, arith.constant(f32(), LOG2_E))
                out = arith.select(neg_inf, arith.constant(f32(), float("inf")), scaled)
                dst = bh * padded + s
                store(out, lse_log2, dst)
                store(total, dpsum, dst)
    k.rows = rows
    return k



def meta(k):
    """What the host launcher needs of the built preprocess ``k``."""
    return {"signature": [p.kind for _, p in k.params],
            "params": [name for name, _ in k.params], "name": k.name,
            "threads": 32 * WARPS_PER_CTA, "smem": k.smem_bytes,
            "head_dim": k.rows.n, "warps_per_cta": WARPS_PER_CTA}
