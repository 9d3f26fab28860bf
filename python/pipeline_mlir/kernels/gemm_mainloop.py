"""The Hopper GEMM's operand side: which tiles and K blocks a CTA's work
unit covers (``unit_range``, ``unit_work``; ``ClusterAlongNScheduler``, the
order of a 2-CTA cluster side by side along N), the producer warp that
fills the operand ring with TMA loads (multicast within a cluster), and
the consumers' mainloops over a tile's K blocks (``MmaKBlock``: one K
block's wgmma; ``mainloop_fast``, ``mainloop_promoted``). Built into the
kernel by ``kernels/hopper_gemm.py``, which re-exports these names.
"""

from mlir import ir
from mlir.dialects import arith

from pipeline_mlir.kernel import wgmma
from pipeline_mlir.kernel.tile_scheduler import (PersistentTileScheduler, StreamKSchedule,
                                                  _divmod, _min, split_k_unit)
from pipeline_mlir.kernel.values import Scalar, i32
from pipeline_mlir.kernels.streamk_fixup import prefetch_partials
from pipeline_mlir.layout import descriptor_units
from pipeline_mlir.pipeline import PipelineUserType, make_pipeline_state


class ClusterAlongNScheduler(PersistentTileScheduler):
    """The grouped order of ``PersistentTileScheduler`` over units of two
    tiles side by side along N (``GemmConfig.cluster_along_n``): ``group_m``
    rows of tiles swept by column pairs; CTA rank r of the cluster takes
    column ``2 * pair + r`` of the unit's row."""

    def __init__(self, m, n, block_m, block_n, group_m=8):
        super().__init__(m, n, block_m, 2 * block_n, group_m=group_m, cluster_m=1)
        self.cluster_m = 2      # the cluster's ids (first_and_stride)

    def tile(self, unit, cta_rank=None):
        per_group = self.tiles_n * self.group_m
        group, in_group = _divmod(unit, per_group)
        first_m = group * self.group_m
        rows = _min(self.tiles_m - first_m, Scalar(arith.constant(i32(), self.group_m)))
        n_pair, in_rows = _divmod(in_group, rows)
        return first_m + in_rows, n_pair * 2 + cta_rank


class Cluster2x2Scheduler(PersistentTileScheduler):
    """The grouped order of ``PersistentTileScheduler`` over units of 2x2
    tiles (``GemmConfig.cluster_n``): ``group_m`` rows of units swept by
    unit columns; CTA rank r of the cluster (rank = m + 2 n, the cluster
    layout's order) takes tile row ``2 * unit row + r % 2`` and tile column
    ``2 * unit column + r // 2``."""

    def __init__(self, m, n, block_m, block_n, group_m=8):
        super().__init__(m, n, 2 * block_m, 2 * block_n, group_m=group_m // 2, cluster_m=1)
        self.cluster_m = 2      # the cluster's ids (first_and_stride)

    def tile(self, unit, cta_rank=None):
        per_group = self.tiles_n * self.group_m
        group, in_group = _divmod(unit, per_group)
        first_m = group * self.group_m
        rows = _min(self.tiles_m - first_m, Scalar(arith.constant(i32(), self.group_m)))
        n_unit, in_rows = _divmod(in_group, rows)
        return ((first_m + in_rows) * 2 + cluster_2x2_row(cta_rank),
                n_unit * 2 + cluster_2x2_col(cta_rank))


# A 2x2 cluster's CTA coordinates: its layout (V, M, N, L) = (1, 2, 2, 1)
# puts M fastest, rank = m + 2 n (lib/Conversion/PipelineToNVVM/
# ClusterMasks.cpp, which derives the consumers' releases from it). The
# scheduler's tiles, the producer's halves and the multicast masks all
# read these two, so they cannot disagree with each other.
def cluster_2x2_row(rank):
    """The tile row (0 or 1) of CTA ``rank`` within its 2x2 unit."""
    return rank % 2


def cluster_2x2_col(rank):
    """The tile column (0 or 1) of CTA ``rank`` within its 2x2 unit."""
    return rank // 2


def cluster_2x2_mask_values(rank):
    """(A's multicast mask, B's) of CTA ``rank`` of a 2x2 cluster: A goes to
    the CTAs of its tile row m (ranks m and m + 2: 0b0101 << m), B to those
    of its tile column n (ranks 2 n and 2 n + 1: 0b0011 << 2 n). Ints or
    i32 Scalars (no shifts: (m + 1) * 5 and (3 n + 1) * 3 are the same
    masks)."""
    return ((cluster_2x2_row(rank) + 1) * 5,            # 0b0101 / 0b1010
            (cluster_2x2_col(rank) * 3 + 1) * 3)        # 0b0011 / 0b1100


def cluster_2x2_masks(rank):
    """``cluster_2x2_mask_values`` of the i32 ``rank`` as i16 values."""
    i16 = ir.IntegerType.get_signless(16)
    a, b = cluster_2x2_mask_values(rank)
    return arith.trunci(i16, a.ir_value), arith.trunci(i16, b.ir_value)


def unit_range(sched, units, split):
    """``(start, stop, step)`` of this CTA's unit loop: every ``stride``-th
    tile (or split-K unit) from its first, or its stream-K units in order."""
    first, stride = units
    if split is None:
        return first, sched.num_units, stride
    if isinstance(split, StreamKSchedule):
        return 0, split.units, 1
    return first, split[1], stride


def unit_work(sched, unit, rank, k_blocks, split):
    """``(m_block, n_block, k-block range args, part)`` of a work unit: the
    whole K of a tile (``part`` None), or (split-K, ``split`` = (splits,
    units)) one split's contiguous K blocks, ``part`` = (split index, K
    blocks) (``tile_scheduler.split_k_unit``), or (stream-K, ``split`` a
    ``StreamKSchedule``) the unit's K blocks of its tile, ``part`` = (K
    blocks, partial, workspace slot, stream-K tile). The producer and the
    consumers call it alike, so both walk the same blocks."""
    if split is None:
        m_blk, n_blk = sched.tile(unit, rank)
        return m_blk, n_blk, (k_blocks,), None
    if isinstance(split, StreamKSchedule):
        tile, begin, count, partial, slot, sk_tile = split.unit(unit)
        m_blk, n_blk = sched.tile(tile, rank)
        return m_blk, n_blk, (begin, begin + count), (count, partial, slot, sk_tile)
    tile, index, begin, count = split_k_unit(unit, sched.num_units, split[0], k_blocks)
    m_blk, n_blk = sched.tile(tile, rank)
    return m_blk, n_blk, (begin, begin + count), (index, count)


def producer(k, cfg, ring, sched, units, rank, k_blocks, desc_a, desc_b, ring_a, ring_b,
             split=None, stream_args=None):
    """Warp 0 of warpgroup 0: walks the tiles of the persistent schedule and,
    per k-block, fills a ring stage with the A and the B tile (with
    ``cfg.sk_prefetch``, then the L2 prefetch of the partials a unit that
    ends its tile will add)."""
    a_tile, b_tile, _ = cfg.layouts()
    cluster = cfg.cluster_m
    a_stage_bytes = a_tile.bytes * cfg.a_multicast
    b_stage_bytes = b_tile.bytes * cfg.b_multicast
    stages = ring.num_stages
    state = make_pipeline_state(PipelineUserType.Producer, stages)
    for unit, _ in k.range(*unit_range(sched, units, split), carry=[state]):
        m_blk, n_blk, kb_range, part_of = unit_work(sched, unit, rank, k_blocks, split)
        for kb, _ in k.range(*kb_range, carry=[state]):
            ring.producer_acquire(state)
            with k.elect_one():
                x = kb * a_tile.k
                if cfg.cluster_n > 1:
                    # 2x2: this CTA's half of A's rows into its tile row's
                    # two CTAs, its half of B's rows into its tile column's.
                    rm, rn = cluster_2x2_row(rank), cluster_2x2_col(rank)
                    mask_a, mask_b = cluster_2x2_masks(rank)
                    ring.tma_load(state, desc_a,
                                  a_tile.coords(m_blk * cfg.block_m + rn * a_tile.rows, x),
                                  ring_a.stage(state.index, a_stage_bytes)
                                  + rn * a_tile.bytes, a_tile.bytes, mcast_mask=mask_a)
                    ring.tma_load(state, desc_b,
                                  b_tile.coords(n_blk * cfg.block_n + rm * b_tile.rows, x),
                                  ring_b.stage(state.index, b_stage_bytes)
                                  + rm * b_tile.bytes, b_tile.bytes, mcast_mask=mask_b)
                elif cfg.cluster_along_n:
                    # This CTA's half of A's rows, written into both CTAs;
                    # its own B tile.
                    ring.tma_load(state, desc_a,
                                  a_tile.coords(m_blk * cfg.block_m + rank * a_tile.rows, x),
                                  ring_a.stage(state.index, a_stage_bytes)
                                  + rank * a_tile.bytes, a_tile.bytes,
                                  mcast_mask=(1 << cluster) - 1)
                    ring.tma_load(state, desc_b, b_tile.coords(n_blk * cfg.block_n, x),
                                  ring_b.stage(state.index, b_stage_bytes), b_tile.bytes)
                else:
                    ring.tma_load(state, desc_a, a_tile.coords(m_blk * cfg.block_m, x),
                                  ring_a.stage(state.index, a_tile.bytes), a_tile.bytes)
                    b_dst = ring_b.stage(state.index, b_stage_bytes)
                    if cluster == 1:
                        ring.tma_load(state, desc_b, b_tile.coords(n_blk * cfg.block_n, x),
                                      b_dst, b_tile.bytes)
                    else:
                        # This CTA's half of B, written into both CTAs.
                        ring.tma_load(state, desc_b,
                                      b_tile.coords(n_blk * cfg.block_n + rank * b_tile.rows,
                                                    x),
                                      b_dst + rank * b_tile.bytes, b_tile.bytes,
                                      mcast_mask=(1 << cluster) - 1)
            ring.producer_commit(state)
            state.advance()
        if cfg.sk_prefetch:
            prefetch_partials(k, cfg, split, part_of, kb_range[1] == k_blocks,
                              stream_args[0], rank)
    # No arrive may land on this CTA's barriers after it exits.
    ring.producer_tail(state)


class MmaKBlock:
    """The wgmma of one k-block of consumer warpgroup ``cw``: the operand
    descriptors of a ring stage and the ``k_slices`` instructions on them,
    issued as one group."""

    def __init__(self, cfg, ring_a, ring_b, cw):
        self.a, self.b, _ = cfg.layouts()
        self.mma = wgmma.WarpgroupMma(cfg.block_n, self.a, self.b)
        self.a_base = wgmma.smem_matrix_descriptor(
            ring_a + cw * self.a.mn_offset(wgmma.WarpgroupMma.M), self.a)
        self.b_base = wgmma.smem_matrix_descriptor(ring_b, self.b)
        self.a_step = descriptor_units(self.a.bytes * cfg.a_multicast)
        self.b_step = descriptor_units(self.b.bytes * cfg.b_multicast)

    def __call__(self, acc, stage, accumulate=True):
        """``acc (+)= A x B`` over the k-block in ring stage ``stage``; with
        ``accumulate=False`` the first instruction overwrites ``acc``."""
        s = stage.to(64)
        da = (s * self.a_step + self.a_base).ir_value
        db = (s * self.b_step + self.b_base).ir_value
        wgmma.fence()
        for kk in range(self.a.k_slices):
            self.mma.mma(acc, wgmma.k_slice_descriptor(da, self.a, kk),
                         wgmma.k_slice_descriptor(db, self.b, kk),
                         accumulate=accumulate or kk > 0)
        wgmma.commit_group()


def mainloop_fast(k, ring, mma_k_block, acc, read, release, k_blocks):
    """One tile: every k-block accumulates into ``acc`` in the tensor core
    (for FP8, in the tensor core's reduced-precision accumulator: the
    ``use_fast_accum`` of cuBLASLt)."""
    acc.zero()
    ring.consumer_wait(read)
    mma_k_block(acc, read.index)
    read.advance()
    for kb, _ in k.range(1, k_blocks, carry=[read, release, acc]):
        ring.consumer_wait(read)
        mma_k_block(acc, read.index)
        # Release order: the group just issued reads stage `read`;
        # wait_group(1) retires every older group, so no wgmma reads stage
        # `release` any more and its producer may overwrite it. Releasing
        # before this wait would let TMA overwrite operands an in-flight
        # wgmma still reads (pipeline-verify-protocol check 8 and
        # pipeline-sim's async-read report it: docs/VerifyProtocol.md).
        wgmma.wait_group(1)
        ring.consumer_release(release)
        read.advance()
        release.advance()
    wgmma.wait_group(0)
    ring.consumer_release(release)
    release.advance()


def mainloop_promoted(k, ring, mma_k_block, total, part, read, k_blocks):
    """One tile, with promotion: each k-block's wgmma result, accumulated
    from zero in ``part``, is added into the fp32 ``total`` (DeepGEMM's and
    CUTLASS's "2xacc" way around FP8 wgmma's reduced-precision
    accumulator). The addition needs the group retired, so each k-block
    ends with ``wait_group(0)``, and the stage is released right after it;
    the other consumer warpgroup's wgmma keep the tensor cores busy
    meanwhile. Costs ``part``'s registers (N / 2 per thread)."""
    total.zero()
    for kb, _ in k.range(k_blocks, carry=[read, total, part]):
        ring.consumer_wait(read)
        mma_k_block(part, read.index, accumulate=False)
        wgmma.wait_group(0)
        ring.consumer_release(read)
        total += part               # fp32 adds on the CUDA cores
        read.advance()
