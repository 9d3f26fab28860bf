"""Epilogue: a warpgroup's fp32 accumulator -> 16-bit values in shared
memory, laid out as the C tile's ``OperandLayout`` says (swizzled boxes of
64 rows that one TMA store each writes to global memory); and before that,
the fused epilogue hook: an :class:`Epilogue` (alpha, a bias per column, a
residual tile, an activation, a user ``fn``) applied to the accumulator in
registers by :func:`apply`, with an :class:`EpilogueContext` saying where
the fragment sits in the output and which kernel arguments it reads
(docs/authoring.md, section 9).

Why swizzled: thread ``(w, l)`` holds rows ``16 w + l / 4 (+ 8)`` and column
pairs ``8 j + 2 (l % 4)``; with plain 128-byte rows the 8 rows that a warp
writes at once would hit the same banks 8 times. With the 128-byte swizzle
row ``r``'s 16-byte chunk ``c`` sits at chunk ``c ^ (r % 8)``, so the 32
lanes of a store cover 32 distinct banks. TMA stores with the same swizzle
undo it on the way out.

The caller owns the ordering around it (see ``examples/hopper_gemm.py``):
the buffer must be free (the previous TMA stores finished reading it:
``PipelineTmaStore.producer_acquire``), and after the stores each thread
runs ``fence.proxy.async.shared::cta`` before the barrier that lets one
thread issue the TMA stores.
"""

import mlir.ir as ir
from mlir.dialects import arith, llvm

from ..layout import DTYPES, OperandLayout
from ..user_location import user_line
from ..ops.epilogues import ACTIVATIONS, ALPHA_PARAM, Epilogue
from . import fragment
from .fragment import ColVector, Fragment
from .params import Float32, GlobalPtr

# A 16-byte chunk of 16-bit values is 8 columns: one column group ``j`` of
# the wgmma accumulator (columns 8 j .. 8 j + 7).
CHUNK_BYTES = 16


OUT_DTYPES = ("bf16", "f16")


def _check_out_dtype(dtype):
    if dtype not in OUT_DTYPES:
        raise ValueError(f"epilogue: output dtype must be 'bf16' or 'f16', got {dtype!r}")


def _float_type(dtype):
    _check_out_dtype(dtype)
    return ir.BF16Type.get() if dtype == "bf16" else ir.F16Type.get()


def check_tile(layout, n, what="epilogue"):
    """``layout`` is a C tile that ``store_fragment`` can write from an
    ``m64nN`` accumulator: 64 rows, ``n`` columns of a 16-bit type, whole
    16-byte chunks per box row."""
    if not isinstance(layout, OperandLayout):
        raise TypeError(f"{what}: the C tile must be an OperandLayout, got "
                        f"{type(layout).__name__}")
    _check_out_dtype(layout.dtype)
    if layout.major != "K" or layout.rows != 64 or layout.cols != n:
        raise ValueError(f"{what}: the C tile must be 64 x {n} with its columns "
                         f"contiguous (major 'K'), got {layout}")


@user_line  # its stores point at the caller's line in checker findings
def store_fragment(acc, smem, warp, lane, layout, box_range=None):
    """Write ``acc`` (a ``Fragment`` of ``m64nN``) into ``smem`` as the
    C tile ``layout`` (64 x N, 16-bit) says: box ``b`` at ``smem + b *
    layout.box_bytes``. With ``box_range`` (a ``range`` of box indices) only
    those boxes are written, the first one at ``smem`` (an epilogue in
    several passes through a smaller buffer).

    ``warp`` is the warp index inside the warpgroup and ``lane`` the lane
    (i32 Scalars)."""
    check_tile(layout, acc.n)
    out_t = _float_type(layout.dtype)
    pair_t = ir.VectorType.get([2], out_t)
    nboxes = layout.boxes
    box_range = range(nboxes) if box_range is None else box_range
    if not box_range or box_range.start < 0 or box_range.stop > nboxes:
        raise ValueError(f"epilogue: box_range {box_range} is not inside 0..{nboxes}")
    chunks = layout.atom_bytes // CHUNK_BYTES       # column groups per box row
    quad, pair = lane // 4, lane % 4
    # Row 16 w + quad of the box (and row + 8 below it), whose swizzle is
    # that of row `quad`: it depends on the row modulo 8 only. The thread's
    # values are a pair of columns.
    row_base = (warp * 16 + quad) * layout.atom_bytes + pair * 2 * layout.element_bytes
    # One pointer per 16-byte chunk column; everything else is an immediate.
    chunk_ptrs = [smem + (row_base + layout.swizzled_chunk(quad, c) * CHUNK_BYTES)
                  for c in range(chunks)]
    below = layout.swizzled_offset(8, 0)    # row r + 8: same swizzle, 8 rows on
    for j in range(box_range.start * chunks, box_range.stop * chunks):
        box, chunk = divmod(j, chunks)
        for half in range(2):
            i = 4 * j + 2 * half
            lo = arith.truncf(out_t, acc.value(i))
            hi = arith.truncf(out_t, acc.value(i + 1))
            v = llvm.mlir_undef(pair_t)
            v = llvm.insertelement(v, lo, arith.constant(ir.IntegerType.get_signless(32), 0))
            v = llvm.insertelement(v, hi, arith.constant(ir.IntegerType.get_signless(32), 1))
            offset = (box - box_range.start) * layout.box_bytes + half * below
            ptr = chunk_ptrs[chunk] + offset if offset else chunk_ptrs[chunk]
            llvm.store(v, ptr.ir_value)
    return len(box_range)


def store_fragment_global(acc, c_ptr, row0, col0, m, n, warp, lane, dtype="bf16"):
    """Write ``acc`` straight from registers to a row-major ``m x n`` matrix
    of ``dtype`` at ``c_ptr``
    (``!llvm.ptr<1>``), rows ``row0..row0+63`` and columns ``col0..col0+N-1``,
    skipping elements outside ``m x n`` (``n`` must be even). Simpler and
    slower than the TMA-store path: one store per value pair, each
    predicated. Kept for the step-by-step table of docs/gemm.md."""
    from mlir.dialects import scf

    out_t = _float_type(dtype)
    elem = DTYPES[dtype][0]
    pair_t = ir.VectorType.get([2], out_t)
    i32t = ir.IntegerType.get_signless(32)
    quad, pair = lane // 4, lane % 4
    col_base = col0 + pair * 2
    for half in range(2):
        row = row0 + warp * 16 + quad + half * 8
        row_ok = row < m
        # Byte offset of (row, col_base) in i64: rows * n can pass 2^31.
        base = (row.to(64) * n.to(64) + col_base.to(64)) * elem
        for j in range(acc.n // 8):
            i = 4 * j + 2 * half
            lo = arith.truncf(out_t, acc.value(i))
            hi = arith.truncf(out_t, acc.value(i + 1))
            v = llvm.mlir_undef(pair_t)
            v = llvm.insertelement(v, lo, arith.constant(i32t, 0))
            v = llvm.insertelement(v, hi, arith.constant(i32t, 1))
            ok = row_ok & (col_base + 8 * j < n)
            branch = scf.IfOp(ok.ir_value, [], has_else=False)
            with ir.InsertionPoint(branch.then_block):
                off = (base + 8 * elem * j).ir_value
                p = llvm.getelementptr(c_ptr.type, c_ptr, [off], [-2147483648],
                                       ir.IntegerType.get_signless(8), 0)
                llvm.store(v, p)
                scf.YieldOp([])


# -- the fused epilogue hook ------------------------------------------------------

# The math of each activation name, per f32 value (kernel/f32_math.py).
ACTIVATION_FNS = {"relu": fragment.relu, "gelu_tanh": fragment.gelu_tanh,
                  "gelu_erf": fragment.gelu_erf, "silu": fragment.silu}
assert set(ACTIVATION_FNS) == set(ACTIVATIONS)


def kernel_params(epi, out_dtype):
    """The kernel parameters ``epi`` needs (name -> Param), to add to a
    kernel's ``params``: ``alpha`` (Float32) for ``alpha="param"``, ``bias``
    and ``residual`` (global pointers aligned to the two elements a thread
    loads at once). Empty for None or an identity epilogue."""
    if epi is None:
        return {}
    out = {}
    if epi.alpha == ALPHA_PARAM:
        out["alpha"] = Float32()
    if epi.bias is not None:
        out["bias"] = GlobalPtr(align=2 * DTYPES[epi.bias_dtype or out_dtype][0])
    if epi.residual:
        out["residual"] = GlobalPtr(align=2 * DTYPES[out_dtype][0])
    assert tuple(out) == epi.param_names()
    return out


class EpilogueContext:
    """Where one warpgroup's ``m64 x N`` accumulator sits in the output, and
    the kernel arguments an epilogue reads: what :func:`apply` and a user
    ``fn(fragment, ctx)`` get.

    ``row0``, ``col0``: the fragment's first output row and column (i32
    Scalars); ``rows``, ``cols``: the output's shape (``m``, ``n``; loads
    past them read 0); ``warp`` (inside the warpgroup) and ``lane``: this
    thread; ``out_dtype``: the output's ('bf16' / 'f16'); ``args``: kernel
    arguments by name (``alpha``, ``bias``, ``residual``, or a user
    kernel's own)."""

    def __init__(self, row0, col0, rows, cols, warp, lane, out_dtype, args=None):
        _check_out_dtype(out_dtype)
        self.row0, self.col0, self.rows, self.cols = row0, col0, rows, cols
        self.warp, self.lane, self.out_dtype = warp, lane, out_dtype
        self.args = dict(args or {})

    def arg(self, name):
        if name not in self.args:
            raise KeyError(f"EpilogueContext: no kernel argument {name!r} (have "
                           f"{sorted(self.args)}): declare it in the kernel's params "
                           "(kernel_params(epilogue, dtype)) and pass it in args")
        return self.args[name]

    def origin(self):
        """(row, col) in the output of this thread's first value; add
        ``Fragment.element_offset(i)`` for value ``i``."""
        r, c = Fragment.thread_origin(self.warp, self.lane)
        return self.row0 + r, self.col0 + c

    def inside(self, r, c):
        """For ``Fragment.where``: the element at offset ``(r, c)`` from the
        thread's origin is inside the output (an i1 Scalar)."""
        row, col = self.origin()
        return (row + r < self.rows) & (col + c < self.cols)

    def col_vector(self, ptr, n, dtype=None):
        """The fragment's columns of a vector of ``cols`` elements at ``ptr``
        (``ColVector.load``; ``dtype`` defaults to the output's)."""
        return ColVector.load(n, ptr, self.col0, self.cols, self.lane, dtype or self.out_dtype)

    def tile(self, ptr, n, dtype=None, ld=None):
        """The fragment's tile of a row-major ``rows x cols`` matrix at
        ``ptr`` (row stride ``ld``, default ``cols``; ``Fragment.load``)."""
        return Fragment.load(n, ptr, self.row0, self.col0, self.rows, self.cols,
                             self.cols if ld is None else ld, self.warp, self.lane,
                             dtype or self.out_dtype)


def apply(epi, acc, ctx):
    """``acc`` (an fp32 ``Fragment``) with the epilogue ``epi`` applied:
    ``act(alpha * acc + bias[col] + residual[row, col])``, then ``epi.fn``.
    ``alpha * acc + bias`` is one ``fma`` per value. An identity epilogue
    returns ``acc`` itself and emits nothing."""
    if epi is None or epi.is_identity:
        return acc
    x = acc
    alpha = ctx.arg("alpha") if epi.alpha == ALPHA_PARAM else epi.alpha
    bias = (ctx.col_vector(ctx.arg("bias"), acc.n, epi.bias_dtype or ctx.out_dtype)
            if epi.bias is not None else None)
    scaled = epi.alpha == ALPHA_PARAM or epi.alpha != 1
    if scaled and bias is not None:
        x = x.fma(alpha, bias)
    elif scaled:
        x = x * alpha
    elif bias is not None:
        x = x + bias
    if epi.residual:
        x = x + ctx.tile(ctx.arg("residual"), acc.n)
    if epi.activation is not None:
        x = x.map(ACTIVATION_FNS[epi.activation])
    if epi.fn is not None:
        out = epi.fn(x, ctx)
        if not isinstance(out, Fragment) or out.n != acc.n:
            raise TypeError(f"Epilogue fn {getattr(epi.fn, '__name__', epi.fn)!r} must return "
                            f"a Fragment of n={acc.n} (the accumulator's shape), got "
                            f"{type(out).__name__}")
        x = out
    return x


__all__ = ["store_fragment", "store_fragment_global", "check_tile", "Epilogue",
           "EpilogueContext", "apply", "kernel_params", "ACTIVATIONS"]
