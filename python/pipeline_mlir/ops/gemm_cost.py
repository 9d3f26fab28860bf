"""The time model of a plain GEMM variant (``estimate``): the persistent
kernel runs one CTA per SM over the output tiles (a 2-CTA cluster over
tile pairs); a shape whose tile count leaves SMs idle in the last wave
wastes them, so the model takes, per variant,

    waves = ceil(units / units per wave),
    time = waves x (K blocks x block time + tile time)

with the block time a 128x256 tile's (``BLOCK_S``, measured on an H200)
scaled by the tile's area over its ``EFFICIENCY`` (smaller tiles reuse
each loaded operand byte less; a 64-row tile feeds one consumer
warpgroup), and by ``MISALIGNED_K`` for a one-CTA tile when K is not a
multiple of 16. Also the wave-fill facts the pick rules share
(``units_of``, ``fill``, ``last_wave``). ``gemm_configs.choose`` compares
variants by it; callers import these names from ``gemm_configs``, which
re-exports them.
"""

import math

from .gemm_variants import cluster_of, tile, variant_unit_tiles

# The time of a K block of each tile relative to its area's share of a
# 128x256 tile's, measured on an H200 (benchmarks/gemm/results/
# h200-random-sweep-run2.log: every tile timed at 60 random shapes and the
# fixed ones, bf16; the medians over the shapes of at least 50 us were
# 1.00 for the cluster, 0.98 for 128x192, 0.91 for 128x128, 0.61 for
# 64x128: one consumer warpgroup per SM). 64x256: not measured there.
#
# The 192-row tiles (h200-random-sweep-run5.log: every new tile beside the
# pick at the 76 shapes, bf16): against the 128x256 tile at the shapes of
# at least 50 us, medians 0.99 for 192x192 (the most operand reuse of the
# table: 48 KiB a K block for 1.125 times 128x256's area), 0.96 for
# 192x128, 0.98 for 256x128 but 0.83 where N is a few hundred
# (10528 x 320 x 3024, where 192x192 ran 1.12 times faster): 256x128 was
# left out of the table. 192x192c2 (run6, bf16 and fp16): 1.00 of
# 192x192 (median), 1.10-1.12 where K is misaligned or the wave short
# (6208 x 1800 x 1192, 4544 x 1008 x 7784), 0.91-0.93 on 2048 x 28672 x
# 4096. The 192x* values are the fit of the pick (fit_pick.py over run6,
# run5, run3 and run4, the shapes of at least 30 us).
EFFICIENCY = {"128x256": 1.0, "128x256c2": 1.0, "128x192": 0.9, "128x128": 0.9,
              "64x256": 0.8, "64x128": 0.6, "192x192": 1.0, "192x192c2": 1.0, "192x128": 1.0,
              "192x192c2n": 1.0}
# The tiles cut to the shape (CUT_VARIANTS): each one's time over its model
# with an efficiency of 1, against the same for 128x256 (128x256c2 for the
# cluster) at the same shape, median over the 18 shapes of run12's oracle
# of at least 30 us, bf16 and fp16 (docs/gemm.md, "Tiles cut to the
# shape"). The narrow one-CTA tiles lose most: 160 and 176 columns feed
# each m64nN wgmma a third less B than 256 for the same A.
EFFICIENCY.update({"128x160": 0.85, "128x176": 0.86, "128x208": 0.93, "128x224": 0.95,
                   "128x240": 0.96, "128x160c2": 0.92, "128x176c2": 0.93, "128x208c2": 0.97,
                   "128x224c2": 0.98, "128x240c2": 0.97})
# The 2-CTA cluster along N on other tiles (CLUSTER_N_VARIANTS): each one's
# time over its model with an efficiency of 1, against the same for the
# pick (at the pick's efficiency), median over the 16 shapes of at least
# 30 us of 22 measured on an H200 beside the pick (docs/gemm.md, "The
# cluster along N on every width"), bf16 and fp16. The 128-row tiles
# narrower than 160 columns lose most: each m64nN wgmma reads as much A as
# a wide one for fewer products.
EFFICIENCY.update({"128x96c2n": 0.81, "128x112c2n": 0.83, "128x128c2n": 0.84,
                   "128x160c2n": 0.93, "128x192c2n": 0.93, "128x224c2n": 0.95,
                   "192x96c2n": 0.9, "192x112c2n": 0.98, "192x128c2n": 0.99,
                   "192x160c2n": 1.0})
# The 2x2 cluster (CLUSTER_2X2_VARIANTS): each one's time over its model
# with an efficiency of 1, against the same for the pick (at the pick's
# efficiency), median over the 22 runs of at least 30 us of 15 narrow-output
# shapes measured on an H200 beside the pick, bf16 and fp16 (docs/gemm.md,
# "The c2n rule's losses and the 2x2 cluster"). A CTA's tile and stages are
# the cluster along N's; the wider ones gain most from B read once per
# pair of tile rows.
EFFICIENCY.update({"128x96c2x2": 0.81, "128x112c2x2": 0.85, "128x128c2x2": 0.93,
                   "128x160c2x2": 0.95, "128x192c2x2": 0.98})
# The model's constants, fitted on the same run (the pick that maximizes
# the sum of log(ratio to the best variant) over its 76 shapes, coarse
# grid): a 128x256 tile's K block with every SM busy; a tile's fill and
# epilogue; the factor on one-CTA tiles when a row of A or B (K x 2 bytes)
# is not a multiple of 32 bytes, K not a multiple of 16 (each 128-byte TMA
# row read then spans five 32-byte L2 sectors instead of four, and a
# 128x256 tile already reads 48 KiB per K block: L2-bound. The cluster,
# which reads half of B, ran 0.85-0.96x cuBLAS on the big shapes of such
# a K where one CTA ran 0.70-0.81x; on K a multiple of 16 but not of 64
# (rows 32-byte aligned) the two ran alike, 0.84-0.98x; refitted to 1.4
# with the 192-row tiles over run6, run5, run3 and run4: 6208 x 1800 x
# 1192 ran 1.03x on the 128x256 cluster, 0.80x on 128x256, where 1.2 kept
# 128x256); below
# FLOOR_S a call is host-bound and no model is compared.
BLOCK_S = 0.75e-6
TILE_S = 1.5e-6
MISALIGNED_K = 1.4
# The one-CTA 192x192 tile loses less there: against its 2-CTA cluster
# 1.04-1.12 per K block (run6, run7: 2072 x 16040 x 3464, 5128 x 13896 x
# 7224, 8600 x 14032 x 4984, 6208 x 1800 x 1192, 4544 x 1008 x 7784,
# 10928 x 6640 x 248, bf16 and fp16, each pair at its own wave count),
# where the one-CTA 128x256 tile lost 1.13-1.45 against its cluster at the
# same shapes (it reads 256 rows of B a K block, 192x192 192): with 1.4,
# the pick took 192x192c2 on 2072 x 16040 x 3464 (8 rounds of pairs)
# where 192x192 (7 whole waves) ran 5-10% faster. Refitted to 1.04 in
# run10's oracle (docs/gemm.md, "Run10"): over the seven misaligned shapes
# of at least 100 us (2072 x 16040 x 3464, 5128 x 13896 x 7224, 8600 x
# 14032 x 4984, 3464 x 12520 x 5736, 6032 x 16120 x 3320, 912 x 9576 x
# 6984, 1416 x 7160 x 7256) the one-CTA tile's time over the model's was
# 0.97-1.04 where the cluster's was 1.03-1.10: 1.1 kept 192x192c2 on
# 5128 x 13896 x 7224 (16 rounds of pairs, the last half full) where
# 192x192 (15 waves) ran 2.4-3.5% faster.
MISALIGNED_K_OF = {"192x192": 1.04}
FLOOR_S = 10e-6


def misaligned_k(k, element_bytes=2):
    """Whether a K-major row of ``k`` elements is not a whole number of
    32-byte L2 sectors, so that each 128-byte TMA row of a tile reads five
    sectors instead of four (``MISALIGNED_K``); ``element_bytes`` 1 for
    the FP8 GEMM (ops/fp8_configs.py)."""
    return (k * element_bytes) % 32 != 0


def block_time(variant, k):
    """Modelled seconds of one K block of a ``variant`` tile, every SM busy."""
    bm, bn = tile(variant)
    t = BLOCK_S * bm * bn / (128 * 256) / EFFICIENCY[variant]
    if cluster_of(variant) == 1 and misaligned_k(k):
        t *= MISALIGNED_K_OF.get(variant, MISALIGNED_K)
    return t


def estimate(variant, m, n, sms, k=64):
    """Modelled seconds of the plain ``variant`` on an m x n x k product:
    waves of units (a cluster's tiles: ``gemm_variants.unit_tiles``;
    ``units_per_wave`` of them a wave), each its K blocks and a tile's
    fixed cost (see the module doc)."""
    waves = math.ceil(cluster_units(variant, m, n) / units_per_wave(variant, sms))
    return waves * (math.ceil(k / K_BLOCK) * block_time(variant, k) + TILE_S)


def cluster_units(variant, m, n):
    """Units of the plain ``variant`` on an m x n output: tiles, or a
    cluster's tiles (a pair along M or N, 2x2), ragged edges rounded up."""
    bm, bn = tile(variant)
    along_m_tiles, along_n_tiles = variant_unit_tiles(variant)
    return math.ceil(m / (bm * along_m_tiles)) * math.ceil(n / (bn * along_n_tiles))


def one_wave_ctas(variant, m, n, sms):
    """The CTAs the plain ``variant`` keeps busy on an m x n output if its
    units fit one wave (``units_per_wave``), else None."""
    units = cluster_units(variant, m, n)
    if units > units_per_wave(variant, sms):
        return None
    return units * cluster_of(variant)


# The share of ``sms / 4`` clusters of 4 CTAs that are resident at once: a
# cluster's CTAs share a GPC, and the GPCs' SM counts are not all multiples
# of 4. Measured on an H200 (docs/gemm.md, "The c2n rule's losses and the
# 2x2 cluster"): 30 units of 2x2 tiles ran in one round (7680 x 288 x
# 5632 on 128x160c2x2, as fast as the 60 pairs of 128x160c2n), 33 in two
# (8224 x 216 x 12464, 8400 x 200 x 6832, 8440 x 312 x 8464: 1.5-1.8 times
# the cluster along N's time).
RESIDENT_4_SHARE = 30 / 33


def units_per_wave(variant, sms):
    """Units (tiles, or a cluster's tiles) that run at once on ``sms`` SMs."""
    cluster = cluster_of(variant)
    if cluster == 4:
        return max(1, int(sms // 4 * RESIDENT_4_SHARE))
    return sms // cluster


K_BLOCK = 64                 # K of one k-block (the 128-byte swizzle span of 16-bit K)


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


def operand_rows(variant, m, n):
    """Operand rows (of one K block, 128 bytes each) the whole output reads
    from L2 per K block: A's ``m`` rows once per column unit of tiles and
    B's ``n`` rows once per row unit (a 2-CTA cluster reads its shared
    operand once for the pair). Tiles past the edge read only what is in
    bounds, so the count is of real rows."""
    bm, bn = tile(variant)
    along_m_tiles, along_n_tiles = variant_unit_tiles(variant)
    cols = math.ceil(n / (bn * along_n_tiles))
    rows = math.ceil(m / (bm * along_m_tiles))
    return cols * m + rows * n
