"""Which GEMM variant runs a given (M, N, K, dtype): a small table of tile
shapes and a rule that picks one.

Each variant is a set of ``examples/hopper_gemm.GemmConfig`` overrides
(tile M = 64 x consumer warpgroups, tile N = ``block_n``, operand stages,
epilogue passes, cluster). The persistent kernel runs one CTA per SM over
the output tiles (a 2-CTA cluster over tile pairs); a shape whose tile
count leaves SMs idle in the last wave wastes them, so the rule estimates,
per variant (``estimate``),

    waves = ceil(units / units per wave),
    time = waves x (K blocks x block time + tile time)

with the block time a 128x256 tile's (``BLOCK_S``, measured on an H200)
scaled by the tile's area over its ``EFFICIENCY`` (smaller tiles reuse
each loaded operand byte less; a 64-row tile feeds one consumer
warpgroup), and by ``MISALIGNED_K`` for a one-CTA tile when K is not a
multiple of 16; it picks the cheapest (the larger tile on a tie).
``benchmarks/gemm/sweep.py`` and ``random_sweep.py --variants`` measure
the variants beside the pick (``benchmarks/gemm/fit_pick.py`` scores the
rule on such a run); ``TUNED`` takes measured winners, by shape and
dtype, before the rule.

Why 128x192: a 3072-square output is 288 tiles of 128x256 (3 waves on 132
SMs, the last 18% full) or 576 of 128x128 (5 waves, the last 36% full);
at 128x192 it is 384 tiles, 3 waves 97% full (wgmma n = 192 is a valid
shape; its C tile is three 64-column boxes, one per epilogue pass, which
leaves shared memory for 5 stages). 128x64 feeds two consumer warpgroups
from one CTA on shapes whose 64x128 tiles already fill the GPU in one wave
(1024 x 1024 x 16384: 128 tiles either way); it is measured by the sweep
but left out of the rule until it wins there.

Why 192 rows (three consumer warpgroups): 192x192 reads 48 KiB of
operands per K block, as 128x256 does, for 1.125 times its area, and cuts
N of a few hundred in whole tiles (320 = 2 x 192 minus a ragged 64, where
128-wide tiles leave 2.5); 192x128 covers an M of 129..192 in one row of
tiles (184 x 11464 x 5424: 90 tiles of 192x128 where 128x192 runs 120
tiles a quarter empty); 192x192c2 multicasts B to a pair along M as
128x256c2 does. Measured on an H200 (docs/gemm.md: run5, run6).

Tiles cut to the shape (``CUT_VARIANTS``, ``choose_cut``): 128 rows and
160, 176, 208, 224 or 240 columns, one CTA or the 2-CTA cluster, where the
table's widths leave a part-empty wave or a wide ragged column of tiles
(592 x 9560 x 3864: 114 pairs of 128x256c2, 1.7 rounds of 66 clusters, or
129 pairs of 128x224c2, 1.95 rounds of tiles an eighth smaller). The rule
weighs them after stream-K and split-K, against the table's plain pick:
the cheapest by ``estimate`` (tiles, waves and the width's measured
``EFFICIENCY``) where it beats that pick by ``CUT_MARGIN``, on outputs of
more than a wave and at least ``CUT_MIN_N`` wide (docs/gemm.md, "Tiles cut
to the shape", run12).

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
measure.

Stream-K (``choose_stream_k``, ``<tile>_streamk`` variants): one launch in
which the waves the tiles fill whole run as data-parallel tiles and the
rest (the leftover, all tiles when there are fewer than SMs, or for a
small leftover the leftover and the last full wave: ``stream_k_launch``)
is cut into equal runs of K blocks, one per CTA; the CTAs that
share a tile leave fp32 partials in a workspace and the tile's last
contributor in K order waits for them and adds them to its own
accumulator (bitwise the same every run). It removes the part-empty
last wave of any shape at the price of writing and reading partial tiles;
``estimate_time_stream_k`` models both, and the pick takes stream-K where
the model says it beats the plain pick by ``STREAM_K_MARGIN``.
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
    # Three consumer warpgroups (64 rows each): tiles of 192 rows. The entry
    # registers are 65,536 / threads (128 at 512 threads), and setmaxnreg
    # moves registers within the CTA's own: 32 + 3 x 160 = 4 x 128. ptxas
    # holds every role to the entry count: m64n192's 96 accumulators fit
    # (no spill, the full fused epilogue included), m64n256's 128 do not.
    # 256x128 (four consumer warpgroups, 96 entry registers) was measured
    # and left out: 0.98 of 128x256's rate on the big shapes, 0.83 of
    # 192x192's on a narrow N, and 56 bytes of spills with the full fused
    # epilogue (docs/gemm.md, run5).
    "192x192": dict(block_n=192, consumer_warpgroups=3, epilogue_passes=3,
                    producer_registers=32, consumer_registers=160),
    "192x192c2": dict(block_n=192, consumer_warpgroups=3, epilogue_passes=3,
                      producer_registers=32, consumer_registers=160, cluster_m=2),
    # The 2-CTA cluster side by side along N, multicasting A
    # (GemmConfig.cluster_along_n): cuBLAS's 192x192 kernel on 2072 x 16040
    # x 3464 runs a 2-CTA cluster on a grid of 2 x 66; ours paired tiles
    # along M (11 tile rows: a twelfth, empty, in each column: 8 rounds of
    # pairs for 7 waves) or ran one CTA with L2 90% busy and the SMs 75%
    # (ncu). Along N: 7 rounds of 42 pairs a row, 81% and 92%, 0.90x the
    # one-CTA time (docs/gemm.md, "The 192x192 tile against cuBLAS's").
    "192x192c2n": dict(block_n=192, consumer_warpgroups=3, epilogue_passes=3,
                       producer_registers=32, consumer_registers=160, cluster_m=2,
                       cluster_along_n=True),
    "192x128": dict(block_n=128, consumer_warpgroups=3, epilogue_passes=2, stages=5,
                    producer_registers=32, consumer_registers=160),
    # Two CTAs of 128x128 per SM (``ctas_per_sm=2``): while one CTA's
    # consumers run a tile's epilogue, the other CTA's wgmma keep the tensor
    # cores busy. Each CTA has half the SM: 3 stages of 32 KiB and a 16 KiB
    # C buffer (two passes) fill its 113 KiB to the byte; its producer is
    # one warp after the two consumer warpgroups (288 threads, 96
    # registers each: ptxas holds every role to the launch's count, and an
    # m64n128 wgmma does not fit the 80 of two 384-thread CTAs). With a
    # residual its epilogue spills (``NO_RESIDUAL``).
    "128x128x2": dict(block_n=128, consumer_warpgroups=2, epilogue_passes=2, stages=3,
                      ctas_per_sm=2, setmaxnreg=False),
    # The ping-pong schedule (``pingpong_m``, kernels/hopper_gemm_pingpong.py):
    # each of the two consumer warpgroups owns whole tiles (128x128: two
    # m64n128 wgmma a k-slice; 64x256: one m64n256) and the two take the
    # CTA's tiles and their mainloops in turn, so that one's epilogue runs
    # while the other's wgmma keep the tensor cores busy. A C buffer per
    # warpgroup (one 64-row sub-tile's pass): 6 and 4 stages.
    "128x128pp": dict(block_n=128, consumer_warpgroups=2, epilogue_passes=1, stages=6,
                      pingpong_m=128),
    "64x256pp": dict(block_n=256, consumer_warpgroups=2, epilogue_passes=2, stages=4,
                     pingpong_m=64),
}
# Tiles cut to the shape: 128 rows (two consumer warpgroups) and a width
# between the table's 128, 192 and 256 columns (wgmma takes any N a multiple
# of 8 up to 256; a multiple of 16 so that the 2-CTA cluster's B half is
# whole 8-row groups), one CTA and the 2-CTA cluster. N = 6504 is 26
# columns of 256 (the last 104 wide: 1.77 waves at M = 1048) or 28 of 240
# (2 waves 95% full); N = 9560 at M = 592 is 114 pairs of 128x256c2 or 129
# of 128x224c2 (each an eighth smaller, the same 2 rounds of 66 clusters).
# The C tile's boxes are 64-byte (160, 224: 32 columns) or 32-byte (176,
# 208, 240: 16 columns) swizzle spans (GemmConfig.c_swizzle); stages and
# epilogue passes (the last pass may hold fewer boxes) fill the 227 KiB: 5
# stages at 160 and 176, 4 at 208-240 as at 256. Built without fused
# epilogues (``UNFUSED``: uneven passes take none, and no fused call was
# measured on them) and without stream-K.
CUT_WIDTHS = (160, 176, 208, 224, 240)
CUT_SHAPE = {160: dict(epilogue_passes=1, stages=5), 176: dict(epilogue_passes=2, stages=5),
             208: dict(epilogue_passes=2, stages=4), 224: dict(epilogue_passes=2, stages=4),
             240: dict(epilogue_passes=2, stages=4)}
CUT_VARIANTS = {f"128x{n}{c}": dict(block_n=n, consumer_warpgroups=2, **CUT_SHAPE[n],
                                    **({"cluster_m": 2} if c else {}))
                for n in CUT_WIDTHS for c in ("", "c2")}
VARIANTS.update(CUT_VARIANTS)
# Split-K variants, ``<tile>_sk<S>`` (``split_variant``): the two tiles
# with the most operand reuse; no C buffer in shared memory (partials go
# from registers to the workspace), the stages of the plain tile.
SPLIT_TILES = ("128x256", "128x128")
SPLITS = tuple(range(2, 9))
SPLIT_VARIANTS = {f"{t}_sk{s}": dict(VARIANTS[t], split_k=s)
                  for t in SPLIT_TILES for s in SPLITS}
# Stream-K variants, ``<tile>_streamk``: the plain tile's stages and
# epilogue, plus the workspace and counter parameters (ops/streamk_host.py).
STREAM_K_TILES = ("128x256", "128x256c2", "128x192", "128x128", "192x192", "192x192c2",
                  "192x128")
STREAM_K_VARIANTS = {f"{t}_streamk": dict(VARIANTS[t], stream_k=True) for t in STREAM_K_TILES}
# Stream-K experiments, measured beside the pick (random_sweep.py
# --variants), never picked: ``_pf``, the last contributor's L2 prefetch of
# the others' partials (GemmConfig.sk_prefetch).
STREAM_K_EXPERIMENTS = {f"{v}_pf": dict(STREAM_K_VARIANTS[v], sk_prefetch=True)
                        for v in ("128x256c2_streamk", "128x128_streamk")}
# The shared fix-up, ``<tile>_streamk_share`` (GemmConfig.sk_share): every
# contributor of a partial tile sums its share of the tile's partials and
# stores that share of C, on a launch whose runs are one segment each
# (stream_k_launch(..., share=True): the leftover kind).
STREAM_K_SHARE_VARIANTS = {f"{v}_share": dict(o, sk_share=True)
                           for v, o in STREAM_K_VARIANTS.items()}
# Profiling builds of the stream-K variants, ``<tile>_streamk_timeline``
# (and ``<tile>_streamk_share_timeline``):
# the same kernel stamping each phase's time into a buffer
# (kernels/streamk_timeline.py; benchmarks/gemm/streamk_timeline.py runs
# them). Never picked, never in the cache's --all.
TIMELINE_VARIANTS = {f"{v}_timeline": dict(o, timeline=True)
                     for v, o in (*STREAM_K_VARIANTS.items(), *STREAM_K_SHARE_VARIANTS.items())}
# Tiles built without fused epilogues: with the full one (alpha, bias,
# residual, gelu) 192x192c2 spills 8 bytes (ptxas -v; its 128 registers
# hold the cluster's multicast state besides 96 accumulators). A fused
# call's pick (choose(..., fused=True)) leaves them out.
UNFUSED = ("192x192c2", "192x192c2n", *CUT_VARIANTS)
# The stream-K tiles the rule may pick.
RULE_STREAM_K_TILES = ("128x256", "128x256c2", "192x192c2", "192x192", "128x192", "192x128",
                       "128x128")
# What the rule may pick (in this order on a tie): the 2-CTA cluster
# (multicast B: half of B's reads from L2) runs as fast as one CTA where L2
# keeps up, and faster where it does not (below: MISALIGNED_K).
RULE_VARIANTS = ("128x256", "128x256c2", "192x192c2", "192x192", "128x192", "192x128", "128x128",
                 "64x256", "64x128")
# Whether the rule may pick a tile cut to the shape (CUT_VARIANTS,
# choose_cut): after stream-K and split-K, which are weighed against the
# table's plain pick as before (run12's oracle: the stream-K picks of
# 1048 x 6504 x 11408, 4544 x 1008 x 7784, 1664 x 1112 x 12456 and 720 x
# 7440 x 5256 ran 3-24% faster than the best cut tile). Never for a fused
# call (UNFUSED).
AUTO_CUT = True
# The rule's: 208 columns and wider. 160 and 176 stay in the table (timed
# beside the pick) but lost where the model took them: 4408 x 1208 x 992 on
# 128x176c2 ran 1.11-1.14x the time of 192x128 in one process, and no shape
# of run12's oracle ran faster on them than on its pick.
CUT_RULE_VARIANTS = tuple(v for v, o in CUT_VARIANTS.items() if o["block_n"] >= 208)
CUT_MARGIN = 1.0
# Only on outputs of more than a wave of the plain pick's tiles (below it the
# product is bound by reading B: 136 x 12192 x 952 ran 0.91x as fast on
# 128x208c2 as on 128x256c2, where the model saw a smaller tile in the same
# one wave) and at least this wide (the narrow outputs of a tall M keep the
# 192-row tiles measured there; the cut tiles were measured from N = 1008).
CUT_MIN_N = 1024
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
    # Shapes whose 64x128 tiles fill one wave and whose K is long: the model
    # takes 128x128 stream-K there, measured slower (h200-random-sweep-run3.log,
    # bf16: 1024 x 1024 x 16384 1.22x cuBLAS on 64x128 against 1.10x,
    # 256 x 4096 x 14336 1.19x against 1.14x; the one-warpgroup tile runs
    # these better than its 0.6 efficiency says). Before, the split-K model
    # would have split them (h100-sweep-run2.log: 1.117x / 1.053x and
    # 1.492x / 1.252x on 64x128).
    (1024, 1024, 16384, "bf16"): "64x128",
    (1024, 1024, 16384, "f16"): "64x128",
    (256, 4096, 14336, "bf16"): "64x128",
    (256, 4096, 14336, "f16"): "64x128",
}


def overrides(variant):
    """The GemmConfig overrides of a plain or split-K variant name."""
    found = (VARIANTS.get(variant) or SPLIT_VARIANTS.get(variant)
             or STREAM_K_VARIANTS.get(variant) or TIMELINE_VARIANTS.get(variant)
             or STREAM_K_EXPERIMENTS.get(variant) or STREAM_K_SHARE_VARIANTS.get(variant))
    if found is None:
        raise KeyError(f"gemm_configs: no variant {variant!r} (plain: {', '.join(VARIANTS)}; "
                       f"split-K: <{'|'.join(SPLIT_TILES)}>_sk<{SPLITS[0]}..{SPLITS[-1]}>; "
                       f"stream-K: {', '.join(STREAM_K_VARIANTS)})")
    return found


def is_stream_k(variant):
    return bool(overrides(variant).get("stream_k", False))


def splits_of(variant):
    """S of a split-K variant name, 1 for a plain one."""
    return overrides(variant).get("split_k", 1)


def tile(variant):
    cfg = overrides(variant)
    # a ping-pong tile is one consumer warpgroup's (pingpong_m rows)
    return cfg.get("pingpong_m") or WGMMA_M * cfg["consumer_warpgroups"], cfg["block_n"]


def cluster_of(variant):
    """CTAs of the variant's cluster (1 or 2): along M, or along N where
    ``along_n``."""
    return overrides(variant).get("cluster_m", 1)


def along_n(variant):
    """Whether the variant's cluster pairs tiles along N (sharing A)."""
    return overrides(variant).get("cluster_along_n", False)


def tile_variant(variant):
    """The plain variant a split-K or stream-K one is built on (the name's
    tile part)."""
    return variant.split("_sk")[0].split("_streamk")[0]


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
    waves of tiles (a 2-CTA cluster's unit is two tiles, along M or N,
    ``sms / 2`` of them a wave), each its K blocks and a tile's fixed cost
    (see the module doc)."""
    bm, bn = tile(variant)
    cluster = cluster_of(variant)
    if along_n(variant):
        units = math.ceil(m / bm) * math.ceil(n / (bn * cluster))
    else:
        units = math.ceil(m / (bm * cluster)) * math.ceil(n / bn)
    waves = math.ceil(units / (sms // cluster))
    return waves * (math.ceil(k / K_BLOCK) * block_time(variant, k) + TILE_S)


# Whether the pick may choose a split-K variant. Off: measured on an H200
# (docs/gemm.md, "Split-K and the fill analysis"), every split-K pick of the
# random sweep ran at 0.44-0.96x cuBLAS (median 0.54x): about 35 us per call
# against 17-20 us, where its two launches and workspace are host-bound. The
# variants stay in the table, built and tested, for the work that makes them
# pay (a single launch, or serial split-K in one kernel).
AUTO_SPLIT_K = False
# Whether the pick may choose a stream-K variant (choose_stream_k).
AUTO_STREAM_K = True


def choose(m, n, k, dtype, sms=132, split=None, stream_k=None, fused=False,
           activation=None, residual=False):
    """The variant name for this shape and dtype ('bf16' or 'f16'); with
    ``split=False`` never a split-K one (``None``: ``AUTO_SPLIT_K``), with
    ``stream_k=False`` never a stream-K one (``None``: ``AUTO_STREAM_K``);
    ``fused=True``: the pick of a call with a fused epilogue, never
    stream-K and never a variant of ``UNFUSED``; its ``activation`` and
    ``residual`` (whether it adds one) may make it the ping-pong tile
    (``choose_pingpong``) or else the two-CTA tile (``choose_two_ctas``)."""
    if split is None:
        split = AUTO_SPLIT_K
    if stream_k is None:
        stream_k = AUTO_STREAM_K
    if fused:
        stream_k = False
    tuned = TUNED.get((m, n, k, dtype))
    if tuned is not None and (stream_k or not is_stream_k(tuned)) \
            and not (fused and tuned in UNFUSED):
        pick = tuned
    else:
        rule = [v for v in RULE_VARIANTS if not (fused and v in UNFUSED)]
        plain = min(rule, key=lambda v: (estimate(v, m, n, sms, k), -math.prod(tile(v))))
        pick = ((stream_k and choose_stream_k(m, n, k, sms, plain))
                or (split and choose_split(m, n, k, sms, plain))
                or (AUTO_CUT and not fused and choose_cut(m, n, k, sms, plain)) or plain)
        if not fused:
            pick = choose_cluster_n(m, n, k, sms, pick) or pick
    if fused:
        return (choose_pingpong(m, n, k, sms, pick, residual)
                or choose_two_ctas(m, n, sms, pick, activation, residual) or pick)
    return pick


# Whether a 192x192 pick may become its 2-CTA cluster along N
# (choose_cluster_n). Measured only against 192x192 (docs/gemm.md, "The
# 192x192 tile against cuBLAS's"): the rule turns no other pick into it.
AUTO_CLUSTER_N = True
CLUSTER_N_VARIANT = "192x192c2n"
CLUSTER_N_OVER = ("192x192",)


def choose_cluster_n(m, n, k, sms, pick):
    """``CLUSTER_N_VARIANT`` where the pick is one of ``CLUSTER_N_OVER``
    and its ``estimate`` is less (fewer rounds of pairs than the
    one-CTA tile's waves at its ``MISALIGNED_K_OF`` cost: K not a multiple
    of 16, an odd count of tile rows and an even one of columns, as 2072 x
    16040 x 3464: 7 rounds of 42 pairs a row against 7 waves at 1.04);
    else None. Never for a fused call (the variant is in ``UNFUSED``)."""
    if not AUTO_CLUSTER_N or pick not in CLUSTER_N_OVER:
        return None
    if estimate(CLUSTER_N_VARIANT, m, n, sms, k) < estimate(pick, m, n, sms, k):
        return CLUSTER_N_VARIANT
    return None


def choose_cut(m, n, k, sms, plain):
    """The tile cut to the shape (``CUT_RULE_VARIANTS``) of least
    ``estimate``, if it beats the plain pick ``plain``'s by ``CUT_MARGIN``
    (both at least ``FLOOR_S``), on an output of more than a wave of
    ``plain``'s tiles and at least ``CUT_MIN_N`` wide; else None."""
    if not CUT_RULE_VARIANTS or units_of(plain, m, n) <= sms or n < CUT_MIN_N:
        return None
    best = min(CUT_RULE_VARIANTS, key=lambda v: (estimate(v, m, n, sms, k), -tile(v)[1]))
    if max(estimate(best, m, n, sms, k), FLOOR_S) < \
            CUT_MARGIN * max(estimate(plain, m, n, sms, k), FLOOR_S):
        return best
    return None


# -- the ping-pong schedule for a fused epilogue ---------------------------------------
# The cooperative kernel's two consumer warpgroups run each tile's epilogue
# together while the tensor cores wait; in the ping-pong one (``pingpong_m``,
# kernels/hopper_gemm_pingpong.py) each warpgroup owns whole 128x128 tiles and
# its epilogue runs under the other's mainloop, so only a CTA's last epilogue
# is exposed where the cooperative 128x256 tile exposes one per tile.
# Measured on an H200 beside the pick in the same rounds, bf16, a bias and
# each of relu, gelu tanh, gelu erf, silu (docs/gemm.md, "Fused epilogues,
# measured", the ping-pong schedule), ``PINGPONG_VARIANT`` against the pick:
# - 1.02-1.13x over 128x256 and 128x256c2 (and 1.05-1.07x over 128x128x2)
#   wherever the busiest CTA runs at least 4 of its tiles (2048 x 4096 x
#   4096: 3.9 tiles an SM, 1.02-1.04x; 1024 x 11008 x 4096: 5.2, 1.04-1.07x;
#   4096^3 .. 8192^3: 1.03-1.13x), for every activation: relu gains too, the
#   bias's loads alone are an epilogue worth hiding;
# - about even at 2 or 3 tiles an SM (2048^3, 4096 x 1024 x 4096: 0.97-1.06x;
#   1536 x 4096 x 4096 over 192x128: 1.00-1.04x) and below one (512 x 4096
#   x 4096: 0.89-1.01x; 128 x 8192 x 8192 over 64x128: 0.81-0.87x): there the
#   two-CTA rule or the pick stands;
# - 0.93-0.95x against 192x192 (3072^3: its operand reuse), and 0.62-0.70x
#   where K is not a multiple of 16 (4096 x 4096 x 4104, against 128x256c2:
#   the one-CTA 128x128 tile reads five L2 sectors per 128-byte row, see
#   MISALIGNED_K): the rule leaves those.
# A residual was not measured (the pick stays as it was); the plain GEMM is
# no candidate (0.97-0.98x of 128x256 on 4096^3 and 1024 x 11008 x 4096).
PINGPONG_VARIANT = "128x128pp"
PINGPONG_OVER = ("128x256", "128x256c2", "128x128")
PINGPONG_MIN_ROUNDS = 4         # the busiest CTA's tiles: two per warpgroup


def choose_pingpong(m, n, k, sms, pick, residual=False):
    """``PINGPONG_VARIANT`` for a fused call with no residual whose pick is
    one of ``PINGPONG_OVER``, whose K rows are whole L2 sectors
    (``misaligned_k``) and where the busiest CTA runs at least
    ``PINGPONG_MIN_ROUNDS`` of its tiles (the epilogues it hides grow with
    them); else None."""
    if pick not in PINGPONG_OVER or residual or misaligned_k(k):
        return None
    if math.ceil(units_of(PINGPONG_VARIANT, m, n) / sms) < PINGPONG_MIN_ROUNDS:
        return None
    return PINGPONG_VARIANT


# -- two CTAs per SM for a fused epilogue ---------------------------------------------
# The one-CTA kernel's consumers run each tile's epilogue while the tensor
# cores wait; two co-resident CTAs of 128x128 (``TWO_CTA_VARIANT``) run one
# CTA's wgmma during the other's epilogue. Measured on an H200 beside the
# pick in the same rounds, bf16 with a bias, three runs (docs/gemm.md,
# "Fused epilogues, measured", run4; benchmarks/gemm/results/
# h200-epilogue-run4*.log), against the one-CTA tile:
# - gelu tanh and silu: 1.004-1.038x the 128x256 tile (1024 x 11008 x 4096,
#   4096^3, 8192 x 4096 x 4096, 4096 x 1024 x 4096; one 0.994x) and
#   1.05-1.08x the 128x128 tile (2048^3);
# - gelu erf 0.978-1.015x (median 1.002x) and relu 0.986-1.010x against
#   128x256: nothing to gain, the rule leaves them;
# - against the 2-CTA cluster (the N-heavy model shapes, 8192^3) 0.97-1.04x,
#   mixed, and 0.85-0.89x against 192x192 (3072^3): the rule keeps those;
# - with fewer tiles than the two CTAs of every SM fill (512 x 4096 x 4096:
#   128 tiles, 0.76x; 128 x 8192 x 8192: 0.58x) a CTA runs alone on its SM
#   with 3 stages where the one-CTA tiles have 4-8.
TWO_CTA_VARIANT = "128x128x2"
TWO_CTA_OVER = ("128x256", "128x128")
TWO_CTA_ACTIVATIONS = ("gelu_tanh", "silu")
TWO_CTA_MIN_FILL = 0.9          # tiles / (2 x SMs)
# Variants whose fused epilogue spills with a residual (ptxas -v; the
# two-CTA tile holds 96 registers a thread): a call with one never takes them.
NO_RESIDUAL = (TWO_CTA_VARIANT,)


def choose_two_ctas(m, n, sms, pick, activation, residual=False):
    """``TWO_CTA_VARIANT`` for a fused call whose pick is a one-CTA tile of
    ``TWO_CTA_OVER``, with an activation of ``TWO_CTA_ACTIVATIONS`` and no
    residual, where the 128x128 tiles fill at least ``TWO_CTA_MIN_FILL`` of
    the two CTAs of every SM; else None."""
    if pick not in TWO_CTA_OVER or activation not in TWO_CTA_ACTIVATIONS or residual:
        return None
    ctas = overrides(TWO_CTA_VARIANT)["ctas_per_sm"] * sms
    if units_of(TWO_CTA_VARIANT, m, n) < TWO_CTA_MIN_FILL * ctas:
        return None
    return TWO_CTA_VARIANT


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


def estimate_time(variant, m, n, k, sms, splits=1, dram_bytes_per_s=DRAM_BYTES_PER_S):
    """Modelled seconds of ``variant`` (a plain tile name) with ``splits``
    K splits: waves of units, each its share of K blocks at the tile's
    efficiency plus a fixed fill/epilogue cost, but no less than reading
    the operands once; with splits > 1 also the fp32 workspace written and
    read back and the reduction's launch. ``dram_bytes_per_s``: the GPU's
    DRAM rate (the FP8 pick passes the H200's, where it was measured)."""
    bm, bn = tile(variant)
    kb = math.ceil(k / K_BLOCK)
    per_unit = math.ceil(kb / splits)
    waves = math.ceil(units_of(variant, m, n, splits) / sms)
    t = waves * (2 * bm * bn * K_BLOCK * per_unit / (SM_FLOPS * TIME_EFFICIENCY[variant])
                 + UNIT_OVERHEAD_S)
    # A floor: A and B read from DRAM at least once (a 128 x 8192 x 8192
    # product streams 134 MB of B, whatever the split).
    t = max(t, (m + n) * k * 2 / dram_bytes_per_s)
    if splits > 1:
        workspace = splits * m * n * 4
        rate = L2_BYTES_PER_S if workspace <= L2_RESIDENT_BYTES else dram_bytes_per_s
        t += 2 * workspace / rate + 2 * m * n / dram_bytes_per_s + REDUCE_LAUNCH_S
    return t


def choose_split(m, n, k, sms, plain, tiles=SPLIT_TILES, splits=SPLITS,
                 dram_bytes_per_s=DRAM_BYTES_PER_S):
    """The split-K variant for this shape, or None: only where the plain
    pick ``plain`` runs fewer units than there are SMs (one part-empty
    wave), over every split tile and S that leaves each split at least
    ``MIN_SPLIT_K_BLOCKS``, the one of least ``estimate_time``, if it beats
    the plain pick's by ``SPLIT_MARGIN``. ``tiles``, ``splits`` and
    ``dram_bytes_per_s``: the candidates and the DRAM rate of another
    table's use of this rule (ops/fp8_configs.py)."""
    if units_of(plain, m, n) >= sms:
        return None
    kb = math.ceil(k / K_BLOCK)
    best, best_t = None, SPLIT_MARGIN * estimate_time(plain, m, n, k, sms,
                                                      dram_bytes_per_s=dram_bytes_per_s)
    for t in tiles:
        for s in splits:
            if kb < s * MIN_SPLIT_K_BLOCKS:
                break
            est = estimate_time(t, m, n, k, sms, s, dram_bytes_per_s)
            if est < best_t:
                best, best_t = f"{t}_sk{s}", est
    return best


# -- the time model of stream-K -----------------------------------------------------
# A stream-K run costs, besides its K blocks: a fixed part (its extra
# units' pipeline fill, the arrival's fences and atomic, the last
# contributor's wait for the others) and one partial tile's write or read
# per piece and two more (128x256: 128 KiB of fp32). Fitted with the plain
# model's constants on the H200 run above. Not refitted after the last
# contributor stopped storing and re-reading its own partial (docs/gemm.md,
# "The last contributor adds the partials": 3-5 us less a run): lower
# constants turn 5648 x 216 x 8832 to 192x128_streamk, measured 0.77-0.80x
# cuBLAS there against the plain 128x128's 0.89-0.90x (an L2 cost of the
# runs the model does not have).
STREAM_K_FIXED_S = 10e-6
SLOT_S = 1.3e-6              # a 128x256 tile's partial (scaled by area)
STREAM_K_MARGIN = 0.9        # stream-K only when the model says >= 10% faster
# A stream-K pick whose launch is the even kind (after a full wave, the
# leftover shared by the whole wave: stream_k_launch) is taken at a 3%
# modelled gain. Measured on an H200 (docs/gemm.md, "Run10"), in one
# process beside the plain pick: 1048 x 6504 x 11408 on 192x192c2 (even)
# 0.947 / 0.980x cuBLAS against 128x256's 0.903 / 0.895x, 1416 x 7160 x
# 7256 on 128x256c2 (even) 1.017 / 1.007x against 0.890 / 0.899x. The
# other kinds keep the 10%: at 0.97 for every kind 2.3% of random shapes
# would change pick, mostly tall narrow outputs to 192x128 stream-K
# (unmeasured), and 5648 x 216 x 8832 (fewer tiles than the SMs) to
# 192x128 stream-K, measured 0.989 / 0.845x against the plain 128x128's
# 0.997 / 0.897x (each CTA's run reads A at its own K).
STREAM_K_MARGIN_EVEN = 0.97
# The spread launch only for a leftover of at most a quarter of the wave
# (runs of at most 1.25 tiles). Measured on an H200 (docs/gemm.md, run8),
# spread against leftover in one process: 1.09-tile runs 2-3% faster
# (4544 x 1008 x 7784), 1.33 even (2040 x 2752 x 6744), 1.61-1.97 2-5%
# slower and 1.77 on the one-CTA 128x256 18% slower (1024 x 11008 x 4096,
# 592 x 9560 x 3864, 1048 x 6504 x 11408): long runs put the CTAs that
# share an operand block at different K, so L2 keeps less of it.
SPREAD_LEFTOVER = 4
# Whether the model's launch may take the even kind (stream_k_launch):
# after at least one full wave, for a leftover of more than half the wave
# (one whole piece a tile: the leftover kind is no stream-K at all there).
# Measured on an H200 in one process (docs/gemm.md, "Run10"), against the
# leftover kind of the same kernel (bf16 and fp16): 1416 x 7160 x 7256 on
# the 2-CTA 128x256 tile (36 of 66 pairs left over after two rounds)
# 0.89x as long, 1048 x 6504 x 11408 on 192x192c2 0.81x, 592 x 9560 x
# 3864 on 128x256c2 0.98x; with no full wave before it (5648 x 216 x 8832:
# 90 tiles of 128x128 on 132 SMs) 1.16-1.17x: every CTA reads A at
# another K from its first block on.
AUTO_EVEN = True
# A whole-tile round of a stream-K launch against a wave of the plain tile
# (estimate_time_stream_k). Measured on an H200 (docs/gemm.md, "Run10"):
# the stream-K kernels' whole tiles ran 1.07x the plain kernel's (whole
# waves, no stream-K run: 5760 x 8448 x 4096 and 8448 x 5120 x 4096) until
# the counter wait stopped diverging (kernel/arrival_counter._poll), then
# 0.98-1.04x; over the seven shapes of 7 to 28 rounds, every kind of
# launch, the stream-K launches ran a median 0.99-1.03x the plain tile's
# time where the model without this said 0.97-1.0x.
STREAM_K_ROUND = 1.02


def stream_k_run_time(variant, sk_tiles, k_blocks, sk_ctas, k=K_BLOCK):
    """Modelled seconds of the stream-K run: ``sk_tiles`` tiles' K blocks
    shared equally by ``sk_ctas`` CTAs (as many: one whole tile each, no
    partial). Its cost besides the longest run's K blocks (and a tile's
    fill for each whole tile inside a run): the fixed part, and the
    partial tiles written and read, ``contributors + 3`` of them, where
    ``contributors`` is the most CTAs sharing one tile (the last one
    reads the others')."""
    bm, bn = tile(variant)
    if sk_ctas == sk_tiles:
        return k_blocks * block_time(variant, k) + TILE_S
    blocks = -(-sk_tiles * k_blocks // sk_ctas)
    contributors = -(-sk_ctas // sk_tiles) + (1 if sk_ctas % sk_tiles else 0)
    return (blocks * block_time(variant, k) + blocks // k_blocks * TILE_S + STREAM_K_FIXED_S
            + (contributors + 3) * SLOT_S * bm * bn / (128 * 256))


# The shared fix-up (``<tile>_streamk_share``): each contributor stores its
# partial and reads one partial's worth (its share of every contributor's),
# so the partial traffic per SM does not grow with the pieces; each piece
# costs a share of the wait and a dependent load per 16 bytes of a share.
SHARE_SLOTS = 3
SHARE_PIECE_S = 0.1e-6


def stream_k_share_run_time(variant, sk_tiles, k_blocks, sk_ctas, k=K_BLOCK):
    """``stream_k_run_time`` of the shared fix-up (``sk_ctas`` a multiple
    of ``sk_tiles``: one segment a run)."""
    bm, bn = tile(variant)
    pieces = sk_ctas // sk_tiles
    if pieces == 1:
        return k_blocks * block_time(variant, k) + TILE_S
    blocks = -(-k_blocks // pieces)
    return (blocks * block_time(variant, k) + STREAM_K_FIXED_S + pieces * SHARE_PIECE_S
            + SHARE_SLOTS * SLOT_S * bm * bn / (128 * 256))


def stream_k_launch(tiles, k_blocks, sms, variant="128x256", spread=None, share=False):
    """``(grid, sk_ctas, rounds)`` of a stream-K launch, the one of least
    modelled time of three kinds:

    - *leftover*: every full wave runs whole tiles (``rounds = tiles //
      sms``), and the ``tiles % sms`` left over are cut into the number of
      pieces each (at most ``sms // leftover``, at most a K block each) of
      least ``stream_k_run_time``: ``sk_ctas = leftover x pieces``;
    - *spread* (at least one full wave, a leftover of at most ``sms /
      SPREAD_LEFTOVER``): the last full wave joins the leftover, and every
      CTA shares the ``sms + leftover`` tiles' K blocks (``rounds = tiles
      // sms - 1``, ``sk_ctas = sms``): runs of one to 1.25 tiles, so a
      tile has at most two contributors, where a leftover much smaller
      than the wave cuts each of its tiles into many pieces whose partials
      one SM then reads back (4544 x 1008 x 7784 on the 2-CTA 128x256
      tile: 6 pairs over 66 clusters, nine pieces each).

    - *even* (after at least one full wave, a leftover of more than half
      the wave, ``AUTO_EVEN``): every full wave runs whole tiles and every
      CTA of the wave shares the leftover's K blocks (``sk_ctas = sms``,
      at most one a K block): runs of ``leftover / sms`` of a tile, at
      most two segments (so at most two contributors a tile), where the
      leftover kind's whole pieces leave SMs idle (102 of 132 left over:
      one piece each, no stream-K run at all). ``spread="even"``: that
      kind whatever the model says (``random_sweep.py``'s ``@even``).

    One CTA per SM (fewer tiles than SMs: the stream-K CTAs alone). With
    no tiles left over, ``sk_ctas`` is 1 and unused. The host and the pick
    both call this (the same numbers). ``spread`` True / False: that kind
    wherever there is a full wave (to measure one beside the other:
    random_sweep.py's ``<variant>@spread`` candidates).

    ``share``: the launch of a shared fix-up variant (``sk_share``): the
    leftover kind only (every run one segment), its pieces by
    ``stream_k_share_run_time``."""
    rounds, rest = divmod(tiles, sms) if tiles >= sms else (0, tiles)
    if rest == 0:
        return sms, 1, rounds
    most = max(1, min(sms // rest, k_blocks))
    if share:
        pieces = min(range(1, most + 1), key=lambda p: (
            stream_k_share_run_time(variant, rest, k_blocks, rest * p), -p))
        return (sms if tiles >= sms else rest * pieces), rest * pieces, rounds
    if spread == "even":
        sk_ctas = min(sms, rest * k_blocks)
        return (sms if tiles >= sms else sk_ctas), sk_ctas, rounds
    pieces = min(range(1, most + 1),
                 key=lambda p: (stream_k_run_time(variant, rest, k_blocks, rest * p), -p))
    best = (stream_k_run_time(variant, rest, k_blocks, rest * pieces), rest * pieces, rounds)
    even = min(sms, rest * k_blocks)
    if spread is None and AUTO_EVEN and rounds >= 1 and pieces == 1 and even > rest:
        t = stream_k_run_time(variant, rest, k_blocks, even)
        if t < best[0]:
            best = (t, even, rounds)
    if rounds >= 1 and (spread or (spread is None and rest * SPREAD_LEFTOVER <= sms)):
        t = (stream_k_run_time(variant, rest + sms, k_blocks, sms)
             - (k_blocks * block_time(variant, K_BLOCK) + TILE_S) * STREAM_K_ROUND)
        if t < best[0] or spread:
            best = (t, sms, rounds - 1)
    _, sk_ctas, rounds = best
    return (sms if tiles >= sms else sk_ctas), sk_ctas, rounds


def is_even_launch(tiles, k_blocks, sms, variant="128x256"):
    """Whether the model's stream-K launch of ``tiles`` units is the even
    kind (stream_k_launch): whole rounds, then every CTA of the wave shares
    the leftover."""
    rounds, rest = divmod(tiles, sms)
    if rounds == 0 or rest == 0:
        return False
    _, sk_ctas, r = stream_k_launch(tiles, k_blocks, sms, variant)
    return r == rounds and sk_ctas == min(sms, rest * k_blocks) and sk_ctas % rest != 0


def stream_k_grid(tiles, k_blocks, sms, variant="128x256", share=False):
    """The grid of a stream-K launch (``stream_k_launch``)."""
    return stream_k_launch(tiles, k_blocks, sms, variant, share=share)[0]


def stream_k_plan(tiles, k_blocks, sms, variant="128x256", spread=None, share=False):
    """``(rounds, stream-K tiles, sk_ctas)``, as
    kernel/tile_scheduler.StreamKSchedule runs them on this launch."""
    grid, sk_ctas, rounds = stream_k_launch(tiles, k_blocks, sms, variant, spread, share)
    return rounds, tiles - rounds * grid, sk_ctas


def estimate_time_stream_k(variant, m, n, k, sms):
    """Modelled seconds of the stream-K variant of tile ``variant``: its
    whole-tile rounds, then the stream-K run (a 2-CTA cluster's units are
    tile pairs, ``sms / 2`` of them a wave)."""
    kb = math.ceil(k / K_BLOCK)
    bm, bn = tile(variant)
    cluster = cluster_of(variant)
    units = math.ceil(m / (bm * cluster)) * math.ceil(n / bn)
    rounds, rest, sk_ctas = stream_k_plan(units, kb, sms // cluster, variant)
    t = rounds * (kb * block_time(variant, k) + TILE_S) * STREAM_K_ROUND
    if rest:
        t += stream_k_run_time(variant, rest, kb, sk_ctas, k)
    return t


# The shared fix-up where each tile has at least this many contributors
# (share_fixup). Measured on an H200 (docs/gemm.md, "The shared fix-up"),
# the kernels alone in CUDA graphs beside the last-contributor fix-up:
# 4, 9 and 12 tiles of 128x128 on 132 SMs (30, 14 and 11 contributors a
# tile) ran 14.1-17.1 us against 18.8-21.5; 12 tile pairs of the 2-CTA
# 128x256 tile on 66 clusters (5 contributors) 34.4-34.6 against 33.4-33.6,
# and a one-wave leftover of 6 pairs (4544 x 1008 x 7784, the leftover
# kind) 122.9-126.9 against the spread launch's 123.5-125.2: even there.
SHARE_MIN_PIECES = 8


def share_fixup(tiles, k_blocks, sms):
    """Whether a stream-K pick of ``tiles`` units (tiles, or a cluster's
    tile pairs) with ``k_blocks`` K blocks on a wave of ``sms`` takes the
    shared fix-up: fewer tiles than the wave (no whole-tile round) and at
    least ``SHARE_MIN_PIECES`` contributors a tile (``sms // tiles``, at
    most one a K block), where the last contributor would read that many
    partials on one SM."""
    return tiles < sms and min(sms // tiles, k_blocks) >= SHARE_MIN_PIECES


def choose_stream_k(m, n, k, sms, plain):
    """The stream-K variant for this shape, or None: the stream-K tile of
    least ``estimate_time_stream_k``, if it beats the plain pick's
    ``estimate`` by ``STREAM_K_MARGIN`` (``STREAM_K_MARGIN_EVEN`` where its
    launch is the even kind) (both at least ``FLOOR_S``: a
    host-bound call gains nothing). A shape whose tiles fill whole waves
    gains nothing (the same rounds, no stream-K run). Its shared fix-up
    variant (``_share``) where ``share_fixup`` says so."""
    best = min(RULE_STREAM_K_TILES, key=lambda v: estimate_time_stream_k(v, m, n, k, sms))
    bm, bn = tile(best)
    cluster = cluster_of(best)
    units = math.ceil(m / (bm * cluster)) * math.ceil(n / bn)
    margin = STREAM_K_MARGIN_EVEN if is_even_launch(
        units, math.ceil(k / K_BLOCK), sms // cluster, best) else STREAM_K_MARGIN
    if max(estimate_time_stream_k(best, m, n, k, sms), FLOOR_S) < \
            margin * max(estimate(plain, m, n, sms, k), FLOOR_S):
        if share_fixup(units, math.ceil(k / K_BLOCK), sms // cluster):
            return f"{best}_streamk_share"
        return f"{best}_streamk"
    return None


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
    if found.get("stream_k"):
        raise ValueError(f"gemm_configs: {variant} is a stream-K variant, built without a "
                         "fused epilogue (it would spill); a fused call picks with "
                         "choose(..., fused=True)")
    if variant in UNFUSED:
        raise ValueError(f"gemm_configs: {variant} is built without fused epilogues (the "
                         "full one spills); a fused call picks with choose(..., fused=True)")
    if variant in NO_RESIDUAL and epilogue.residual:
        raise ValueError(f"gemm_configs: {variant} is built without a residual epilogue (it "
                         "spills); a fused call picks with choose(..., fused=True, "
                         "residual=True)")
    if found.get("split_k", 1) > 1:
        raise ValueError(f"gemm_configs: {variant} is a split-K variant: its GEMM kernel takes "
                         "no epilogue (it is not linear); the reduction does "
                         "(gemm_configs.reduction(splits, epilogue))")
    out = dict(found, epilogue=epilogue.to_json())
    if epilogue.residual:
        out["epilogue_passes"] = out["block_n"] // 64
    return f"{variant}_{epilogue.tag}", out
