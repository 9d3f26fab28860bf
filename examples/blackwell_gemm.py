"""Build, check and compile the Blackwell (sm_100a) GEMM: tcgen05, TMEM, CLC.

The kernel is ``pipeline_mlir.kernels.blackwell_gemm`` (what ``pipeline_mlir``'s ops
run); this script builds one configuration, verifies it, checks its
protocol and writes its cubin (``--out``, ``--print-ir``: see _common.py).
Imported as a module (``import blackwell_gemm``, as the tests and benchmarks do), it is
that kernel module.
"""

import sys

from pipeline_mlir.kernels import blackwell_gemm as _kernel

if __name__ != "__main__":
    sys.modules[__name__] = _kernel
else:
    from dataclasses import replace  # noqa: F401

    from _common import main
    from pipeline_mlir.kernels.blackwell_gemm import GemmConfig, build  # noqa: F401
    cfg = GemmConfig()
    if "--pair" in sys.argv:
        cfg = replace(cfg, cta_group=2)
    if "--static" in sys.argv:
        cfg = replace(cfg, scheduler="static")
    sys.exit(main(build(cfg), cfg.name))
