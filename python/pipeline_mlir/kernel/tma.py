"""TMA tiles: 2-D boxes of a row-major tensor, 128-byte swizzled in shared
memory, as the kernel and the host both need to know them.

The kernel side needs the bytes each copy delivers (what a TMA pipeline's
``tx_count`` must equal) and the shared-memory layout of a box (for wgmma
descriptors and for the epilogue's stores); the host side needs the box and
swizzle to encode the ``CUtensorMap`` with ``cuTensorMapEncodeTiled`` at run
time. One :class:`TmaTile` object says both, so they cannot disagree.

Layout of a box of ``rows x cols`` 16-bit elements with the 128-byte swizzle
(``cols * 2 == 128``): row ``r`` occupies bytes ``[128 r, 128 r + 128)`` and
its 16-byte chunk ``c`` is stored at chunk ``c ^ (r % 8)``. This is also the
K-major, 128-byte-swizzle canonical layout that wgmma reads (8-row atoms of
1024 bytes), so a tile loaded by TMA feeds ``wgmma`` directly.

Out-of-bounds parts of a box are zero-filled by loads and skipped by stores,
and the full box's bytes still complete on the barrier: shapes that the tile
does not divide need no predication in the kernel.
"""

from .wgmma import ELEMENT_TYPES

SWIZZLE_BYTES = 128
# TMA rules (cuTensorMapEncodeTiled): box sides in 1..256 elements.
MAX_BOX = 256


class TmaTile:
    """A ``rows x cols`` box of ``dtype`` with the 128-byte swizzle.

    ``cols * element bytes`` must be 128 (one swizzle row). Tiles wider than
    that are loaded as several boxes (see :meth:`column_boxes`).
    """

    def __init__(self, rows, cols, dtype="bf16"):
        if dtype not in ELEMENT_TYPES:
            raise ValueError(f"TmaTile: dtype must be one of {sorted(ELEMENT_TYPES)}, "
                             f"got {dtype!r}")
        self.element_bytes = ELEMENT_TYPES[dtype][1]
        if not isinstance(rows, int) or not 1 <= rows <= MAX_BOX or rows % 8:
            raise ValueError(f"TmaTile: rows must be a multiple of 8 in 8..{MAX_BOX}, "
                             f"got {rows!r}")
        if not isinstance(cols, int) or cols <= 0 or \
                (cols * self.element_bytes) % SWIZZLE_BYTES:
            raise ValueError(
                f"TmaTile: cols * {self.element_bytes} bytes must be a multiple of the "
                f"{SWIZZLE_BYTES}-byte swizzle row, got cols={cols!r}")
        self.rows, self.cols, self.dtype = rows, cols, dtype
        self.box_cols = SWIZZLE_BYTES // self.element_bytes

    @property
    def box_shape(self):
        """The box, outermost first (``runtime.make_tma_descriptor``)."""
        return (self.rows, self.box_cols)

    @property
    def box_bytes(self):
        return self.rows * SWIZZLE_BYTES

    @property
    def bytes(self):
        """Bytes one whole tile delivers (its ``tx_count`` share)."""
        return self.rows * self.cols * self.element_bytes

    def column_boxes(self):
        """``(column offset in elements, shared-memory byte offset)`` of each
        box: a tile ``k * 64`` columns wide is ``k`` boxes stored one after
        the other."""
        return [(i * self.box_cols, i * self.box_bytes)
                for i in range(self.cols // self.box_cols)]

    @staticmethod
    def swizzled_offset(row, col_byte):
        """Byte offset of (``row``, byte ``col_byte`` of the row) inside a
        box (Python ints or Scalars)."""
        return row * SWIZZLE_BYTES + (((col_byte // 16) ^ (row % 8)) * 16) + col_byte % 16

    def descriptor(self, tensor):
        """Host side: the CUtensorMap of a 2-D row-major device tensor for
        this box (needs the runtime and a GPU)."""
        from ..runtime import make_tma_descriptor

        if len(tensor.shape) != 2:
            raise ValueError(f"TmaTile.descriptor: a 2-D tensor is needed, got shape "
                             f"{tuple(tensor.shape)}")
        return make_tma_descriptor(tensor, box_shape=self.box_shape,
                                   swizzle=SWIZZLE_BYTES)
