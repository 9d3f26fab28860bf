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

Split-K (``choose_split``): an output of too few tiles to fill the SMs with
a long K (4096 x 256 x 9000: 32 tiles of 128x256, 128 of 64x128 at 0.7
efficiency) cuts each tile's K into S contiguous ranges, S x tiles work
units, each storing an fp32 partial tile into an (S, M, N) workspace that a
second kernel sums in a fixed order (kernels/splitk_reduce.py: bitwise the
same every run). The rule is a time model over (tiles, waves, K per unit,
workspace traffic, the second launch), ``estimate_time``; it takes split-K
only where the model says it is ``SPLIT_MARGIN`` faster than the plain
pick, so the shapes that fill the GPU keep their kernels. Its constants are
H100 figures, not measured fits: docs/gemm.md says what is still to
measure. Stream-K is not implemented.
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
# Split-K variants, ``<tile>_sk<S>`` (``split_variant``): the two tiles
# with the most operand reuse; no C buffer in shared memory (partials go
# from registers to the workspace), the stages of the plain tile.
SPLIT_TILES = ("128x256", "128x128")
SPLITS = tuple(range(2, 9))
SPLIT_VARIANTS = {f"{t}_sk{s}": dict(VARIANTS[t], split_k=s)
                  for t in SPLIT_TILES for s in SPLITS}
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
    # Shapes of the sweep the split-K model would split, kept on the plain
    # variant measured there (h100-sweep-run2.log: 1024 x 1024 x 16384 at
    # 1.117x / 1.053x cuBLAS, 256 x 4096 x 14336 at 1.492x / 1.252x) until
    # a run measures split-K against it (benchmarks/gemm/random_sweep.py).
    (1024, 1024, 16384, "bf16"): "64x128",
    (1024, 1024, 16384, "f16"): "64x128",
    (256, 4096, 14336, "bf16"): "64x128",
    (256, 4096, 14336, "f16"): "64x128",
}


def overrides(variant):
    """The GemmConfig overrides of a plain or split-K variant name."""
    found = VARIANTS.get(variant) or SPLIT_VARIANTS.get(variant)
    if found is None:
        raise KeyError(f"gemm_configs: no variant {variant!r} (plain: {', '.join(VARIANTS)}; "
                       f"split-K: <{'|'.join(SPLIT_TILES)}>_sk<{SPLITS[0]}..{SPLITS[-1]}>)")
    return found


def splits_of(variant):
    """S of a split-K variant name, 1 for a plain one."""
    return overrides(variant).get("split_k", 1)


def tile(variant):
    cfg = overrides(variant)
    return WGMMA_M * cfg["consumer_warpgroups"], cfg["block_n"]


def tile_variant(variant):
    """The plain variant a split-K one is built on (the name's tile part)."""
    return variant.split("_sk")[0]


def estimate(variant, m, n, sms):
    """Relative time of ``variant`` on an m x n output (see the module doc)."""
    bm, bn = tile(variant)
    tiles = math.ceil(m / bm) * math.ceil(n / bn)
    return math.ceil(tiles / sms) * bm * bn / EFFICIENCY[variant]


# Whether the pick may choose a split-K variant. Off: measured on an H200
# (docs/gemm.md, "Split-K and the fill analysis"), every split-K pick of the
# random sweep ran at 0.44-0.96x cuBLAS (median 0.54x): about 35 us per call
# against 17-20 us, where its two launches and workspace are host-bound. The
# variants stay in the table, built and tested, for the work that makes them
# pay (a single launch, or serial split-K in one kernel).
AUTO_SPLIT_K = False


def choose(m, n, k, dtype, sms=132, split=None):
    """The variant name for this shape and dtype ('bf16' or 'f16'); with
    ``split=False`` never a split-K one (``None``: ``AUTO_SPLIT_K``)."""
    if split is None:
        split = AUTO_SPLIT_K
    tuned = TUNED.get((m, n, k, dtype))
    if tuned is not None:
        return tuned
    plain = min(RULE_VARIANTS, key=lambda v: (estimate(v, m, n, sms), -math.prod(tile(v))))
    return (split and choose_split(m, n, k, sms, plain)) or plain


# -- the time model of split-K ------------------------------------------------------
# H100 SXM figures (the H200 has the same SMs and more bandwidth): what one
# SM's wgmma stream sustains on a 128x256 tile (~790 TFLOPS over 132 SMs,
# the measured best of docs/gemm.md), what DRAM and L2 sustain (a workspace
# that fits in L2 with room to spare is written and read back there: the
# reduction runs right behind the GEMM), the cost of a unit's pipeline fill
# and epilogue, and of the second kernel's launch and its gap behind the GEMM.
SM_FLOPS = 6.0e12
DRAM_BYTES_PER_S = 3.0e12
L2_BYTES_PER_S = 7.0e12
L2_RESIDENT_BYTES = 24 << 20     # about half the H100's 50 MB L2
UNIT_OVERHEAD_S = 1.0e-6
REDUCE_LAUNCH_S = 2.0e-6
# EFFICIENCY, except for the one-consumer-warpgroup tiles on a long K: one
# warpgroup per SM issues every wgmma, so the tensor cores wait on it. The
# 64x128 tile's measured rate on long-K shapes spans 0.45-0.86 of the
# 128x256 tile's 705 TFLOP/s: 1024 x 1024 x 16384 ran at 604 TFLOP/s, 256 x
# 4096 x 14336 at 527 (docs/gemm.md, sweep), the narrow shapes with K near
# 9000 at 0.54-0.83x cuBLAS; 0.6 is inside that span, not a fit.
TIME_EFFICIENCY = dict(EFFICIENCY, **{"64x128": 0.6, "64x256": 0.7})
K_BLOCK = 64                 # K of one k-block (the 128-byte swizzle span of 16-bit K)
MIN_SPLIT_K_BLOCKS = 8       # K per split: below this a unit is mostly its fill and epilogue
SPLIT_MARGIN = 0.85          # split only when the model says >= 15% faster


def units_of(variant, m, n, splits=1):
    """Work units of the persistent schedule: tiles (x splits)."""
    bm, bn = tile(variant)
    return math.ceil(m / bm) * math.ceil(n / bn) * splits


def fill(variant, m, n):
    """Useful / computed area of the tiles: ``m n / (tiles bm bn)``."""
    bm, bn = tile(variant)
    return m * n / (units_of(variant, m, n) * bm * bn)


def last_wave(variant, m, n, sms, splits=1):
    """Occupancy of the last wave: the fraction of the SMs its units use."""
    units = units_of(variant, m, n, splits)
    return (units - (math.ceil(units / sms) - 1) * sms) / sms


def estimate_time(variant, m, n, k, sms, splits=1):
    """Modelled seconds of ``variant`` (a plain tile name) with ``splits``
    K splits: waves of units, each its share of K blocks at the tile's
    efficiency plus a fixed fill/epilogue cost, but no less than reading
    the operands once; with splits > 1 also the fp32 workspace written and
    read back and the reduction's launch."""
    bm, bn = tile(variant)
    kb = math.ceil(k / K_BLOCK)
    per_unit = math.ceil(kb / splits)
    waves = math.ceil(units_of(variant, m, n, splits) / sms)
    t = waves * (2 * bm * bn * K_BLOCK * per_unit / (SM_FLOPS * TIME_EFFICIENCY[variant])
                 + UNIT_OVERHEAD_S)
    # A floor: A and B read from DRAM at least once (a 128 x 8192 x 8192
    # product streams 134 MB of B, whatever the split).
    t = max(t, (m + n) * k * 2 / DRAM_BYTES_PER_S)
    if splits > 1:
        workspace = splits * m * n * 4
        rate = L2_BYTES_PER_S if workspace <= L2_RESIDENT_BYTES else DRAM_BYTES_PER_S
        t += 2 * workspace / rate + 2 * m * n / DRAM_BYTES_PER_S + REDUCE_LAUNCH_S
    return t


def choose_split(m, n, k, sms, plain):
    """The split-K variant for this shape, or None: only where the plain
    pick ``plain`` runs fewer units than there are SMs (one part-empty
    wave), over every split tile and S that leaves each split at least
    ``MIN_SPLIT_K_BLOCKS``, the one of least ``estimate_time``, if it beats
    the plain pick's by ``SPLIT_MARGIN``."""
    if units_of(plain, m, n) >= sms:
        return None
    kb = math.ceil(k / K_BLOCK)
    best, best_t = None, SPLIT_MARGIN * estimate_time(plain, m, n, k, sms)
    for t in SPLIT_TILES:
        for s in SPLITS:
            if kb < s * MIN_SPLIT_K_BLOCKS:
                break
            est = estimate_time(t, m, n, k, sms, s)
            if est < best_t:
                best, best_t = f"{t}_sk{s}", est
    return best


def reduction(splits, epilogue=None):
    """(cache-entry name, ReduceConfig overrides) of the split-K reduction
    of ``splits`` partials with the fused ``epilogue`` (None or identity:
    the sum, rounded), for kernels/splitk_reduce.py."""
    if epilogue is None or epilogue.is_identity:
        return f"sum{splits}", {"splits": splits}
    return f"sum{splits}_{epilogue.tag}", {"splits": splits, "epilogue": epilogue.to_json()}


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
    found = overrides(variant)
    if epilogue is None or epilogue.is_identity:
        return variant, found
    if found.get("split_k", 1) > 1:
        raise ValueError(f"gemm_configs: {variant} is a split-K variant: its GEMM kernel takes "
                         "no epilogue (it is not linear); the reduction does "
                         "(gemm_configs.reduction(splits, epilogue))")
    out = dict(found, epilogue=epilogue.to_json())
    if epilogue.residual:
        out["epilogue_passes"] = out["block_n"] // 64
    return f"{variant}_{epilogue.tag}", out
