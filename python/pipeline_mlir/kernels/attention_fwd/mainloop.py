"""Stage: a consumer warpgroup's GEMMs over one tile and the release of every
stage they read (``Mainloop``), the values it carries (``TileAccumulators``)
and the hold of P V's retirement (``hold_after``).
"""

from dataclasses import dataclass

import mlir.ir as ir
from mlir.dialects import arith, llvm, nvvm, vector

from pipeline_mlir.kernel import Scalar, fence_view_async_shared, wgmma
from pipeline_mlir.kernel.fragment import Fragment, OperandA, RowVector, fp8_in_place_value
from pipeline_mlir.kernel.values import i32, to_value
from pipeline_mlir.kernel.warpgroup import THREADS_PER_WARPGROUP
from pipeline_mlir.layout import descriptor_units
from pipeline_mlir.pipeline import NamedBarrier

from .config import EPILOGUE_BARRIER
from .exponentials import HALF_WINDOW, half_pair_slots

E4M3_ONES = 0x38383838           # four e4m3 1.0 (sign 0, exponent 7 of bias 7, mantissa 0)
E4M3_SIGNS = 0x80808080          # the sign bits of four e4m3


@dataclass
class TileAccumulators:
    """A consumer warpgroup's running values over one tile: O (fp32, m64 x
    d), the row max of S and the row sum of P."""
    o: Fragment
    row_max: RowVector
    row_sum: RowVector
    # ``cfg.row_sum_mma``: ``row_sum`` holds each row's whole sum (every
    # block's P times ones, from the tensor pipe), not the thread's part.
    whole_sums: bool = False

    def row_sums(self):
        """The rows' sums over the whole tile (a RowVector): the thread's
        partial sums added over its quad, or (``whole_sums``) as they are."""
        return self.row_sum if self.whole_sums else self.row_sum.quad_sum()


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
        # K-major, its keys in P's in-place register order; row_sum_fold:
        # n = d + 8, the ones' rows below V^T (``cfg.pv_layout``).
        self.mma_o = wgmma.WarpgroupMma(v_layout.mn if cfg.row_sum_fold else cfg.head_dim,
                                        cfg.dtype, v_layout)
        # Stage 0 of the K and V rings (Q's descriptor is made per tile).
        self.k_base = wgmma.smem_matrix_descriptor(rings.k.smem, k_layout)
        self.v_base = wgmma.smem_matrix_descriptor(rings.v.smem, v_layout)
        self.k_step = descriptor_units(k_layout.bytes)
        self.v_step = descriptor_units(v_layout.bytes)
        # row_sum_mma: P times 8 columns of ones (``write_ones``).
        self.mma_l = (wgmma.WarpgroupMma(8, cfg.dtype, cfg.ones_layout())
                      if cfg.row_sum_mma and not cfg.row_sum_fold else None)
        self.ones_base = None

    def write_ones(self, cw, warp_in_wg, lane):
        """``cfg.row_sum_mma``: this warpgroup's block of e4m3 ones (the
        row sum's B operand), written by its 128 threads, fenced for the
        async proxy (wgmma) and synchronized over the warpgroup; once per
        kernel, before the first P V."""
        layout = self.cfg.ones_layout()
        base = self.rings.ones + cw * layout.bytes
        tid = warp_in_wg * 32 + lane
        words = layout.bytes // 4
        for w in range(0, words, THREADS_PER_WARPGROUP):
            llvm.store(to_value(E4M3_ONES, i32()), (base + (tid + w) * 4).ir_value)
        fence_view_async_shared()                # generic writes -> wgmma's proxy
        NamedBarrier(EPILOGUE_BARRIER, THREADS_PER_WARPGROUP,
                     num_ids=self.cfg.consumer_warpgroups).arrive_and_wait_w_index(cw)
        self.ones_base = wgmma.smem_matrix_descriptor(base, layout)

    def operand_a(self, p, first_value=0):
        """P as the register A operand of P V: bf16 (the accumulator's own
        layout), or e4m3 packed in place (no shuffles; V^T's keys are in
        the order this gives, ``layout.fp8_register_a_key_order``).
        ``first_value``: the index of ``p``'s first value in the block's P
        (``operand_a_slices``: where its f16x2 pairs sit)."""
        if self.cfg.fp8:
            if self.cfg.p_pack_merge:
                return pack_merged(p, self.cfg.dtype,
                                   half_pair_slots(self.cfg.exp2_poly)
                                   if self.cfg.exp2_poly_half else frozenset(), first_value)
            return p.to_operand_a(self.cfg.dtype, in_place=True)
        return p.to_operand_a("bf16")

    def operand_a_slices(self, p, first, end):
        """k-slices ``first .. end - 1`` of ``operand_a(p)``: the same
        registers, from P's columns 32 first .. 32 end (a thread's 16
        values of each 32 columns, ``Fragment.element_offset``)."""
        per = p.count * 32 // p.n                       # a thread's values per slice
        return self.operand_a(Fragment(32 * (end - first),
                                       values=p.values[per * first:per * end]), per * first)

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
        registers, one group. With ``cfg.row_sum_mma`` each k-slice's wgmma
        is followed by the row sum's (P times ones) into a fresh m64n8
        accumulator, returned (defined once the group retired: ``add_sums``
        adds it to the running sums); with ``cfg.row_sum_fold`` P V is
        m64n(d+8), its B V^T with the ones' rows below (``cfg.pv_layout``),
        and O's last 8 columns, zeroed by the ``rescale`` before it, are
        the sums (O itself returned). Fresh per block: the FP8 wgmma's
        accumulation aligns its addends to the accumulator's magnitude,
        and a sum carried over the whole row (up to thousands of P, each
        <= 1) lost 2% of it there on an H200 (LSE off by 0.017-0.019);
        the block's sum is added in f32."""
        v_layout = self.rings.v.layout
        db = (stage.to(64) * self.v_step + Scalar(self.v_base)).ir_value
        sums = Fragment.undef(8) if self.mma_l is not None else None
        wgmma.fence()
        for kk in range(len(p)):
            self.mma_o.mma_rs(o_acc, p.slice(kk), wgmma.k_slice_descriptor(db, v_layout, kk))
            if sums is not None:
                self.mma_l.mma_rs(sums, p.slice(kk), wgmma.k_slice_descriptor(
                    self.ones_base, self.cfg.ones_layout(), kk), accumulate=kk > 0)
        wgmma.commit_group()
        return o_acc if self.cfg.row_sum_fold else sums

    def add_sums(self, acc, sums):
        """``cfg.row_sum_mma``, after P V retired: the block's row sums
        (values 0 and 2 of its accumulator: rows g and g + 8, every column
        the same sum; ``row_sum_fold``: of O's last 8 columns) added to the
        running ones."""
        if sums is not None:
            first = self.cfg.head_dim // 2 if self.cfg.row_sum_fold else 0
            acc.row_sum.set(acc.row_sum + RowVector([sums.values[first],
                                                     sums.values[first + 2]]))

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
        if self.cfg.row_sum_fold:
            # O without the sums' columns, for the epilogue.
            acc.o = Fragment(self.cfg.head_dim, values=acc.o.values[:self.cfg.head_dim // 2])

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
        sums = self.issue_pv(acc.o, p_regs, v_read.index)
        self.turns.end()
        wgmma.wait_group(0)
        self.add_sums(acc, sums)
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
        if acc.whole_sums:
            acc.row_sum.set(acc.row_sum * c)
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
        self.rescale(acc, corr)
        pipe_v.consumer_wait(v_read)
        sums = self.issue_pv(acc.o, p_regs, v_read.index)
        self.turns.end()
        wgmma.wait_group(1)              # S_j retired
        pipe_k.consumer_release(k_read)
        k_read.advance()
        p, new_corr = softmax(s_acc, acc, j, m_row0, j >= n_free, first=False)
        if self.cfg.double_p:
            # P_j converted while P_{j-1} V_{j-1} still reads p_regs: into
            # other registers, moved into p_regs after the wait.
            p_next = self.operand_a(p)
        elif self.cfg.p_early:
            # Its first p_early k-slices so (half the extra registers of
            # double_p for half the slices), the rest after the wait.
            early = self.operand_a_slices(p, 0, self.cfg.p_early)
        if self.cfg.hold_pv_wait:
            hold_after(acc.row_sum)
        elif self.cfg.hold_pv_on_p:
            part = self.cfg.hold_pv_part
            hold_after_values(p.values[:p.count * 32 // p.n * part] if part else p.values)
        elif self.cfg.hold_pv_on_e4m3:
            held = (p_next if self.cfg.double_p else early)._carry_values()
            if self.cfg.hold_pv_last:
                # The last registers converted: the trap on bit 31 (the
                # last byte's sign) of their OR.
                hold_after_values(held[-self.cfg.hold_pv_last:])
            else:
                hold_after_values(held, sign_bits=E4M3_SIGNS)
        wgmma.wait_group(0)              # P_{j-1} V_{j-1} retired
        if self.cfg.hold_pv_on_e4m3:
            keep_live(p_regs._carry_values())
        self.add_sums(acc, sums)
        pipe_v.consumer_release(v_read)
        v_read.advance()
        corr.set(new_corr)
        if self.cfg.double_p:
            p_regs.set(p_next)
        elif self.cfg.p_early:
            late = self.operand_a_slices(p, self.cfg.p_early, p.n // p_regs.k_per_slice)
            p_regs.set(OperandA(early.dtype, early.slices + late.slices))
        else:
            p_regs.set(self.operand_a(p))

    def release_q(self, q_read):
        """Q is no longer read: every S GEMM of the tile retired."""
        self.rings.q.pipe.consumer_release(q_read)

    def last_block(self, v_read, acc, p_regs, corr):
        """The last block: O += P_{n-1} V_{n-1}."""
        pipe_v = self.rings.v.pipe
        pipe_v.consumer_wait(v_read)
        self.turns.begin()
        self.rescale(acc, corr)
        sums = self.issue_pv(acc.o, p_regs, v_read.index)
        self.turns.end()
        wgmma.wait_group(0)
        self.add_sums(acc, sums)
        pipe_v.consumer_release(v_read)
        v_read.advance()

    def rescale(self, acc, corr):
        """O *= the previous block's correction: always, or
        (cfg.rescale_threshold) skipped by the whole warp where every
        correction of its rows is exactly 1 (``rescale_unless_one``);
        ``cfg.row_sum_fold``: O's sums columns zeroed for the next P V; the
        whole row sums of ``cfg.row_sum_mma`` with it (two multiplications,
        not skipped: exact where the correction is 1)."""
        o = acc.o
        # row_sum_fold: O's last 8 columns (the sums of P V's ones) zeroed,
        # so they hold this block's sums alone.
        sums = self.cfg.row_sum_fold and (o.n - self.cfg.head_dim) // 2
        if self.cfg.rescale_threshold:
            o.set(rescale_unless_one(o, corr, zero_last=sums))
        elif sums:
            o.set(Fragment(o.n, values=[v for v in (o * corr).values[:-sums]] + [0.0] * sums))
        else:
            o.set(o * corr)
        if acc.whole_sums:
            acc.row_sum.set(acc.row_sum * corr)


def pack_merged(p, dtype, half_pairs=frozenset(), first_value=0):
    """``cfg.p_pack_merge``: P as the in-place 8-bit register A operand
    (``Fragment.to_operand_a(dtype, in_place=True)``'s bytes, from
    ``fragment.fp8_in_place_value``), each register a bitcast of the
    vector of its two ``cvt.rn.satfinite.e4m3x2.f32`` halves: PTX's
    ``mov.b32 {lo, hi}``, which ptxas folds into the conversions (no
    PRMT). ``half_pairs`` (``cfg.exp2_poly_half``): the value pairs (their
    first index mod 32; every byte pair of a register is a value pair)
    that hold one f16x2 of ``exponentials.exp2_poly_half``, converted by
    ``cvt.rn.satfinite.e4m3x2.f16x2``. ``first_value``: the index of
    ``p``'s first value in the block's P, where ``p`` is some of its
    k-slices (``p_early``): the pairs sit by that index mod 32 (a slice is
    16 values, so an odd first slice shifts them by 16, which with an odd
    ``exp2_poly`` are other pairs)."""
    f8 = {"e4m3": ir.Float8E4M3FNType, "e5m2": ir.Float8E5M2Type}[dtype].get()
    i16 = ir.IntegerType.get_signless(16)
    pair_t = ir.VectorType.get([2], i16)
    v = p.values

    def cvt(hi, lo):
        """Values ``lo`` (the low byte) and ``hi = lo + 1`` as e4m3x2."""
        if (first_value + lo) % HALF_WINDOW in half_pairs:
            pair = llvm.bitcast(ir.VectorType.get([2], ir.F16Type.get()),
                                llvm.bitcast(i32(), v[lo]))
            return nvvm.convert_f16x2_to_f8x2(i16, pair, ir.TypeAttr.get(f8))
        return nvvm.convert_f32x2_to_f8x2(i16, v[hi], v[lo], ir.TypeAttr.get(f8),
                                          rnd=nvvm.FPRoundingMode.RN,
                                          sat=nvvm.SaturationMode.SATFINITE)

    slices = []
    for s in range(p.n // 32):
        regs = []
        for reg in range(4):
            idx = [fp8_in_place_value(s, reg, b) for b in range(4)]
            halves = vector.from_elements(pair_t, [cvt(idx[1], idx[0]), cvt(idx[3], idx[2])])
            regs.append(llvm.bitcast(i32(), halves))
        slices.append(regs)
    return OperandA(dtype, slices)


def rescale_unless_one(o, corr, zero_last=0):
    """``o`` times ``corr`` per row, as one asm statement that branches
    over its multiplications where no lane of the warp has a correction
    other than 1.0 (a warp-uniform vote): skipping them is then exact. For
    ``AttentionConfig.rescale_threshold``, under which the row max, and so
    the correction, changes only when it grows past the threshold. One asm,
    like ``hold_after``: the branch is PTX's, so the simulator, which
    cannot evaluate a condition on GEMM results, sees no ``scf.if``; the
    labels are local to the asm's braces. ``zero_last``: that many of the
    last values set to 0 instead, always (``row_sum_fold``'s sums columns:
    in the same asm, so that P V's accumulator comes whole out of it; the
    zeros as values of their own made ptxas serialize the wgmmas, C7511)."""
    count = o.count
    c0, c1 = f"${2 * count}", f"${2 * count + 1}"
    # Value i belongs to row (i // 2) % 2 of the thread's two (Fragment's
    # layout: ``_row_reduce``).
    muls = "".join(f"mul.f32 ${i}, ${i}, {c1 if (i // 2) % 2 else c0};\n"
                   for i in range(count - zero_last))
    zeros = "".join(f"mov.f32 ${i}, 0f00000000;\n" for i in range(count - zero_last, count))
    text = ("{\n.reg .pred p, q;\n"
            f"{zeros}"
            f"setp.neu.f32 p, {c0}, 0f3F800000;\n"
            f"setp.neu.or.f32 p, {c1}, 0f3F800000, p;\n"
            "vote.sync.any.pred q, p, 0xffffffff;\n"
            "@!q bra.uni RESCALE_DONE;\n"
            f"{muls}"
            "RESCALE_DONE:\n}\n")
    constraints = ",".join(["=f"] * count + [str(i) for i in range(count)] + ["f", "f"])
    out = llvm.inline_asm(o.type, list(o.values) + list(corr.values), text, constraints,
                          has_side_effects=False)
    return Fragment(o.n, struct=out)


def keep_live(regs):
    """An empty asm with side effects reading ``regs``: ptxas keeps them
    (P_{j-1}, which the P V GEMM in flight reads) live up to here, after
    its ``wgmma.wait_group``, so it gives no other value their registers
    before then (``AttentionConfig.hold_pv_on_e4m3``). No instruction."""
    llvm.inline_asm(None, list(regs), "", ",".join(["r"] * len(regs)),
                    has_side_effects=True)


def hold_after_values(values, sign_bits=None):
    """A trap where the OR of ``values``' bits (P's exponentials: f32, or
    an f16x2 pair's bits, each pair once) has bit 31 set, for
    ``AttentionConfig.hold_pv_on_p``: never (every value is >= +0, and an
    f16x2 pair's high half too). The ORs are 3-input LOP3s in SASS (about
    one per two values); the test reads all of them, so that the
    ``wgmma.wait_group`` after it stays after every exponential, as
    ``hold_after`` does on the FMA pipe's row sum. ``sign_bits``: the trap
    where the OR has any of these bits set instead (P's e4m3 registers,
    ``hold_pv_on_e4m3``: each byte's sign, ``E4M3_SIGNS``)."""
    seen, regs = set(), []
    for v in values:
        if v not in seen:
            seen.add(v)
            regs.append(v if v.type == i32() else llvm.bitcast(i32(), v))
    while len(regs) > 1:
        # In threes: or(or(a, b), c) is one LOP3.
        nxt = []
        for i in range(0, len(regs), 3):
            group = regs[i:i + 3]
            acc = group[0]
            for r in group[1:]:
                acc = arith.ori(acc, r)
            nxt.append(acc)
        regs = nxt
    test = ("setp.lt.s32 p, $0, 0; " if sign_bits is None else
            f".reg .b32 t; and.b32 t, $0, {sign_bits:#x}; setp.ne.s32 p, t, 0; ")
    llvm.inline_asm(None, [regs[0]],
                    "{ .reg .pred p, q; " + test +
                    "vote.sync.any.pred q, p, 0xffffffff; @q trap; }",
                    "r", has_side_effects=True)


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
