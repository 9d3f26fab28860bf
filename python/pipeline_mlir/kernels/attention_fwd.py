"""Attention forward for Hopper, FlashAttention-3's structure, every barrier
a pipeline op or a NamedBarrier.

    O = softmax(Q K^T * scale [+ causal mask]) V,   LSE = log-sum-exp per row

Q is (batch, seqlen_q, heads, d), K and V (batch, seqlen_k, heads_kv, d), all
bf16 and contiguous; ``heads`` is a multiple of ``heads_kv`` (GQA / MQA: query
head ``h`` reads K/V head ``h // (heads / heads_kv)``). O is like Q; LSE is
fp32 (batch, heads, seqlen_q), natural log. Causal masking is aligned to the
bottom right (key ``c`` is visible to query ``r`` when ``c <= r + seqlen_k -
seqlen_q``), as in FlashAttention.

Roles (one CTA of 384 threads, persistent over (tile of 128 query rows, head,
batch) work units; causal runs the longest tiles first):

- warpgroup 0, the producer: lowers its registers; its warp 0 loads, per
  tile, Q into a one-stage ``PipelineTmaAsync`` ('q') and then K and V block
  by block into their own rings ('k', 'v'); every load is a 3-D TMA box
  (d-columns, rows, batch), so rows past the sequence end read zeros;
- warpgroups 1 and 2, the consumers: raise their registers; each owns 64
  query rows of the tile. Per key block j:

      S_j = Q K_j^T             wgmma, A and B from shared memory
      P_j = exp2(S_j * scale * log2(e) - m_j)     online softmax, registers
      O  += P_{j-1} V_{j-1}     wgmma, A (= P, bf16) from registers,
                                V MN-major from shared memory

  issued so that the softmax of S_j overlaps P_{j-1} V_{j-1} (intra-warpgroup
  overlap), and the two warpgroups take turns issuing their GEMMs (ping-pong,
  two named barriers), so one's softmax runs under the other's GEMMs.

Release order (what pipeline-verify-protocol's async-read check proves): a
stage of 'k' is released only after ``wgmma.wait_group`` retired the group
of the S GEMM that reads it, and a stage of 'v' after the group of the P V
GEMM; Q is released after the tile's last S GEMM retired. Releasing any
earlier lets TMA overwrite operands an in-flight wgmma still reads.

Usage: python examples/attention_fwd.py [--d 64|128|256] [--causal] [--print-ir] [--out DIR]
(builds, checks and compiles; ``pipeline_mlir/ops/attention_fwd_host.py`` runs it).

``--out DIR``: where the cubin and its launch metadata go (by default a
folder in the system's temporary directory, not the source tree:
examples/_common.py).
"""

import math
import sys
from dataclasses import dataclass, replace

import mlir.ir as ir
from mlir.dialects import llvm, nvvm

from pipeline_mlir.chip_limits import SMEM_PER_BLOCK, WGMMA_M
from pipeline_mlir.kernel import (Float32, GlobalPtr, Int32, Kernel, Scalar,
                                  TmaDescriptor)
from pipeline_mlir.kernel import epilogue, fence_view_async_shared, wgmma
from pipeline_mlir.kernel.fragment import Fragment, RowVector
from pipeline_mlir.kernel.memory import element_ptr
from pipeline_mlir.kernel.values import f32, i32
from pipeline_mlir.kernel.warpgroup import (THREADS_PER_WARPGROUP,
                                            check_register_budget,
                                            set_max_registers)
from pipeline_mlir.layout import OperandLayout, descriptor_units
from pipeline_mlir.pipeline import (Agent, CooperativeGroup, NamedBarrier,
                                    PipelineTmaAsync, PipelineTmaStore, PipelineUserType,
                                    make_pipeline_state)

SMEM_LIMIT = SMEM_PER_BLOCK           # dynamic shared memory one CTA may opt into
SWIZZLE = 128                    # bytes: every tile's TMA and wgmma swizzle
PINGPONG_BARRIER = 1             # ids 1, 2(, 3): one per consumer warpgroup
EPILOGUE_BARRIER = 4             # ids 4, 5(, 6): one per consumer warpgroup
L2_BUDGET = 24 << 20             # bytes of K/V that causal sections keep in L2 (50 MB L2)
MISTAKES = (None, "k_released_before_s_retired", "v_released_before_pv_retired",
            "pingpong_barriers_crossed", "q_rearmed_while_read")


@dataclass(frozen=True)
class AttentionConfig:
    """One kernel variant. The switches after ``causal`` exist for the
    step-by-step table of docs/attention.md; ``mistake`` plants one of the
    synchronization bugs the checker must reject (tests only)."""
    head_dim: int = 128
    causal: bool = False
    block_n: int = 0                  # 0: by head dim (128, or 80 for d = 256)
    stages: int = 2
    consumer_warpgroups: int = 2
    pingpong: bool = True
    intra_overlap: bool = True
    q_stages: int = 0                 # Q buffers; 0: two where they fit, else one
    l2_sections: bool = False         # causal: longest first within L2-sized head groups
    tma_store: bool = False           # O through shared memory + TMA stores
    producer_registers: int = 24
    consumer_registers: int = 240
    mistake: str = None

    def __post_init__(self):
        if self.head_dim not in (64, 128, 256):
            raise ValueError(f"AttentionConfig: head_dim must be 64, 128 or 256, "
                             f"got {self.head_dim!r}")
        if self.consumer_warpgroups not in (1, 2, 3):
            raise ValueError("AttentionConfig: consumer_warpgroups must be 1, 2 or 3")
        if self.pingpong and self.consumer_warpgroups < 2:
            raise ValueError("AttentionConfig: ping-pong needs 2 or 3 consumer warpgroups")
        if self.mistake not in MISTAKES:
            raise ValueError(f"AttentionConfig: mistake must be one of {MISTAKES}")

    @property
    def q_buffers(self):
        """Q's stages. Two let the producer load the next tile's Q while the
        consumers finish this one (with one, every tile starts with a Q
        load's latency: the stage is released only after the tile's last S
        GEMM)."""
        if self.q_stages:
            return self.q_stages
        return 2 if self._smem_bytes(self.o_through_smem, 2) <= SMEM_LIMIT else 1

    @property
    def o_through_smem(self):
        """Whether O leaves through shared memory and TMA stores (one 64 x d
        tile per consumer warpgroup) rather than straight from registers.
        Measured on the H100 the direct stores are faster here (d128 672 vs
        627 TFLOP/s, causal 515 vs 467, d64 529 vs 464: docs/attention.md),
        so they are the default."""
        return self.tma_store

    @property
    def block_m(self):
        return WGMMA_M * self.consumer_warpgroups

    @property
    def kv_block(self):
        if self.block_n:
            return self.block_n
        return 80 if self.head_dim == 256 else 128

    @property
    def threads(self):
        return THREADS_PER_WARPGROUP * (1 + self.consumer_warpgroups)

    @property
    def name(self):
        return (f"attn_fwd_d{self.head_dim}{'_causal' if self.causal else ''}"
                f"_{self.block_m}x{self.kv_block}_s{self.stages}q{self.q_buffers}"
                f"_wg{self.consumer_warpgroups}"
                f"{'_pp' if self.pingpong else ''}{'_ov' if self.intra_overlap else ''}"
                f"{'_ts' if self.o_through_smem else ''}"
                f"{'_l2sec' if self.causal and self.l2_sections else ''}"
                f"{'_' + self.mistake if self.mistake else ''}")

    # The operand layouts (pipeline_mlir.layout): every box, byte count and
    # descriptor of the kernel and every tensor map of the host follow from
    # these three.
    def q_layout(self):
        """Q: the A operand of S = Q K^T, K-major (d contiguous)."""
        return OperandLayout("bf16", "K", SWIZZLE, self.block_m, self.head_dim)

    def k_layout(self):
        """K: the B operand of S = Q K^T, given N x K (d contiguous)."""
        return OperandLayout("bf16", "K", SWIZZLE, self.kv_block, self.head_dim)

    def v_layout(self):
        """V: the B operand of O = P V, MN-major (rows are this GEMM's K)."""
        return OperandLayout("bf16", "MN", SWIZZLE, self.kv_block, self.head_dim)

    def o_layout(self):
        """One consumer warpgroup's 64 rows of O, as the TMA-store epilogue
        writes them to shared memory."""
        return OperandLayout("bf16", "K", SWIZZLE, 64, self.head_dim)

    def smem_bytes(self):
        """Dynamic shared memory: Q, the K and V rings, the O tiles of the
        TMA-store epilogue, the barriers, and the arena's 1024-byte
        alignment slack (kernel/smem.py)."""
        return self._smem_bytes(self.o_through_smem, self.q_buffers)

    def _smem_bytes(self, o_tiles, q_buffers):
        q = q_buffers * self.q_layout().bytes
        kv = self.stages * (self.k_layout().bytes + self.v_layout().bytes)
        o = self.consumer_warpgroups * self.o_layout().bytes if o_tiles else 0
        return q + kv + o + 1024 + 8 * 2 * (q_buffers + 2 * self.stages)

    def meta(self, kernel):
        """What the host launcher needs (pipeline_mlir/ops/attention_fwd_host.py) of
        ``kernel`` (built from this config): parameter kinds, shared memory,
        the tiles and the operand layouts."""
        return {"signature": [p.kind for _, p in kernel.params],
                "smem": kernel.smem_bytes, "name": self.name, "head_dim": self.head_dim,
                "causal": self.causal,
                "block_m": self.block_m, "block_n": self.kv_block,
                "threads": self.threads,
                "layouts": {"q": self.q_layout().to_meta(), "k": self.k_layout().to_meta(),
                            "v": self.v_layout().to_meta(), "o": self.o_layout().to_meta()}}


def build(cfg=AttentionConfig(), chip="sm_90a"):
    """The kernel for ``cfg`` (``.module`` is the built module)."""
    check_register_budget(cfg.threads, 1, cfg.producer_registers,
                          cfg.consumer_warpgroups, cfg.consumer_registers)
    d, bm, bn, stages = cfg.head_dim, cfg.block_m, cfg.kv_block, cfg.stages
    if cfg.smem_bytes() > SMEM_LIMIT:
        raise ValueError(f"{cfg.name}: {cfg.smem_bytes()} bytes of shared memory "
                         f"> {SMEM_LIMIT}")
    q_layout, k_layout, v_layout = cfg.q_layout(), cfg.k_layout(), cfg.v_layout()
    q_bytes, kv_bytes = q_layout.bytes, k_layout.bytes
    mma_s = wgmma.WarpgroupMma(bn, q_layout, k_layout)   # S = Q K^T: m64 n=bn
    # O += P V: m64 n=d, V (kv rows x d) MN-major.
    mma_o = wgmma.WarpgroupMma(d, "bf16", v_layout)      # O += P V: m64 n=d
    k = Kernel(cfg.name, chip=chip, block_dim=cfg.threads,
               params={"q": TmaDescriptor(), "k": TmaDescriptor(), "v": TmaDescriptor(),
                       "o": TmaDescriptor() if cfg.o_through_smem else GlobalPtr(),
                       "lse": GlobalPtr(align=4),
                       "batch": Int32(), "heads": Int32(), "heads_kv": Int32(),
                       "seqlen_q": Int32(), "seqlen_k": Int32(),
                       "scale_log2": Float32()})
    with k:
        (desc_q, desc_k, desc_v, o_ptr, lse_ptr, batch, heads, heads_kv,
         seqlen_q, seqlen_k, scale_log2) = k.args
        q_stages = cfg.q_buffers
        smem_q = k.smem_alloc(q_stages * q_bytes, align=q_layout.alignment, name="Q")
        smem_k = k.smem_alloc(stages * kv_bytes, align=k_layout.alignment, name="K ring")
        smem_v = k.smem_alloc(stages * v_layout.bytes, align=v_layout.alignment,
                              name="V ring")
        o_layout = cfg.o_layout()
        smem_o = (k.smem_alloc(cfg.consumer_warpgroups * o_layout.bytes,
                               align=o_layout.alignment, name="O tiles")
                  if cfg.o_through_smem else None)

        one_tma_thread = CooperativeGroup(Agent.Thread, 1)
        # Every consumer warp releases a stage once.
        consumers = CooperativeGroup(Agent.Thread, 4 * cfg.consumer_warpgroups)
        pipe_q = PipelineTmaAsync.create(
            num_stages=q_stages, producer_group=one_tma_thread, consumer_group=consumers,
            tx_count=q_bytes, barrier_storage=k.alloc_barriers(2 * q_stages), name="q")
        pipe_k = PipelineTmaAsync.create(
            num_stages=stages, producer_group=one_tma_thread, consumer_group=consumers,
            tx_count=kv_bytes, barrier_storage=k.alloc_barriers(2 * stages), name="k")
        pipe_v = PipelineTmaAsync.create(
            num_stages=stages, producer_group=one_tma_thread, consumer_group=consumers,
            tx_count=v_layout.bytes, barrier_storage=k.alloc_barriers(2 * stages), name="v")

        # -- the work units, shared by producer and consumers ------------------
        m_blocks = (seqlen_q + (bm - 1)) // bm
        bh = batch * heads
        num_units = bh * m_blocks
        cta = k.block_idx()
        ctas = Scalar(nvvm.read_ptx_sreg_nctaid_x(i32()))
        # Persistent schedule, snake order: in round r the CTAs take units
        # r * ctas .. r * ctas + ctas - 1, CTA c the c-th of them in even
        # rounds and the (ctas - 1 - c)-th in odd ones. Causal units come
        # longest first, so a plain stride would give CTA 0 the longest unit
        # of every round; the snake evens the sums out. Every CTA's number
        # of rounds is known up front (the last round is partial).
        full_rounds = num_units // ctas
        last_pos = ((full_rounds & 1) == 1).select((ctas - 1 - cta).ir_value, cta.ir_value)
        my_rounds = full_rounds + (Scalar(last_pos) < num_units % ctas).select(1, 0)

        def unit_of_round(r):
            pos = ((r & 1) == 1).select((ctas - 1 - cta).ir_value, cta.ir_value)
            return r * ctas + Scalar(pos)
        group = heads // heads_kv
        offset = seqlen_k - seqlen_q           # causal diagonal, bottom right

        # Causal: heads in sections whose K and V fit in L2 together
        # (L2_BUDGET bytes), each section's units longest first. All heads
        # longest first would spread the 132 CTAs of a round over as many
        # heads, and every K/V block would come from HBM instead of L2.
        if cfg.causal and cfg.l2_sections:
            kv_head_bytes = seqlen_k * (4 * d)          # K and V of one head, bf16
            section = (Scalar(L2_BUDGET) // kv_head_bytes.max(1)).max(1).min(bh)
        else:
            section = None

        def unit(u):
            """(m_block, batch index, head) of work unit ``u``; causal runs
            the longest rows (the last m-blocks) first."""
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
            return m_block, rest // heads, rest % heads

        def kv_blocks(m_block):
            """Key blocks this tile reads (at least one: a fully masked row
            gets O = 0, LSE = -inf)."""
            if cfg.causal:
                end = ((m_block + 1) * bm + offset).min(seqlen_k)
            else:
                end = seqlen_k
            return ((end + (bn - 1)) // bn).max(1)

        def unmasked_blocks(m_block):
            """Key blocks before the first one that needs a mask (the causal
            diagonal or the sequence's tail)."""
            full = seqlen_k // bn
            if cfg.causal:
                full = full.min((m_block * bm + offset + 1) // bn).max(0)
            return full

        warp = k.warp_idx()
        warpgroup = warp // 4

        with k.if_(warpgroup == 0) as role:
            # ---- producer warpgroup ----
            set_max_registers(cfg.producer_registers, increase=False)
            with k.if_(warp == 0):
                q_state = make_pipeline_state(PipelineUserType.Producer, q_stages)
                k_state = make_pipeline_state(PipelineUserType.Producer, stages)
                v_state = make_pipeline_state(PipelineUserType.Producer, stages)
                for r, _ in k.range(my_rounds, carry=[q_state, k_state, v_state]):
                    m_block, b, h = unit(unit_of_round(r))
                    h_kv = h // group
                    pipe_q.producer_acquire(q_state)
                    with k.elect_one():
                        for col, off in q_layout.box_offsets():
                            pipe_q.tma_load(q_state, desc_q, [h * d + col, m_block * bm, b],
                                            smem_q.stage(q_state.index, q_bytes) + off,
                                            q_layout.box_bytes)
                    pipe_q.producer_commit(q_state)
                    q_state.advance()

                    def load(pipe, desc, ring, state, j, layout):
                        pipe.producer_acquire(state)
                        with k.elect_one():
                            tile = ring.stage(state.index, layout.bytes)
                            for col, off in layout.box_offsets():
                                pipe.tma_load(state, desc, [h_kv * d + col, j * bn, b],
                                              tile + off, layout.box_bytes)
                        pipe.producer_commit(state)
                        state.advance()

                    # In the order the consumers read them: K_0, then K_j with
                    # V_{j-1} (S_j is issued before P_{j-1} V_{j-1}), then the
                    # last V. Loading V_j before K_{j+1} would make the next
                    # K wait behind a V stage released one block later.
                    load(pipe_k, desc_k, smem_k, k_state, 0, k_layout)
                    for j, _ in k.range(1, kv_blocks(m_block), carry=[k_state, v_state]):
                        load(pipe_k, desc_k, smem_k, k_state, j, k_layout)
                        load(pipe_v, desc_v, smem_v, v_state, j - 1, v_layout)
                    load(pipe_v, desc_v, smem_v, v_state, kv_blocks(m_block) - 1,
                         v_layout)
                # No arrive may land on this CTA's barriers after it exits.
                pipe_q.producer_tail(q_state)
                pipe_k.producer_tail(k_state)
                pipe_v.producer_tail(v_state)

        with role.else_():
            # ---- consumer warpgroups ----
            set_max_registers(cfg.consumer_registers, increase=True)
            cw = warpgroup - 1
            warp_in_wg, lane = warp % 4, k.lane_idx()
            # Ping-pong: the consumer warpgroups issue their GEMMs in turn
            # (0, 1, .., 0, 1, ..): warpgroup w waits on barrier id w (its
            # own 128 threads plus the 128 of the warpgroup before it, which
            # arrive when they have issued), then arrives on the next one's.
            wgs = cfg.consumer_warpgroups
            sched = (NamedBarrier(PINGPONG_BARRIER, 2 * THREADS_PER_WARPGROUP, num_ids=wgs)
                     if cfg.pingpong else None)
            mine = cw
            other = (cw + 1) % wgs
            if cfg.mistake == "pingpong_barriers_crossed":
                # Each waits on the other's id (and still arrives there): each
                # id is reached by one warpgroup only. (Swapping both ids would
                # be a correct ping-pong in which warpgroup 1 goes first.)
                mine = other

            def gemms_begin():
                if sched is not None:
                    sched.arrive_and_wait_w_index(mine)

            def gemms_end():
                if sched is not None:
                    sched.arrive_w_index(other)

            if sched is not None:
                # Warpgroup 0 issues first: the last one lets it through once.
                with k.if_(cw == wgs - 1):
                    sched.arrive_w_index(0)

            # Stage 0 of the K and V rings (Q's descriptor is made per tile).
            k_base = wgmma.smem_matrix_descriptor(smem_k, k_layout)
            v_base = wgmma.smem_matrix_descriptor(smem_v, v_layout)
            k_step, v_step = descriptor_units(k_layout.bytes), descriptor_units(v_layout.bytes)

            def issue_s(s_acc, stage, q_desc):
                """S = Q K_stage^T: d / 16 wgmma, one group."""
                db = (stage.to(64) * k_step + Scalar(k_base)).ir_value
                wgmma.fence()
                for kk in range(q_layout.k_slices):
                    mma_s.mma(s_acc, wgmma.k_slice_descriptor(q_desc, q_layout, kk),
                              wgmma.k_slice_descriptor(db, k_layout, kk), accumulate=kk > 0)
                wgmma.commit_group()

            def issue_pv(o_acc, p, stage):
                """O += P V_stage: bn / 16 wgmma with P in registers, one group."""
                db = (stage.to(64) * v_step + Scalar(v_base)).ir_value
                wgmma.fence()
                for kk in range(len(p)):
                    mma_o.mma_rs(o_acc, p.slice(kk), wgmma.k_slice_descriptor(db, v_layout, kk))
                wgmma.commit_group()

            thread_row, thread_col = Fragment.thread_origin(warp_in_wg, lane)

            def softmax(s_acc, row_max, row_sum, j, m_row0, masked, first):
                """Online softmax of S_j: mask, new row max, P = exp2(S *
                scale_log2 - max), the running sum; returns P and the
                correction exp2(old max - new max) that O needs before the
                next P V."""
                if masked is not None:
                    with k.if_(masked, carry=[s_acc]):
                        col0 = j * bn + thread_col
                        row0 = m_row0 + thread_row
                        tail = seqlen_k - col0            # keep c < tail
                        diag = row0 + offset - col0       # keep c - r <= diag

                        def keep(r, c):
                            ok = tail > c
                            return ok & (diag >= c - r) if cfg.causal else ok

                        s_acc.set(s_acc.where(keep, float("-inf")))
                new_max = row_max.max(s_acc.row_max())
                scaled = new_max * scale_log2
                # A fully masked row keeps max -inf: use 0 so exp2 gives 0s.
                finite = [Scalar(v) != float("-inf") for v in new_max.values]
                scaled = scaled.where(finite, 0.0)
                p = s_acc.fma(scale_log2, -scaled).exp2()
                if not first:
                    corr = (row_max * scale_log2 - scaled).exp2()
                    row_sum.set(row_sum * corr + p.row_sum_partial())
                else:
                    corr = None
                    row_sum.set(p.row_sum_partial())
                row_max.set(new_max)
                return p, corr

            leader = (warp_in_wg == 0) & (lane == 0)
            if smem_o is not None:
                o_store = PipelineTmaStore.create(
                    num_stages=1, producer_group=CooperativeGroup(Agent.Thread, 1))
                epi_sync = NamedBarrier(EPILOGUE_BARRIER, THREADS_PER_WARPGROUP,
                                        num_ids=cfg.consumer_warpgroups)
            q_read = make_pipeline_state(PipelineUserType.Consumer, q_stages)
            k_read = make_pipeline_state(PipelineUserType.Consumer, stages)
            v_read = make_pipeline_state(PipelineUserType.Consumer, stages)
            for r, _ in k.range(my_rounds, carry=[q_read, k_read, v_read]):
                m_block, b, h = unit(unit_of_round(r))
                n_blocks = kv_blocks(m_block)
                n_free = unmasked_blocks(m_block)
                m_row0 = m_block * bm + cw * WGMMA_M
                o_acc = mma_o.accumulator()
                row_max = RowVector.full(float("-inf"))
                row_sum = RowVector.full(0.0)

                pipe_q.consumer_wait(q_read)
                # This warpgroup's 64 rows of Q, addressed from Q's stage
                # index: that ties the S GEMMs to the Q stage, so the checker
                # sees them read it.
                q_desc = wgmma.smem_matrix_descriptor(
                    smem_q.stage(q_read.index, q_bytes) + q_layout.mn_offset(64) * cw, q_layout)
                # Block 0: S_0 and its softmax.
                s_acc = Fragment.undef(bn)
                pipe_k.consumer_wait(k_read)
                gemms_begin()
                issue_s(s_acc, k_read.index, q_desc)
                gemms_end()
                if cfg.mistake == "k_released_before_s_retired":
                    pipe_k.consumer_release(k_read)
                if cfg.mistake == "q_rearmed_while_read":
                    # Wrong: the S GEMMs of this tile still read Q, and the
                    # producer may now load the next tile's Q over it.
                    pipe_q.consumer_release(q_read)
                wgmma.wait_group(0)
                if cfg.mistake != "k_released_before_s_retired":
                    pipe_k.consumer_release(k_read)
                k_read.advance()
                p, _ = softmax(s_acc, row_max, row_sum, Scalar(0), m_row0,
                               Scalar(0) >= n_free, first=True)
                p_regs = p.to_operand_a("bf16")

                corr = RowVector.full(1.0)
                if not cfg.intra_overlap:
                    # The plain order, for the ladder: each block's P V right
                    # after its softmax (the tensor cores idle meanwhile,
                    # unless the other warpgroup fills them).
                    for j, _ in k.range(1, n_blocks, carry=[k_read, v_read, o_acc,
                                                            row_max, row_sum, p_regs]):
                        pipe_v.consumer_wait(v_read)
                        gemms_begin()
                        issue_pv(o_acc, p_regs, v_read.index)
                        gemms_end()
                        wgmma.wait_group(0)
                        pipe_v.consumer_release(v_read)
                        v_read.advance()
                        s_acc = Fragment.undef(bn)
                        pipe_k.consumer_wait(k_read)
                        gemms_begin()
                        issue_s(s_acc, k_read.index, q_desc)
                        gemms_end()
                        wgmma.wait_group(0)
                        pipe_k.consumer_release(k_read)
                        k_read.advance()
                        p, c = softmax(s_acc, row_max, row_sum, j, m_row0,
                                       j >= n_free, first=False)
                        o_acc.set(o_acc * c)
                        p_regs.set(p.to_operand_a("bf16"))
                else:
                    # Blocks 1..n-1: S_j is issued before P_{j-1} V_{j-1}, so the
                    # softmax of S_j runs while the P V GEMM is in flight; O is
                    # rescaled by the previous block's correction between the two
                    # issues, while S_j occupies the tensor cores.
                    for j, _ in k.range(1, n_blocks, carry=[k_read, v_read, o_acc, row_max,
                                                            row_sum, p_regs, corr]):
                        s_acc = Fragment.undef(bn)
                        pipe_k.consumer_wait(k_read)
                        gemms_begin()
                        issue_s(s_acc, k_read.index, q_desc)
                        o_acc.set(o_acc * corr)
                        pipe_v.consumer_wait(v_read)
                        issue_pv(o_acc, p_regs, v_read.index)
                        gemms_end()
                        wgmma.wait_group(1)              # S_j retired
                        pipe_k.consumer_release(k_read)
                        k_read.advance()
                        p, new_corr = softmax(s_acc, row_max, row_sum, j, m_row0,
                                              j >= n_free, first=False)
                        if cfg.mistake == "v_released_before_pv_retired":
                            pipe_v.consumer_release(v_read)
                        wgmma.wait_group(0)              # P_{j-1} V_{j-1} retired
                        if cfg.mistake != "v_released_before_pv_retired":
                            pipe_v.consumer_release(v_read)
                        v_read.advance()
                        corr.set(new_corr)
                        p_regs.set(p.to_operand_a("bf16"))
                # Q is no longer read: every S GEMM of the tile retired.
                if cfg.mistake != "q_rearmed_while_read":
                    pipe_q.consumer_release(q_read)
                # Last block: O += P_{n-1} V_{n-1}.
                pipe_v.consumer_wait(v_read)
                gemms_begin()
                o_acc.set(o_acc * corr)
                issue_pv(o_acc, p_regs, v_read.index)
                gemms_end()
                wgmma.wait_group(0)
                pipe_v.consumer_release(v_read)
                v_read.advance()
                q_read.advance()

                # Epilogue: O / row sum, LSE = (max * scale_log2 + log2 sum) ln 2.
                total = row_sum.quad_sum()
                nonzero = [Scalar(t) != 0.0 for t in total.values]
                inv = total.reciprocal().where(nonzero, 0.0)
                out = o_acc * inv
                lse = ((row_max * scale_log2 + total.log2()) * math.log(2.0)).where(
                    nonzero, float("-inf"))
                store_lse(k, lse, lse_ptr, b, h, heads, seqlen_q, m_row0 + thread_row, lane)
                if smem_o is None:
                    store_o(k, out, o_ptr, b, h, heads, seqlen_q, d, m_row0 + thread_row,
                            thread_col)
                else:
                    # O: the previous tile's TMA stores must have read this
                    # warpgroup's buffer before it is rewritten; then every
                    # thread's writes are fenced (generic -> async proxy)
                    # and one thread stores the 64 x d tile.
                    tile = smem_o + cw * o_layout.bytes
                    with k.if_(leader):
                        o_store.producer_acquire()
                    epi_sync.arrive_and_wait_w_index(cw)
                    epilogue.store_fragment(out, tile, warp_in_wg, lane, o_layout)
                    fence_view_async_shared()
                    epi_sync.arrive_and_wait_w_index(cw)
                    with k.if_(leader):
                        for col, off in o_layout.box_offsets():
                            o_store.tma_store(o_ptr, [h * d + col, m_row0, b], tile + off)
                        o_store.producer_commit()
            if smem_o is not None:
                with k.if_(leader):
                    o_store.producer_tail()
    k.config = cfg
    return k


def store_lse(k, lse, lse_ptr, b, h, heads, seqlen_q, row, lane):
    """The first lane of each quad writes the LSE of its two rows (rows past
    ``seqlen_q`` are not written)."""
    for half in range(2):
        r = row + 8 * half
        with k.if_((r < seqlen_q) & (lane % 4 == 0)):
            idx = (b * heads + h) * seqlen_q + r
            llvm.store(lse.values[half], element_ptr(lse_ptr, f32(), idx))


def store_o(k, out, o_ptr, b, h, heads, seqlen_q, d, row, col):
    """Each thread writes its values of O as bf16 pairs straight from
    registers; rows past ``seqlen_q`` are not written."""
    packed = out.to_packed("bf16")              # one i32 per column pair
    for half in range(2):
        r = row + 8 * half
        with k.if_(r < seqlen_q):
            # Element (row, h, col) of O (batch b): ((b * sq + r) * H + h) * d + col.
            base = ((b * seqlen_q + r) * heads + h) * d + col
            for j, word in enumerate(packed):
                if (j % 2) != half:
                    continue
                col_off = 8 * (j // 2)
                llvm.store(word, element_ptr(o_ptr, ir.BF16Type.get(), base + col_off))


def build_variant(overrides, dtype, chip):
    """(cubin, launch facts) of the attention variant ``overrides``
    (``AttentionConfig`` fields: head_dim, causal and the tuned ones of
    ``pipeline_mlir.ops.attention_configs``) in ``dtype`` ('bf16'): the
    kernel cache's builder of this family."""
    if dtype != "bf16":
        raise ValueError(f"attention_fwd: bf16 only, got {dtype!r}")
    cfg = AttentionConfig(**overrides)
    k = build(cfg, chip=chip)
    return bytes(k.compile()), cfg.meta(k)
