"""How the GPU suite builds, launches and checks the kernels made with the
Python builders (``pipeline_mlir.pipeline`` classes inside
``pipeline_mlir.kernel`` kernels). The kernels themselves are examples:

- pipeline_async, pipeline_cp_async: examples/copy_ring.py, blocked
  schedule, 4 KiB tiles, 4 stages, warp 0 consumes and warp 1 produces,
  every lane arrives; PipelineAsync through ``make_participants`` handles,
  PipelineCpAsync with 16-byte ``cp.async.cg``;
- pipeline_tma_async(_mcast), pipeline_tma_store, pipeline_order,
  named_barrier: examples/tile_copies.py.

:data:`SPECS` says how the bundle launches each (grid, block, cluster,
arguments) and :func:`bundle_builder` turns a spec into a builder for
test/gpu/builders.py. Every kernel copies 4 KiB tiles of ``src`` to ``dst``
(block ``b`` the tiles ``[b*T, (b+1)*T)``); the host checks every byte.
"""

import os
import sys

_EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "examples")
if _EXAMPLES not in sys.path:
    sys.path.insert(0, _EXAMPLES)

import copy_ring  # noqa: E402
from tile_copies import (TILE, TILE_ROWS, ROW_BYTES, XOR32, named_barrier,  # noqa: E402,F401
                         pipeline_order, pipeline_tma_async, pipeline_tma_async_mcast,
                         pipeline_tma_store)


def pipeline_async(chip="sm_90a", name="builders_pipeline_async", num_stages=4):
    return copy_ring.build("async", num_stages, TILE, participants=True, chip=chip,
                           name=name, pipeline_name="ab")


def pipeline_cp_async(chip="sm_90a", name="builders_pipeline_cp_async", num_stages=4):
    return copy_ring.build("cpasync", num_stages, TILE, chip=chip, name=name,
                           pipeline_name="ab")


# --------------------------------------------------------------------------
# How the bundle launches each kernel
# --------------------------------------------------------------------------

# kind -> (build function, pipeline class, stages, block, cluster, signature,
#          kernel parameter order, TMA box rows or None, dst copies, xor32)
SPECS = {
    "pipeline_async": (pipeline_async, "PipelineAsync", 4, 64, 1,
                       ("ptr", "ptr", "i32"), ("src", "dst", "ntiles"), None, 1, None),
    "pipeline_cp_async": (pipeline_cp_async, "PipelineCpAsync", 4, 64, 1,
                          ("ptr", "ptr", "i32"), ("src", "dst", "ntiles"), None, 1, None),
    "pipeline_tma_async": (pipeline_tma_async, "PipelineTmaAsync", 4, 64, 1,
                           ("tma", "ptr", "i32"), ("desc", "dst", "ntiles"), TILE_ROWS, 1,
                           None),
    "pipeline_tma_async_mcast": (pipeline_tma_async_mcast, "PipelineTmaAsync", 4, 64, 2,
                                 ("tma", "ptr", "i32"), ("desc", "dst", "ntiles"),
                                 TILE_ROWS // 2, 2, None),
    "pipeline_tma_store": (pipeline_tma_store, "PipelineTmaStore", 3, 128, 1,
                           ("ptr", "tma", "i32"), ("src", "desc", "ntiles"), TILE_ROWS, 1,
                           None),
    "pipeline_order": (pipeline_order, "PipelineOrder", 3, 96, 1,
                       ("ptr", "ptr", "i32"), ("src", "dst", "ntiles"), None, 1, XOR32),
    "named_barrier": (named_barrier, "NamedBarrier", 3, 64, 1,
                      ("ptr", "ptr", "i32"), ("src", "dst", "ntiles"), None, 1, None),
}

GRID = 128  # CTAs (64 clusters of 2 for the multicast kernel)


def manifest_entry(kind, kernel, mib, grid=GRID):
    """The manifest entry (test/gpu/builders.py's contract) of ``kernel``,
    built by SPECS[kind], moving ``mib`` MiB."""
    _, pipeline, stages, block, cluster, signature, order, box_rows, times, xor32 = SPECS[kind]
    nbytes = mib << 20
    tiles = nbytes // TILE
    if tiles % grid:
        raise ValueError(f"{kind}: {mib} MiB is not a whole number of tiles per CTA")
    rows = nbytes // ROW_BYTES
    # the multicast kernel counts the tiles of a cluster
    ntiles = tiles // grid * cluster
    src = {"role": "in", "name": "src", "bytes": nbytes}
    dst = {"role": "out", "name": "dst", "bytes": nbytes * times}
    count = {"role": "scalar", "name": "ntiles", "type": "i32", "value": ntiles}
    args = {"src": src, "dst": dst, "ntiles": count}
    if "desc" in order:
        of = "dst" if "src" in order else "src"
        args["desc"] = {"role": "tma", "of": of, "dtype": "uint32", "shape": [rows, 64],
                        "box": [box_rows, 64], "swizzle": 0, "by_value": False}
        # the described buffer is no kernel parameter of its own; list it last
        # (gpu_child.Prepared makes a buffer named by a descriptor on demand)
        listed = [args[n] for n in order] + [dict(args[of], param=False)]
    else:
        listed = [args[n] for n in order]
    expect = {"from": "src", "times": times}
    if xor32 is not None:
        expect["xor32"] = xor32
    return {
        "name": kernel.name, "pipeline": pipeline,
        "source": "Python builders (examples/, launched as test/gpu/builder_kernels.py says)", "kernel": kernel.name,
        "grid": [grid, 1, 1], "block": [block, 1, 1], "cluster": [cluster, 1, 1],
        "smem": kernel.smem_bytes, "signature": list(signature), "args": listed,
        "check": "copy", "expect": {"outputs": {"dst": expect}},
        "timeout": 30.0, "bytes": nbytes, "stages": stages,
    }


def build(kind, chip="sm_90a"):
    """The Kernel of ``kind`` (a key of SPECS)."""
    return SPECS[kind][0](chip)


def simulate(kernel, kind, trip_count=5, schedules=10, seed=7):
    """Run ``kernel`` (launched as SPECS[kind] says, one cluster) in the CPU
    simulator with ``trip_count`` tiles; returns the sim's Report."""
    from pipeline_mlir.sim import explore
    from pipeline_mlir.sim.frontend import kernels
    from pipeline_mlir.sim.interp import Launch, make_world_factory

    block, cluster = SPECS[kind][3], SPECS[kind][4]
    with kernel.context:
        (sim_kernel,) = kernels(kernel.module)
        make = make_world_factory(sim_kernel, Launch((block, 1, 1), (cluster, 1, 1), trip_count))
        return explore(make, seed=seed, schedules=schedules)


def bundle_builder(kind, mib):
    """A builder for test/gpu/builders.py: ``build(chip, _mib)`` -> [Built].
    A kernel the simulator finds a bug in, or that does not compile, is
    skipped with the reason."""

    def build_for_bundle(chip, _mib):
        import builders as b

        kernel = build(kind, chip)
        kernel.verify()
        rep = simulate(kernel, kind)
        if not rep.ok:
            raise b.Unavailable("pipeline-sim found " + "; ".join(
                f"{k}: {e}" for k, (_, e) in rep.first.items())[:600])
        try:
            image = kernel.compile(chip)   # pipeline-to-cubin, verify-protocol on
        except Exception as err:  # lowering/ptxas diagnostics -> a visible skip
            raise b.Unavailable(f"pipeline-to-cubin failed: {str(err)[:600]}") from None
        return [b.Built(manifest_entry(kind, kernel, mib), image)]

    return build_for_bundle
