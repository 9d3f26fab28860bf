"""Stage: dQ's reduce-adds issued by a warp of the producer warpgroup
(``AttentionBwdConfig.dq_reduce_warp``, FA4's dQ hand-off): the consumers'
side (``DqHandOff``), the reduce warp (``ReduceWarp``) and the
roles that give the producer warpgroup its second warp
(``roles_with_reduce_warp``).

Per consumer warpgroup ``cw`` two named barriers of 160 threads (its 128
and the reduce warp's 32), each waited on by one side and arrived on by the
other:

    consumer cw                          reduce warp
    "dQ empty" cw: sync  <-------------  arrive (once up front: the tile
    write the fp32 dQ tile               starts free; then after each read)
    fence.proxy.async                         ^
    "dQ full" cw: arrive  ------------>  sync |
                                         reduce-add, commit,
                                         wait_group.read 0 --'

So a consumer never waits for a reduce-add (no leader wait, no barrier
before it): it waits for "dQ empty" only before it writes the tile again,
a step later.
"""

from pipeline_mlir.kernel import fence_view_async_shared
from pipeline_mlir.kernel.warpgroup import (THREADS_PER_WARPGROUP, WARPS_PER_WARPGROUP,
                                            set_max_registers)
from pipeline_mlir.pipeline import NamedBarrier, TmaStoreFence

from .config import CONSUMER_WARPGROUPS, DQ_EMPTY_BARRIER, DQ_FULL_BARRIER, REDUCE_WARP
from .dq_acc_order import acc_tile_row
from .dq_reduce import dq_column, dq_row, tma_reduce_add

# A consumer warpgroup and the reduce warp.
HAND_OFF_THREADS = THREADS_PER_WARPGROUP + 32


def dq_full():
    """Per consumer warpgroup (index ``cw``): its dQ tile is written and
    fenced (the consumer arrives, the reduce warp waits)."""
    return NamedBarrier(DQ_FULL_BARRIER, HAND_OFF_THREADS, num_ids=CONSUMER_WARPGROUPS)


def dq_empty():
    """Per consumer warpgroup (index ``cw``): TMA has read its dQ tile (the
    reduce warp arrives, the consumer waits)."""
    return NamedBarrier(DQ_EMPTY_BARRIER, HAND_OFF_THREADS, num_ids=CONSUMER_WARPGROUPS)


class DqHandOff:
    """A consumer warpgroup's side of ``dq_reduce_warp``, in ``DqReduce``'s
    places: ``claim`` before the step's first write of the dQ tile (the
    reduce warp's last read of it done), ``issue`` after the last (fence,
    arrive on "dQ full"). ``acquire`` and ``tail`` have nothing to do: the
    consumer owns no bulk group."""

    def __init__(self, k, cfg, sched, args, dq_tile, cw, leader, wg_sync):
        self.cw = cw
        self.full, self.empty = dq_full(), dq_empty()

    def acquire(self):
        """Nothing: the tile is claimed right before it is written."""

    def claim(self):
        """Wait until the reduce warp's reduce-add read the tile (at the
        first step: its start signal)."""
        self.empty.arrive_and_wait_w_index(self.cw)

    def issue(self, h, m_block, step=None):
        """Fence the generic writes of the dQ tile for TMA's proxy and hand
        the tile to the reduce warp; no wait."""
        fence_view_async_shared()                # generic writes -> TMA's proxy
        self.full.arrive_w_index(self.cw)

    def tail(self):
        """Nothing: the reduce warp waits for its own reads."""


class ReduceWarp:
    """The reduce warp (``__call__``): per step, and per consumer warpgroup
    in turn, wait for its dQ tile ("dQ full", ``wait_full``), add it into
    the fp32 accumulator (``reduce``: one lane's TMA reduce-adds, one bulk
    group, waited until TMA read the tile) and give it back ("dQ empty",
    ``give_back``). The tiles start free: one arrive on each "dQ empty"
    before the loop, a start signal (the last step's arrive is left pending
    at exit the same way)."""

    def __init__(self, k, cfg, rings, sched, args):
        self.k, self.cfg, self.rings, self.sched, self.args = k, cfg, rings, sched, args
        self.full, self.empty = dq_full(), dq_empty()
        self.groups = TmaStoreFence(num_stages=1)

    def __call__(self):
        for cw in range(CONSUMER_WARPGROUPS):
            self.give_back(cw)                   # start signal: the tile is free
        for it in self.k.range(self.sched.steps, unroll=1):
            h, m_block = self.sched.step(it)
            for cw in range(CONSUMER_WARPGROUPS):
                self.wait_full(cw)
                self.reduce(h, m_block, cw)
                self.give_back(cw)

    def wait_full(self, cw):
        self.full.arrive_and_wait_w_index(cw)

    def reduce(self, h, m_block, cw):
        """Consumer ``cw``'s tile added at query block ``m_block`` of head
        ``h``; returns once TMA has read it (``wait_group.read 0``)."""
        with self.k.if_(self.k.lane_idx() == 0):
            self.add(h, m_block, cw)
            self.groups.arrive()
            self.groups.wait()

    def add(self, h, m_block, cw):
        """The reduce-adds of consumer ``cw``'s tile (one lane): its boxes,
        or with ``dq_acc_order`` its 16 KiB at once (``acc_tile_row``)."""
        cfg, args, layout = self.cfg, self.args, self.cfg.dq_layout()
        tile = self.rings.dq + cw * layout.bytes
        if cfg.dq_acc_order:
            tma_reduce_add(args.dq_accum, [0, acc_tile_row(
                cfg, self.sched.b, args.heads, self.sched.padded_q, h, m_block, cw)], tile)
            return
        for col, off in layout.box_offsets():
            tma_reduce_add(args.dq_accum, [dq_column(cfg, h, cw, col),
                                           dq_row(cfg, m_block, cw), self.sched.b],
                           tile + off)

    def give_back(self, cw):
        self.empty.arrive_w_index(cw)


def roles_with_reduce_warp(k, producer_registers, consumer_registers, producer, reduce,
                           consumer):
    """``producer_consumer_roles`` with a second warp in the producer
    warpgroup: warp 0 runs ``producer()``, warp ``REDUCE_WARP``
    ``reduce()``, both at the producer's register count."""
    warp = k.warp_idx()
    warpgroup = warp // WARPS_PER_WARPGROUP
    with k.if_(warpgroup == 0) as role:
        set_max_registers(producer_registers, increase=False)
        with k.if_(warp == 0):
            producer()
        with k.if_(warp == REDUCE_WARP):
            reduce()
    with role.else_():
        set_max_registers(consumer_registers, increase=True)
        consumer(warp, warpgroup)
