"""The example's name for ``pipeline_mlir.ops.fp8_gemm_host`` (the launcher, no
MLIR needed), kept for the scripts and bundles that import it."""

import sys

from pipeline_mlir.ops import fp8_gemm_host as _host

sys.modules[__name__] = _host
