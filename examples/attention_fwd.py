"""Build, check and compile the FlashAttention-3-class attention forward for Hopper.

The kernel is ``pipeline_mlir.kernels.attention_fwd`` (what ``pipeline_mlir``'s ops
run); this script builds one configuration, verifies it, checks its
protocol and writes its cubin (``--out``, ``--print-ir``: see _common.py).
Imported as a module (``import attention_fwd``, as the tests and benchmarks do), it is
that kernel package (its ``__init__``: ``AttentionConfig``, ``build``, the stages).
"""

import sys

from pipeline_mlir.kernels import attention_fwd as _kernel

if __name__ != "__main__":
    sys.modules[__name__] = _kernel
else:
    from dataclasses import replace  # noqa: F401

    from _common import main
    from pipeline_mlir.kernels.attention_fwd import AttentionConfig, build  # noqa: F401
    cfg = AttentionConfig()
    if "--d" in sys.argv:
        cfg = replace(cfg, head_dim=int(sys.argv[sys.argv.index("--d") + 1]))
    if "--causal" in sys.argv:
        cfg = replace(cfg, causal=True)
    if "--pack-gqa" in sys.argv:   # query heads per K/V head one tile packs: 2, 4 or 8
        cfg = replace(cfg, pack_gqa=int(sys.argv[sys.argv.index("--pack-gqa") + 1]))
    if "--fp8" in sys.argv:        # the e4m3 forward in pipeline_mlir.attention_fp8's configuration
        from pipeline_mlir.ops.attention_fp8_configs import variant

        cfg = AttentionConfig(**variant(cfg.head_dim, cfg.causal)[1], dtype="e4m3")
    sys.exit(main(build(cfg), cfg.name))
