"""Build, check and compile the warp-specialized persistent Hopper GEMM.

The kernel is ``pipeline_mlir.kernels.hopper_gemm`` (what ``pipeline_mlir``'s ops
run); this script builds one configuration, verifies it, checks its
protocol and writes its cubin (``--out``, ``--print-ir``: see _common.py).
Imported as a module (``import hopper_gemm``, as the tests and benchmarks do), it is
that kernel module.
"""

import sys

from pipeline_mlir.kernels import hopper_gemm as _kernel

if __name__ != "__main__":
    sys.modules[__name__] = _kernel
else:
    from dataclasses import replace  # noqa: F401

    from _common import main
    from pipeline_mlir.kernels.hopper_gemm import GemmConfig, build  # noqa: F401
    cfg = GemmConfig()
    if "--cluster" in sys.argv:
        cfg = replace(cfg, cluster_m=2)
    if "--bn" in sys.argv:
        cfg = replace(cfg, block_n=int(sys.argv[sys.argv.index("--bn") + 1]))
    sys.exit(main(build(cfg), cfg.name))
