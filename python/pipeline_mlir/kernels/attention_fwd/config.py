"""The forward's configuration (``AttentionConfig``): its switches, the tile
shapes and operand layouts that follow from them, the shared-memory plan,
and the launch facts the host needs; with the kernel-wide constants (the
chip's shared memory, the swizzle, the named barrier ids).
"""

from dataclasses import dataclass

from pipeline_mlir.chip_limits import (REGISTER_FILE, SMEM_PER_BLOCK, SMEM_PER_SM, WGMMA_M,
                                        WGMMA_N_MAX)
from pipeline_mlir.kernel.smem import BASE_ALIGN
from pipeline_mlir.kernel.warpgroup import THREADS_PER_WARPGROUP
from pipeline_mlir.layout import DTYPES, OperandLayout

from .exponentials import POLY_SLOTS


SMEM_LIMIT = SMEM_PER_BLOCK           # dynamic shared memory one CTA may opt into
PACKED_GROUPS = (2, 4, 8)        # query heads per K/V head one tile may pack
SWIZZLE = 128                    # bytes: every tile's TMA and wgmma swizzle
DTYPES_FWD = ("bf16", "e4m3")    # operand types of Q, K and V
FP8_KEYS_PER_BOX = SWIZZLE       # e4m3 V^T: one 128-byte box row is 128 keys
FP8_V_SWIZZLE_64 = 64            # e4m3 V^T of 64-key multiples: 64-byte rows
PINGPONG_BARRIER = 1             # ids 1, 2(, 3): one per consumer warpgroup
EPILOGUE_BARRIER = 4             # ids 4, 5(, 6): one per consumer warpgroup
ROW_SUM_ROWS = 8                 # row_sum_mma: the ones' rows (P V's extra N)


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
    # (docs/attention.md, "FP8 forward": its op takes 5 full (with
    # rescale_threshold), 3 causal at d 128, 2 at d 256 full; +1% to +13%
    # at d 128 on an H200).
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
    # FP8: O's rescale by exp2(old max - new max) only where some row's
    # max grew by more than this many powers of 2 (FlashAttention-4's idea
    # on Blackwell): otherwise the old max stays the row's reference (P up
    # to 2^threshold, which e4m3's 448 holds for threshold <= 8) and the
    # warp branches over O's multiplications (``mainloop.
    # rescale_unless_one``: skipped where every correction is exactly 1).
    # 0: off (the max always follows the data, O always rescaled).
    rescale_threshold: float = 0.0
    # FP8: the row sum of P on the tensor pipe instead of the FMA pipe: a
    # second wgmma per k-slice of P V, m64n8k32 with P (the same registers)
    # and B an 8-row block of e4m3 ones in shared memory (one per consumer
    # warpgroup, written once), so every column of its 64 x 8 accumulator
    # (fresh each block) is the block's row sum of P as rounded to e4m3
    # for P V, added to the running f32 sums once P V retired. Replaces
    # about 94 FADD per thread per 192-key block at d 128 (the partial
    # sums) and the quad shuffles of the final sum.
    row_sum_mma: bool = False
    # The polynomial exp2's degree (``exp2_poly``): 3 (relative error
    # < 1e-4), or 2 (one FMA less per polynomial value; < 2e-3, far below
    # e4m3's 2^-4 rounding of P: FP8 only).
    exp2_poly_degree: int = 3
    # FP8: P's e4m3 operand registers built as a vector of the two 16-bit
    # halves (``mov.b32 {lo, hi}``), which ptxas folds into the conversions
    # (F2FP ... PACK_AB_MERGE_C, the second writing its half into the
    # first's register) instead of widening, shifting and or-ing them (one
    # PRMT per register: 24 per thread per 192-key block at d 128). The
    # same bits.
    p_pack_merge: bool = False
    # FP8, with ``row_sum_mma``: the ones as 8 more rows of every V^T box
    # in each V stage (written once by the producer warp; the TMA fills
    # the d rows above them), so P V is one m64n(d+8)k32 wgmma per k-slice
    # and its last 8 columns are the row sum: no separate n8 wgmmas. Those
    # 8 columns (4 registers of O's accumulator, m64 x (d + 8) here) are
    # zeroed by O's rescale before each block's P V, so the sum stays
    # fresh per block (added in f32 once P V retired), as
    # ``row_sum_mma``'s. d 128 only (d + 8 <= 256, wgmma's largest N).
    row_sum_fold: bool = False
    # FP8: the first this many k-slices of P_j (32 keys each) converted
    # before P_{j-1} V_{j-1}'s wait, into registers that GEMM does not
    # read, the rest after it: ``double_p`` for part of P (its extra
    # registers for those slices only). 0: off.
    p_early: int = 0
    # FP8, with p_pack_merge: the polynomial's values (``exp2_poly`` of every
    # 16, spread over each 32 a thread holds, so odd counts too) two at a
    # time on f16x2 (``exponentials.exp2_poly_half``: about 5 instructions a
    # value where the f32 polynomial takes 7; its own degree-2 polynomial,
    # whatever exp2_poly_degree says), converted to e4m3 from f16x2. Their
    # f32 values never exist: with ``row_sum_mma`` the tensor pipe sums
    # them, without it (the LSE configurations) the FMA pipe adds the pairs
    # on f16x2 and each row's two halves in f32
    # (``exponentials.half_row_sums``). Measured in docs/attention.md, "FP8
    # forward", runs 14 and 15.
    exp2_poly_half: bool = False
    # FP8: P V's retirement held after every exponential of P_j by a trap
    # on the sign bit of the OR of their bits (never set:
    # ``mainloop.hold_after_values``; about one LOP3 per two values), for
    # the configurations without an FMA-pipe row sum to hold on
    # (``row_sum_mma``): without a hold ptxas puts P V's wait before the
    # row max, so the softmax does not overlap its own warpgroup's P V.
    hold_pv_on_p: bool = False
    # FP8, with ``hold_pv_on_p``: the hold reads only the exponentials of
    # P_j's first this many k-slices (32 keys each; 3 of a 192-key block's
    # 6: about half), so P V's wait comes after that part of the softmax
    # and the rest, with P's conversions, may follow it. 0: all of them.
    hold_pv_part: int = 0
    # FP8, with ``double_p``: P V's wait held on P_j's e4m3 registers,
    # converted before it into ``double_p``'s second copy (with
    # ``p_early``: on its first k-slices, converted so; a trap where
    # the OR of their bits has a byte's sign bit set: never, P >= +0;
    # about one LOP3 per three registers), and P_{j-1}'s registers, which
    # that P V reads, kept live up to the wait (an empty asm reading them:
    # otherwise ptxas gives the copy their registers and serializes the
    # wgmmas, C7513): every exponential and conversion of P_j before the
    # wait, only the copy's moves between it and the next S issue.
    hold_pv_on_e4m3: bool = False
    # FP8, with ``hold_pv_on_e4m3``: the hold reads only the last this many
    # of P_j's e4m3 registers converted before the wait (0: all of them),
    # its trap on the OR's bit 31 (the last byte's sign, never set). With
    # one, the trap's test alone (no OR): ptxas still puts every
    # conversion before it ahead of the wait, about as many instructions
    # as the kernel without the hold.
    hold_pv_last: int = 0

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
        if self.rescale_threshold and not (self.fp8 and 0 < self.rescale_threshold <= 8):
            raise ValueError(f"AttentionConfig: rescale_threshold is for the e4m3 forward, "
                             f"in (0, 8] (P up to 2^threshold within e4m3's 448), got "
                             f"{self.rescale_threshold!r}")
        if self.row_sum_mma and not self.fp8:
            raise ValueError("AttentionConfig: row_sum_mma is for the e4m3 forward (its "
                             "row sum of P as e4m3, the P V operand)")
        if self.p_pack_merge and not self.fp8:
            raise ValueError("AttentionConfig: p_pack_merge is for the e4m3 forward (P "
                             "packed in place as e4m3 pairs)")
        if self.row_sum_fold and not (self.row_sum_mma and self.intra_overlap and
                                      self.head_dim + ROW_SUM_ROWS <= WGMMA_N_MAX):
            raise ValueError("AttentionConfig: row_sum_fold is row_sum_mma's ones folded into "
                             "V^T's stages (P V one m64n(d+8) wgmma, its sums' columns zeroed "
                             "by the overlapped mainloop's rescale): it needs row_sum_mma, "
                             f"intra_overlap and d + {ROW_SUM_ROWS} <= {WGMMA_N_MAX} (d 128)")
        if self.p_early and not (self.fp8 and self.intra_overlap and not self.double_p and
                                 0 < self.p_early < self.kv_block // 32):
            raise ValueError(f"AttentionConfig: p_early converts the first k-slices of P "
                             f"before P V's wait in the e4m3 forward's overlapped mainloop "
                             f"(all of them: double_p): 1..{self.kv_block // 32 - 1}, got "
                             f"{self.p_early!r}")
        if self.exp2_poly_half and not (self.fp8 and self.p_pack_merge and self.exp2_poly):
            raise ValueError(f"AttentionConfig: exp2_poly_half computes pairs of the "
                             f"e4m3 forward's polynomial values on f16x2: it needs "
                             f"p_pack_merge and exp2_poly > 0, got "
                             f"exp2_poly={self.exp2_poly!r}")
        if self.hold_pv_on_p and not (self.fp8 and self.intra_overlap and
                                      not self.hold_pv_wait):
            raise ValueError("AttentionConfig: hold_pv_on_p holds the e4m3 forward's P V "
                             "wait after P's exponentials in the overlapped mainloop (not "
                             "with hold_pv_wait, the hold on the row sum)")
        if self.hold_pv_part and not (self.hold_pv_on_p and
                                      0 < self.hold_pv_part < self.kv_block // 32):
            raise ValueError(f"AttentionConfig: hold_pv_part holds P V's wait on P's first "
                             f"k-slices' exponentials (hold_pv_on_p): 1.."
                             f"{self.kv_block // 32 - 1}, got {self.hold_pv_part!r}")
        if self.hold_pv_on_e4m3 and not (self.fp8 and (self.double_p or self.p_early)
                                         and not self.hold_pv_on_p and not self.hold_pv_wait):
            raise ValueError("AttentionConfig: hold_pv_on_e4m3 holds the e4m3 forward's P V "
                             "wait on P converted before it (double_p, or p_early's "
                             "k-slices), not with hold_pv_on_p or hold_pv_wait")
        held = 4 * (self.kv_block // 32 if self.double_p else self.p_early)
        if self.hold_pv_last and not (self.hold_pv_on_e4m3 and 0 < self.hold_pv_last <= held):
            raise ValueError(f"AttentionConfig: hold_pv_last holds P V's wait on the last of "
                             f"P's e4m3 registers converted before it (hold_pv_on_e4m3): "
                             f"1..{held}, got {self.hold_pv_last!r}")
        if self.row_sum_mma and self.hold_pv_wait:
            raise ValueError("AttentionConfig: row_sum_mma leaves no row sum on the FMA "
                             "pipe for hold_pv_wait to hold after")
        if self.exp2_poly_degree not in (2, 3) or (self.exp2_poly_degree == 2
                                                   and not self.fp8):
            raise ValueError(f"AttentionConfig: exp2_poly_degree is 3, or 2 for the e4m3 "
                             f"forward (error 2e-3), got {self.exp2_poly_degree!r}")
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
                f"{f'_rs{self.rescale_threshold:g}' if self.rescale_threshold else ''}"
                f"{'_rsm' if self.row_sum_mma else ''}"
                f"{'_pd2' if self.exp2_poly_degree == 2 else ''}"
                f"{'_pm' if self.p_pack_merge else ''}"
                f"{'_rsf' if self.row_sum_fold else ''}"
                f"{f'_pe{self.p_early}' if self.p_early else ''}"
                f"{'_ph' if self.exp2_poly_half else ''}"
                f"{'_hp' if self.hold_pv_on_p else ''}"
                f"{self.hold_pv_part or ''}"
                f"{'_hp8' if self.hold_pv_on_e4m3 else ''}"
                f"{f'l{self.hold_pv_last}' if self.hold_pv_last else ''}"
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

    def ones_layout(self):
        """``row_sum_mma``: the B operand of the row sum's GEMM, 8 rows of
        the key block's length in V^T's layout (every byte e4m3 1.0)."""
        v = self.v_layout()
        return OperandLayout(self.dtype, "K", v.swizzle, ROW_SUM_ROWS, self.kv_block)

    def pv_layout(self):
        """A V stage as P V's B operand reads it: ``v_layout`` (what the
        TMA loads), or (``row_sum_fold``) V^T with the ones' 8 rows below
        each box's d rows, (d + 8) x keys: P V's N is d + 8."""
        v = self.v_layout()
        if not self.row_sum_fold:
            return v
        return OperandLayout(v.dtype, v.major, v.swizzle, v.rows + ROW_SUM_ROWS, v.cols)

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
        kv = self.stages * (self.k_layout().bytes + self.pv_layout().bytes)
        o = self.consumer_warpgroups * self.o_layout().bytes if o_tiles else 0
        if self.row_sum_mma and not self.row_sum_fold:
            o += self.consumer_warpgroups * self.ones_layout().bytes
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


def packed_shift(cfg):
    """log2 of the packed group: packed row i is position i >> shift."""
    return cfg.pack_gqa.bit_length() - 1
