#!/usr/bin/env python3
"""Shapes of the classes of the random sweep's runs under 0.95x cuBLAS,
drawn at random away from the sweep (a held-out set for a pick rule).

    python3 class_shapes.py [--seed 1414] [--count 7] [--class a b c]

Draws (M, N, K) as random_sweep.draw does (log-uniform in [128, 16384],
multiples of 8) with ``random.Random(seed)``, drops the sweep's own shapes
(random_sweep.draw(60, 33) and sweep.py's fixed ones), and keeps the first
``count`` of each class, by the model's pick (gemm_configs.choose, bf16):

- ``a``, many waves of a short K: the plain tile picked runs at least
  ``A_MIN_WAVES`` waves and K is from ``A_MIN_K`` to ``A_MAX_K`` (8840 x 4808 x 1936);
- ``b``, small outputs of a long K: fewer 128x128 tiles than SMs, K at
  least ``B_MIN_K``, a modelled call under ``B_MAX_S`` (432 x 568 x 7312,
  1424 x 168 x 2440);
- ``c``, one to two waves of a long K: the pick's units (tiles, or a
  cluster's tiles) a wave to two waves' worth, K at least ``C_MIN_K``
  (1048 x 6504 x 11408, 592 x 9560 x 3864, 4544 x 1008 x 7784), or a
  narrow output of a long K run by a cluster along N or 2x2 (5648 x 216 x
  8832).

Prints one line per class: the shapes as random_sweep.py --shapes takes
them. ``--changed N``: instead, the first N drawn shapes (the sweep's
dropped) whose bf16 or f16 pick the rule changes against the one before
the class rules (``BEFORE``: gemm_stream_k.SHARE_MIN_PIECES 8,
gemm_configs.CLUSTER_STREAM_K_MARGIN 0.9) with the margin rule on
(``AUTO_CLUSTER_STREAM_K_MARGIN``), with both picks, and the
picks before as a --variants list; ``--share-min-pieces`` and
``--margin-min-s`` set the rule's constants for the draw (the second run
drew with 6 and 0: ``--changed 14 --seed 2929 --share-min-pieces 6
--margin-min-s 0``).

``--share1 V S P``: instead, a held-out draw for the one-arrival shared
fix-up's rule (gemm_configs.choose_share1), the shapes already measured for
it (``SHARE1_MEASURED``) dropped too: the first V whose pick the rule turns
from 128x128_streamk into 128x128_streamk_share1v4 (4-7 pieces), the first
S it turns from 128x128_streamk_share into 128x128_streamk_share1, and the
first P it leaves at 128x128_streamk with 2 or 3 pieces (under
``SHARE1_MIN_PIECES``), both dtypes alike (docs/gemm.md: ``--share1 12 8 6
--seed 8181``).
"""

import argparse
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

A_MIN_WAVES, A_MIN_K, A_MAX_K = 6, 1024, 2560
B_MIN_K, B_MAX_S = 2048, 30e-6
C_MIN_K = 3072


def classify(m, n, k, sms=132):
    """The class letter of a shape (``a``, ``b``, ``c``) or None."""
    from pipeline_mlir.ops import gemm_configs as gc

    pick = gc.choose(m, n, k, "bf16", sms)
    tile = gc.tile_variant(pick)
    units = gc.cluster_units(tile, m, n)
    wave = gc.units_per_wave(tile, sms)
    if not gc.is_stream_k(pick) and units / wave >= A_MIN_WAVES and A_MIN_K <= k <= A_MAX_K:
        return "a"
    model = (gc.estimate_time_stream_k(tile, m, n, k, sms) if gc.is_stream_k(pick)
             else gc.estimate(pick, m, n, sms, k))
    if gc.units_of("128x128", m, n) < sms and k >= B_MIN_K and model < B_MAX_S:
        return "b"
    if k >= C_MIN_K and (wave <= units <= 2 * wave
                         or (gc.cluster_of(tile) > 1 and n <= 512 and model >= B_MAX_S)):
        return "c"
    return None


# the shapes measured when the one-arrival rule was fitted and first checked
# (run18's nine class (b) shapes, and class b of seed 7272)
SHARE1_MEASURED = [tuple(map(int, s.split("x"))) for s in (
    "432x568x7312 144x1072x5752 408x592x4408 504x568x13056 864x360x14448 632x408x10464 "
    "216x1384x6352 552x520x4344 584x712x4600 160x432x2240 1440x928x4632 2928x264x4912 "
    "360x1616x2912 272x136x7384 312x280x9368 3832x344x5200 144x704x6928 744x1168x3752 "
    "808x328x7408").split()]


def share1_draw(counts, seed, seen, sms=132):
    """``--share1``: {group: [(shape, pieces)]} for the groups ``v4``,
    ``share1`` and ``pieces23`` (``counts`` of each, in that order)."""
    import math

    from pipeline_mlir.ops import gemm_configs as gc
    from random_sweep import draw

    def picks(m, n, k, dtype):
        was = gc.AUTO_SHARE1
        try:
            gc.AUTO_SHARE1 = False
            before = gc.choose(m, n, k, dtype, sms)
            gc.AUTO_SHARE1 = True
            return before, gc.choose(m, n, k, dtype, sms)
        finally:
            gc.AUTO_SHARE1 = was

    want = dict(zip(("v4", "share1", "pieces23"), counts))
    got = {g: [] for g in want}
    seen, rng = set(seen), random.Random(seed)
    olds = {"128x128_streamk", "128x128_streamk_share"}
    while any(len(got[g]) < want[g] for g in want):
        shape = draw(1, rng.randrange(1 << 30))[0]
        if shape in seen:
            continue
        both = [picks(*shape, d) for d in ("bf16", "f16")]
        before, after = {a for a, _ in both}, {b for _, b in both}
        units, wave = gc.stream_k_units("128x128", shape[0], shape[1], sms)
        pieces = min(wave // units, math.ceil(shape[2] / gc.K_BLOCK)) if units < wave else 0
        group = None
        if "128x128_streamk_share1v4" in after and before <= olds:
            group = "v4"
        elif "128x128_streamk_share1" in after:
            group = "share1"
        elif before <= olds and pieces in (2, 3):
            group = "pieces23"
        if group and len(got[group]) < want[group]:
            got[group].append((shape, pieces))
            seen.add(shape)
    return got


BEFORE = {"SHARE_MIN_PIECES": 8, "CLUSTER_STREAM_K_MARGIN": 0.9}


def pick_before(m, n, k, dtype, sms=132):
    """gemm_configs.choose with the constants of ``BEFORE``."""
    from pipeline_mlir.ops import gemm_configs as gc, gemm_stream_k as gsk

    now = gsk.SHARE_MIN_PIECES, gc.CLUSTER_STREAM_K_MARGIN
    gsk.SHARE_MIN_PIECES = BEFORE["SHARE_MIN_PIECES"]
    gc.CLUSTER_STREAM_K_MARGIN = BEFORE["CLUSTER_STREAM_K_MARGIN"]
    try:
        return gc.choose(m, n, k, dtype, sms)
    finally:
        gsk.SHARE_MIN_PIECES, gc.CLUSTER_STREAM_K_MARGIN = now


def pick_rule(m, n, k, dtype, sms=132):
    """gemm_configs.choose with the cluster stream-K margin on
    (``AUTO_CLUSTER_STREAM_K_MARGIN``, off since its held-out check)."""
    from pipeline_mlir.ops import gemm_configs as gc

    was = gc.AUTO_CLUSTER_STREAM_K_MARGIN
    gc.AUTO_CLUSTER_STREAM_K_MARGIN = True
    try:
        return gc.choose(m, n, k, dtype, sms)
    finally:
        gc.AUTO_CLUSTER_STREAM_K_MARGIN = was


def changed(count, seed, seen):
    """The first ``count`` drawn shapes not in ``seen`` whose pick (either
    dtype) with the margin on (``pick_rule``) differs from ``pick_before``'s:
    [(shape, {dtype: (before, with the rule)})]."""
    from random_sweep import draw

    rng, out = random.Random(seed), []
    while len(out) < count:
        shape = draw(1, rng.randrange(1 << 30))[0]
        if shape in seen or any(shape == s for s, _ in out):
            continue
        picks = {d: (pick_before(*shape, d), pick_rule(*shape, d)) for d in ("bf16", "f16")}
        if any(a != b for a, b in picks.values()):
            out.append((shape, picks))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=1414)
    ap.add_argument("--count", type=int, default=7)
    ap.add_argument("--class", dest="classes", nargs="+", default=["a", "b", "c"])
    ap.add_argument("--changed", type=int, default=0)
    ap.add_argument("--share1", type=int, nargs=3, default=None, metavar=("V", "S", "P"),
                    help="a held-out draw for choose_share1 (the docstring)")
    ap.add_argument("--share-min-pieces", type=int, default=None,
                    help="with --changed: the rule's gemm_stream_k.SHARE_MIN_PIECES this")
    ap.add_argument("--margin-min-s", type=float, default=None,
                    help="with --changed: the rule's CLUSTER_STREAM_K_MARGIN_MIN_S this")
    args = ap.parse_args(argv)
    from pipeline_mlir.ops import gemm_configs as gc, gemm_stream_k as gsk

    if args.share_min_pieces is not None:
        gsk.SHARE_MIN_PIECES = args.share_min_pieces
    if args.margin_min_s is not None:
        gc.CLUSTER_STREAM_K_MARGIN_MIN_S = args.margin_min_s
    from random_sweep import DEFAULT_COUNT, DEFAULT_SEED, draw
    from sweep import SHAPES

    seen = set(draw(DEFAULT_COUNT, DEFAULT_SEED)) | {s[:3] for s in SHAPES}
    if args.share1:
        found = share1_draw(args.share1, args.seed, seen | set(SHARE1_MEASURED))
        for group, shapes in found.items():
            print(group, " ".join(f"{m}x{n}x{k}" for (m, n, k), _ in shapes),
                  "# pieces", " ".join(str(p) for _, p in shapes))
        return 0
    if args.changed:
        found = changed(args.changed, args.seed, seen)
        for (m, n, k), picks in found:
            print(f"{m}x{n}x{k}", " ".join(f"{d} {a} -> {b}" for d, (a, b) in picks.items()))
        print("shapes", " ".join(f"{m}x{n}x{k}" for (m, n, k), _ in found))
        print("before", " ".join(sorted({a for _, p in found for a, _ in p.values()})))
        return 0
    rng = random.Random(args.seed)
    picked = {c: [] for c in args.classes}
    while any(len(v) < args.count for v in picked.values()):
        shape = draw(1, rng.randrange(1 << 30))[0]
        c = None if shape in seen else classify(*shape)
        if c in picked and len(picked[c]) < args.count and shape not in picked[c]:
            picked[c].append(shape)
    for c in args.classes:
        print(c, " ".join(f"{m}x{n}x{k}" for m, n, k in picked[c]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
