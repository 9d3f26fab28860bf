"""The library's kernels, as builders (MLIR needed to build them): each
module's ``build(cfg, chip)`` returns a ``pipeline_mlir.kernel.Kernel``.

- ``hopper_gemm``: warp-specialized persistent bf16/fp16 GEMM (sm_90a);
- ``fp8_gemm``: the same on e4m3/e5m2 with per-tensor scales;
- ``attention_fwd``, ``attention_bwd``: FlashAttention-3-class forward and
  backward (sm_90a), packages of one stage per module;
- ``blackwell_gemm``: tcgen05 + TMEM + CLC GEMM (sm_100a, compile-checked).

Their launchers live in ``pipeline_mlir.ops`` (no MLIR needed there), and
``pipeline_mlir.gemm`` / ``scaled_mm`` / ``attention`` call them. Importing
this package does not import MLIR; importing a kernel module does.
"""
