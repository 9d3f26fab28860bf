"""Shared `main()` of the example scripts: verify, lower, write the cubin
(and its launch metadata beside it, for `runtime.CompiledKernel.from_file`).

Every example takes these options (besides its own):

  --out DIR    where the cubin and its .json go (created if missing). The
               default is `pipeline-mlir-examples` in the system's temporary
               directory (`tempfile.gettempdir()`, /tmp on Linux), so running
               an example never writes into the source tree.
  --print-ir   print the kernel's module (with the locations of the Python
               lines that built each op) alone on stdout, for `pipeline-opt`
               or `pipeline-sim -`; status lines go to stderr.
"""

import argparse
import os
import sys
import tempfile

from pipeline_mlir.kernel import LoweringUnavailable

DEFAULT_OUT = os.path.join(tempfile.gettempdir(), "pipeline-mlir-examples")


def options(argv=None):
    """(--out, --print-ir) of the command line; other options are the
    example's own and are left to it."""
    ap = argparse.ArgumentParser(add_help=False)
    ap.add_argument("--out", default=DEFAULT_OUT, metavar="DIR")
    ap.add_argument("--print-ir", action="store_true")
    known, _ = ap.parse_known_args(sys.argv[1:] if argv is None else argv)
    return known


def main(kernel, stem, argv=None):
    opts = options(argv)
    log = sys.stderr if opts.print_ir else sys.stdout
    kernel.verify()
    print(f"{stem}: built and verified {kernel.name} for {kernel.chip} "
          f"({kernel.smem_bytes} bytes of dynamic shared memory)", file=log)
    if opts.print_ir:
        print(kernel, flush=True)
    try:
        fn = kernel.compile()
    except LoweringUnavailable as e:
        print(f"{stem}: not lowered: {e}", file=log)
        return 0
    os.makedirs(opts.out, exist_ok=True)
    path = fn.save(os.path.join(opts.out, f"{stem}.{kernel.chip}.cubin"))
    print(f"{stem}: cubin {len(fn)} bytes -> {path} (launch metadata: "
          f"{os.path.splitext(path)[0]}.json)", file=log)
    return 0
