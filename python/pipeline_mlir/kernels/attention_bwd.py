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

Head dim 256 (``column_parts`` = 2): one key block is 64 rows, both
consumer warpgroups compute its S^T and dP^T and each its 128 columns of
dV, dK and dQ (256 columns would not fit one warpgroup's registers).
``dq_split`` (d 128, off by default): each consumer computes dQ's 64
columns ``64 cw ..`` over all 128 keys from both warpgroups' dS^T tiles
(double buffered, a named barrier over both) and reduce-adds half a tile.
``dq_overlap`` (any head dim, off: measured no faster) keeps dQ's column
parts in flight together; ``dq_store_spread`` stores its fp32 tile without
bank conflicts (the op's configuration at d 128 and 256, where it measured
faster: ``attention_configs.BWD_DQ_STORE_SPREAD``). ``dq_deferred`` stores
and reduce-adds a step's last dQ part in the next step, under its S^T
GEMM; ``min_ctas`` declares one CTA per SM (ptxas honours ``setmaxnreg``
at d 64 only then); ``dq_double_buffer`` (d 64) gives each consumer two dQ
tiles used by turns. All three candidates, off (measured in
docs/attention.md).

Release order (what pipeline-verify-protocol's async-read check proves): a
stage of 'do' goes back only after ``wait_group`` retired the dP GEMM and
the dV GEMM that read it, a stage of 'q' after the S and dK GEMMs; 'lse'
and 'dpsum' once their values are in registers. The epilogue writes dK and
dV over the K and V tiles, which both consumer warpgroups read until their
last GEMM: each releases 'kv' after its last wait, and a named barrier over
both lets neither write before the other released.

Stages (``build`` assembles them from ``STAGES``; a ``Stages`` with one
replaced builds a variant, which is how the tests plant mistakes):
``Rings`` (the shared-memory plan and its pipelines), ``KeyBlockSchedule``
(a CTA's key block and its steps), ``producer``, ``Mainloop`` (one query
block's order: every wait and release), ``ScoreGemms`` (S^T, dP^T),
``SoftmaxGrad`` (P^T, the mask, dS^T), ``GradGemms`` (dV, dK, dQ),
``DqReduce`` (the TMA reduce-add of dQ), ``DkvEpilogue``.

Usage: python -m pipeline_mlir.kernels.attention_bwd [--d 64|128|256] [--causal]
(builds, checks and compiles; ``pipeline_mlir/ops/attention_bwd_host.py``
runs it).
"""

import sys
from dataclasses import dataclass
from types import SimpleNamespace

import mlir.ir as ir
from mlir.dialects import llvm, nvvm

from pipeline_mlir.chip_limits import SMEM_PER_BLOCK, WGMMA_M
from pipeline_mlir.kernel import (Float32, GlobalPtr, Int32, Kernel, Scalar,
                                  TmaDescriptor)
from pipeline_mlir.kernel import epilogue, fence_view_async_shared, wgmma
from pipeline_mlir.kernel.fragment import ColVector, Fragment
from pipeline_mlir.kernel.memory import element_ptr
from pipeline_mlir.kernel.ring import Ring
from pipeline_mlir.kernel.values import f32, i32, to_value
from pipeline_mlir.kernel.warpgroup import (THREADS_PER_WARPGROUP,
                                            check_register_budget,
                                            producer_consumer_roles)
from pipeline_mlir.layout import OperandLayout
from pipeline_mlir.pipeline import (Agent, CooperativeGroup, NamedBarrier,
                                    PipelineTmaStore, PipelineUserType, TmaStoreFence)
from pipeline_mlir.user_location import user_line

SWIZZLE = 128
CONSUMER_WARPGROUPS = 2
BLOCK_M = 64                                # query rows per step
DQ_CHUNK = 64                               # dQ columns per GEMM (register budget)
ROW_BYTES = BLOCK_M * 4                     # one query block of LSE or dPsum
HEAD_DIMS = (64, 128, 256)
# Named barrier ids: per consumer warpgroup 1, 2 (its dS / dQ hand-over to
# its own TMA thread); 3: both consumer warpgroups before the epilogue; 4:
# both consumers' dS tiles written (``dq_split``).
WG_BARRIER = 1
EPILOGUE_BARRIER = 3
DS_BARRIER = 4


@dataclass(frozen=True)
class AttentionBwdConfig:
    """One variant of the backward's main kernel."""
    head_dim: int = 128
    causal: bool = False
    stages: int = 2
    producer_registers: int = 24
    consumer_registers: int = 240
    # dQ = dS K split by columns between the consumer warpgroups: each
    # computes its d/2 columns over all 128 keys of the CTA from both
    # warpgroups' dS^T tiles (double buffered; one named barrier over both
    # per step) and reduce-adds a 64 x d/2 tile, rather than each all d
    # columns over its own 64 keys (two reduce-adds of a whole 64 x d tile
    # per step: twice the traffic). Head dim 128 only: at 64 a part would be
    # 32 columns, not whole 128-byte atoms of K. Off until measured.
    dq_split: bool = False
    # dQ's column chunks (``DQ_CHUNK`` wide) kept in flight: each chunk's
    # GEMM is issued before the wait for the one before it, whose fp32
    # stores then overlap it, and the first wait (``wait_group(1)``) needs
    # only dV and dK retired, so Q and dO go back while dQ still runs. The
    # default waits for everything after each chunk and stores it with the
    # tensor core idle for this warpgroup. Measured no faster on an H200
    # (0.97-1.03x the default's time): off.
    dq_overlap: bool = False
    # The fp32 dQ tile's 8-byte stores without bank conflicts: rows 2i and
    # 2i + 1 of the 128-byte swizzle put a column pair in the same two
    # 16-byte chunks, so each half-warp (4 rows) filled only 4 of a row's
    # 8 chunks, twice (4 wavefronts per store where 2 carry the bytes;
    # Nsight Compute on the d 128 kernel). With this, odd rows store their
    # pair 64 bytes over (pair j ^ 2, chosen by a select), and each half
    # fills every chunk once. The op turns it on where it measured faster
    # (attention_configs.BWD_DQ_STORE_SPREAD: d 128 and 256).
    dq_store_spread: bool = False
    # The last dQ part's fp32 store and reduce-add deferred to the next
    # step: its values stay in registers (retired) until that step's S^T
    # and dP^T are issued, and are stored while those GEMMs run; the
    # parts before it are stored while the next part's GEMM runs. The
    # default stores every part and issues the reduce-add before the next
    # step's GEMMs, so each warpgroup's tensor work stops for its dQ
    # epilogue (Nsight Compute: the tensor pipe idles 48% of the d 128
    # kernel, much of it in that epilogue's waits, fences and barriers).
    # Measured on an H200: 5-24% slower at d 128 and 256 (the carried part
    # spills there); 6% faster at d 64 with dq_double_buffer, the spread
    # stores and min_ctas, and 0.5-7% at d 128 with those and dq_split
    # (one 64-column part to carry; docs/attention.md). Off.
    dq_deferred: bool = False
    # ``.minnctapersm 1`` on the kernel: without it ptxas may not know the
    # register count at entry and then ignores every ``setmaxnreg`` (its
    # C7508 note; seen at d 64): the consumers get the flat 168 registers
    # of 65536 / 384 threads instead of 240, and spill. Measured alone on
    # an H200: -2..+4% at d 64, 1-8% slower at d 128 and 256. Off.
    min_ctas: bool = False
    # Two fp32 dQ tiles per consumer warpgroup, used by turns (step ``it``
    # writes tile ``it % 2``): a step's dQ stores wait only for the
    # reduce-add of two steps before to have read its tile, not the one
    # just issued (the leader's ``cp.async.bulk.wait_group.read 1``; the
    # default waits for every reduce-add, then the warpgroup's barrier
    # before the dS^T stores waits for the leader). Shared memory allows
    # it at d 64 (another 32 KiB) and at d 128 with ``dq_split`` (its
    # 64-column tiles: 226.7 KiB); otherwise d 128 and 256 would pass
    # 227 KiB.
    # The tiles are plain shared memory: the checker and the simulator do
    # not model which one a reduce-add still reads (the wait's count is the
    # argument; the GPU tests compare with fp32). Off.
    dq_double_buffer: bool = False

    def __post_init__(self):
        if self.head_dim not in HEAD_DIMS:
            raise ValueError(f"AttentionBwdConfig: head_dim must be one of {HEAD_DIMS}, "
                             f"got {self.head_dim!r}")
        if self.stages not in (1, 2, 3):
            raise ValueError("AttentionBwdConfig: stages must be 1, 2 or 3")
        if self.dq_deferred and self.dq_overlap:
            raise ValueError("AttentionBwdConfig: dq_deferred orders the dQ parts itself "
                             "(each stored while the next one's GEMM runs); not with "
                             "dq_overlap")
        if self.dq_double_buffer and self.smem_bytes() > SMEM_PER_BLOCK:
            raise ValueError(f"AttentionBwdConfig: dq_double_buffer at head_dim "
                             f"{self.head_dim} needs {self.smem_bytes()} bytes of shared "
                             f"memory, over {SMEM_PER_BLOCK} (it fits at 64)")
        if self.dq_split and self.head_dim != 128:
            raise ValueError("AttentionBwdConfig: dq_split needs head_dim 128 (each "
                             "warpgroup's dQ columns whole 128-byte atoms of K; d 256 "
                             "splits every gradient by columns already)")

    block_m = BLOCK_M

    @property
    def column_parts(self):
        """Consumer warpgroups that share one group of 64 keys, each owning
        ``part_cols`` columns of their dK, dV and dQ. 1 up to d = 128 (each
        warpgroup its own 64 keys, all d columns); 2 at d = 256, where one
        warpgroup's dK and dV accumulators over all 256 columns would take
        256 registers a thread: there both compute the keys' S^T and dP^T
        (the same values) and each its 128 columns of the gradients."""
        return 2 if self.head_dim == 256 else 1

    @property
    def part_cols(self):
        """dK, dV and dQ columns one consumer warpgroup computes."""
        return self.head_dim // self.column_parts

    @property
    def dq_cols(self):
        """dQ columns one consumer warpgroup computes and reduce-adds."""
        return self.head_dim // CONSUMER_WARPGROUPS if self.dq_split else self.part_cols

    @property
    def ds_buffers(self):
        """Buffers of the dS^T tiles (each all consumers' tiles): two with
        ``dq_split``, so that a step's writes need not wait for the other
        warpgroup's dQ GEMM of the step before."""
        return 2 if self.dq_split else 1

    @property
    def dq_buffers(self):
        """fp32 dQ tiles per consumer warpgroup (``dq_double_buffer``)."""
        return 2 if self.dq_double_buffer else 1

    @property
    def block_n(self):
        """Key rows per CTA: 64 per group of keys."""
        return WGMMA_M * CONSUMER_WARPGROUPS // self.column_parts

    @property
    def threads(self):
        return THREADS_PER_WARPGROUP * (1 + CONSUMER_WARPGROUPS)

    @property
    def name(self):
        return (f"attn_bwd_d{self.head_dim}{'_causal' if self.causal else ''}"
                f"_{self.block_n}x{BLOCK_M}_s{self.stages}{'_dqs' if self.dq_split else ''}"
                f"{'_dqo' if self.dq_overlap else ''}{'_dqw' if self.dq_store_spread else ''}"
                f"{'_dqd' if self.dq_deferred else ''}{'_mc' if self.min_ctas else ''}"
                f"{'_dqb' if self.dq_double_buffer else ''}")

    # The operand layouts. Q and dO are read as the B operand of S^T / dP^T
    # (N x K: d contiguous) and, the same bytes, as the MN-major B of dK /
    # dV (K x N: query rows are that GEMM's K). K and V likewise: the A of
    # S^T / dP^T, and K the MN-major B of dQ.
    def q_layout(self):
        return OperandLayout("bf16", "K", SWIZZLE, BLOCK_M, self.head_dim)

    def q_mn_layout(self):
        return OperandLayout("bf16", "MN", SWIZZLE, BLOCK_M, self.head_dim)

    def kv_layout(self):
        return OperandLayout("bf16", "K", SWIZZLE, self.block_n, self.head_dim)

    def k_mn_layout(self):
        return OperandLayout("bf16", "MN", SWIZZLE, self.block_n, self.head_dim)

    def ds_layout(self):
        """One consumer's dS^T tile (its 64 keys x 64 queries, queries
        contiguous) as it writes it: a 64-row C tile."""
        return OperandLayout("bf16", "K", SWIZZLE, WGMMA_M, BLOCK_M)

    def ds_mn_layout(self):
        """The same bytes as the A operand of dQ = dS K: M (queries)
        contiguous, rows are K (keys): MN-major. With ``dq_split`` both
        consumers' tiles of one buffer, one after the other: all 128 keys
        (consumer 1's tile starts at K slice 4)."""
        keys = self.block_n if self.dq_split else WGMMA_M
        return OperandLayout("bf16", "MN", SWIZZLE, keys, BLOCK_M)

    def dq_layout(self):
        """One consumer's fp32 dQ tile (its ``dq_cols`` columns), the source
        of the TMA reduce-add."""
        return OperandLayout("f32", "K", SWIZZLE, BLOCK_M, self.dq_cols)

    def dkv_layout(self):
        """One consumer's 64 rows x ``part_cols`` columns of dK or dV
        (bf16), written over its part of the K or V tile and stored with
        TMA. (With two column parts a part's bytes are the K tile's boxes
        of its columns: the same 64-row, 128-byte-row boxes.)"""
        return OperandLayout("bf16", "K", SWIZZLE, WGMMA_M, self.part_cols)

    def smem_bytes(self):
        """Dynamic shared memory ``Rings`` allocates: K and V, the Q / dO and
        LSE / dPsum rings, per consumer a dS^T and a dQ tile, the barriers,
        and the arena's 1024-byte alignment slack."""
        kv = 2 * self.kv_layout().bytes
        rings = self.stages * 2 * self.q_layout().bytes + (self.stages + 1) * 2 * ROW_BYTES
        per_consumer = CONSUMER_WARPGROUPS * (self.ds_buffers * self.ds_layout().bytes
                                              + self.dq_buffers * self.dq_layout().bytes)
        barriers = 8 * 2 * (1 + 4 * self.stages + 2)
        return kv + rings + per_consumer + barriers + 1024

    def meta(self, kernel):
        """What the host launcher needs (ops/attention_bwd_host.py)."""
        return {"signature": [p.kind for _, p in kernel.params],
                "params": [name for name, _ in kernel.params],
                "smem": kernel.smem_bytes, "name": self.name, "head_dim": self.head_dim,
                "causal": self.causal, "block_m": BLOCK_M, "block_n": self.block_n,
                "threads": self.threads,
                "layouts": {"q": self.q_layout().to_meta(), "kv": self.kv_layout().to_meta(),
                            "dq": self.dq_layout().to_meta(),
                            "dkv": self.dkv_layout().to_meta()}}


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


def f32_pair_offset(layout, row, pair, j, spread=False):
    """(box, byte offset in the box) where the thread holding column pair
    ``pair`` of row ``row`` of an ``m64 x n`` fragment stores at its
    ``j``-th store into the fp32 tile ``layout`` (ints or i32 Scalars): its
    pair ``j`` (columns ``8 j + 2 pair ..``); with ``spread``, on odd rows
    its pair ``j ^ 2`` (``store_fragment_f32``)."""
    box, in_box = divmod(8 * j, layout.box_cols)
    offset = row * layout.atom_bytes + (in_box * 4 + pair * 8)
    if spread:
        offset = offset ^ ((row & 1) * 64)     # pair j ^ 2: 16 columns over, same box
    return box, offset ^ ((row & 7) << 4)


@user_line
def store_fragment_f32(acc, smem, warp, lane, layout, first_box=0, spread=False):
    """Write ``acc`` (``m64 x n`` fp32) into boxes ``first_box ..`` of the
    fp32 tile ``layout`` at ``smem`` (swizzled as TMA reads it): one 8-byte
    store per pair of adjacent columns. With the 128-byte swizzle the eight
    rows a warp writes at once land in different 16-byte chunks, but a
    64-bit store is carried out a half-warp (4 rows) at a time, and rows 2i
    and 2i + 1 map a column pair onto the same two chunks: each half fills
    4 of the 8 chunks twice. ``spread``: lanes of odd rows store their pair
    ``j ^ 2`` (64 bytes over, same box) where the even rows store pair
    ``j``, so each half covers all 8 chunks once (one select per value)."""
    from mlir.dialects import arith

    pair_t = ir.VectorType.get([2], f32())
    quad, pair = lane // 4, lane % 4
    row = warp * 16 + quad
    if spread:
        if layout.box_cols != 32 or acc.n % 32:
            raise ValueError("store_fragment_f32: spread needs 32-column boxes filled "
                             f"whole, got {layout.box_cols}-column boxes and n = {acc.n}")
        odd = (quad & 1) == 1                  # rows 16 w + quad (+ 8): same parity
    for j in range(acc.n // 8):
        for half in range(2):
            r = row + 8 * half
            box, swizzled = f32_pair_offset(layout, r, pair, j, spread)
            i = 4 * j + 2 * half
            lo, hi = acc.value(i), acc.value(i + 1)
            if spread:
                other = 4 * (j ^ 2) + 2 * half
                lo = arith.select(odd.ir_value, acc.value(other), lo)
                hi = arith.select(odd.ir_value, acc.value(other + 1), hi)
            v = llvm.mlir_undef(pair_t)
            v = llvm.insertelement(v, lo, to_value(Scalar(0)))
            v = llvm.insertelement(v, hi, to_value(Scalar(1)))
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


@dataclass(frozen=True)
class Stages:
    """The kernel's stages, what ``build`` assembles: the shared-memory plan
    and its rings, the schedule of query blocks, the producer warp, and per
    consumer warpgroup the order of one query block (``mainloop``: every
    wait and release), the S^T / dP^T GEMMs (``scores``), the
    softmax-gradient math (``softmax_grad``: P^T, the mask, dS^T), the dV /
    dK / dQ GEMMs (``grads``), the dQ reduce-add (``dq_reduce``) and the dK /
    dV epilogue. ``build`` takes the production set, ``STAGES``, unless
    given another; the tests plant each synchronization mistake the checker
    or the simulator must reject by replacing one stage with a wrong one of
    their own (``dataclasses.replace(STAGES, epilogue=...)``), so the
    kernel itself holds no mistake."""
    rings: type
    schedule: type
    producer: object
    mainloop: type
    scores: type
    softmax_grad: type
    grads: type
    dq_reduce: type
    epilogue: type


def build(cfg=AttentionBwdConfig(), chip="sm_90a", stages=None):
    """The main backward kernel for ``cfg`` (``.module`` is the built
    module); ``stages``: the ``Stages`` to assemble (``STAGES``)."""
    stages = STAGES if stages is None else stages
    check_register_budget(cfg.threads, 1, cfg.producer_registers,
                          CONSUMER_WARPGROUPS, cfg.consumer_registers)
    if cfg.smem_bytes() > SMEM_PER_BLOCK:
        raise ValueError(f"{cfg.name}: {cfg.smem_bytes()} bytes of shared memory "
                         f"> {SMEM_PER_BLOCK}")
    k = Kernel(cfg.name, chip=chip, block_dim=cfg.threads,
               min_ctas_per_sm=1 if cfg.min_ctas else None,
               params={"q": TmaDescriptor(), "k": TmaDescriptor(), "v": TmaDescriptor(),
                       "do": TmaDescriptor(), "lse_log2": GlobalPtr(align=16),
                       "dpsum": GlobalPtr(align=16), "dq_accum": TmaDescriptor(),
                       "dk": TmaDescriptor(), "dv": TmaDescriptor(),
                       "batch": Int32(), "heads": Int32(), "heads_kv": Int32(),
                       "seqlen_q": Int32(), "seqlen_k": Int32(),
                       "scale_log2": Float32(), "scale": Float32()})
    with k:
        args = SimpleNamespace(**{name: v for (name, _), v in zip(k.params, k.args)})
        rings = stages.rings(k, cfg)
        sched = stages.schedule(k, cfg, args)
        producer_consumer_roles(
            k, cfg.producer_registers, cfg.consumer_registers,
            lambda: stages.producer(k, cfg, rings, sched, args),
            lambda warp, warpgroup: consumer(k, cfg, stages, rings, sched, args, warp,
                                             warpgroup))
    k.config = cfg
    return k


# -- stage: the shared-memory plan and its rings ------------------------------

class Rings:
    """The shared memory of a CTA (``AttentionBwdConfig.smem_bytes`` bounds
    it for the limit check) and the pipelines over it: K and V together
    (``kv``, one stage, loaded once), the rings of Q, LSE, dO and dPsum
    (``q``, ``lse``, ``do``, ``dpsum``), and per consumer warpgroup a dS^T
    tile (``ds``; two buffers of them with ``dq_split``) and an fp32 dQ tile
    (``dq``). Each ring holds its stage count (``Ring``): its buffers, its
    barriers and every pipeline state over it follow it."""

    def __init__(self, k, cfg):
        kv_layout, q_layout = cfg.kv_layout(), cfg.q_layout()
        ds_layout, dq_layout = cfg.ds_layout(), cfg.dq_layout()
        stages = cfg.stages
        # LSE and dPsum rings one stage deeper than Q and dO: tiny, and a
        # state of another stage count is a state of its own for the
        # checker and the simulator, which otherwise take the same stage of
        # every ring a state indexes to be read by the GEMMs of any of them.
        row_stages = stages + 1
        # K then V, one stage.
        self.kv = Ring(k, 1, 2 * kv_layout.bytes, align=kv_layout.alignment, name="K and V")
        self.q = Ring.of_layout(k, stages, q_layout, "Q ring")
        self.do = Ring.of_layout(k, stages, q_layout, "dO ring")
        self.lse = Ring(k, row_stages, ROW_BYTES, align=128, name="LSE ring")
        self.dpsum = Ring(k, row_stages, ROW_BYTES, align=128, name="dPsum ring")
        self.ds = k.smem_alloc(cfg.ds_buffers * CONSUMER_WARPGROUPS * ds_layout.bytes,
                               align=ds_layout.alignment, name="dS tiles")
        self.dq = k.smem_alloc(cfg.dq_buffers * CONSUMER_WARPGROUPS * dq_layout.bytes,
                               align=dq_layout.alignment, name="dQ tiles")

        self.one = CooperativeGroup(Agent.Thread, 1)
        # Every consumer warp releases a stage once.
        consumers = CooperativeGroup(Agent.Thread, 4 * CONSUMER_WARPGROUPS)
        for name, ring in (("kv", self.kv), ("q", self.q), ("lse", self.lse),
                           ("do", self.do), ("dpsum", self.dpsum)):
            ring.create_pipeline(k, self.one, consumers, name)

    def states(self, side):
        """A start state of ``side`` for each of Q, LSE, dO and dPsum (the
        rings of a query block, in the order the producer fills them)."""
        return [r.state(side) for r in (self.q, self.lse, self.do, self.dpsum)]


# -- stage: the schedule -----------------------------------------------------

class KeyBlockSchedule:
    """What a CTA works on: one key block of ``cfg.block_n`` rows of one K/V
    head and batch entry (``n_block``, ``h_kv``, ``b``, from the block
    index), and its steps: every (query head of the GQA group, query block
    of ``BLOCK_M`` rows) that sees the key block (causal: from the first
    query block whose diagonal reaches it)."""

    def __init__(self, k, cfg, args):
        bm, bn = BLOCK_M, cfg.block_n
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


# -- stage: the producer -----------------------------------------------------

def producer(k, cfg, rings, sched, args):
    """Warp 0 of warpgroup 0: the CTA's K and V once, then per step Q,
    LSE, dO and dPsum, each into its ring: Q and dO as 3-D TMA boxes (rows
    past the sequence read zeros), LSE and dPsum as bulk copies of one
    query block's padded row."""
    d, bm, bn = cfg.head_dim, BLOCK_M, cfg.block_n
    kv_layout, q_layout = cfg.kv_layout(), cfg.q_layout()
    kv_bytes = kv_layout.bytes
    b, h_kv = sched.b, sched.h_kv
    pipe_kv = rings.kv.pipe
    kv_state = rings.kv.state(PipelineUserType.Producer)
    pipe_kv.producer_acquire(kv_state)
    with k.elect_one():
        tile = rings.kv.buffer(kv_state.index)
        for desc, base in ((args.k, 0), (args.v, kv_bytes)):
            for col, off in kv_layout.box_offsets():
                pipe_kv.tma_load(kv_state, desc, [h_kv * d + col, sched.n_block * bn, b],
                                 tile + (base + off), kv_layout.box_bytes)
    pipe_kv.producer_commit(kv_state)
    kv_state.advance()

    states = rings.states(PipelineUserType.Producer)
    for it, _ in k.range(sched.steps, carry=states):
        h, m_block = sched.step(it)
        q_state, lse_state, do_state, dpsum_state = states
        row = (b * args.heads + h) * sched.padded_q + m_block * bm

        def tile_load(ring, state, desc):
            ring.pipe.producer_acquire(state)
            with k.elect_one():
                t = ring.buffer(state.index)
                for col, off in q_layout.box_offsets():
                    ring.pipe.tma_load(state, desc, [h * d + col, m_block * bm, b],
                                       t + off, q_layout.box_bytes)
            ring.pipe.producer_commit(state)
            state.advance()

        def row_load(ring, state, src):
            ring.pipe.producer_acquire(state)
            with k.elect_one():
                ring.pipe.bulk_copy(state, element_ptr(src, f32(), row),
                                    ring.buffer(state.index), ROW_BYTES)
            ring.pipe.producer_commit(state)
            state.advance()

        tile_load(rings.q, q_state, args.q)
        row_load(rings.lse, lse_state, args.lse_log2)
        tile_load(rings.do, do_state, args.do)
        row_load(rings.dpsum, dpsum_state, args.dpsum)
    # No arrive may land on this CTA's barriers after it exits.
    pipe_kv.producer_tail(kv_state)
    for ring, state in zip((rings.q, rings.lse, rings.do, rings.dpsum), states):
        ring.pipe.producer_tail(state)


# -- the consumer warpgroups ---------------------------------------------------

def consumer(k, cfg, stages, rings, sched, args, warp, warpgroup):
    """A consumer warpgroup: dK and dV of its 64 keys (d 256: its columns
    of the CTA's 64 keys) over every step, then the epilogue."""
    cw = warpgroup - 1
    warp_in_wg, lane = warp % 4, k.lane_idx()
    leader = (warp_in_wg == 0) & (lane == 0)
    thread_row, thread_col = Fragment.thread_origin(warp_in_wg, lane)
    wg_sync = NamedBarrier(WG_BARRIER, THREADS_PER_WARPGROUP, num_ids=CONSUMER_WARPGROUPS)
    epi = stages.epilogue(k, cfg, rings, sched, args, cw, warp_in_wg, lane, leader, wg_sync)

    kv_read = rings.kv.state(PipelineUserType.Consumer)
    rings.kv.pipe.consumer_wait(kv_read)
    kv_tile = rings.kv.buffer(kv_read.index)
    scores = stages.scores(cfg, kv_tile, cw)
    grads = stages.grads(k, cfg, rings, kv_tile, cw, warp_in_wg, lane, wg_sync)
    reduce = stages.dq_reduce(k, cfg, sched, args, grads.dq_tile, cw, leader, wg_sync)
    softmax_grad = stages.softmax_grad(k, cfg, rings, sched, args, cw, lane,
                                       thread_row, thread_col)
    mainloop = stages.mainloop(k, cfg, rings, sched, args, scores, softmax_grad, grads,
                               reduce)

    dv = grads.accumulator()
    dk = grads.accumulator()
    reads = rings.states(PipelineUserType.Consumer)
    if not cfg.dq_deferred:
        for it, _ in k.range(sched.steps, carry=reads + [dv, dk]):
            mainloop.step(it, reads, dv, dk)
    else:
        # The previous step's last dQ part (retired, not stored yet).
        dq_last = Fragment.zeros(grads.dq_n)
        for it, _ in k.range(sched.steps, carry=reads + [dv, dk, dq_last]):
            mainloop.step(it, reads, dv, dk, dq_last)
        mainloop.finish_dq(sched.steps - 1, dq_last)

    # Every GEMM of this warpgroup retired in its last step; K and V go
    # back before the epilogue writes over them.
    rings.kv.pipe.consumer_release(kv_read)
    reduce.tail()
    epi(kv_tile, dv, dk)


# -- stage: one query block, its waits and releases ----------------------------

class Mainloop:
    """One step (query head, query block) of a consumer warpgroup, and
    every wait and release of its rings: a 'do' stage goes back after
    ``wait_group`` retired the dP^T GEMM and the dV GEMM that read it, a
    'q' stage after the S^T and dK GEMMs (both at the first dQ part's
    wait); 'lse' and 'dpsum' (``softmax_grad``) once their values are in
    registers."""

    def __init__(self, k, cfg, rings, sched, args, scores, softmax_grad, grads, reduce):
        self.k, self.cfg, self.rings, self.sched, self.args = k, cfg, rings, sched, args
        self.scores, self.softmax_grad = scores, softmax_grad
        self.grads, self.reduce = grads, reduce

    def step(self, it, reads, dv, dk, dq_last=None):
        """Step ``it``; with ``dq_deferred``, ``dq_last`` holds the
        previous step's last dQ part (stored and reduce-added here, while
        this step's S^T and dP^T run) and is set to this step's."""
        h, m_block = self.sched.step(it)
        q_read, lse_read, do_read, dpsum_read = reads
        rings = self.rings
        self.grads.dq_step = it                  # the dQ tile of this step
        rings.q.pipe.consumer_wait(q_read)
        rings.do.pipe.consumer_wait(do_read)
        q_tile = rings.q.buffer(q_read.index)
        do_tile = rings.do.buffer(do_read.index)
        if dq_last is None:
            s, dp = self.issue_scores(reads, q_tile, do_tile)
        else:
            def finish():
                with self.k.if_(it > 0):
                    self.finish_dq(it - 1, dq_last)
            # With 128 or more gradient columns (dK and dV take 128
            # registers) the previous dQ part is stored between S^T's
            # issue and dP^T's: its 32 registers and dP^T's accumulator
            # would not fit next to each other without spills.
            early = self.cfg.part_cols < 128
            s, dp = self.issue_scores(reads, q_tile, do_tile,
                                      between=None if early else finish)
            if early:
                finish()
        p, ds = self.softmax_grad(s, dp, lse_read, dpsum_read, m_block)
        self.grads.issue_dkv(dv, dk, p, ds, q_tile, do_tile)
        # dS^T to shared memory: the previous step's reduce-add must have
        # read the dQ tile -- and its dQ GEMMs this dS tile (retired).
        self.reduce.acquire()
        ds_a = self.grads.store_ds(ds, it)
        retired = lambda: self.release_q_do(q_read, do_read)   # noqa: E731
        if dq_last is None:
            self.grads.dq(ds_a, self.args.scale, retired)
            self.reduce.issue(h, m_block, it)
        else:
            dq_last.set(self.grads.dq_deferred(ds_a, self.args.scale, retired))
        for st in reads:
            st.advance()

    def finish_dq(self, it, dq_last):
        """``dq_deferred``: step ``it``'s last dQ part into the dQ tile and
        the tile's reduce-add (the parts before it are in the tile)."""
        self.grads.store_dq(self.grads.dq_chunks - 1, dq_last, step=it)
        self.reduce.issue(*self.sched.step(it), it)

    def issue_scores(self, reads, q_tile, do_tile, between=None):
        """S^T and dP^T issued, one wgmma group each (``between()``
        between them); dO's stage stays held (``release_q_do``)."""
        return self.scores.issue(q_tile, do_tile, between)

    def release_q_do(self, q_read, do_read):
        """Q and dO are no longer read: the dV and dK GEMMs retired (and
        the S^T and dP^T GEMMs before them)."""
        self.rings.do.pipe.consumer_release(do_read)
        self.rings.q.pipe.consumer_release(q_read)


# -- stage: S^T and dP^T ----------------------------------------------------------

class ScoreGemms:
    """S^T = K_w Q^T and dP^T = V_w dO^T of this warpgroup's 64 keys: A
    (its rows of K or V) and B (Q or dO, N x K) from shared memory. With two
    column parts both warpgroups of the key group compute the same two."""

    def __init__(self, cfg, kv_tile, cw):
        kv_layout = self.kv_layout = cfg.kv_layout()
        self.q_layout = cfg.q_layout()
        self.mma = wgmma.WarpgroupMma(BLOCK_M, kv_layout, self.q_layout)   # m64 n=bm
        if cfg.column_parts == 1:
            # This warpgroup's 64 keys: rows 64 cw.. of K and V.
            self.k_a = wgmma.smem_matrix_descriptor(kv_tile + kv_layout.mn_offset(64) * cw,
                                                    kv_layout)
            self.v_a = wgmma.smem_matrix_descriptor(
                kv_tile + kv_layout.bytes + kv_layout.mn_offset(64) * cw, kv_layout)
        else:
            # The CTA's 64 keys, every warpgroup's.
            self.k_a = wgmma.smem_matrix_descriptor(kv_tile, kv_layout)
            self.v_a = wgmma.smem_matrix_descriptor(kv_tile + kv_layout.bytes, kv_layout)

    def issue(self, q_tile, do_tile, between=None):
        """(S^T, dP^T): two committed groups, S^T's first; ``between()``,
        if given, runs after S^T's issue and before dP^T's."""
        kv_layout, q_layout = self.kv_layout, self.q_layout
        q_b = wgmma.smem_matrix_descriptor(q_tile, q_layout)
        do_b = wgmma.smem_matrix_descriptor(do_tile, q_layout)
        s = Fragment.undef(BLOCK_M)
        dp = Fragment.undef(BLOCK_M)
        for acc, a, bdesc in ((s, self.k_a, q_b), (dp, self.v_a, do_b)):
            if acc is dp and between is not None:
                between()
            if acc is s or between is not None:
                wgmma.fence()
            for kk in range(kv_layout.k_slices):
                self.mma.mma(acc, wgmma.k_slice_descriptor(a, kv_layout, kk),
                             wgmma.k_slice_descriptor(bdesc, q_layout, kk),
                             accumulate=kk > 0)
            wgmma.commit_group()
        return s, dp


# -- stage: the softmax gradient -----------------------------------------------

class SoftmaxGrad:
    """P^T and dS^T in registers, once the score GEMMs retire:

        P^T  = exp2(S^T * scale * log2(e) - LSE * log2(e)), masked
        dS^T = P^T * (dP^T - dPsum)

    LSE and dPsum are read from their ring stages between the wait and the
    release, each as the columns (queries) this thread holds."""

    def __init__(self, k, cfg, rings, sched, args, cw, lane, thread_row, thread_col):
        self.k, self.cfg, self.rings, self.sched, self.args = k, cfg, rings, sched, args
        self.lane, self.thread_col = lane, thread_col
        if cfg.column_parts == 1:
            self.key0 = sched.n_block * cfg.block_n + cw * WGMMA_M + thread_row  # first key
        else:
            self.key0 = sched.n_block * cfg.block_n + thread_row     # the keys are shared

    def __call__(self, s, dp, lse_read, dpsum_read, m_block):
        """(P^T, dS^T) of the step's S^T and dP^T (both groups retired
        here)."""
        lse = self.load_lse(lse_read)
        wgmma.wait_group(1)                      # S^T retired
        p = s.fma(self.args.scale_log2, -lse).exp2()
        self.mask(p, m_block)
        dpsum = self.load_dpsum(dpsum_read)
        wgmma.wait_group(0)                      # dP^T retired
        return p, p * (dp - dpsum)

    def load_lse(self, lse_read):
        pipe = self.rings.lse.pipe
        pipe.consumer_wait(lse_read)
        lse = load_columns(self.rings.lse.buffer(lse_read.index), self.lane, BLOCK_M)
        pipe.consumer_release(lse_read)
        return lse

    def load_dpsum(self, dpsum_read):
        pipe = self.rings.dpsum.pipe
        pipe.consumer_wait(dpsum_read)
        dpsum = load_columns(self.rings.dpsum.buffer(dpsum_read.index), self.lane, BLOCK_M)
        pipe.consumer_release(dpsum_read)
        return dpsum

    def mask(self, p, m_block):
        """P^T = 0 where the key is past the sequence or (causal) after the
        query's diagonal; only in blocks that cross either."""
        k, cfg, sched = self.k, self.cfg, self.sched
        bm, bn, n_block, seqlen_k = BLOCK_M, cfg.block_n, sched.n_block, sched.seqlen_k
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
            def keep(r, c):
                key = key0 + r
                ok = key < seqlen_k
                return ok & (key <= col0 + c + offset) if cfg.causal else ok
            p.set(p.where(keep, 0.0))


# -- stage: dV, dK and dQ ----------------------------------------------------------

class GradGemms:
    """The gradient GEMMs of one step:

        dV_w += P^T dO, dK_w += dS^T Q    A from registers, B MN-major
        dQ    = dS K_w                    A = dS^T from this warpgroup's
                                          tile (read transposed), B = K
                                          MN-major (its k slices 4 cw..)

    dQ is computed ``DQ_CHUNK`` columns at a time (register budget), scaled
    and written as fp32 into this warpgroup's dQ tile. With two column parts
    (d = 256) warpgroup ``cw`` computes columns ``part_cols * cw ..`` of
    each, over the CTA's 64 keys (all k slices of K). With ``dq_split``
    (d = 128) its dQ is columns ``64 cw ..`` over all 128 keys: A from both
    warpgroups' dS^T tiles of the step's buffer, B from K's column atom
    ``cw``."""

    def __init__(self, k, cfg, rings, kv_tile, cw, warp_in_wg, lane, wg_sync):
        self.k, self.cfg, self.cw = k, cfg, cw
        self.warp_in_wg, self.lane, self.wg_sync = warp_in_wg, lane, wg_sync
        n = cfg.part_cols
        self.q_mn, self.k_mn = cfg.q_mn_layout(), cfg.k_mn_layout()
        self.ds_layout, self.ds_mn = cfg.ds_layout(), cfg.ds_mn_layout()
        self.dq_layout = cfg.dq_layout()
        self.dq_n = min(cfg.dq_cols, DQ_CHUNK)
        self.mma_kv = wgmma.WarpgroupMma(n, "bf16", self.q_mn)    # m64 n=part_cols, A regs
        self.mma_dq = wgmma.WarpgroupMma(self.dq_n, self.ds_mn, self.k_mn)   # m64 n=dq_n
        if cfg.dq_split:
            # This warpgroup's dQ columns of K (one 128-byte atom), all keys.
            self.k_b = wgmma.smem_matrix_descriptor(
                kv_tile + self.k_mn.mn_offset(cfg.dq_cols) * cw, self.k_mn)
        elif cfg.column_parts == 1:
            # K whole as dQ's MN-major B (this warpgroup's k slices 4 cw..).
            self.k_b = wgmma.smem_matrix_descriptor(kv_tile, self.k_mn)
        else:
            # This warpgroup's columns of K (whole 128-byte atoms), all keys.
            self.k_b = wgmma.smem_matrix_descriptor(
                kv_tile + self.k_mn.mn_offset(n) * cw, self.k_mn)
        self.ds_tiles = rings.ds
        self.ds_tile = rings.ds + cw * self.ds_layout.bytes
        # dq_split: the A of a step is its buffer's two tiles (``store_ds``).
        self.ds_a = (None if cfg.dq_split
                     else wgmma.smem_matrix_descriptor(self.ds_tile, self.ds_mn))
        self.dq_tiles = rings.dq + cw * self.dq_layout.bytes
        self.dq_step = None
        self.both = (NamedBarrier(DS_BARRIER, 2 * THREADS_PER_WARPGROUP) if cfg.dq_split
                     else None)
        self.one_stage_rings = rings.q.pipe.num_stages == rings.kv.pipe.num_stages

    def accumulator(self):
        """A zero dK or dV accumulator (m64 x d)."""
        return self.mma_kv.accumulator()

    def issue_dkv(self, dv, dk, p, ds, q_tile, do_tile):
        """dV += P^T dO, dK += dS^T Q: A from registers, one group."""
        q_mn = self.q_mn
        p_a = p.to_operand_a("bf16")
        ds_regs = ds.to_operand_a("bf16")
        if self.cfg.column_parts > 1:
            # This warpgroup's columns of dO and Q (N of both GEMMs).
            part = q_mn.mn_offset(self.cfg.part_cols) * self.cw
            do_tile, q_tile = do_tile + part, q_tile + part
        do_mn = wgmma.smem_matrix_descriptor(do_tile, q_mn)
        q_mnd = wgmma.smem_matrix_descriptor(q_tile, q_mn)
        wgmma.fence()
        for kk in range(len(p_a)):
            self.mma_kv.mma_rs(dv, p_a.slice(kk), wgmma.k_slice_descriptor(do_mn, q_mn, kk))
        for kk in range(len(ds_regs)):
            self.mma_kv.mma_rs(dk, ds_regs.slice(kk), wgmma.k_slice_descriptor(q_mnd, q_mn, kk))
        wgmma.commit_group()

    def store_ds(self, ds, it):
        """dS^T (bf16) of step ``it`` into this warpgroup's tile, handed to
        the dQ GEMMs; returns their A descriptor. The first barrier says the
        tile is free (the previous step's dQ GEMMs retired, its reduce-add
        read the dQ tile), the fence makes the generic writes visible to
        wgmma's proxy before the second.

        With ``dq_split`` both warpgroups' dQ GEMMs read both tiles: the
        second barrier spans both warpgroups, and the tiles alternate
        between two buffers (step ``it`` writes buffer ``it % 2``), so a
        write follows the other warpgroup's arrival at the previous step's
        barrier, which it reaches after its dQ GEMMs of the step before
        that, the last reader of the buffer, retired."""
        cw = self.cw
        self.wg_sync.arrive_and_wait_w_index(cw)
        if not self.cfg.dq_split:
            epilogue.store_fragment(ds, self.ds_tile, self.warp_in_wg, self.lane,
                                    self.ds_layout)
            fence_view_async_shared()            # generic writes -> wgmma's proxy
            self.wg_sync.arrive_and_wait_w_index(cw)
            return self.ds_a
        buf = (it % 2) * (CONSUMER_WARPGROUPS * self.ds_layout.bytes)
        epilogue.store_fragment(ds, self.ds_tile + buf, self.warp_in_wg, self.lane,
                                self.ds_layout)
        fence_view_async_shared()                # generic writes -> wgmma's proxy
        self.both.arrive_and_wait()
        return wgmma.smem_matrix_descriptor(self.ds_tiles + buf, self.ds_mn)

    def wait_dkv(self):
        """``dq_overlap``: with dQ part 0 just committed, wait until the
        dV and dK group before it retired (groups retire in order), leaving
        part 0 in flight. Not where Q and dO have one stage, as K and V
        (d 256): the simulator ties a GEMM's reads to a stage through the
        state index its operand comes from, so part 0's reads of K count
        as reads of stage 0 of every one-stage ring, Q's and dO's too, and
        releasing them with part 0 in flight would be reported; there the
        wait is for part 0 too, as in the default order (part 0's stores
        still overlap part 1)."""
        wgmma.wait_group(0 if self.one_stage_rings else 1)

    def dq_tile(self, step=None):
        """This warpgroup's fp32 dQ tile of step ``step`` (with
        ``dq_double_buffer`` tile ``step % 2``; None: the step being
        computed, ``dq_step``)."""
        step = self.dq_step if step is None else step
        if self.cfg.dq_buffers == 1:
            return self.dq_tiles
        return self.dq_tiles + (step % 2) * (CONSUMER_WARPGROUPS * self.dq_layout.bytes)

    @property
    def dq_chunks(self):
        """dQ parts of one step (``dq_n`` columns each)."""
        return self.cfg.dq_cols // self.dq_n

    def issue_dq(self, ds_a, c):
        """dQ part ``c`` (columns ``c dq_n ..``) = dS K_w, one committed
        group; returns its accumulator."""
        cfg, dq_n, k_mn, ds_mn = self.cfg, self.dq_n, self.k_mn, self.ds_mn
        # Each warpgroup's own keys are K slices 4 cw.. of the K tile;
        # otherwise (shared keys, or dq_split's all keys) every slice.
        own_keys = cfg.column_parts == 1 and not cfg.dq_split
        dq = Fragment.undef(dq_n)
        kb = wgmma.advance_descriptor(self.k_b, k_mn.mn_offset(c * dq_n))
        wgmma.fence()
        for kk in range(ds_mn.k_slices):
            a_slice = wgmma.k_slice_descriptor(ds_a, ds_mn, kk)
            b_slice = (_k_slice(kb, k_mn, self.cw, kk) if own_keys
                       else wgmma.k_slice_descriptor(kb, k_mn, kk))
            self.mma_dq.mma(dq, a_slice, b_slice, accumulate=kk > 0)
        wgmma.commit_group()
        return dq

    def store_dq(self, c, dq, scale=None, step=None):
        """dQ part ``c`` (retired), times ``scale`` (dQ = scale * dS K,
        so the postprocess is a plain conversion of the accumulator; None:
        scaled already), into its boxes of step ``step``'s fp32 dQ tile."""
        if scale is not None:
            dq = dq * scale
        store_fragment_f32(dq, self.dq_tile(step), self.warp_in_wg, self.lane,
                           self.dq_layout, first_box=c * self.dq_n // self.dq_layout.box_cols,
                           spread=self.cfg.dq_store_spread)

    def dq(self, ds_a, scale, retired):
        """dQ = scale * dS K_w (A: ``ds_a``), ``dq_n`` columns at a time,
        into the fp32 dQ tile; ``retired()`` runs once the first part's wait
        retired every GEMM of the step that reads Q or dO. By default each
        part is waited for (with dV and dK) and stored before the next is
        issued; with ``dq_overlap`` part c + 1 is issued before part c is
        waited for and stored, and the first wait is for dV and dK alone."""
        chunks = self.dq_chunks

        def issue(c):
            return self.issue_dq(ds_a, c)

        def store(c, dq):
            self.store_dq(c, dq, scale)

        if not self.cfg.dq_overlap:
            for c in range(chunks):
                dq = issue(c)
                wgmma.wait_group(0)              # dV, dK and this dQ part retired
                if c == 0:
                    retired()
                store(c, dq)
            return
        # Groups retire in order: [dV dK], [dQ 0], [dQ 1], ...
        dq = issue(0)
        self.wait_dkv()
        retired()
        for c in range(1, chunks):
            nxt = issue(c)
            wgmma.wait_group(1)                  # dQ part c - 1 retired
            store(c - 1, dq)
            dq = nxt
        wgmma.wait_group(0)
        store(chunks - 1, dq)

    def dq_deferred(self, ds_a, scale, retired):
        """``dq_deferred``: dQ as ``dq``, but each part is stored while
        the next one's GEMM runs, and the last one, retired, is returned
        unstored (``Mainloop.finish_dq`` stores it in the next step, after
        that step's S^T and dP^T are issued). The first wait retires dV,
        dK and part 0 together, then ``retired()``: no GEMM is in flight
        when Q and dO go back (so also where they have one stage)."""
        dq = self.issue_dq(ds_a, 0)
        wgmma.wait_group(0)                      # dV, dK and dQ part 0 retired
        retired()
        for c in range(1, self.dq_chunks):
            nxt = self.issue_dq(ds_a, c)
            self.store_dq(c - 1, dq, scale)      # while part c runs
            wgmma.wait_group(0)
            dq = nxt
        # Scaled now: what the loop carries is no wgmma's output register
        # (ptxas otherwise waits for every wgmma group at the next step's
        # first use of it, its S^T and dP^T included).
        return dq * scale


# -- stage: the dQ reduce-add ----------------------------------------------------

class DqReduce:
    """This warpgroup's dQ tile added into the fp32 accumulator by TMA
    reduce-adds (``cp.reduce.async.bulk.tensor ... add``), one thread's
    bulk groups: a ``TmaStoreFence`` (commit / wait of bulk async-groups),
    since a reduce is no copy.tma_store of a ``PipelineTmaStore`` stage."""

    def __init__(self, k, cfg, sched, args, dq_tile, cw, leader, wg_sync):
        self.k, self.cfg, self.sched, self.args = k, cfg, sched, args
        # dq_tile(step): the step's tile (GradGemms.dq_tile).
        self.dq_tile, self.cw, self.leader, self.wg_sync = dq_tile, cw, leader, wg_sync
        # With two tiles a wait leaves the last reduce-add reading.
        self.groups = TmaStoreFence(num_stages=cfg.dq_buffers)

    def acquire(self):
        """The leader waits until the previous reduce-adds read the tile
        (the warpgroup's next barrier tells the others); with two tiles,
        all but the last one, which reads the other tile."""
        with self.k.if_(self.leader):
            self.groups.wait()

    def issue(self, h, m_block, step=None):
        """Fence the generic writes of step ``step``'s dQ tile for TMA's
        proxy, let the leader know every warp wrote, and add the tile at
        query block ``m_block`` of head ``h``."""
        fence_view_async_shared()                # generic writes -> TMA's proxy
        self.reduce(h, m_block, step)

    def reduce(self, h, m_block, step=None):
        args, cfg = self.args, self.cfg
        self.wg_sync.arrive_and_wait_w_index(self.cw)
        with self.k.if_(self.leader):
            for col, off in cfg.dq_layout().box_offsets():
                tma_reduce_add(args.dq_accum, [dq_column(cfg, h, self.cw, col),
                                               m_block * BLOCK_M, self.sched.b],
                               self.dq_tile(step) + off)
            self.groups.arrive()

    def tail(self):
        """The last reduce-adds must finish reading before the CTA exits."""
        with self.k.if_(self.leader):
            self.groups.tail()


# -- stage: the dK / dV epilogue ---------------------------------------------------

class DkvEpilogue:
    """dK (scaled) and dV written over the K and V tiles and stored by TMA.
    The other warpgroup's GEMMs may still read K and V, which the tiles of
    dK and dV overlap (this warpgroup's 64 x d tile covers the first
    columns of all 128 key rows; at d 256 its 64 x 128 tile is the boxes of
    its columns, which the other warpgroup's S^T and dP^T read): each
    warpgroup released 'kv', and the barrier over both orders the writes
    after the other's reads."""

    def __init__(self, k, cfg, rings, sched, args, cw, warp_in_wg, lane, leader, wg_sync):
        self.k, self.cfg, self.sched, self.args, self.cw = k, cfg, sched, args, cw
        self.warp_in_wg, self.lane, self.leader, self.wg_sync = warp_in_wg, lane, leader, wg_sync
        self.out_store = PipelineTmaStore.create(num_stages=1, producer_group=rings.one,
                                                 name="dkv")

    def both_released(self):
        """Wait until both consumer warpgroups are past their last GEMM."""
        NamedBarrier(EPILOGUE_BARRIER, 2 * THREADS_PER_WARPGROUP).arrive_and_wait()

    def __call__(self, kv_tile, dv, dk):
        k, cfg, cw, args = self.k, self.cfg, self.cw, self.args
        dkv_layout = cfg.dkv_layout()
        kv_bytes = cfg.kv_layout().bytes
        self.both_released()
        k_out = kv_tile + cw * dkv_layout.bytes
        v_out = kv_tile + kv_bytes + cw * dkv_layout.bytes
        epilogue.store_fragment(dv, v_out, self.warp_in_wg, self.lane, dkv_layout)
        epilogue.store_fragment(dk * args.scale, k_out, self.warp_in_wg, self.lane, dkv_layout)
        fence_view_async_shared()
        self.wg_sync.arrive_and_wait_w_index(cw)
        with k.if_(self.leader):
            self.out_store.producer_acquire()
            sched = self.sched
            row = dkv_row(cfg, sched.n_block, cw)
            for desc, tile in ((args.dk, k_out), (args.dv, v_out)):
                for col, off in dkv_layout.box_offsets():
                    self.out_store.tma_store(desc, [dkv_column(cfg, sched.h_kv, cw, col), row,
                                                    sched.b], tile + off)
            self.out_store.producer_commit()
            self.out_store.producer_tail()


# -- where a consumer warpgroup's tiles go (ints or i32 Scalars) ---------------------

def dq_column(cfg, h, cw, col):
    """dQ's tensor column (in the host's (batch, seqlen, heads * d) map) of
    column ``col`` of consumer ``cw``'s dQ tile, query head ``h``."""
    d = cfg.head_dim
    if cfg.column_parts == 1 and not cfg.dq_split:
        return h * d + col
    return h * d + cw * cfg.dq_cols + col


def dkv_row(cfg, n_block, cw):
    """dK's and dV's first row of consumer ``cw``'s tile in key block
    ``n_block``: its 64 keys (with column parts, the CTA's)."""
    if cfg.column_parts == 1:
        return n_block * cfg.block_n + cw * WGMMA_M
    return n_block * cfg.block_n


def dkv_column(cfg, h_kv, cw, col):
    """dK's and dV's tensor column of column ``col`` of consumer ``cw``'s
    tile, K/V head ``h_kv`` (with column parts, within its columns)."""
    if cfg.column_parts == 1:
        return h_kv * cfg.head_dim + col
    return h_kv * cfg.head_dim + cw * cfg.part_cols + col


STAGES = Stages(rings=Rings, schedule=KeyBlockSchedule, producer=producer,
                mainloop=Mainloop, scores=ScoreGemms, softmax_grad=SoftmaxGrad,
                grads=GradGemms, dq_reduce=DqReduce, epilogue=DkvEpilogue)


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
    from pipeline_mlir.ops import attention_configs

    d = int(sys.argv[sys.argv.index("--d") + 1]) if "--d" in sys.argv else 128
    # The configuration the op runs for this head dim (d 256: one stage).
    _, overrides = attention_configs.bwd_variant(d, "--causal" in sys.argv)
    kern = build(AttentionBwdConfig(**overrides))
    if "--print-ir" in sys.argv:
        print(kern)
    else:
        print(kern.compile())
