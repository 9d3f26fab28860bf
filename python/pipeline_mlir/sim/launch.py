"""What a simulated launch looks like (:class:`Launch`): the block,
cluster and grid shapes, within the limits a GPU allows (and a cap on the
CTAs simulated), and the values the interpreter (interp.py) gives the
kernel's arguments and loops."""

from __future__ import annotations

from dataclasses import dataclass, field

# Hardware limits a launch must respect (a CTA holds at most 1024 threads, a
# cluster at most 16 CTAs); beyond them the simulation would model a launch
# no GPU runs, and its cost grows with the thread count.
MAX_BLOCK_THREADS = 1024
MAX_CLUSTER_CTAS = 16
# CTAs of the whole grid: every warp of every CTA is an agent and every
# agent carries a vector clock with an entry per agent, so a schedule's cost
# grows with the square of the grid's warps. A grid past this cap is refused
# (a stream-K fix-up or a hand-over between clusters shows on a few CTAs).
MAX_GRID_CTAS = 32


def _check_dims(name: str, dims, limit: int, unit: str) -> None:
    if (not isinstance(dims, tuple) or len(dims) != 3
            or not all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in dims)):
        raise ValueError(f"Launch: {name} must be 3 positive ints, got {dims!r}")
    if dims[0] * dims[1] * dims[2] > limit:
        raise ValueError(f"Launch: {name} {dims} has {dims[0] * dims[1] * dims[2]} {unit}, "
                         f"more than the {limit} a GPU allows")


@dataclass
class Launch:
    """What the simulated launch looks like. ``grid``: the CTAs of the
    launch along x, y, z (``%nctaid``), each a multiple of the cluster shape
    (default: the cluster, one cluster as the whole grid); the grid's
    clusters are ``grid / cluster`` along each axis (``%nclusterid``), and
    at most :data:`MAX_GRID_CTAS` CTAs in all. ``args`` gives integer kernel arguments by position, so loops whose
    bounds are computed from them (a GEMM's tile and k-block loops) run
    their real trip counts; ``trip_count`` is the fallback for bounds that
    still cannot be evaluated. ``clc_clusters``: how many pending clusters
    cluster launch control lets the simulated one cancel and take over
    before a ``try_cancel`` fails (the run-time end of a CLC loop);
    ``max_while_trips`` bounds an ``scf.while``."""
    block_dim: tuple[int, int, int]
    cluster: tuple[int, int, int]
    trip_count: int | None = None
    args: dict = field(default_factory=dict)
    clc_clusters: int = 2
    max_while_trips: int = 10000
    grid: tuple[int, int, int] | None = None
    # Descriptor argument position -> TensorMap: the TMA tensor stores and
    # reduce-adds through it are followed in global memory (gmem.py).
    tensor_maps: dict = field(default_factory=dict)

    def __post_init__(self):
        _check_dims("block_dim", self.block_dim, MAX_BLOCK_THREADS, "threads")
        _check_dims("cluster", self.cluster, MAX_CLUSTER_CTAS, "CTAs")
        if self.grid is None:
            self.grid = self.cluster
        check_grid(self.grid, self.cluster)
        for pos, tm in self.tensor_maps.items():
            if not isinstance(pos, int) or isinstance(pos, bool) or pos < 0:
                raise ValueError(f"Launch: tensor_maps keys are descriptor argument positions, "
                                 f"got {pos!r}")
            if not isinstance(tm, TensorMap):
                raise ValueError(f"Launch: tensor_maps[{pos}] must be a TensorMap, got {tm!r}")
        if self.trip_count is not None and (
                not isinstance(self.trip_count, int) or isinstance(self.trip_count, bool)
                or self.trip_count < 0):
            raise ValueError(f"Launch: trip_count must be a non-negative int, "
                             f"got {self.trip_count!r}")

    @property
    def block_threads(self) -> int:
        return self.block_dim[0] * self.block_dim[1] * self.block_dim[2]

    @property
    def clusters(self) -> tuple[int, int, int]:
        """Clusters along x, y, z (``%nclusterid``)."""
        return tuple(g // c for g, c in zip(self.grid, self.cluster))

    @property
    def ctas(self) -> int:
        return self.grid[0] * self.grid[1] * self.grid[2]


def check_grid(grid, cluster) -> None:
    """A grid of CTAs (3 positive ints) that the cluster shape tiles, of at
    most MAX_GRID_CTAS CTAs; ValueError naming what is wrong otherwise."""
    if (not isinstance(grid, tuple) or len(grid) != 3
            or not all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in grid)):
        raise ValueError(f"Launch: grid must be 3 positive ints, got {grid!r}")
    if any(g % c for g, c in zip(grid, cluster)):
        raise ValueError(f"Launch: grid {grid} is not a whole number of clusters of {cluster} "
                         f"along every axis")
    n = grid[0] * grid[1] * grid[2]
    if n > MAX_GRID_CTAS:
        raise ValueError(f"Launch: grid {grid} has {n} CTAs; the simulator runs every warp "
                         f"of every CTA and takes at most {MAX_GRID_CTAS} (a hand-over "
                         f"between CTAs or clusters shows on a few)")


@dataclass(frozen=True)
class TensorMap:
    """What the simulator knows of a TMA tensor map (the host encodes it;
    the kernel only holds its address): ``elem`` bytes per element, the
    tensor's ``dims`` and the ``box`` a copy moves, innermost first (as a
    copy's coordinates), the byte ``strides`` of the dimensions after the
    first (default: packed), and where the tensor lies: in the buffer of
    pointer argument ``buffer`` at byte ``offset`` (so the kernel's plain
    loads through that pointer read what TMA stores there), or, with
    ``buffer`` None, in a buffer of its own named by the descriptor."""
    elem: int
    dims: tuple
    box: tuple
    strides: tuple | None = None
    buffer: int | None = None
    offset: int = 0

    def __post_init__(self):
        def ints(x, n=None):
            return (isinstance(x, tuple) and (n is None or len(x) == n) and all(
                isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in x))
        if not isinstance(self.elem, int) or self.elem not in (1, 2, 4, 8, 16):
            raise ValueError(f"TensorMap: elem must be 1, 2, 4, 8 or 16 bytes, got "
                             f"{self.elem!r}")
        if not ints(self.dims) or not 1 <= len(self.dims) <= 5:
            raise ValueError(f"TensorMap: dims must be 1 to 5 positive ints, got {self.dims!r}")
        if not ints(self.box, len(self.dims)):
            raise ValueError(f"TensorMap: box must be {len(self.dims)} positive ints (one per "
                             f"dimension), got {self.box!r}")
        if self.strides is not None and not ints(self.strides, len(self.dims) - 1):
            raise ValueError(f"TensorMap: strides must be {len(self.dims) - 1} positive byte "
                             f"strides (the dimensions after the first), got {self.strides!r}")
        if self.buffer is not None and (not isinstance(self.buffer, int) or self.buffer < 0):
            raise ValueError(f"TensorMap: buffer must be a pointer argument's position, got "
                             f"{self.buffer!r}")

    @property
    def byte_strides(self) -> tuple:
        """The byte stride of every dimension (the first: the element's)."""
        if self.strides is not None:
            return (self.elem,) + tuple(self.strides)
        out, s = [], self.elem
        for d in self.dims:
            out.append(s)
            s *= d
        return tuple(out)

    def runs(self, coords) -> list:
        """The contiguous byte runs (offset in the tensor, length) the box
        at ``coords`` covers, clipped at the tensor's bounds (a coordinate
        may be negative or past the end: those elements are not written)."""
        spans = []
        for c, b, d in zip(coords, self.box, self.dims):
            lo, hi = max(c, 0), min(c + b, d)
            if lo >= hi:
                return []
            spans.append((lo, hi))
        strides = self.byte_strides
        (lo0, hi0), outer = spans[0], spans[1:]
        out = [0]
        for (lo, hi), s in zip(outer, strides[1:]):
            out = [o + i * s for o in out for i in range(lo, hi)]
        return [(self.offset + o + lo0 * self.elem, (hi0 - lo0) * self.elem) for o in out]

    @classmethod
    def parse(cls, text: str) -> "TensorMap":
        """``ELEM:DIMS:BOX[:STRIDES][@ARG[+OFFSET]]`` (``x``-separated lists,
        innermost first): ``4:128x200x1:32x64x1@7``."""
        where, buffer, offset = text, None, 0
        if "@" in text:
            where, at = text.split("@", 1)
            buf, _, off = at.partition("+")
            buffer, offset = int(buf), int(off or 0)
        parts = where.split(":")
        if len(parts) not in (3, 4):
            raise ValueError(f"a tensor map is ELEM:DIMS:BOX[:STRIDES][@ARG[+OFFSET]], got "
                             f"{text!r}")

        def dims(x):
            return tuple(int(v) for v in x.split("x"))
        return cls(int(parts[0]), dims(parts[1]), dims(parts[2]),
                   dims(parts[3]) if len(parts) == 4 else None, buffer, offset)
