"""dQ's accumulator order (``AttentionBwdConfig.dq_acc_order``), defined
once: the kernel's stores (kernels/attention_bwd/dq_acc_order.py), the
host's un-permute (``attention_bwd_host.acc_order_view``) and the
postprocess kernel's loads (kernels/attention_bwd_dq_convert.py) all read
``ACC_ORDER``. Pure Python (no MLIR): the GPU host's launcher imports it.

The flat fp32 accumulator is a sequence of 64 x 64 tiles, one per (batch
entry, 64-row query tile, query head, 64-column group), in that order
(``tile_index``, over the query tiles of the whole batch). Within a tile,
float index digits, most significant first (``FLOAT_DIGITS``): ``kk`` (4),
``eh`` (2), ``w`` (4), ``q`` (8), ``p`` (4), ``kpar`` (2), ``el`` (2).
They name the wgmma ``m64 x 64`` fp32 fragment: thread ``t = 32 w + 4 q +
p`` of the warpgroup holds value ``i = 8 kk + 4 kpar + 2 eh + el`` at row
``16 w + 8 eh + q``, column ``16 kk + 8 kpar + 2 p + el``. So chunk ``c =
2 kk + eh`` (the digits above the thread's) of thread ``t`` is 4 contiguous
floats, one 16-byte store (``kpar``, ``el`` below the thread's digits), at
float ``(c 128 + t) 4``.
"""

from dataclasses import dataclass

# The digits of a float's index within a tile, most significant first:
# (name, radix).
FLOAT_DIGITS = (("kk", 4), ("eh", 2), ("w", 4), ("q", 8), ("p", 4), ("kpar", 2), ("el", 2))
# The digits of a tile's row and column, most significant first.
ROW_DIGITS = ("w", "eh", "q")
COL_DIGITS = ("kk", "kpar", "p", "el")
# dQ^T's (``AccOrder.transposed``): queries are the fragment's columns.
FLOAT_DIGITS_T = (("j", 10), ("w", 4), ("q", 8), ("p", 4), ("eh", 2), ("el", 2))
ROW_DIGITS_T = ("j", "p", "el")
COL_DIGITS_T = ("w", "eh", "q")
# Query rows of a step whose dQ is computed transposed (FA4's d 128 step,
# ``AttentionBwdConfig.block_m`` 80): the transposed order's tile height.
TRANSPOSED_BLOCK_M = 80


@dataclass(frozen=True)
class AccOrder:
    """The order's sizes and maps (``ACC_ORDER``: the one instance)."""
    tile: int = 64                  # rows and columns of a tile
    threads: int = 128              # a warpgroup
    chunk_floats: int = 4           # one 16-byte store or load
    # The 2-D view TMA reduce-adds through: rows of ``row`` floats (TMA's
    # box side limit 256), a tile ``tile_rows`` of them.
    row: int = 256
    # dQ^T (80-query steps): tiles of ``queries`` = 80 rows (``for_block_m``).
    transposed: bool = False

    def for_block_m(self, block_m):
        """The order of a kernel with ``block_m``-query steps: this one, or
        at 80 (dQ^T) the transposed one."""
        if block_m == TRANSPOSED_BLOCK_M:
            return AccOrder(self.tile, self.threads, self.chunk_floats, self.row, True)
        return AccOrder(self.tile, self.threads, self.chunk_floats, self.row, False)

    @property
    def queries(self):
        """Query rows of a tile (64, or 80 transposed)."""
        return TRANSPOSED_BLOCK_M if self.transposed else self.tile

    @property
    def float_digits(self):
        return FLOAT_DIGITS_T if self.transposed else FLOAT_DIGITS

    @property
    def row_digits(self):
        return ROW_DIGITS_T if self.transposed else ROW_DIGITS

    @property
    def col_digits(self):
        return COL_DIGITS_T if self.transposed else COL_DIGITS

    @property
    def fragment_n(self):
        """The N of the wgmma fragment stored (64 columns, or dQ^T's 80
        queries)."""
        return self.queries if self.transposed else self.tile

    @property
    def tile_floats(self):
        return self.queries * self.tile

    @property
    def tile_rows(self):
        return self.tile_floats // self.row

    @property
    def chunks(self):
        """Chunks of 16 bytes per thread per tile."""
        return self.tile_floats // self.threads // self.chunk_floats

    def chunk_float(self, t, c):
        """First float, within a tile, of thread ``t``'s chunk ``c``."""
        return (c * self.threads + t) * self.chunk_floats

    def value_float(self, t, i):
        """Float index within a tile of fragment value ``i`` of thread ``t``."""
        if self.transposed:                     # chunk j: values 4 j .. 4 j + 3
            return self.chunk_float(t, i // 4) + i % 4
        kk, kpar, eh, el = i // 8, (i // 4) % 2, (i // 2) % 2, i % 2
        return self.chunk_float(t, 2 * kk + eh) + 2 * kpar + el

    def chunk_values(self, c):
        """The fragment values of chunk ``c``, in store order (``kpar``,
        ``el``; transposed ``eh``, ``el``)."""
        if self.transposed:
            return (4 * c, 4 * c + 1, 4 * c + 2, 4 * c + 3)
        kk, eh = c // 2, c % 2
        base = 8 * kk + 2 * eh
        return (base, base + 1, base + 4, base + 5)

    @staticmethod
    def tile_index(bm, heads, h, groups, g):
        """Tile of query tile ``bm`` over the batch (``b tiles_per_batch +
        mt``: batch entry ``b``, query tile ``mt``), head ``h``, column group
        ``g``: ``(bm heads + h) groups + g``."""
        return (bm * heads + h) * groups + g

    @staticmethod
    def tile_coords(tile, tiles_per_batch, heads, groups):
        """(b, mt, h, g) of tile ``tile`` (``tile_index`` inverted)."""
        g = tile % groups
        bmh = tile // groups
        h = bmh % heads
        bm = bmh // heads
        return bm // tiles_per_batch, bm % tiles_per_batch, h, g

    def view_shape(self, batch, padded, heads, head_dim):
        """The flat accumulator's shape for ``view_axes``: (b mt), (h g),
        then ``float_digits``' radices."""
        return ((batch * (padded // self.queries), heads * (head_dim // self.tile))
                + tuple(r for _, r in self.float_digits))

    def view_axes(self):
        """The permutation of ``view_shape``'s axes to (b mt), ``row_digits``,
        (h g), ``col_digits``: (batch, padded, heads, head_dim) order."""
        names = [n for n, _ in self.float_digits]
        digit = {n: 2 + names.index(n) for n in names}
        return (0, *(digit[n] for n in self.row_digits), 1,
                *(digit[n] for n in self.col_digits))


ACC_ORDER = AccOrder()
