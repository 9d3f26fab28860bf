"""``pipeline-sim``: run a kernel's pipelines on the CPU and report bugs.

    pipeline-sim FILE [--kernel NAME] [--block-dim 128[,1,1]] [--cluster 2,1,1]
                      [--grid 4[,1,1]] [--trip-count N] [--arg POS=VALUE ...] [--seed S] [--schedules K]
                      [--exhaustive-bound B] [--trace] [--tensor-map POS=ELEM:DIMS:BOX[@ARG]]

Prints one line per kernel, ``pipeline-sim: OK: 200 schedules, 0 deadlocks
(@k, ...)``, or, for each kind of bug found, the first occurrence as
``pipeline-sim: <kind>: <message>`` with a note naming the kernel and the
schedule that shows it (``--trace`` prints that schedule step by step, with
the values its reads of global memory returned), then
``pipeline-sim: FAILED: ...`` with the number of schedules per kind of bug.
Exits 1 when any kernel has a bug, 2 on a usage or parse error.

Loops (and branches) bounded by integer kernel arguments that ``--arg`` does
not give run with values the simulator chooses: every such argument 4, then
distinct small values, then 1, until one finds a bug; a note names the
values (``pipeline-sim: note: @k: chose argument 0 = 4 ...``), so
``pipeline-sim FILE`` alone finds a producer that runs ``n`` stages against a
consumer that runs ``n - 1``. ``--trip-count`` turns the choice off.

Branches and loop bounds computed from values the kernel loads from a
pointer argument (a block-sparse mask, a decoded work item) read that
buffer: ``--arg POS=1,0,0,1`` gives its elements (``--arg POS=V``: every
element reads V); a buffer not given holds
a random 0/1 fill drawn afresh for every schedule. A finding's report then
names each such branch, what every warp took there and the values read
(``sim/memory.py``).

A kernel that synchronizes through global memory (atomics, a flag polled,
fences: a stream-K fix-up) has what it stores and reads back followed
(``sim/gmem.py``): a partial read with nothing ordering its store before the
read (the flag set before the store is fenced, a poll without acquire) is a
race naming both lines, a poll whose flag never takes its value a deadlock
naming the loop.

Tensor memory is followed (``sim/tmem.py``): the address ``tcgen05.alloc``
writes to shared memory read with no barrier after the alloc (a race), a
dealloc twice, before the alloc or unordered after another warp's (for
``cta_group::2``, the peer CTA's) tensor-memory op, a use after the dealloc,
an allocation never freed, a ``cta_group::2`` alloc before any cluster
barrier wait, a ``tcgen05.ld`` whose registers are used, or whose
accumulator stage is released, before ``tcgen05.wait::ld`` in its lanes,
and a ``tcgen05.ld`` of columns the warp's ``tcgen05.st`` may still write
(no ``tcgen05.wait::st`` between them).

The simulated grid is one cluster unless ``--grid X[,Y,Z]`` gives its CTAs
(``%nctaid``, a whole number of clusters along each axis, at most 32 CTAs):
``--cluster 2 --grid 4`` runs two clusters of two CTAs, each with its own
cluster barrier, multicast and shared memory, over one global memory
(``%clusterid`` 0 and 1, ``%ctaid.x`` 0 .. 3). Reports number the CTAs of
the grid cluster by cluster (CTA 3 is rank 1 of cluster 1). A partial read
by another cluster after only a cluster barrier (which orders its own
cluster's CTAs) is then a race.

TMA tensor stores and reduce-adds to global memory are followed when
``--tensor-map POS=ELEM:DIMS:BOX[:STRIDES][@ARG[+OFFSET]]`` describes the
map whose address argument POS holds (element bytes, the tensor's dims and
the copy's box, ``x``-separated, innermost first; byte strides of the
outer dims, default packed; ARG: the pointer argument the tensor lies in,
default a buffer of its own): the box's words land when a
``cp.async.bulk.wait_group`` without ``.read`` retires their group, and a
read of them by another warp needs that wait, then a release and an
acquire (a race naming the store otherwise); reduce-adds of the same words
by several warps need no order between them. Stores into another CTA's
shared memory through a ``mapa`` address are read by that CTA after a
cluster barrier, and ``st.async`` bytes after a wait on the mbarrier they
complete on (a race otherwise; a loop of one-try ``mbarrier.try_wait`` is
such a wait). A bulk or TMA store reads the whole tile the same source
line wrote before it: another warp's refill must follow the issuing
thread's ``wait_group.read`` through a barrier. A stage's TMA copies land
at their offset in every CTA of their multicast mask; two on the same
bytes in one phase are a race.
"""

from __future__ import annotations

import argparse
import sys

from .api import KIND_TITLES as _KIND_TITLES
from .engine import explore, replay
from .launch import MAX_CLUSTER_CTAS
from .model import SimError


def _dims(text: str) -> tuple[int, int, int]:
    vals = [int(x) for x in text.split(",")]
    if not 1 <= len(vals) <= 3 or any(v <= 0 for v in vals):
        raise argparse.ArgumentTypeError(f"expected X[,Y[,Z]] of positive integers, got {text!r}")
    return tuple(vals + [1] * (3 - len(vals)))


def _kernel_arg(text: str) -> tuple[int, int | list]:
    pos, sep, value = text.partition("=")
    try:
        if not sep:
            raise ValueError
        pos = int(pos)
        # A comma-separated list: the contents of a pointer argument's
        # buffer, element by element (memory.py).
        value = ([int(v, 0) for v in value.split(",")] if "," in value
                 else int(value, 0))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected POS=VALUE with integers (e.g. 4=256, or 1=1,0,0,1 for a buffer), "
            f"got {text!r}") from None
    if pos < 0:
        raise argparse.ArgumentTypeError(f"argument position must be >= 0, got {pos}")
    return pos, value


def _tensor_map(text: str):
    from .launch import TensorMap
    pos, sep, spec = text.partition("=")
    try:
        if not sep:
            raise ValueError("expected POS=ELEM:DIMS:BOX")
        return int(pos), TensorMap.parse(spec)
    except ValueError as e:
        raise argparse.ArgumentTypeError(
            f"expected POS=ELEM:DIMS:BOX[:STRIDES][@ARG[+OFFSET]] (e.g. 3=4:128x200:32x64@7), "
            f"got {text!r}: {e}") from None


def _block_dims(text: str) -> tuple[int, int, int]:
    dims = _dims(text)
    if dims[0] * dims[1] * dims[2] > 1024:
        raise argparse.ArgumentTypeError(f"a CTA holds at most 1024 threads, got {text!r}")
    return dims


def _cluster_dims(text: str) -> tuple[int, int, int]:
    dims = _dims(text)
    if dims[0] * dims[1] * dims[2] > MAX_CLUSTER_CTAS:
        raise argparse.ArgumentTypeError(f"a cluster holds at most {MAX_CLUSTER_CTAS} CTAs, "
                                         f"got {text!r}")
    return dims


def _grid_dims(text: str) -> tuple[int, int, int]:
    from .launch import MAX_GRID_CTAS
    dims = _dims(text)
    if dims[0] * dims[1] * dims[2] > MAX_GRID_CTAS:
        raise argparse.ArgumentTypeError(
            f"the simulator runs at most {MAX_GRID_CTAS} CTAs (every warp of every CTA is an "
            f"agent), got {text!r}")
    return dims


def _count(minimum: int):
    """argparse type: an int of at least ``minimum``, named in the error."""
    def parse(text: str) -> int:
        try:
            n = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if n < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {n}")
        return n
    return parse


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="pipeline-sim",
        description="Simulate the pipeline protocol of a kernel with its warps as concurrent "
                    "agents and report deadlocks, phase overruns and buffer overwrites.")
    ap.add_argument("file", help="a .mlir file (use - for stdin)")
    ap.add_argument("--kernel", help="simulate only this gpu.func/func.func")
    ap.add_argument("--block-dim", type=_block_dims,
                    help="threads per CTA (default: known_block_size, else 128)")
    ap.add_argument("--cluster", type=_cluster_dims,
                    help="cluster shape (default: the largest cluster of the kernel's pipelines, as X,1,1)")
    ap.add_argument("--grid", type=_grid_dims,
                    help="CTAs of the grid (%%nctaid), a whole number of clusters along each "
                         "axis, at most 32 CTAs (default: one cluster); the clusters share "
                         "global memory, each has its own cluster barrier")
    ap.add_argument("--trip-count", type=_count(0),
                    help="trip count of scf.for loops whose bounds are not constants")
    ap.add_argument("--arg", type=_kernel_arg, action="append", metavar="POS=VALUE",
                    help="value of the kernel's integer argument at position POS (repeatable); "
                         "loops bounded by arguments then run their real trip counts. For a "
                         "pointer argument, VALUE is its buffer's contents (V0,V1,...: the "
                         "elements its loads read; a single V: every element reads V; unset "
                         "buffers that a branch reads get a random 0/1 fill per schedule)")
    ap.add_argument("--tensor-map", type=_tensor_map, action="append",
                    metavar="POS=ELEM:DIMS:BOX[@ARG]",
                    help="the TMA tensor map whose address argument POS holds: element bytes, "
                         "the tensor's dims and the box, x-separated, innermost first "
                         "(ELEM:DIMS:BOX[:STRIDES], byte strides of the outer dims, default "
                         "packed), @ARG the pointer argument the tensor lies in (default: a "
                         "buffer of its own); its TMA stores and reduce-adds are then followed "
                         "in global memory (repeatable)")
    ap.add_argument("--clc-clusters", type=int, default=2, metavar="N",
                    help="cluster launch control: pending clusters that try_cancel takes "
                         "over before it fails (default 2)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the random scheduler")
    ap.add_argument("--schedules", type=_count(1), default=100,
                    help="random schedules to run (exhaustive mode: at most this many, default 100/10000)")
    ap.add_argument("--exhaustive-bound", type=_count(0), metavar="B",
                    help="explore every schedule with at most B preemptions (DFS) instead of random ones")
    ap.add_argument("--max-steps", type=_count(1), default=200000, help="steps per schedule before giving up")
    ap.add_argument("--trace", action="store_true",
                    help="print the steps of the first failing (random) schedule, with the "
                         "values its reads of global memory returned")
    return ap


def _parse(path: str):
    import mlir.ir as ir

    import pipeline_mlir
    ctx = pipeline_mlir.make_context()
    with ctx:
        if path == "-":
            return ctx, ir.Module.parse(sys.stdin.read())
        return ctx, ir.Module.parseFile(path)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    from .api import describe_launch
    from .frontend import choose_args, kernels, needs_arg_values
    from .interp import Launch, make_world_factory
    try:
        ctx, module = _parse(args.file)
    except Exception as e:  # parse/verifier errors come back as MLIRError
        print(f"pipeline-sim: error: {e}", file=sys.stderr)
        return 2
    with ctx:
        try:
            ks = kernels(module)
        except SimError as e:
            print(f"pipeline-sim: unsupported: {e.message}")
            return 1
    if args.kernel:
        ks = [k for k in ks if k.name == args.kernel]
    if not ks:
        print("pipeline-sim: error: no kernel with pipeline ops"
              + (f" named @{args.kernel}" if args.kernel else ""), file=sys.stderr)
        return 2
    schedules = args.schedules
    if args.exhaustive_bound is not None and "--schedules" not in (argv or sys.argv):
        schedules = 10000
    failed = False
    for k in ks:
        block = args.block_dim or k.block_dim or (128, 1, 1)
        cluster = args.cluster or (k.cluster_size, 1, 1)
        try:  # the kernel's own known_block_size may exceed the limits
            launch = Launch(block, cluster, args.trip_count, dict(args.arg or ()),
                            clc_clusters=args.clc_clusters, grid=args.grid,
                            tensor_maps=dict(args.tensor_map or ()))
        except ValueError as e:
            print(f"pipeline-sim: error: @{k.name}: {e}", file=sys.stderr)
            return 2
        make = make_world_factory(k, launch, args.max_steps, args.seed)
        rep = explore(make, seed=args.seed, schedules=schedules,
                      exhaustive_bound=args.exhaustive_bound)
        given = dict(args.arg or ())
        if args.trip_count is None and any(needs_arg_values(e) for _, e in rep.first.values()):
            # Bounds from arguments not given: try small values for them.
            for choice in choose_args(k, given):
                launch = Launch(block, cluster, None, {**given, **choice},
                                clc_clusters=args.clc_clusters, grid=args.grid,
                                tensor_maps=dict(args.tensor_map or ()))
                make = make_world_factory(k, launch, args.max_steps, args.seed)
                rep = explore(make, seed=args.seed, schedules=schedules,
                              exhaustive_bound=args.exhaustive_bound)
                values = ", ".join(f"argument {pos} = {v}" for pos, v in sorted(choice.items()))
                print(f"pipeline-sim: note: @{k.name}: chose {values} (not given with --arg)")
                if not rep.ok:
                    break
        mode = (f"exhaustive, preemption bound {args.exhaustive_bound}"
                f"{'' if rep.complete else ', truncated'}"
                if args.exhaustive_bound is not None else f"random, seed {args.seed}")
        shape = describe_launch(k.name, launch, args.trip_count)
        if rep.ok:
            print(f"pipeline-sim: OK: {rep.schedules} schedules, 0 deadlocks ({shape}; {mode})")
            continue
        failed = True
        for index, err in sorted(rep.first.values(), key=lambda ie: ie[0]):
            print(f"pipeline-sim: {_KIND_TITLES.get(err.kind, err.kind)}: {err.message}")
            for where in err.where:
                print(f"pipeline-sim: note: {where}")
            print(f"pipeline-sim: note: @{k.name}, schedule {index} ({mode})")
        counts = ", ".join(f"{n} {kind}" for kind, n in sorted(rep.counts.items()))
        print(f"pipeline-sim: FAILED: {rep.schedules} schedules, {counts} ({shape}; {mode})")
        if args.trace and args.exhaustive_bound is None:
            first = min(i for i, _ in rep.first.values())
            for line in replay(make, seed=args.seed, index=first):
                print(f"  {line}")
    return 1 if failed else 0
