"""Ready-made operations on the package's kernels; need no MLIR at run time.

``pipeline_mlir.gemm`` (ops/gemm.py, imports torch) is the one-call GEMM;
``gemm_configs`` picks its variant by shape, ``kernel_cache`` finds the
compiled variant on disk, ``hopper_gemm_host`` launches it.
"""
