"""An FP8 GEMM on Hopper: the warp-specialized, persistent kernel of
``pipeline_mlir/kernels/hopper_gemm.py`` on e4m3 operands, with per-tensor scales and a
bf16 output -- the contract of ``torch._scaled_mm``:

    C[M, N] = scale_a * scale_b * (A[M, K] @ B[N, K]^T)     (bf16 out)

A is M x K and B is given N x K, both K-major (wgmma reads 8-bit operands
K-major only); ``scale_a`` and ``scale_b`` are one-element fp32 device
tensors (pointers), read once per consumer thread and applied in the
epilogue, before the conversion to bf16. A fused epilogue (``epilogue=``,
``pipeline_mlir.kernel.epilogue``, the 16-bit GEMM's hook) runs on the
scaled accumulator: ``scaled_mm``'s bias is one (``fp8_configs.BIAS``).

Everything but the element type is the 16-bit kernel's: the operand layouts
(``OperandLayout``: a k-block is one 128-byte swizzle span, 128 e4m3), the
wgmma shape (``m64nNk32`` for 8-bit), the TMA boxes and the tx bytes all
follow from ``dtype="e4m3"``; nothing here repeats them.

Two accumulation modes, as cuBLASLt's ``use_fast_accum``:

- ``fast``: wgmma accumulates the whole K in the tensor core's accumulator,
  which for FP8 keeps fewer bits than fp32 (about 14, as DeepSeek-V3 reports
  for the H800); the error grows with K. Tile 128 x 256, as the 16-bit kernel.
- ``promoted``: each k-block's wgmma result, accumulated from zero (scale-d
  = 0 on its first instruction), is added into a separate fp32 accumulator
  on the CUDA cores -- DeepGEMM's and CUTLASS's "2xacc" way. Costs a second
  accumulator's registers (so the tile is 128 x 128 or 128 x 192: two of
  them must fit beside the addresses in 232 registers), a ``wait_group(0)``
  per k-block (each consumer warpgroup waits for its own wgmma before it
  adds; the other warpgroup's wgmma run meanwhile) and N / 2 FADDs per
  thread per k-block. With ``promotion_overlap`` (``promoted_mainloop.py``)
  two partials alternate and ``wait_group(1)`` keeps the next k-block's
  wgmma in flight while the previous partial is added: a third
  accumulator's registers (the 128 x 128 tile only), the same bits.

Shapes the tile does not divide, K included, need nothing: TMA zero-fills
what lies outside the tensors on load and clips the stores.

Split-K (``split_k = S``, for outputs of too few tiles to fill the SMs:
``ops/fp8_configs.choose``): the 16-bit kernel's, each unit's fp32
accumulator multiplied by ``scale_a * scale_b`` before it is stored into
the workspace slice of its split (the consumer scales every accumulator
before any store, partial or whole), so the reduction
(kernels/splitk_reduce.py) sums scaled partials -- the sum is linear --
and applies no scale; ``ops/scaled_mm.py`` runs the two.

Usage: python examples/fp8_gemm.py [--print-ir] [--fast] [--bn 128|192|256]
(builds, checks and compiles; ``pipeline_mlir/ops/fp8_gemm_host.py`` runs it).
"""

import sys
from dataclasses import replace

from pipeline_mlir.kernel.epilogue import Epilogue
from pipeline_mlir.kernels import hopper_gemm
from pipeline_mlir.layout import DTYPES

FAST = hopper_gemm.GemmConfig(dtype="e4m3", out_dtype="bf16", scaled=True,
                              block_n=256, accumulation="fast")
PROMOTED = replace(FAST, block_n=128, accumulation="promoted", stages=6)
PROMOTED_192 = replace(PROMOTED, block_n=192, epilogue_passes=3, stages=5)
CONFIGS = {"fast": FAST, "promoted": PROMOTED, "promoted_192": PROMOTED_192}


def split_config(cfg):
    """``cfg`` as the kernel is built: a split-K one (``split_k > 1``)
    writes fp32 partials whatever the call's output type, so its
    ``out_dtype`` is dropped (the 16-bit GEMM's split-K rule: the
    reduction, kernels/splitk_reduce.py, rounds into the output type);
    one kernel then serves a bf16 and an f16 call. Others unchanged."""
    return replace(cfg, out_dtype="") if cfg.split_k > 1 else cfg


def build(cfg=PROMOTED, chip="sm_90a"):
    """The FP8 kernel for ``cfg`` (a ``hopper_gemm.GemmConfig`` with an
    8-bit ``dtype``, a 16-bit output or split-K's fp32 partials, and
    scales)."""
    if DTYPES.get(cfg.dtype, (None,))[0] != 1:
        raise ValueError(f"fp8_gemm: dtype must be an 8-bit type (e4m3, e5m2), "
                         f"got {cfg.dtype!r}")
    cfg = split_config(cfg)
    if not cfg.scaled or cfg.c_dtype == cfg.dtype:
        raise ValueError("fp8_gemm: the FP8 GEMM takes per-tensor scales (scaled=True) "
                         "and writes a 16-bit C (out_dtype='bf16' or 'f16')")
    return hopper_gemm.build(cfg, chip=chip)


def build_variant(overrides, dtype, chip):
    """(cubin, launch facts) of the FP8 variant ``overrides`` (``GemmConfig``
    fields, ``pipeline_mlir.ops.fp8_configs.VARIANTS``) for ``dtype``
    '<operand type>-<output type>' ('e4m3-bf16'): the kernel cache's builder
    of this family."""
    from pipeline_mlir.ops.hopper_gemm_host import meta_of

    operands, out = dtype.split("-")
    overrides = dict(overrides)
    if overrides.get("epilogue") is not None:   # its to_json form (a cache key)
        overrides["epilogue"] = Epilogue.from_json(overrides["epilogue"])
    cfg = split_config(replace(FAST, dtype=operands, out_dtype=out, **overrides))
    k = build(cfg, chip=chip)
    meta = meta_of(cfg, k)
    meta["accumulation"] = cfg.accumulation
    return bytes(k.compile()), meta
