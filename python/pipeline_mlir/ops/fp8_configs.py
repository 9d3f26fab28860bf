"""Which FP8 GEMM variant runs a given (M, N, K, accumulation): the table
of ``pipeline_mlir.kernels.fp8_gemm`` variants and the rule that picks one.

``torch._scaled_mm``'s ``use_fast_accum`` chooses the accumulation mode:
``fast`` accumulates every K block's wgmma into the fp32 registers (as
cuBLASLt's fast accumulation does), ``promoted`` adds each K block's partial
sum into a separate fp32 total (DeepGEMM's 2xacc), which costs registers
and so wants narrower tiles. Within a mode the rule is the GEMM's
(``gemm_configs``): one CTA per SM over the output tiles, so the tile whose
last wave wastes the fewest SMs wins, weighted by how well the tile shape
reuses its operands (``EFFICIENCY``). ``TUNED`` holds measured winners by
shape, before the rule (``benchmarks/gemm/fp8_sweep.py`` prints them).
"""

import math

from pipeline_mlir.chip_limits import WGMMA_M

from .epilogues import Epilogue

# name -> fp8_gemm GemmConfig overrides (over fp8_gemm.FAST)
VARIANTS = {
    "fast_128x256": dict(block_n=256, accumulation="fast"),
    "fast_128x192": dict(block_n=192, epilogue_passes=3, stages=5, accumulation="fast"),
    "fast_128x128": dict(block_n=128, stages=6, accumulation="fast"),
    "fast_64x256": dict(block_n=256, consumer_warpgroups=1, epilogue_passes=1, stages=6,
                        accumulation="fast"),
    "promoted_128x128": dict(block_n=128, stages=6, accumulation="promoted"),
    "promoted_128x192": dict(block_n=192, epilogue_passes=3, stages=5, accumulation="promoted"),
    "promoted_64x128": dict(block_n=128, consumer_warpgroups=1, stages=8,
                            accumulation="promoted"),
}
# Tile reuse relative to the widest tile of the mode (operand bytes per
# FLOP, as in gemm_configs). Promoted accumulation adds each K block's
# partial sum into the total with FMAs the tensor cores do not hide; the
# 128x192 tile amortizes them best (the first sweep, H200: it led or tied
# on 14 of 24 shapes), and the 64-row tile, whose single consumer
# warpgroup waits on every promotion, was slower than 128-row tiles at
# every M it was picked for.
EFFICIENCY = {"fast_128x256": 1.0, "fast_128x192": 0.93, "fast_128x128": 0.9,
              "fast_64x256": 0.8, "promoted_128x192": 1.0, "promoted_128x128": 0.93,
              "promoted_64x128": 0.6}
# (m, n, k, accumulation) -> variant: the BEST lines of
# benchmarks/gemm/fp8_sweep.py (a variant > 1% ahead of the rule's pick).
TUNED = {
    (1024, 1024, 1024, "fast"): "fast_128x192",
    (2048, 2048, 2048, "fast"): "fast_128x128",
    (8192, 8192, 8192, "fast"): "fast_128x192",
    (128, 4096, 4096, "fast"): "fast_64x256",
    (512, 4096, 4096, "fast"): "fast_64x256",
    (2048, 4096, 4096, "fast"): "fast_128x128",
    (4096, 1024, 4096, "fast"): "fast_128x128",
    (128, 4096, 4096, "promoted"): "promoted_128x128",
}
# The output types the kernels write (torch._scaled_mm's out_dtype).
OUT_DTYPES = ("bf16", "f16")
# scaled_mm's ``bias``: one value per output column, of the output dtype,
# added in the kernel's epilogue after the scales (torch._scaled_mm's
# order). Each variant with it is its own cache entry (``fused``).
BIAS = Epilogue(bias="col")


def tile(variant):
    cfg = VARIANTS[variant]
    return WGMMA_M * cfg.get("consumer_warpgroups", 2), cfg["block_n"]


def estimate(variant, m, n, sms):
    bm, bn = tile(variant)
    tiles = math.ceil(m / bm) * math.ceil(n / bn)
    return math.ceil(tiles / sms) * bm * bn / EFFICIENCY[variant]


def fused(variant, epilogue):
    """(cache-entry name, fp8_gemm GemmConfig overrides) of ``variant`` with
    a fused ``epilogue`` (an ``epilogues.Epilogue``, e.g. ``BIAS``); None
    or an identity one: the variant itself, its name and overrides
    unchanged. The epilogue's JSON form goes into the overrides, so each
    epilogue is its own cache entry."""
    found = VARIANTS[variant]
    if epilogue is None or epilogue.is_identity:
        return variant, found
    return f"{variant}_{epilogue.tag}", dict(found, epilogue=epilogue.to_json())


def choose(m, n, k, accumulation, sms=132):
    """The variant name for this shape and accumulation ('fast' or 'promoted')."""
    if accumulation not in ("fast", "promoted"):
        raise ValueError(f"accumulation must be 'fast' or 'promoted', got {accumulation!r}")
    tuned = TUNED.get((m, n, k, accumulation))
    if tuned is not None:
        return tuned
    mine = [v for v in VARIANTS if VARIANTS[v]["accumulation"] == accumulation]
    return min(mine, key=lambda v: (estimate(v, m, n, sms), -math.prod(tile(v))))
