"""Stage: the backward's gradient GEMMs, dV += P^T dO, dK += dS^T Q and dQ =
dS K, and the dS^T and dQ tiles between them (``GradGemms``).
"""

from pipeline_mlir.chip_limits import WGMMA_M
from pipeline_mlir.kernel import Scalar, epilogue, fence_view_async_shared, wgmma
from pipeline_mlir.kernel.fragment import Fragment, OperandA
from pipeline_mlir.kernel.warpgroup import THREADS_PER_WARPGROUP
from pipeline_mlir.pipeline import NamedBarrier

from .config import CONSUMER_WARPGROUPS, DQ_CHUNK, DS_BARRIER
from .dq_acc_order import acc_order, store_fragment_acc_order
from .dq_tile_store import store_fragment_f32, store_fragment_f32_transposed
from .ds_tile_store import store_half, store_operand_a


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
    ``cw``. With ``dq_rows`` (128-query steps, d = 64) its dQ is query rows
    ``64 cw ..``, every column, over all 128 keys: A the box of those
    queries in both warpgroups' dS^T tiles, B all of K. With
    ``dq_transposed`` (80-query steps) dQ^T = K^T dS^T: A this
    warpgroup's column atom of K read MN-major (M = its 64 dQ columns, K =
    all 128 keys), B both warpgroups' dS^T tiles (N = the 80 queries),
    stored transposed into the 80 x 64 fp32 dQ tile."""

    def __init__(self, k, cfg, rings, kv_tile, cw, warp_in_wg, lane, wg_sync):
        self.k, self.cfg, self.cw = k, cfg, cw
        self.warp_in_wg, self.lane, self.wg_sync = warp_in_wg, lane, wg_sync
        n = cfg.part_cols
        self.q_mn, self.k_mn = cfg.q_mn_layout(), cfg.k_mn_layout()
        self.ds_layout, self.ds_mn = cfg.ds_layout(), cfg.ds_mn_layout()
        self.ds_set = cfg.ds_set_layout()
        self.dq_layout = cfg.dq_layout()
        self.dq_n = cfg.dq_cols if cfg.dq_one_part else min(cfg.dq_cols, DQ_CHUNK)
        self.mma_kv = wgmma.WarpgroupMma(n, "bf16", self.q_mn)    # m64 n=part_cols, A regs
        if cfg.dq_transposed:                   # m64 (dQ columns) n=block_m (queries)
            self.mma_dq = wgmma.WarpgroupMma(cfg.block_m, self.k_mn, self.ds_mn)
        else:
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
        # This warpgroup's rows (keys) of a buffer's tiles.
        self.ds_tile = rings.ds + cw * self.ds_set.mn_offset(WGMMA_M)
        # shared_ds: the A of a step is its buffer's two tiles (``store_ds``).
        self.ds_a = (None if cfg.shared_ds
                     else wgmma.smem_matrix_descriptor(self.ds_tile, self.ds_mn))
        self.dq_tiles = rings.dq + cw * self.dq_layout.bytes
        self.dq_step = None
        self.both = (NamedBarrier(DS_BARRIER, 2 * THREADS_PER_WARPGROUP) if cfg.shared_ds
                     else None)
        self.one_stage_rings = rings.q.pipe.num_stages == rings.kv.pipe.num_stages
        if cfg.split_scores:
            # dV and dK with A (P^T, dS^T: 64 keys x the step's queries) from
            # the shared tiles, both halves; the barrier over both consumers.
            self.mma_kv_ss = wgmma.WarpgroupMma(n, self.ds_layout, self.q_mn)
            self.both = NamedBarrier(DS_BARRIER, 2 * THREADS_PER_WARPGROUP)

    def accumulator(self):
        """A zero dK or dV accumulator (m64 x d)."""
        return self.mma_kv.accumulator()

    def issue_dkv(self, dv, dk, p, ds, q_tile, do_tile):
        """dV += P^T dO, dK += dS^T Q: A from registers, one group;
        returns dS^T as that register operand."""
        q_mn = self.q_mn
        p_a = _operand_a(p)
        ds_regs = ds.to_operand_a("bf16")
        if self.cfg.column_parts > 1:
            # This warpgroup's columns of dO and Q (N of both GEMMs).
            part = q_mn.mn_offset(self.cfg.part_cols) * self.cw
            do_tile, q_tile = do_tile + part, q_tile + part
        do_mn = wgmma.smem_matrix_descriptor(do_tile, q_mn)
        q_mnd = wgmma.smem_matrix_descriptor(q_tile, q_mn)
        wgmma.fence()
        self._dv(dv, p_a, do_mn)
        self._dk(dk, ds_regs, q_mnd)
        wgmma.commit_group()
        return ds_regs

    def store_split(self, p, ds, it):
        """``split_scores``: this warpgroup's halves (its ``score_n``
        queries) of P^T and dS^T (bf16) into step ``it``'s buffer (``it %
        2``: tile 0 P^T, tile 1 dS^T), fenced for wgmma's proxy, then the
        barrier over both consumers, after which both halves are there;
        returns the descriptors of the two tiles (K-major A of dV and dK)
        and of dS^T as dQ's MN-major A. The buffer was last read by the
        GEMMs of two steps before, which both consumers retired before
        they arrived at the previous step's barrier; and a leader's wait
        for its reduce-adds (``DqReduce.acquire``) comes before its
        arrival here, so the dQ tile is free for every warp after it. The
        checker asks for a barrier between the leader's wait and any
        store of the warpgroup (it does not tell the tiles apart): without
        the reduce warp the warpgroup's barrier comes first, as in
        ``store_ds``."""
        if not self.cfg.dq_reduce_warp:
            self.wg_sync.arrive_and_wait_w_index(self.cw)
        layout = self.ds_layout
        buf = self.ds_tiles + (it % 2) * (CONSUMER_WARPGROUPS * layout.bytes)
        for frag, tile in ((p, buf), (ds, buf + layout.bytes)):
            store_half(frag, tile, self.warp_in_wg, self.lane, layout, self.cw)
        fence_view_async_shared()                # generic writes -> wgmma's proxy
        self.both.arrive_and_wait()
        return (wgmma.smem_matrix_descriptor(buf, layout),
                wgmma.smem_matrix_descriptor(buf + layout.bytes, layout),
                wgmma.smem_matrix_descriptor(buf + layout.bytes, self.ds_mn))

    def issue_dkv_smem(self, dv, dk, pt, dst, q_tile, do_tile):
        """``split_scores``: dV += P^T dO, dK += dS^T Q over the step's
        queries, A from the shared tiles (descriptors ``pt``, ``dst``), B
        this warpgroup's columns of dO and Q; one group."""
        q_mn, layout = self.q_mn, self.ds_layout
        part = q_mn.mn_offset(self.cfg.part_cols) * self.cw
        do_mn = wgmma.smem_matrix_descriptor(do_tile + part, q_mn)
        q_mnd = wgmma.smem_matrix_descriptor(q_tile + part, q_mn)
        wgmma.fence()
        for acc, a, b in ((dv, pt, do_mn), (dk, dst, q_mnd)):
            for kk in range(layout.k_slices):
                self.mma_kv_ss.mma(acc, wgmma.k_slice_descriptor(a, layout, kk),
                                   wgmma.k_slice_descriptor(b, q_mn, kk))
        wgmma.commit_group()

    def issue_dv(self, dv, p, do_tile):
        """``dk_last``: dV += P^T dO alone, one group (one column part:
        ``dk_last`` needs it)."""
        p_a = _operand_a(p)
        do_mn = wgmma.smem_matrix_descriptor(do_tile, self.q_mn)
        wgmma.fence()
        self._dv(dv, p_a, do_mn)
        wgmma.commit_group()

    def issue_dk(self, dk, ds_regs, q_tile):
        """``dk_last``: dK += dS^T Q alone (A: ``ds_regs``), one group."""
        q_mnd = wgmma.smem_matrix_descriptor(q_tile, self.q_mn)
        wgmma.fence()
        self._dk(dk, ds_regs, q_mnd)
        wgmma.commit_group()

    def _dv(self, dv, p_a, do_mn):
        for kk in range(len(p_a)):
            self.mma_kv.mma_rs(dv, p_a.slice(kk),
                               wgmma.k_slice_descriptor(do_mn, self.q_mn, kk))

    def _dk(self, dk, ds_regs, q_mnd):
        for kk in range(len(ds_regs)):
            self.mma_kv.mma_rs(dk, ds_regs.slice(kk),
                               wgmma.k_slice_descriptor(q_mnd, self.q_mn, kk))

    def store_ds(self, ds, it, ds_regs=None):
        """dS^T (bf16) of step ``it`` into this warpgroup's tile, handed to
        the dQ GEMMs; returns their A descriptor. The first barrier says the
        tile is free (the previous step's dQ GEMMs retired, its reduce-add
        read the dQ tile), the fence makes the generic writes visible to
        wgmma's proxy before the second.

        With ``shared_ds`` both warpgroups' dQ GEMMs read both tiles: the
        second barrier spans both warpgroups, and the tiles alternate
        between two buffers (step ``it`` writes buffer ``it % 2``), so a
        write follows the other warpgroup's arrival at the previous step's
        barrier, which it reaches after its dQ GEMMs of the step before
        that, the last reader of the buffer, retired.

        The tile's box ``j`` (queries ``64 j ..``) goes to box ``j`` of the
        buffer's ``ds_set_layout``, at this warpgroup's rows: with 64
        queries one box, the tiles one after the other. With ``dq_rows``
        the bf16 values come from ``ds_regs`` (the dK GEMM's register A),
        so that the fp32 ``ds`` (64 registers there) is dead once packed:
        kept for these stores it spilled. With ``ds_one_barrier`` the
        first barrier is left out: the previous step's barrier over both
        already follows every read of this buffer, and the dQ tile is
        claimed from the reduce warp."""
        cw, cfg = self.cw, self.cfg
        if not cfg.ds_one_barrier:
            self.wg_sync.arrive_and_wait_w_index(cw)
        buf = ((it % 2) * self.ds_set.bytes) if cfg.shared_ds else None
        for j in range(self.ds_layout.boxes):
            box = self.ds_tile if buf is None else self.ds_tile + buf
            if j:
                box = box + j * self.ds_set.box_bytes
            if cfg.dq_rows:
                store_operand_a(ds_regs, box, self.warp_in_wg, self.lane, self.ds_layout, j)
            else:
                epilogue.store_fragment(ds, box, self.warp_in_wg, self.lane, self.ds_layout,
                                        box_range=range(j, j + 1))
        fence_view_async_shared()                # generic writes -> wgmma's proxy
        if not cfg.shared_ds:
            self.wg_sync.arrive_and_wait_w_index(cw)
            return self.ds_a
        self.both.arrive_and_wait()
        a = self.ds_tiles + buf
        if cfg.dq_rows:                          # the box of this warpgroup's queries
            a = a + self.ds_mn.mn_offset(WGMMA_M) * cw
        return wgmma.smem_matrix_descriptor(a, self.ds_mn)

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
        # otherwise (shared keys, or shared_ds's all keys) every slice.
        own_keys = cfg.column_parts == 1 and not cfg.shared_ds
        dq = Fragment.undef(cfg.block_m if cfg.dq_transposed else dq_n)
        kb = wgmma.advance_descriptor(self.k_b, k_mn.mn_offset(c * dq_n))
        wgmma.fence()
        for kk in range(ds_mn.k_slices):
            a_slice = wgmma.k_slice_descriptor(ds_a, ds_mn, kk)
            b_slice = (_k_slice(kb, k_mn, self.cw, kk) if own_keys
                       else wgmma.k_slice_descriptor(kb, k_mn, kk))
            if cfg.dq_transposed:                # dQ^T: K^T as A, dS^T as B
                a_slice, b_slice = b_slice, a_slice
            self.mma_dq.mma(dq, a_slice, b_slice, accumulate=kk > 0)
        wgmma.commit_group()
        return dq

    def store_dq(self, c, dq, scale=None, step=None):
        """dQ part ``c`` (retired), times ``scale`` (dQ = scale * dS K,
        so the postprocess is a plain conversion of the accumulator; None:
        scaled already), into its boxes of step ``step``'s fp32 dQ tile."""
        if scale is not None:
            dq = dq * scale
        if self.cfg.dq_acc_order:                # one 64-column part: the whole tile
            store_fragment_acc_order(dq, self.dq_tile(step), self.warp_in_wg, self.lane,
                                     acc_order(self.cfg))
            return
        if self.cfg.dq_transposed:               # dQ^T: the whole tile, transposed
            store_fragment_f32_transposed(dq, self.dq_tile(step), self.warp_in_wg, self.lane,
                                          self.dq_layout)
            return
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


def _operand_a(p):
    """P^T as dV's bf16 register A: packed here, or already
    (``p_packed``: ``SoftmaxGrad`` packs it before dP^T's wait)."""
    return p if isinstance(p, OperandA) else p.to_operand_a("bf16")


def _k_slice(kb, k_mn, cw, kk):
    """K slice ``4 cw + kk`` of the K tile as dQ's B (this warpgroup's 64
    keys start at slice 4 cw): ``cw`` is a runtime value, so the offset is
    added to the descriptor at run time."""
    step = k_mn.k_slice_offset(1) >> 4          # descriptor units per slice
    off = (cw * (4 * step) + kk * step).to(64)
    return (Scalar(kb) + off).ir_value
