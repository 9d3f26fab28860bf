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
