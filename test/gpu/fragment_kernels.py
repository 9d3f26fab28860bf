"""Kernels of the register-fragment layer (python/pipeline_mlir/kernel/fragment.py)
for the GPU suite, and for the CPU tests that compile them
(test/python/test_fragment_kernels.py).

Each kernel is one warpgroup (128 threads, one CTA). A tile is a row-major
``64 x n`` f32 array in global memory; thread ``(warp w, lane l)`` loads
value ``i`` of a Fragment from element ``Fragment.thread_origin(w, l) +
Fragment.element_offset(i)`` and stores results the same way, so a result
that comes back in the right place is evidence for the documented layout
(the ``thread`` op writes each element's owner, checked against the PTX ISA
formula by the GPU test).

- ``ops_kernel(n)``: every elementwise op, reduction, fill, float-Scalar
  computation, in-place update and carried value of FRAGMENT_OPS and
  ROW_OPS, one result tile (or row vector) each;
- ``convert_kernel(n)``: ``to_packed`` into each of CONVERT_DTYPES;
- ``operand_a_kernel(n)``: the registers of ``to_operand_a`` for each of
  OPERAND_A_DTYPES, written out raw;
- ``mma_rs_kernel(layout_b, k)``: ``A (64 x k, from registers) x B`` with
  ``WarpgroupMma.mma_rs``, B copied into shared memory as ``layout_b`` says.

The host side (torch references, the PTX ISA register layouts) is in
test/gpu/fragment_reference.py; nothing here needs a GPU.
"""

from pipeline_mlir.kernel import (Float32, GlobalPtr, Kernel, Scalar, fence_view_async_shared,
                                  load, store, wgmma)
from pipeline_mlir.kernel.fragment import Fragment, RowVector
from pipeline_mlir.kernel.values import f32, i32
from pipeline_mlir.layout import OperandLayout

M = 64
THREADS = 128
# Where a row vector lands: rows[op][row][lane % 4], every lane of the quad
# writing its own copy, so that a quad whose threads disagree is caught.
QUAD = 4


class Tile:
    """This thread's place in a 64 x n tile: the warp inside the warpgroup,
    the lane, and the first row and column it holds."""

    def __init__(self, k, n):
        self.n = n
        self.warp = k.warp_idx() % 4
        self.lane = k.lane_idx()
        self.row0, self.col0 = Fragment.thread_origin(self.warp, self.lane)

    def index(self, i, tile=0):
        """Element index (row-major, tile ``tile`` of several) of value i."""
        r, c = Fragment.element_offset(i)
        return (self.row0 + r) * self.n + self.col0 + (c + tile * M * self.n)

    def load(self, ptr):
        return Fragment(self.n, values=[load(ptr, f32(), self.index(i))
                                        for i in range(self.n // 2)])

    def store(self, frag, ptr, tile):
        for i, v in enumerate(frag.values):
            store(v, ptr, self.index(i, tile))

    def store_rows(self, rows, ptr, op):
        for h, v in enumerate(rows.values):
            store(v, ptr, ((op * M) + self.row0 + 8 * h) * QUAD + self.lane % 4)


def _copy(frag):
    """A new Fragment of the same values (so in-place updates leave ``frag``)."""
    return frag.map(lambda v: v)


def _if_carry(ctx, x):
    """then + else branches yielding a Fragment: warp 1's rows doubled, the
    others' decremented."""
    acc = _copy(x)
    with ctx.k.if_(ctx.tile.warp == 1, carry=[acc]) as branch:
        acc *= 2.0
    with branch.else_():
        acc -= 1.0
    return acc


def _if_then_only(ctx, x):
    """A then-branch alone: where it does not run, the value before the if."""
    acc = _copy(x)
    with ctx.k.if_(ctx.tile.row0 < 8, carry=[acc]):
        acc += 100.0
    return acc


def _loop_carry(ctx, x):
    """A Fragment carried by k.range and updated in place: 0 + x + x + x."""
    acc = Fragment.zeros(x.n)
    for _, (acc,) in ctx.k.range(3, carry=[acc]):
        acc += x
    return acc


def _loop_if_nested(ctx, x):
    """k.if_(carry=) inside k.range: the if yields what the loop carries."""
    acc = _copy(x)
    for i, (acc,) in ctx.k.range(4, carry=[acc]):
        with ctx.k.if_(i % 2 == 0, carry=[acc]):
            acc += 1.0
    return acc


def _scalar_math(ctx, x):
    """Float Scalar arithmetic (no multiply feeds an add, so no fma
    contraction): ((s - 1) / s * 3) clamped to [0.25, 100], negated."""
    s = ctx.s
    t = -(((s - 1.0) / s * 3.0).max(0.25).min(100.0))
    return Fragment.full(x.n, t)


def _scalar_convert(ctx, x):
    """to('bf16'), to('f32') (the bf16 rounding of s) plus to('i32') of 10 s
    (truncation toward zero) converted back."""
    s = ctx.s
    return Fragment.full(x.n, s.to("bf16").to("f32") + (s * 10.0).to("i32").to("f32"))


def _scalar_compare(ctx, x):
    """Ordered comparisons (false on NaN) and the unordered !=, as bits:
    1 (s > 0.5), 2 (s == s), 4 (s != s), 8 (s <= 0.5), 16 (s < 0.5),
    32 (s >= 0.5)."""
    s = ctx.s
    total = Scalar(0.0)
    for bit, cond in ((1, s > 0.5), (2, s == s), (4, s != s), (8, s <= 0.5),
                      (16, s < 0.5), (32, s >= 0.5)):
        total = total + cond.select(float(bit), 0.0)
    return Fragment.full(x.n, total)


def _inplace(ctx, x):
    acc = _copy(x)
    acc += ctx.y
    acc -= ctx.z
    acc *= ctx.y.row_max()
    return acc


def _zero(ctx, x):
    acc = _copy(x)
    acc.zero()
    return acc


def _fill(ctx, x):
    acc = _copy(x)
    acc.fill(ctx.s)
    return acc


class Ctx:
    def __init__(self, k, tile, x, y, z, s):
        self.k, self.tile, self.x, self.y, self.z, self.s = k, tile, x, y, z, s


# name -> fn(ctx, x) -> Fragment. The references are in fragment_reference.py
# under the same names. Row vectors broadcast into fragments are row maxima
# (exact), so that every fragment result has an exact or ulp-bounded reference.
FRAGMENT_OPS = {
    "add": lambda c, x: x + c.y,
    "sub": lambda c, x: x - c.y,
    "mul": lambda c, x: x * c.y,
    "div": lambda c, x: x / c.y,
    "neg": lambda c, x: -x,
    "fma": lambda c, x: x.fma(c.y, c.z),
    "maximum": lambda c, x: x.maximum(c.y),
    "minimum": lambda c, x: x.minimum(c.y),
    "exp2": lambda c, x: x.exp2(),
    "reciprocal": lambda c, x: x.reciprocal(),
    "add_scalar": lambda c, x: x + c.s,
    "rsub_float": lambda c, x: 2.5 - x,
    "mul_scalar": lambda c, x: c.s * x,
    "scale_rows": lambda c, x: x.scale_rows(c.y.row_max()),
    "add_rows": lambda c, x: x + c.y.row_max(),
    "rsub_rows": lambda c, x: c.y.row_max() - x,
    "where_causal": lambda c, x: x.where(
        lambda r, col: c.tile.row0 + r >= c.tile.col0 + col, float("-inf")),
    "where_fragment": lambda c, x: x.where(lambda r, col: (c.tile.col0 + col) % 3 != 0, c.y),
    "where_static": lambda c, x: x.where(lambda r, col: col % 2 == 0, c.z),
    "where_rows": lambda c, x: x.where(lambda r, col: c.tile.row0 + r < 32, c.y.row_max()),
    "zero": _zero,
    "fill": _fill,
    "full": lambda c, x: Fragment.full(x.n, 1.5),
    "inplace": _inplace,
    "thread": lambda c, x: Fragment.full(x.n, (c.tile.warp * 32 + c.tile.lane).to("f32")),
    "loop_carry": _loop_carry,
    "if_carry": _if_carry,
    "if_then_only": _if_then_only,
    "loop_if_nested": _loop_if_nested,
    "scalar_math": _scalar_math,
    "scalar_convert": _scalar_convert,
    "scalar_compare": _scalar_compare,
}


def _rv_inplace(c):
    acc = RowVector.full(0.0)
    acc += c.x.row_max()
    acc *= 2.0
    acc -= c.y.row_max()
    return acc


def _rv_loop(c):
    """A RowVector and a float Scalar carried by one loop: the running max
    of rowmax(x) + i over i < 2, plus the trip count counted in f32."""
    m = RowVector.full(float("-inf"))
    total = Scalar(0.0)
    for i, (m, total) in c.k.range(2, carry=[m, total]):
        m.set(m.max(c.x.row_max() + i.to("f32")))
        total += 1.0
    return m + total


def _rv_if(c):
    """A RowVector yielded by an if with an else-branch."""
    m = c.x.row_max()
    with c.k.if_(c.tile.warp < 2, carry=[m]) as branch:
        m.set(m * 2.0)
    with branch.else_():
        m.set(-m)
    return m


# name -> fn(ctx) -> RowVector.
ROW_OPS = {
    "row_max": lambda c: c.x.row_max(),
    "row_sum": lambda c: c.x.row_sum(),
    "quad_sum": lambda c: c.x.row_sum_partial().quad_sum(),
    "rv_exp2": lambda c: c.x.row_max().exp2(),
    "rv_reciprocal": lambda c: c.x.row_max().reciprocal(),
    "rv_arith": lambda c: (c.x.row_max() + c.y.row_max() - c.z.row_max()) * 0.5,
    "rv_div_neg": lambda c: -(c.x.row_max() / c.y.row_max()),
    "rv_max_min": lambda c: c.x.row_max().max(c.y.row_max()).min(c.z.row_max()),
    "rv_where": lambda c: c.x.row_max().where(
        [c.tile.row0 < 20, c.tile.row0 + 8 < 20], c.y.row_max()),
    "rv_full": lambda c: RowVector.full(c.s) * 2.0,
    "rv_inplace": _rv_inplace,
    "rv_loop": _rv_loop,
    "rv_if": _rv_if,
}


def ops_kernel(n, chip="sm_90a"):
    """``fragment_ops_n{n}(x, y, z, out, rows, s)``: out[op] (64 x n) for
    each of FRAGMENT_OPS, rows[op] (64 x 4) for each of ROW_OPS."""
    k = Kernel(f"fragment_ops_n{n}", chip=chip, block_dim=THREADS,
               params={"x": GlobalPtr(), "y": GlobalPtr(), "z": GlobalPtr(),
                       "out": GlobalPtr(), "rows": GlobalPtr(), "s": Float32()})
    with k:
        x_ptr, y_ptr, z_ptr, out, rows, s = k.args
        tile = Tile(k, n)
        x, y, z = tile.load(x_ptr), tile.load(y_ptr), tile.load(z_ptr)
        ctx = Ctx(k, tile, x, y, z, s)
        for j, fn in enumerate(FRAGMENT_OPS.values()):
            tile.store(fn(ctx, x), out, j)
        for j, fn in enumerate(ROW_OPS.values()):
            tile.store_rows(fn(ctx), rows, j)
    return k


CONVERT_DTYPES = ("bf16", "f16", "e4m3", "e5m2")


def convert_kernel(n, chip="sm_90a"):
    """``fragment_convert_n{n}(x, bf16, f16, e4m3, e5m2)``: x converted by
    ``to_packed`` and stored as the packed pairs come (an i32 per pair of
    16-bit values, an i16 per pair of 8-bit ones) at the pair's place in a
    row-major 64 x n array of the type."""
    k = Kernel(f"fragment_convert_n{n}", chip=chip, block_dim=THREADS,
               params={"x": GlobalPtr(), **{d: GlobalPtr() for d in CONVERT_DTYPES}})
    with k:
        x_ptr, *outs = k.args
        tile = Tile(k, n)
        x = tile.load(x_ptr)
        for dtype, out in zip(CONVERT_DTYPES, outs):
            for j, pair in enumerate(x.to_packed(dtype)):
                # Values 2j, 2j + 1 are adjacent columns of one row: the
                # pair's index in units of two elements.
                store(pair, out, tile.index(2 * j) // 2)
    return k


OPERAND_A_DTYPES = ("bf16", "f16", "e4m3", "e5m2")


def operand_a_kernel(n, chip="sm_90a"):
    """``fragment_operand_a_n{n}(x, bf16, f16, e4m3, e5m2)``: the i32
    registers of ``x.to_operand_a(dtype)``, register ``j`` of k-slice ``s``
    of thread ``t`` at ``out[(4 s + j) * 128 + t]``."""
    k = Kernel(f"fragment_operand_a_n{n}", chip=chip, block_dim=THREADS,
               params={"x": GlobalPtr(), **{d: GlobalPtr() for d in OPERAND_A_DTYPES}})
    with k:
        x_ptr, *outs = k.args
        tile = Tile(k, n)
        x = tile.load(x_ptr)
        tid = k.thread_idx()
        for dtype, out in zip(OPERAND_A_DTYPES, outs):
            a = x.to_operand_a(dtype)
            for s in range(len(a)):
                for j, reg in enumerate(a.slice(s)):
                    store(reg, out, tid + (4 * s + j) * THREADS)
    return k


# (name, B's layout, K): K-major B (N x K) over two 128-byte boxes of K,
# MN-major B (K x N) over two boxes of N.
MMA_RS_CASES = [
    ("fragment_mma_rs_kmajor", OperandLayout("bf16", "K", 128, 64, 128), 128),
    ("fragment_mma_rs_mnmajor", OperandLayout("bf16", "MN", 128, 64, 128), 64),
]


def mma_rs_kernel(layout_b, k_dim, name, chip="sm_90a"):
    """``name(a, b, out)``: out (64 x N f32) = A (64 x k_dim f32, loaded into
    a Fragment and converted to a bf16 register A operand) x B, B in global
    memory as ``layout_b`` takes it (K-major: N x K; MN-major: K x N; bf16),
    copied into shared memory with the layout's swizzle by the threads (what
    TMA would write), read by ``WarpgroupMma.mma_rs`` one k16 slice at a
    time. K-major starts from ``Fragment.undef`` with ``accumulate=False``
    on the first slice; MN-major accumulates into zeros."""
    n = layout_b.mn
    if layout_b.k != k_dim:
        raise ValueError(f"{layout_b}: K is {layout_b.k}, the A tile's {k_dim}")
    k = Kernel(name, chip=chip, block_dim=THREADS,
               params={"a": GlobalPtr(), "b": GlobalPtr(), "out": GlobalPtr()})
    with k:
        a_ptr, b_ptr, out = k.args
        sb = k.smem_alloc(layout_b.bytes, align=layout_b.alignment)
        tid = k.thread_idx()
        words_per_row = layout_b.atom_bytes // 4
        row_words = layout_b.cols * layout_b.element_bytes // 4
        for col, offset in layout_b.box_offsets():
            first_word = col * layout_b.element_bytes // 4
            for it in range(layout_b.rows * words_per_row // THREADS):
                w = tid + it * THREADS
                r, cw = w // words_per_row, w % words_per_row
                word = load(b_ptr, i32(), r * row_words + first_word + cw)
                byte = layout_b.swizzled_offset(r, cw * 4) + offset
                store(word, sb, byte // 4)
        fence_view_async_shared()   # generic-proxy writes, read by wgmma (async proxy)
        k.sync_threads()
        tile = Tile(k, k_dim)
        a = tile.load(a_ptr).to_operand_a("bf16")
        mma = wgmma.WarpgroupMma(n, "bf16", layout_b)
        desc = wgmma.smem_matrix_descriptor(sb, layout_b)
        kmajor = layout_b.major == "K"
        acc = Fragment.undef(n) if kmajor else mma.accumulator()
        wgmma.fence()
        for s in range(len(a)):
            mma.mma_rs(acc, a.slice(s), wgmma.k_slice_descriptor(desc, layout_b, s),
                       accumulate=s > 0 or not kmajor)
        wgmma.commit_group()
        wgmma.wait_group(0)
        Tile(k, n).store(acc, out, 0)
    return k


def by_name(name, chip="sm_90a"):
    """The kernel called ``name`` (what the lit tests print)."""
    for n in (64, 24):
        if name == f"fragment_ops_n{n}":
            return ops_kernel(n, chip)
    if name == "fragment_convert_n64":
        return convert_kernel(64, chip)
    if name == "fragment_operand_a_n64":
        return operand_a_kernel(64, chip)
    for case, layout, k_dim in MMA_RS_CASES:
        if name == case:
            return mma_rs_kernel(layout, k_dim, name, chip)
    raise SystemExit(f"no fragment kernel {name!r}")


if __name__ == "__main__":
    # python test/gpu/fragment_kernels.py NAME: the kernel's MLIR on stdout
    import sys

    print(by_name(sys.argv[1]).mlir())
