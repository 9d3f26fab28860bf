"""The ping-pong consumer schedule of the Hopper GEMM
(``GemmConfig(pingpong_m=...)``, kernels/hopper_gemm.py).

The cooperative kernel's two consumer warpgroups compute one tile
together (64 rows each), so both run the epilogue of every tile at the
same time and the tensor cores wait for the next tile's first wgmma. Here
each consumer warpgroup owns whole tiles of ``pingpong_m`` rows (64: one
``m64nN`` wgmma per k-slice; 128: two, sharing the B descriptor) and the
two take the CTA's tiles of the persistent schedule in turn: warpgroup 0
the 1st, 3rd, .. of them, warpgroup 1 the 2nd, 4th, ... Their mainloops
take turns too (``Turns``): a warpgroup issues its tile's wgmma only once
the other has issued all of its own, so one warpgroup's mainloop runs
while the other runs its epilogue, and the two never contend for the
tensor cores. The producer needs no change: it walks the CTA's tiles in
order, which is the order the consumers read the ring (a warpgroup's
ring states skip the other's tiles: ``Tiles``). Each stage is read by one
warpgroup, so the ring's empty barrier counts the 4 warps of one.

Each warpgroup stores its tile through its own C staging buffer and its
own TMA-store group (one 64-row sub-tile at a time, ``store_tile``'s
passes over the columns), and syncs its epilogue on its own named barrier
(``EPILOGUE_BARRIER + cw``); the turns are the two ids after those.
"""

from pipeline_mlir.kernel import epilogue, wgmma
from pipeline_mlir.kernel.epilogue import EpilogueContext
from pipeline_mlir.kernel.warpgroup import THREADS_PER_WARPGROUP
from pipeline_mlir.layout import descriptor_units
from pipeline_mlir.pipeline import (Agent, CooperativeGroup, NamedBarrier,
                                    PipelineTmaStore, PipelineUserType,
                                    make_pipeline_state)

WARPGROUPS = 2


def turn_barrier_id(cfg):
    """The first of the turns' two named barrier ids: after the epilogue's
    (``EPILOGUE_BARRIER``, one per consumer warpgroup)."""
    from pipeline_mlir.kernels.hopper_gemm import EPILOGUE_BARRIER

    return EPILOGUE_BARRIER + cfg.consumer_warpgroups


class Turns:
    """The consumer warpgroups' mainloops in turn (0, 1, 0, 1, ..):
    warpgroup ``cw`` waits on barrier id ``turn_barrier_id + cw`` (256
    threads: its own 128 and the other warpgroup's, which arrive once they
    have issued their tile's last wgmma), then arrives on the other's id
    once it has issued its own. Warpgroup 1 lets warpgroup 0 through once
    at the start, and after the CTA's last tile the warpgroup that hand-off
    went to waits for it (``drain``), so no arrive is left pending at exit."""

    def __init__(self, k, cfg, cw):
        self.barrier = NamedBarrier(turn_barrier_id(cfg), WARPGROUPS * THREADS_PER_WARPGROUP,
                                    num_ids=WARPGROUPS)
        self.k, self.cw = k, cw
        self.mine, self.other = self.ids(cw)
        with k.if_(cw == WARPGROUPS - 1):
            self.barrier.arrive_w_index(0)

    def ids(self, cw):
        """(the id warpgroup ``cw`` waits on, the id it arrives on)."""
        return cw, (cw + 1) % WARPGROUPS

    def begin(self):
        """Wait for this warpgroup's turn to issue a mainloop."""
        self.barrier.arrive_and_wait_w_index(self.mine)

    def end(self):
        """Hand the turn to the other warpgroup (its wgmma all issued)."""
        self.barrier.arrive_w_index(self.other)

    def drain(self, tiles):
        """After the CTA's ``tiles`` tiles: the last hand-off (or, with no
        tile, the start signal) went to warpgroup ``tiles % 2``; it takes
        that turn and leaves it."""
        with self.k.if_(tiles % WARPGROUPS == self.cw):
            self.begin()


class Tiles:
    """Which of the CTA's tiles consumer warpgroup ``cw`` runs, and where
    its ring states stand: the CTA's tiles are ``first, first + stride,
    ..`` (the producer fills the ring in that order), warpgroup ``cw``
    takes every other one from the ``cw``-th, and its states skip the
    other warpgroup's tile (``k_blocks`` stages) before its first tile
    (warpgroup 1) and after each of its own."""

    def __init__(self, units, cw, k_blocks):
        self.units, self.cw, self.k_blocks = units, cw, k_blocks

    def range(self, num_units):
        first, stride = self.units
        return first + self.cw * stride, num_units, WARPGROUPS * stride

    def count(self, num_units):
        """The CTA's tiles (both warpgroups')."""
        first, stride = self.units
        return ((num_units - first + stride - 1) // stride).max(0)

    def skip_first(self, states):
        """Warpgroup 1: past warpgroup 0's first tile."""
        for s in states:
            s.advance(self.cw * self.k_blocks)

    def skip(self, states):
        """Past the other warpgroup's tile: ``k_blocks`` stages on."""
        for s in states:
            s.advance(self.k_blocks)


class MmaRows:
    """The wgmma of one k-block of a whole ``pingpong_m``-row tile: per
    k-slice, one ``m64nN`` instruction per 64-row sub-tile (A descriptors
    64 rows apart, the same B descriptor), all issued as one group."""

    def __init__(self, cfg, ring_a, ring_b):
        self.a, self.b, _ = cfg.layouts()
        self.mma = wgmma.WarpgroupMma(cfg.block_n, self.a, self.b)
        self.subtiles = cfg.block_m // wgmma.WarpgroupMma.M
        self.a_base = [wgmma.smem_matrix_descriptor(
            ring_a + s * self.a.mn_offset(wgmma.WarpgroupMma.M), self.a)
            for s in range(self.subtiles)]
        self.b_base = wgmma.smem_matrix_descriptor(ring_b, self.b)
        self.a_step = descriptor_units(self.a.bytes)
        self.b_step = descriptor_units(self.b.bytes)

    def accumulators(self):
        return [self.mma.accumulator() for _ in range(self.subtiles)]

    def __call__(self, accs, stage):
        s = stage.to(64)
        das = [(s * self.a_step + base).ir_value for base in self.a_base]
        db = (s * self.b_step + self.b_base).ir_value
        wgmma.fence()
        for kk in range(self.a.k_slices):
            b = wgmma.k_slice_descriptor(db, self.b, kk)
            for acc, da in zip(accs, das):
                self.mma.mma(acc, wgmma.k_slice_descriptor(da, self.a, kk), b)
        wgmma.commit_group()


def mainloop(k, ring, mma, accs, read, release, k_blocks, turns):
    """One tile in this warpgroup's turn: as ``gemm_mainloop.mainloop_fast``
    (the stage of k-block kb - 1 goes back once wait_group(1) retired its
    group), the turn handed on once the last k-block's group is issued."""
    for acc in accs:
        acc.zero()
    turns.begin()
    ring.consumer_wait(read)
    mma(accs, read.index)
    read.advance()
    for kb, _ in k.range(1, k_blocks, carry=[read, release, *accs]):
        ring.consumer_wait(read)
        mma(accs, read.index)
        wgmma.wait_group(1)
        ring.consumer_release(release)
        read.advance()
        release.advance()
    turns.end()
    wgmma.wait_group(0)
    ring.consumer_release(release)
    release.advance()


def consumer(k, cfg, ring, sched, units, k_blocks, warp, ring_a, ring_b, c_buf, desc_c,
             c_ptr, m, n, epi_args=None):
    """Consumer warpgroup ``cw`` (warps 4..7: 0, 8..11: 1): its tiles
    (``Tiles``), each a mainloop in its turn (``Turns``), then the epilogue
    of each 64-row sub-tile (the fused one first) through this warpgroup's
    C buffer and TMA-store group."""
    from pipeline_mlir.kernels.hopper_gemm import EPILOGUE_BARRIER, store_tile

    _, _, c_tile = cfg.layouts()
    stages = ring.num_stages
    cw = warp // 4 - 1
    warp_in_wg, lane = warp % 4, k.lane_idx()
    leader = (warp_in_wg == 0) & (lane == 0)
    mma = MmaRows(cfg, ring_a, ring_b)
    turns = Turns(k, cfg, cw)
    tiles = Tiles(units, cw, k_blocks)
    store = (PipelineTmaStore.create(
        num_stages=1, producer_group=CooperativeGroup(Agent.Thread, 1))
        if c_buf else None)
    epi_sync = NamedBarrier(EPILOGUE_BARRIER, THREADS_PER_WARPGROUP)
    read = make_pipeline_state(PipelineUserType.Consumer, stages)
    release = make_pipeline_state(PipelineUserType.Consumer, stages)
    tiles.skip_first([read, release])
    accs = mma.accumulators()
    for unit, _ in k.range(*tiles.range(sched.num_units), carry=[read, release]):
        m_blk, n_blk = sched.tile(unit, None)
        mainloop(k, ring, mma, accs, read, release, k_blocks, turns)
        tiles.skip([read, release])
        col0 = n_blk * cfg.block_n
        for s, acc in enumerate(accs):
            row0 = m_blk * cfg.block_m + s * wgmma.WarpgroupMma.M
            ctx = (EpilogueContext(row0, col0, m, n, warp_in_wg, lane, cfg.c_dtype, epi_args)
                   if cfg.fused else None)
            if c_buf is None:
                out = cfg.epilogue.apply(acc, ctx) if ctx is not None else acc
                epilogue.store_fragment_global(out, c_ptr, row0, col0, m, n, warp_in_wg,
                                               lane, cfg.c_dtype)
            else:
                store_tile(k, cfg, acc, ctx, store, epi_sync, c_buf, desc_c, c_tile, row0,
                           n_blk, cw, warp_in_wg, lane, leader)
    turns.drain(tiles.count(sched.num_units))
    if store is not None:
        with k.if_(leader):
            store.producer_tail()
