"""Stage: the online softmax of one S block and its mask (``OnlineSoftmax``)."""

from mlir.dialects import arith

from pipeline_mlir.kernel import Scalar
from pipeline_mlir.kernel.fragment import RowVector
from pipeline_mlir.kernel.values import f32, to_value

from .config import packed_shift
from .exponentials import exponentials, half_row_sums


class OnlineSoftmax:
    """The online softmax of one S block (``__call__``), after the mask
    (``mask``: the sequence's tail, and the causal diagonal)."""

    def __init__(self, k, cfg, sched, scale_log2, thread_row, thread_col):
        self.k, self.cfg, self.sched = k, cfg, sched
        self.scale_log2 = scale_log2
        self.thread_row, self.thread_col = thread_row, thread_col

    def mask(self, s_acc, j, m_row0):
        """-inf where key column c of block j is past the sequence's end or
        (causal) after query row r's diagonal."""
        col0 = j * self.cfg.kv_block + self.thread_col
        if self.cfg.pack_gqa:
            # Packed row i is query position i // g: the thread's rows 8
            # apart are 8 / g positions apart (g divides 8).
            row0 = (m_row0 + self.thread_row) >> packed_shift(self.cfg)
            group = self.cfg.pack_gqa
        else:
            row0 = m_row0 + self.thread_row
            group = 1
        tail = self.sched.seqlen_k - col0          # keep c < tail
        diag = row0 + self.sched.offset - col0     # keep c - r <= diag
        causal = self.cfg.causal

        def keep(r, c):
            ok = tail > c
            return ok & (diag >= c - r // group) if causal else ok

        s_acc.set(s_acc.where(keep, float("-inf")))

    def __call__(self, s_acc, acc, j, m_row0, masked, first):
        """Online softmax of S_j: mask (where ``masked`` holds), new row
        max, P = exp2(S * scale_log2 - max), the running sum; returns P and
        the correction exp2(old max - new max) that O needs before the
        next P V (None for the first block). With ``cfg.row_sum_mma`` the
        row sum is left alone: P V's row-sum GEMM adds it up."""
        row_max, row_sum, scale_log2 = acc.row_max, acc.row_sum, self.scale_log2
        if masked is not None:
            with self.k.if_(masked, carry=[s_acc]):
                self.mask(s_acc, j, m_row0)
        new_max = row_max.max(s_acc.row_max())
        if self.cfg.rescale_threshold and not first:
            new_max = lazy_max(row_max, new_max, scale_log2, self.cfg.rescale_threshold)
        scaled = new_max * scale_log2
        # A fully masked row keeps max -inf: use 0 so exp2 gives 0s.
        finite = [Scalar(v) != float("-inf") for v in new_max.values]
        scaled = scaled.where(finite, 0.0)
        p = exponentials(s_acc.fma(scale_log2, -scaled), self.cfg.exp2_poly,
                         self.cfg.exp2_poly_degree, half=self.cfg.exp2_poly_half)
        if self.cfg.row_sum_mma:
            # The row sum comes from the tensor pipe (P V's ones column).
            corr = None if first else (row_max * scale_log2 - scaled).exp2()
        elif not first:
            corr = (row_max * scale_log2 - scaled).exp2()
            row_sum.set(row_sum * corr + self.partial_sums(p))
        else:
            corr = None
            row_sum.set(self.partial_sums(p))
        row_max.set(new_max)
        return p, corr

    def partial_sums(self, p):
        """The thread's partial row sums of P (the FMA pipe's; with
        ``cfg.exp2_poly_half`` its f16x2 pairs added as such)."""
        if self.cfg.exp2_poly_half:
            return RowVector(half_row_sums(p.values, self.cfg.exp2_poly))
        return p.row_sum_partial()


def lazy_max(old, new, scale_log2, threshold):
    """``AttentionConfig.rescale_threshold``: per row, the running max
    ``old`` kept where the new max ``new`` exceeds it by at most
    ``threshold`` in the exponent ((new - old) * scale_log2 <= threshold):
    P is then exp2 of values up to ``threshold`` (P <= 2^threshold) and the
    row's correction exp2(old - kept) is exactly 1. A row whose max was
    -inf takes the new one (the difference is +inf or NaN, never <=)."""
    keep = [arith.cmpf(arith.CmpFPredicate.OLE,
                       arith.mulf(arith.subf(n, o), to_value(scale_log2)),
                       to_value(float(threshold), f32()))
            for o, n in zip(old.values, new.values)]
    return RowVector([arith.select(c, o, n) for c, o, n in zip(keep, old.values, new.values)])
