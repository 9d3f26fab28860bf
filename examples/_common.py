"""Shared `main()` of the example scripts: verify, lower, write the cubin."""

import os
import sys

from pipeline_mlir.kernel import LoweringUnavailable


def main(kernel, stem):
    # With --print-ir, stdout is the module alone (status lines go to stderr)
    # so that it pipes into pipeline-opt or `python -m pipeline_mlir.sim -`.
    print_ir = "--print-ir" in sys.argv
    log = sys.stderr if print_ir else sys.stdout
    kernel.verify()
    print(f"{stem}: built and verified {kernel.name} for {kernel.chip} "
          f"({kernel.smem_bytes} bytes of dynamic shared memory)", file=log)
    if print_ir:
        print(kernel, flush=True)
    try:
        cubin = kernel.compile()
    except LoweringUnavailable as e:
        print(f"{stem}: not lowered: {e}", file=log)
        return 0
    out_dir = os.environ.get("PIPELINE_EXAMPLES_OUT",
                             os.path.join(os.path.dirname(__file__), "out"))
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, f"{stem}.{kernel.chip}.cubin")
    with open(path, "wb") as f:
        f.write(cubin)
    print(f"{stem}: cubin {len(cubin)} bytes -> {path}", file=log)
    return 0
