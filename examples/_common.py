"""Shared `main()` of the example scripts: verify, lower, write the cubin
(and its launch metadata beside it, for `runtime.CompiledKernel.from_file`)."""

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
        fn = kernel.compile()
    except LoweringUnavailable as e:
        print(f"{stem}: not lowered: {e}", file=log)
        return 0
    out_dir = os.environ.get("PIPELINE_EXAMPLES_OUT",
                             os.path.join(os.path.dirname(__file__), "out"))
    os.makedirs(out_dir, exist_ok=True)
    path = fn.save(os.path.join(out_dir, f"{stem}.{kernel.chip}.cubin"))
    print(f"{stem}: cubin {len(fn)} bytes -> {path} (launch metadata: "
          f"{os.path.splitext(path)[0]}.json)", file=log)
    return 0
