"""Host side of examples/hopper_gemm.py: launch the compiled GEMM on torch
tensors and check it against ``torch.matmul``.

The launcher lives in the package (``pipeline_mlir.ops.hopper_gemm_host``),
where ``pipeline_mlir.gemm`` uses it; this module keeps the example's name
for the scripts and bundles that import it. Needs no MLIR.

    gemm = HopperGemm(cubin_bytes, meta)        # meta: GemmConfig's facts
    c = gemm(a, b)                              # C = A @ B^T, B given N x K
"""

from pipeline_mlir.ops.hopper_gemm_host import (META_KEYS, REL_ERROR_BOUND,  # noqa: F401
                                                HopperGemm, check, meta_of)
