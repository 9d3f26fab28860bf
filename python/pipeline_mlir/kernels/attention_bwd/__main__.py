"""``python -m pipeline_mlir.kernels.attention_bwd [--d 64|128|256] [--causal]
[--print-ir]``: build the backward in the op's configuration for this head
dim, check and compile it (prints the PTX, or the IR).
"""

import sys

from pipeline_mlir.ops import attention_configs

from .builder import build
from .config import AttentionBwdConfig

d = int(sys.argv[sys.argv.index("--d") + 1]) if "--d" in sys.argv else 128
# The configuration the op runs for this head dim (d 256: one stage).
_, overrides = attention_configs.bwd_variant(d, "--causal" in sys.argv)
kern = build(AttentionBwdConfig(**overrides))
if "--print-ir" in sys.argv:
    print(kern)
else:
    print(kern.compile())
