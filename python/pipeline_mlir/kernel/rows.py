"""Row tensors: rows of a 2-D tensor in registers, for memory-bound kernels.

A softmax, a norm or an activation reads each row of an ``M x N`` tensor
once, does a few operations per element and one or two reductions per
row, and writes it back: its speed is the memory system's, so what
matters is wide, coalesced accesses with many of them in flight. A
:class:`Rows` is the layout that gets this: a row of ``n`` elements split
over ``threads`` threads (32: a warp per row; more: a CTA per row), each
thread holding ``vec`` contiguous elements per *chunk* (16 bytes: 8 bf16 /
f16 or 4 f32, one ``ld.global.v4``), chunks ``threads * vec`` elements
apart. Value ``i`` of thread ``t`` is column::

    (i / vec) * threads * vec + t * vec + i % vec

so a warp's 32 accesses of one chunk cover 512 contiguous bytes. ``n`` is a
build-time constant (the kernel is specialized per row length, as a
Triton or CuTe DSL softmax is): chunks that lie inside the row need no
mask, and only the last one, when ``threads * vec`` does not divide ``n``,
is guarded (a predicated load or store). ``vec`` is the largest power of
two that divides ``n`` within 16 bytes, so every access stays aligned for
any ``n`` (1001 columns: ``vec = 1``, scalar accesses).

A :class:`RowValues` is one thread's values of a row, in f32 whatever the
tensor's type (loads convert, stores round back): elementwise ``+ - * /``,
``fma``, ``maximum``/``minimum``, ``exp2`` / ``exp`` (``ex2.approx``),
``rsqrt``, ``reciprocal``, ``where``; a float ``Scalar`` broadcasts (a
per-row statistic: every thread of the row holds it), and another
RowValues of the same layout combines value by value, which is how a
per-column vector (an RMSNorm weight, loaded once per CTA with
:meth:`Rows.load_columns`) broadcasts over rows. ``sum()`` / ``max()`` /
``min()`` reduce the row to a float Scalar that every thread of the row
holds: each thread over its values, then ``shfl.sync.bfly`` across the
warp, then, for a CTA per row, through one f32 per warp in shared memory.

:meth:`Rows.grid_stride` is the loop over the rows a warp or CTA handles
(rows ``unit, unit + units, ...`` with ``units`` the warps or CTAs of the
grid, ``k.grid_dim()``), so one launch of any grid covers any ``M``.

This module is the layout; ``row_values.py`` holds :class:`RowValues`,
:class:`Columns` and the vector loads and stores a thread runs.
"""

import math
import weakref

import mlir.ir as ir
from mlir.dialects import arith, llvm, nvvm, scf, vector

from ..user_location import user_line
from .control import If
from .fragment import shfl_xor
from .fragment import exp2 as _exp2
from .memory import load as _load
from .memory import store as _store
# RowValues, Columns and the scalar math are re-exported: rows.py is where
# users import them from.
from .row_values import (Columns, RowValues, _f32, _guarded_load, _guarded_raw,  # noqa: F401
                         _kernel, _load_f32, _load_raw, _store_rounded, _tree,
                         exp2, reciprocal, rsqrt)
from .values import Scalar, f32, to_value

# Element type name -> (MLIR type factory, bytes).
DTYPES = {"bf16": (ir.BF16Type.get, 2), "f16": (ir.F16Type.get, 2),
          "f32": (ir.F32Type.get, 4)}
ACCESS_BYTES = 16          # the widest global access (ld.global.v4.b32)
WARP = 32
MAX_THREADS = 1024
# Values one thread holds: past MAX_VALUES a row's registers spill (Rows
# refuses it). row_threads aims at TARGET_VALUES per thread over at most
# CTA_THREADS threads, and takes up to MAX_VALUES before it takes more
# threads than that. Measured on an H200 (benchmarks/rows/bench_rows.py
# --alt, bf16, fraction of a device-to-device copy's bandwidth): a CTA of
# 1024 threads per row ran at 0.44 (softmax, 12288 columns) to 0.83
# (RMSNorm, 32768): each block reduction waits for 32 warps; the same rows
# over 512 threads ran at 0.86 to 0.92. Rows staged through a RowRing ran
# best near TARGET_VALUES (softmax of 16384 columns: 0.91 over 512
# threads, 32 values, 0.84 over 256, 64 values): the row's threads do the
# arithmetic while the producer warp loads, and more of them hide it.
TARGET_VALUES = 32
MAX_VALUES = 64
CTA_THREADS = 512


def _bytes(dtype, what):
    if dtype not in DTYPES:
        raise ValueError(f"{what}: dtype must be one of {sorted(DTYPES)}, got {dtype!r}")
    return DTYPES[dtype][1]


def _dtype(dtype, what):
    """(MLIR type, bytes) of ``dtype``: needs the kernel's context."""
    return DTYPES[dtype][0](), _bytes(dtype, what)


def widest_vec(n, dtype):
    """The largest power of two dividing ``n`` whose elements fit 16 bytes:
    every chunk of every row then starts 16-byte aligned (rows ``n``
    elements apart), so its access is one vector instruction."""
    eb = _bytes(dtype, "widest_vec")
    v = ACCESS_BYTES // eb
    while n % v:
        v //= 2
    return v


def row_threads(n, dtype="bf16"):
    """Threads per row for a row of ``n`` elements: a warp while each
    thread holds at most ``MAX_VALUES`` values (2048 bf16 or f32 columns),
    else a CTA: the smallest power of two from 128 to ``CTA_THREADS`` that
    brings a thread to ``TARGET_VALUES``, or ``CTA_THREADS`` while a thread
    holds at most ``MAX_VALUES`` (32768 bf16 columns), and 1024 only past
    that. A warp per row needs no shared memory and no barrier; past it, a
    warp's registers cannot hold the row; a CTA of 1024 threads is slow
    (the measurements above)."""
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"row_threads: n must be a positive int, got {n!r}")
    vec = widest_vec(n, dtype)

    def values(threads):
        return math.ceil(n / (threads * vec)) * vec

    if values(WARP) <= MAX_VALUES:
        return WARP
    threads = 128
    while threads < CTA_THREADS and values(threads) > TARGET_VALUES:
        threads *= 2
    while threads < MAX_THREADS and values(threads) > MAX_VALUES:
        threads *= 2
    return threads


class Rows:
    """The layout of one row of ``n`` elements of ``dtype`` over
    ``threads`` threads (see the module docstring). Pure Python until a
    kernel method is called: :meth:`column`, :meth:`holds` and
    :meth:`thread_columns` are the model the kernel's index math follows
    (test/python/test_rows.py checks them; the GPU suite checks the
    kernels)."""

    def __init__(self, n, dtype="bf16", threads=WARP, vec=None):
        if not isinstance(n, int) or n < 1:
            raise ValueError(f"Rows: n must be a positive int, got {n!r}")
        self.elem_bytes = _bytes(dtype, "Rows")
        if not isinstance(threads, int) or threads < WARP or threads % WARP or \
                threads > MAX_THREADS:
            raise ValueError(f"Rows: threads must be a multiple of 32 in 32..1024 (a warp "
                             f"or a CTA per row), got {threads!r}")
        if vec is None:
            vec = widest_vec(n, dtype)
        if not isinstance(vec, int) or vec < 1 or vec & (vec - 1) or n % vec or \
                vec * self.elem_bytes > ACCESS_BYTES:
            raise ValueError(
                f"Rows: vec={vec!r} must be a power of two dividing n={n} with "
                f"vec * {self.elem_bytes} bytes <= {ACCESS_BYTES} (an aligned vector "
                f"access); leave it out for the widest, {widest_vec(n, dtype)}")
        self.n, self.dtype, self.threads, self.vec = n, dtype, threads, vec
        self.stride = threads * vec                  # elements between a thread's chunks
        self.chunks = math.ceil(n / self.stride)
        self.full_chunks = n // self.stride          # chunks no thread needs a mask for
        # Threads whose vector of the last, partial chunk lies inside the row.
        self.tail_threads = (n % self.stride) // vec
        self.count = self.chunks * vec               # values per thread
        if self.count > MAX_VALUES:
            raise ValueError(
                f"Rows: a row of {n} elements over {threads} threads gives each thread "
                f"{self.count} values (more than {MAX_VALUES} registers' worth: the row "
                f"would spill); use more threads per row (row_threads({n}, "
                f"{dtype!r}) = {row_threads(n, dtype)}), up to 1024")
        # kernel -> its block-reduction buffer; weak, so that a Rows reused
        # across kernels neither keeps them alive nor meets a dead one's id.
        self._buffers = weakref.WeakKeyDictionary()
        # kernel -> its RowRing (row_ring.py): the block holds a producer
        # warp besides the row's threads, and reductions sync on a named
        # barrier of the row's threads.
        self._rings = weakref.WeakKeyDictionary()

    def __repr__(self):
        return (f"Rows(n={self.n}, dtype={self.dtype!r}, threads={self.threads}, "
                f"vec={self.vec}: {self.chunks} chunks, {self.count} values per thread)")

    @property
    def per_warp(self):
        return self.threads == WARP

    # -- the model (Python ints) ----------------------------------------------

    def column(self, thread, i):
        """Column of value ``i`` of ``thread`` (may be ``>= n`` in the tail)."""
        return (i // self.vec) * self.stride + thread * self.vec + i % self.vec

    def holds(self, thread, i):
        """Whether value ``i`` of ``thread`` is an element of the row."""
        return self.column(thread, i) < self.n

    def thread_columns(self, thread):
        """The columns ``thread`` holds, in value order."""
        return [self.column(thread, i) for i in range(self.count) if self.holds(thread, i)]

    def chunk_masked(self, c):
        """Whether chunk ``c`` needs a per-thread guard (the partial last one)."""
        return c >= self.full_chunks

    # -- kernel side ----------------------------------------------------------

    def thread(self, k):
        """This thread's position in its row: the lane for a warp per row,
        the thread index for a CTA per row (an i32 Scalar)."""
        if self.per_warp:
            return k.lane_idx()
        self._check_block(k)
        return k.linear_thread_idx()

    def _check_block(self, k):
        threads = k.block_dim[0] * k.block_dim[1] * k.block_dim[2]
        if self.per_warp:
            return threads // WARP
        ring = self._rings.get(k)
        want = self.threads if ring is None else ring.block_threads(self)
        if threads != want:
            raise ValueError(
                f"Rows: a CTA per row of {self.threads} threads, but kernel "
                f"{k.name!r} has {threads}: its block reductions take every thread "
                f"of the CTA. Build the kernel with block_dim={want}")
        return 1

    def rows_per_cta(self, k):
        """Rows a CTA works on at once: its warps for a warp per row, else 1."""
        return self._check_block(k)

    def grid_stride(self, k, m, carry=()):
        """``for row in rows.grid_stride(k, m):`` the rows this warp (or
        CTA) handles: ``unit, unit + units, ...`` below ``m``, where ``unit``
        is the warp's (CTA's) index in the grid and ``units`` the grid's
        warps (CTAs): any grid covers any ``m``, and a grid of one wave
        keeps its CTAs resident. ``carry`` as in ``k.range``."""
        per_cta = self.rows_per_cta(k)
        first = k.block_idx() * per_cta
        if per_cta > 1:
            first = first + k.warp_idx()
        step = k.grid_dim() * per_cta if per_cta > 1 else k.grid_dim()
        return k.range(first, m, step, carry=carry)

    def _valid(self, t):
        """The i1 guard of the last chunk for thread position ``t``, or None
        when every chunk lies inside the row."""
        if self.full_chunks == self.chunks:
            return None
        return (t < self.tail_threads).ir_value

    def _pieces(self, eb):
        """(element offset, length) of the vector accesses of one chunk of
        elements of ``eb`` bytes: one when the chunk is at most 16 bytes
        (an f32 weight beside bf16 rows takes two)."""
        per = max(1, min(self.vec, ACCESS_BYTES // eb))
        return [(o, per) for o in range(0, self.vec, per)]

    def _thread_ptr(self, ptr, row, ld, t, eb):
        """``&ptr[row * ld + t * vec]`` in bytes, i64 offsets (``row * ld``
        may pass 2^31); chunks add constants to it, so each access is
        ``[reg + imm]``."""
        base = to_value(ptr, what="row pointer")
        ld = self.n if ld is None else ld
        col = t * self.vec
        if isinstance(row, int) and row == 0:
            off = col.to(64) * eb
        else:
            r64 = row.to(64) if isinstance(row, Scalar) else Scalar(row).to(64)
            ld64 = ld.to(64) if isinstance(ld, Scalar) else ld
            off = (r64 * ld64 + col.to(64)) * eb
        return llvm.getelementptr(base.type, base, [off.ir_value], [-2147483648],
                                  ir.IntegerType.get_signless(8), 0)

    @staticmethod
    def _at(p, byte_offset):
        if byte_offset == 0:
            return p
        return llvm.getelementptr(p.type, p, [], [byte_offset],
                                  ir.IntegerType.get_signless(8), 0)

    @user_line
    def load(self, ptr, row, ld=None, fill=0.0, dtype=None, k=None):
        """Row ``row`` of the row-major tensor at the global pointer ``ptr``
        (rows ``ld`` elements apart, default ``n``) as this thread's
        :class:`RowValues` in f32. Values past the row's end read as
        ``fill`` (a guarded, predicated load); reductions skip them
        whatever they hold. ``dtype``: the tensor's, default the layout's."""
        k = k or _kernel("Rows.load")
        t = self.thread(k)
        return self._load_at(ptr, row, ld, fill, dtype or self.dtype, t)

    @user_line
    def load_columns(self, ptr, dtype=None, k=None):
        """A per-column vector of ``n`` elements at ``ptr`` (an RMSNorm
        weight, a bias) in this layout, as :class:`Columns`: combined with
        a row it applies value ``c`` to column ``c``. Load it once, before
        the row loop: every row this thread handles uses the same columns.
        Columns past the row's end read as 0."""
        k = k or _kernel("Rows.load_columns")
        et, eb = _dtype(dtype or self.dtype, "Rows.load_columns")
        t = self.thread(k)
        p = self._thread_ptr(ptr, 0, None, t, eb)
        valid = self._valid(t)
        raw = []
        for c in range(self.chunks):
            for o, length in self._pieces(eb):
                at = self._at(p, (c * self.stride + o) * eb)
                if self.chunk_masked(c):
                    raw.append(_guarded_raw(at, et, eb, length, valid))
                else:
                    raw.append(_load_raw(at, et, eb, length))
        return Columns(self, raw)

    def _load_at(self, ptr, row, ld, fill, dtype, t):
        et, eb = _dtype(dtype, "Rows.load")
        p = self._thread_ptr(ptr, row, ld, t, eb)
        valid = self._valid(t)
        values, masks = [], []
        for c in range(self.chunks):
            masked = self.chunk_masked(c)
            for o, length in self._pieces(eb):
                at = self._at(p, (c * self.stride + o) * eb)
                if masked:
                    values += _guarded_load(at, et, eb, length, valid, fill)
                else:
                    values += _load_f32(at, et, eb, length)
            masks.append(valid if masked else None)
        return RowValues(self, values, masks)

    @user_line
    def store(self, values, ptr, row, ld=None, dtype=None, k=None):
        """Write ``values`` (a RowValues of this layout) to row ``row`` of
        the tensor at ``ptr``, rounded to ``dtype`` (default the layout's;
        ``cvt.rn``); the tail's out-of-row values are not written."""
        if not isinstance(values, RowValues) or not values.rows.same_layout(self):
            raise TypeError(f"Rows.store: expected RowValues of {self!r}, got "
                            f"{getattr(values, 'rows', type(values).__name__)!r}")
        k = k or _kernel("Rows.store")
        et, eb = _dtype(dtype or self.dtype, "Rows.store")
        t = self.thread(k)
        p = self._thread_ptr(ptr, row, ld, t, eb)
        valid = self._valid(t)
        for c in range(self.chunks):
            for o, length in self._pieces(eb):
                vals = values.values[c * self.vec + o:c * self.vec + o + length]
                at = self._at(p, (c * self.stride + o) * eb)
                if self.chunk_masked(c):
                    branch = scf.IfOp(valid, [], has_else=False)
                    with ir.InsertionPoint(branch.then_block):
                        _store_rounded(vals, at, et, eb)
                        scf.YieldOp([])
                else:
                    _store_rounded(vals, at, et, eb)

    def full(self, value):
        """RowValues holding ``value`` everywhere (an f32 number or Scalar)."""
        v = _f32(value, "Rows.full")
        return RowValues(self, [v] * self.count, [None] * self.chunks)

    def same_layout(self, other):
        return isinstance(other, Rows) and (other.n, other.threads, other.vec) == \
            (self.n, self.threads, self.vec)

    # -- reductions across threads ------------------------------------------

    @user_line
    def max_sum_exp2(self, m, s, scale, k=None):
        """The row's softmax statistics from each thread's ``(m, s)``
        (:meth:`RowValues.max_sum_exp2`): ``M``, the row's maximum, and
        ``S``, the sum of ``exp2((v - M) * scale)`` over the row, as f32
        Scalars in every thread of the row (two reductions: the maximum,
        then the rescaled sums)."""
        top = self.allreduce(m, arith.maxnumf, k)
        c_scale = _f32(scale, "max_sum_exp2 scale")
        neg = arith.negf(arith.mulf(top.ir_value, c_scale))
        mine = arith.mulf(to_value(s), _exp2(llvm.intr_fma(to_value(m), c_scale, neg)))
        return top, self.allreduce(mine, arith.addf, k)

    @user_line
    def allreduce(self, value, fn, k=None):
        """``fn`` over one f32 value per thread of the row, the result in
        every thread: five butterfly shuffles across the warp, then, for a
        CTA per row, one value per warp through shared memory."""
        v = to_value(value)
        for mask in (16, 8, 4, 2, 1):
            v = fn(v, shfl_xor(v, mask))
        if self.per_warp:
            return Scalar(v)
        k = k or _kernel("a block reduction")
        return Scalar(self._block_reduce(k, v, fn))

    def _block_reduce(self, k, v, fn):
        warps = self.threads // WARP
        buf = self._buffers.get(k)
        if buf is None:
            buf = self._buffers[k] = k.smem_alloc(4 * warps, align=16, name="row reduction")
        tid = k.linear_thread_idx()
        with If(tid % WARP == 0):
            _store(v, buf, tid // WARP)
        ring = self._rings.get(k)
        sync = nvvm.barrier0 if ring is None else ring.reductions.sync
        sync()                       # every warp's value is written
        parts = []
        if warps % 4 == 0:           # ld.shared.v4: a quarter of the loads
            v4 = ir.VectorType.get([4], f32())
            for j in range(warps // 4):
                x = _load(buf, v4, j)
                parts += [vector.extract(x, [], [e]) for e in range(4)]
        else:
            parts = [_load(buf, f32(), w) for w in range(warps)]
        out = _tree(parts, fn)
        # The next reduction rewrites this buffer: no warp may write it
        # before every warp has read this one's values.
        sync()
        if ring is not None and ring.cluster > 1:   # a row split over a cluster
            out = ring.exchange(out, fn)
        return out
