"""A persistent tile scheduler: a grid of (about) one CTA per SM walks the
output tiles ``tile = blockIdx.x, blockIdx.x + gridDim.x, ...``.

Tiles are visited in *grouped* order: ``group_m`` rows of tiles are swept
column by column, so CTAs running at the same time share A row-panels and B
column-panels in L2 (the order of Triton's grouped matmul tutorial and
CUTLASS's rasterization with a swizzle size). With a cluster of ``cluster_m``
CTAs along M, consecutive CTA ranks get vertically adjacent tiles that share
the same B tile, which a multicast B load needs.
"""

from mlir.dialects import arith, nvvm

from .values import Scalar, i32


def _min(a, b):
    return Scalar(arith.minsi(a.ir_value, b.ir_value))


def _divmod(a, b):
    """Unsigned ``(a // b, a % b)``: exact for the non-negative unit ids and
    positive divisors of :meth:`PersistentTileScheduler.tile` (a unit below
    ``num_units`` has ``per_group`` and ``rows`` >= 1), and cheaper than
    the signed forms (no sign fix-ups around the reciprocal: 4 divisions of
    the Blackwell GEMM, benchmarks/parity)."""
    return (Scalar(arith.divui(a.ir_value, b.ir_value)),
            Scalar(arith.remui(a.ir_value, b.ir_value)))


class PersistentTileScheduler:
    """Maps a linear tile id to ``(m_block, n_block)``.

    Args:
      m, n: problem size (i32 Scalars).
      block_m, block_n: tile size (ints).
      group_m: tile rows swept together (a multiple of ``cluster_m``).
      cluster_m: CTAs of a cluster along M (1 or 2): work units are
        ``cluster_m`` vertically stacked tiles, one per CTA.
    """

    def __init__(self, m, n, block_m, block_n, group_m=8, cluster_m=1):
        if group_m % cluster_m:
            raise ValueError(f"group_m ({group_m}) must be a multiple of "
                             f"cluster_m ({cluster_m})")
        self.cluster_m = cluster_m
        self.tiles_m = (m + (block_m * cluster_m - 1)) // (block_m * cluster_m)
        self.tiles_n = (n + (block_n - 1)) // block_n
        self.group_m = group_m // cluster_m
        # Work units (cluster-sized groups of tiles).
        self.num_units = self.tiles_m * self.tiles_n

    def first_and_stride(self):
        """This CTA's (cluster's) first unit and the stride between its
        units: ``(clusterid.x, nclusterid.x)`` (block index and grid size
        when there is no cluster)."""
        if self.cluster_m > 1:
            return (Scalar(nvvm.read_ptx_sreg_clusterid_x(i32())),
                    Scalar(nvvm.read_ptx_sreg_nclusterid_x(i32())))
        return (Scalar(nvvm.read_ptx_sreg_ctaid_x(i32())),
                Scalar(nvvm.read_ptx_sreg_nctaid_x(i32())))

    def tile(self, unit, cta_rank=None):
        """``(m_block, n_block)`` of ``unit`` for this CTA (``cta_rank`` in
        the cluster along M)."""
        per_group = self.tiles_n * self.group_m
        group, in_group = _divmod(unit, per_group)
        first_m = group * self.group_m
        rows = _min(self.tiles_m - first_m, Scalar(arith.constant(i32(), self.group_m)))
        n_block, in_rows = _divmod(in_group, rows)
        m_unit = first_m + in_rows
        if self.cluster_m > 1:
            return m_unit * self.cluster_m + cta_rank, n_block
        return m_unit, n_block


def _udiv(a, b):
    """``a // b`` for non-negative ints or i32 Scalars (unsigned: exact for
    the non-negative counts of :func:`split_k_unit`)."""
    if isinstance(a, int) and isinstance(b, int):
        return a // b
    return Scalar(arith.divui(_scalar(a).ir_value, _scalar(b).ir_value))


def _urem(a, b):
    if isinstance(a, int) and isinstance(b, int):
        return a % b
    return Scalar(arith.remui(_scalar(a).ir_value, _scalar(b).ir_value))


def _umin(a, b):
    if isinstance(a, int) and isinstance(b, int):
        return min(a, b)
    return _min(_scalar(a), _scalar(b))


def _scalar(x):
    return x if isinstance(x, Scalar) else Scalar(arith.constant(i32(), x))


def split_k_count(splits, k_blocks):
    """The splits a split-K launch really uses: ``min(splits, k_blocks)``,
    so that every split gets at least one K block (a split with none would
    leave its workspace slice unwritten; the host sums exactly this many:
    ``ops/splitk_host.py``). Ints or i32 Scalars."""
    return _umin(splits, k_blocks)


def split_k_unit(unit, tiles, splits, k_blocks):
    """Split-K's work unit ``unit`` -> ``(tile, split, kb_begin, kb_count)``.

    ``tiles`` output tiles times ``splits`` (already ``split_k_count``) units:
    unit ``u`` is tile ``u % tiles`` of split ``u // tiles``, so the CTAs of
    one wave walk neighbouring tiles of the same K range (their A row-panels
    and B column-panels are the same L2 lines, as in the grouped order).
    Split ``s`` covers K blocks ``[s kb / S, (s + 1) kb / S)``: contiguous,
    in order, sizes differing by at most one, none empty when ``S <= kb``.
    (A ceil-div split, ``ceil(kb / S)`` per split, leaves the last ones empty
    when it overshoots: 9 blocks in 4 splits are 3, 3, 3, 0.)

    Works on Python ints (the model the tests compare with) and on i32
    Scalars (the kernel): the same arithmetic either way."""
    split, tile = _udiv(unit, tiles), _urem(unit, tiles)
    begin = _udiv(split * k_blocks, splits)
    end = _udiv((split + 1) * k_blocks, splits)
    return tile, split, begin, end - begin


# -- stream-K: full waves of whole tiles, then the rest split evenly ------------------
#
# ``tiles`` output tiles of ``k_blocks`` K blocks each on ``grid`` persistent
# CTAs. When ``tiles`` is not a multiple of ``grid`` the last wave of a
# tile-per-unit schedule leaves SMs idle (144 tiles on 132 SMs: a second
# wave 9% full). Here the full waves run whole tiles, as the data-parallel
# schedule does (CTA c takes tiles c, c + grid, ...: ``rounds`` of them),
# and the ``sk_tiles = tiles % grid`` left over are laid end to end as one
# run of ``iters = sk_tiles x k_blocks`` K blocks that the first ``sk_ctas``
# CTAs share equally: CTA c < sk_ctas takes ``[c iters / sk_ctas, (c + 1)
# iters / sk_ctas)``. The host picks ``sk_ctas`` (between ``sk_tiles`` and
# ``grid``: ops/gemm_stream_k.stream_k_launch) so that each run is at most one
# tile long and at least one K block. A run crosses at most one tile
# boundary, so it is one or two *segments*, each a work unit holding part of
# a tile: each contributor but the last in K order stores an fp32 partial
# tile and arrives; the last (the CTA that holds the tile's last K block)
# waits for their arrivals and adds their partials to its own accumulator
# in K order (kernels/hopper_gemm.py). The order below makes that wait
# safe: the segment that ends a tile is the last of its CTA's run, and the
# partials it waits for are the first of theirs (or a run's only one), so
# no contributor's partial is behind a wait.
#
# A CTA runs its segments last first: the later tile from its K block 0,
# then the earlier one from where its run began. All CTAs then walk K at
# the same pace from two origins (0, and a tile's length minus a run's), so
# the operand blocks in use at any moment are two narrow bands of K, as in
# the data-parallel waves: in the order of the run, the CTAs would read
# every part of K at once, and a long K's operands outgrow L2.
#
# Workspace slots: ``2 c`` for CTA c's first segment (by K order: the end
# of a tile), ``2 c + 1`` for its second (the start of the next). A partial
# tile's contributors are the CTAs ``owner(t kb) .. owner(t kb + kb - 1)``;
# contributor c wrote slot ``2 c + 1`` if its run began before the tile,
# else ``2 c``.
#
# All of it works on Python ints (the model the tests compare with) and on
# i32 Scalars (the kernel, through i64 where ``iters x sk_ctas`` may pass
# 2^31).


def _wide(x):
    return x.to(64) if isinstance(x, Scalar) else x


def _narrow(x):
    return x.to(32) if isinstance(x, Scalar) else x


def _select(cond, a, b):
    """``a if cond else b`` on Python values, ``arith.select`` on Scalars."""
    if isinstance(cond, bool):
        return a if cond else b
    return cond.select(_scalar(a) if not isinstance(a, Scalar) else a,
                       _scalar(b) if not isinstance(b, Scalar) else b)


class StreamKSchedule:
    """One CTA's work units under stream-K (see above): ``units`` of them,
    ``unit(i)`` for each. ``cta`` is this CTA's index, ``grid`` the CTAs,
    ``sk_ctas`` how many of them share the stream-K run (at least one K
    block each: ``sk_ctas <= sk_tiles x k_blocks``; at most ``grid``).
    ``rounds``: the whole-tile rounds (None: every full wave, ``tiles /
    grid``); fewer hands the last full wave to the stream-K run too, whose
    runs are then up to two tiles long (at most three segments: a whole
    tile between two partial ones, so still two workspace slots)."""

    def __init__(self, tiles, k_blocks, grid, cta, sk_ctas, rounds=None):
        self.tiles, self.k_blocks, self.grid, self.cta = tiles, k_blocks, grid, cta
        self.sk_ctas = sk_ctas
        self.rounds = _udiv(tiles, grid) if rounds is None else rounds
        self.dp_tiles = self.rounds * grid
        self.sk_tiles = tiles - self.dp_tiles
        self.iters = self.sk_tiles * k_blocks
        self.begin = self.run_begin(_umin(cta, sk_ctas))
        self.end = self.run_begin(_umin(cta + 1, sk_ctas))
        self.first_tile = _udiv(self.begin, k_blocks)
        last_tile = _udiv(_select(self.end > self.begin, self.end - 1, self.begin), k_blocks)
        self.segments = _select(self.end > self.begin, last_tile - self.first_tile + 1, 0)
        self.units = self.rounds + self.segments

    def run_begin(self, cta):
        """First stream-K K block of ``cta``'s run: ``cta iters / sk_ctas``."""
        return _narrow(_udiv(_wide(cta) * _wide(self.iters), _wide(self.sk_ctas)))

    def owner(self, x):
        """The CTA whose run holds stream-K K block ``x``: the largest c
        with ``c iters / sk_ctas <= x``, i.e. ``((x + 1) sk_ctas - 1) / iters``."""
        return _narrow(_udiv((_wide(x) + 1) * _wide(self.sk_ctas) - 1, _wide(self.iters)))

    def unit(self, i):
        """``(tile, kb_begin, kb_count, partial, slot, sk_tile)`` of unit
        ``i``: the output tile (the scheduler's linear tile id), its K blocks
        ``[kb_begin, kb_begin + kb_count)``, whether it is a partial
        segment, and for one its workspace slot and its index among the
        stream-K tiles (its counters'). Segments come last first."""
        kb = self.k_blocks
        dp = i < self.rounds
        seg = self.segments - 1 - (i - self.rounds)
        sk_tile = self.first_tile + seg
        x0 = sk_tile * kb
        lo = _select(self.begin > x0, self.begin, x0)
        hi = _umin(self.end, x0 + kb)
        tile = _select(dp, self.cta + i * self.grid, self.dp_tiles + sk_tile)
        begin = _select(dp, 0, lo - x0)
        count = _select(dp, kb, hi - lo)
        if isinstance(lo, Scalar):
            partial = (~dp) & ~((lo == x0) & (hi == x0 + kb))
        else:
            partial = not dp and not (lo == x0 and hi == x0 + kb)
        slot = 2 * self.cta + _select(seg > 0, 1, 0)
        return tile, begin, count, partial, slot, sk_tile

    def contributors(self, sk_tile):
        """``(first CTA, last CTA)`` whose runs cover part of stream-K tile
        ``sk_tile``, in K order."""
        x0 = sk_tile * self.k_blocks
        return self.owner(x0), self.owner(x0 + self.k_blocks - 1)

    def slot_of(self, cta, sk_tile):
        """The workspace slot where ``cta`` left its partial of ``sk_tile``:
        its second segment's (``2 cta + 1``) if its run began before the
        tile, else its first's (``2 cta``)."""
        began_before = self.run_begin(cta) < sk_tile * self.k_blocks
        return 2 * cta + _select(began_before, 1, 0)
