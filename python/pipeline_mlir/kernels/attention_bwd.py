"""Attention backward for Hopper, FlashAttention-3's structure, every barrier
a pipeline op or a NamedBarrier.

Given Q, K, V, dO and the forward's LSE, with S = Q K^T * scale and P =
exp(S - LSE):

    dP = dO V^T,   dS = P * (dP - dPsum),   dPsum = rowsum(dO * O)
    dV = P^T dO,   dK = scale * dS^T Q,     dQ = scale * dS K

Layouts as the forward's (``attention_fwd``): Q, dO (batch, seqlen_q, heads,
d), K, V (batch, seqlen_k, heads_kv, d), bf16; query head ``h`` reads K/V
head ``h // (heads / heads_kv)``; causal masking bottom-right aligned.

This kernel is the main pass. Before it, a preprocess (``attention_bwd_prep``)
computes dPsum and LSE * log2(e) (fully masked rows' -inf LSE becomes +inf,
so their P is 0) into fp32 buffers padded to whole query blocks (padding:
dPsum 0, LSE +inf) and the host clears the fp32 dQ accumulator; after it,
the accumulator (already scaled: each dQ tile is multiplied by the softmax
scale before its reduce-add) is rounded to bf16.

One CTA per (key block of 128 rows, K/V head, batch), 384 threads:

- warpgroup 0, the producer: its warp 0 loads the CTA's K and V once
  ('kv', one stage) and then, for every (query head of the group, query
  block of 64 rows) the block sees, Q, LSE, dO and dPsum, each through its
  own ``PipelineTmaAsync`` ring ('q', 'lse', 'do', 'dpsum'); Q and dO are
  3-D TMA boxes (rows past the sequence read zeros), LSE and dPsum bulk
  copies of 256 bytes;
- warpgroups 1 and 2, the consumers, own 64 key rows each. Per query block,
  with keys as rows (FlashAttention-3's "swap AB": P^T and dS^T come out of
  the GEMMs in the register layout that the dV and dK GEMMs take as their
  register A operand):

      S^T  = K_w Q^T          wgmma, A and B in shared memory
      dP^T = V_w dO^T         wgmma
      P^T  = exp2(S^T * scale * log2(e) - LSE * log2(e))     registers
      dS^T = P^T * (dP^T - dPsum)                            registers
      dV_w += P^T dO          wgmma, A = P^T (bf16) from registers
      dK_w += dS^T Q          wgmma, A = dS^T from registers
      dQ   = dS K_w           wgmma, A = dS^T written to shared memory
                              (read transposed), B = K_w read MN-major
      dQ -> shared memory (fp32) -> TMA reduce-add into the accumulator

  dK and dV stay in registers across every query block and every query
  head of the GQA group: their sums are deterministic. dQ sums over the key
  blocks of many CTAs through the TMA unit's fp32 add, which is not
  (addition order varies from run to run).

Release order (what pipeline-verify-protocol's async-read check proves): a
stage of 'do' goes back only after ``wait_group`` retired the dP GEMM and
the dV GEMM that read it, a stage of 'q' after the S and dK GEMMs; 'lse'
and 'dpsum' once their values are in registers. The epilogue writes dK and
dV over the K and V tiles, which both consumer warpgroups read until their
last GEMM: each releases 'kv' after its last wait, and a named barrier over
both lets neither write before the other released.

Usage: python -m pipeline_mlir.kernels.attention_bwd [--d 64|128] [--causal]
(builds, checks and compiles; ``pipeline_mlir/ops/attention_bwd_host.py``
runs it).
"""

import sys
from dataclasses import dataclass

import mlir.ir as ir
from mlir.dialects import llvm, nvvm

from pipeline_mlir.chip_limits import SMEM_PER_BLOCK, WGMMA_M
from pipeline_mlir.kernel import (Float32, GlobalPtr, Int32, Kernel, Scalar,
                                  TmaDescriptor)
from pipeline_mlir.kernel import epilogue, fence_view_async_shared, wgmma
from pipeline_mlir.kernel.fragment import ColVector, Fragment
from pipeline_mlir.kernel.memory import element_ptr
from pipeline_mlir.kernel.values import f32, i32, to_value
from pipeline_mlir.kernel.warpgroup import (THREADS_PER_WARPGROUP,
                                            check_register_budget,
                                            set_max_registers)
from pipeline_mlir.layout import OperandLayout
from pipeline_mlir.pipeline import (Agent, CooperativeGroup, NamedBarrier,
                                    PipelineTmaAsync, PipelineTmaStore, PipelineUserType,
                                    TmaStoreFence,
                                    make_pipeline_state)
from pipeline_mlir.user_location import user_line

SWIZZLE = 128
CONSUMER_WARPGROUPS = 2
BLOCK_N = WGMMA_M * CONSUMER_WARPGROUPS     # key rows per CTA: 64 per consumer
BLOCK_M = 64                                # query rows per step
DQ_CHUNK = 64                               # dQ columns per GEMM (register budget)
ROW_BYTES = BLOCK_M * 4                     # one query block of LSE or dPsum
# Named barrier ids: per consumer warpgroup 1, 2 (its dS / dQ hand-over to
# its own TMA thread); 3: both consumer warpgroups before the epilogue.
WG_BARRIER = 1
EPILOGUE_BARRIER = 3
# The synchronization mistakes the tests plant (test-only hook, see
# ``plant``): each must be rejected by the checker or the simulator.
MISTAKES = ("do_released_before_dp_retired", "dq_reduce_before_fence",
            "epilogue_races_last_mma", "lse_read_after_release")


@dataclass(frozen=True)
class AttentionBwdConfig:
    """One variant of the backward's main kernel."""
    head_dim: int = 128
    causal: bool = False
    stages: int = 2
    producer_registers: int = 24
    consumer_registers: int = 240

    def __post_init__(self):
        if self.head_dim not in (64, 128):
            raise ValueError(f"AttentionBwdConfig: head_dim must be 64 or 128, "
                             f"got {self.head_dim!r}")
        if self.stages not in (1, 2, 3):
            raise ValueError("AttentionBwdConfig: stages must be 1, 2 or 3")

    block_m = BLOCK_M
    block_n = BLOCK_N

    @property
    def threads(self):
        return THREADS_PER_WARPGROUP * (1 + CONSUMER_WARPGROUPS)

    @property
    def name(self):
        return (f"attn_bwd_d{self.head_dim}{'_causal' if self.causal else ''}"
                f"_{BLOCK_N}x{BLOCK_M}_s{self.stages}")

    # The operand layouts. Q and dO are read as the B operand of S^T / dP^T
    # (N x K: d contiguous) and, the same bytes, as the MN-major B of dK /
    # dV (K x N: query rows are that GEMM's K). K and V likewise: the A of
    # S^T / dP^T, and K the MN-major B of dQ.
    def q_layout(self):
        return OperandLayout("bf16", "K", SWIZZLE, BLOCK_M, self.head_dim)

    def q_mn_layout(self):
        return OperandLayout("bf16", "MN", SWIZZLE, BLOCK_M, self.head_dim)

    def kv_layout(self):
        return OperandLayout("bf16", "K", SWIZZLE, BLOCK_N, self.head_dim)

    def k_mn_layout(self):
        return OperandLayout("bf16", "MN", SWIZZLE, BLOCK_N, self.head_dim)

    def ds_layout(self):
        """One consumer's dS^T tile (its 64 keys x 64 queries, queries
        contiguous) as it writes it: a 64-row C tile."""
        return OperandLayout("bf16", "K", SWIZZLE, WGMMA_M, BLOCK_M)

    def ds_mn_layout(self):
        """The same bytes as the A operand of dQ = dS K: M (queries)
        contiguous, rows are K (keys): MN-major."""
        return OperandLayout("bf16", "MN", SWIZZLE, WGMMA_M, BLOCK_M)

    def dq_layout(self):
        """One consumer's fp32 dQ tile, the source of the TMA reduce-add."""
        return OperandLayout("f32", "K", SWIZZLE, BLOCK_M, self.head_dim)

    def dkv_layout(self):
        """One consumer's 64 rows of dK or dV (bf16), written over its part
        of the K or V tile and stored with TMA."""
        return OperandLayout("bf16", "K", SWIZZLE, WGMMA_M, self.head_dim)

    def smem_bytes(self):
        kv = 2 * self.kv_layout().bytes
        rings = self.stages * 2 * self.q_layout().bytes + (self.stages + 1) * 2 * ROW_BYTES
        per_consumer = CONSUMER_WARPGROUPS * (self.ds_layout().bytes + self.dq_layout().bytes)
        barriers = 8 * 2 * (1 + 4 * self.stages + 2)
        return kv + rings + per_consumer + barriers + 1024

    def meta(self, kernel):
        """What the host launcher needs (ops/attention_bwd_host.py)."""
        return {"signature": [p.kind for _, p in kernel.params],
                "params": [name for name, _ in kernel.params],
                "smem": kernel.smem_bytes, "name": self.name, "head_dim": self.head_dim,
                "causal": self.causal, "block_m": BLOCK_M, "block_n": BLOCK_N,
                "threads": self.threads,
                "layouts": {"q": self.q_layout().to_meta(), "kv": self.kv_layout().to_meta(),
                            "dq": self.dq_layout().to_meta(),
                            "dkv": self.dkv_layout().to_meta()}}


def _no_mistake(name):
    return False


# A test may replace this (``planted``): ``plant(name)`` says whether the
# kernel being built carries the synchronization mistake ``name``. The
# production build never does.
plant = _no_mistake


class planted:
    """``with planted(mistake): build(cfg)`` builds the kernel with one
    mistake of ``MISTAKES`` (tests only)."""

    def __init__(self, mistake):
        if mistake not in MISTAKES:
            raise ValueError(f"planted: mistake must be one of {MISTAKES}, got {mistake!r}")
        self.mistake = mistake

    def __enter__(self):
        global plant
        self._saved = plant
        plant = lambda name: name == self.mistake  # noqa: E731
        return self

    def __exit__(self, *exc):
        global plant
        plant = self._saved


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


@user_line
def store_fragment_f32(acc, smem, warp, lane, layout, first_box=0):
    """Write ``acc`` (``m64 x n`` fp32) into boxes ``first_box ..`` of the
    fp32 tile ``layout`` at ``smem`` (swizzled as TMA reads it): one 8-byte
    store per pair of adjacent columns. With the 128-byte swizzle the eight
    rows a warp writes at once land in different 16-byte chunks."""
    pair_t = ir.VectorType.get([2], f32())
    quad, pair = lane // 4, lane % 4
    row = warp * 16 + quad
    box_cols = layout.box_cols
    for j in range(acc.n // 8):
        col = 8 * j              # + 2 * pair, a multiple of 2: same chunk pair
        box, in_box = divmod(col, box_cols)
        for half in range(2):
            r = row + 8 * half
            offset = r * layout.atom_bytes + (in_box * 4 + pair * 8)
            swizzled = offset ^ ((r & 7) << 4)
            i = 4 * j + 2 * half
            v = llvm.mlir_undef(pair_t)
            v = llvm.insertelement(v, acc.value(i), to_value(Scalar(0)))
            v = llvm.insertelement(v, acc.value(i + 1), to_value(Scalar(1)))
            ptr = smem + ((first_box + box) * layout.box_bytes) + swizzled
            llvm.store(v, ptr.ir_value)


def tma_reduce_add(desc, coords, src):
    """``cp.reduce.async.bulk.tensor.*.global.shared::cta.add.tile``: add the
    box at ``src`` into the tensor at ``coords`` (innermost first); it joins
    the thread's open bulk group, like a TMA store."""
    from pipeline_mlir.pipeline.emit import smem_pointer
    nvvm.CpAsyncBulkTensorReduceOp(
        to_value(desc, what="tma_reduce_add: desc"), smem_pointer(src, "tma_reduce_add: src"),
        nvvm.TMAReduxKind.ADD, [to_value(c, i32(), what="coordinate") for c in coords],
        mode=nvvm.TMAStoreMode.TILE)


def build(cfg=AttentionBwdConfig(), chip="sm_90a"):
    """The main backward kernel for ``cfg`` (``.module`` is the built module)."""
    check_register_budget(cfg.threads, 1, cfg.producer_registers,
                          CONSUMER_WARPGROUPS, cfg.consumer_registers)
    if cfg.smem_bytes() > SMEM_PER_BLOCK:
        raise ValueError(f"{cfg.name}: {cfg.smem_bytes()} bytes of shared memory "
                         f"> {SMEM_PER_BLOCK}")
    d, bm, bn, stages = cfg.head_dim, BLOCK_M, BLOCK_N, cfg.stages
    q_layout, q_mn = cfg.q_layout(), cfg.q_mn_layout()
    kv_layout, k_mn = cfg.kv_layout(), cfg.k_mn_layout()
    ds_layout, ds_mn, dq_layout, dkv_layout = (cfg.ds_layout(), cfg.ds_mn_layout(),
                                               cfg.dq_layout(), cfg.dkv_layout())
    q_bytes, kv_bytes = q_layout.bytes, kv_layout.bytes
    dq_n = min(d, DQ_CHUNK)
    mma_s = wgmma.WarpgroupMma(bm, kv_layout, q_layout)       # S^T, dP^T: m64 n=bm
    mma_kv = wgmma.WarpgroupMma(d, "bf16", q_mn)              # dV, dK: m64 n=d, A regs
    mma_dq = wgmma.WarpgroupMma(dq_n, ds_mn, k_mn)            # dQ: m64 n=dq_n
    k = Kernel(cfg.name, chip=chip, block_dim=cfg.threads,
               params={"q": TmaDescriptor(), "k": TmaDescriptor(), "v": TmaDescriptor(),
                       "do": TmaDescriptor(), "lse_log2": GlobalPtr(align=16),
                       "dpsum": GlobalPtr(align=16), "dq_accum": TmaDescriptor(),
                       "dk": TmaDescriptor(), "dv": TmaDescriptor(),
                       "batch": Int32(), "heads": Int32(), "heads_kv": Int32(),
                       "seqlen_q": Int32(), "seqlen_k": Int32(),
                       "scale_log2": Float32(), "scale": Float32()})
    with k:
        (desc_q, desc_k, desc_v, desc_do, lse_ptr, dpsum_ptr, desc_dq, desc_dk, desc_dv,
         batch, heads, heads_kv, seqlen_q, seqlen_k, scale_log2, scale) = k.args
        # K then V, one stage.
        smem_kv = k.smem_alloc(2 * kv_bytes, align=kv_layout.alignment, name="K and V")
        smem_q = k.smem_alloc(stages * q_bytes, align=q_layout.alignment, name="Q ring")
        smem_do = k.smem_alloc(stages * q_bytes, align=q_layout.alignment, name="dO ring")
        smem_lse = k.smem_alloc((stages + 1) * ROW_BYTES, align=128, name="LSE ring")
        smem_dpsum = k.smem_alloc((stages + 1) * ROW_BYTES, align=128, name="dPsum ring")
        smem_ds = k.smem_alloc(CONSUMER_WARPGROUPS * ds_layout.bytes,
                               align=ds_layout.alignment, name="dS tiles")
        smem_dq = k.smem_alloc(CONSUMER_WARPGROUPS * dq_layout.bytes,
                               align=dq_layout.alignment, name="dQ tiles")

        one = CooperativeGroup(Agent.Thread, 1)
        consumers = CooperativeGroup(Agent.Thread, 4 * CONSUMER_WARPGROUPS)

        def ring(name, tx, n):
            return PipelineTmaAsync.create(num_stages=n, producer_group=one,
                                           consumer_group=consumers, tx_count=tx,
                                           barrier_storage=k.alloc_barriers(2 * n), name=name)
        pipe_kv = ring("kv", 2 * kv_bytes, 1)
        pipe_q = ring("q", q_bytes, stages)
        # LSE and dPsum rings one stage deeper than Q and dO: tiny, and a
        # state of another stage count is a state of its own for the
        # checker and the simulator, which otherwise take the same stage of
        # every ring a state indexes to be read by the GEMMs of any of them.
        row_stages = stages + 1
        pipe_lse = ring("lse", ROW_BYTES, row_stages)
        pipe_do = ring("do", q_bytes, stages)
        pipe_dpsum = ring("dpsum", ROW_BYTES, row_stages)

        # -- the work of this CTA ------------------------------------------------
        n_blocks = (seqlen_k + (bn - 1)) // bn
        cta = k.block_idx()
        n_block = cta % n_blocks
        rest = cta // n_blocks
        h_kv = rest % heads_kv
        b = rest // heads_kv
        group = heads // heads_kv
        m_blocks = (seqlen_q + (bm - 1)) // bm
        padded_q = m_blocks * bm                 # rows of the LSE / dPsum buffers
        offset = seqlen_k - seqlen_q             # causal diagonal, bottom right
        if cfg.causal:
            # The first query that sees this block's first key.
            m_first = (n_block * bn - offset).max(0) // bm
        else:
            m_first = Scalar(0)
        n_m = m_blocks - m_first
        steps = group * n_m                      # at least one: every key is seen

        def step(it):
            """(query head, query block) of step ``it``."""
            return h_kv * group + it // n_m, m_first + it % n_m

        warp = k.warp_idx()
        warpgroup = warp // 4

        with k.if_(warpgroup == 0) as role:
            # ---- producer warpgroup ----
            set_max_registers(cfg.producer_registers, increase=False)
            with k.if_(warp == 0):
                kv_state = make_pipeline_state(PipelineUserType.Producer, 1)
                pipe_kv.producer_acquire(kv_state)
                with k.elect_one():
                    tile = smem_kv.stage(kv_state.index, 2 * kv_bytes)
                    for desc, base in ((desc_k, 0), (desc_v, kv_bytes)):
                        for col, off in kv_layout.box_offsets():
                            pipe_kv.tma_load(kv_state, desc, [h_kv * d + col, n_block * bn, b],
                                             tile + (base + off), kv_layout.box_bytes)
                pipe_kv.producer_commit(kv_state)
                kv_state.advance()

                states = [make_pipeline_state(PipelineUserType.Producer, n)
                          for n in (stages, row_stages, stages, row_stages)]
                for it, _ in k.range(steps, carry=states):
                    h, m_block = step(it)
                    q_state, lse_state, do_state, dpsum_state = states
                    row = (b * heads + h) * padded_q + m_block * bm

                    def tile_load(pipe, state, desc, ring_ptr):
                        pipe.producer_acquire(state)
                        with k.elect_one():
                            t = ring_ptr.stage(state.index, q_bytes)
                            for col, off in q_layout.box_offsets():
                                pipe.tma_load(state, desc, [h * d + col, m_block * bm, b],
                                              t + off, q_layout.box_bytes)
                        pipe.producer_commit(state)
                        state.advance()

                    def row_load(pipe, state, src, ring_ptr):
                        pipe.producer_acquire(state)
                        with k.elect_one():
                            pipe.bulk_copy(state, element_ptr(src, f32(), row),
                                           ring_ptr.stage(state.index, ROW_BYTES), ROW_BYTES)
                        pipe.producer_commit(state)
                        state.advance()

                    tile_load(pipe_q, q_state, desc_q, smem_q)
                    row_load(pipe_lse, lse_state, lse_ptr, smem_lse)
                    tile_load(pipe_do, do_state, desc_do, smem_do)
                    row_load(pipe_dpsum, dpsum_state, dpsum_ptr, smem_dpsum)
                # No arrive may land on this CTA's barriers after it exits.
                pipe_kv.producer_tail(kv_state)
                for pipe, state in zip((pipe_q, pipe_lse, pipe_do, pipe_dpsum), states):
                    pipe.producer_tail(state)

        with role.else_():
            # ---- consumer warpgroups ----
            set_max_registers(cfg.consumer_registers, increase=True)
            cw = warpgroup - 1
            warp_in_wg, lane = warp % 4, k.lane_idx()
            leader = (warp_in_wg == 0) & (lane == 0)
            thread_row, thread_col = Fragment.thread_origin(warp_in_wg, lane)
            wg_sync = NamedBarrier(WG_BARRIER, THREADS_PER_WARPGROUP,
                                   num_ids=CONSUMER_WARPGROUPS)
            # The dQ reduce-adds are bulk groups of the leader thread: a
            # TmaStoreFence (commit / wait of bulk async-groups), since a
            # reduce is no copy.tma_store of a PipelineTmaStore stage.
            dq_groups = TmaStoreFence(num_stages=1)
            out_store = PipelineTmaStore.create(num_stages=1, producer_group=one, name="dkv")

            kv_read = make_pipeline_state(PipelineUserType.Consumer, 1)
            pipe_kv.consumer_wait(kv_read)
            kv_tile = smem_kv.stage(kv_read.index, 2 * kv_bytes)
            # This warpgroup's 64 keys: rows 64 cw.. of K and V as the A of
            # S^T / dP^T; K whole as dQ's MN-major B (its k slices 4 cw..).
            k_a = wgmma.smem_matrix_descriptor(kv_tile + kv_layout.mn_offset(64) * cw,
                                               kv_layout)
            v_a = wgmma.smem_matrix_descriptor(
                kv_tile + kv_bytes + kv_layout.mn_offset(64) * cw, kv_layout)
            k_b = wgmma.smem_matrix_descriptor(kv_tile, k_mn)
            ds_tile = smem_ds + cw * ds_layout.bytes
            ds_a = wgmma.smem_matrix_descriptor(ds_tile, ds_mn)
            dq_tile = smem_dq + cw * dq_layout.bytes
            key0 = n_block * bn + cw * WGMMA_M + thread_row     # this thread's first key

            dv = mma_kv.accumulator()
            dk = mma_kv.accumulator()
            reads = [make_pipeline_state(PipelineUserType.Consumer, n)
                     for n in (stages, row_stages, stages, row_stages)]
            for it, _ in k.range(steps, carry=reads + [dv, dk]):
                h, m_block = step(it)
                q_read, lse_read, do_read, dpsum_read = reads
                pipe_q.consumer_wait(q_read)
                pipe_do.consumer_wait(do_read)
                q_tile = smem_q.stage(q_read.index, q_bytes)
                do_tile = smem_do.stage(do_read.index, q_bytes)
                q_b = wgmma.smem_matrix_descriptor(q_tile, q_layout)
                do_b = wgmma.smem_matrix_descriptor(do_tile, q_layout)

                # S^T = K_w Q^T and dP^T = V_w dO^T: two groups.
                s = Fragment.undef(bm)
                dp = Fragment.undef(bm)
                wgmma.fence()
                for acc, a, bdesc in ((s, k_a, q_b), (dp, v_a, do_b)):
                    for kk in range(kv_layout.k_slices):
                        mma_s.mma(acc, wgmma.k_slice_descriptor(a, kv_layout, kk),
                                  wgmma.k_slice_descriptor(bdesc, q_layout, kk),
                                  accumulate=kk > 0)
                    wgmma.commit_group()
                if plant("do_released_before_dp_retired"):
                    pipe_do.consumer_release(do_read)

                # P^T = exp2(S^T scale log2e - LSE log2e), masked.
                pipe_lse.consumer_wait(lse_read)
                lse_stage = smem_lse.stage(lse_read.index, ROW_BYTES)
                if plant("lse_read_after_release"):
                    pipe_lse.consumer_release(lse_read)
                lse = load_columns(lse_stage, lane, bm)
                if not plant("lse_read_after_release"):
                    pipe_lse.consumer_release(lse_read)
                wgmma.wait_group(1)                      # S^T retired
                p = s.fma(scale_log2, -lse).exp2()
                col0 = m_block * bm + thread_col          # this thread's first query
                tail = (n_block + 1) * bn > seqlen_k      # some key past the end
                if cfg.causal:
                    # Key c is visible to query r when c <= r + offset.
                    needs = tail | (n_block * bn + bn - 1 > m_block * bm + offset)
                else:
                    needs = tail
                with k.if_(needs, carry=[p]):
                    def keep(r, c):
                        key = key0 + r
                        ok = key < seqlen_k
                        return ok & (key <= col0 + c + offset) if cfg.causal else ok
                    p.set(p.where(keep, 0.0))

                pipe_dpsum.consumer_wait(dpsum_read)
                dpsum = load_columns(smem_dpsum.stage(dpsum_read.index, ROW_BYTES), lane, bm)
                pipe_dpsum.consumer_release(dpsum_read)
                wgmma.wait_group(0)                      # dP^T retired
                ds = p * (dp - dpsum)

                # dV += P^T dO, dK += dS^T Q: A from registers, one group.
                p_a = p.to_operand_a("bf16")
                ds_regs = ds.to_operand_a("bf16")
                do_mn = wgmma.smem_matrix_descriptor(do_tile, q_mn)
                q_mnd = wgmma.smem_matrix_descriptor(q_tile, q_mn)
                wgmma.fence()
                for kk in range(len(p_a)):
                    mma_kv.mma_rs(dv, p_a.slice(kk), wgmma.k_slice_descriptor(do_mn, q_mn, kk))
                for kk in range(len(ds_regs)):
                    mma_kv.mma_rs(dk, ds_regs.slice(kk),
                                  wgmma.k_slice_descriptor(q_mnd, q_mn, kk))
                wgmma.commit_group()

                # dS^T to shared memory: the previous step's reduce-add must
                # have read the dQ tile (the leader waits; the barrier tells
                # the others) -- and its dQ GEMMs this dS tile (retired).
                with k.if_(leader):
                    dq_groups.wait()
                wg_sync.arrive_and_wait_w_index(cw)
                epilogue.store_fragment(ds, ds_tile, warp_in_wg, lane, ds_layout)
                fence_view_async_shared()                # generic writes -> wgmma's proxy
                wg_sync.arrive_and_wait_w_index(cw)

                # dQ = dS K_w, dq_n columns at a time, into the fp32 dQ tile.
                for c in range(d // dq_n):
                    dq = Fragment.undef(dq_n)
                    kb = wgmma.advance_descriptor(k_b, k_mn.mn_offset(c * dq_n))
                    wgmma.fence()
                    for kk in range(ds_mn.k_slices):
                        mma_dq.mma(dq, wgmma.k_slice_descriptor(ds_a, ds_mn, kk),
                                   _k_slice(kb, k_mn, cw, kk),
                                   accumulate=kk > 0)
                    wgmma.commit_group()
                    wgmma.wait_group(0)                  # dV, dK and this dQ part retired
                    if c == 0:
                        if not plant("do_released_before_dp_retired"):
                            pipe_do.consumer_release(do_read)
                        pipe_q.consumer_release(q_read)
                    # dQ = scale * dS K: scaled here, so the postprocess
                    # is a plain conversion of the accumulator.
                    store_fragment_f32(dq * scale, dq_tile, warp_in_wg, lane, dq_layout,
                                       first_box=c * dq_n // dq_layout.box_cols)
                if not plant("dq_reduce_before_fence"):
                    fence_view_async_shared()            # generic writes -> TMA's proxy
                wg_sync.arrive_and_wait_w_index(cw)
                with k.if_(leader):
                    for col, off in dq_layout.box_offsets():
                        tma_reduce_add(desc_dq, [h * d + col, m_block * bm, b], dq_tile + off)
                    dq_groups.arrive()
                for st in reads:
                    st.advance()

            # ---- epilogue: dK (scaled) and dV over the K and V tiles ----
            # Every GEMM of this warpgroup retired in its last step; the
            # other warpgroup's may still read K and V, which the tiles of
            # dK and dV overlap (this warpgroup's 64 x d tile covers the
            # first columns of all 128 key rows): both release, and the
            # barrier over both orders the writes after the other's reads.
            pipe_kv.consumer_release(kv_read)
            with k.if_(leader):
                dq_groups.tail()
            if plant("epilogue_races_last_mma"):
                wg_sync.arrive_and_wait_w_index(cw)        # wrong: this warpgroup only
            else:
                NamedBarrier(EPILOGUE_BARRIER, 2 * THREADS_PER_WARPGROUP).arrive_and_wait()
            k_out = kv_tile + cw * dkv_layout.bytes
            v_out = kv_tile + kv_bytes + cw * dkv_layout.bytes
            epilogue.store_fragment(dv, v_out, warp_in_wg, lane, dkv_layout)
            epilogue.store_fragment(dk * scale, k_out, warp_in_wg, lane, dkv_layout)
            fence_view_async_shared()
            wg_sync.arrive_and_wait_w_index(cw)
            with k.if_(leader):
                out_store.producer_acquire()
                row = n_block * bn + cw * WGMMA_M
                for desc, tile in ((desc_dk, k_out), (desc_dv, v_out)):
                    for col, off in dkv_layout.box_offsets():
                        out_store.tma_store(desc, [h_kv * d + col, row, b], tile + off)
                out_store.producer_commit()
                out_store.producer_tail()
    k.config = cfg
    return k


def _k_slice(kb, k_mn, cw, kk):
    """K slice ``4 cw + kk`` of the K tile as dQ's B (this warpgroup's 64
    keys start at slice 4 cw): ``cw`` is a runtime value, so the offset is
    added to the descriptor at run time."""
    step = k_mn.k_slice_offset(1) >> 4          # descriptor units per slice
    off = (cw * (4 * step) + kk * step).to(64)
    return (Scalar(kb) + off).ir_value


def build_variant(overrides, dtype, chip):
    """(cubin, launch facts) of the backward variant ``overrides``
    (``AttentionBwdConfig`` fields, or ``kernel="prep"`` and ``head_dim``
    for the preprocess of ``attention_bwd_prep``) in ``dtype`` ('bf16'):
    the kernel cache's builder of the family ``attention_bwd``."""
    if dtype != "bf16":
        raise ValueError(f"attention_bwd: bf16 only, got {dtype!r}")
    if overrides.get("kernel") == "prep":
        from pipeline_mlir.kernels import attention_bwd_prep

        if set(overrides) != {"kernel", "head_dim"}:
            raise ValueError(f"attention_bwd prep: overrides are kernel and head_dim, got "
                             f"{sorted(overrides)}")
        prep = attention_bwd_prep.build(overrides["head_dim"], chip=chip)
        return bytes(prep.compile()), attention_bwd_prep.meta(prep)
    cfg = AttentionBwdConfig(**overrides)
    kernel = build(cfg, chip=chip)
    return bytes(kernel.compile()), cfg.meta(kernel)


if __name__ == "__main__":
    d = int(sys.argv[sys.argv.index("--d") + 1]) if "--d" in sys.argv else 128
    kern = build(AttentionBwdConfig(head_dim=d, causal="--causal" in sys.argv))
    if "--print-ir" in sys.argv:
        print(kern)
    else:
        print(kern.compile())
