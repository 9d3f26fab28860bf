"""Which FP8 GEMM variant runs a given (M, N, K, accumulation): the table
of ``pipeline_mlir.kernels.fp8_gemm`` variants and the rule that picks one.

``torch._scaled_mm``'s ``use_fast_accum`` chooses the accumulation mode:
``fast`` accumulates every K block's wgmma into the fp32 registers (as
cuBLASLt's fast accumulation does), ``promoted`` adds each K block's partial
sum into a separate fp32 total (DeepGEMM's 2xacc), which costs registers
and so wants narrower tiles. Within a mode the rule is the GEMM's
(``gemm_configs``): one CTA per SM over the output tiles, so the tile whose
last wave wastes the fewest SMs wins, weighted by how well the tile shape
reuses its operands (``EFFICIENCY``), and by the 16-bit GEMM's
``MISALIGNED_K`` on one-CTA tiles where a row of K is not a whole number
of 32-byte L2 sectors (``gemm_configs.misaligned_k``; a 2-CTA cluster
tile, which multicasts B to its pair, reads half of B from L2). ``TUNED``
holds measured winners by shape, before the rule
(``benchmarks/gemm/fp8_sweep.py`` prints them).

Split-K (``SPLIT_VARIANTS``, ``<tile>_sk<S>``): where the picked tile
leaves SMs idle (96 x 8192 x 8192: 64 tiles of 128x128 for 132 SMs), each
tile's K is cut into S ranges, one unit each, whose scaled fp32 partials a
second kernel sums in a fixed order (bitwise the same every run;
``ops/scaled_mm.py``). Whether and how far to split is the 16-bit GEMM's
rule, ``gemm_configs.choose_split``, imported: an FP8 product of K is, to
its time model, a 16-bit product of K / 2 (``model_k``). Not with a fused
bias (``choose(..., split=False)``).
"""

import math

from pipeline_mlir.chip_limits import WGMMA_M

from . import gemm_configs
from .epilogues import Epilogue
from .gemm_configs import MISALIGNED_K, misaligned_k

# name -> fp8_gemm GemmConfig overrides (over fp8_gemm.FAST)
VARIANTS = {
    "fast_128x256": dict(block_n=256, accumulation="fast"),
    "fast_128x192": dict(block_n=192, epilogue_passes=3, stages=5, accumulation="fast"),
    "fast_128x128": dict(block_n=128, stages=6, accumulation="fast"),
    "fast_64x256": dict(block_n=256, consumer_warpgroups=1, epilogue_passes=1, stages=6,
                        accumulation="fast"),
    # One consumer warpgroup on 64 x 128: twice the tiles of 128x128 for a
    # short M (96 x 8192 x 8192: 128 tiles on 132 SMs where 128x128 has 64).
    "fast_64x128": dict(block_n=128, consumer_warpgroups=1, stages=8, accumulation="fast"),
    "promoted_128x128": dict(block_n=128, stages=6, accumulation="promoted"),
    "promoted_128x192": dict(block_n=192, epilogue_passes=3, stages=5, accumulation="promoted"),
    "promoted_64x128": dict(block_n=128, consumer_warpgroups=1, stages=8,
                            accumulation="promoted"),
    # 2-CTA clusters along M: B multicast to the pair, so each CTA reads
    # half of B from L2 (the 16-bit table's 128x256c2). ptxas -v: no spills,
    # with the bias too.
    "fast_128x256c2": dict(block_n=256, cluster_m=2, accumulation="fast"),
    "fast_128x192c2": dict(block_n=192, epilogue_passes=3, stages=5, cluster_m=2,
                           accumulation="fast"),
    "promoted_128x192c2": dict(block_n=192, epilogue_passes=3, stages=5, cluster_m=2,
                               accumulation="promoted"),
    "promoted_128x128c2": dict(block_n=128, stages=6, cluster_m=2, accumulation="promoted"),
    # A 192-row tile (three consumer warpgroups; setmaxnreg 32 + 3 x 160, as
    # the 16-bit 192x192): promoted m64n128 holds 2 x 64 accumulators in
    # the 160 registers, no spill. Only TUNED picks it (below).
    "promoted_192x128": dict(block_n=128, consumer_warpgroups=3, epilogue_passes=2, stages=5,
                             producer_registers=32, consumer_registers=160,
                             accumulation="promoted"),
    # "o": the promotion overlapped with the next k-block's wgmma, in a
    # second partial accumulator (kernels/promoted_mainloop.py): the total
    # and two partials, 192 fp32 a thread at N 128, fit the consumers' 232
    # registers (ptxas -v: no spills); at N 192 (288) they would not.
    "promoted_128x128o": dict(block_n=128, stages=6, accumulation="promoted",
                              promotion_overlap=True),
    "promoted_128x128c2o": dict(block_n=128, stages=6, cluster_m=2, accumulation="promoted",
                                promotion_overlap=True),
}
# What the rule may pick, in this order on a tie. A cluster tile ties with
# its one-CTA tile where the pairs fill the same waves (they never fill
# fewer), and the one-CTA tile goes first: where K is a multiple of 32 the
# two ran within a few percent of each other, each ahead where it was
# timed later in the round than the other (benchmarks/gemm/results/
# h200-fp8-sweep-run3.log and -run3-confirm.log: the op, timed right after
# cuBLASLt, ran 0-4% behind its own launcher timed later at the shapes of
# at least 100 us). The cluster wins where K is misaligned (below).
#
# The 128x128 promoted tiles run with the promotion overlapped ("o"): over
# the 24 shapes of the sweep, four passes (benchmarks/gemm/results/
# h200-fp8-sweep-run4.log and -run4-p2..p4.log; medians of the four,
# each variant through its launcher), 128x128o ran 1.03-1.09x its plain
# twin's speed at every shape where the GPU, not the host, sets the time
# (2048 x 8192 x 28672: 1.022x cuBLASLt against 0.940x) but 3008 x 2064 x
# 4112 (misaligned K: 1.01x), and 128x128c2o 1.04-1.06x its twin's; the
# plain ones stay in VARIANTS, out of the rule.
RULE_VARIANTS = ("fast_128x256", "fast_128x256c2", "fast_128x192", "fast_128x192c2",
                 "fast_128x128", "fast_64x256", "fast_64x128", "promoted_128x192", "promoted_128x192c2",
                 "promoted_128x128o", "promoted_128x128c2o", "promoted_64x128")
# Tile reuse relative to the widest tile of the mode (operand bytes per
# FLOP, as in gemm_configs). Promoted accumulation adds each K block's
# partial sum into the total with FMAs the tensor cores do not hide; the
# 128x192 tile amortizes them best (the first sweep, H200: it led or tied
# on 14 of 24 shapes), and the 64-row tile, whose single consumer
# warpgroup waits on every promotion, was slower than 128-row tiles at
# every M it was picked for. A cluster tile: its one-CTA tile's (as in
# the 16-bit table); the 192-row tile is not in the rule. An overlapped
# 128x128 tile: 1.0, as 128x192. Where the two fill equal areas of waves
# (4096 x 14336 x 4096, 2048 x 28672 x 8192: 28 waves of 128x128 against
# 19 of 128x192) 128x128o ran 1.03-1.05x 128x192, and at 8192 x 4096 x
# 4096 1.02x (h200-fp8-sweep-run4*.log, medians of four passes through
# the launchers); 0.93 would have kept 128x192 at all three. Above 1.0
# it would also take 2048 x 6144 x 512 (a 10 us call), where the 192-row
# tile led.
#
# The fast 64x128 tile: 0.7, below 64x256's 0.8 (it reads more operand
# bytes per FLOP). It wins only where 128-row tiles leave SMs idle and
# twice the tiles still fit one wave: at 96 x 8192 x 8192 (128 tiles
# against 128x128's 64) it ran 1.29x and 1.11x cuBLASLt in two passes
# where 128x128 ran 1.13x and 0.96x, 1.67x against 1.34x at 128 x 8192 x
# 8192, 1.70x against 1.04x at 32 x 8192 x 8192, and within 0.5% of
# 128x128 at 256 x 8192 x 8192, where 128x128 already fills a wave and the
# rule keeps it (H200, benchmarks/gemm/results/h200-fp8-sweep-run7-small-m.log).
# Any value from 0.55 to 0.75 gives the same picks on the sweep's shapes.
#
# Where K is a multiple of 16 but not of 32 (``misaligned_k``), a cluster
# tile ran 1.06-1.38x faster than its one-CTA tile (median 1.18x, 128-row
# tiles, the shapes of at least 50 us of h200-fp8-sweep-run3-misaligned.log
# and 3008 x 2064 x 4112: 4096 x 4096 x 4112 fast 1.001x cuBLASLt on
# 128x256, 1.132x on 128x256c2), and where K is a multiple of 32 but not
# of 128 (4128) not (1.039x and 1.037x): the 32-byte sectors, not the
# 128-byte lines. The imported MISALIGNED_K (1.4, the 16-bit fit) picks the
# best tile at 11 of those 12 shapes and modes.
EFFICIENCY = {"fast_128x256": 1.0, "fast_128x192": 0.93, "fast_128x128": 0.9,
              "fast_64x256": 0.8, "fast_64x128": 0.7, "promoted_128x192": 1.0, "promoted_128x128": 0.93,
              "promoted_64x128": 0.6, "fast_128x256c2": 1.0, "fast_128x192c2": 0.93,
              "promoted_128x192c2": 1.0, "promoted_128x128c2": 0.93,
              "promoted_128x128o": 1.0, "promoted_128x128c2o": 1.0}
# (m, n, k, accumulation) -> variant: the BEST lines of
# benchmarks/gemm/fp8_sweep.py (a variant > 1% ahead of the rule's pick).
# The shapes of at most ~50 us (M or N of 1024 and less, 2048^3) are
# host-bound and were kept from the first sweep.
TUNED = {
    (1024, 1024, 1024, "fast"): "fast_128x192",
    (2048, 2048, 2048, "fast"): "fast_128x128",
    (8192, 8192, 8192, "fast"): "fast_128x192",
    (512, 4096, 4096, "fast"): "fast_64x256",
    (4096, 1024, 4096, "fast"): "fast_128x128",
    # Promoted 192x128 against 128x192 (the same tile count: the model
    # cannot tell them apart): at 8192^3 1.056x against 1.015x
    # (h200-fp8-sweep-run3.log, 128x192 the op), 1.040x and 1.043x against
    # 1.001x and 1.019x (-run3-confirm.log, two passes, 192x128 the op's
    # launcher and 128x192 a candidate); at 8192 x 8192 x 1024 1.230x
    # against 1.123x, 1.188x and 1.139x against 1.124x and 1.094x. (Until
    # the third sweep 2048 x 4096 x 4096 fast was 128x128's; the rule's
    # 128x256 ran 1.057x and 1.073x against 1.046x and 1.052x. Until the
    # fourth, 128 x 4096 x 4096 promoted was 128x128's; the rule's 64x128
    # ran 1.14x its launcher's speed and 1.11x 128x128o's, ahead of both in
    # each of four passes: h200-fp8-sweep-run4*.log. Until the eighth, 128 x
    # 4096 x 4096 fast was 64x256's, from the first sweep, before the fast
    # 64x128 tile existed: the rule's 64x128 (64 tiles against 32) ran 2.71x
    # and 2.93x cuBLASLt where 64x256 ran 1.74x and 1.73x, two passes:
    # h200-fp8-sweep-run8-short-m.log.)
    (8192, 8192, 8192, "promoted"): "promoted_192x128",
    (8192, 8192, 1024, "promoted"): "promoted_192x128",
}
# Split-K variants, ``<tile>_sk<S>``: per mode the tiles of the 16-bit
# table's SPLIT_TILES (the most operand reuse; promoted has no 128x256:
# two accumulators do not fit), the promoted one with its promotion
# overlapped as in the rule; the plain tile's stages, no C buffer (the
# partials go from registers to the workspace). S of 2..4: the rule gives
# each split at least MIN_SPLIT_K_BLOCKS (8) K blocks of 128, so S = 4
# already needs K >= 4096, and 33 tiles (where "fewer tiles than SMs"
# starts to leave most SMs busy) in 5 splits would pass one wave of 132.
SPLIT_TILES = {"fast": ("fast_128x256", "fast_128x128"), "promoted": ("promoted_128x128o",)}
SPLITS = (2, 3, 4)
SPLIT_VARIANTS = {f"{t}_sk{s}": dict(VARIANTS[t], split_k=s)
                  for tiles in SPLIT_TILES.values() for t in tiles for s in SPLITS}
# The DRAM rate the split model's floor (operands read once) uses: the
# H200's, where this table is measured (gemm_configs' own is the H100's
# 3.0e12). With the H100's the floor of 96 x 8192 x 8192 (68 MB of B,
# 23 us) would exceed the plain tile's modelled time and no split could
# win there, where the plain 128x128 ran 27-32 us on the H200 (405-475
# TFLOP/s), its 64 busy SMs, not DRAM, setting the time.
DRAM_BYTES_PER_S = 4.8e12
# Whether the op's pick takes the split model's answer. Measured on an H200
# where it did (benchmarks/gemm/results/h200-fp8-sweep-run5.log, the op
# beside cuBLASLt): 96 x 8192 x 8192 fast on fast_128x128_sk2 0.634x and
# 128 x 4096 x 4096 promoted on promoted_128x128o_sk4 0.507x cuBLASLt, where
# the plain tiles ran 0.92-1.46x and 0.97-1.09x in earlier passes: a 20-30
# us call does not pay for the partials' round trip and the second
# launch. So the rule does not split; the variants stay candidates
# (fp8_sweep.py times them) and the host runs them when this is True.
SPLIT_K_IN_RULE = False
# The output types the kernels write (torch._scaled_mm's out_dtype).
OUT_DTYPES = ("bf16", "f16")
# scaled_mm's ``bias``: one value per output column, of the output dtype,
# added in the kernel's epilogue after the scales (torch._scaled_mm's
# order). Each variant with it is its own cache entry (``fused``).
BIAS = Epilogue(bias="col")


def overrides(variant):
    """The fp8_gemm GemmConfig overrides of a plain or split-K variant name."""
    found = VARIANTS.get(variant) or SPLIT_VARIANTS.get(variant)
    if found is None:
        raise KeyError(f"fp8_configs: no variant {variant!r} (plain: {', '.join(VARIANTS)}; "
                       f"split-K: {', '.join(SPLIT_VARIANTS)})")
    return found


def splits_of(variant):
    """S of a split-K variant name, 1 for a plain one."""
    return overrides(variant).get("split_k", 1)


def tile(variant):
    cfg = overrides(variant)
    return WGMMA_M * cfg.get("consumer_warpgroups", 2), cfg["block_n"]


def plain_twin(variant):
    """The variant that is ``variant`` without ``promotion_overlap`` (the
    same tile, the same additions in the same order: the same bits), or
    None where ``variant`` does not overlap its promotion."""
    over = VARIANTS[variant]
    if not over.get("promotion_overlap"):
        return None
    plain = {key: value for key, value in over.items() if key != "promotion_overlap"}
    return next(v for v, o in VARIANTS.items() if o == plain)


def cluster_of(variant):
    """CTAs of the variant's cluster along M (1 or 2)."""
    return overrides(variant).get("cluster_m", 1)


def estimate(variant, m, n, k, sms):
    """Relative time of ``variant`` on m x n x k: waves of units (a tile,
    or a 2-CTA cluster's tile pair, ``sms / 2`` of them a wave), each a
    tile's area over its ``EFFICIENCY``, times ``MISALIGNED_K`` for a
    one-CTA tile where K's rows are not whole L2 sectors (e4m3: 1 byte)."""
    bm, bn = tile(variant)
    cluster = cluster_of(variant)
    units = math.ceil(m / (bm * cluster)) * math.ceil(n / bn)
    t = math.ceil(units / (sms // cluster)) * bm * bn / EFFICIENCY[variant]
    if cluster == 1 and misaligned_k(k, element_bytes=1):
        t *= MISALIGNED_K
    return t


def fused(variant, epilogue):
    """(cache-entry name, fp8_gemm GemmConfig overrides) of ``variant`` with
    a fused ``epilogue`` (an ``epilogues.Epilogue``, e.g. ``BIAS``); None
    or an identity one: the variant itself, its name and overrides
    unchanged. The epilogue's JSON form goes into the overrides, so each
    epilogue is its own cache entry."""
    found = overrides(variant)
    if epilogue is None or epilogue.is_identity:
        return variant, found
    if found.get("split_k", 1) > 1:
        raise ValueError(f"fp8_configs: {variant} is a split-K variant, built without a "
                         "fused epilogue (it would run on partial sums); a call with a bias "
                         "picks with choose(..., split=False)")
    return f"{variant}_{epilogue.tag}", dict(found, epilogue=epilogue.to_json())


def model_tile(variant):
    """The 16-bit table's tile (``gemm_configs`` name) of ``variant``'s
    shape, for the split model: its tiles and TIME_EFFICIENCY are by shape
    (a cluster tile counts as its one-CTA tile, as there)."""
    bm, bn = tile(variant)
    return f"{bm}x{bn}"


def model_k(k):
    """The 16-bit K the split model sees for an FP8 product of K: the same
    K blocks (128 e4m3 against 64 bf16 per 128-byte row), the same operand
    bytes, and, at twice the 16-bit rate, the same time per K block."""
    return k // 2


def choose_split(m, n, k, accumulation, sms, plain):
    """The split-K variant for this shape, or None (``gemm_configs.
    choose_split`` over this mode's ``SPLIT_TILES`` and ``SPLITS``)."""
    by_shape = {model_tile(t): t for t in SPLIT_TILES[accumulation]}
    found = gemm_configs.choose_split(m, n, model_k(k), sms, model_tile(plain),
                                      tiles=tuple(by_shape), splits=SPLITS,
                                      dram_bytes_per_s=DRAM_BYTES_PER_S)
    if found is None:
        return None
    shape, splits = found.split("_sk")
    return f"{by_shape[shape]}_sk{splits}"


def choose(m, n, k, accumulation, sms=132, split=True):
    """The variant name for this shape and accumulation ('fast' or
    'promoted'); ``split=False`` (a call with a fused bias): never a
    split-K one."""
    if accumulation not in ("fast", "promoted"):
        raise ValueError(f"accumulation must be 'fast' or 'promoted', got {accumulation!r}")
    tuned = TUNED.get((m, n, k, accumulation))
    if tuned is not None:
        return tuned
    mine = [v for v in RULE_VARIANTS if VARIANTS[v]["accumulation"] == accumulation]
    plain = min(mine, key=lambda v: (estimate(v, m, n, k, sms), -math.prod(tile(v))))
    return (split and SPLIT_K_IN_RULE and choose_split(m, n, k, accumulation, sms, plain)) or plain
