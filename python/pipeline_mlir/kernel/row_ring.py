"""Rows staged through shared memory: a TMA ring of whole rows.

A :class:`Rows` kernel with a CTA per row keeps the row in registers from
its load to its store, so a CTA has one row's loads in flight and then
none while it reduces and stores. Past a few thousand columns few CTAs fit
per SM, and their phases no longer hide each other (an H200 ran the bf16
softmax of 32768 columns at 0.70-0.76 of a device-to-device copy's
bandwidth that way). A :class:`RowRing` keeps the memory busy with a
pipeline instead: one producer warp bulk-copies (``cp.async.bulk``, one
per row) the CTA's next rows into a ``PipelineTmaAsync`` ring of
``stages`` row buffers while the row's threads (the consumers) reduce and
store the current one. A consumer reads its values of the row out of the
stage in the :class:`Rows` layout (``ld.shared.v4``), as often as it
likes (a value needed on both sides of a reduction can be read twice
rather than held in registers across it), and releases the stage when
the row is stored; the ring's other stages are being filled meanwhile.

::

    rows = Rows(n, "bf16", threads=row_threads(n))
    k = Kernel(..., block_dim=rows.threads + 32, ...)    # consumers + the producer warp
    with k:
        src, dst, m = k.args
        ring = RowRing(rows, k)          # ring, barriers, pipeline: before the roles
        ring.produce(src, m)             # the producer warp's loop
        with ring.consumers():           # the row's threads
            for row, stage in ring.rows(m):
                x = stage.load(fill=float("-inf"))     # ld.shared, this thread's values
                ...
                rows.store(y, dst, row)

Both loops visit the rows ``blockIdx.x, blockIdx.x + gridDim.x, ...``
below ``m`` (:meth:`Rows.grid_stride`'s order for a CTA per row). The
consumers' block reductions synchronise on a named barrier of their
threads only (``bar.sync id, threads``), not ``bar.sync 0``: the producer
warp is elsewhere in its loop. A row must be a multiple of 16 bytes (the
bulk copy's granule; every row then starts aligned): :func:`row_stages`
returns 0 for one that is not, or that no two stages hold.
"""

import mlir.ir as ir
from mlir.dialects import llvm

from .rows import ACCESS_BYTES, MAX_THREADS, WARP, Rows, _bytes, _kernel

# Shared memory a CTA's ring takes, at most: two rings per SM (228 KiB,
# 227 KiB to one CTA) while a row is at most a third of this, so that a
# second CTA's reductions overlap this one's; longer rows take one CTA per
# SM with at most MAX_RING bytes.
RING_BYTES = 96 * 1024
MAX_RING = 200 * 1024
MAX_STAGES = 4
# Row bytes from which a CTA per row takes its rows through a ring. On an
# H200 (benchmarks/rows/bench_rows.py --alt, bf16, fraction of a copy's
# bandwidth) the ring lifted the softmax of 8192 to 32768 columns from
# 0.77-0.87 to 0.89-0.93 and the RMSNorm of 20000 to 32768 from 0.81-0.88
# to 0.88-0.90; on rows of 4096 and 5120 columns (8 and 10 KiB), where
# several CTAs per SM hold a row each in registers, it was slower (softmax
# 0.85 against 0.88-0.92).
RING_FROM_BYTES = 16 * 1024


def row_stages(n, dtype="bf16"):
    """Stages of the ring for rows of ``n`` elements of ``dtype``: as many
    whole rows as fit ``RING_BYTES`` (up to ``MAX_STAGES``), or as fit
    ``MAX_RING`` when fewer than two fit that; 0 when the row is not a
    multiple of 16 bytes or two rows do not fit (stage it in registers)."""
    row = n * _bytes(dtype, "row_stages")
    if row % ACCESS_BYTES:
        return 0
    stages = min(MAX_STAGES, RING_BYTES // row)
    if stages < 2:
        stages = min(MAX_STAGES, MAX_RING // row)
    return stages if stages >= 2 else 0


def ring_stages(rows):
    """Stages of the ring a kernel on ``rows`` (a :class:`Rows`) takes its
    rows through: ``row_stages`` for a CTA per row of at least
    ``RING_FROM_BYTES`` whose threads leave room for the producer warp
    (at most 992), else 0 (each row loaded straight into registers: a warp
    per row has several rows per CTA in flight)."""
    if rows.per_warp or rows.n * rows.elem_bytes < RING_FROM_BYTES or \
            RowRing.block_threads(rows) > MAX_THREADS:
        return 0
    return row_stages(rows.n, rows.dtype)


class RowRing:
    """A ring of ``stages`` whole rows of ``rows`` in shared memory, its
    ``PipelineTmaAsync`` (one producer thread, one release per consumer
    warp) and the consumers' named barrier (see the module docstring).
    Create it inside ``with k:`` before the roles' branches: it allocates
    the ring and the barriers and initialises the pipeline. The kernel's
    block is ``rows.threads`` consumer threads (warps ``0 ..``) and one
    producer warp after them."""

    PRODUCER_WARPS = 1

    def __init__(self, rows, k, stages=None, name="row ring"):
        from ..pipeline import (Agent, CooperativeGroup, NamedBarrier,
                                PipelineTmaAsync)

        if not isinstance(rows, Rows) or rows.per_warp:
            raise ValueError(f"RowRing: stages whole rows of a CTA per row, got {rows!r}; "
                             "a warp per row holds its row in registers (Rows alone)")
        self.layout, self.k = rows, k
        self.row_bytes = rows.n * rows.elem_bytes
        fit = row_stages(rows.n, rows.dtype)
        stages = stages if stages is not None else fit
        if self.row_bytes % ACCESS_BYTES or not isinstance(stages, int) or stages < 1 or \
                stages * self.row_bytes > MAX_RING or self.block_threads(rows) > MAX_THREADS:
            raise ValueError(
                f"RowRing: {stages!r} stages of rows of {rows.n} {rows.dtype} "
                f"({self.row_bytes} bytes): a row must be a multiple of {ACCESS_BYTES} "
                f"bytes (the bulk copy's granule), the ring at most {MAX_RING} bytes and the "
                f"row's threads at most {MAX_THREADS - WARP} (a producer warp joins them); "
                f"row_stages({rows.n}, {rows.dtype!r}) = {fit} (0: keep such rows in "
                "registers, Rows.load)")
        self.stages = stages
        self.consumer_warps = rows.threads // WARP
        threads = k.block_dim[0] * k.block_dim[1] * k.block_dim[2]
        if threads != self.block_threads(rows):
            raise ValueError(
                f"RowRing: kernel {k.name!r} has {threads} threads; a ring of rows over "
                f"{rows.threads} threads needs block_dim={self.block_threads(rows)} "
                f"({rows.threads} consumers and a producer warp)")
        barriers = k.alloc_barriers(2 * stages, name=f"{name} barriers")
        self.buffer = k.smem_alloc(stages * self.row_bytes, align=128, name=name)
        self.pipe = PipelineTmaAsync.create(
            num_stages=stages, producer_group=CooperativeGroup(Agent.Thread, 1),
            consumer_group=CooperativeGroup(Agent.Thread, self.consumer_warps),
            tx_count=self.row_bytes, barrier_storage=barriers, name=name)
        # The consumers' reductions: their threads only.
        self.reductions = NamedBarrier(num_threads=rows.threads)
        rows._rings[k] = self

    @classmethod
    def block_threads(cls, rows):
        """The block of a ring kernel on ``rows``: its threads and the producer."""
        return rows.threads + WARP * cls.PRODUCER_WARPS

    def _loop(self, m, state):
        k = self.k
        return k.range(k.block_idx(), m, k.grid_dim(), carry=[state])

    def produce(self, src, m, ld=None):
        """The producer warp: for each of this CTA's rows of the tensor at
        ``src`` (rows ``ld`` elements apart, default ``n``; a multiple of 8
        bytes' worth keeps each row 16-byte aligned), acquire a stage and
        bulk-copy the row into it (one elected lane); wait at the end until
        the consumers released every stage."""
        from ..pipeline import PipelineUserType, make_pipeline_state
        from .values import Scalar, to_value

        k, rows, pipe = self.k, self.layout, self.pipe
        eb = rows.elem_bytes
        with k.if_(k.warp_idx() == self.consumer_warps):
            state = make_pipeline_state(PipelineUserType.Producer, self.stages)
            for row, _ in self._loop(m, state):
                pipe.producer_acquire(state)
                ld64 = rows.n if ld is None else (ld.to(64) if isinstance(ld, Scalar) else ld)
                base = to_value(src, what="RowRing.produce: src")
                off = row.to(64) * ld64 * eb
                at = llvm.getelementptr(base.type, base, [off.ir_value], [-2147483648],
                                        ir.IntegerType.get_signless(8), 0)
                with k.elect_one():
                    pipe.bulk_copy(state, at, self.buffer.stage(state.index, self.row_bytes),
                                   self.row_bytes)
                pipe.producer_commit(state)
                state.advance()
            pipe.producer_tail(state)

    def consumers(self):
        """``with ring.consumers():`` the branch of the row's threads (warps
        below the producer's). Load per-column vectors (``rows.load_columns``)
        here, before :meth:`rows`."""
        k = self.k
        return k.if_(k.warp_idx() < self.consumer_warps)

    def rows(self, m):
        """``for row, stage in ring.rows(m):`` this CTA's rows, in the
        producer's order, each once its copy has landed in ``stage`` (a
        :class:`RowStage`: ``stage.load()`` reads this thread's values of
        the row out of shared memory, as often as the body likes). The
        stage is released when the body ends. Inside :meth:`consumers`."""
        from ..pipeline import PipelineUserType, make_pipeline_state

        k, rows, pipe = _kernel("RowRing.rows"), self.layout, self.pipe
        state = make_pipeline_state(PipelineUserType.Consumer, self.stages)
        t = rows.thread(k)
        for row, _ in self._loop(m, state):
            pipe.consumer_wait(state)
            yield row, RowStage(rows, self.buffer.stage(state.index, self.row_bytes), t)
            pipe.consumer_release(state)
            state.advance()


class RowStage:
    """A row in a stage of a :class:`RowRing`, between the consumers' wait
    and their release."""

    def __init__(self, rows, buffer, thread):
        self.rows, self.buffer, self._t = rows, buffer, thread

    def load(self, fill=0.0):
        """This thread's values of the row (:class:`RowValues`, f32), read
        from shared memory (``ld.shared.v4``); past the row's end ``fill``
        (the reductions skip those values whatever they hold). Each call
        reads again: a value used on both sides of a reduction can be read
        twice instead of living in registers across it."""
        return self.rows._load_at(self.buffer, 0, None, fill, self.rows.dtype, self._t)


def ring_of(rows, k):
    """The RowRing of ``rows`` in kernel ``k``, or None."""
    return rows._rings.get(k)

