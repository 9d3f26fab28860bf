"""Stage: the forward's epilogue (``OutputEpilogue``): O / row sum and the
LSE of a tile, stored from registers (``store_o``, ``store_lse``) or
through shared memory and TMA.
"""

import math

import mlir.ir as ir
from mlir.dialects import llvm

from pipeline_mlir.kernel import Scalar, epilogue, fence_view_async_shared
from pipeline_mlir.kernel.memory import element_ptr
from pipeline_mlir.kernel.values import f32
from pipeline_mlir.kernel.warpgroup import THREADS_PER_WARPGROUP
from pipeline_mlir.pipeline import Agent, CooperativeGroup, NamedBarrier, PipelineTmaStore

from .config import EPILOGUE_BARRIER, packed_shift
from .consumer import Scales


class OutputEpilogue:
    """O / row sum and the LSE of a tile: LSE from the first lane of each
    quad, O straight from registers or (``cfg.o_through_smem``) through this
    warpgroup's O tile in shared memory and TMA stores."""

    def __init__(self, k, cfg, smem_o, cw, warp_in_wg, lane, thread_row, thread_col):
        self.k, self.cfg, self.smem_o, self.cw = k, cfg, smem_o, cw
        self.warp_in_wg, self.lane = warp_in_wg, lane
        self.thread_row, self.thread_col = thread_row, thread_col
        self.leader = (warp_in_wg == 0) & (lane == 0)
        self.scales = None           # the consumer's Scales (set after construction)
        if smem_o is not None:
            self.o_store = PipelineTmaStore.create(
                num_stages=1, producer_group=CooperativeGroup(Agent.Thread, 1))
            self.sync = NamedBarrier(EPILOGUE_BARRIER, THREADS_PER_WARPGROUP,
                                     num_ids=cfg.consumer_warpgroups)

    def tile(self, acc, args, b, h, m_row0):
        """O / row sum, LSE = (max * scale_log2 + log2 sum) ln 2, stored."""
        k, cfg, lane = self.k, self.cfg, self.lane
        total = acc.row_sums()
        nonzero = [Scalar(t) != 0.0 for t in total.values]
        inv = total.reciprocal().where(nonzero, 0.0)
        scales = self.scales or Scales(args.scale_log2)
        if scales.v_descale is not None:
            inv = inv * scales.v_descale          # FP8: O = v_descale P V8 / sum
        out = acc.o * inv
        lse = ((acc.row_max * scales.scale_log2 + total.log2()) * math.log(2.0)).where(
            nonzero, float("-inf"))
        if cfg.pack_gqa:
            # Packed row i: position i // g of query head h g + i % g; the
            # thread's two rows (8 apart) share the head (g divides 8).
            packed_row = m_row0 + self.thread_row
            row = packed_row >> packed_shift(cfg)
            head = h * cfg.pack_gqa + (packed_row & (cfg.pack_gqa - 1))
            step = 8 // cfg.pack_gqa
            store_lse(k, lse, args.lse, b, head, args.heads, args.seqlen_q, row, lane,
                      row_step=step)
            store_o(k, out, args.o, b, head, args.heads, args.seqlen_q, cfg.head_dim,
                    row, self.thread_col, row_step=step)
            return
        store_lse(k, lse, args.lse, b, h, args.heads, args.seqlen_q,
                  m_row0 + self.thread_row, lane)
        if self.smem_o is None:
            store_o(k, out, args.o, b, h, args.heads, args.seqlen_q, cfg.head_dim,
                    m_row0 + self.thread_row, self.thread_col)
            return
        # O: the previous tile's TMA stores must have read this
        # warpgroup's buffer before it is rewritten; then every
        # thread's writes are fenced (generic -> async proxy)
        # and one thread stores the 64 x d tile.
        o_layout, cw = cfg.o_layout(), self.cw
        tile = self.smem_o + cw * o_layout.bytes
        with k.if_(self.leader):
            self.o_store.producer_acquire()
        self.sync.arrive_and_wait_w_index(cw)
        epilogue.store_fragment(out, tile, self.warp_in_wg, lane, o_layout)
        fence_view_async_shared()
        self.sync.arrive_and_wait_w_index(cw)
        with k.if_(self.leader):
            for col, off in o_layout.box_offsets():
                self.o_store.tma_store(args.o, [h * cfg.head_dim + col, m_row0, b],
                                       tile + off)
            self.o_store.producer_commit()

    def tail(self):
        """After the last tile: the TMA stores must finish before exit."""
        if self.smem_o is not None:
            with self.k.if_(self.leader):
                self.o_store.producer_tail()


def store_lse(k, lse, lse_ptr, b, h, heads, seqlen_q, row, lane, row_step=8):
    """The first lane of each quad writes the LSE of its two rows, ``row``
    and ``row + row_step`` (rows past ``seqlen_q`` are not written)."""
    for half in range(2):
        r = row + row_step * half
        with k.if_((r < seqlen_q) & (lane % 4 == 0)):
            idx = (b * heads + h) * seqlen_q + r
            llvm.store(lse.values[half], element_ptr(lse_ptr, f32(), idx))


def store_o(k, out, o_ptr, b, h, heads, seqlen_q, d, row, col, row_step=8):
    """Each thread writes its values of O as bf16 pairs straight from
    registers, its two rows at ``row`` and ``row + row_step``; rows past
    ``seqlen_q`` are not written."""
    packed = out.to_packed("bf16")              # one i32 per column pair
    for half in range(2):
        r = row + row_step * half
        with k.if_(r < seqlen_q):
            # Element (row, h, col) of O (batch b): ((b * sq + r) * H + h) * d + col.
            base = ((b * seqlen_q + r) * heads + h) * d + col
            for j, word in enumerate(packed):
                if (j % 2) != half:
                    continue
                col_off = 8 * (j // 2)
                llvm.store(word, element_ptr(o_ptr, ir.BF16Type.get(), base + col_off))
