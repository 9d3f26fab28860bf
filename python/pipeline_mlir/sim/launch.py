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

    def __post_init__(self):
        _check_dims("block_dim", self.block_dim, MAX_BLOCK_THREADS, "threads")
        _check_dims("cluster", self.cluster, MAX_CLUSTER_CTAS, "CTAs")
        if self.grid is None:
            self.grid = self.cluster
        check_grid(self.grid, self.cluster)
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
