"""The example's name for ``pipeline_mlir.ops.attention_fwd_host`` (the launcher, no
MLIR needed), kept for the scripts and bundles that import it."""

import sys

from pipeline_mlir.ops import attention_fwd_host as _host

sys.modules[__name__] = _host
