"""Values of a row in registers, and the loads, stores and math they use.

A :class:`RowValues` is one thread's values of a row in a
:class:`~pipeline_mlir.kernel.rows.Rows` layout, in f32 whatever the
tensor's type; a :class:`Columns` is a per-column vector held as it was
loaded. The layout itself (which thread holds which column, the row loop,
the reductions across threads) is ``rows.py``; this module is what a
thread does with its own values: elementwise arithmetic, the per-thread
reductions, and the vector loads and stores behind :meth:`Rows.load` and
:meth:`Rows.store`.
"""

import mlir.ir as ir
from mlir.dialects import arith, llvm, scf, vector

from .fragment import LOG2_E, IrOps
from .fragment import exp2 as _exp2
from .fragment import reciprocal as _reciprocal
from .scope import note_update
from .values import Scalar, f32, i32, to_value


def _kernel(what):
    from .kernel import active_kernel

    k = active_kernel()
    if k is None:
        raise RuntimeError(f"{what} emits kernel code: call it inside `with k:` (or pass k=)")
    return k


def _f32(x, what):
    v = to_value(x, f32() if isinstance(x, (int, float)) else None, what=what)
    if v.type != f32():
        raise TypeError(f"{what}: expected an f32 value, got {v.type} (convert with "
                        f".to('f32'))")
    return v


def _load_raw(p, et, eb, length):
    """``length`` elements of type ``et`` at ``p`` (aligned to their
    size), as loaded: one vector load (a scalar for one element)."""
    if length == 1:
        return llvm.load(et, p, alignment=eb)
    return llvm.load(ir.VectorType.get([length], et), p, alignment=length * eb)


def _to_f32(raw):
    """The f32 values of a loaded vector (or scalar): one conversion."""
    if not isinstance(raw.type, ir.VectorType):
        return [raw if raw.type == f32() else arith.extf(f32(), raw)]
    length = raw.type.shape[0]
    if raw.type.element_type != f32():
        raw = arith.extf(ir.VectorType.get([length], f32()), raw)
    return [vector.extract(raw, [], [e]) for e in range(length)]


def _load_f32(p, et, eb, length):
    return _to_f32(_load_raw(p, et, eb, length))


def _guarded_raw(p, et, eb, length, valid):
    """:func:`_load_raw` where ``valid`` holds, else zeros."""
    t = et if length == 1 else ir.VectorType.get([length], et)
    branch = scf.IfOp(valid, [t], has_else=True)
    with ir.InsertionPoint(branch.then_block):
        scf.YieldOp([_load_raw(p, et, eb, length)])
    with ir.InsertionPoint(branch.else_block):
        zero = ir.FloatAttr.get(et, 0.0)
        scf.YieldOp([arith.constant(t, zero if length == 1 else
                                    ir.DenseElementsAttr.get_splat(t, zero))])
    return branch.results[0]


def _guarded_load(p, et, eb, length, valid, fill):
    """:func:`_load_f32` where ``valid`` holds, else ``fill``: an ``scf.if``
    that ptxas turns into a predicated ``ld.global`` (the address stays
    ``reg + imm``; no select of addresses)."""
    fv = float(fill) if isinstance(fill, (int, float)) else None
    types = [f32()] * length
    branch = scf.IfOp(valid, types, has_else=True)
    with ir.InsertionPoint(branch.then_block):
        scf.YieldOp(_load_f32(p, et, eb, length))
    with ir.InsertionPoint(branch.else_block):
        f = arith.constant(f32(), fv) if fv is not None else _f32(fill, "fill")
        scf.YieldOp([f] * length)
    return list(branch.results)


def _store_rounded(vals, p, et, eb):
    """Store f32 ``vals`` as ``et`` at ``p``: one conversion of the vector
    (``cvt.rn.bf16x2.f32`` pairs) and one vector store."""
    if len(vals) == 1:
        v = vals[0] if et == f32() else arith.truncf(et, vals[0])
        llvm.store(v, p, alignment=eb)
        return
    v = vector.from_elements(ir.VectorType.get([len(vals)], f32()), list(vals))
    if et != f32():
        v = arith.truncf(ir.VectorType.get([len(vals)], et), v)
    llvm.store(v, p, alignment=len(vals) * eb)


def _tree(vals, fn):
    """A pairwise reduction: log2(len) dependent operations, not len."""
    vals = list(vals)
    while len(vals) > 1:
        nxt = [fn(vals[j], vals[j + 1]) for j in range(0, len(vals) - 1, 2)]
        if len(vals) % 2:
            nxt.append(vals[-1])
        vals = nxt
    return vals[0]


def rsqrt(x):
    """``1 / sqrt(x)`` of an f32 value or Scalar: PTX ``rsqrt.approx.ftz.f32``
    (relative error 2^-22.9; the NVVM dialect has no op, and the generic
    ``llvm.intr.sqrt`` would be a full-precision square root and a division)."""
    v = _f32(x, "rsqrt")
    r = llvm.call_intrinsic(f32(), "llvm.nvvm.rsqrt.approx.ftz.f", [v], [], [])
    return Scalar(r) if isinstance(x, Scalar) else r


def exp2(x):
    """``2 ** x`` of an f32 value or Scalar (``ex2.approx.ftz.f32``)."""
    r = _exp2(_f32(x, "exp2"))
    return Scalar(r) if isinstance(x, Scalar) else r


def reciprocal(x):
    """``1 / x`` of an f32 value or Scalar (``rcp.approx.ftz.f32``)."""
    r = _reciprocal(_f32(x, "reciprocal"))
    return Scalar(r) if isinstance(x, Scalar) else r


_IDENTITY = {"sum": 0.0, "max": float("-inf"), "min": float("inf")}


class RowValues:
    """One thread's f32 values of a row in a :class:`Rows` layout (see the
    module docstring): ``values[i]`` is column ``rows.column(t, i)``;
    ``masks[c]`` is None for a chunk inside the row, else the i1 that says
    whether this thread's vector of chunk ``c`` is."""

    __hash__ = object.__hash__
    _broadcasts_scalars = True       # Scalar's operators defer to ours

    def __init__(self, rows, values, masks):
        if len(values) != rows.count or len(masks) != rows.chunks:
            raise ValueError(f"RowValues of {rows!r}: {rows.count} values and "
                             f"{rows.chunks} masks, got {len(values)} and {len(masks)}")
        self.rows = rows
        self.values = [_f32(v, "RowValues") for v in values]
        self.masks = list(masks)

    def __repr__(self):
        return f"RowValues({self.rows!r})"

    # Loop-carried protocol (k.range / k.if_ carry=[...]).
    def _carry_values(self):
        return list(self.values)

    def _carry_rebind(self, values):
        self.values = list(values)

    def set(self, other):
        """Rebind to ``other`` (RowValues of the same layout): how a carried
        row is updated."""
        self._check(other, "RowValues.set")
        note_update(self, "set")
        self.values = list(other.values)

    def _check(self, other, what):
        if not isinstance(other, RowValues):
            raise TypeError(f"{what}: expected RowValues, got {type(other).__name__}")
        if not other.rows.same_layout(self.rows):
            raise ValueError(f"{what}: layouts differ: {self.rows!r} and {other.rows!r}; "
                             "values combine only in the same Rows layout")

    def _operand(self, other, what):
        if isinstance(other, Columns):
            return other.to_values(self.rows).values
        if isinstance(other, RowValues):
            self._check(other, what)
            return other.values
        v = _f32(other, what)
        return [v] * len(self.values)

    def _like(self, values, other=None):
        masks = self.masks
        if isinstance(other, RowValues):
            masks = [a if a is not None else b for a, b in zip(self.masks, other.masks)]
        return RowValues(self.rows, values, masks)

    def _bin(self, other, fn, swap=False, what="operand"):
        ov = self._operand(other, what)
        pairs = zip(ov, self.values) if swap else zip(self.values, ov)
        return self._like([fn(a, b) for a, b in pairs], other)

    def map(self, fn):
        """A new RowValues of ``fn(value)`` per value (f32 ir.Value in and out)."""
        return self._like([fn(v) for v in self.values])

    def __add__(self, o): return self._bin(o, arith.addf)
    def __radd__(self, o): return self._bin(o, arith.addf, True)
    def __sub__(self, o): return self._bin(o, arith.subf)
    def __rsub__(self, o): return self._bin(o, arith.subf, True)
    def __mul__(self, o): return self._bin(o, arith.mulf)
    def __rmul__(self, o): return self._bin(o, arith.mulf, True)
    def __truediv__(self, o): return self._bin(o, arith.divf)
    def __rtruediv__(self, o): return self._bin(o, arith.divf, True)

    def __neg__(self):
        return self.map(arith.negf)

    def _inplace(self, result):
        note_update(self, "updated in place")
        self.values = result.values
        return self

    def __iadd__(self, o): return self._inplace(self + o)
    def __isub__(self, o): return self._inplace(self - o)
    def __imul__(self, o): return self._inplace(self * o)
    def __itruediv__(self, o): return self._inplace(self / o)

    def maximum(self, o):
        """Per value, the larger (``maxnumf``: a NaN operand yields the other)."""
        return self._bin(o, arith.maxnumf)

    def minimum(self, o):
        return self._bin(o, arith.minnumf)

    def fma(self, b, c):
        """``self * b + c`` fused (one ``fma.rn.f32`` per value)."""
        bv, cv = self._operand(b, "fma"), self._operand(c, "fma")
        return self._like([llvm.intr_fma(a, x, y) for a, x, y in zip(self.values, bv, cv)])

    def exp2(self):
        """``2 ** x`` per value (``ex2.approx.ftz.f32``)."""
        return self.map(_exp2)

    def exp(self):
        """``e ** x`` per value, as ``ex2(x log2 e)`` (what fast softmaxes
        do; fold the ``log2 e`` into an ``fma`` when there is one)."""
        c = _f32(LOG2_E, "exp")
        return self.map(lambda v: _exp2(arith.mulf(v, c)))

    def rsqrt(self):
        return self.map(rsqrt)

    def reciprocal(self):
        return self.map(_reciprocal)

    def abs(self):
        return self.map(IrOps.abs)

    def where(self, keep, other):
        """Per value: this value where ``keep`` holds, else ``other`` (a
        number, Scalar or RowValues). ``keep`` is an i1 Scalar (the same for
        the whole row) or a function of the value's column (an i32 Scalar)
        returning an i1 Scalar or a Python bool."""
        ov = self._operand(other, "where")
        if not callable(keep):
            c = to_value(keep, what="where condition")
            return self._like([arith.select(c, a, b) for a, b in zip(self.values, ov)], other)
        t = self.rows.thread(_kernel("RowValues.where"))
        base = t * self.rows.vec
        out = []
        for i, (a, b) in enumerate(zip(self.values, ov)):
            cond = keep(base + (self.rows.column(0, i)))
            if cond is True:
                out.append(a)
            elif cond is False:
                out.append(b)
            else:
                out.append(arith.select(to_value(cond), a, b))
        return self._like(out, other)

    # -- reductions ---------------------------------------------------------

    def _local(self, kind, fn):
        """This thread's reduction of its values; out-of-row values of the
        tail chunk count as the identity, whatever they hold."""
        ident = None
        vals = []
        for c in range(self.rows.chunks):
            chunk = self.values[c * self.rows.vec:(c + 1) * self.rows.vec]
            if self.rows.chunk_masked(c):
                m = self.masks[c]
                if m is None:
                    m = self.rows._valid(self.rows.thread(_kernel("a row reduction")))
                if ident is None:
                    ident = arith.constant(f32(), _IDENTITY[kind])
                chunk = [arith.select(m, v, ident) for v in chunk]
            vals += chunk
        return _tree(vals, fn)

    def max_sum_exp2(self, scale, running=None):
        """This thread's online softmax statistics: ``(m, s)`` with ``m``
        the largest of its values and ``s`` the sum of ``exp2((v - m) *
        scale)`` over them, chunk by chunk (``s`` rescaled by ``exp2((m_old
        - m_new) * scale)`` when a chunk raises ``m``: one more ``ex2`` per
        chunk, and only a chunk's values live at once), continuing from
        ``running`` (an earlier ``(m, s)`` of f32 values). Out-of-row values
        count for nothing. Combine threads with :meth:`Rows.max_sum_exp2`.
        ``m`` starts at -3e38, not -inf, so that a thread with no value of
        the row keeps ``s = 0`` (``exp2(-inf - -inf)`` would be NaN)."""
        rows = self.rows
        k = None
        c_scale = _f32(scale, "max_sum_exp2 scale")
        if running is None:
            m, s = arith.constant(f32(), -3.0e38), arith.constant(f32(), 0.0)
        else:
            m, s = (_f32(v, "max_sum_exp2 running") for v in running)
        ninf = None
        for c in range(rows.chunks):
            chunk = self.values[c * rows.vec:(c + 1) * rows.vec]
            if rows.chunk_masked(c):
                mask = self.masks[c]
                if mask is None:
                    k = k or _kernel("max_sum_exp2")
                    mask = rows._valid(rows.thread(k))
                ninf = ninf or arith.constant(f32(), float("-inf"))
                chunk = [arith.select(mask, v, ninf) for v in chunk]
            new = arith.maxnumf(m, _tree(chunk, arith.maxnumf))
            neg = arith.negf(arith.mulf(new, c_scale))
            s = arith.mulf(s, _exp2(llvm.intr_fma(m, c_scale, neg)))
            s = arith.addf(s, _tree([_exp2(llvm.intr_fma(v, c_scale, neg)) for v in chunk],
                                    arith.addf))
            m = new
        return m, s

    def sum(self):
        """The row's sum (an f32 Scalar in every thread of the row)."""
        return self.rows.allreduce(self._local("sum", arith.addf), arith.addf)

    def max(self):
        """The row's maximum (``maxnumf``: NaN-ignoring)."""
        return self.rows.allreduce(self._local("max", arith.maxnumf), arith.maxnumf)

    def min(self):
        return self.rows.allreduce(self._local("min", arith.minnumf), arith.minnumf)


def _in_place(raw):
    """``raw`` (a vector of 16-bit values) through one ``mov.b32`` per
    register, an asm with side effects: LLVM would otherwise hoist the
    loop-invariant conversion of a per-column vector out of the row loop,
    and the f32 copies would take the registers its packed form saves.
    ptxas removes the moves."""
    t = raw.type
    if not isinstance(t, ir.VectorType) or t.element_type == f32() or t.shape[0] % 2:
        return raw
    words_t = ir.VectorType.get([t.shape[0] // 2], i32())
    words = llvm.bitcast(words_t, raw)
    moved = [llvm.inline_asm(i32(), [vector.extract(words, [], [j])], "mov.b32 $0, $1;",
                             "=r,r", has_side_effects=True)
             for j in range(t.shape[0] // 2)]
    return llvm.bitcast(t, vector.from_elements(words_t, moved))


class Columns:
    """A per-column vector (one value per column of the row: an RMSNorm
    weight, a bias) in a :class:`Rows` layout, held as it was loaded: two
    16-bit values per register, half the registers of f32 for the whole
    row loop, and converted to f32 where a row uses it (one ``cvt`` per
    value per row, cheaper than the occupancy the registers would cost:
    a bf16 RMSNorm of 2048 columns holds 64 weights per thread). ``x * w``
    with ``x`` RowValues multiplies column by column."""

    __hash__ = object.__hash__
    _broadcasts_scalars = True

    def __init__(self, rows, raw):
        self.rows = rows
        self.raw = list(raw)

    def __repr__(self):
        return f"Columns({self.rows!r})"

    def to_values(self, rows=None):
        """RowValues in f32, converted at the insertion point."""
        if rows is not None and not rows.same_layout(self.rows):
            raise ValueError(f"Columns of {self.rows!r} used with a row of {rows!r}; "
                             "load the vector with the row's Rows")
        values = [v for r in self.raw for v in _to_f32(_in_place(r))]
        return RowValues(self.rows, values, [None] * self.rows.chunks)

    def _op(self, o, name):
        return getattr(self.to_values(), name)(o)

    def __add__(self, o): return self._op(o, "__add__")
    def __radd__(self, o): return self._op(o, "__radd__")
    def __sub__(self, o): return self._op(o, "__sub__")
    def __rsub__(self, o): return self._op(o, "__rsub__")
    def __mul__(self, o): return self._op(o, "__mul__")
    def __rmul__(self, o): return self._op(o, "__rmul__")
    def __truediv__(self, o): return self._op(o, "__truediv__")
