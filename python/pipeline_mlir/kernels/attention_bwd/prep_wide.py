"""The attention backward's preprocess with every lane loading: the same
two outputs as ``attention_bwd_prep`` (``dpsum = sum over d of dO * O``
and ``lse_log2 = LSE * log2(e)``, +inf where LSE is -inf, into the
(batch, heads, padded rows) buffers), the same parameters, but

* a row of ``d`` bf16 values is ``G = d / 8`` lanes of 16 bytes (16 lanes
  at d 128, 8 at d 64), so a warp covers ``P = 32 / G`` rows per access
  (the old kernel's warp per row left 16 or 24 of its lanes idle);
* each lane holds ``slots`` rows at once: all ``2 * slots`` 16-byte loads
  of O and dO, and the LSE loads of the same rows, are issued before any
  arithmetic, so a warp has ``slots * P`` rows in flight (not one row,
  then its LSE after the reduction);
* with ``order="bhs"`` a warp's rows are consecutive in the outputs'
  (batch, head, query) order: the LSE loads and the two stores of a warp
  cover contiguous words (O and dO rows are then ``heads * d`` apart, each
  a whole 128- or 256-byte segment); ``order="bsh"`` walks O's order, the
  old kernel's.

The sum is the old kernel's, bit for bit: each lane sums its 8 products
in the same pairwise tree (``mul.rn`` and ``add.rn``, no contraction),
then ``shfl.sync.bfly`` with masks ``G/2 .. 1`` inside the lane group.
The old kernel's butterfly ran over the whole warp, but its lanes past
``G`` held 0 and its masks of ``G`` and up only added them (``x + 0 ==
x``), so its tree over the row's lanes is this one (a row whose sum is -0
comes back +0 from the old kernel; the main kernel subtracts it, so the
two agree there too).

A tile of ``slots * P`` rows per warp and iteration, a grid-stride loop
over tiles; rows past ``rows`` (the last tile's) load row ``rows - 1``
again and store nothing. Rows past ``seqlen`` in the padded buffers are
the host's, as for the old kernel. :func:`lane_rows` is the addressing as
numpy-checkable Python.
"""

import mlir.ir as ir
from mlir.dialects import arith, llvm

from pipeline_mlir.kernel import GlobalPtr, Int32, Kernel
from pipeline_mlir.kernel.f32_math import shfl_xor
from pipeline_mlir.kernel.memory import load, store
from pipeline_mlir.kernel.row_values import _load_f32, _tree
from pipeline_mlir.kernel.values import f32

LOG2_E = 1.4426950408889634
VEC = 8                    # bf16 values per 16-byte load
WARP = 32
ORDERS = ("bhs", "bsh")
# The host launches a CTA per 8 warp tiles up to this many CTAs an SM
# (48 registers: 5 CTAs of 8 warps resident): the block scheduler, not a
# grid-stride loop, balances the tiles over the SMs at the sizes measured.
GRID_CAP_PER_SM = 64


def geometry(head_dim, slots):
    """(lanes per row G, rows per warp access P, rows per warp tile)."""
    if head_dim % VEC or WARP % (head_dim // VEC) or head_dim // VEC > WARP:
        raise ValueError(f"prep_wide: head_dim {head_dim} must be 8 * a power of two <= 256")
    g = head_dim // VEC
    p = WARP // g
    if not isinstance(slots, int) or not 1 <= slots <= g:
        raise ValueError(f"prep_wide: slots must be in 1..{g} (lane r of a row's group "
                         f"stores slot r), got {slots!r}")
    return g, p, slots * p


def lane_rows(head_dim, slots, warp_tile, lane, rows):
    """The rows lane ``lane`` loads in tile ``warp_tile`` (a list over
    slots of (row, stored)): ``row`` in the walk's order (clamped to
    ``rows - 1``), ``stored`` whether this lane writes that row's outputs.
    The kernel computes exactly this (``build``)."""
    g, p, tile = geometry(head_dim, slots)
    group, j = lane // g, lane % g
    out = []
    for r in range(slots):
        row = warp_tile * tile + r * p + group
        out.append((min(row, rows - 1), row < rows and j == r))
    return out


def row_addresses(row, heads, seqlen, padded, order):
    """(row of O and dO, index of the LSE word, index of the outputs' word)
    of walk position ``row``: Python ints (the tests' model) or the
    kernel's i32 Scalars (``build`` calls this)."""
    if order == "bhs":                        # row = (b * heads + h) * seqlen + s
        s = row % seqlen
        bh = row // seqlen
        return ((bh // heads) * seqlen + s) * heads + bh % heads, row, bh * padded + s
    h = row % heads                           # row = (b * seqlen + s) * heads + h
    bs = row // heads
    s = bs % seqlen
    bh = (bs // seqlen) * heads + h
    return row, bh * seqlen + s, bh * padded + s


def columns(head_dim, lane):
    """The columns of its row lane ``lane`` loads (8 contiguous)."""
    g = head_dim // VEC
    return list(range((lane % g) * VEC, (lane % g) * VEC + VEC))


def _byte_ptr(base, off64):
    return llvm.getelementptr(base.type, base, [off64.ir_value], [-2147483648],
                              ir.IntegerType.get_signless(8), 0)


def build(head_dim, slots=4, order="bhs", warps=8, chip="sm_90a"):
    """The preprocess, parameters ``(o, do, lse, lse_log2, dpsum, rows,
    heads, seqlen, padded)`` as ``attention_bwd_prep.build``'s; any grid."""
    if order not in ORDERS:
        raise ValueError(f"prep_wide: order must be one of {ORDERS}, got {order!r}")
    g, p, tile = geometry(head_dim, slots)
    k = Kernel(f"attn_bwd_prepw_d{head_dim}_s{slots}_{order}", chip=chip,
               block_dim=WARP * warps,
               params={"o": GlobalPtr(), "do": GlobalPtr(), "lse": GlobalPtr(align=4),
                       "lse_log2": GlobalPtr(align=4), "dpsum": GlobalPtr(align=4),
                       "rows": Int32(), "heads": Int32(), "seqlen": Int32(),
                       "padded": Int32()})
    with k:
        o, do, lse, lse_log2, dpsum, m, heads, seqlen, padded = k.args
        lane = k.lane_idx()
        group, j = lane // g, lane % g
        tiles = (m + (tile - 1)) // tile
        first = k.block_idx() * warps + k.warp_idx()
        for t in k.range(first, tiles, k.grid_dim() * warps):
            base = t * tile + group
            loaded = []
            for r in range(slots):
                walk = base + r * p
                row = walk.min(m - 1)
                orow, lidx, dst = row_addresses(row, heads, seqlen, padded, order)
                off = (orow.to(64) * head_dim + (j * VEC).to(64)) * 2
                a = _load_f32(_byte_ptr(o, off), ir.BF16Type.get(), 2, VEC)
                b = _load_f32(_byte_ptr(do, off), ir.BF16Type.get(), 2, VEC)
                x = load(lse, f32(), lidx)
                loaded.append((walk, dst, a, b, x))
            for r, (walk, dst, a, b, x) in enumerate(loaded):
                v = _tree([arith.mulf(u, w) for u, w in zip(a, b)], arith.addf)
                mask = g // 2
                while mask:
                    v = arith.addf(shfl_xor(v, mask), v)
                    mask //= 2
                with k.if_((j == r) & (walk < m)):
                    neg_inf = arith.cmpf(arith.CmpFPredicate.OEQ, x,
                                         arith.constant(f32(), float("-inf")))
                    scaled = arith.mulf(x, arith.constant(f32(), LOG2_E))
                    out = arith.select(neg_inf, arith.constant(f32(), float("inf")), scaled)
                    store(out, lse_log2, dst)
                    store(v, dpsum, dst)
    k.prep_geometry = dict(head_dim=head_dim, slots=slots, order=order, warps=warps,
                           rows_per_warp=tile)
    return k


def meta(k):
    """What the host launcher needs of the built preprocess ``k``
    (``attention_bwd_prep.meta``'s keys, ``rows_per_warp`` and
    ``grid_cap_per_sm`` added: the host sizes the grid by warps of that
    many rows, up to that many CTAs an SM)."""
    geo = k.prep_geometry
    return {"signature": [p.kind for _, p in k.params],
            "params": [name for name, _ in k.params], "name": k.name,
            "threads": WARP * geo["warps"], "smem": k.smem_bytes,
            "head_dim": geo["head_dim"], "warps_per_cta": geo["warps"],
            "rows_per_warp": geo["rows_per_warp"], "slots": geo["slots"],
            "order": geo["order"], "grid_cap_per_sm": GRID_CAP_PER_SM}
