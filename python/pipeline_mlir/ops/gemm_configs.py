"""Which GEMM variant runs a given (M, N, K, dtype): a small table of tile
shapes and a rule that picks one.

Each variant is a set of ``examples/hopper_gemm.GemmConfig`` overrides
(tile M = 64 x consumer warpgroups, tile N = ``block_n``, operand stages,
epilogue passes, cluster). The persistent kernel runs one CTA per SM over
the output tiles; a shape whose tile count leaves SMs idle in the last
wave wastes them, so the rule estimates, per variant,

    waves = ceil(tiles / SMs),  cost = waves x tile area / efficiency

and picks the cheapest (the larger tile on a tie). ``EFFICIENCY`` is the
throughput of a tile shape relative to 128x256 on a full wave: smaller
tiles reuse each loaded operand byte less (a 64-row tile feeds one
consumer warpgroup). ``benchmarks/gemm/sweep.py`` measures every variant
at every shape and prints where the rule's pick was not the fastest;
``TUNED`` takes such measured winners, by shape and dtype, before the rule.

Why 128x192: a 3072-square output is 288 tiles of 128x256 (3 waves on 132
SMs, the last 18% full) or 576 of 128x128 (5 waves, the last 36% full);
at 128x192 it is 384 tiles, 3 waves 97% full (wgmma n = 192 is a valid
shape; its C tile is three 64-column boxes, one per epilogue pass, which
leaves shared memory for 5 stages). 128x64 feeds two consumer warpgroups
from one CTA on shapes whose 64x128 tiles already fill the GPU in one wave
(1024 x 1024 x 16384: 128 tiles either way); it is measured by the sweep
but left out of the rule until it wins there.
Split-K and stream-K (for shapes whose tiles cannot fill the GPU even with
64x128 tiles) are not implemented: such shapes get the smallest tile.
"""

import math

from pipeline_mlir.chip_limits import WGMMA_M

# name -> GemmConfig overrides
VARIANTS = {
    "128x256": dict(block_n=256, consumer_warpgroups=2, epilogue_passes=2),
    "128x256c2": dict(block_n=256, consumer_warpgroups=2, epilogue_passes=2, cluster_m=2),
    "128x128": dict(block_n=128, consumer_warpgroups=2, epilogue_passes=1, stages=6),
    "64x256": dict(block_n=256, consumer_warpgroups=1, epilogue_passes=1, stages=6),
    "64x128": dict(block_n=128, consumer_warpgroups=1, epilogue_passes=1, stages=8),
    "128x192": dict(block_n=192, consumer_warpgroups=2, epilogue_passes=3, stages=5),
    "128x64": dict(block_n=64, consumer_warpgroups=2, epilogue_passes=1, stages=8),
}
# What the rule may pick: the 2-CTA cluster ties with one CTA at equal tiles
# (docs/gemm.md), so it is left to TUNED and the sweep.
RULE_VARIANTS = ("128x256", "128x192", "128x128", "64x256", "64x128")
# 128x192 between 128x256 and 128x128: operand bytes per FLOP
# (bm + bn) / (bm bn) of 0.0130 against 0.0117 and 0.0156.
EFFICIENCY = {"128x256": 1.0, "128x192": 0.93, "128x128": 0.9, "64x256": 0.8, "64x128": 0.7}
# (m, n, k, dtype) -> variant name, from measurements: the BEST lines of
# benchmarks/gemm/sweep.py on the H100 (a variant > 1% ahead of the rule's pick).
TUNED = {
    (2048, 2048, 2048, "bf16"): "128x128",
    (8192, 8192, 8192, "bf16"): "128x256c2",
    (4096, 14336, 4096, "bf16"): "128x256c2",
    (2048, 2048, 2048, "f16"): "128x128",
    (8192, 8192, 8192, "f16"): "128x256c2",
    (16384, 1024, 4096, "f16"): "128x256c2",
    # the second sweep (h100-sweep-run2.log)
    (1024, 1024, 1024, "bf16"): "128x64",
    (2048, 28672, 4096, "bf16"): "128x256c2",
    (4096, 4096, 14336, "bf16"): "128x256c2",
    (8192, 8192, 1024, "bf16"): "128x128",
    (4096, 4096, 4096, "f16"): "128x256c2",
    (1024, 1024, 1024, "f16"): "128x64",
    (4096, 14336, 4096, "f16"): "128x256c2",
    (2048, 28672, 4096, "f16"): "128x256c2",
    (4096, 4096, 14336, "f16"): "128x256c2",
    (8192, 8192, 1024, "f16"): "128x128",
}


def tile(variant):
    cfg = VARIANTS[variant]
    return WGMMA_M * cfg["consumer_warpgroups"], cfg["block_n"]


def estimate(variant, m, n, sms):
    """Relative time of ``variant`` on an m x n output (see the module doc)."""
    bm, bn = tile(variant)
    tiles = math.ceil(m / bm) * math.ceil(n / bn)
    return math.ceil(tiles / sms) * bm * bn / EFFICIENCY[variant]


def choose(m, n, k, dtype, sms=132):
    """The variant name for this shape and dtype ('bf16' or 'f16')."""
    tuned = TUNED.get((m, n, k, dtype))
    if tuned is not None:
        return tuned
    return min(RULE_VARIANTS, key=lambda v: (estimate(v, m, n, sms), -math.prod(tile(v))))


# The fused epilogues scripts/build-gemm-cache.py --epilogues compiles beside
# each variant it builds (a GPU host without MLIR finds only what was
# built): each activation after a bias (a Linear layer), the whole
# epilogue with each activation, and the single steps. The GPU suite's
# test_gemm_fused_epilogue_matches_torch calls exactly these.
PREBUILT_EPILOGUES = (
    *({"bias": "col", "activation": a} for a in ("relu", "gelu_tanh", "gelu_erf", "silu")),
    *({"alpha": "param", "bias": "col", "residual": True, "activation": a}
      for a in ("relu", "gelu_tanh", "gelu_erf", "silu")),
    {"alpha": "param"}, {"residual": True}, {"bias": "col", "bias_dtype": "f32"},
)


def fused(variant, epilogue):
    """(cache-entry name, GemmConfig overrides) of ``variant`` with a fused
    epilogue (an ``epilogues.Epilogue``; None or an identity one: the
    variant itself, its name and overrides unchanged, so its cache entry
    is the one ``gemm`` without an epilogue uses). The epilogue's JSON form
    goes into the overrides, so each epilogue is its own cache entry.

    With a residual the epilogue runs one 64-column C box per pass: the
    pass's residual values are held in registers beside the whole
    accumulator, and at two boxes per pass the 128x256 and 64x256 tiles
    spill (ptxas -v; test_gemm_epilogue.py checks that none does)."""
    overrides = VARIANTS[variant]
    if epilogue is None or epilogue.is_identity:
        return variant, overrides
    overrides = dict(overrides, epilogue=epilogue.to_json())
    if epilogue.residual:
        overrides["epilogue_passes"] = overrides["block_n"] // 64
    return f"{variant}_{epilogue.tag}", overrides
