"""Build, check and compile the FP8 (e4m3) Hopper GEMM with per-tensor scales.

The kernel is ``pipeline_mlir.kernels.fp8_gemm`` (what ``pipeline_mlir``'s ops
run); this script builds one configuration, verifies it, checks its
protocol and writes its cubin (``--out``, ``--print-ir``: see _common.py).
Imported as a module (``import fp8_gemm``, as the tests and benchmarks do), it is
that kernel module.
"""

import sys

from pipeline_mlir.kernels import fp8_gemm as _kernel

if __name__ != "__main__":
    sys.modules[__name__] = _kernel
else:
    from dataclasses import replace  # noqa: F401

    from _common import main
    from pipeline_mlir.kernels.fp8_gemm import FAST, PROMOTED, build  # noqa: F401
    cfg = FAST if "--fast" in sys.argv else PROMOTED
    if "--bn" in sys.argv:
        bn = int(sys.argv[sys.argv.index("--bn") + 1])
        cfg = replace(cfg, block_n=bn, epilogue_passes=3 if bn == 192 else 2)
    sys.exit(main(build(cfg), cfg.name))
