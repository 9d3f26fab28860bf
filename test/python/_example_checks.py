"""Run the two protocol tools on example kernels (their printed IR).

``EXAMPLES`` maps a case name to a function that builds the example's
Kernel. ``example_ir(case)`` is its printed module. ``verify_protocol(text)``
parses the text and runs the ``pipeline-verify-protocol`` pass, returning the
list of diagnostics (errors with their notes); a parse or op-verifier failure
comes back the same way, so a planted bug that the dialect already rejects is
reported with its message too. ``simulate(text)`` runs ``pipeline_mlir.sim``
on every kernel of the text and returns ``{kernel: Report}``.
"""

import functools
import os
import sys

import mlir.ir as ir
import mlir.passmanager as passmanager

import pipeline_mlir

EXAMPLES_DIR = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
if EXAMPLES_DIR not in sys.path:
    sys.path.insert(0, EXAMPLES_DIR)

import async_participants  # noqa: E402
import copy_ring  # noqa: E402
import pingpong  # noqa: E402
import tma_reduction  # noqa: E402
import tma_store_epilogue  # noqa: E402
import tma_umma_mainloop  # noqa: E402

EXAMPLES = {
    "async_participants": async_participants.build,
    # the copy ring as the GPU suite builds it (blocked, one warp per role,
    # every lane arrives) and as the streaming benchmark does (persistent,
    # 4 + 4 warps, one arrive per warp)
    "copy_ring_async": lambda: copy_ring.build("async", participants=True,
                                               name="copy_ring_async"),
    "copy_ring_cpasync": lambda: copy_ring.build("cpasync", name="copy_ring_cpasync"),
    "copy_ring_stream_async": lambda: copy_ring.build(
        "async", 3, 16384, producer_warps=4, consumer_warps=4, schedule="persistent",
        per_warp=True, name="copy_ring_stream_async"),
    "copy_ring_stream_cpasync": lambda: copy_ring.build(
        "cpasync", 2, 16384, producer_warps=4, consumer_warps=4, schedule="persistent",
        per_warp=True, name="copy_ring_stream_cpasync"),
    "copy_ring_stream_tma": lambda: copy_ring.build(
        "tma", 4, 16384, consumer_warps=4, schedule="persistent", per_warp=True,
        name="copy_ring_stream_tma"),
    "copy_ring_stream_tma2d": lambda: copy_ring.build(
        "tma2d", 3, 16384, consumer_warps=4, schedule="persistent", per_warp=True,
        name="copy_ring_stream_tma2d"),
    "pingpong": lambda: pingpong.build(2, name="pingpong"),
    "tma_reduction": tma_reduction.build,
    "tma_reduction_cluster": lambda: tma_reduction.build(cluster=2),
    "tma_store_epilogue": tma_store_epilogue.build,
    "tma_umma_mainloop": tma_umma_mainloop.build,
}

# Loops run on the kernels' runtime trip counts (a kernel argument): more
# than the stage counts of the examples so that every stage wraps around.
TRIP_COUNT = 6


@functools.lru_cache(maxsize=None)
def example_ir(case: str) -> str:
    return str(EXAMPLES[case]().module)


def _diag_text(d) -> str:
    # MLIR adds a "see current operation" note to pass failures: not ours.
    return d.message + "".join(f"\n  note: {n.message}" for n in d.notes
                               if not n.message.startswith("see current operation"))


def verify_protocol(text: str) -> list[str]:
    """Errors (message, then its notes as "\n  note: ..." lines) of parsing
    ``text`` and running pipeline-verify-protocol; empty when accepted."""
    with pipeline_mlir.make_context():
        try:
            module = ir.Module.parse(text)
            passmanager.PassManager.parse(
                "builtin.module(pipeline-verify-protocol)").run(module.operation)
        except ir.MLIRError as e:
            return [_diag_text(d) for d in e.error_diagnostics] or [str(e)]
    return []


def protocol_warnings(text: str) -> list[str]:
    """Warnings of a pipeline-verify-protocol run that succeeds (a missing
    tail where nothing can arrive after the CTA exits)."""
    found = []

    def handler(d):
        if d.severity == ir.DiagnosticSeverity.WARNING:
            found.append(_diag_text(d))
        return True

    with pipeline_mlir.make_context() as ctx:
        module = ir.Module.parse(text)
        ctx.attach_diagnostic_handler(handler)
        passmanager.PassManager.parse(
            "builtin.module(pipeline-verify-protocol)").run(module.operation)
    return found


def simulate(text: str, *, schedules: int = 30, seed: int = 0, trip_count: int = TRIP_COUNT,
             cluster=None, args=None) -> dict:
    """``{kernel name: Report}`` of the simulator on every kernel of ``text``;
    ``args`` gives integer kernel arguments by position (``{3: 5}``)."""
    from pipeline_mlir.sim.engine import explore
    from pipeline_mlir.sim.frontend import kernels
    from pipeline_mlir.sim.interp import Launch, make_world_factory
    ctx = pipeline_mlir.make_context()
    out = {}
    with ctx:
        module = ir.Module.parse(text)
        for k in kernels(module):
            launch = Launch(k.block_dim or (128, 1, 1), cluster or (k.cluster_size, 1, 1),
                            trip_count, dict(args or {}))
            out[k.name] = explore(make_world_factory(k, launch), seed=seed, schedules=schedules)
    return out


def messages(report) -> dict:
    """``{kind: message}`` of the first occurrence of each bug kind."""
    return {kind: err.message for kind, (_, err) in report.first.items()}
