"""The GEMM variant table: each variant's ``kernels/gemm_config.GemmConfig``
overrides (tile M = 64 x consumer warpgroups, tile N = ``block_n``, operand
stages, epilogue passes, cluster), the tiles cut to the shape, the split-K,
stream-K, shared fix-up, experiment and profiling variants built on them,
the facts of a variant's name (``overrides``, ``tile``, ``cluster_of``,
...), and the cache entries of a variant with a fused epilogue (``fused``,
``PREBUILT_EPILOGUES``) and of the split-K reduction (``reduction``).
Which variant a shape runs is ``gemm_configs.choose``'s; callers import
these names from ``gemm_configs``, which re-exports them.

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
"""

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
# The 2-CTA cluster along N on other tiles, ``<tile>c2n``: the pair side by
# side along N shares each A tile (each CTA loads half of its rows and
# multicasts them), so a narrow output of a tall M (N of a few hundred,
# one or two pairs a tile row) reads A from L2 once per pair, and an
# output of an odd count of tile rows keeps no empty one (the pair along
# M computes it). 5648 x 216 x 8832: 44 pairs of 128x112c2n against 88
# one-CTA 128x128 tiles that each read their own A; 10528 x 320 x 3024: 55
# pairs of 192x160c2n, 320 columns exactly; 592 x 9560 x 3864: 5 rows of
# 25 pairs of 128x192c2n against 3 pairs (one half empty) x 43 columns of
# 128x224c2. The passes and stages that fill the 227 KiB (the C buffer of
# one pass beside as many stages as fit). Built without fused epilogues
# (``UNFUSED``) and without stream-K.
CLUSTER_N_SHAPE = {(128, 96): (1, 7), (128, 112): (1, 6), (128, 128): (1, 6), (128, 160): (1, 5),
                   (128, 192): (3, 5), (128, 224): (2, 4), (192, 96): (1, 5), (192, 112): (2, 5),
                   (192, 128): (2, 5), (192, 160): (2, 4)}
CLUSTER_N_VARIANTS = {
    f"{bm}x{bn}c2n": dict(block_n=bn, consumer_warpgroups=bm // 64, epilogue_passes=passes,
                          stages=stages, cluster_m=2, cluster_along_n=True,
                          **(dict(producer_registers=32, consumer_registers=160)
                             if bm == 192 else {}))
    for (bm, bn), (passes, stages) in CLUSTER_N_SHAPE.items()}
VARIANTS.update(CLUSTER_N_VARIANTS)
# The 2x2 cluster (``<tile>c2x2``, GemmConfig.cluster_n=2): two tiles along
# M by two along N, A multicast along N and B along M, so that both
# operands are read once per pair of tiles; the 128-row tiles of the
# cluster along N with its passes and stages (a CTA's stage holds the same
# whole A and B tiles).
CLUSTER_2X2_VARIANTS = {
    f"{bm}x{bn}c2x2": dict(CLUSTER_N_VARIANTS[f"{bm}x{bn}c2n"], cluster_along_n=False,
                           cluster_n=2)
    for bm, bn in CLUSTER_N_SHAPE if bm == 128 and bn <= 192}
VARIANTS.update(CLUSTER_2X2_VARIANTS)
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
# Stream-K on the clusters along N and 2x2 (``<tile>_streamk``, and the shared
# fix-up's ``<tile>_streamk_share``): the schedule's units are the
# cluster's tiles, every CTA of it runs the same K blocks (its loads are
# multicast) and keeps workspace slots and counters of its own. Narrow
# outputs of a long K whose cluster units leave the last wave part empty
# (6144 x 176 x 7680: the stream-K pick was 192x192c2's pairs along M).
# Apart from STREAM_K_VARIANTS (the GPU suite and the cache's --all run
# those); the rule weighs them with gemm_configs.AUTO_CLUSTER_STREAM_K.
CLUSTER_STREAM_K_TILES = ("128x128c2n", "128x160c2n", "128x192c2n", "192x128c2n",
                          "192x160c2n", "192x192c2n", "128x96c2x2", "128x128c2x2",
                          "128x160c2x2")
CLUSTER_STREAM_K_VARIANTS = {f"{t}_streamk": dict(VARIANTS[t], stream_k=True)
                             for t in CLUSTER_STREAM_K_TILES}
CLUSTER_STREAM_K_VARIANTS.update({f"{t}_streamk_share": dict(VARIANTS[t], stream_k=True,
                                                             sk_share=True)
                                  for t in CLUSTER_STREAM_K_TILES})
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
# Stream-K on the one-warpgroup 64x128 tile, the last contributor's fix-up
# and the shared one, for the small outputs of a long K (calls of 12-35
# us). Measured on an H200 beside the pick (docs/gemm.md, "The runs under
# 0.95x cuBLAS, by class"): the shared one ran 0.69-0.99 of the pick's
# time in both dtypes on 8 of 26 such shapes (464 x 208 x 2920, 128 x 1392
# x 2584, 280 x 136 x 5728) and up to 1.88 on others (2984 x 504 x 2680);
# no rule of the model's quantities was fitted. Not in STREAM_K_VARIANTS
# (the GPU suite's list) nor in the pick.
SMALL_STREAM_K_VARIANTS = {"64x128_streamk": dict(VARIANTS["64x128"], stream_k=True),
                           "64x128_streamk_share": dict(VARIANTS["64x128"], stream_k=True,
                                                        sk_share=True)}
# The shared fix-up with one arrival a warp (GemmConfig.sk_one_arrival):
# the last arrival resets the counter, the others wait for the full count
# or the reset; ``<tile>_streamk_share1``. Candidates, not picked.
STREAM_K_SHARE1_VARIANTS = {
    f"{v}1": dict(o, sk_one_arrival=True)
    for v, o in (*STREAM_K_SHARE_VARIANTS.items(),
                 ("64x128_streamk_share", SMALL_STREAM_K_VARIANTS["64x128_streamk_share"]))}
# ... and its sums four of a lane's vectors at a time
# (GemmConfig.sk_share_vectors): ``<tile>_streamk_share1v4``.
STREAM_K_SHARE1_VARIANTS.update({f"{v}v4": dict(o, sk_share_vectors=4)
                                 for v, o in list(STREAM_K_SHARE1_VARIANTS.items())})
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
UNFUSED = ("192x192c2", "192x192c2n", *CUT_VARIANTS, *CLUSTER_N_VARIANTS,
           *CLUSTER_2X2_VARIANTS)
# Variants whose fused epilogue spills with a residual (ptxas -v; the
# two-CTA tile, gemm_configs.TWO_CTA_VARIANT, holds 96 registers a thread):
# a call with one never takes them.
NO_RESIDUAL = ("128x128x2",)


def overrides(variant):
    """The GemmConfig overrides of a plain or split-K variant name."""
    found = (VARIANTS.get(variant) or SPLIT_VARIANTS.get(variant)
             or STREAM_K_VARIANTS.get(variant) or TIMELINE_VARIANTS.get(variant)
             or STREAM_K_EXPERIMENTS.get(variant) or STREAM_K_SHARE_VARIANTS.get(variant)
             or STREAM_K_SHARE1_VARIANTS.get(variant)
             or CLUSTER_STREAM_K_VARIANTS.get(variant)
             or SMALL_STREAM_K_VARIANTS.get(variant))
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
    """CTAs of the variant's cluster (1, 2 or 4): along M, or along N where
    ``along_n``, or 2x2 (``cluster_n``)."""
    o = overrides(variant)
    return o.get("cluster_m", 1) * o.get("cluster_n", 1)


def unit_tiles(cluster_m=1, cluster_n=1, along_n=False):
    """(tiles along M, tiles along N) of one work unit: a cluster's tiles
    (GemmConfig.cluster_m / cluster_along_n / cluster_n). The cost model
    (gemm_cost) and the host grid (hopper_gemm_host) count units from it,
    so the two cannot disagree on a cluster's shape."""
    if along_n:
        return 1, cluster_m
    return cluster_m, cluster_n


def variant_unit_tiles(variant):
    """``unit_tiles`` of a variant name."""
    o = overrides(variant)
    return unit_tiles(o.get("cluster_m", 1), o.get("cluster_n", 1),
                      o.get("cluster_along_n", False))


def cluster_n_of(variant):
    """CTAs along N of a 2x2 cluster (2), else 1."""
    return overrides(variant).get("cluster_n", 1)


def along_n(variant):
    """Whether the variant's cluster pairs tiles along N (sharing A)."""
    return overrides(variant).get("cluster_along_n", False)


def tile_variant(variant):
    """The plain variant a split-K or stream-K one is built on (the name's
    tile part)."""
    return variant.split("_sk")[0].split("_streamk")[0]


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
