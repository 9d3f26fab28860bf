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
and the per-row scale of online softmax.

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
LOG2_E = math.log2(math.e)
_FULL_MASK = -1          # all 32 lanes of the warp take part in a shuffle


def _f32_value(x, what):
    """An f32 ir.Value from a Python number, a float Scalar or an f32 value."""
    v = to_value(x, f32() if isinstance(x, (int, float)) else None, what=what)
    if v.type != f32():
        raise TypeError(f"{what}: expected an f32 value, got {v.type}")
    return v


def shfl_xor(value, mask):
    """``shfl.sync.bfly.b32`` of an f32 value with the lane ``lane ^ mask``
    (all 32 lanes take part)."""
    return nvvm.shfl_sync(value.type, to_value(_FULL_MASK, i32()), value,
                          to_value(mask, i32()), to_value(0x1F, i32()),
                          nvvm.ShflKind.bfly)


def _nvvm_intrinsic(name, *args):
    """A call of the NVVM intrinsic ``name`` returning f32. Used where the
    NVVM dialect has no op and the generic LLVM intrinsic is not an option:
    the GPU-to-NVVM conversion rewrites ``llvm.intr.exp2``/``log2`` of f32
    into libdevice calls (``__nv_exp2f``), which would need libdevice linked
    and cost a function's worth of range checks per value."""
    return llvm.call_intrinsic(f32(), name, list(args), [], [])


def exp2(x):
    """``2 ** x`` of an f32 value: PTX ``ex2.approx.ftz.f32`` (2 ulp, what
    every fast softmax uses; subnormal results flush to 0)."""
    return _nvvm_intrinsic("llvm.nvvm.ex2.approx.ftz.f", x)


def log2(x):
    """``log2 x`` of an f32 value: PTX ``lg2.approx.ftz.f32``."""
    return _nvvm_intrinsic("llvm.nvvm.lg2.approx.ftz.f", x)


def reciprocal(x):
    """``1 / x`` of an f32 value (PTX ``rcp.approx.ftz.f32``)."""
    return nvvm.rcp_approx_ftz_f(f32(), x)


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
        RowVector broadcast along its rows, a scalar broadcast everywhere."""
        if isinstance(other, Fragment):
            self._check_same(other)
            return other.values
        if isinstance(other, RowVector):
            return [other.values[(i // 2) % 2] for i in range(self.count)]
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

    def to_operand_a(self, dtype="bf16"):
        """This tile converted to ``dtype`` and packed as the register A
        operand of ``wgmma`` (an :class:`OperandA` of ``n / k`` k-slices)."""
        return OperandA.from_fragment(self, dtype)

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
    def from_fragment(cls, frag, dtype):
        t, bits = _float_type(dtype, "to_operand_a")
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
            return cls(dtype, [_fp8_a_slice(frag, dtype, s) for s in range(frag.n // 32)])
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
