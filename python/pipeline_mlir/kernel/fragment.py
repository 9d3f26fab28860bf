"""Register fragments: typed tiles held in the registers of one warpgroup.

A :class:`Fragment` is an ``m64 x n`` tile of f32 values spread over the 128
threads of a warpgroup in the layout of the ``wgmma`` accumulator (PTX ISA,
"Asynchronous Warpgroup Level Matrix Multiply-Accumulate: Register Fragments,
Matrix D"). Value ``i`` (``0 <= i < n / 2``) of thread ``(warp w, lane l)``
of the warpgroup is element::

    row = 16 w + l / 4 + 8 ((i / 2) % 2)
    col = 8 (i / 4) + 2 (l % 4) + i % 2

so each thread holds two rows (``l / 4`` and ``l / 4 + 8`` of its warp's 16)
and the four threads of a quad (lanes ``4q .. 4q + 3``) together hold whole
rows. That is what makes row reductions cheap: a thread reduces its own
values, then two butterfly shuffles (lane xor 1, xor 2) finish the quad.

Operators emit upstream ops value by value: ``arith`` (``addf``, ``mulf``,
``maxnumf``, ``select``...), the ``llvm.nvvm.ex2.approx.ftz.f`` intrinsic,
``nvvm.rcp.approx.ftz.f``, ``nvvm.shfl.sync``; conversions to 16-bit types are
``arith.truncf`` of 2-vectors (``cvt.rn.bf16x2.f32``), to FP8
``nvvm.convert.f32x2.to.f8x2``. A fragment is loop-carriable
(``k.range(..., carry=[acc])``) and ``k.if_(..., carry=[acc])``-carriable;
in-place operators (``acc += x``, ``acc *= rows``) rebind it as
``Scalar.set`` does.

:class:`RowVector` is one value per row of a fragment (each thread holds its
two rows): the result of :meth:`Fragment.row_max` / :meth:`Fragment.row_sum`,
and the per-row scale of online softmax. :class:`ColVector` is one value per
column (each thread holds its ``n / 4`` columns): a bias, broadcast down
the rows by ``acc + cols``. ``Fragment.load`` and ``ColVector.load`` read a
tile or a vector from global memory into these layouts, masked at the
matrix's edges (a residual, a bias).

Math beyond the instructions, per f32 value (f32_math.py, re-exported
here) and as Fragment methods: :func:`sigmoid`, :func:`tanh`, :func:`erf`
(Abramowitz & Stegun 7.1.26) and the activations :func:`relu`,
:func:`gelu_tanh`, :func:`gelu_erf`, :func:`silu`, each written once over an
``ops`` argument (:class:`IrOps` emits MLIR; the tests run the same formulas
on numpy).

:class:`OperandA` is a fragment converted to 16-bit or 8-bit values packed
into 32-bit registers in the layout of a wgmma *register* A operand
(``m64 x k`` per warpgroup). For 16-bit types that layout is the accumulator
layout of 16 columns, so ``S.to_operand_a("bf16")`` needs no data movement:
the k-th 16-column slice of ``S`` becomes the k-th k16 A operand (how
FlashAttention-3 feeds ``P`` to ``P V``). For 8-bit types each quad swaps
bytes with two shuffles (the k32 A layout groups 4 consecutive columns per
thread, the accumulator 2).
"""

import math

import mlir.ir as ir
from mlir.dialects import arith, llvm, nvvm, vector

# The per-value operations, defined in f32_math.py and re-exported here
# (pipeline_mlir.kernel.fragment.exp2, .gelu_tanh, ... stay valid).
from .f32_math import (ERFC_A, ERFC_P, GELU_TANH_C, LOG2_E, SQRT_HALF,  # noqa: F401
                       _FULL_MASK, IrOps, _f32_value, erf, erfc_nonneg, exp2, gelu_erf,
                       gelu_tanh, log2, reciprocal, relu, shfl_xor, sigmoid, silu, tanh)
from .scope import note_fresh, note_update
from .values import Scalar, f32, i32, to_value

# Element type name -> (MLIR type factory, bits).
_FLOAT_TYPES = {
    "f32": (ir.F32Type.get, 32),
    "bf16": (ir.BF16Type.get, 16),
    "f16": (ir.F16Type.get, 16),
    "e4m3": (ir.Float8E4M3FNType.get, 8),
    "e5m2": (ir.Float8E5M2Type.get, 8),
}

class RowVector:
    """One f32 value per row of a fragment: each thread holds its two rows
    (``values[0]`` for row ``l / 4``, ``values[1]`` for row ``l / 4 + 8`` of
    its warp's 16). All four threads of a quad hold the same two values."""

    __hash__ = object.__hash__
    _broadcasts_scalars = True     # Scalar's operators defer to ours

    def __init__(self, values):
        values = [_f32_value(v, "RowVector") for v in values]
        if len(values) != 2:
            raise ValueError(f"RowVector: 2 values per thread, got {len(values)}")
        self.values = values

    @classmethod
    def full(cls, value):
        v = _f32_value(value, "RowVector.full")
        return cls([v, v])

    # Loop-carried protocol.
    def _carry_values(self):
        return list(self.values)

    def _carry_rebind(self, values):
        self.values = list(values)

    def set(self, other):
        """Rebind to ``other`` (a RowVector): how a carried statistic is
        updated."""
        if not isinstance(other, RowVector):
            raise TypeError(f"RowVector.set: expected a RowVector, got {type(other).__name__}")
        note_update(self, "set")
        self.values = list(other.values)

    def _map2(self, other, fn):
        if isinstance(other, RowVector):
            ov = other.values
        else:
            v = _f32_value(other, "RowVector operand")
            ov = [v, v]
        return RowVector([fn(a, b) for a, b in zip(self.values, ov)])

    def _rmap2(self, other, fn):
        return self._map2(other, lambda a, b: fn(b, a))

    def _op(self, other, fn, swap=False):
        if isinstance(other, Fragment):
            # Fragment's reflected operator broadcasts this vector along rows.
            return NotImplemented
        return self._rmap2(other, fn) if swap else self._map2(other, fn)

    def __add__(self, o): return self._op(o, arith.addf)
    def __radd__(self, o): return self._op(o, arith.addf, True)
    def __sub__(self, o): return self._op(o, arith.subf)
    def __rsub__(self, o): return self._op(o, arith.subf, True)
    def __mul__(self, o): return self._op(o, arith.mulf)
    def __rmul__(self, o): return self._op(o, arith.mulf, True)
    def __truediv__(self, o): return self._op(o, arith.divf)

    def __neg__(self):
        return RowVector([arith.negf(v) for v in self.values])

    def __iadd__(self, o): self.set(self + o); return self
    def __isub__(self, o): self.set(self - o); return self
    def __imul__(self, o): self.set(self * o); return self

    def max(self, o): return self._map2(o, arith.maxnumf)
    def min(self, o): return self._map2(o, arith.minnumf)

    def exp2(self):
        return RowVector([exp2(v) for v in self.values])

    def reciprocal(self):
        return RowVector([reciprocal(v) for v in self.values])

    def log2(self):
        return RowVector([log2(v) for v in self.values])

    def quad_sum(self):
        """The sum over the four threads of each quad (two butterfly
        shuffles): completes :meth:`Fragment.row_sum_partial` sums."""
        vals = list(self.values)
        for mask in (1, 2):
            vals = [arith.addf(v, shfl_xor(v, mask)) for v in vals]
        return RowVector(vals)

    def where(self, cond, other):
        """Per row: this value where ``cond`` (an i1 Scalar, or a pair of
        them, one per row) holds, else ``other``."""
        conds = cond if isinstance(cond, (list, tuple)) else [cond, cond]
        ov = other.values if isinstance(other, RowVector) else \
            [_f32_value(other, "RowVector.where")] * 2
        return RowVector([arith.select(to_value(c), a, b)
                          for c, a, b in zip(conds, self.values, ov)])


class ColVector:
    """One f32 value per column of an ``m64 x n`` fragment: each thread
    holds the ``n / 4`` columns it has values of, ``8 j + 2 (lane % 4) + e``
    for ``j < n / 8``, ``e`` in 0, 1, as ``values[2 j + e]`` (the same
    columns in both of its rows). ``acc + cols`` adds value ``(col)`` to
    every row of column ``col``: a bias per output column."""

    __hash__ = object.__hash__
    _broadcasts_scalars = True     # Scalar's operators defer to ours

    def __init__(self, n, values):
        if not isinstance(n, int) or not 8 <= n <= 256 or n % 8:
            raise ValueError(f"ColVector: n must be a multiple of 8 in 8..256, got {n!r}")
        values = [_f32_value(v, "ColVector") for v in values]
        if len(values) != n // 4:
            raise ValueError(f"ColVector of n={n}: {n // 4} values per thread, "
                             f"got {len(values)}")
        self.n = n
        self.values = values

    @staticmethod
    def element_offset(k):
        """Column of value ``k`` relative to the thread's first column."""
        return 8 * (k // 2) + k % 2

    @classmethod
    def full(cls, n, value):
        v = _f32_value(value, "ColVector.full")
        return cls(n, [v] * (n // 4))

    @classmethod
    def load(cls, n, ptr, col0, cols, lane, dtype="f32"):
        """Columns ``col0 ..`` of a vector of ``cols`` elements of ``dtype``
        ('f32', 'bf16', 'f16') at the global pointer ``ptr``, as the thread of
        lane ``lane`` holds them; columns at or past ``cols`` read as 0. Each
        thread loads its pairs of adjacent columns, one 2-element load each,
        so ``cols`` must be even and ``ptr`` aligned to two elements."""
        eb = _element_bytes(dtype, "ColVector.load")
        first = col0 + (lane % 4) * 2
        base = first.to(64) * eb      # then constant offsets: one address register
        values = []
        for j in range(n // 8):
            values += _load_pair(ptr, base + 8 * j * eb, first + 8 * j < cols, dtype)
        return cls(n, values)

    # Loop-carried protocol.
    def _carry_values(self):
        return list(self.values)

    def _carry_rebind(self, values):
        self.values = list(values)

    def set(self, other):
        """Rebind to ``other`` (a ColVector of the same n)."""
        if not isinstance(other, ColVector) or other.n != self.n:
            raise TypeError(f"ColVector.set: expected a ColVector of n={self.n}, got "
                            f"{type(other).__name__}")
        note_update(self, "set")
        self.values = list(other.values)

    def _op(self, other, fn, swap=False):
        if isinstance(other, Fragment):
            return NotImplemented       # Fragment's reflected operator broadcasts us
        if isinstance(other, ColVector):
            if other.n != self.n:
                raise ValueError(f"column vectors of different widths: {self.n} and {other.n}")
            ov = other.values
        else:
            ov = [_f32_value(other, "ColVector operand")] * len(self.values)
        pairs = zip(ov, self.values) if swap else zip(self.values, ov)
        return ColVector(self.n, [fn(a, b) for a, b in pairs])

    def __add__(self, o): return self._op(o, arith.addf)
    def __radd__(self, o): return self._op(o, arith.addf, True)
    def __sub__(self, o): return self._op(o, arith.subf)
    def __rsub__(self, o): return self._op(o, arith.subf, True)
    def __mul__(self, o): return self._op(o, arith.mulf)
    def __rmul__(self, o): return self._op(o, arith.mulf, True)

    def __neg__(self):
        return ColVector(self.n, [arith.negf(v) for v in self.values])


def _element_bytes(dtype, what):
    if dtype not in ("f32", "bf16", "f16"):
        raise ValueError(f"{what}: dtype must be 'f32', 'bf16' or 'f16', got {dtype!r}")
    return _FLOAT_TYPES[dtype][1] // 8


def _load_pair(ptr, byte_offset, ok, dtype):
    """The two adjacent elements of ``dtype`` at ``ptr + byte_offset`` (an
    i64 Scalar) as two f32 values, or two zeros where ``ok`` (an i1 Scalar)
    is false: a guarded load (``scf.if``, which ptxas turns into a
    predicated ``ld.global``), as CUTLASS's predicated copies do. Its
    address stays ``base + constant`` (the constant in the instruction);
    a select of the offset instead would keep one 64-bit address register
    live per load, and a GEMM tile's worth of them spills."""
    from mlir.dialects import scf

    t, bits = _float_type(dtype, "load")
    pair_t = ir.VectorType.get([2], t)
    branch = scf.IfOp(to_value(ok), [pair_t], has_else=True)
    with ir.InsertionPoint(branch.then_block):
        p = llvm.getelementptr(to_value(ptr).type, to_value(ptr), [to_value(byte_offset)],
                               [-2147483648], ir.IntegerType.get_signless(8), 0)
        scf.YieldOp([llvm.load(pair_t, p, alignment=2 * bits // 8)])
    with ir.InsertionPoint(branch.else_block):
        scf.YieldOp([arith.constant(pair_t, ir.DenseElementsAttr.get_splat(
            pair_t, ir.FloatAttr.get(t, 0.0)))])
    v = branch.results[0]
    if bits != 32:
        v = arith.extf(ir.VectorType.get([2], f32()), v)
    i32t = ir.IntegerType.get_signless(32)
    return [llvm.extractelement(v, arith.constant(i32t, e)) for e in range(2)]


class Fragment:
    """An ``m64 x n`` f32 tile of one warpgroup in the wgmma accumulator
    layout (see the module docstring). ``n`` is a multiple of 8 in 8..256.

    Held either as one ``!llvm.struct`` (what ``wgmma`` reads and writes,
    and what a loop carries) or as a list of ``n / 2`` f32 values (what
    arithmetic produces); each form is made from the other on demand and
    LLVM folds the packing away.
    """

    M = 64
    __hash__ = object.__hash__
    _broadcasts_scalars = True     # Scalar's operators defer to ours

    def __init__(self, n, values=None, struct=None):
        if not isinstance(n, int) or not 8 <= n <= 256 or n % 8:
            raise ValueError(f"Fragment: n must be a multiple of 8 in 8..256, got {n!r}")
        self.n = n
        self.count = n // 2
        self.type = llvm.StructType.get_literal([f32()] * self.count)
        if values is not None and len(values) != self.count:
            raise ValueError(f"Fragment of n={n}: {self.count} values per thread, "
                             f"got {len(values)}")
        # Scalars are unwrapped; anything but f32 is refused here, not by
        # the first op that reads it.
        self._values = [_f32_value(v, "Fragment value") for v in values] \
            if values is not None else None
        self._struct = struct
        if values is None and struct is None:
            self._values = self._splat(0.0)

    # -- construction ------------------------------------------------------

    def _splat(self, value):
        v = _f32_value(value, "Fragment fill")
        return [v] * self.count

    @classmethod
    def zeros(cls, n):
        return cls(n)

    @classmethod
    def undef(cls, n):
        """A fragment with no defined values: the accumulator of a wgmma
        issued with ``accumulate=False``, which does not read it."""
        probe = cls(n)
        return cls(n, struct=llvm.mlir_undef(probe.type))

    @classmethod
    def full(cls, n, value):
        frag = cls(n)
        frag._values = frag._splat(value)
        return frag

    @classmethod
    def load(cls, n, ptr, row0, col0, rows, cols, ld, warp, lane, dtype="f32"):
        """The ``64 x n`` tile at ``(row0, col0)`` of a row-major ``rows x
        cols`` matrix of ``dtype`` ('f32', 'bf16', 'f16') at the global
        pointer ``ptr``, whose rows are ``ld`` elements apart, loaded into
        this layout by the thread (``warp`` inside the warpgroup, ``lane``);
        elements outside the matrix read as 0. Each thread loads its pairs of
        adjacent columns, one 2-element load each (so ``cols`` and ``ld``
        must be even and ``ptr`` aligned to two elements); offsets are i64
        (``rows * ld`` may pass 2^31)."""
        eb = _element_bytes(dtype, "Fragment.load")
        r_t, c_t = cls.thread_origin(warp, lane)
        frag = cls(n)
        values = [None] * frag.count
        first_col = col0 + c_t
        col_ok = [first_col + 8 * j < cols for j in range(n // 8)]
        ld64 = ld.to(64) if isinstance(ld, Scalar) else ld
        for half in range(2):
            row = row0 + r_t + 8 * half
            row_ok = row < rows
            base = (row.to(64) * ld64 + first_col.to(64)) * eb
            for j in range(n // 8):
                i = 4 * j + 2 * half
                values[i], values[i + 1] = _load_pair(ptr, base + 8 * j * eb,
                                                      row_ok & col_ok[j], dtype)
        frag._values = values
        return frag

    def _like(self, values):
        return Fragment(self.n, values=values)

    # -- the two representations -------------------------------------------

    @property
    def values(self):
        """The ``n / 2`` f32 values of this thread (a list of ir.Values)."""
        if self._values is None:
            self._values = [llvm.extractvalue(f32(), self._struct, [i])
                            for i in range(self.count)]
        return self._values

    @property
    def ir_value(self):
        """The ``!llvm.struct`` of this thread's values (wgmma's operand)."""
        if self._struct is None:
            s = llvm.mlir_undef(self.type)
            for i, v in enumerate(self._values):
                s = llvm.insertvalue(s, v, [i])
            self._struct = s
        return self._struct

    def value(self, i):
        """Value ``i`` (an f32 ir.Value)."""
        return self.values[i]

    def _assign(self, values=None, struct=None, verb="updated", fresh=False):
        # ``fresh``: the new value does not read the old one (zero, fill):
        # inside a loop body the fragment is then one made there (a GEMM
        # zeroes its accumulator per tile) and needs no carry.
        if fresh:
            note_fresh(self)
        else:
            note_update(self, verb)
        self._values = list(values) if values is not None else None
        self._struct = struct

    def set(self, other):
        """Rebind to ``other`` (a Fragment of the same n)."""
        self._check_same(other)
        self._assign(values=other.values, verb="set")

    def zero(self):
        """Reset every value to 0 (a fresh tile)."""
        self._assign(values=self._splat(0.0), fresh=True)

    def fill(self, value):
        self._assign(values=self._splat(value), fresh=True)

    def _set_struct(self, struct):
        """Rebind to a struct produced by a wgmma."""
        self._assign(struct=struct, verb="accumulated")

    # Loop-carried protocol (kernel.control.range_ / If carry).
    def _carry_values(self):
        return [self.ir_value]

    def _carry_rebind(self, values):
        (self._struct,) = values
        self._values = None

    def _carry_sources(self):
        """The values this fragment holds, without packing them (what the
        loops' update check compares: see scope.note_update). Both
        representations where both exist: one made from the other inside a
        loop body (a carried struct unpacked there by the first ``acc +=
        x`` of an inner loop) must not make the fragment look made in that
        body, or the inner loop's missing carry goes unreported."""
        return [v for v in (*(self._values or ()), self._struct) if v is not None]

    # -- layout ------------------------------------------------------------

    @staticmethod
    def element_offset(i):
        """(row, column) of value ``i`` relative to its thread's first row
        and column (Python ints)."""
        return 8 * ((i // 2) % 2), 8 * (i // 4) + i % 2

    @staticmethod
    def thread_origin(warp, lane):
        """(row, column) of a thread's first value in the tile: ``(16 warp +
        lane / 4, 2 (lane % 4))`` for ``warp`` the warp index inside the
        warpgroup (Scalars or ints)."""
        return warp * 16 + lane // 4, (lane % 4) * 2

    # -- elementwise arithmetic -------------------------------------------

    def _check_same(self, other):
        if not isinstance(other, Fragment):
            raise TypeError(f"expected a Fragment, got {type(other).__name__}")
        if other.n != self.n:
            raise ValueError(f"fragments of different shapes: 64x{self.n} and 64x{other.n}")

    def _operand_values(self, other, what):
        """Per-value operands for a binary op: a Fragment elementwise, a
        RowVector broadcast along its rows, a ColVector down its columns, a
        scalar everywhere."""
        if isinstance(other, Fragment):
            self._check_same(other)
            return other.values
        if isinstance(other, RowVector):
            return [other.values[(i // 2) % 2] for i in range(self.count)]
        if isinstance(other, ColVector):
            if other.n != self.n:
                raise ValueError(f"{what}: a column vector of n={other.n} does not fit a "
                                 f"64x{self.n} fragment")
            return [other.values[2 * (i // 4) + i % 2] for i in range(self.count)]
        v = _f32_value(other, what)
        return [v] * self.count

    def map(self, fn):
        """A new fragment of ``fn(value)`` for each value (``fn`` takes and
        returns an f32 ir.Value)."""
        return self._like([fn(v) for v in self.values])

    def _bin(self, other, fn, swap=False, what="operand"):
        ov = self._operand_values(other, what)
        if swap:
            return self._like([fn(b, a) for a, b in zip(self.values, ov)])
        return self._like([fn(a, b) for a, b in zip(self.values, ov)])

    def __add__(self, o): return self._bin(o, arith.addf)
    def __radd__(self, o): return self._bin(o, arith.addf, True)
    def __sub__(self, o): return self._bin(o, arith.subf)
    def __rsub__(self, o): return self._bin(o, arith.subf, True)
    def __mul__(self, o): return self._bin(o, arith.mulf)
    def __rmul__(self, o): return self._bin(o, arith.mulf, True)
    def __truediv__(self, o): return self._bin(o, arith.divf)

    def __neg__(self):
        return self.map(arith.negf)

    def __iadd__(self, o):
        self._assign(values=(self + o).values)
        return self

    def __isub__(self, o):
        self._assign(values=(self - o).values)
        return self

    def __imul__(self, o):
        self._assign(values=(self * o).values)
        return self

    def maximum(self, o): return self._bin(o, arith.maxnumf)
    def minimum(self, o): return self._bin(o, arith.minnumf)

    def fma(self, b, c):
        """``self * b + c`` fused (``llvm.intr.fma``: one ``fma.rn.f32``)."""
        bv = self._operand_values(b, "fma")
        cv = self._operand_values(c, "fma")
        return self._like([llvm.intr_fma(a, x, y)
                           for a, x, y in zip(self.values, bv, cv)])

    def exp2(self):
        """``2 ** x`` per value (``ex2.approx.f32``)."""
        return self.map(exp2)

    def reciprocal(self):
        return self.map(reciprocal)

    def abs(self):
        """``|x|`` per value (the sign bit cleared)."""
        return self.map(IrOps.abs)

    def sigmoid(self):
        """``1 / (1 + e^-x)`` per value (module function :func:`sigmoid`)."""
        return self.map(sigmoid)

    def tanh(self):
        """``tanh x`` per value from ``ex2`` and ``rcp`` (:func:`tanh`:
        absolute error below 5e-7)."""
        return self.map(tanh)

    def erf(self):
        """``erf x`` per value (:func:`erf`: Abramowitz & Stegun 7.1.26,
        absolute error below 1e-6)."""
        return self.map(erf)

    def where(self, keep, other):
        """Per value: this value where ``keep(row, col)`` holds, else
        ``other`` (a number, Scalar, RowVector or Fragment). ``keep`` gets the
        value's (row, col) offsets from the thread's origin as Python ints
        (add :meth:`thread_origin` for absolute coordinates) and returns an
        i1 Scalar, or a Python bool (then no op is emitted for the value)."""
        ov = self._operand_values(other, "where")
        out = []
        for i, (a, b) in enumerate(zip(self.values, ov)):
            r, c = self.element_offset(i)
            cond = keep(r, c)
            if cond is True:
                out.append(a)
            elif cond is False:
                out.append(b)
            else:
                out.append(arith.select(to_value(cond), a, b))
        return self._like(out)

    def scale_rows(self, rows):
        """Each row multiplied by its value of ``rows`` (a RowVector)."""
        if not isinstance(rows, RowVector):
            raise TypeError(f"scale_rows: expected a RowVector, got {type(rows).__name__}")
        return self * rows

    # -- reductions --------------------------------------------------------

    def _row_reduce(self, fn, across_quad=True):
        """``fn`` over each of the thread's two rows (a pairwise tree:
        log2(n/4) dependent ops instead of n/4), then, ``across_quad``, over
        the quad's four threads, which hold the other columns of these rows."""
        rows = []
        for half in range(2):
            vals = [v for i, v in enumerate(self.values) if (i // 2) % 2 == half]
            while len(vals) > 1:
                nxt = [fn(vals[j], vals[j + 1]) for j in range(0, len(vals) - 1, 2)]
                if len(vals) % 2:
                    nxt.append(vals[-1])
                vals = nxt
            r = vals[0]
            if across_quad:
                for mask in (1, 2):
                    r = fn(r, shfl_xor(r, mask))
            rows.append(r)
        return RowVector(rows)

    def row_max(self):
        """Max of each row (a RowVector; NaN-ignoring ``maxnumf``)."""
        return self._row_reduce(arith.maxnumf)

    def row_sum(self):
        """Sum of each row (a RowVector)."""
        return self._row_reduce(arith.addf)

    def row_sum_partial(self):
        """Each thread's sum over its own columns of each row, without the
        quad shuffles: online softmax sums these per iteration and reduces
        across the quad once at the end (:meth:`RowVector.quad_sum`)."""
        return self._row_reduce(arith.addf, across_quad=False)

    # -- conversions ---------------------------------------------------------

    def to_operand_a(self, dtype="bf16", in_place=False):
        """This tile converted to ``dtype`` and packed as the register A
        operand of ``wgmma`` (an :class:`OperandA` of ``n / k`` k-slices).
        ``in_place`` (8-bit types): each thread packs its own values, no
        shuffles, so k index ``kappa`` of each 32-column slice holds column
        ``layout.fp8_register_a_key_order()[kappa]``; the B operand's K rows
        must be permuted to match (FP8 attention's V)."""
        return OperandA.from_fragment(self, dtype, in_place=in_place)

    def to_packed(self, dtype):
        """Pairs of consecutive values ``(2j, 2j + 1)`` (same row, adjacent
        columns) converted to ``dtype`` and packed: 16-bit types into one
        i32 per pair (``vector<2 x dtype>`` bitcast), 8-bit types into one i16
        per pair. For stores of the tile; :meth:`to_operand_a` for wgmma."""
        return [_pack_pair(dtype, self.values[2 * j], self.values[2 * j + 1])
                for j in range(self.count // 2)]


def _float_type(dtype, what):
    if dtype not in _FLOAT_TYPES:
        raise ValueError(f"{what}: dtype must be one of {sorted(_FLOAT_TYPES)}, got {dtype!r}")
    return _FLOAT_TYPES[dtype][0](), _FLOAT_TYPES[dtype][1]


def _pack_pair(dtype, lo, hi):
    """Two f32 values -> ``dtype`` packed, ``lo`` in the low bits."""
    t, bits = _float_type(dtype, "pack")
    if bits == 16:
        pair = vector.from_elements(ir.VectorType.get([2], f32()), [lo, hi])
        half = arith.truncf(ir.VectorType.get([2], t), pair)
        return llvm.bitcast(i32(), half)
    if bits == 8:
        return _cvt_f8x2(dtype, hi, lo)
    raise ValueError(f"pack: {dtype} is not a 16- or 8-bit type")


def _cvt_f8x2(dtype, hi, lo):
    """``cvt.rn.satfinite.{e4m3x2,e5m2x2}.f32 d, hi, lo`` (an i16: ``lo`` in
    the low byte)."""
    t = _float_type(dtype, "cvt")[0]
    return nvvm.convert_f32x2_to_f8x2(ir.IntegerType.get_signless(16), hi, lo,
                                      ir.TypeAttr.get(t), rnd=nvvm.FPRoundingMode.RN,
                                      sat=nvvm.SaturationMode.SATFINITE)


class OperandA:
    """A ``64 x k`` tile as the register A operand of ``wgmma`` for one
    warpgroup: for each k-slice (16 columns for 16-bit types, 32 for 8-bit)
    four i32 registers per thread (PTX ISA, "Register Fragments: Matrix A").
    """

    __hash__ = object.__hash__

    def __init__(self, dtype, slices):
        self.dtype = dtype
        self.bits = _float_type(dtype, "OperandA")[1]
        self.slices = slices          # [[4 x i32 ir.Value]] per k-slice

    # Loop-carried protocol: P of one iteration feeds the next one's GEMM.
    def _carry_values(self):
        return [r for regs in self.slices for r in regs]

    def _carry_rebind(self, values):
        values = list(values)
        self.slices = [values[4 * i:4 * i + 4] for i in range(len(values) // 4)]

    def set(self, other):
        """Rebind to ``other`` (an OperandA of the same dtype and size)."""
        if not isinstance(other, OperandA) or other.dtype != self.dtype or \
                len(other) != len(self):
            raise TypeError("OperandA.set: expected an OperandA of the same dtype and "
                            "number of k-slices")
        note_update(self, "set")
        self.slices = [list(sl) for sl in other.slices]

    @property
    def k_per_slice(self):
        return 256 // self.bits   # 16 for 16-bit, 32 for 8-bit

    def __len__(self):
        return len(self.slices)

    def slice(self, j):
        return self.slices[j]

    @classmethod
    def from_fragment(cls, frag, dtype, in_place=False):
        t, bits = _float_type(dtype, "to_operand_a")
        if in_place and bits != 8:
            raise ValueError(f"to_operand_a: in_place is for 8-bit types (16-bit ones "
                             f"are in place already), got {dtype!r}")
        if bits == 16:
            if frag.n % 16:
                raise ValueError(f"to_operand_a: n ({frag.n}) must be a multiple of 16")
            v = frag.values
            regs = [_pack_pair(dtype, v[2 * j], v[2 * j + 1]) for j in range(frag.count // 2)]
            # Accumulator values 8s..8s+7 are the k16 A registers a0..a7 of
            # slice s: identical layouts, no movement.
            return cls(dtype, [regs[4 * s:4 * s + 4] for s in range(frag.n // 16)])
        if bits == 8:
            if frag.n % 32:
                raise ValueError(f"to_operand_a: n ({frag.n}) must be a multiple of 32 for "
                                 f"8-bit types")
            make = _fp8_a_slice_in_place if in_place else _fp8_a_slice
            return cls(dtype, [make(frag, dtype, s) for s in range(frag.n // 32)])
        raise ValueError(f"to_operand_a: dtype must be 16- or 8-bit, got {dtype!r}")


def _fp8_a_slice(frag, dtype, s):
    """The four registers of k32 slice ``s`` of an 8-bit A operand.

    The k32 A layout gives thread ``t = lane % 4`` columns ``4t .. 4t + 3``
    (register 0: row g, register 1: row g + 8; registers 2, 3: the same with
    columns + 16); the accumulator gives it columns ``8c + 2t, 8c + 2t + 1``.
    Each thread packs its own column pairs (i16 each), then takes the two
    pairs its register needs from quad lanes ``2t % 4`` and ``(2t + 1) % 4``
    (``shfl.sync.idx`` within the quad: both candidate blocks from each of
    the two source lanes, four per register, the receiver selecting by its
    own position)."""
    v = frag.values
    base = 16 * s                      # value index of column 32 s
    # pairs[c][h]: this thread's i16 of columns 8c + 2t.. of row half h.
    pairs = [[_cvt_f8x2(dtype, v[base + 4 * c + 2 * h + 1], v[base + 4 * c + 2 * h])
              for h in range(2)] for c in range(4)]
    lane = Scalar(nvvm.read_ptx_sreg_laneid(i32()))
    t = lane % 4
    quad_base = lane - t
    src_lo = quad_base + (t * 2) % 4           # holds columns 8c + 4t' .. pair 0
    src_hi = quad_base + (t * 2 + 1) % 4
    # Register for (row half h, column block b in {0, 1}) needs columns
    # 16 b + 4 t .. + 3, i.e. accumulator block c = 2 b + t / 2 from lanes
    # src_lo (columns +0, +1) and src_hi (+2, +3).
    regs = []
    for b in range(2):
        for h in range(2):
            c_even, c_odd = pairs[2 * b][h], pairs[2 * b + 1][h]
            # t < 2 wants block 2b, t >= 2 block 2b+1: choose before sending
            # so each lane sends the pair the receiver needs... the receiver's
            # t decides, so send both candidates and select after.
            words = []
            for src in (src_lo, src_hi):
                got = []
                for cand in (c_even, c_odd):
                    w = arith.extui(i32(), cand)
                    got.append(nvvm.shfl_sync(i32(), to_value(_FULL_MASK, i32()), w,
                                              src.ir_value, to_value(0x1F, i32()),
                                              nvvm.ShflKind.idx))
                words.append(arith.select((t < 2).ir_value, got[0], got[1]))
            lo16 = arith.andi(words[0], to_value(0xFFFF, i32()))
            hi16 = arith.shli(words[1], to_value(16, i32()))
            regs.append(arith.ori(lo16, hi16))
    # Order: a0 (row g, cols 4t..), a1 (row g + 8), a2 (row g, +16), a3.
    return [regs[0], regs[1], regs[2], regs[3]]


def fp8_in_place_value(s, reg, byte):
    """The accumulator value index (of the thread's ``n / 2``) that byte
    ``byte`` of register ``reg`` of k32 slice ``s`` holds when the operand is
    packed in place: registers 0 and 2 are row g, 1 and 3 row g + 8
    (value pairs ``(i // 2) % 2``); registers 2, 3 take the slice's second
    16 columns (value blocks 2, 3); bytes 0, 1 are one column pair of an
    8-column block, bytes 2, 3 the pair of the next block."""
    return 16 * s + 8 * (reg // 2) + 2 * (reg % 2) + 4 * (byte // 2) + byte % 2


def _fp8_a_slice_in_place(frag, dtype, s):
    """The four registers of k32 slice ``s`` of an 8-bit A operand from the
    thread's own values (``fp8_in_place_value``): two ``cvt.rn.satfinite``
    pairs per register, no data movement between threads. The K order this
    gives is ``layout.fp8_register_a_key_order()``."""
    v = frag.values
    regs = []
    for reg in range(4):
        idx = [fp8_in_place_value(s, reg, b) for b in range(4)]
        lo = arith.extui(i32(), _cvt_f8x2(dtype, v[idx[1]], v[idx[0]]))
        hi = arith.extui(i32(), _cvt_f8x2(dtype, v[idx[3]], v[idx[2]]))
        regs.append(arith.ori(lo, arith.shli(hi, to_value(16, i32()))))
    return regs
