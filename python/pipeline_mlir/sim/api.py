"""``simulate(module, ...)``: the simulator as a Python call.

The same engine as ``pipeline-sim`` (frontend -> agents -> ``explore``) on
an in-memory module, so a kernel built from Python is simulated without
printing and re-parsing it, and its findings keep the user's lines (the
builders give every op ``Location.file`` of the calling line).
``Kernel.simulate`` is this function with the kernel's parameters, block
size and cluster filled in.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .engine import explore
from .model import SimError

# What each kind of finding is called in reports (pipeline-sim prints the
# same titles).
KIND_TITLES = {
    "deadlock": "deadlock", "overrun": "phase overrun", "overwrite": "buffer overwritten",
    "early-read": "read before the copy finished", "arrive-count": "arrive count",
    "tx-count": "tx bytes", "exited-cta": "arrive on an exited CTA", "unbalanced": "unbalanced",
    "role": "wrong role", "initial-phase": "wrong initial phase",
    "uninitialized": "uninitialized barrier", "unsupported": "unsupported",
    "step-limit": "step limit", "commit-before-write": "commit before write",
    "async-read": "asynchronous read in flight",
    "read-after-release": "stage read after its release",
    "named-barrier": "named barrier left half-arrived at exit",
    "smem-race": "race on plain shared memory",
    "divergent-barrier": "aligned barrier synced at distinct sites",
    "gmem-race": "race on global memory",
    "gmem-unwritten": "read of global memory nobody writes",
    "tmem": "tensor memory allocation",
    "pair-alloc": "cta_group::2 alloc before a cluster barrier",
    "tcgen05-ld": "tcgen05.ld used before its wait",
    "tcgen05-st": "tcgen05.ld of columns a tcgen05.st may still write",
}


@dataclass(frozen=True)
class Finding:
    """The first schedule that showed one kind of bug."""

    kind: str          # "deadlock", "overrun", ... (KIND_TITLES' keys)
    message: str       # what went wrong, naming the pipeline, stage and phase
    where: tuple       # notes: the ops involved, at the user's lines
    schedule: int      # index of the schedule (replayable with the same seed)

    @property
    def title(self) -> str:
        return KIND_TITLES.get(self.kind, self.kind)

    def lines(self, kernel: str, mode: str) -> list[str]:
        out = [f"{self.title}: {self.message}"]
        out += [f"note: {w}" for w in self.where]
        out.append(f"note: @{kernel}, schedule {self.schedule} ({mode})")
        return out


@dataclass
class KernelResult:
    """What simulating one kernel found."""

    kernel: str
    schedules: int
    counts: dict                  # kind -> number of schedules that showed it
    findings: list = field(default_factory=list)  # Finding per kind, first seen
    shape: str = ""               # "@k, 1 CTA(s) x 3 warp(s)"
    mode: str = ""                # "random, seed 0" / "exhaustive, ..."

    @property
    def ok(self) -> bool:
        return not self.counts

    @property
    def deadlocks(self) -> int:
        """Schedules that ended in a deadlock."""
        return self.counts.get("deadlock", 0)

    def lines(self) -> list[str]:
        if self.ok:
            return [f"OK: {self.schedules} schedules, 0 deadlocks ({self.shape}; {self.mode})"]
        out = []
        for f in self.findings:
            out += f.lines(self.kernel, self.mode)
        counts = ", ".join(f"{n} {kind}" for kind, n in sorted(self.counts.items()))
        out.append(f"FAILED: {self.schedules} schedules, {counts} ({self.shape}; {self.mode})")
        return out


class SimResult(list):
    """One :class:`KernelResult` per simulated kernel; ``str()`` is the
    report ``pipeline-sim`` prints."""

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self)

    @property
    def findings(self) -> list:
        return [f for r in self for f in r.findings]

    def __str__(self):
        return "\n".join(f"pipeline-sim: {line}" for r in self for line in r.lines())


class SimulationFailed(AssertionError):
    """The simulator found a bug (deadlock, overrun, ...) in some schedule.
    ``.result`` is the :class:`SimResult`; the message is its report."""

    def __init__(self, result: SimResult):
        super().__init__(str(result))
        self.result = result


def describe_launch(name: str, launch, trip_count: int | None) -> str:
    """How a report names the launch: ``@k, 2 CTA(s) x 4 warp(s)``; a grid
    of several clusters ``@k, 4 CTA(s) (2 clusters of 2) x 4 warp(s)``."""
    size = launch.cluster[0] * launch.cluster[1] * launch.cluster[2]
    ctas = launch.ctas
    grid = f" ({ctas // size} clusters of {size})" if ctas > size else ""
    out = f"@{name}, {ctas} CTA(s){grid} x {(launch.block_threads + 31) // 32} warp(s)"
    if trip_count is not None:
        out += f", trip count {trip_count}"
    return out


def simulate(module, *, kernel: str | None = None, args: dict | None = None,
             block_dim=None, cluster=None, grid=None, trip_count: int | None = None,
             schedules: int = 100, seed: int = 0, exhaustive_bound: int | None = None,
             max_steps: int = 200000, clc_clusters: int = 2,
             tensor_maps: dict | None = None, check: bool = True) -> SimResult:
    """Simulate the kernels of ``module`` (an ``mlir.ir.Module``) that use
    pipeline ops, ``schedules`` random interleavings each (seeded by
    ``seed``), or with ``exhaustive_bound`` every schedule with at most that
    many preemptions.

    ``args``: ``{position: int}`` values of integer kernel arguments, so
    loops bounded by them run their real trip counts; ``trip_count`` is the
    fallback for bounds that cannot be evaluated. ``block_dim`` / ``cluster``
    default to the kernel's ``known_block_size`` and the largest cluster of
    its pipelines; ``grid`` (CTAs along x, y, z, a whole number of clusters
    along each; at most ``launch.MAX_GRID_CTAS``) to one cluster.
    ``tensor_maps``: ``{descriptor: launch.TensorMap}`` (by argument
    position, or by the name the Python builders give it), so the TMA
    stores and reduce-adds through those descriptors are followed in global
    memory (gmem.py). With ``check`` (the default) a finding raises
    :class:`SimulationFailed`; otherwise the result is returned either way.
    """
    from .frontend import kernels
    from .interp import Launch, make_world_factory

    for what, n, low in (("schedules", schedules, 1), ("max_steps", max_steps, 1),
                         ("seed", seed, None), ("clc_clusters", clc_clusters, 0)):
        if isinstance(n, bool) or not isinstance(n, int) or (low is not None and n < low):
            raise ValueError(f"simulate: {what} must be an int"
                             + (f" >= {low}" if low is not None else "") + f", got {n!r}")
    with module.context:
        ks = kernels(module)
    if kernel is not None:
        ks = [k for k in ks if k.name == kernel]
    if not ks:
        raise ValueError("simulate: no kernel with pipeline ops"
                         + (f" named @{kernel}" if kernel else "") + " in the module")
    mode = (f"exhaustive, preemption bound {exhaustive_bound}"
            if exhaustive_bound is not None else f"random, seed {seed}")
    result = SimResult()
    for k in ks:
        block = tuple(block_dim) if block_dim else (k.block_dim or (128, 1, 1))
        shape3 = tuple(cluster) if cluster else (k.cluster_size, 1, 1)
        names = {name: pos for pos, name in k.ptr_args.items() if name}
        maps = {}
        for key, tm in (tensor_maps or {}).items():
            if isinstance(key, str) and key not in names:
                raise ValueError(f"simulate: @{k.name} has no descriptor argument named {key!r}")
            maps[names[key] if isinstance(key, str) else key] = tm
        launch = Launch(block, shape3, trip_count, dict(args or {}),
                        clc_clusters=clc_clusters, grid=tuple(grid) if grid else None,
                        tensor_maps=maps)
        try:
            rep = explore(make_world_factory(k, launch, max_steps, seed), seed=seed,
                          schedules=schedules, exhaustive_bound=exhaustive_bound)
        except SimError as e:  # raised while building the world, not by a schedule
            raise ValueError(f"simulate: @{k.name}: {e.message}") from None
        kmode = mode + ("" if exhaustive_bound is None or rep.complete else ", truncated")
        findings = [Finding(err.kind, err.message, tuple(err.where), index)
                    for index, err in sorted(rep.first.values(), key=lambda ie: ie[0])]
        result.append(KernelResult(k.name, rep.schedules, dict(rep.counts), findings,
                                   describe_launch(k.name, launch, trip_count), kmode))
    if check and not result.ok:
        raise SimulationFailed(result)
    return result
