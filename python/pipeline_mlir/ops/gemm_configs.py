"""Which GEMM variant runs a given (M, N, K, dtype): a small table of tile
shapes and a rule that picks one.

The parts, one concept a module: ops/gemm_variants.py, the variant table
(each variant's ``kernels/gemm_config.GemmConfig`` overrides) and the
facts of a variant's name; ops/gemm_cost.py, the plain tiles' time model
(``estimate``: waves of tiles, each its K blocks at the tile's measured
``EFFICIENCY``); ops/gemm_split_k.py, split-K's time model and rule;
ops/gemm_stream_k.py, the stream-K launch and its time model. This module
holds the pick (``choose`` and the rules it applies, with the switches and
margins that tests and benchmarks/gemm/fit_pick.py set here) and
re-exports the other modules' names, so that callers import
``gemm_configs`` alone. A test or script that sets one of the other
modules' constants sets it there (gemm_stream_k.AUTO_EVEN,
gemm_cost.MISALIGNED_K): the re-exported name is a copy.

The rule takes the plain variant of ``RULE_VARIANTS`` of least
``estimate`` (the larger tile on a tie).
``benchmarks/gemm/sweep.py`` and ``random_sweep.py --variants`` measure
the variants beside the pick (``benchmarks/gemm/fit_pick.py`` scores the
rule on such a run); ``TUNED`` takes measured winners, by shape and
dtype, before the rule.

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

The cluster along N (``CLUSTER_N_VARIANTS``, ``choose_cluster_n``): a
pair of tiles side by side along N sharing A by multicast, 128 or 192 rows
and 96-224 columns; after every other rule, a plain pick becomes the one
of least ``estimate`` where that is less (5648 x 216 x 8832: 44 pairs of
128x112c2n, each reading half of A, against 88 tiles of 128x128 reading
all of it; 10528 x 320 x 3024: 55 pairs of 192x160c2n, 320 columns
exactly). The 2x2 cluster (``CLUSTER_2X2_VARIANTS``: two tiles along M by
two along N, both operands multicast) joins those candidates on narrow
outputs of a long K (``CLUSTER_2X2_MAX_N``, ``CLUSTER_2X2_MIN_K``).
Last, ``choose_cluster_stream_k``: those clusters run as stream-K
(``CLUSTER_STREAM_K_VARIANTS``) where their units leave a wave part empty,
and a stream-K pick of a narrow output turned into a plain 2x2 tile.

Split-K (``choose_split``, ops/gemm_split_k.py) and stream-K
(``choose_stream_k``; its launch and model in ops/gemm_stream_k.py) are
weighed before the cut tiles, each against the table's plain pick.
"""

import math

from pipeline_mlir.chip_limits import WGMMA_M  # noqa: F401 (re-exported)

# The variant table, its name facts and cache entries (ops/gemm_variants.py).
from .gemm_variants import (  # noqa: F401 (re-exported)
    CLUSTER_2X2_VARIANTS, CLUSTER_STREAM_K_TILES, CLUSTER_STREAM_K_VARIANTS, CLUSTER_N_SHAPE, CLUSTER_N_VARIANTS, CUT_SHAPE, CUT_VARIANTS, CUT_WIDTHS,
    NO_RESIDUAL, PREBUILT_EPILOGUES, SMALL_STREAM_K_VARIANTS, SPLIT_TILES, SPLIT_VARIANTS, SPLITS,
    STREAM_K_EXPERIMENTS, STREAM_K_SHARE1_VARIANTS, STREAM_K_SHARE_VARIANTS, STREAM_K_TILES,
    STREAM_K_VARIANTS,
    TIMELINE_VARIANTS, UNFUSED,
    VARIANTS, along_n, cluster_n_of, cluster_of, fused, is_stream_k, overrides, reduction,
    splits_of, tile, tile_variant, unit_tiles, variant_unit_tiles)
# The plain tiles' time model (ops/gemm_cost.py).
from .gemm_cost import (  # noqa: F401 (re-exported)
    BLOCK_S, EFFICIENCY, FLOOR_S, K_BLOCK, MISALIGNED_K, MISALIGNED_K_OF, TILE_S, block_time,
    RESIDENT_4_SHARE, cluster_units, estimate, fill, last_wave, misaligned_k, one_wave_ctas,
    operand_rows, units_of, units_per_wave)
# Split-K's model and rule (ops/gemm_split_k.py).
from .gemm_split_k import (  # noqa: F401 (re-exported)
    DRAM_BYTES_PER_S, L2_BYTES_PER_S, L2_RESIDENT_BYTES, MIN_SPLIT_K_BLOCKS, REDUCE_LAUNCH_S,
    SM_FLOPS, SPLIT_MARGIN, TIME_EFFICIENCY, UNIT_OVERHEAD_S, choose_split, estimate_time)
# The stream-K launch and model (ops/gemm_stream_k.py).
from .gemm_stream_k import (  # noqa: F401 (re-exported)
    AUTO_EVEN, SHARE_MIN_PIECES, SHARE_PIECE_S, SHARE_SLOTS, SLOT_S, SPREAD_LEFTOVER,
    STREAM_K_FIXED_S, STREAM_K_ROUND, estimate_time_stream_k, is_even_launch, share_fixup,
    stream_k_grid, stream_k_launch, stream_k_plan, stream_k_run_time, stream_k_share_run_time,
    stream_k_units)

# The stream-K tiles the rule may pick.
RULE_STREAM_K_TILES = ("128x256", "128x256c2", "192x192c2", "192x192", "128x192", "192x128",
                       "128x128")
# What the rule may pick (in this order on a tie): the 2-CTA cluster
# (multicast B: half of B's reads from L2) runs as fast as one CTA where L2
# keeps up, and faster where it does not (ops/gemm_cost.py: MISALIGNED_K).
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
            if stream_k:
                pick = choose_cluster_stream_k(m, n, k, sms, pick) or pick
                pick = choose_share1(m, n, k, sms, pick) or pick
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
# Whether any plain pick may become a tile of the cluster along N
# (CLUSTER_N_VARIANTS and CLUSTER_N_VARIANT): the one of least estimate,
# where it beats the pick's (CLUSTER_N_MARGIN). Measured on an H200
# (docs/gemm.md, "The cluster along N on every width"). Run1, 22 shapes of
# narrow outputs, odd tile rows and the runs under 0.95x, both dtypes,
# every c2n tile beside the pick: the rule's pick ran at a median 0.998x
# cuBLAS (worst 0.741x) where the pick before ran 0.942x (worst 0.467x:
# 6408 x 264 x 7064 on 128x256c2, two columns of 256 for 264); at a
# margin of 0.9, 0.980x (the modelled gains of 3-10% on 5648 x 216 x
# 8832, 592 x 9560 x 3864 and 5128 x 13896 x 7224 were measured 3-13%).
# Run14, the whole random sweep (152 runs) with the pick before beside it
# in the same process: median 1.166x against 1.159x, worst 0.906x against
# 0.852x, 3 runs under 0.95x against 10; of the 28 runs that change, 21
# ran faster, the 128x96c2n picks of 488 x 3024 x 9648, 2616 x 512 x 2640
# and 472 x 2168 x 2064 (one wave; 128x128 before) 2-8% slower.
AUTO_CLUSTER_N_ANY = True
CLUSTER_N_RULE_VARIANTS = (*CLUSTER_N_VARIANTS, CLUSTER_N_VARIANT)
CLUSTER_N_MARGIN = 1.0
# In one wave, against a one-CTA pick of at most CLUSTER_N_ONE_WAVE_AREA
# (a 128x128 tile or smaller) whose K rows are whole L2 sectors, the pair
# must cut the operand rows read from L2 per K block
# (``operand_rows``) to at most this share of the pick's. With fewer tiles
# than SMs each SM runs one tile, and a K block of a 128-row tile took
# about the same time whatever its width (350-400 ns at K of 7000 or more:
# 128x128, 128x96c2n, 128x112c2n, 128x128c2n alike), so the smaller
# tile's modelled gain is not there; what the pair gains is reading A once
# for two tiles. Measured on an H200 (docs/gemm.md, "The c2n rule's
# losses"): of the 14 such shapes of run14 and the cluster's run1 and
# run2, the 5 at a share of 0.69-0.73 (tall narrow outputs: 4784 x 152 x
# 3216, 8224 x 216 x 12464) ran 9-35% faster on the pair in both dtypes;
# of the 9 at 0.79-0.88, 7 ran 0-14% slower (2616 x 512 x 2640, 2552 x
# 456 x 4144, 344 x 4256 x 7040) and 2 faster (544 x 2464 x 6480 at 0.84:
# 9-10%; 184 x 11464 x 5424 at 0.80: 5%). A misaligned K keeps the pair
# (the one-CTA tile pays MISALIGNED_K there: 136 x 8448 x 4248, 0.85-0.87
# of 128x128's time). Wider picks (192x128, 128x192, 128x256) are
# compute-bound per SM, where the narrower pair's tile does gain (184 x
# 11464 x 5424: 192x96c2n 5% faster than 192x128 at a share of 0.80).
# Off: on 20 shapes no run had measured before (runs 2 and 5 of "The c2n
# rule's losses and the 2x2 cluster", 40 runs, both dtypes) the rule's
# 128x128 ran at a geomean 0.995 of the c2n pick's time, 20 runs faster and
# 20 slower (0.81-1.30); on the whole random sweep (run15) 0.988 over its 6
# changed runs. The measured wins and losses share the same rows share
# (0.79-0.88), fills and K: no rule of the model's quantities separated
# them. Kept, tested, for the work that finds one.
AUTO_CLUSTER_N_ONE_WAVE = False
CLUSTER_N_ONE_WAVE_ROWS = 0.75
CLUSTER_N_ONE_WAVE_AREA = 128 * 128
# Whether the cluster along N, where both it and the pick fit one wave, pays
# for the CTAs it keeps busy beyond the pick's (``cluster_n_time``: its
# estimate times 1 + CLUSTER_N_BUSY x the extra CTAs / SMs, weighed against
# the pick; which cluster tile is best is still by ``estimate``). The
# model's one wave is the same time however many SMs it occupies; on an H200
# (docs/gemm.md, "The one-wave pick, measured") a cluster along N in one
# wave ran 1.04-1.16 of its model from 0.7 to a whole wave of pairs where
# one-CTA tiles ran 0.81-0.95 of theirs, and against a one-CTA tile of the
# same rows it ran a median 1.19-1.31 of the model's ratio where it kept
# more CTAs busy (narrower tiles covering the same output; six of seven
# ranges of K, 1.03 in the seventh), 0.83-1.24 where it kept as many. Not
# the resident clusters: a 2-CTA cluster kernel has 66 of 66 resident
# (cuOccupancyMaxActiveClusters, five c2n tiles and two pairs along M). Off:
# fitted on half of one-wave run1 (13 shapes measured for it, both dtypes)
# it sped those up (8 runs changed, a geomean 0.905 of the pick's time, 7
# faster) but not the other half (10 changed, 1.005, 4 faster: 1552 x 1120 x
# 12304 1.11-1.13, 784 x 2720 x 5392 1.07-1.09); on the older runs' 60
# measured changed runs 0.961, 42 faster. 3% of random shapes change (92 of
# random_sweep.draw(3000, 7)). Kept, tested, for the work that finds what
# decides these.
AUTO_CLUSTER_N_BUSY = False
CLUSTER_N_BUSY = 1.0
# The 2x2 cluster (CLUSTER_2X2_VARIANTS, both operands multicast) is weighed
# beside the cluster along N on outputs at most this wide: measured on an
# H200 on 15 narrow outputs of a long K (docs/gemm.md, "The c2n rule's
# losses and the 2x2 cluster"), it ran 3-20% faster than the pick where N
# is a unit column or two (6408 x 264 x 7064: 128x160c2x2 0.81 of
# 128x160c2n's time; 7272 x 232 x 9216, 3584 x 456 x 12288: 128x128c2x2
# 0.94-0.98 of 128x128's) and lost on the wide ones (4544 x 1008 x 7784,
# 1048 x 6504 x 11408), which it was not measured to serve.
# And only where K is at least CLUSTER_2X2_MIN_K: what the 2x2 cluster
# gains is operand reads per K block, and on a short K its launch of
# 4-CTA clusters does not pay (run3, unseen shapes: K of 1016-1680 at
# 0.91-1.39 of the cluster along N's time, geomean 1.03; K of 2152-12288
# all at 0.81-1.01).
AUTO_CLUSTER_2X2 = True
CLUSTER_2X2_MAX_N = 512
CLUSTER_2X2_MIN_K = 2048


def cluster_n_time(variant, m, n, k, sms, pick):
    """``choose_cluster_n``'s modelled time of a candidate against the
    pick: its ``estimate``; with ``AUTO_CLUSTER_N_BUSY``, for a cluster
    along N where both it and the pick fit one wave (``one_wave_ctas``)
    and it keeps more CTAs busy, times 1 + ``CLUSTER_N_BUSY`` x (its CTAs
    - the pick's) / ``sms``."""
    t = estimate(variant, m, n, sms, k)
    if AUTO_CLUSTER_N_BUSY and along_n(variant) and cluster_n_of(variant) == 1:
        mine, theirs = one_wave_ctas(variant, m, n, sms), one_wave_ctas(pick, m, n, sms)
        if mine is not None and theirs is not None and mine > theirs:
            t *= 1 + CLUSTER_N_BUSY * (mine - theirs) / sms
    return t


def choose_cluster_n(m, n, k, sms, pick):
    """With ``AUTO_CLUSTER_N_ANY``: the tile of ``CLUSTER_N_RULE_VARIANTS``
    of least ``estimate`` (the larger tile on a tie) where it beats a plain
    (not stream-K, not split-K) pick's by ``CLUSTER_N_MARGIN`` (both at
    least ``FLOOR_S``; with ``AUTO_CLUSTER_2X2``, the tiles of
    ``CLUSTER_2X2_VARIANTS`` too where N is at most ``CLUSTER_2X2_MAX_N``
    and K at least ``CLUSTER_2X2_MIN_K``), unless (with
    ``AUTO_CLUSTER_N_ONE_WAVE``) the pick is a one-CTA tile of at most
    ``CLUSTER_N_ONE_WAVE_AREA`` in one wave whose K rows are whole L2
    sectors and the pair reads more than ``CLUSTER_N_ONE_WAVE_ROWS`` of its
    operand rows, or (with ``AUTO_CLUSTER_N_BUSY``) its ``cluster_n_time``
    is not less than the pick's estimate. Else ``CLUSTER_N_VARIANT`` where
    the pick is one of ``CLUSTER_N_OVER`` and its ``estimate`` is less
    (fewer rounds of pairs
    than the one-CTA tile's waves at its ``MISALIGNED_K_OF`` cost: K not a
    multiple of 16, an odd count of tile rows and an even one of columns,
    as 2072 x 16040 x 3464: 7 rounds of 42 pairs a row against 7 waves at
    1.04). Else None. Never for a fused call (the variants are in
    ``UNFUSED``)."""
    if AUTO_CLUSTER_N_ANY:
        if is_stream_k(pick) or splits_of(pick) > 1:
            return None
        rule = CLUSTER_N_RULE_VARIANTS
        if AUTO_CLUSTER_2X2 and n <= CLUSTER_2X2_MAX_N and k >= CLUSTER_2X2_MIN_K:
            rule = (*rule, *CLUSTER_2X2_VARIANTS)
        best = min(rule, key=lambda v: (estimate(v, m, n, sms, k), -math.prod(tile(v))))
        if max(cluster_n_time(best, m, n, k, sms, pick), FLOOR_S) >= \
                CLUSTER_N_MARGIN * max(estimate(pick, m, n, sms, k), FLOOR_S):
            return None
        if (AUTO_CLUSTER_N_ONE_WAVE and cluster_of(pick) == 1
                and math.prod(tile(pick)) <= CLUSTER_N_ONE_WAVE_AREA
                and not misaligned_k(k) and units_of(pick, m, n) <= sms
                and operand_rows(best, m, n) > CLUSTER_N_ONE_WAVE_ROWS
                * operand_rows(pick, m, n)):
            return None
        return best
    if AUTO_CLUSTER_N and pick in CLUSTER_N_OVER and \
            estimate(CLUSTER_N_VARIANT, m, n, sms, k) < estimate(pick, m, n, sms, k):
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


# -- the pick of stream-K (its launch and model: ops/gemm_stream_k.py) ---------
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


# Whether a pick may become a tile of the clusters along N or 2x2 run as
# stream-K (CLUSTER_STREAM_K_TILES: choose_cluster_stream_k), where its
# launch has a stream-K run and the model says it beats the pick's by
# STREAM_K_MARGIN (the even launch: STREAM_K_MARGIN_EVEN; CLUSTER_STREAM_K_MARGIN
# with AUTO_CLUSTER_STREAM_K_MARGIN, below). Measured on an
# H200 (docs/gemm.md, "Stream-K on the clusters along N and 2x2"; one
# process, cuBLAS and the pick before beside, both dtypes): on the runs of
# three sets of shapes no run had measured where the rule changes the pick
# (runs 1-3, 86 runs) a geomean 0.872 of the pick before's time, 76
# faster, the worst 1.167 (4272 x 536 x 10152 f16, 1.039 bf16); narrow
# outputs of a long K gain most (2416 x 264 x 12576 0.70, 4328 x 464 x
# 16328 0.65-0.67, 13424 x 304 x 7760 0.68-0.69). The whole random sweep
# (run16): 1496 x 456 x 9000 changes, 0.91-0.95.
AUTO_CLUSTER_STREAM_K = True
# The modelled gain those tiles need (the even launch keeps
# STREAM_K_MARGIN_EVEN): 5% where the one-CTA stream-K tiles need 10%. At
# 10% the rule left 192x160c2n_streamk where the model saw it 7-10% ahead
# (2880 x 1584 x 4392 over 192x192_streamk, 6904 x 624 x 6832 over
# 192x128_streamk), and it ran 0.77-0.96 of the pick's time (docs/gemm.md,
# "The runs under 0.95x cuBLAS, by class": shapes drawn apart from the sweep,
# both dtypes); the older runs' measured shapes where 5% changes the pick
# (7288 x 1168 x 3816, 13008 x 304 x 13440: 192x128c2n_streamk,
# 192x160c2n_streamk) ran 0.97-0.99 of it. Only where the tile's modelled
# time is at least CLUSTER_STREAM_K_MARGIN_MIN_S: on a second set of drawn
# shapes, 5% everywhere changed 16 runs to a geomean 0.92 of the pick
# before's time, but 128x128c2n_streamk in place of 128x128_streamk on
# calls of about 20 us ran 0.95-1.12 of it (552 x 520 x 4344: 1.09-1.12).
# Off (AUTO_CLUSTER_STREAM_K_MARGIN: every cluster stream-K tile needs
# STREAM_K_MARGIN): held out on 12 shapes drawn for it (class_shapes.py
# --changed 12 --seed 5151), its picks ran a geomean 1.065 of the picks
# before's time, 8 of 24 runs faster, up to 1.27 (912 x 864 x 9216,
# 192x128c2n_streamk over 64x128; 1960 x 2376 x 4744, 128x160c2n_streamk
# over 128x256c2_streamk, 1.19-1.21).
AUTO_CLUSTER_STREAM_K_MARGIN = False
CLUSTER_STREAM_K_MARGIN = 0.95
CLUSTER_STREAM_K_MARGIN_MIN_S = 30e-6
# Whether a stream-K pick of a tile not of those clusters may become a plain
# 2x2 tile (CLUSTER_2X2_VARIANTS; its estimate against the stream-K
# estimate, CLUSTER_N_MARGIN) where N is at most CLUSTER_OVER_STREAM_K_MAX_N
# and the tile's columns at least CLUSTER_OVER_STREAM_K_MIN_FILL of N's
# (column_fill): narrow outputs of a long K whose stream-K pick cut a pair
# along M of wide tiles into pieces (6144 x 176 x 7680 on 192x192c2_streamk,
# where 128x96c2x2 ran 0.80-0.81 of its time). Measured as above: 14 runs,
# a geomean 0.877, all faster (0.79-0.94). The plain cluster along N in its
# place (CLUSTER_OVER_STREAM_K_2X2_ONLY False) was slower on 10 of 22 runs
# at N <= 256, by up to 1.45 (3384 x 216 x 6568 on 128x96c2n, 216 of its
# 384 columns: the fill bound; 8320 x 160 x 15536 on 128x96c2n 1.11, 65
# pairs, a wave's worth), and on 12 of 16 wider; runs 1-3 chose these
# bounds, so they are fitted, not validated.
AUTO_CLUSTER_OVER_STREAM_K = True
CLUSTER_OVER_STREAM_K_MAX_N = 256
CLUSTER_OVER_STREAM_K_MIN_FILL = 0.8
CLUSTER_OVER_STREAM_K_2X2_ONLY = True
# Whether the shared fix-up of a cluster tile (``<tile>_streamk_share``,
# small outputs of a long K: a unit or two cut into 8 or more pieces) may
# be picked: not measured apart from 232 x 176 x 9000 (0.87-0.91); where
# the rule replaced a shared fix-up pick of 128x128 by 128x96c2x2_streamk
# (run3: 312 x 376 x 13128, 336 x 264 x 6560, 424 x 344 x 4600, 640 x 296 x
# 14920, calls of 13-20 us) it ran 1.02-1.35 the time, so a shared fix-up
# pick keeps it (choose_cluster_stream_k).
CLUSTER_STREAM_K_SHARE = False


def column_fill(variant, n):
    """N over the columns the variant's tiles cover (its unit columns x the
    unit's width)."""
    bn = tile(variant)[1] * variant_unit_tiles(variant)[1]
    return n / (math.ceil(n / bn) * bn)


def choose_cluster_stream_k(m, n, k, sms, pick):
    """After every other rule (not for a fused call, nor with stream-K
    off): against the pick's modelled time (``estimate_time_stream_k`` for
    a stream-K pick, else ``estimate``), with ``AUTO_CLUSTER_STREAM_K`` the
    tile of ``CLUSTER_STREAM_K_TILES`` run as stream-K of least
    ``estimate_time_stream_k`` where its launch has a stream-K run (units
    left over after whole rounds; not the shared fix-up unless
    ``CLUSTER_STREAM_K_SHARE``) and it beats the pick by
    ``CLUSTER_STREAM_K_MARGIN`` where ``AUTO_CLUSTER_STREAM_K_MARGIN`` (off)
    and its modelled time is at least ``CLUSTER_STREAM_K_MARGIN_MIN_S``,
    else ``STREAM_K_MARGIN``
    (``STREAM_K_MARGIN_EVEN`` for the even launch);
    with ``AUTO_CLUSTER_OVER_STREAM_K``, for a stream-K pick of a tile not
    of those clusters where N is at most ``CLUSTER_OVER_STREAM_K_MAX_N``,
    also the plain 2x2 tile (with ``CLUSTER_OVER_STREAM_K_2X2_ONLY`` off,
    ``choose_cluster_n``'s candidates) of least ``estimate`` whose
    ``column_fill`` is at least ``CLUSTER_OVER_STREAM_K_MIN_FILL``, where
    it beats the pick by ``CLUSTER_N_MARGIN``. The 2x2 tiles only where N
    is at most ``CLUSTER_2X2_MAX_N`` and K at least ``CLUSTER_2X2_MIN_K``.
    Else None; None for a split-K or shared fix-up pick."""
    if not (AUTO_CLUSTER_STREAM_K or AUTO_CLUSTER_OVER_STREAM_K) or splits_of(pick) > 1 \
            or overrides(pick).get("sk_share", False):
        return None
    kb = math.ceil(k / K_BLOCK)
    streamed = is_stream_k(pick)
    now = max(estimate_time_stream_k(tile_variant(pick), m, n, k, sms) if streamed
              else estimate(pick, m, n, sms, k), FLOOR_S)
    two_by_two = AUTO_CLUSTER_2X2 and n <= CLUSTER_2X2_MAX_N and k >= CLUSTER_2X2_MIN_K
    options = []
    for t in CLUSTER_STREAM_K_TILES if AUTO_CLUSTER_STREAM_K else ():
        if t in CLUSTER_2X2_VARIANTS and not two_by_two:
            continue
        units, wave = stream_k_units(t, m, n, sms)
        rounds, rest, _ = stream_k_plan(units, kb, wave, t)
        if rest == 0 or units <= wave and stream_k_launch(units, kb, wave, t)[1] == units:
            continue        # no stream-K run: the plain tile's launch
        if share_fixup(units, kb, wave) and not CLUSTER_STREAM_K_SHARE:
            continue
        modelled = estimate_time_stream_k(t, m, n, k, sms)
        margin = (STREAM_K_MARGIN_EVEN if is_even_launch(units, kb, wave, t)
                  else CLUSTER_STREAM_K_MARGIN if AUTO_CLUSTER_STREAM_K_MARGIN
                  and modelled >= CLUSTER_STREAM_K_MARGIN_MIN_S else STREAM_K_MARGIN)
        name = f"{t}_streamk_share" if share_fixup(units, kb, wave) else f"{t}_streamk"
        options.append((max(modelled, FLOOR_S) / margin, name))
    if AUTO_CLUSTER_OVER_STREAM_K and streamed and n <= CLUSTER_OVER_STREAM_K_MAX_N \
            and not (along_n(pick) or cluster_n_of(pick) > 1):
        plain = (*(() if CLUSTER_OVER_STREAM_K_2X2_ONLY else CLUSTER_N_RULE_VARIANTS),
                 *(CLUSTER_2X2_VARIANTS if two_by_two else ()))
        options += [(max(estimate(v, m, n, sms, k), FLOOR_S) / CLUSTER_N_MARGIN, v)
                    for v in plain if column_fill(v, n) >= CLUSTER_OVER_STREAM_K_MIN_FILL]
    if not options:
        return None
    best_time, best = min(options, key=lambda o: (o[0], -math.prod(tile(tile_variant(o[1])))))
    return best if best_time < now else None


# Whether a stream-K pick of the 128x128 tile with fewer tiles than the
# wave and at least SHARE1_MIN_PIECES contributors a tile (sms // tiles, at
# most one a K block) takes the shared fix-up with one arrival a warp
# (choose_share1). Measured on an H200 (docs/gemm.md, "One arrival a warp
# and the sums four vectors at a time"), beside the pick and cuBLAS in
# one process, both dtypes, eager calls and the kernels alone in CUDA
# graphs: fitted on the nine class (b) shapes of run18 (4-7 contributors,
# the last contributor's fix-up picked): 128x128_streamk_share1v4 ran
# 0.88-0.94 of the pick's time in all 18 runs (0.89-0.94 in graphs);
# checked on a fresh draw (class_shapes.py --class b --seed 7272), on the
# four shapes whose pick it changes: 808 x 328 x 7408 (6 contributors)
# 0.89-0.90, and where the shared fix-up was picked (11-22
# contributors) 128x128_streamk_share1 0.91-0.95 (its sums four vectors at
# a time 0.94-1.05 there: a share of one or two vectors a lane).
AUTO_SHARE1 = True
SHARE1_MIN_PIECES = 4
SHARE1_PICKS = ("128x128_streamk_share1", "128x128_streamk_share1v4")   # what it picks


def choose_share1(m, n, k, sms, pick):
    """After every other rule (stream-K on, not fused): a pick of
    ``128x128_streamk`` or ``128x128_streamk_share`` whose tiles are fewer
    than the wave, each cut into at least ``SHARE1_MIN_PIECES`` pieces,
    becomes the one-arrival shared fix-up: ``128x128_streamk_share1`` where
    the shared fix-up was picked (``share_fixup``: ``SHARE_MIN_PIECES`` or
    more), else ``128x128_streamk_share1v4`` (sums four of a lane's vectors
    at a time). Else None (``AUTO_SHARE1`` off: always)."""
    if not AUTO_SHARE1 or pick not in ("128x128_streamk", "128x128_streamk_share"):
        return None
    units, wave = stream_k_units("128x128", m, n, sms)
    if units >= wave or min(wave // units, math.ceil(k / K_BLOCK)) < SHARE1_MIN_PIECES:
        return None
    return SHARE1_PICKS[0] if pick.endswith("_share") else SHARE1_PICKS[1]


def choose_stream_k(m, n, k, sms, plain):
    """The stream-K variant for this shape, or None: the stream-K tile of
    least ``estimate_time_stream_k``, if it beats the plain pick's
    ``estimate`` by ``STREAM_K_MARGIN`` (``STREAM_K_MARGIN_EVEN`` where its
    launch is the even kind) (both at least ``FLOOR_S``: a
    host-bound call gains nothing). A shape whose tiles fill whole waves
    gains nothing (the same rounds, no stream-K run). Its shared fix-up
    variant (``_share``) where ``share_fixup`` says so."""
    best = min(RULE_STREAM_K_TILES, key=lambda v: estimate_time_stream_k(v, m, n, k, sms))
    units, wave = stream_k_units(best, m, n, sms)
    margin = STREAM_K_MARGIN_EVEN if is_even_launch(
        units, math.ceil(k / K_BLOCK), wave, best) else STREAM_K_MARGIN
    if max(estimate_time_stream_k(best, m, n, k, sms), FLOOR_S) < \
            margin * max(estimate(plain, m, n, sms, k), FLOOR_S):
        if share_fixup(units, math.ceil(k / K_BLOCK), wave):
            return f"{best}_streamk_share"
        return f"{best}_streamk"
    return None

