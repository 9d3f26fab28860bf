"""Stage: the forward's work units (``WorkSchedule``): persistent, in snake
order, causal tiles longest first, and the key blocks each tile reads.
"""

from mlir.dialects import nvvm

from pipeline_mlir.kernel import Scalar
from pipeline_mlir.kernel.values import i32


L2_BUDGET = 24 << 20             # bytes of K/V that causal sections keep in L2 (50 MB L2)


class WorkSchedule:
    """The work units shared by producer and consumers: (tile of ``block_m``
    query rows, head, batch), persistent, in snake order; causal runs the
    longest tiles first (in L2-sized head sections with ``l2_sections``);
    and the key blocks each tile reads.

    With ``cfg.pack_gqa`` a unit's head is a K/V head and its tile holds
    ``tile_positions`` query positions of each of the group's query heads
    (packed row ``i``: position ``i // g``, head ``i % g`` of the group)."""

    def __init__(self, k, cfg, args):
        self.cfg = cfg
        bm = cfg.tile_positions
        self.seqlen_k = args.seqlen_k
        self.m_blocks = (args.seqlen_q + (bm - 1)) // bm
        # Packed, the units run over K/V heads (each tile covers a group).
        unit_heads = args.heads_kv if cfg.pack_gqa else args.heads
        self.bh = args.batch * unit_heads
        self.heads = unit_heads
        num_units = self.bh * self.m_blocks
        self.cta = cta = k.block_idx()
        self.ctas = ctas = Scalar(nvvm.read_ptx_sreg_nctaid_x(i32()))
        # Persistent schedule, snake order: in round r the CTAs take units
        # r * ctas .. r * ctas + ctas - 1, CTA c the c-th of them in even
        # rounds and the (ctas - 1 - c)-th in odd ones. Causal units come
        # longest first, so a plain stride would give CTA 0 the longest unit
        # of every round; the snake evens the sums out. Every CTA's number
        # of rounds is known up front (the last round is partial).
        full_rounds = num_units // ctas
        last_pos = ((full_rounds & 1) == 1).select((ctas - 1 - cta).ir_value, cta.ir_value)
        self.rounds = full_rounds + (Scalar(last_pos) < num_units % ctas).select(1, 0)
        self.group = args.heads // args.heads_kv
        self.offset = args.seqlen_k - args.seqlen_q      # causal diagonal, bottom right

        # Causal: heads in sections whose K and V fit in L2 together
        # (L2_BUDGET bytes), each section's units longest first. All heads
        # longest first would spread the 132 CTAs of a round over as many
        # heads, and every K/V block would come from HBM instead of L2.
        if cfg.causal and cfg.l2_sections:
            # K and V of one head (bf16: 4 d bytes a key; e4m3: 2 d)
            kv_head_bytes = args.seqlen_k * (2 * cfg.head_dim * cfg.k_layout().element_bytes)
            self.section = (Scalar(L2_BUDGET) // kv_head_bytes.max(1)).max(1).min(self.bh)
        else:
            self.section = None

    def unit_of_round(self, r):
        pos = ((r & 1) == 1).select((self.ctas - 1 - self.cta).ir_value, self.cta.ir_value)
        return r * self.ctas + Scalar(pos)

    def unit(self, u):
        """(m_block, batch index, head) of work unit ``u``; causal runs the
        longest rows (the last m-blocks) first."""
        cfg, m_blocks, bh, section = self.cfg, self.m_blocks, self.bh, self.section
        if cfg.causal and section is not None:
            per_section = section * m_blocks
            first_bh = (u // per_section) * section
            in_section = (bh - first_bh).min(section)   # the last one may be short
            idx = u % per_section
            m_block = m_blocks - 1 - idx // in_section
            rest = first_bh + idx % in_section
        elif cfg.causal:
            m_block = m_blocks - 1 - u // bh
            rest = u % bh
        else:
            m_block = u % m_blocks
            rest = u // m_blocks
        return m_block, rest // self.heads, rest % self.heads

    def round_unit(self, r):
        """(m_block, batch index, head) of this CTA's round ``r``."""
        return self.unit(self.unit_of_round(r))

    def kv_blocks(self, m_block):
        """Key blocks this tile reads (at least one: a fully masked row
        gets O = 0, LSE = -inf)."""
        bm, bn = self.cfg.tile_positions, self.cfg.kv_block
        if self.cfg.causal:
            end = ((m_block + 1) * bm + self.offset).min(self.seqlen_k)
        else:
            end = self.seqlen_k
        return ((end + (bn - 1)) // bn).max(1)

    def unmasked_blocks(self, m_block):
        """Key blocks before the first one that needs a mask (the causal
        diagonal or the sequence's tail)."""
        bm, bn = self.cfg.tile_positions, self.cfg.kv_block
        full = self.seqlen_k // bn
        if self.cfg.causal:
            full = full.min((m_block * bm + self.offset + 1) // bn).max(0)
        return full
