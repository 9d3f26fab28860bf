"""Rows staged through shared memory: a TMA ring of rows, or of parts of rows.

A :class:`Rows` kernel with a CTA per row keeps the row in registers from
its load to its store, so a CTA has one row's loads in flight and then
none while it reduces and stores. Past a few thousand columns few CTAs fit
per SM, and their phases no longer hide each other (an H200 ran the bf16
softmax of 32768 columns at 0.70-0.77 of a device-to-device copy's
bandwidth that way). A :class:`RowRing` keeps the memory busy with a
pipeline instead: one producer warp bulk-copies (``cp.async.bulk``, one
per row or part) the CTA's next rows into a ``PipelineTmaAsync`` ring of
``stages`` row buffers while the row's threads (the consumers) reduce and
store the current one. A consumer reads its values of the row out of the
stage in the :class:`Rows` layout (``ld.shared.v4``), as often as it
likes (a value needed on both sides of a reduction can be read twice
rather than held in registers across it), and releases the stage when
the row is stored; the ring's other stages are being filled meanwhile.

::

    rows, parts, stages = row_plan(n, "bf16")            # here parts == 1
    k = Kernel(..., block_dim=RowRing.block_threads(rows), ...)   # consumers + a producer warp
    with k:
        src, dst, m = k.args
        ring = RowRing(rows, k, stages)  # ring, barriers, pipeline: before the roles
        ring.produce(src, m)             # the producer warp's loop
        with ring.consumers():           # the row's threads
            for row, stage in ring.rows(m):
                x = stage.load(fill=float("-inf"))     # ld.shared, this thread's values
                ...
                rows.store(y, dst, row)

A row longer than one CTA's threads hold (more than 512 threads x 64
values: 32768 bf16 columns) comes in ``parts``: each stage holds a part
(the layout ``rows`` is a part's), the producer copies a row's parts into
consecutive stages, and the consumers wait for all of them before the
body, which reads each part as often as it needs (``stage.load(part)``,
``stage.max()``, ``stage.sum(fn)``: one block reduction over every part)
and releases them all after it. The ring holds a row and a part of the
next (``parts + 1`` stages at least), so the next row's copy overlaps
this row's work.

A row longer than ``CLUSTER_ABOVE_BYTES`` (48 KiB) runs best split over a
cluster (:func:`row_cluster`: 2 or 4 CTAs, ``RowRing(..., cluster=c,
exchanges=e)`` in a kernel of ``cluster_dim=c``): each CTA takes its slice
of every row (rank ``r``: columns ``r * n / c`` on) through its own ring,
and each block reduction of a row is followed by an exchange
(:meth:`RowRing.exchange`): one thread writes the CTA's value to its own
slot and sends it to the other CTAs' slots with ``st.async`` (4 bytes,
completing on their barrier), every thread waits for the others' bytes
and folds the slots in rank order, so every CTA gets the same bits. A
barrier and slots per row parity let a CTA run a row ahead of the others.
The protocol checker does not model these hand-driven barriers (the
pipeline's are checked as before); the simulator does (``sim/rawbar.py``:
the st.async bytes complete on the peers' barriers, and the exchange
simulates clean on clusters of 2 and 4); the GPU suite checks the values. The grid is whole clusters (``rows_host.grid_for``: at most
``cuOccupancyMaxActiveClusters``).

``store="bulk"`` (measured, off by default): the consumers write a row's
output over the row in its stage (each thread its own values), fence it
for the async proxy and release; the producer bulk-copies the stage out
(``cp.async.bulk.global.shared::cta``, waited until read) before it
reloads it, and the last stages after its tail. The simulator checks the
in-place writes byte by byte against the other warps' reads of the stage
and the load into the stage against the store out (its wait), and passes it.

Both loops visit the rows ``blockIdx.x, blockIdx.x + gridDim.x, ...``
below ``m`` (:meth:`Rows.grid_stride`'s order for a CTA per row). The
consumers' block reductions synchronise on a named barrier of their
threads only (``bar.sync id, threads``), not ``bar.sync 0``: the producer
warp is elsewhere in its loop. A row must be a multiple of 16 bytes (the
bulk copy's granule; every row then starts aligned): :func:`row_stages`
returns 0 for one that is not, or whose ring does not fit.
"""

import contextlib
import warnings

import mlir.ir as ir
from mlir.dialects import arith, llvm

from ..user_location import UserLine, user_line
from .rows import (ACCESS_BYTES, CTA_THREADS, MAX_THREADS, MAX_VALUES, WARP, Rows, _bytes,
                   _kernel, row_threads)

# Shared memory a CTA's ring takes, at most: two rings per SM (228 KiB,
# 227 KiB to one CTA) while two rows fit, so that a second CTA's
# reductions overlap this one's; longer rows take one CTA per SM with at
# most MAX_RING bytes.
RING_BYTES = 96 * 1024
MAX_RING = 200 * 1024
MAX_STAGES = 4
# Row bytes from which a CTA per row takes its rows through a ring. On an
# H200 (benchmarks/rows/bench_rows.py --alt, bf16, fraction of a copy's
# bandwidth) the ring lifted the softmax of 8192 to 32768 columns from
# 0.65-0.90 (rows in registers) to 0.85-0.93 and the RMSNorm of 16384 to
# 24576 from 0.72-0.83 to 0.88-0.92 (32768: 0.88 either way); on rows of
# 4096 and 5120 columns (8 and 10 KiB), where several CTAs per SM hold a
# row each in registers, it was slower (softmax 0.84-0.86 against
# 0.87-0.92).
RING_FROM_BYTES = 16 * 1024


# Rows longer than CLUSTER_ABOVE_BYTES are split over a cluster of CTAs,
# each taking its slice of every row through its own ring (at most
# SLICE_BYTES: the fewest CTAs, 2 or 4, that get there), the row's max and
# sum combined through distributed shared memory. On an H200
# (benchmarks/rows/bench_rows.py --alt, bf16 softmax, fraction of a
# copy's bandwidth; benchmarks/rows/results/h200-run4) a CTA with its
# whole row in the ring ran at 0.89-0.93 for 16 KiB to 40 KB rows but at
# 0.83-0.87 for 48 KiB to 128 KiB rows; over clusters 64 KiB rows ran at
# 0.90-0.92 (two CTAs, 32 KiB slices), 80 KB rows at 0.90-0.91 (two), 128
# KiB rows at 0.87-0.88 (four; two: 0.85-0.86). The 48 KiB rows over two
# ran at 0.87 and 0.90 in two processes: not enough to move the line.
CLUSTER_ABOVE_BYTES = 48 * 1024
SLICE_BYTES = 40 * 1024
CLUSTER_SIZES = (2, 4)


def row_cluster(n, dtype="bf16"):
    """CTAs of the cluster a row of ``n`` elements is split over: 1 up to
    ``CLUSTER_ABOVE_BYTES``, else the fewest of ``CLUSTER_SIZES`` whose
    slices (``n / cluster`` elements) are at most ``SLICE_BYTES``, whole
    16-byte vectors, and take a ring of whole slices (``row_plan``); 1
    when none does (the row stays in one CTA, in parts)."""
    eb = _bytes(dtype, "row_cluster")
    if n * eb <= CLUSTER_ABOVE_BYTES:
        return 1
    for c in CLUSTER_SIZES:
        if n % c or (n // c) * eb > SLICE_BYTES or (n // c) * eb % ACCESS_BYTES:
            continue
        _, parts, stages = row_plan(n // c, dtype)
        if parts == 1 and stages:
            return c
    return 1


def row_parts(n, dtype="bf16"):
    """Parts a row of ``n`` elements is staged in: the fewest (a power of
    two) whose part ``CTA_THREADS`` threads hold with at most
    ``MAX_VALUES`` values each (1 up to 32768 bf16 columns), of whole
    16-byte vectors, with the ring (the row's parts and one more) in at
    most ``MAX_RING`` bytes; 0 when there is none: such a row stays in
    registers. A row in parts is resident whole while it is worked on.
    Not more parts to fit two rings per SM: on an H200 the softmax of
    32768 columns in two parts over a three-stage ring (two CTAs per SM,
    each with half a row in flight while it works) ran at 0.77 of a
    copy's bandwidth, in one part over three stages (one CTA, two rows in
    flight) at 0.86-0.89 (benchmarks/rows/bench_rows.py --alt)."""
    eb = _bytes(dtype, "row_parts")
    vec = ACCESS_BYTES // eb
    parts = 1
    while n > parts * CTA_THREADS * MAX_VALUES:
        parts *= 2
    if parts > 1 and n % (parts * vec):
        return 0
    return parts if row_stages(n, dtype, parts) else 0


def row_stages(n, dtype="bf16", parts=1, most=None, ring=None):
    """Stages of the ring for rows of ``n`` elements of ``dtype`` in
    ``parts`` parts: as many parts as fit ``RING_BYTES`` (up to
    ``MAX_STAGES``, or ``most``), or as fit ``MAX_RING`` when fewer than a
    row's parts and one more (two whole rows for a row in one part) fit
    that; 0 when a part is not a multiple of 16 bytes or they do not fit.
    ``ring``: only that many bytes."""
    part = n // parts * _bytes(dtype, "row_stages")
    if part % ACCESS_BYTES or n % parts:
        return 0
    least = parts + 1
    cap = max(MAX_STAGES if most is None else most, least)
    for budget in ((ring,) if ring else (RING_BYTES, MAX_RING)):
        stages = min(cap, budget // part)
        if stages >= least:
            return stages
    return 0


def ring_stages(rows, parts=1, most=None):
    """Stages of the ring a kernel on ``rows`` (a :class:`Rows`, a part's
    layout when ``parts > 1``) takes its rows through: ``row_stages`` for
    a CTA per row of at least ``RING_FROM_BYTES`` whose threads leave room
    for the producer warp (at most 992), else 0 (each row loaded straight
    into registers: a warp per row has several rows per CTA in flight)."""
    if rows.per_warp or rows.n * parts * rows.elem_bytes < RING_FROM_BYTES or \
            RowRing.block_threads(rows) > MAX_THREADS:
        return 0
    return row_stages(rows.n * parts, rows.dtype, parts, most)


def part_layout(n, dtype="bf16", threads=None, parts=None):
    """``(Rows of one part, parts)`` for rows of ``n`` elements: the whole
    row (``parts`` 1) while it fits a CTA's registers, else a part of it
    (:func:`row_parts`); ``threads`` per row defaults to ``row_threads``
    of the part; ``parts`` overrides the rule."""
    parts = parts or row_parts(n, dtype) or 1
    part = n // parts
    return Rows(part, dtype, threads=threads or row_threads(part, dtype)), parts


def row_plan(n, dtype="bf16", threads=None, stages=None, most=None, parts=None):
    """``(rows, parts, stages)`` of a row kernel for rows of ``n``
    elements: the layout of a part (:func:`part_layout`), and the ring's
    stages (``ring_stages``, at most ``most``; 0: no ring). A row in parts
    needs the ring: where none fits (or ``stages=0``), the whole row in
    registers. ``parts`` overrides :func:`row_parts`."""
    rows, parts = part_layout(n, dtype, threads, parts)
    if stages is None:
        stages = ring_stages(rows, parts, most)
    if parts > 1 and not stages:
        rows, parts = Rows(n, dtype, threads=threads or row_threads(n, dtype)), 1
    return rows, parts, stages


@contextlib.contextmanager
def _unmodelled():
    """The cluster exchange's barriers are driven by hand: the protocol
    checker does not model them (an UncheckedBarrierWarning would say so
    at the user's line; the simulator follows them, sim/rawbar.py). This module
    owns them and keeps their protocol to one line of reasoning
    (:meth:`RowRing.exchange`: one arrive and ``cluster - 1`` four-byte
    copies per phase, a barrier per row parity); test/python/test_row_ring.py
    pins the instructions and the GPU suite checks the values."""
    from ..pipeline.errors import UncheckedBarrierWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UncheckedBarrierWarning)
        yield


class RowRing:
    """A ring of ``stages`` rows (or parts of rows) of ``rows`` in shared
    memory, its ``PipelineTmaAsync`` (one producer thread, one release per
    consumer warp) and the consumers' named barrier (see the module
    docstring). Create it inside ``with k:`` before the roles' branches: it
    allocates the ring and the barriers and initialises the pipeline. The
    kernel's block is ``rows.threads`` consumer threads (warps ``0 ..``)
    and one producer warp after them."""

    PRODUCER_WARPS = 1

    STORES = ("global", "bulk")

    @user_line
    def __init__(self, rows, k, stages=None, parts=1, name="row ring", store="global",
                 cluster=1, exchanges=0):
        from ..pipeline import (Agent, CooperativeGroup, NamedBarrier,
                                PipelineTmaAsync)

        if store not in self.STORES:
            raise ValueError(f"RowRing: store must be one of {self.STORES}, got {store!r}")
        self.store_kind = store
        if not isinstance(cluster, int) or cluster < 1 or cluster > 8 or \
                tuple(k.cluster_dim or (1, 1, 1)) != (cluster, 1, 1):
            raise ValueError(f"RowRing: cluster={cluster!r}: a row split over a cluster of "
                             f"1..8 CTAs (each a slice of each row) needs the kernel's "
                             f"cluster_dim=({cluster}, 1, 1); the kernel has "
                             f"cluster_dim={k.cluster_dim}")
        self.cluster = cluster

        if not isinstance(rows, Rows) or rows.per_warp:
            raise ValueError(f"RowRing: stages whole rows of a CTA per row, got {rows!r}; "
                             "a warp per row holds its row in registers (Rows alone)")
        self.layout, self.k, self.parts = rows, k, parts
        self.part_bytes = rows.n * rows.elem_bytes
        n = rows.n * parts
        fit = row_stages(n, rows.dtype, parts)
        stages = stages if stages is not None else fit
        if self.part_bytes % ACCESS_BYTES or not isinstance(stages, int) or \
                stages < parts + (parts > 1) or stages * self.part_bytes > MAX_RING or \
                self.block_threads(rows) > MAX_THREADS:
            raise ValueError(
                f"RowRing: {stages!r} stages of {parts} part(s) of {rows.n} {rows.dtype} "
                f"({self.part_bytes} bytes): a part must be a multiple of {ACCESS_BYTES} "
                f"bytes (the bulk copy's granule), the ring hold a row and a part more "
                f"and at most {MAX_RING} bytes, and the row's threads be at most "
                f"{MAX_THREADS - WARP} (a producer warp joins them); row_stages({n}, "
                f"{rows.dtype!r}, {parts}) = {fit} (0: keep such rows in registers, "
                "Rows.load)")
        self.stages = stages
        self.consumer_warps = rows.threads // WARP
        threads = k.block_dim[0] * k.block_dim[1] * k.block_dim[2]
        if threads != self.block_threads(rows):
            raise ValueError(
                f"RowRing: kernel {k.name!r} has {threads} threads; a ring of rows over "
                f"{rows.threads} threads needs block_dim={self.block_threads(rows)} "
                f"({rows.threads} consumers and a producer warp)")
        barriers = k.alloc_barriers(2 * stages, name=f"{name} barriers")
        self.buffer = k.smem_alloc(stages * self.part_bytes, align=128, name=name)
        self.pipe = PipelineTmaAsync.create(
            num_stages=stages, producer_group=CooperativeGroup(Agent.Thread, 1),
            consumer_group=CooperativeGroup(Agent.Thread, self.consumer_warps),
            tx_count=self.part_bytes, barrier_storage=barriers, name=name)
        # The consumers' reductions: their threads only.
        self.reductions = NamedBarrier(num_threads=rows.threads)
        rows._rings[k] = self
        self.exchanges, self._site, self._j = 0, 0, None
        if cluster > 1:
            self._cluster_init(exchanges, name)

    def _cluster_init(self, exchanges, name):
        """A row split over the cluster: per reduction of a row (``exchanges``
        of them) and per row parity, one f32 slot per CTA and an mbarrier
        that completes when the other CTAs' values landed (``st.async``,
        4 bytes each); initialised, fenced and made visible to the cluster
        (``barrier.cluster``) before any CTA sends."""
        from mlir.dialects import nvvm

        from ..pipeline import Agent, CooperativeGroup
        from ..pipeline.agent import PipelineOp
        from ..pipeline.mbarrier import MbarrierArray

        k = self.k
        if not isinstance(exchanges, int) or exchanges < 1:
            raise ValueError(f"RowRing: a row split over a cluster needs exchanges >= 1 (its "
                             f"reductions per row), got {exchanges!r}")
        self.exchanges = exchanges
        self.slots = k.smem_alloc(4 * self.cluster * 2 * exchanges, align=16,
                                  name=f"{name} cluster slots")
        bars = k.alloc_barriers(2 * exchanges, name=f"{name} cluster barriers")
        with _unmodelled():
            self.xbar = MbarrierArray(bars, 2 * exchanges,
                                      (PipelineOp.AsyncThread, CooperativeGroup(Agent.Thread, 1)))
        nvvm.fence_mbarrier_init()
        k.cluster_sync()

    @user_line
    def cluster_end(self):
        """After the roles' branches, every thread: no CTA of the cluster
        leaves while another may still send to it."""
        if self.cluster > 1:
            self.k.cluster_sync()

    def _rank(self):
        return self.k.cluster_cta_rank()

    @user_line
    def exchange(self, value, fn):
        """The row's ``fn`` over the cluster's CTAs of ``value`` (this CTA's
        block-reduced f32, the same in every consumer thread): one thread
        sends it to every other CTA's slot (``st.async``, completing on that
        CTA's barrier) and arms this CTA's barrier for theirs; every thread
        waits, reads the slots and combines them in rank order (every CTA
        gets the same bits)."""
        from mlir.dialects import nvvm

        from .memory import load as _load
        from .memory import store as _store
        from .values import to_value

        k, c = self.k, self.cluster
        site = self._site
        if site >= self.exchanges:
            raise ValueError(f"RowRing: {site + 1} reductions per row over the cluster; the "
                             f"ring was built for exchanges={self.exchanges}")
        self._site += 1
        j = self._j
        idx = (j % 2) * self.exchanges + site
        phase = (j // 2) % 2
        rank = self._rank()
        slots = self.slots + idx * (4 * c)
        bar = self.xbar.get_barrier(idx)
        i32t = ir.IntegerType.get_signless(32)
        f = to_value(value)

        def remote(p, peer):
            """``p`` (this CTA's shared memory) in CTA ``peer``'s window of
            the cluster, as st.async's 32-bit shared::cluster address."""
            return llvm.ptrtoint(i32t, nvvm.mapa(llvm.PointerType.get(7), to_value(p),
                                                 to_value(peer)))

        mine = slots + rank * 4
        with k.if_(k.linear_thread_idx() == 0):
            # its own slot (ordered before the waiters' reads by the arrive's
            # release), the barrier armed for the others' bytes, then theirs
            _store(f, mine, 0)
            with _unmodelled():
                self.xbar.arrive_and_expect_tx(idx, 4 * (c - 1))
            for d in range(1, c):
                peer = (rank + d) % c
                # st.async has no NVVM op: the one asm line of the exchange
                llvm.inline_asm(
                    None, [remote(mine, peer), remote(bar, peer), f],
                    "st.async.shared::cluster.mbarrier::complete_tx::bytes.f32 [$0], $2, [$1];",
                    "r,r,f", has_side_effects=True)
        with _unmodelled():
            self.xbar.wait(idx, phase)
        vals = [_load(slots, f.type, r) for r in range(c)]     # rank order: the same bits
        out = vals[0]
        for v in vals[1:]:
            out = fn(out, v)
        return out

    @property
    def row_bytes(self):
        return self.part_bytes * self.parts * self.cluster

    @property
    def row_elems(self):
        """Elements of a whole row (every part, every CTA of the cluster)."""
        return self.layout.n * self.parts * self.cluster

    def _slice(self, p):
        """``p`` (a global pointer to a row's start) moved to this CTA's slice
        of the row (a cluster's)."""
        if self.cluster == 1:
            return p
        off = self._rank().to(64) * (self.parts * self.part_bytes)
        return llvm.getelementptr(p.type, p, [off.ir_value], [-2147483648],
                                  ir.IntegerType.get_signless(8), 0)

    @classmethod
    def block_threads(cls, rows):
        """The block of a ring kernel on ``rows``: its threads and the producer."""
        return rows.threads + WARP * cls.PRODUCER_WARPS

    @property
    def bulk_store(self):
        """Whether rows leave through their stage (see :meth:`produce`)."""
        return self.store_kind != "global"

    def _span(self, m):
        """``(first, stop, step)`` of this CTA's rows: ``blockIdx.x, +
        gridDim.x, ...`` below ``m``, or with a cluster the cluster's rows
        (``clusterIdx, + clusters, ...``), each CTA its slice of them."""
        k = self.k
        b, g = k.block_idx(), k.grid_dim()
        if self.cluster > 1:
            return b // self.cluster, m, g // self.cluster
        return b, m, g

    def _loop(self, m, carry):
        first, stop, step = self._span(m)
        return self.k.range(first, stop, step, carry=carry)

    def _store_stage(self, dst, row, part, index):
        """One lane: the bulk store of stage ``index`` (part ``part`` of row
        ``row``, written there by the consumers) to ``dst``, and its wait
        until the copy has read the stage."""
        from mlir.dialects import nvvm

        from ..pipeline import TmaStoreFence
        from .values import Scalar, to_value

        rows = self.layout
        base = to_value(dst, what="RowRing.produce: dst")
        part = part if isinstance(part, int) else Scalar(to_value(part)).to(64)
        off = row.to(64) * (self.row_elems * rows.elem_bytes) + part * self.part_bytes
        at = self._slice(llvm.getelementptr(base.type, base, [off.ir_value], [-2147483648],
                                            ir.IntegerType.get_signless(8), 0))
        stage = self.buffer.stage(index, self.part_bytes)
        size = arith.constant(ir.IntegerType.get_signless(32), self.part_bytes)
        nvvm.cp_async_bulk_global_shared_cta(at, to_value(stage), size)
        TmaStoreFence(num_stages=1).arrive_and_wait()     # commit; wait_group.read 0

    @user_line
    def produce(self, src, m, ld=None, dst=None):
        """The producer warp: for each of this CTA's rows of the tensor at
        ``src`` (rows ``ld`` elements apart, default the row's length; a
        multiple of 16 bytes keeps each row aligned), acquire a stage per
        part and bulk-copy the part into it (one elected lane); wait at the
        end until the consumers released every stage."""
        from ..pipeline import PipelineUserType, make_pipeline_state
        from .values import Scalar, to_value

        k, rows, pipe = self.k, self.layout, self.pipe
        eb = rows.elem_bytes
        if self.bulk_store and dst is None:
            raise ValueError("RowRing.produce: a ring whose rows leave through their stage "
                             f"(store={self.store_kind!r}) needs dst, the output's pointer")
        with k.if_(k.warp_idx() == self.consumer_warps):
            state = make_pipeline_state(PipelineUserType.Producer, self.stages)
            first, _, step = self._span(m)
            for row, _ in self._loop(m, [state]):
                ld64 = self.row_elems if ld is None else \
                    (ld.to(64) if isinstance(ld, Scalar) else ld)
                base = to_value(src, what="RowRing.produce: src")
                off = row.to(64) * ld64 * eb
                at = self._slice(llvm.getelementptr(base.type, base, [off.ir_value],
                                                    [-2147483648],
                                                    ir.IntegerType.get_signless(8), 0))
                for part in range(self.parts):
                    pipe.producer_acquire(state)
                    if self.bulk_store:
                        # the stage's last part (``stages`` acquisitions ago) out first
                        back, was = divmod(part - self.stages, self.parts)
                        prev = row + back * step
                        with k.if_(prev >= first):
                            with k.elect_one():
                                self._store_stage(dst, prev, was, state.index)
                    with k.elect_one():
                        pipe.bulk_copy(state, Rows._at(at, part * self.part_bytes),
                                       self.buffer.stage(state.index, self.part_bytes),
                                       self.part_bytes)
                    pipe.producer_commit(state)
                    state.advance()
            pipe.producer_tail(state)
            if self.bulk_store:
                self._store_tail(dst, m, first, step)

    def _store_tail(self, dst, m, first, step):
        """After ``producer_tail`` (every stage released): the last
        ``stages`` parts this CTA loaded, still in their stages, out."""
        k = self.k
        _, stop, _ = self._span(m)
        count = ((stop - first + step - 1) // step).max(0)
        acquired = count * self.parts
        for i in range(self.stages):
            a = acquired - self.stages + i
            with k.if_(a >= 0):
                with k.elect_one():
                    self._store_stage(dst, first + (a // self.parts) * step, a % self.parts,
                                      a % self.stages)

    @user_line
    def consumers(self):
        """``with ring.consumers():`` the branch of the row's threads (warps
        below the producer's). Load per-column vectors (``rows.load_columns``)
        here, before :meth:`rows`."""
        k = self.k
        return k.if_(k.warp_idx() < self.consumer_warps)

    def _fence(self):
        if self.bulk_store:              # the row's output, written to the stage, -> TMA
            from .memory import fence_view_async_shared
            fence_view_async_shared()

    def rows(self, m):
        """``for row, stage in ring.rows(m):`` this CTA's rows, in the
        producer's order, each once every part's copy has landed (a
        :class:`RowStage`: ``stage.load(part)`` reads this thread's values
        of a part out of shared memory, as often as the body likes). The
        stages are released when the body ends. Inside :meth:`consumers`."""
        from ..pipeline import PipelineUserType, make_pipeline_state

        # The ops between the yields get the user's line of the ``for``
        # (UserLine per stretch: a location entered across a yield would
        # leave the context stack unbalanced against the loops' own).
        k, rows, pipe = _kernel("RowRing.rows"), self.layout, self.pipe
        with UserLine():
            state = make_pipeline_state(PipelineUserType.Consumer, self.stages)
            first, _, step = self._span(m)
        if self.parts == 1:
            with UserLine():
                t = rows.thread(k)
                loop = self._loop(m, [state])
            for row, _ in loop:
                with UserLine():
                    self._site = 0
                    self._j = (row - first) // step if self.cluster > 1 else None
                    pipe.consumer_wait(state)
                    stage = RowStage(self, [self.buffer.stage(state.index, self.part_bytes)], t)
                yield row, stage
                with UserLine():
                    self._fence()
                    pipe.consumer_release(state)
                    state.advance()
            return
        # Parts: wait for each (``state``), release each after the body
        # (``release``, the same stages one row behind).
        with UserLine():
            release = make_pipeline_state(PipelineUserType.Consumer, self.stages)
            t = rows.thread(k)
            loop = self._loop(m, [state, release])
        for row, _ in loop:
            with UserLine():
                self._site = 0
                self._j = (row - first) // step if self.cluster > 1 else None
                buffers = []
                for _ in range(self.parts):
                    pipe.consumer_wait(state)
                    buffers.append(self.buffer.stage(state.index, self.part_bytes))
                    state.advance()
            yield row, RowStage(self, buffers, t)
            with UserLine():
                self._fence()
                for _ in range(self.parts):
                    pipe.consumer_release(release)
                    release.advance()


class RowStage:
    """A row in the stages of a :class:`RowRing`, between the consumers'
    waits and their releases: ``parts`` parts of ``rows.n`` elements."""

    def __init__(self, ring, buffers, thread):
        self.ring, self.rows, self.buffers, self._t = ring, ring.layout, buffers, thread
        self.parts = len(buffers)

    @user_line
    def load(self, part=0, fill=0.0):
        """This thread's values of ``part`` of the row (:class:`RowValues`,
        f32), read from shared memory (``ld.shared.v4``); past the row's end
        ``fill`` (the reductions skip those values whatever they hold).
        Each call reads again: a value used on both sides of a reduction
        can be read twice instead of living in registers across it."""
        return self.rows._load_at(self.buffers[part], 0, None, fill, self.rows.dtype, self._t)

    @user_line
    def store(self, values, dst, row, part=0):
        """``values`` (of ``part``) into row ``row`` of the tensor at ``dst``
        (rows ``rows.n * parts`` elements apart), as :meth:`Rows.store`; in
        a ring whose rows leave through their stage, into the stage (over
        the row, each thread its own values), which the producer then
        bulk-copies to ``dst``."""
        from .values import to_value

        if self.ring.bulk_store:
            self.rows.store(values, self.buffers[part], 0)
            return
        base = to_value(dst, what="RowStage.store: dst")
        at = Rows._at(self.ring._slice(base), part * self.ring.part_bytes)
        self.rows.store(values, at, row, ld=self.ring.row_elems)

    def _reduce(self, kind, fn, fill):
        combine = {"sum": arith.addf, "max": arith.maxnumf, "min": arith.minnumf}[kind]
        local = None
        for part in range(self.parts):
            x = self.load(part, fill)
            if fn is not None:
                x = fn(x)
            v = x._local(kind, combine)
            local = v if local is None else combine(local, v)
        return self.rows.allreduce(local, combine)

    @user_line
    def sum(self, fn=None, fill=0.0):
        """The row's sum of ``fn(part values)`` over every part (one block
        reduction): ``stage.sum(lambda x: x * x)``."""
        return self._reduce("sum", fn, fill)

    @user_line
    def max_sum_exp2(self, scale):
        """The row's softmax statistics ``(M, S)`` over every part in one
        pass over shared memory (``RowValues.max_sum_exp2`` per part, then
        ``Rows.max_sum_exp2``): ``M`` the maximum, ``S`` the sum of
        ``exp2((x - M) * scale)``."""
        running = None
        for part in range(self.parts):
            running = self.load(part, float("-inf")).max_sum_exp2(scale, running)
        return self.rows.max_sum_exp2(*running, scale)

    @user_line
    def max(self, fn=None, fill=float("-inf")):
        """The row's maximum (of ``fn`` of its values) over every part."""
        return self._reduce("max", fn, fill)

