"""Stage: what one CTA of the backward works on (``KeyBlockSchedule``): its
key block and the (query head, query block) steps that see it; and the
order the grid's block indices take the key blocks in (``key_block_of``).
"""

from pipeline_mlir.kernel import Scalar


# (batch, K/V head) pairs per group of ``lpt_order``: enough that a group's
# heaviest key blocks start together and its lightest end the grid, few
# enough that the heads in flight keep their Q, dO and dQ in L2.
LPT_PAIRS = 4


def _smaller(a, b):
    return a.min(b) if isinstance(a, Scalar) else min(a, b)


def key_block_of(cta, n_blocks, pairs, lpt_order):
    """(pair, n_block) of block index ``cta``: the (batch, K/V head) pair
    ``pair`` of ``pairs`` and its key block ``n_block`` of ``n_blocks``.
    In block order (the order the hardware starts CTAs in) the default
    walks each pair's key blocks in turn; with ``lpt_order`` the pairs go
    in groups of ``LPT_PAIRS`` (the last group may hold fewer) and a group
    walks key block 0 of each of its pairs, then key block 1 of each, and
    so on. Causal, key block 0 is seen by every query block and the last
    by the fewest, so each group starts its longest CTAs first and the
    grid ends on the shortest ones (longest-processing-time first), where
    the default starts the last pair's longest CTA among the grid's last.
    ``cta`` and the counts: kernel ``Scalar`` values or Python ints (the
    same arithmetic)."""
    if not lpt_order:
        n_block = cta % n_blocks
        return cta // n_blocks, n_block
    span = LPT_PAIRS * n_blocks                 # block indices of one full group
    first = cta // span * LPT_PAIRS             # the group's first pair
    width = _smaller(pairs - first, LPT_PAIRS)  # pairs in this group
    at = cta % span
    return first + at % width, at // width


class KeyBlockSchedule:
    """What a CTA works on: one key block of ``cfg.block_n`` rows of one K/V
    head and batch entry (``n_block``, ``h_kv``, ``b``, from the block
    index by ``key_block_of``), and its steps: every (query head of the
    GQA group, query block of ``cfg.block_m`` rows) that sees the key block
    (causal: from the first query block whose diagonal reaches it)."""

    def __init__(self, k, cfg, args):
        bm, bn = cfg.block_m, cfg.block_n
        self.cfg = cfg
        self.seqlen_k = args.seqlen_k
        n_blocks = (args.seqlen_k + (bn - 1)) // bn
        pairs = args.batch * args.heads_kv if cfg.lpt_order else None
        rest, self.n_block = key_block_of(k.block_idx(), n_blocks, pairs, cfg.lpt_order)
        self.h_kv = rest % args.heads_kv
        self.b = rest // args.heads_kv
        self.group = args.heads // args.heads_kv
        m_blocks = (args.seqlen_q + (bm - 1)) // bm
        self.padded_q = m_blocks * bm            # rows of the LSE / dPsum buffers
        self.offset = args.seqlen_k - args.seqlen_q     # causal diagonal, bottom right
        if cfg.causal:
            # The first query that sees this block's first key.
            self.m_first = (self.n_block * bn - self.offset).max(0) // bm
        else:
            self.m_first = Scalar(0)
        self.n_m = m_blocks - self.m_first
        self.steps = self.group * self.n_m      # at least one: every key is seen

    def step(self, it):
        """(query head, query block) of step ``it``."""
        return self.h_kv * self.group + it // self.n_m, self.m_first + it % self.n_m
