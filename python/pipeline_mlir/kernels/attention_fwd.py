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
  with ``pack_gqa`` = g, Q is a 4-D box (d-columns, the g query heads of
  one K/V group, block_m / g positions, batch) and a tile's rows are
  (position, head) pairs, so each K/V block serves the whole group;
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

Stages (``build`` assembles them from ``STAGES``; a ``Stages`` with one
replaced builds a variant, which is how the tests plant mistakes):
``Rings`` (shared memory and its pipelines), ``WorkSchedule`` (the
scheduler), ``producer``, ``PingPong`` (the consumers' GEMM turns),
``Mainloop`` (the GEMMs and every release), ``OnlineSoftmax`` (softmax and
mask), ``OutputEpilogue``.

FP8 (``dtype='e4m3'``): Q, K and V in e4m3 with per-tensor descales (three
one-element fp32 device tensors, parameters ``q_descale``, ``k_descale``,
``v_descale``), O bf16, LSE fp32. S = Q K^T is an 8-bit wgmma (k32; Q and K
K-major as before, d contiguous); q and k's descales fold into the softmax's
``scale_log2``, V's into O's 1 / row sum. P, converted to e4m3 in registers,
is the A operand of P V: an 8-bit wgmma reads B K-major only (no
transposed form), and P V's K is the keys, so V arrives as V^T (batch,
kv_heads, d, keys): keys contiguous, one ring stage = d rows x the key
block (128 keys: one 128-byte swizzled box; 192: three 64-byte ones). The
host makes it (``fp8_v_operand`` in
ops/attention_fwd_host.py: a transpose, not an in-kernel one, so the
producer stays one TMA warp and the consumers' shared memory is read as
TMA wrote it).

Why V's keys are also permuted: P is the f32 accumulator of S, whose
thread ``t`` (lane % 4) holds, in each row and each 32-key slice, columns
``8c + 2t, 8c + 2t + 1`` for c = 0..3 (``Fragment``). The k32 register A
operand of an 8-bit wgmma wants that thread to hold k indices ``4t .. 4t +
3`` (register 0: row g, 1: row g + 8) and ``16 + 4t .. 16 + 4t + 3``
(registers 2, 3). Converting in place (``to_operand_a('e4m3',
in_place=True)``: two ``cvt.rn.satfinite.e4m3x2.f32`` per register, bytes
in value order, no shuffle) therefore gives k index ``kappa = 16 h + 4 t +
j`` the accumulator column ``ORDER[kappa] = 16 h + 8 (j // 2) + 2 t + j %
2`` (``layout.fp8_register_a_key_order``). The product P V stays right if
B's K index ``kappa`` (V^T's column ``kappa`` in each 32: the K-major
descriptor's K order is the row's byte order) holds key ``ORDER[kappa]``;
the host's gather does exactly that (``fp8_v_source_keys``), and
test/python/test_attention_fp8.py checks it element by element against the
PTX ISA's fragment layouts (test/gpu/ptx_layouts.py). Keys past the
sequence's end are padding zeros (V^T is padded to whole 32-key blocks),
and P is 0 there anyway (masked). FlashAttention-3 gets the same effect by
permuting V's columns as it transposes V in the kernel.

``ctas_per_sm=2`` sizes a configuration (one consumer warpgroup, 64-row
tiles) for two CTAs per SM: ``.minnctapersm 2`` caps the entry registers,
the register budget and the shared memory are checked against half an SM.

Usage: python examples/attention_fwd.py [--d 64|128|256] [--causal] [--pack-gqa 2|4|8]
[--fp8] [--print-ir] [--out DIR]
(builds, checks and compiles; ``pipeline_mlir/ops/attention_fwd_host.py`` runs it).

``--out DIR``: where the cubin and its launch metadata go (by default a
folder in the system's temporary directory, not the source tree:
examples/_common.py).
"""

import math
from dataclasses import dataclass
from types import SimpleNamespace

import mlir.ir as ir
from mlir.dialects import arith, llvm, nvvm

from pipeline_mlir.chip_limits import REGISTER_FILE, SMEM_PER_BLOCK, WGMMA_M
from pipeline_mlir.kernel import (Float32, GlobalPtr, Int32, Kernel, Scalar,
                                  TmaDescriptor)
from pipeline_mlir.kernel import epilogue, fence_view_async_shared, wgmma
from pipeline_mlir.kernel.fragment import Fragment, RowVector, exp2
from pipeline_mlir.kernel.memory import element_ptr, load
from pipeline_mlir.kernel.ring import Ring
from pipeline_mlir.kernel.smem import BASE_ALIGN
from pipeline_mlir.kernel.values import f32, i32, to_value
from pipeline_mlir.kernel.warpgroup import (THREADS_PER_WARPGROUP,
                                            check_register_budget,
                                            producer_consumer_roles)
from pipeline_mlir.layout import DTYPES, OperandLayout, descriptor_units
from pipeline_mlir.pipeline import (Agent, CooperativeGroup, NamedBarrier,
                                    PipelineTmaStore, PipelineUserType)

SMEM_LIMIT = SMEM_PER_BLOCK           # dynamic shared memory one CTA may opt into
SMEM_PER_SM = 228 * 1024         # an SM's shared memory; each resident CTA reserves 1 KiB
PACKED_GROUPS = (2, 4, 8)        # query heads per K/V head one tile may pack
SWIZZLE = 128                    # bytes: every tile's TMA and wgmma swizzle
DTYPES_FWD = ("bf16", "e4m3")    # operand types of Q, K and V
FP8_KEYS_PER_BOX = SWIZZLE       # e4m3 V^T: one 128-byte box row is 128 keys
FP8_V_SWIZZLE_64 = 64            # e4m3 V^T of 64-key multiples: 64-byte rows
PINGPONG_BARRIER = 1             # ids 1, 2(, 3): one per consumer warpgroup
EPILOGUE_BARRIER = 4             # ids 4, 5(, 6): one per consumer warpgroup
L2_BUDGET = 24 << 20             # bytes of K/V that causal sections keep in L2 (50 MB L2)
POLY_SLOTS = 16                  # exp2_poly counts values of every 16 a thread holds


@dataclass(frozen=True)
class AttentionConfig:
    """One kernel variant. The switches after ``causal`` exist for the
    step-by-step table of docs/attention.md."""
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
    # GQA packing: 0 (off), or the query heads per K/V head (2, 4, 8) that
    # one tile packs: its rows are (block_m / g query positions) x (the g
    # query heads of one K/V group), so K and V are read once per group.
    pack_gqa: int = 0
    # CTAs resident on one SM: 2 sizes registers and shared memory so that
    # two run side by side (short sequences: one CTA's prologue, masked
    # blocks and epilogue run under the other's GEMMs).
    ctas_per_sm: int = 1
    # Operand type of Q, K and V: 'bf16', or 'e4m3' (the FP8 forward: the
    # module doc's "FP8"; O stays bf16, LSE fp32).
    dtype: str = "bf16"
    # Softmax exponentials computed on the FMA pipe: of every 16 values of
    # P a thread holds, this many come from ``exp2_poly`` (a polynomial,
    # FlashAttention-4's emulation), the rest from MUFU's ex2. 0: all MUFU.
    # The FP8 forward at d 128 is bound by MUFU's 16 ex2 per SM and clock
    # (docs/attention.md, "FP8 forward": its op takes 4 full, 3 causal at
    # d 128, 2 at d 256 full; +1% to +13% at d 128 on an H200).
    exp2_poly: int = 0
    # Keep P_{j-1} V_{j-1}'s retirement (``wgmma.wait_group 0``) after the
    # softmax of S_j: an ``if row sum < 0: trap`` (never taken) just before
    # the wait (``hold_after``). Without it ptxas schedules the
    # wait (``WARPGROUP.DEPBAR.LE gsb0, 0x0``) right after the row max's
    # first instructions, to interleave P's conversion into the registers
    # that GEMM reads with the exponentials, so the softmax runs after the
    # P V GEMM instead of under it (docs/attention.md, "Where the forward
    # stalls": Nsight Compute's samples at that wait). The branch reads the
    # new row sums (>= 0: never taken), so no compiler moves it, or the
    # wait, above the exponentials. Measured: no faster in bf16 (3-12%
    # slower), mixed in FP8 (on in the FP8 op at d 256 full only).
    hold_pv_wait: bool = False
    # P_j converted before P_{j-1} V_{j-1}'s wait, into registers that GEMM
    # does not read, and moved into the loop's P registers after it: with
    # ``hold_pv_wait`` the conversion then interleaves with the
    # exponentials and both run under the GEMM. Costs a second copy of P
    # in registers and one move per P register a block. Not measured yet.
    double_p: bool = False

    def __post_init__(self):
        if self.head_dim not in (64, 128, 256):
            raise ValueError(f"AttentionConfig: head_dim must be 64, 128 or 256, "
                             f"got {self.head_dim!r}")
        if self.consumer_warpgroups not in (1, 2, 3):
            raise ValueError("AttentionConfig: consumer_warpgroups must be 1, 2 or 3")
        if self.pingpong and self.consumer_warpgroups < 2:
            raise ValueError("AttentionConfig: ping-pong needs 2 or 3 consumer warpgroups")
        if self.pack_gqa not in (0,) + PACKED_GROUPS:
            raise ValueError(f"AttentionConfig: pack_gqa must be 0 or one of {PACKED_GROUPS} "
                             f"(a divisor of the 8 rows between a thread's two rows), "
                             f"got {self.pack_gqa!r}")
        if self.pack_gqa and self.tma_store:
            raise ValueError("AttentionConfig: pack_gqa stores O from registers "
                             "(tma_store=False)")
        if self.ctas_per_sm not in (1, 2):
            raise ValueError("AttentionConfig: ctas_per_sm must be 1 or 2")
        if self.dtype not in DTYPES_FWD:
            raise ValueError(f"AttentionConfig: dtype must be one of {DTYPES_FWD}, "
                             f"got {self.dtype!r}")
        if self.double_p and not self.intra_overlap:
            raise ValueError("AttentionConfig: double_p is for the overlapped mainloop "
                             "(intra_overlap=True)")
        if not (isinstance(self.exp2_poly, int) and 0 <= self.exp2_poly <= POLY_SLOTS):
            raise ValueError(f"AttentionConfig: exp2_poly counts values of every "
                             f"{POLY_SLOTS} (0..{POLY_SLOTS}), got {self.exp2_poly!r}")
        if self.fp8:
            if self.head_dim not in (128, 256):
                raise ValueError(f"AttentionConfig: the e4m3 forward takes head_dim 128 or "
                                 f"256 (a row of Q and K is whole 128-byte swizzle spans), "
                                 f"got {self.head_dim}")
            if self.kv_block % FP8_V_SWIZZLE_64:
                raise ValueError(f"AttentionConfig: the e4m3 forward's key block is a "
                                 f"multiple of {FP8_V_SWIZZLE_64} (V^T's box rows: 128 or "
                                 f"64 bytes of keys), got {self.kv_block}")
            if self.pack_gqa or self.tma_store or self.ctas_per_sm != 1:
                raise ValueError("AttentionConfig: the e4m3 forward runs unpacked, one CTA "
                                 "per SM, O from registers (pack_gqa=0, ctas_per_sm=1, "
                                 "tma_store=False)")

    @property
    def fp8(self):
        """Whether the operands are 8-bit (the FP8 forward)."""
        return DTYPES[self.dtype][0] == 1

    @property
    def q_buffers(self):
        """Q's stages. Two let the producer load the next tile's Q while the
        consumers finish this one (with one, every tile starts with a Q
        load's latency: the stage is released only after the tile's last S
        GEMM)."""
        if self.q_stages:
            return self.q_stages
        return 2 if self._smem_bytes(self.o_through_smem, 2) <= self.smem_limit else 1

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
    def group(self):
        """Query heads one tile packs (1: a tile is one head's rows)."""
        return self.pack_gqa or 1

    @property
    def tile_positions(self):
        """Query positions one tile covers: its rows over the packed heads."""
        return self.block_m // self.group

    @property
    def smem_limit(self):
        """Shared memory one CTA may use so that ``ctas_per_sm`` fit."""
        if self.ctas_per_sm == 1:
            return SMEM_LIMIT
        return SMEM_PER_SM // self.ctas_per_sm - 1024

    @property
    def register_file(self):
        """Registers one CTA may hold so that ``ctas_per_sm`` fit."""
        return REGISTER_FILE // self.ctas_per_sm

    @property
    def kv_block(self):
        if self.block_n:
            return self.block_n
        if self.fp8:
            return FP8_KEYS_PER_BOX
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
                f"{f'_gqa{self.pack_gqa}' if self.pack_gqa else ''}"
                f"{f'_x{self.ctas_per_sm}' if self.ctas_per_sm > 1 else ''}"
                f"{f'_px{self.exp2_poly}' if self.exp2_poly else ''}"
                f"{'_hw' if self.hold_pv_wait else ''}"
                f"{'_db' if self.double_p else ''}"
                f"{f'_{self.dtype}' if self.dtype != 'bf16' else ''}")

    # The operand layouts (pipeline_mlir.layout): every box, byte count and
    # descriptor of the kernel and every tensor map of the host follow from
    # these three.
    def q_layout(self):
        """Q: the A operand of S = Q K^T, K-major (d contiguous)."""
        return OperandLayout(self.dtype, "K", SWIZZLE, self.block_m, self.head_dim)

    def k_layout(self):
        """K: the B operand of S = Q K^T, given N x K (d contiguous)."""
        return OperandLayout(self.dtype, "K", SWIZZLE, self.kv_block, self.head_dim)

    def v_layout(self):
        """V: the B operand of O = P V, MN-major (rows are this GEMM's K).
        FP8: K-major, V^T given d x keys (keys contiguous, permuted within
        every 32 by ``fp8_register_a_key_order``: the module doc's "FP8")."""
        if self.fp8:
            # 128-byte swizzle where the key block is whole 128-key rows,
            # else 64-byte boxes (e.g. 192 keys: three).
            swizzle = SWIZZLE if self.kv_block % FP8_KEYS_PER_BOX == 0 else FP8_V_SWIZZLE_64
            return OperandLayout(self.dtype, "K", swizzle, self.head_dim, self.kv_block)
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
        return q + kv + o + BASE_ALIGN + 8 * 2 * (q_buffers + 2 * self.stages)

    def meta(self, kernel):
        """What the host launcher needs (pipeline_mlir/ops/attention_fwd_host.py) of
        ``kernel`` (built from this config): parameter kinds, shared memory,
        the tiles and the operand layouts."""
        return {"signature": [p.kind for _, p in kernel.params],
                "smem": kernel.smem_bytes, "name": self.name, "head_dim": self.head_dim,
                "causal": self.causal,
                "block_m": self.block_m, "block_n": self.kv_block,
                "pack_gqa": self.pack_gqa, "ctas_per_sm": self.ctas_per_sm,
                "threads": self.threads, "dtype": self.dtype,
                "layouts": {"q": self.q_layout().to_meta(), "k": self.k_layout().to_meta(),
                            "v": self.v_layout().to_meta(), "o": self.o_layout().to_meta()}}


@dataclass(frozen=True)
class Stages:
    """The kernel's stages, what ``build`` assembles: the schedule of work
    units, the producer warp, the consumers' GEMM turns (ping-pong), their
    mainloop, the online softmax with its mask, and the epilogue. ``build``
    takes the production set, ``STAGES``, unless given another; the tests
    plant each synchronization mistake the checker must reject by replacing
    one stage with a wrong one of their own
    (``dataclasses.replace(STAGES, mainloop=...)``), so the kernel itself
    holds no mistake."""
    schedule: type
    producer: object
    pingpong: type
    mainloop: type
    softmax: type
    epilogue: type


def build(cfg=AttentionConfig(), chip="sm_90a", stages=None):
    """The kernel for ``cfg`` (``.module`` is the built module); ``stages``:
    the ``Stages`` to assemble (``STAGES``)."""
    stages = STAGES if stages is None else stages
    check_register_budget(cfg.threads, 1, cfg.producer_registers,
                          cfg.consumer_warpgroups, cfg.consumer_registers,
                          register_file=cfg.register_file)
    if cfg.smem_bytes() > cfg.smem_limit:
        raise ValueError(f"{cfg.name}: {cfg.smem_bytes()} bytes of shared memory "
                         f"> {cfg.smem_limit}")
    # Two CTAs per SM: ptxas must keep the entry registers within half the
    # register file (.minnctapersm), or the second CTA does not fit.
    extra = {"min_ctas_per_sm": cfg.ctas_per_sm} if cfg.ctas_per_sm > 1 else {}
    params = {"q": TmaDescriptor(), "k": TmaDescriptor(), "v": TmaDescriptor(),
              "o": TmaDescriptor() if cfg.o_through_smem else GlobalPtr(),
              "lse": GlobalPtr(align=4),
              "batch": Int32(), "heads": Int32(), "heads_kv": Int32(),
              "seqlen_q": Int32(), "seqlen_k": Int32(),
              "scale_log2": Float32()}
    if cfg.fp8:
        # Per-tensor descales: one-element fp32 device tensors (read by the
        # consumers, as the FP8 GEMM reads its scales: no host sync).
        params.update(q_descale=GlobalPtr(align=4), k_descale=GlobalPtr(align=4),
                      v_descale=GlobalPtr(align=4))
    k = Kernel(cfg.name, chip=chip, block_dim=cfg.threads, **extra, params=params)
    with k:
        args = SimpleNamespace(**{name: v for (name, _), v in zip(k.params, k.args)})
        rings = Rings(k, cfg)
        # The plan that chose Q's buffers and passed the limit check above
        # counts each ring's stages again: it must be what was allocated.
        if k.smem_bytes + BASE_ALIGN != cfg.smem_bytes():
            raise ValueError(f"{cfg.name}: AttentionConfig.smem_bytes() plans "
                             f"{cfg.smem_bytes() - BASE_ALIGN} bytes of shared memory "
                             f"(without the alignment slack) but the rings allocate "
                             f"{k.smem_bytes}: the plan and Rings disagree")
        sched = stages.schedule(k, cfg, args)
        producer_consumer_roles(
            k, cfg.producer_registers, cfg.consumer_registers,
            lambda: stages.producer(k, cfg, rings, sched, args),
            lambda warp, warpgroup: consumer(k, cfg, stages, rings, sched, args, warp,
                                             warpgroup))
    k.config = cfg
    return k


class Rings:
    """The shared memory of a CTA and the pipelines over it: Q (``q``), the
    K and V rings (``k``, ``v``), the O tiles of the TMA-store epilogue
    (``o``, or None). Each ring holds its stage count (``Ring``): its
    buffers, its barriers and every pipeline state over it follow it."""

    def __init__(self, k, cfg):
        self.q = Ring.of_layout(k, cfg.q_buffers, cfg.q_layout(), "Q")
        self.k = Ring.of_layout(k, cfg.stages, cfg.k_layout(), "K ring")
        self.v = Ring.of_layout(k, cfg.stages, cfg.v_layout(), "V ring")
        o_layout = cfg.o_layout()
        self.o = (k.smem_alloc(cfg.consumer_warpgroups * o_layout.bytes,
                               align=o_layout.alignment, name="O tiles")
                  if cfg.o_through_smem else None)

        one_tma_thread = CooperativeGroup(Agent.Thread, 1)
        # Every consumer warp releases a stage once.
        consumers = CooperativeGroup(Agent.Thread, 4 * cfg.consumer_warpgroups)
        for name, ring in (("q", self.q), ("k", self.k), ("v", self.v)):
            ring.create_pipeline(k, one_tma_thread, consumers, name)

    def states(self, side):
        """A start state of ``side`` for each of Q, K and V."""
        return tuple(r.state(side) for r in (self.q, self.k, self.v))


# -- stage: the schedule -----------------------------------------------------

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
            kv_head_bytes = args.seqlen_k * (4 * cfg.head_dim)   # K and V of one head, bf16
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


# -- stage: the producer -----------------------------------------------------

def producer(k, cfg, rings, sched, args):
    """Warp 0 of warpgroup 0: per work unit, Q into its stage, then K and V
    block by block into their rings, every load a 3-D TMA box (d-columns,
    rows, batch) that reads zeros past the sequence's end."""
    d, bm, bn = cfg.head_dim, cfg.block_m, cfg.kv_block
    q_state, k_state, v_state = rings.states(PipelineUserType.Producer)
    for r, _ in k.range(sched.rounds, carry=[q_state, k_state, v_state]):
        m_block, b, h = sched.round_unit(r)
        q = rings.q
        if cfg.pack_gqa:
            # The unit's head is the K/V head; Q is a 4-D TMA box (columns,
            # the group's g heads, tile_positions positions, batch), whose
            # rows land in shared memory as packed rows (position, head).
            h_kv = h
            q_coords = [h * cfg.pack_gqa, m_block * cfg.tile_positions, b]
        else:
            h_kv = h // sched.group
            q_coords = None
        q.pipe.producer_acquire(q_state)
        with k.elect_one():
            for col, off in q.layout.box_offsets():
                coords = ([col] + q_coords if q_coords is not None
                          else [h * d + col, m_block * bm, b])
                q.pipe.tma_load(q_state, args.q, coords,
                                q.buffer(q_state.index) + off, q.layout.box_bytes)
        q.pipe.producer_commit(q_state)
        q_state.advance()

        def load(ring, desc, state, j, transposed=False):
            ring.pipe.producer_acquire(state)
            with k.elect_one():
                tile = ring.buffer(state.index)
                for col, off in ring.layout.box_offsets():
                    # V^T (FP8): rows are the head's d, columns its keys.
                    coords = ([j * bn + col, h_kv * d, b] if transposed
                              else [h_kv * d + col, j * bn, b])
                    ring.pipe.tma_load(state, desc, coords, tile + off,
                                       ring.layout.box_bytes)
            ring.pipe.producer_commit(state)
            state.advance()

        # In the order the consumers read them: K_0, then K_j with
        # V_{j-1} (S_j is issued before P_{j-1} V_{j-1}), then the
        # last V. Loading V_j before K_{j+1} would make the next
        # K wait behind a V stage released one block later.
        load(rings.k, args.k, k_state, 0)
        for j, _ in k.range(1, sched.kv_blocks(m_block), carry=[k_state, v_state]):
            load(rings.k, args.k, k_state, j)
            load(rings.v, args.v, v_state, j - 1, cfg.fp8)
        load(rings.v, args.v, v_state, sched.kv_blocks(m_block) - 1, cfg.fp8)
    # No arrive may land on this CTA's barriers after it exits.
    rings.q.pipe.producer_tail(q_state)
    rings.k.pipe.producer_tail(k_state)
    rings.v.pipe.producer_tail(v_state)


# -- the consumer warpgroups -------------------------------------------------

def consumer(k, cfg, stages, rings, sched, args, warp, warpgroup):
    """Warpgroups 1..: per work unit, the mainloop over the key blocks (the
    online softmax between its GEMMs), then the epilogue."""
    cw = warpgroup - 1
    warp_in_wg, lane = warp % 4, k.lane_idx()
    turns = stages.pingpong(k, cfg, cw)
    mainloop = stages.mainloop(k, cfg, rings, turns)
    thread_row, thread_col = Fragment.thread_origin(warp_in_wg, lane)
    scales = Scales.of(cfg, args)
    softmax = stages.softmax(k, cfg, sched, scales.scale_log2, thread_row, thread_col)
    epi = stages.epilogue(k, cfg, rings.o, cw, warp_in_wg, lane, thread_row, thread_col)
    epi.scales = scales
    states = rings.states(PipelineUserType.Consumer)
    for r, _ in k.range(sched.rounds, carry=list(states)):
        m_block, b, h = sched.round_unit(r)
        n_blocks = sched.kv_blocks(m_block)
        n_free = sched.unmasked_blocks(m_block)
        m_row0 = m_block * cfg.block_m + cw * WGMMA_M
        acc = TileAccumulators(mainloop.mma_o.accumulator(), RowVector.full(float("-inf")),
                               RowVector.full(0.0))
        mainloop.tile(states, acc, softmax, cw, m_row0, n_blocks, n_free)
        epi.tile(acc, args, b, h, m_row0)
    epi.tail()


@dataclass
class Scales:
    """The consumers' scales: ``scale_log2`` (softmax scale x log2 e, the
    FP8 forward's q and k descales folded in: S's accumulator is Q8 K8^T)
    and ``v_descale`` (FP8: O's, applied with 1 / row sum; None for bf16)."""
    scale_log2: object
    v_descale: object = None

    @classmethod
    def of(cls, cfg, args):
        if not cfg.fp8:
            return cls(args.scale_log2)
        qd, kd, vd = (Scalar(load(p, f32())) for p in (args.q_descale, args.k_descale,
                                                         args.v_descale))
        return cls(args.scale_log2 * qd * kd, vd)


# -- stage: the consumers' GEMM turns ----------------------------------------

class PingPong:
    """The consumer warpgroups issue their GEMMs in turn (0, 1, .., 0, 1,
    ..): warpgroup w waits on barrier id w (its own 128 threads plus the 128
    of the warpgroup before it, which arrive when they have issued), then
    arrives on the next one's. Without ``cfg.pingpong``, ``begin`` and
    ``end`` emit nothing."""

    def __init__(self, k, cfg, cw):
        wgs = cfg.consumer_warpgroups
        self.barrier = (NamedBarrier(PINGPONG_BARRIER, 2 * THREADS_PER_WARPGROUP,
                                     num_ids=wgs)
                        if cfg.pingpong else None)
        self.mine, self.other = self.ids(cw, wgs)
        if self.barrier is not None:
            # Warpgroup 0 issues first: the last one lets it through once.
            with k.if_(cw == wgs - 1):
                self.barrier.arrive_w_index(0)

    def ids(self, cw, wgs):
        """(the id warpgroup ``cw`` waits on, the id it arrives on)."""
        return cw, (cw + 1) % wgs

    def begin(self):
        if self.barrier is not None:
            self.barrier.arrive_and_wait_w_index(self.mine)

    def end(self):
        if self.barrier is not None:
            self.barrier.arrive_w_index(self.other)


# -- stage: the mainloop -----------------------------------------------------

@dataclass
class TileAccumulators:
    """A consumer warpgroup's running values over one tile: O (fp32, m64 x
    d), the row max of S and the row sum of P."""
    o: Fragment
    row_max: RowVector
    row_sum: RowVector


class Mainloop:
    """A consumer warpgroup's GEMMs over one tile and the release of every
    stage they read. Per key block j:

        S_j = Q K_j^T        (``issue_s``)
        P_j = softmax(S_j)   (the softmax stage)
        O  += P_{j-1} V_{j-1}  (``issue_pv``)

    Release order (what the checker's async-read check proves): a K stage
    after ``wgmma.wait_group`` retired the S GEMM that reads it, a V stage
    after its P V GEMM, Q after the tile's last S GEMM."""

    def __init__(self, k, cfg, rings, turns):
        self.k, self.cfg, self.rings, self.turns = k, cfg, rings, turns
        q_layout, k_layout, v_layout = rings.q.layout, rings.k.layout, rings.v.layout
        self.mma_s = wgmma.WarpgroupMma(cfg.kv_block, q_layout, k_layout)  # m64 n=bn
        # O += P V: m64 n=d, V (kv rows x d) MN-major; FP8: V^T (d x kv)
        # K-major, its keys in P's in-place register order.
        self.mma_o = wgmma.WarpgroupMma(cfg.head_dim, cfg.dtype, v_layout)
        # Stage 0 of the K and V rings (Q's descriptor is made per tile).
        self.k_base = wgmma.smem_matrix_descriptor(rings.k.smem, k_layout)
        self.v_base = wgmma.smem_matrix_descriptor(rings.v.smem, v_layout)
        self.k_step = descriptor_units(k_layout.bytes)
        self.v_step = descriptor_units(v_layout.bytes)

    def operand_a(self, p):
        """P as the register A operand of P V: bf16 (the accumulator's own
        layout), or e4m3 packed in place (no shuffles; V^T's keys are in
        the order this gives, ``layout.fp8_register_a_key_order``)."""
        if self.cfg.fp8:
            return p.to_operand_a(self.cfg.dtype, in_place=True)
        return p.to_operand_a("bf16")

    def issue_s(self, s_acc, stage, q_desc):
        """S = Q K_stage^T: d / 16 wgmma (d / 32 for e4m3), one group."""
        q_layout, k_layout = self.rings.q.layout, self.rings.k.layout
        db = (stage.to(64) * self.k_step + Scalar(self.k_base)).ir_value
        wgmma.fence()
        for kk in range(q_layout.k_slices):
            self.mma_s.mma(s_acc, wgmma.k_slice_descriptor(q_desc, q_layout, kk),
                           wgmma.k_slice_descriptor(db, k_layout, kk), accumulate=kk > 0)
        wgmma.commit_group()

    def issue_pv(self, o_acc, p, stage):
        """O += P V_stage: bn / 16 wgmma (bn / 32 for e4m3) with P in
        registers, one group."""
        v_layout = self.rings.v.layout
        db = (stage.to(64) * self.v_step + Scalar(self.v_base)).ir_value
        wgmma.fence()
        for kk in range(len(p)):
            self.mma_o.mma_rs(o_acc, p.slice(kk), wgmma.k_slice_descriptor(db, v_layout, kk))
        wgmma.commit_group()

    def tile(self, states, acc, softmax, cw, m_row0, n_blocks, n_free):
        """One tile's key blocks into ``acc``; ``states``: the consumer
        states of Q, K and V."""
        k, q = self.k, self.rings.q
        q_read, k_read, v_read = states
        q.pipe.consumer_wait(q_read)
        # This warpgroup's 64 rows of Q, addressed from Q's stage
        # index: that ties the S GEMMs to the Q stage, so the checker
        # sees them read it.
        q_desc = wgmma.smem_matrix_descriptor(
            q.buffer(q_read.index) + q.layout.mn_offset(64) * cw, q.layout)
        p_regs = self.first_block(states, q_desc, acc, softmax, m_row0, n_free)
        corr = RowVector.full(1.0)
        if not self.cfg.intra_overlap:
            # The plain order, for the ladder: each block's P V right
            # after its softmax (the tensor cores idle meanwhile,
            # unless the other warpgroup fills them).
            for j, _ in k.range(1, n_blocks, carry=[k_read, v_read, acc.o, acc.row_max,
                                                    acc.row_sum, p_regs]):
                self.plain_block(states, j, q_desc, acc, p_regs, softmax, m_row0, n_free)
        else:
            # Blocks 1..n-1: S_j is issued before P_{j-1} V_{j-1}, so the
            # softmax of S_j runs while the P V GEMM is in flight; O is
            # rescaled by the previous block's correction between the two
            # issues, while S_j occupies the tensor cores.
            for j, _ in k.range(1, n_blocks, carry=[k_read, v_read, acc.o, acc.row_max,
                                                    acc.row_sum, p_regs, corr]):
                self.overlapped_block(states, j, q_desc, acc, p_regs, corr, softmax,
                                      m_row0, n_free)
        self.release_q(q_read)
        self.last_block(v_read, acc, p_regs, corr)
        q_read.advance()

    def first_block(self, states, q_desc, acc, softmax, m_row0, n_free):
        """Block 0: S_0 and its softmax; returns P_0 as wgmma A operand."""
        _, k_read, _ = states
        pipe_k = self.rings.k.pipe
        s_acc = Fragment.undef(self.cfg.kv_block)
        pipe_k.consumer_wait(k_read)
        self.turns.begin()
        self.issue_s(s_acc, k_read.index, q_desc)
        self.turns.end()
        wgmma.wait_group(0)
        pipe_k.consumer_release(k_read)
        k_read.advance()
        p, _ = softmax(s_acc, acc, Scalar(0), m_row0, Scalar(0) >= n_free, first=True)
        return self.operand_a(p)

    def plain_block(self, states, j, q_desc, acc, p_regs, softmax, m_row0, n_free):
        """Block j without overlap: P_{j-1} V_{j-1}, retired, then S_j,
        retired, then its softmax."""
        _, k_read, v_read = states
        pipe_k, pipe_v = self.rings.k.pipe, self.rings.v.pipe
        pipe_v.consumer_wait(v_read)
        self.turns.begin()
        self.issue_pv(acc.o, p_regs, v_read.index)
        self.turns.end()
        wgmma.wait_group(0)
        pipe_v.consumer_release(v_read)
        v_read.advance()
        s_acc = Fragment.undef(self.cfg.kv_block)
        pipe_k.consumer_wait(k_read)
        self.turns.begin()
        self.issue_s(s_acc, k_read.index, q_desc)
        self.turns.end()
        wgmma.wait_group(0)
        pipe_k.consumer_release(k_read)
        k_read.advance()
        p, c = softmax(s_acc, acc, j, m_row0, j >= n_free, first=False)
        acc.o.set(acc.o * c)
        p_regs.set(self.operand_a(p))

    def overlapped_block(self, states, j, q_desc, acc, p_regs, corr, softmax, m_row0,
                         n_free):
        """Block j with intra-warpgroup overlap: S_j and P_{j-1} V_{j-1}
        issued together, the softmax of S_j while P V runs. ``p_regs``
        holds P_{j-1}, then P_j: converted after P V's wait, or
        (cfg.double_p) before it, into other registers."""
        _, k_read, v_read = states
        pipe_k, pipe_v = self.rings.k.pipe, self.rings.v.pipe
        s_acc = Fragment.undef(self.cfg.kv_block)
        pipe_k.consumer_wait(k_read)
        self.turns.begin()
        self.issue_s(s_acc, k_read.index, q_desc)
        acc.o.set(acc.o * corr)
        pipe_v.consumer_wait(v_read)
        self.issue_pv(acc.o, p_regs, v_read.index)
        self.turns.end()
        wgmma.wait_group(1)              # S_j retired
        pipe_k.consumer_release(k_read)
        k_read.advance()
        p, new_corr = softmax(s_acc, acc, j, m_row0, j >= n_free, first=False)
        if self.cfg.double_p:
            # P_j converted while P_{j-1} V_{j-1} still reads p_regs: into
            # other registers, moved into p_regs after the wait.
            p_next = self.operand_a(p)
        if self.cfg.hold_pv_wait:
            hold_after(acc.row_sum)
        wgmma.wait_group(0)              # P_{j-1} V_{j-1} retired
        pipe_v.consumer_release(v_read)
        v_read.advance()
        corr.set(new_corr)
        p_regs.set(p_next if self.cfg.double_p else self.operand_a(p))

    def release_q(self, q_read):
        """Q is no longer read: every S GEMM of the tile retired."""
        self.rings.q.pipe.consumer_release(q_read)

    def last_block(self, v_read, acc, p_regs, corr):
        """The last block: O += P_{n-1} V_{n-1}."""
        pipe_v = self.rings.v.pipe
        pipe_v.consumer_wait(v_read)
        self.turns.begin()
        acc.o.set(acc.o * corr)
        self.issue_pv(acc.o, p_regs, v_read.index)
        self.turns.end()
        wgmma.wait_group(0)
        pipe_v.consumer_release(v_read)
        v_read.advance()


# -- stage: the online softmax and its mask ----------------------------------

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
        next P V (None for the first block)."""
        row_max, row_sum, scale_log2 = acc.row_max, acc.row_sum, self.scale_log2
        if masked is not None:
            with self.k.if_(masked, carry=[s_acc]):
                self.mask(s_acc, j, m_row0)
        new_max = row_max.max(s_acc.row_max())
        scaled = new_max * scale_log2
        # A fully masked row keeps max -inf: use 0 so exp2 gives 0s.
        finite = [Scalar(v) != float("-inf") for v in new_max.values]
        scaled = scaled.where(finite, 0.0)
        p = exponentials(s_acc.fma(scale_log2, -scaled), self.cfg.exp2_poly)
        if not first:
            corr = (row_max * scale_log2 - scaled).exp2()
            row_sum.set(row_sum * corr + p.row_sum_partial())
        else:
            corr = None
            row_sum.set(p.row_sum_partial())
        row_max.set(new_max)
        return p, corr


# The polynomial exp2 (FlashAttention-4's emulation on the FMA pipe). For x
# <= 0 (the softmax's exponents): x clamped at -127, split into n = floor(x)
# (an add rounding down onto 1.5 * 2^23, where the ulp is 1, leaves n in the
# low mantissa bits) and f = x - n in [0, 1); 2^f from a degree-3 minimax
# polynomial with constant term 1 (relative error < 1e-4, below bf16's and
# far below e4m3's rounding of P), and n added to its exponent field as an
# integer. At x = -127 (and -inf, masked): f = 0, 2^f = 1.0 exactly, and
# the exponent field becomes 0 with a zero mantissa: exactly +0.0, as
# ex2.approx.ftz gives. Exponents above 127 are outside its range (the
# softmax's are <= 0).
EXP2_POLY_COEFFS = (1.0, 0.695146143436431884765625, 0.227564394474029541015625,
                    0.077119089663028717041015625)
EXP2_POLY_MIN = -127.0
EXP2_ROUND_MAGIC = float(2 ** 23 + 2 ** 22)


class PolyIrOps:
    """The operations ``exp2_poly`` is written in, emitted as MLIR (the
    tests run the same formula on numpy with their own ops)."""

    @staticmethod
    def const(c):
        return to_value(float(c), f32())

    @staticmethod
    def maximum(a, b):
        return arith.maxnumf(a, b)

    @staticmethod
    def add_round_down(a, b):
        """``add.rm.f32``: the sum rounded toward -inf."""
        return llvm.call_intrinsic(f32(), "llvm.nvvm.add.rm.f", [a, b], [], [])

    sub = staticmethod(arith.subf)

    @staticmethod
    def fma(a, b, c):
        return llvm.intr_fma(a, b, c)

    @staticmethod
    def add_to_exponent(rounded, frac_pow):
        """The f32 whose bits are ``frac_pow``'s plus ``rounded``'s shifted
        left by 23 (its low bits: floor(x), into the exponent field)."""
        n = arith.shli(llvm.bitcast(i32(), rounded), to_value(23, i32()))
        return llvm.bitcast(f32(), arith.addi(llvm.bitcast(i32(), frac_pow), n))


def exp2_poly(x, ops=PolyIrOps):
    """``2 ** x`` for x <= 0 without MUFU (the comment above)."""
    xc = ops.maximum(x, ops.const(EXP2_POLY_MIN))
    rounded = ops.add_round_down(xc, ops.const(EXP2_ROUND_MAGIC))
    f = ops.sub(xc, ops.sub(rounded, ops.const(EXP2_ROUND_MAGIC)))
    c = EXP2_POLY_COEFFS
    poly = ops.fma(ops.fma(ops.fma(ops.const(c[3]), f, ops.const(c[2])), f,
                           ops.const(c[1])), f, ops.const(c[0]))
    return ops.add_to_exponent(rounded, poly)


def poly_slots(per_16):
    """Which of a thread's 16 consecutive values take ``exp2_poly``:
    ``per_16`` of them, spread evenly (so MUFU and FMA work interleave in
    the register order the compiler schedules from)."""
    return frozenset(i for i in range(POLY_SLOTS) if (i * per_16) % POLY_SLOTS < per_16)


def exponentials(x, per_16):
    """``2 ** x`` of each value of the fragment ``x``: ``per_16`` of every
    16 by ``exp2_poly``, the others by ex2.approx."""
    if not per_16:
        return x.exp2()
    slots = poly_slots(per_16)
    return Fragment(x.n, values=[exp2_poly(v) if i % POLY_SLOTS in slots else exp2(v)
                                 for i, v in enumerate(x.values)])


def hold_after(row_sum):
    """A trap on ``row_sum`` < 0 in any lane (never: sums of exponentials
    are >= 0), for ``AttentionConfig.hold_pv_wait``: ptxas keeps the
    ``wgmma.wait_group`` that follows after it, and so after every
    exponential the sums read. One asm with side effects: LLVM keeps it
    after the exponentials it reads and before the wait (which has side
    effects too), and the simulator, which cannot evaluate a condition on
    GEMM results, sees no branch; the vote keeps the trap's branch
    warp-uniform (on a per-thread one ptxas treats what follows as
    divergent and moves every wgmma descriptor through vector registers)."""
    total = arith.addf(row_sum.values[0], row_sum.values[1])
    llvm.inline_asm(None, [total],
                    "{ .reg .pred p, q; setp.lt.f32 p, $0, 0f00000000; "
                    "vote.sync.any.pred q, p, 0xffffffff; @q trap; }",
                    "f", has_side_effects=True)


# -- stage: the epilogue -----------------------------------------------------

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
        total = acc.row_sum.quad_sum()
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


STAGES = Stages(schedule=WorkSchedule, producer=producer, pingpong=PingPong,
                mainloop=Mainloop, softmax=OnlineSoftmax, epilogue=OutputEpilogue)


def packed_shift(cfg):
    """log2 of the packed group: packed row i is position i >> shift."""
    return cfg.pack_gqa.bit_length() - 1


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


def build_variant(overrides, dtype, chip):
    """(cubin, launch facts) of the attention variant ``overrides``
    (``AttentionConfig`` fields: head_dim, causal and the tuned ones of
    ``pipeline_mlir.ops.attention_configs``) in ``dtype`` ('bf16', or 'e4m3':
    ``pipeline_mlir.ops.attention_fp8``): the kernel cache's builder of this
    family."""
    if dtype not in DTYPES_FWD:
        raise ValueError(f"attention_fwd: dtype must be one of {DTYPES_FWD}, got {dtype!r}")
    cfg = AttentionConfig(**overrides, dtype=dtype)
    k = build(cfg, chip=chip)
    return bytes(k.compile()), cfg.meta(k)
