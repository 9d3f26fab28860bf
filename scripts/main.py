#!/usr/bin/env python3
"""The main job (run by scripts/setup.sh): build a pipelined kernel with the
Python builders, verify it (the dialect verifiers and the protocol checker),
round-trip it through `pipeline-opt`, lower it to PTX and a cubin for
sm_90a, and, when a Hopper GPU is present, launch it through its compiled
callable (``fn(out, n, grid=1)``) and check its result.

Every stage prints one line; any failure exits non-zero.
"""

import os
import shutil
import subprocess
import sys
import tempfile

import mlir.ir as ir
import mlir.passmanager as passmanager

import pipeline_mlir
from pipeline_mlir.dialects import pipeline as pl


def build_module():
    """A producer warp and a consumer warp handing stages through a
    PipelineAsync built with `make_participants` (the smallest complete
    pipeline: init, producer loop, consumer loop, tail)."""
    from examples import async_participants

    kernel = async_participants.build()
    return kernel, "examples/async_participants.py"


def main():
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
    kernel, origin = build_module()
    module = kernel.module
    with module.context, ir.Location.unknown():
        module.operation.verify()
        print(f"main: built and verified {origin}")

        passmanager.PassManager.parse(
            "builtin.module(pipeline-verify-protocol)").run(module.operation)
        print("main: protocol checker: no findings")

        tool = shutil.which("pipeline-opt")
        with tempfile.NamedTemporaryFile("w", suffix=".mlir", delete=False) as f:
            f.write(str(module))
        out = subprocess.run([tool, f.name], check=True, capture_output=True,
                             text=True).stdout
        os.unlink(f.name)
        assert str(ir.Module.parse(out)) == str(module), "pipeline-opt round trip changed the IR"
        print("main: pipeline-opt round trip: identical")

        ptx = kernel.to_ptx(chip="sm_90a")
        fn = kernel.compile(chip="sm_90a")
        from pipeline_mlir import compiler
        print(f"main: lowered to PTX ({len(ptx)} chars) and a cubin for sm_90a "
              f"({len(fn)} bytes, assembled by {compiler.resolve_assembler()})")

        from pipeline_mlir import runtime
        reason = runtime.no_gpu_reason()
        if reason:
            print(f"main: no GPU here ({reason.splitlines()[0][:80]}): skipped "
                  "running the kernel (docs/gpu-results.md has the Hopper runs)")
            return 0
        from examples import async_participants_run
        async_participants_run.run_and_check(fn)
        print("main: ran on the GPU: 10000 handoffs through 4 stages, all 32 "
              "sums correct")
    return 0


if __name__ == "__main__":
    sys.exit(main())
