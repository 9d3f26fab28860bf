"""What a simulated launch looks like (:class:`Launch`): the block and
cluster shapes, within the limits a GPU allows, and the values the
interpreter (interp.py) gives the kernel's arguments and loops."""

from __future__ import annotations

from dataclasses import dataclass, field

# Hardware limits a launch must respect (a CTA holds at most 1024 threads, a
# cluster at most 16 CTAs); beyond them the simulation would model a launch
# no GPU runs, and its cost grows with the thread count.
MAX_BLOCK_THREADS = 1024
MAX_CLUSTER_CTAS = 16


def _check_dims(name: str, dims, limit: int, unit: str) -> None:
    if (not isinstance(dims, tuple) or len(dims) != 3
            or not all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in dims)):
        raise ValueError(f"Launch: {name} must be 3 positive ints, got {dims!r}")
    if dims[0] * dims[1] * dims[2] > limit:
        raise ValueError(f"Launch: {name} {dims} has {dims[0] * dims[1] * dims[2]} {unit}, "
                         f"more than the {limit} a GPU allows")


@dataclass
class Launch:
    """What the simulated launch looks like. The simulator runs one cluster,
    which is the whole grid (``nctaid`` = the cluster shape, ``clusterid`` =
    0). ``args`` gives integer kernel arguments by position, so loops whose
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

    def __post_init__(self):
        _check_dims("block_dim", self.block_dim, MAX_BLOCK_THREADS, "threads")
        _check_dims("cluster", self.cluster, MAX_CLUSTER_CTAS, "CTAs")
        if self.trip_count is not None and (
                not isinstance(self.trip_count, int) or isinstance(self.trip_count, bool)
                or self.trip_count < 0):
            raise ValueError(f"Launch: trip_count must be a non-negative int, "
                             f"got {self.trip_count!r}")

    @property
    def block_threads(self) -> int:
        return self.block_dim[0] * self.block_dim[1] * self.block_dim[2]
