"""Stage: the softmax gradient in registers, P^T (masked) and dS^T
(``SoftmaxGrad``), and the loads of LSE and dPsum it reads
(``load_columns``).
"""

import mlir.ir as ir
from mlir.dialects import arith, llvm, nvvm

from pipeline_mlir.chip_limits import WGMMA_M
from pipeline_mlir.kernel import Scalar, wgmma
from pipeline_mlir.kernel.f32_math import _FULL_MASK
from pipeline_mlir.kernel.fragment import ColVector, Fragment, OperandA, exp2
from pipeline_mlir.kernel.memory import element_ptr
from pipeline_mlir.kernel.values import f32, i32, to_value
from pipeline_mlir.user_location import user_line

from .config import BLOCK_M


@user_line
def load_columns(stage, lane, n):
    """The ``n`` fp32 values of a query block (a stage of 'lse' or 'dpsum')
    that this thread's columns of an ``m64 x n`` fragment need, as a
    ColVector: one 8-byte shared load per pair of adjacent columns."""
    pair_t = ir.VectorType.get([2], f32())
    first = (lane % 4) * 2
    values = []
    for j in range(n // 8):
        ptr = element_ptr(stage, f32(), first + 8 * j)
        v = llvm.load(pair_t, ptr.ir_value)
        for e in range(2):
            values.append(llvm.extractelement(v, to_value(Scalar(e))))
    return ColVector(n, values)


class ShuffledColumns:
    """The ``n`` fp32 values of a query block (a stage of 'lse' or
    'dpsum') that an ``m64 x n`` fragment's columns need, held by 8 lanes
    each (``stat_shuffle``): the lanes of one ``lane % 4`` need the same
    columns, so lane ``4 t + q`` loads only those of the column groups
    ``j`` (8 columns each, ``n / 8`` of them) in ``[g t, g t + g)``, ``g =
    n / 64`` (``held_columns``), and ``value(k)`` (the ColVector index:
    group ``k // 2``, element ``k % 2``) takes it from the lane that holds
    it (``source``) with one ``shfl.sync.idx``, emitted where it is first
    used."""

    # shfl.sync.idx's ``c`` with ``shuffle_imm``: segment mask 3 (bits 8-12:
    # the lane's own ``lane % 4`` kept), clamp 31.
    SEGMENT_C = (3 << 8) | 0x1F

    def __init__(self, stage, lane, n, immediate=False):
        pair_t = ir.VectorType.get([2], f32())
        self.n, self.lane, self.immediate = n, lane, immediate
        self.held = []
        for g in range(n // 64):
            v = llvm.load(pair_t, element_ptr(stage, f32(),
                                              self.held_columns(lane, n, 2 * g)).ir_value)
            self.held += [llvm.extractelement(v, to_value(Scalar(e))) for e in range(2)]
        self._got = {}

    @staticmethod
    def held_columns(lane, n, h):
        """Column (query in the block) of held value ``h`` of lane ``lane``
        (a Scalar or an int)."""
        g = n // 64
        return (lane % 4) * 2 + (lane // 4) * (8 * g) + 8 * (h // 2) + h % 2

    @staticmethod
    def source(lane, n, k):
        """(lane, held value) that holds ColVector value ``k`` of lane
        ``lane``: the same ``lane % 4``, the lane whose groups hold ``k //
        2``."""
        g = n // 64
        j, e = k // 2, k % 2
        return (lane % 4) + 4 * (j // g), 2 * (j % g) + e

    @classmethod
    def immediates(cls, n, k):
        """(b, c, held value) of value ``k``'s ``shfl.sync.idx`` with
        ``shuffle_imm``: ``b`` the source's ``4 t`` (a constant, the same for
        every lane), ``c`` = ``SEGMENT_C``, whose segment mask keeps the
        reading lane's ``lane % 4`` (``shfl_idx_source`` gives the lane read,
        ``source``'s)."""
        g = n // 64
        j, e = k // 2, k % 2
        return 4 * (j // g), cls.SEGMENT_C, 2 * (j % g) + e

    @staticmethod
    def shfl_idx_source(lane, b, c):
        """The lane that ``shfl.sync.idx`` with operands ``b`` and ``c`` reads
        for ``lane``, by the PTX ISA's definition (its own lane where the
        source is past the clamp)."""
        segmask, cval = (c >> 8) & 0x1F, c & 0x1F
        max_lane = (lane & segmask) | (cval & ~segmask & 0x1F)
        j = (lane & segmask) | (b & 0x1F & ~segmask)
        return j if j <= max_lane else lane

    def value(self, k):
        """Value ``k`` of the thread's ColVector (group ``k // 2``)."""
        if k not in self._got:
            if self.immediate:
                b, c, h = self.immediates(self.n, k)
            else:
                (b, h), c = self.source(self.lane, self.n, k), 0x1F
            self._got[k] = nvvm.shfl_sync(f32(), to_value(_FULL_MASK, i32()), self.held[h],
                                          to_value(b, i32()), to_value(c, i32()),
                                          nvvm.ShflKind.idx)
        return self._got[k]


def unpack_bf16(operand):
    """The fp32 values of a bf16 ``OperandA`` (``p_packed``), in the
    fragment's order (register ``j`` holds values ``2 j`` and ``2 j + 1``,
    the low half first): each bf16 widened exactly."""
    bf2 = ir.VectorType.get([2], ir.BF16Type.get())
    f2 = ir.VectorType.get([2], f32())
    values = []
    for regs in operand.slices:
        for r in regs:
            pair = arith.extf(f2, llvm.bitcast(bf2, r))
            values += [llvm.extractelement(pair, to_value(Scalar(e))) for e in range(2)]
    return values


def packed_where(operand, keep):
    """A bf16 ``OperandA`` with each value where ``keep(row, col)`` fails
    set to +0 (its half of the i32 cleared): ``Fragment.where(keep, 0.0)``
    before the packing, on the packed registers (register ``j`` holds
    fragment values ``2 j`` (low half) and ``2 j + 1``: one row, adjacent
    columns)."""
    i32t = i32()
    halves = (arith.constant(i32t, -65536),   # 0xFFFF0000: keeps the high half
              arith.constant(i32t, 0xFFFF))    # keeps the low half
    out = []
    for j, r_ in enumerate(r for regs in operand.slices for r in regs):
        row, col = Fragment.element_offset(2 * j)
        for e in range(2):
            cond = keep(row, col + e)
            if cond is True:
                continue
            cleared = arith.andi(r_, halves[e])
            r_ = cleared if cond is False else arith.select(to_value(cond), r_, cleared)
        out.append(r_)
    return OperandA(operand.dtype, [out[4 * s:4 * s + 4] for s in range(len(out) // 4)])


def _col(i):
    """The ColVector index (column) of fragment value ``i``."""
    return 2 * (i // 4) + i % 2


class SoftmaxGrad:
    """P^T and dS^T in registers, once the score GEMMs retire:

        P^T  = exp2(S^T * scale * log2(e) - LSE * log2(e)), masked
        dS^T = P^T * (dP^T - dPsum)

    LSE and dPsum are read from their ring stages between the wait and the
    release, each as the columns (queries) this thread holds."""

    def __init__(self, k, cfg, rings, sched, args, cw, lane, thread_row, thread_col):
        self.k, self.cfg, self.rings, self.sched, self.args = k, cfg, rings, sched, args
        self.lane, self.thread_col = lane, thread_col
        # split_scores: this warpgroup's queries start at score_n * cw.
        self.col_off = cfg.score_n * cw if cfg.split_scores else None
        if self.col_off is not None:
            self.thread_col = thread_col + self.col_off
        if cfg.column_parts == 1:
            self.key0 = sched.n_block * cfg.block_n + cw * WGMMA_M + thread_row  # first key
        else:
            self.key0 = sched.n_block * cfg.block_n + thread_row     # the keys are shared

    def __call__(self, s, dp, lse_read, dpsum_read, m_block):
        """(P^T, dS^T) of the step's S^T and dP^T (both groups retired
        here); with ``p_packed`` P^T comes back as dV's bf16 ``OperandA``
        and dS^T is computed from those rounded values. With ``stat_shuffle`` LSE and dPsum are ``ShuffledColumns``,
        each value shuffled to this lane right before the values of its
        column use it."""
        lse = self.load_lse(lse_read)
        wgmma.wait_group(1)                      # S^T retired
        if not self.cfg.stat_shuffle:
            p = s.fma(self.args.scale_log2, -lse).exp2()
        else:
            scale = to_value(self.args.scale_log2, f32())
            p = Fragment(s.n, values=[
                exp2(llvm.intr_fma(v, scale, arith.negf(lse.value(_col(i)))))
                for i, v in enumerate(s.values)])
        p_out = p
        if self.cfg.p_packed:
            # dV's bf16 A operand now, masked as such: P's fp32 values die
            # here, and dS^T reads P back from these (``unpack_bf16``).
            p_out = p.to_operand_a("bf16")
            self.mask(p_out, m_block)
            p = Fragment(s.n, values=unpack_bf16(p_out))
        else:
            self.mask(p, m_block)
        dpsum = self.load_dpsum(dpsum_read)
        wgmma.wait_group(0)                      # dP^T retired
        if not self.cfg.stat_shuffle:
            return p_out, p * (dp - dpsum)
        return p_out, Fragment(s.n, values=[
            arith.mulf(a, arith.subf(b, dpsum.value(_col(i))))
            for i, (a, b) in enumerate(zip(p.values, dp.values))])

    def columns(self, stage):
        """A stage's values for this thread's columns: a ColVector, or
        with ``stat_shuffle`` a ``ShuffledColumns``."""
        if self.cfg.stat_shuffle:
            return ShuffledColumns(stage, self.lane, self.cfg.block_m, self.cfg.shuffle_imm)
        if self.col_off is not None:             # split_scores: this warpgroup's queries
            return load_columns(stage + self.col_off * 4, self.lane, self.cfg.score_n)
        return load_columns(stage, self.lane, self.cfg.block_m)

    def load_lse(self, lse_read):
        """LSE's values: waited for and released on its ring, or with
        ``stats_with_tiles`` read from the row on Q's stage (``lse_read`` is
        Q's state, held by ``Mainloop`` from its wait to its release)."""
        return self.load_row(self.rings.lse, lse_read)

    def load_dpsum(self, dpsum_read):
        """dPsum's values, as ``load_lse`` (on dO's stage)."""
        return self.load_row(self.rings.dpsum, dpsum_read)

    def load_row(self, ring, read):
        if ring.pipe is None:                    # stats_with_tiles: on a tile's stage
            return self.columns(ring.buffer(read.index))
        ring.pipe.consumer_wait(read)
        values = self.columns(ring.buffer(read.index))
        ring.pipe.consumer_release(read)
        return values

    def mask(self, p, m_block):
        """P^T = 0 where the key is past the sequence or (causal) after the
        query's diagonal; only in blocks that cross either. ``p``: a
        Fragment, or (``p_packed``) its bf16 ``OperandA``."""
        k, cfg, sched = self.k, self.cfg, self.sched
        bm, bn, n_block, seqlen_k = cfg.block_m, cfg.block_n, sched.n_block, sched.seqlen_k
        offset = sched.offset
        col0 = m_block * bm + self.thread_col     # this thread's first query
        tail = (n_block + 1) * bn > seqlen_k      # some key past the end
        if cfg.causal:
            # Key c is visible to query r when c <= r + offset.
            needs = tail | (n_block * bn + bn - 1 > m_block * bm + offset)
        else:
            needs = tail
        key0 = self.key0
        with k.if_(needs, carry=[p]):
            if cfg.block_m > BLOCK_M:
                keep = self.keep_by_offsets(key0, col0, seqlen_k, offset)
            else:
                def keep(r, c):
                    key = key0 + r
                    ok = key < seqlen_k
                    return ok & (key <= col0 + c + offset) if cfg.causal else ok
            p.set(p.where(keep, 0.0) if isinstance(p, Fragment) else packed_where(p, keep))

    def keep_by_offsets(self, key0, col0, seqlen_k, offset):
        """``keep(r, c)`` for 128-query steps: the same conditions as
        ``mask``'s, each a compare of two runtime values (computed once)
        with the value's constant offsets, ``key0 + r < seqlen_k`` as ``r <
        seqlen_k - key0`` and ``key0 + r <= col0 + c + offset`` as ``r - c <=
        col0 + offset - key0``, rather than one sum per column: with the
        32 column sums the causal build spilled 140 bytes, with these 92
        (ptxas -v; the full one 84). Not yet measured on a GPU."""
        left = seqlen_k - key0
        room = col0 + offset - key0

        def keep(r, c):
            ok = left > r
            return ok & (room >= r - c) if self.cfg.causal else ok
        return keep
