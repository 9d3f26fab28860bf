"""The stream-K fix-up of the Hopper GEMM (``hopper_gemm``): what a unit
does with a tile it computed only part of the K blocks of.

Each contributor of a partial tile leaves its fp32 accumulator in a
workspace slot (``store_partial_slot``) and arrives on the tile's counter
(``kernel/arrival_counter.py``); the tile's sum is always taken in the
same K order, so the result is bitwise the same whichever CTA runs which
unit. Two ways to take it:

- the last contributor in K order (``stream_k_partial``): it waits for the
  others' arrivals, adds their slots to its own accumulator and stores C;
  the producer may prefetch those slots into L2 first
  (``prefetch_partials``, an experiment);
- every contributor a share (``stream_k_share``, on launches whose runs are
  one segment each): all of them store, arrive and wait for all, then each
  sums its ``share_range`` of the tile over every slot and stores that
  share of C.

The schedule (``kernel/tile_scheduler.StreamKSchedule``) puts a CTA's
segments last first, so a waiting unit is its CTA's last and the slots it
needs are first in theirs: the waits cannot deadlock.
"""

import mlir.ir as ir
from mlir.dialects import arith, llvm, nvvm

from pipeline_mlir.chip_limits import THREADS_PER_WARP
from pipeline_mlir.kernel import arrival_counter, epilogue, wgmma
from pipeline_mlir.kernel.fragment import Fragment
from pipeline_mlir.kernel.values import Scalar, i32
from pipeline_mlir.kernel.warpgroup import THREADS_PER_WARPGROUP
from pipeline_mlir.kernels.streamk_timeline import Timeline, event
from pipeline_mlir.layout import DTYPES


def own_index(cfg, x, rank):
    """This CTA's workspace slot or stream-K tile of a unit's ``x``: with a
    cluster (a pair along M or N, or 2x2: ``cfg.cluster_size`` CTAs a
    unit) each CTA ``rank`` has its own, ``x * cluster + rank``; the host
    sizes the workspace and counters for ``2 x`` the grid's CTAs
    (ops/streamk_host.py)."""
    cluster = cfg.cluster_size
    return x * cluster + rank if cluster > 1 else x


def prefetch_partials(k, cfg, sched, part_of, ends_tile, ws, rank):
    """Stream-K, in the producer after a unit's last loads: if the unit
    ends a partial tile, one lane asks L2 for the other contributors'
    partials of it (``cp.async.bulk.prefetch.L2``, one per slot). A hint
    only: the data may not be final yet (L2 is where the other CTAs' stores
    land, so a line fetched early is updated, not stale); the consumers
    still read them after their wait (``stream_k_partial``)."""
    _, partial, _, sk_tile = part_of
    slot_bytes = cfg.block_m * cfg.block_n * 4
    with k.if_(partial & ends_tile):
        with k.elect_one():
            first, last = sched.contributors(sk_tile)
            for c, _ in k.range(first, last):
                slot = own_index(cfg, sched.slot_of(c, sk_tile), rank)
                nvvm.cp_async_bulk_prefetch(_slot_ptr(ws, slot.to(64) * slot_bytes),
                                            arith.constant(ir.IntegerType.get_signless(32),
                                                           slot_bytes))


def stream_k_partial(k, cfg, sched, part_of, ends_tile, whole, stream_args, cw, warp_in_wg,
                     lane, rank=None, times=None):
    """The stream-K side of a unit (``sched`` its ``StreamKSchedule``,
    ``part_of`` = (K blocks, partial, slot, stream-K tile), ``ends_tile``
    whether its K blocks reach the tile's last, ``whole`` the accumulator
    struct), per consumer warp. Returns ``(fragment, stores)``: whether the
    unit stores C (a whole tile, or the partial that ends its tile), and
    the fragment it stores.

    - A partial unit that does not end its tile stores its fp32 partial
      into this CTA's workspace slot and arrives at the warp's counter of
      the tile, and is done with it (its consumers go on to the next unit).
    - The partial unit that ends its tile (the tile's last contributor in
      K order, known from the schedule: no partial of its own to store)
      waits until the counter holds every other contributor's arrival,
      resets it, and adds their partials to its accumulator in K order
      (its own first, then the first contributor's: the same additions in
      the same order every run, so the same bits). The schedule makes the
      wait safe: it is the last unit of its CTA's run, and the partials it
      waits for are each the first unit of theirs, or a run's only one
      (``tile_scheduler.StreamKSchedule``: segments last first), so no
      contributor waits for a unit behind a wait.

    With a cluster the schedule's units are its tiles (a pair along M or
    N, or 2x2): each CTA (``rank``) has slots and counters of its own, and
    adds the partials of the same rank. ``times``: (the profiling build's Timeline, the
    unit), or None."""
    timeline, unit = times or (Timeline(k, None, cw, None), None)
    ws, counters = stream_args[:2]
    _, partial, slot, sk_tile = part_of

    def own(x):     # a unit's slot or stream-K tile -> this CTA's
        return own_index(cfg, x, rank)

    warps = 4 * cfg.consumer_warpgroups
    counter = own(sk_tile) * warps + cw * 4 + warp_in_wg
    first, last = sched.contributors(sk_tile)
    leaves = partial & ~ends_tile
    # Each branch reads the accumulator through a fragment of its own: a
    # Fragment caches the values it extracted, and values extracted inside
    # one branch do not exist in the other.
    with k.if_(leaves):
        store_partial_slot(Fragment(cfg.block_n, struct=whole), ws, own(slot), cfg, cw,
                           warp_in_wg, lane)
        timeline.stamp(unit, event("stored"))
        arrival_counter.warp_arrive(counters, counter, lane)
        timeline.stamp(unit, event("arrived"))
    total = Fragment(cfg.block_n, struct=whole)
    with k.if_(partial & ends_tile, carry=[total]):
        arrival_counter.wait_count(counters, counter, last - first, lane)
        timeline.stamp(unit, event("arrived"))
        arrival_counter.reset(counters, counter, lane)
        for c, _ in k.range(first, last, carry=[total]):
            total += load_partial_slot(ws, own(sched.slot_of(c, sk_tile)), cfg, cw,
                                       warp_in_wg, lane)
        timeline.stamp(unit, event("summed"))
    return total, ~leaves


SHARE_BATCH = 16      # contributors whose loads the shared fix-up issues together


def _min_scalar(a, b):
    return Scalar(arith.minsi(a.ir_value, b.ir_value))


def share_range(contributor, contributors, vectors):
    """The shared fix-up's share of contributor ``contributor`` (0 ..
    ``contributors`` - 1, in K order) of a warp's ``vectors`` 16-byte
    values: ``[j V / P, (j + 1) V / P)``, contiguous, in order, none
    overlapping, together all of them (ints or i32 Scalars)."""
    return (contributor * vectors // contributors,
            (contributor + 1) * vectors // contributors)


def stream_k_share(k, cfg, sched, part_of, whole, stream_args, cw, warp_in_wg, lane, c_ptr,
                   m, n, m_blk, n_blk, rank=None, times=None, sync=None):
    """The shared fix-up (``cfg.sk_share``), per consumer warp; returns
    whether the unit is partial (a whole tile is left to the TMA epilogue).
    Every run of the launch is one segment (the host's ``share`` launch),
    so a partial unit is its CTA's last and every contributor arrives
    before it waits: no wait is behind another.

    A partial unit stores its fp32 partial in its slot and arrives at the
    warp's counter of the tile; waits until the counter holds every
    contributor's arrival (``wait_at_least``: the departures below may
    have passed it); then, of the warp's region of a slot (``block_n / 8``
    groups of 32 lanes' 16 bytes), takes its share (``share_range`` by its
    index among the contributors), and for each 16 bytes of it sums the
    contributors' values in K order and stores the two rows' column pairs
    of C (bounded by ``m`` x ``n``); then arrives again: the warp that
    sees ``2 x contributors - 1`` arrivals before its own resets the
    counter (every contributor has passed its wait).

    With ``cfg.sk_one_arrival`` a warp arrives once: the one whose arrival
    completes the count resets the counter (``release_reset``) and sums at
    once; the others poll for the full count or the reset
    (``wait_full_or_reset``). The sums are the same, in the same order:
    the same bits as the two-arrival protocol's.

    With ``cfg.sk_wg_arrival`` too, one arrival a consumer warpgroup: its
    warps meet at ``sync`` (the warpgroup's epilogue barrier, indexed by
    ``cw``) after their partial stores, its first warp arrives on the
    warpgroup's counter (the first of its warps' counters) and resets or
    polls as above, and the warps meet again: the stores are ordered before
    that warp's release fence, its acquire before every warp's loads."""
    timeline, unit = times or (Timeline(k, None, cw, None), None)
    ws, counters = stream_args[:2]
    _, partial, slot, sk_tile = part_of

    def own(x):     # a unit's slot or stream-K tile -> this CTA's
        return own_index(cfg, x, rank)

    warps = 4 * cfg.consumer_warpgroups
    counter = own(sk_tile) * warps + cw * 4 + warp_in_wg
    first, last = sched.contributors(sk_tile)
    with k.if_(partial):
        contributors = last - first + 1
        store_partial_slot(Fragment(cfg.block_n, struct=whole), ws, own(slot), cfg, cw,
                           warp_in_wg, lane)
        timeline.stamp(unit, event("stored"))
        if cfg.sk_one_arrival and cfg.sk_wg_arrival:
            sync.arrive_and_wait_w_index(cw)
            with k.if_(warp_in_wg == 0):
                _arrive_once(k, counters, counter, contributors, lane)
            sync.arrive_and_wait_w_index(cw)
        elif cfg.sk_one_arrival:
            _arrive_once(k, counters, counter, contributors, lane)
        else:
            arrival_counter.warp_arrive(counters, counter, lane)
            arrival_counter.wait_at_least(counters, counter, contributors, lane)
        timeline.stamp(unit, event("arrived"))
        vectors = cfg.block_n // 8 * THREADS_PER_WARP
        lo, hi = share_range(sched.cta - first, contributors, vectors)
        if cfg.sk_share_vectors > 1:
            _sum_share_grouped(k, cfg, ws, own, first, last, lo, hi, cw, warp_in_wg, lane,
                               c_ptr, m, n, m_blk, n_blk)
        else:
            _sum_share(k, cfg, ws, own, first, last, lo, hi, cw, warp_in_wg, lane, c_ptr, m, n,
                       m_blk, n_blk)
        timeline.stamp(unit, event("summed"))
        if not cfg.sk_one_arrival:
            before = arrival_counter.warp_arrive(counters, counter, lane)
            with k.if_(before == 2 * contributors - 1):
                arrival_counter.reset(counters, counter, lane)
    return partial


def _arrive_once(k, counters, counter, contributors, lane):
    """One arrival (``sk_one_arrival``): the one that completes the count
    resets the counter; the others poll for the full count or the reset."""
    before = arrival_counter.warp_arrive(counters, counter, lane)
    completes = before == contributors - 1
    with k.if_(completes):
        arrival_counter.release_reset(counters, counter, lane)
    with k.if_(~completes):
        arrival_counter.wait_full_or_reset(counters, counter, contributors, lane)


def _sum_share(k, cfg, ws, own, first, last, lo, hi, cw, warp_in_wg, lane, c_ptr, m, n,
               m_blk, n_blk):
    """The shared fix-up's sums, one of the lane's vectors at a time: for
    each 16 bytes of the share ``[lo, hi)``, every contributor's value in
    K order, then C's column pairs (``_store_share_c``)."""
    for v, _ in k.range(lo + lane, hi, THREADS_PER_WARP, carry=[]):
        group, src = v // THREADS_PER_WARP, v % THREADS_PER_WARP
        # A one-segment run's partial is in its CTA's first slot (2 c);
        # SHARE_BATCH contributors' loads in flight at once (past the
        # last, the last's address again and no add), then the adds in K
        # order: every element's sum has the same order every run.
        _, here = _slot_address(ws, Scalar(arith.constant(i32(), 0)), cfg, cw, warp_in_wg,
                                src)
        here = here + group.to(64) * _GROUP_STRIDE
        slot_bytes = cfg.block_m * cfg.block_n * 4
        total = Fragment(8)
        for c0, _ in k.range(first, last + 1, SHARE_BATCH, carry=[total]):
            loaded = []
            for j in range(SHARE_BATCH):
                c = _min_scalar(c0 + j, last)
                loaded.append(_load_vector(ws, here + own(2 * c).to(64) * slot_bytes))
            for j in range(SHARE_BATCH):
                ok = c0 + j <= last
                summed = total + loaded[j]
                total.set(Fragment(8, values=[ok.select(Scalar(summed.value(e)),
                                                        Scalar(total.value(e)))
                                              for e in range(4)]))
        _store_share_c(k, cfg, total, group, src, c_ptr, m, n, m_blk, n_blk, cw, warp_in_wg)


SHARE_LOADS = 24     # 16-byte loads the grouped sums (sk_share_vectors) issue together


def _sum_share_grouped(k, cfg, ws, own, first, last, lo, hi, cw, warp_in_wg, lane, c_ptr, m,
                       n, m_blk, n_blk):
    """The shared fix-up's sums over ``U = cfg.sk_share_vectors`` of the
    lane's vectors at a time (``v, v + 32, ..``; past ``hi``, the share's
    last vector's address again and no store): ``SHARE_LOADS / U``
    contributors of each in flight together, so that a share of ``U``
    vectors a lane or fewer takes one round trip per ``SHARE_LOADS / U``
    contributors instead of one per vector (the loop above: the next
    vector's loads wait behind this one's C stores). Each vector's sum in
    K order from zero, as above: the same bits."""
    vecs = cfg.sk_share_vectors
    batch = SHARE_LOADS // vecs
    slot_bytes = cfg.block_m * cfg.block_n * 4
    for v0, _ in k.range(lo + lane, hi, THREADS_PER_WARP * vecs, carry=[]):
        places = []
        for u in range(vecs):
            v = _min_scalar(v0 + THREADS_PER_WARP * u, hi - 1)
            group, src = v // THREADS_PER_WARP, v % THREADS_PER_WARP
            _, here = _slot_address(ws, Scalar(arith.constant(i32(), 0)), cfg, cw, warp_in_wg,
                                    src)
            places.append((group, src, here + group.to(64) * _GROUP_STRIDE,
                           v0 + THREADS_PER_WARP * u < hi))
        totals = [Fragment(8) for _ in range(vecs)]
        for c0, _ in k.range(first, last + 1, batch, carry=totals):
            loaded = [[_load_vector(ws, here + own(2 * _min_scalar(c0 + j, last)).to(64)
                                    * slot_bytes) for j in range(batch)]
                      for _, _, here, _ in places]
            for u, total in enumerate(totals):
                for j in range(batch):
                    ok = c0 + j <= last
                    summed = total + loaded[u][j]
                    total.set(Fragment(8, values=[ok.select(Scalar(summed.value(e)),
                                                            Scalar(total.value(e)))
                                                  for e in range(4)]))
        for (group, src, _, inside), total in zip(places, totals):
            with k.if_(inside):
                _store_share_c(k, cfg, total, group, src, c_ptr, m, n, m_blk, n_blk, cw,
                               warp_in_wg)


def _store_share_c(k, cfg, total, group, src, c_ptr, m, n, m_blk, n_blk, cw, warp_in_wg):
    """C's two rows' column pairs of one summed 16-byte vector (lane
    ``src`` of ``group`` in a warp's slot region), bounded by ``m`` x ``n``."""
    out_t = epilogue._float_type(cfg.c_dtype)
    elem = DTYPES[cfg.c_dtype][0]
    pair_t = ir.VectorType.get([2], out_t)
    i32t = ir.IntegerType.get_signless(32)
    row = (m_blk * cfg.block_m + cw * wgmma.WarpgroupMma.M + warp_in_wg * 16
           + src // 4)
    col = n_blk * cfg.block_n + group * 8 + (src % 4) * 2
    for half in range(2):
        r = row + 8 * half
        pair = llvm.mlir_undef(pair_t)
        for e in range(2):
            pair = llvm.insertelement(pair, arith.truncf(out_t, total.value(2 * half + e)),
                                      arith.constant(i32t, e))
        with k.if_((r < m) & (col < n)):
            off = (r.to(64) * n.to(64) + col.to(64)) * elem
            llvm.store(pair, _slot_ptr(c_ptr, off))


def _load_vector(ws, offset):
    """A Fragment of n = 8 (one thread's four values) from 16 bytes at byte
    ``offset`` of ``ws``."""
    vec_t = ir.VectorType.get([4], ir.F32Type.get())
    i32t = ir.IntegerType.get_signless(32)
    v = llvm.load(vec_t, _slot_ptr(ws, offset), alignment=16)
    return Fragment(8, values=[llvm.extractelement(v, arith.constant(i32t, e))
                               for e in range(4)])


def _slot_address(ws, slot, cfg, cw, warp_in_wg, lane):
    """This thread's first 16 bytes in workspace slot ``slot``: a slot is one
    fp32 tile in the accumulators' own order (the thread's values 4 by 4,
    each group of a warpgroup's 128 threads 2 KiB apart), so a warp's store
    or load of one group is 512 contiguous bytes; a slot is only ever read
    by the thread of the same role in another CTA."""
    slot_bytes = cfg.block_m * cfg.block_n * 4
    wg_bytes = wgmma.WarpgroupMma.M * cfg.block_n * 4
    offset = (slot.to(64) * slot_bytes + cw.to(64) * wg_bytes
              + (warp_in_wg * 32 + lane).to(64) * 16)
    return ws, offset


def _slot_ptr(ws, offset):
    return llvm.getelementptr(ws.type, ws, [offset.ir_value], [-2147483648],
                              ir.IntegerType.get_signless(8), 0)


_GROUP_STRIDE = THREADS_PER_WARPGROUP * 16     # bytes between a thread's 4-value groups


def store_partial_slot(acc, ws, slot, cfg, cw, warp_in_wg, lane):
    """Store the fp32 fragment ``acc`` into workspace slot ``slot``
    (``_slot_address``'s order): 16-byte stores, no masks (a slot holds the
    whole tile, edges included)."""
    ws, base = _slot_address(ws, slot, cfg, cw, warp_in_wg, lane)
    vec_t = ir.VectorType.get([4], ir.F32Type.get())
    i32t = ir.IntegerType.get_signless(32)
    for g in range(acc.count // 4):
        v = llvm.mlir_undef(vec_t)
        for e in range(4):
            v = llvm.insertelement(v, acc.value(4 * g + e), arith.constant(i32t, e))
        llvm.store(v, _slot_ptr(ws, base + g * _GROUP_STRIDE), alignment=16)


def load_partial_slot(ws, slot, cfg, cw, warp_in_wg, lane):
    """The fragment ``store_partial_slot`` left in slot ``slot``."""
    ws, base = _slot_address(ws, slot, cfg, cw, warp_in_wg, lane)
    vec_t = ir.VectorType.get([4], ir.F32Type.get())
    i32t = ir.IntegerType.get_signless(32)
    values = []
    for g in range(cfg.block_n // 8):
        v = llvm.load(vec_t, _slot_ptr(ws, base + g * _GROUP_STRIDE), alignment=16)
        values += [llvm.extractelement(v, arith.constant(i32t, e)) for e in range(4)]
    return Fragment(cfg.block_n, values=values)
