"""Stage: what one CTA of the backward works on (``KeyBlockSchedule``): its
key block and the (query head, query block) steps that see it.
"""

from pipeline_mlir.kernel import Scalar



class KeyBlockSchedule:
    """What a CTA works on: one key block of ``cfg.block_n`` rows of one K/V
    head and batch entry (``n_block``, ``h_kv``, ``b``, from the block
    index), and its steps: every (query head of the GQA group, query block
    of ``cfg.block_m`` rows) that sees the key block (causal: from the first
    query block whose diagonal reaches it)."""

    def __init__(self, k, cfg, args):
        bm, bn = cfg.block_m, cfg.block_n
        self.cfg = cfg
        self.seqlen_k = args.seqlen_k
        n_blocks = (args.seqlen_k + (bn - 1)) // bn
        cta = k.block_idx()
        self.n_block = cta % n_blocks
        rest = cta // n_blocks
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
