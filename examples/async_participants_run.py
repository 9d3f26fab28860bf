"""Run examples/async_participants.py's kernel and check its result.

The kernel is launched through its compiled callable, which knows the
block size, shared memory and parameters: ``fn(out, n, grid=1)``. Needs only
the runtime (cuda-bindings + numpy), not MLIR, so it also runs on a GPU
host that has just the cubin and its metadata (written side by side by
``python examples/async_participants.py --out DIR``; copy DIR there):

    python examples/async_participants.py --out kernels
    python examples/async_participants_run.py kernels/async_participants.sm_90a.cubin

The producer warp writes ``i * 32 + lane`` into stage ``i % S`` for
``i < n``; the consumer warp sums what it reads, so lane ``l`` must hold
``32 * n * (n - 1) / 2 + n * l``.
"""

import sys

import numpy as np

from pipeline_mlir import runtime


def expected(n):
    lanes = np.arange(32, dtype=np.int64)
    return (32 * n * (n - 1) // 2 + n * lanes).astype(np.int32)


def run_and_check(fn, n=10_000):
    """Launch the CompiledKernel ``fn`` on the current GPU; raise
    AssertionError on a wrong result."""
    out = np.full(32, -1, dtype=np.int32)   # a host array: copied in and back
    launch = fn(out, n, grid=1, timeout=10.0)
    want = expected(n)
    bad = np.nonzero(out != want)[0]
    assert bad.size == 0, (f"lanes {bad.tolist()[:8]} wrong: got {out[bad][:8].tolist()}, "
                           f"want {want[bad][:8].tolist()}")
    return launch


if __name__ == "__main__":
    run_and_check(runtime.CompiledKernel.from_file(sys.argv[1]))
    print("async_participants: 10000 handoffs through 4 stages, all 32 sums correct")
