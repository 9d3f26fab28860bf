"""Operand layouts: one value says how a tile of a matrix lies in global and
shared memory, and every fact the kernel and the host need follows from it.

An :class:`OperandLayout` is a ``rows x cols`` tile of a row-major tensor
(``cols`` contiguous in global memory) of one element type, copied by TMA
into shared memory with one swizzle. From it, and only from it, come:

- the TMA box (outermost first) and the byte counts: the tile is ``cols /
  box_cols`` boxes of ``rows x box_cols`` stored one after the other, each
  ``box_bytes``; the whole tile's ``bytes`` is what its copies deliver, hence
  a TMA pipeline's tx bytes;
- the wgmma shared-memory matrix descriptor (PTX ISA, "Matrix Descriptor
  Format": bits 0-13 start address >> 4, 16-29 leading-dimension byte offset
  (LBO) >> 4, 32-45 stride-dimension byte offset (SBO) >> 4, 49-51 base
  offset, 62-63 swizzle mode: 0 none, 1 = 128 B, 2 = 64 B, 3 = 32 B);
- K per wgmma instruction and the descriptor advance per K slice;
- the swizzled byte offset of an element (what an epilogue writing the tile
  by hand must compute);
- the host's ``CUtensorMap`` (``runtime.make_tma_descriptor(t, layout=...)``).

``major`` names the operand dimension that is contiguous: ``"K"`` (``cols``
is K, ``rows`` is M or N; A given M x K, B given N x K) or ``"MN"`` (``cols``
is M or N, ``rows`` is K; B given K x N). A tile that is not an MMA operand
(an epilogue's C tile) is ``"K"``-major in this sense: ``cols`` contiguous.

The canonical layouts wgmma reads (as CUTLASS's ``make_gmma_desc`` writes
them, in 16-byte units ``T``; ``W`` = the swizzle span in bytes, 16 without
swizzle, so that a core matrix is 8 rows of ``W`` bytes):

- K-major, swizzled: ``((8, m), (T, 2)) : ((W/16 T, SBO), (1, T))``. One
  8-row group of the atom is ``8 W`` bytes, the next group follows it:
  SBO = ``8 W``; LBO is unused (1 by convention). K slice ``s`` (32 bytes of
  K) starts ``32 s`` bytes into the row, or in the next box once a row is
  used up.
- K-major, no swizzle: ``((8, m), (T, 2)) : ((1T, SBO), (1, LBO))``. A box is
  ``rows x 16 B``, so a core matrix (8 rows x 16 B) is 128 contiguous bytes:
  SBO = 128, and the second 16 bytes of K are the next box: LBO = box bytes.
- MN-major, swizzled: ``((T, W/16, m), (8, k)) : ((1, T, LBO), (W/16 T,
  SBO))``. A box of ``rows(K) x W`` bytes written by TMA with the swizzle IS
  the atom stacked along K: SBO = ``8 W`` (between 8-row K groups), LBO =
  box bytes (between consecutive MN atoms, the boxes). K slice ``s`` is
  ``k_per_instruction * s`` rows further: ``+ k_per_instruction * W`` bytes.
- MN-major, no swizzle: ``((T, 1, m), (8, k)) : ((1, T, SBO), (1T, LBO))``:
  LBO = 128 (between 8-row K groups), SBO = box bytes (between MN columns).

Every tile sits at a multiple of its ``alignment`` (the swizzle pattern's
repeat, ``8 W``), so the descriptor's base offset is 0.

This module is pure Python (no MLIR): the host launchers import it on a GPU
machine that has only the runtime.
"""

from dataclasses import asdict, dataclass

# Element type -> (bytes, torch dtype name, wgmma operand type name).
DTYPES = {
    "bf16": (2, "bfloat16", "bf16"),
    "f16": (2, "float16", "f16"),
    "e4m3": (1, "float8_e4m3fn", "e4m3"),
    "e5m2": (1, "float8_e5m2", "e5m2"),
    "f32": (4, "float32", "tf32"),
}
# 8-bit element type -> its largest finite value: what a per-tensor scale
# maps a tensor's amax to when it is quantized (ops/fp8_gemm_host.quantize).
FP8_MAX = {"e4m3": 448.0, "e5m2": 57344.0}
MAJORS = ("K", "MN")
# Swizzle span in bytes -> wgmma descriptor swizzle mode (bits 62-63).
SWIZZLE_MODES = {0: 0, 128: 1, 64: 2, 32: 3}
UNSWIZZLED_SPAN = 16            # no swizzle: core matrices of 8 rows x 16 bytes
CORE_ROWS = 8                   # rows of a core matrix / of a swizzle atom
K_BYTES_PER_INSTRUCTION = 32    # wgmma K: 16 x 16-bit, 32 x 8-bit, 8 x tf32
MAX_BOX = 256                   # cuTensorMapEncodeTiled: box sides 1..256
TMA_SMEM_ALIGN = 128            # a TMA copy's shared-memory address


def fp8_register_a_key_order():
    """The K order of an 8-bit wgmma's register A operand filled in place.

    A k32 slice of an 8-bit register A operand (PTX ISA, "Register
    Fragments: Matrix A", m64k32 for .e4m3/.e5m2) gives thread ``t`` (its
    lane % 4) of a quad k indices ``4t .. 4t + 3`` in its first register
    (row g), the same of row g + 8 in its second, and ``16 + 4t .. 16 + 4t +
    3`` in its third and fourth. The f32 accumulator that such an operand is
    made from (attention's P) gives the same thread columns ``8c + 2t, 8c +
    2t + 1`` (c = 0..3) of the 32-column slice. Packing each thread's own
    values in order (``Fragment.to_operand_a(dtype, in_place=True)``: no
    shuffles) therefore puts accumulator column ``ORDER[kappa]`` at k index
    ``kappa``, with

        ORDER[16 h + 4 t + j] = 16 h + 8 (j // 2) + 2 t + j % 2

    (h: which half of the slice, j: the byte in the register). The product
    is still right when the B operand's row ``kappa`` holds row
    ``ORDER[kappa]`` of the real B: a B given N x K (K-major, as 8-bit B must
    be) has its K columns permuted within every 32-column block by this
    order (what the FP8 attention's host does to V). Returns ``ORDER``, a
    permutation of 0..31."""
    return tuple(16 * (kk // 16) + 8 * ((kk % 4) // 2) + 2 * ((kk % 16) // 4) + kk % 2
                 for kk in range(32))


class LayoutError(ValueError):
    """An operand layout that no TMA box or wgmma descriptor can express."""


def descriptor_units(nbytes):
    """``nbytes`` in the descriptor's address unit (16 bytes): what adding
    to a descriptor moves its start address by ``nbytes``."""
    if nbytes % 16:
        raise LayoutError(f"descriptor offsets are multiples of 16 bytes, got {nbytes}")
    return nbytes >> 4


@dataclass(frozen=True)
class OperandLayout:
    """A ``rows x cols`` tile (``cols`` contiguous) of ``dtype`` with a
    ``swizzle``-byte swizzle (0 = none); ``major`` says which operand
    dimension ``cols`` is ("K" or "MN")."""

    dtype: str
    major: str
    swizzle: int
    rows: int
    cols: int

    def __post_init__(self):
        if self.dtype not in DTYPES:
            raise LayoutError(f"OperandLayout: dtype must be one of {sorted(DTYPES)}, "
                              f"got {self.dtype!r}")
        if self.major not in MAJORS:
            raise LayoutError(f"OperandLayout: major must be 'K' or 'MN', got {self.major!r}")
        if self.swizzle not in SWIZZLE_MODES or isinstance(self.swizzle, bool):
            raise LayoutError(f"OperandLayout: swizzle must be one of 0 (none), 32, 64, "
                              f"128 bytes, got {self.swizzle!r}")
        if not isinstance(self.rows, int) or not CORE_ROWS <= self.rows <= MAX_BOX \
                or self.rows % CORE_ROWS:
            raise LayoutError(f"OperandLayout: rows must be a multiple of {CORE_ROWS} in "
                              f"{CORE_ROWS}..{MAX_BOX} (one TMA box side, whole core "
                              f"matrices), got {self.rows!r}")
        if not isinstance(self.cols, int) or self.cols <= 0 or self.cols % self.box_cols:
            raise LayoutError(
                f"OperandLayout: cols must be a positive multiple of {self.box_cols} "
                f"({self.atom_bytes} bytes of {self.dtype}: one "
                f"{'swizzle span' if self.swizzle else 'unswizzled core-matrix row'}), "
                f"got {self.cols!r}")

    @classmethod
    def one_box(cls, dtype, major, swizzle, rows):
        """The layout one box wide (``cols`` = one swizzle span of
        ``dtype``): a GEMM's K block when ``major`` is "K"."""
        span = (swizzle or UNSWIZZLED_SPAN) if swizzle in SWIZZLE_MODES else None
        cols = span // DTYPES[dtype][0] if span and dtype in DTYPES else 1
        return cls(dtype, major, swizzle, rows, cols)  # rejects bad dtype / swizzle

    # --- elements and boxes ---------------------------------------------------

    @property
    def element_bytes(self):
        return DTYPES[self.dtype][0]

    @property
    def torch_dtype(self):
        """The torch dtype's name (``torch.<name>``); also the runtime's."""
        return DTYPES[self.dtype][1]

    @property
    def atom_bytes(self):
        """``W``: bytes of one box row (the swizzle span, 16 without swizzle)."""
        return self.swizzle or UNSWIZZLED_SPAN

    @property
    def box_cols(self):
        """Elements of one box row (the TMA box's inner side)."""
        return self.atom_bytes // self.element_bytes

    @property
    def box(self):
        """The TMA box, outermost first (``runtime.make_tma_descriptor``)."""
        return (self.rows, self.box_cols)

    @property
    def box_bytes(self):
        return self.rows * self.atom_bytes

    @property
    def boxes(self):
        return self.cols // self.box_cols

    @property
    def bytes(self):
        """Bytes one whole tile delivers (its share of a pipeline's tx bytes)."""
        return self.rows * self.cols * self.element_bytes

    @property
    def alignment(self):
        """Shared-memory alignment of the tile: the swizzle pattern repeats
        every 8 rows, so a tile at a multiple of ``8 W`` has base offset 0."""
        return max(TMA_SMEM_ALIGN, CORE_ROWS * self.atom_bytes)

    def box_offsets(self):
        """``(column of the box's first element, its shared-memory byte
        offset)`` of each box of the tile, in order."""
        return [(i * self.box_cols, i * self.box_bytes) for i in range(self.boxes)]

    def coords(self, row, col):
        """TMA coordinates (innermost first) of tile element ``(row, col)``
        of the tensor: what ``tma_load`` / ``tma_store`` take."""
        return [col, row]

    def swizzled_offset(self, row, col_byte):
        """Byte offset in a box of byte ``col_byte`` of row ``row`` (ints or
        i32 Scalars): the swizzle XORs address bits 4.. (the 16-byte chunk)
        with bits 7.. (which 128-byte line), ``log2(W / 16)`` of them."""
        offset = row * self.atom_bytes + col_byte
        mask = self.atom_bytes // 16 - 1
        if not mask:
            return offset
        return offset ^ (((offset >> 7) & mask) << 4)

    def swizzled_chunk(self, row, chunk):
        """The 16-byte chunk where chunk ``chunk`` of box row ``row`` is
        stored (``swizzled_offset`` for whole chunks; ``row`` may be any
        row with the same ``row % 8``, e.g. a lane's row inside a group)."""
        mask = self.atom_bytes // 16 - 1
        if not mask:
            return chunk
        rows_per_line = 128 // self.atom_bytes
        line = row // rows_per_line if rows_per_line > 1 else row
        return chunk ^ (line & mask)

    # --- as a wgmma operand ---------------------------------------------------

    @property
    def mn(self):
        """The tile's extent along M or N."""
        return self.rows if self.major == "K" else self.cols

    @property
    def k(self):
        """The tile's extent along K."""
        return self.cols if self.major == "K" else self.rows

    @property
    def wgmma_type(self):
        """Name of the wgmma operand type (``nvvm.WGMMATypes``)."""
        return DTYPES[self.dtype][2]

    @property
    def k_per_instruction(self):
        """K of one wgmma: always 32 bytes of K (k16, k32 for 8-bit, k8 tf32)."""
        return K_BYTES_PER_INSTRUCTION // self.element_bytes

    @property
    def k_slices(self):
        """wgmma instructions along the tile's K."""
        if self.k % self.k_per_instruction:
            raise LayoutError(f"{self}: K = {self.k} is not a multiple of the "
                              f"{self.k_per_instruction} of one wgmma on {self.dtype}")
        return self.k // self.k_per_instruction

    @property
    def leading_byte_offset(self):
        """LBO: K-major, the stride between the two 16-byte K core matrices
        (unused with a swizzle: 16, field 1); MN-major, the stride between
        MN atoms (the boxes), or between 8-row K groups without swizzle."""
        if self.major == "K":
            return self.box_bytes if not self.swizzle else 16
        return self.box_bytes if self.swizzle else CORE_ROWS * UNSWIZZLED_SPAN

    @property
    def stride_byte_offset(self):
        """SBO: the stride between 8-row groups of the atom, or between MN
        core-matrix columns for an unswizzled MN-major tile."""
        if self.major == "MN" and not self.swizzle:
            return self.box_bytes
        return CORE_ROWS * self.atom_bytes

    @property
    def swizzle_mode(self):
        return SWIZZLE_MODES[self.swizzle]

    @property
    def descriptor_bits(self):
        """Every descriptor field but the start address (base offset 0: the
        tile is ``alignment``-aligned), as a 64-bit unsigned int."""
        # Both offsets are at most a box (256 rows x 128 B = 32 KiB): they fit
        # the 14-bit fields (256 KiB) of every layout the constructor accepts.
        lbo = descriptor_units(self.leading_byte_offset)
        sbo = descriptor_units(self.stride_byte_offset)
        return (lbo << 16) | (sbo << 32) | (self.swizzle_mode << 62)

    def k_slice_offset(self, s):
        """Byte offset from the tile's start of K slice ``s`` (the ``s``-th
        wgmma's operand): what the descriptor's start address advances."""
        if not 0 <= s < self.k_slices:
            raise LayoutError(f"{self}: K slice {s} is outside 0..{self.k_slices - 1}")
        if self.major == "MN":
            return s * self.k_per_instruction * self.atom_bytes
        k_byte = s * K_BYTES_PER_INSTRUCTION
        return (k_byte // self.atom_bytes) * self.box_bytes + k_byte % self.atom_bytes

    def mn_offset(self, mn):
        """Byte offset from the tile's start of the sub-tile that begins at
        M/N index ``mn`` (an int; e.g. one consumer warpgroup's 64 rows of
        A): whole core-matrix groups (K-major) or whole atoms (MN-major)."""
        if self.major == "K":
            if mn % CORE_ROWS:
                raise LayoutError(f"{self}: a K-major sub-tile starts at a multiple of "
                                  f"{CORE_ROWS} rows, got {mn}")
            return mn * (self.atom_bytes if self.swizzle else UNSWIZZLED_SPAN)
        if mn % self.box_cols:
            raise LayoutError(f"{self}: an MN-major sub-tile starts at a multiple of "
                              f"{self.box_cols} ({self.atom_bytes}-byte atoms), got {mn}")
        return (mn // self.box_cols) * self.box_bytes

    # --- meta for the host ----------------------------------------------------

    def to_meta(self):
        """A JSON-able dict (``from_meta`` rebuilds the same layout)."""
        return asdict(self)

    @classmethod
    def from_meta(cls, meta):
        return cls(**meta)

    def __str__(self):
        return (f"OperandLayout({self.dtype}, {self.major}-major, "
                f"{self.swizzle or 'no'}-B swizzle, {self.rows}x{self.cols})")


__all__ = ["OperandLayout", "LayoutError", "DTYPES", "descriptor_units",
           "fp8_register_a_key_order"]
