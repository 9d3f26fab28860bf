"""Ready-made operations on the package's kernels; need no MLIR at run time.

- ``pipeline_mlir.gemm`` (gemm.py): bf16/fp16 GEMM, variant by shape
  (``gemm_configs``), launched by ``hopper_gemm_host``;
- ``pipeline_mlir.scaled_mm`` (scaled_mm.py): FP8 GEMM with per-tensor
  scales, ``torch._scaled_mm``'s contract (``fp8_configs``, ``fp8_gemm_host``);
- ``pipeline_mlir.attention`` (attention.py): attention in
  ``flash_attn_func``'s layout (``attention_configs``, ``attention_fwd_host``),
  differentiable: its backward is the custom op ``attention_backward``
  (``attention_bwd_host``).

Each imports torch and is a torch custom op; ``kernel_cache`` finds the
compiled variants on disk (compiling them where MLIR is installed). The
launchers (``hopper_gemm_host``, ``fp8_gemm_host``, ``attention_fwd_host``,
``attention_bwd_host``...) need only the runtime and torch.
"""
