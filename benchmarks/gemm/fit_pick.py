#!/usr/bin/env python3
"""How ``gemm_configs.choose`` does on a measured random sweep, and the
coarse fit of its model's constants. Runs here (no GPU), on the JSON of a
``random_sweep.py --variants ...`` run:

    .venv/bin/python benchmarks/gemm/fit_pick.py benchmarks/gemm/results/h200-random-sweep-run3.json [--grid]
    .venv/bin/python benchmarks/gemm/fit_pick.py RUN5.json RUN3.json RUN4.json [--grid]

Several runs: a (shape, dtype)'s variants are merged, each variant's
ratio taken from the first run that timed it (ratios, not times: two runs
on two machines differ by a few percent in clock, and the ratio to the
same run's cuBLAS cancels that).

For each (shape, dtype) of the run, the pick is made among the variants
that run measured (the table's plain tiles and stream-K tiles, restricted
to those timed; a stream-K pick's ratio is that of the candidate timed on
the launch the model takes, ``<variant>@spread`` / ``@even`` /
``@leftover``, where the run timed one), without ``TUNED``; the line gives
the measured ratio to
cuBLAS of that pick and of the best measured variant. The summary: median
and worst of the picks, the sum of log(pick / best) (0: always the best).
``--grid`` evaluates every point of a coarse grid of EFFICIENCY (128x192,
128x128, 64x128), MISALIGNED_K and STREAM_K_FIXED_S the same way and
prints the best few by that sum, the worst pick breaking ties.
"""

import argparse
import itertools
import json
import math
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "python"))


def measured(results):
    """[(m, n, k, dtype, {variant: ratio})] of the runs that timed variants
    (``results``: the rows of one or more runs, the first run's first)."""
    merged = {}
    for r in results:
        ratios = merged.setdefault((r["m"], r["n"], r["k"], r["dtype"]), {})
        for v, c in r.get("candidates", {}).items():
            ratios.setdefault(v, c["ratio"])
        ratios.setdefault(r["variant"], r["ratio"])
    return [(*key, ratios) for key, ratios in merged.items() if len(ratios) > 1]


def launch_kind(gc, variant, m, n, k, sms):
    """The launch the model takes for stream-K ``variant`` on this shape, as
    random_sweep.py names it: '@spread', '@even', '@leftover', or '' (no
    stream-K run: whole waves, or a shared fix-up)."""
    if not gc.is_stream_k(variant) or gc.overrides(variant).get("sk_share"):
        return ""
    tile = gc.tile_variant(variant)
    (bm, bn), cl = gc.tile(tile), gc.cluster_of(tile)
    units, wave = -(-m // (bm * cl)) * -(-n // bn), sms // cl
    if units % wave == 0:
        return ""
    _, sk_ctas, rounds = gc.stream_k_launch(units, -(-k // gc.K_BLOCK), wave, tile)
    rest = units - rounds * wave
    if rounds < units // wave:
        return "@spread"
    return "@leftover" if sk_ctas % rest == 0 else "@even"


def measured_as(gc, ratios, variant, m, n, k, sms):
    """The measured ratio of ``variant`` on the model's launch: the
    ``<variant>@<kind>`` candidate where one was timed, else the plain name
    (a run's own pick, or a run before the launch kinds)."""
    return ratios.get(variant + launch_kind(gc, variant, m, n, k, sms), ratios.get(variant))


def picks(gc, rows, sms):
    """[(picked ratio, best ratio, pick, shape)] with the pick restricted to
    each shape's measured variants (a stream-K tile: timed on the launch the
    model takes, ``measured_as``)."""
    plain_all, sk_all, tuned = gc.RULE_VARIANTS, gc.RULE_STREAM_K_TILES, gc.TUNED
    cut_all = gc.CUT_RULE_VARIANTS
    out = []
    try:
        gc.TUNED = {}
        for m, n, k, dtype, ratios in rows:
            gc.RULE_VARIANTS = tuple(v for v in plain_all if v in ratios)
            gc.CUT_RULE_VARIANTS = tuple(v for v in cut_all if v in ratios)
            if not gc.RULE_VARIANTS:
                continue
            gc.RULE_STREAM_K_TILES = sk_all
            v = gc.choose(m, n, k, dtype, sms, stream_k=False)
            gc.RULE_STREAM_K_TILES = tuple(
                v for v in sk_all
                if measured_as(gc, ratios, f"{v}_streamk", m, n, k, sms) is not None)
            if gc.RULE_STREAM_K_TILES:
                v = gc.choose(m, n, k, dtype, sms)
            got = measured_as(gc, ratios, v, m, n, k, sms)
            if got is None:      # a shared fix-up pick that was not timed
                continue
            out.append((got, max(ratios.values()), v + launch_kind(gc, v, m, n, k, sms),
                        (m, n, k, dtype)))
    finally:
        gc.RULE_VARIANTS, gc.RULE_STREAM_K_TILES, gc.TUNED = plain_all, sk_all, tuned
        gc.CUT_RULE_VARIANTS = cut_all
    return out


def score(got):
    ratios = [g[0] for g in got]
    return (sum(math.log(g[0] / g[1]) for g in got), min(ratios), statistics.median(ratios))


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("json", nargs="+")
    ap.add_argument("--grid", action="store_true")
    ap.add_argument("--cut-grid", action="store_true",
                    help="the pick's score with the tiles cut to the shape off, and at each "
                         "CUT_MARGIN")
    args = ap.parse_args(argv)
    from pipeline_mlir.ops import gemm_configs as gc

    runs = []
    for path in args.json:
        with open(path) as f:
            runs.append(json.load(f))
    rows, sms = measured([r for run in runs for r in run["results"]]), runs[0]["sms"]
    got = picks(gc, rows, sms)
    for r, best, v, (m, n, k, dtype) in got:
        print(f"{dtype} {m}x{n}x{k}: pick {v} {r:.3f}, best measured {best:.3f}")
    total, worst, median = score(got)
    print(f"PICK {len(got)} shapes: median {median:.3f}x, worst {worst:.3f}x cuBLAS, "
          f"sum log(pick / best) {total:.2f}")
    if args.cut_grid:
        saved = (gc.CUT_MARGIN, gc.AUTO_CUT)
        try:
            gc.AUTO_CUT = False
            total, worst, median = score(picks(gc, rows, sms))
            print(f"CUT off: sum {total:.2f}, median {median:.3f}x, worst {worst:.3f}x")
            gc.AUTO_CUT = True
            for margin in (1.0, 0.97, 0.95, 0.93, 0.9, 0.85):
                gc.CUT_MARGIN = margin
                got = picks(gc, rows, sms)
                total, worst, median = score(got)
                cut = sum(g[2] in gc.CUT_VARIANTS for g in got)
                print(f"CUT_MARGIN {margin}: sum {total:.2f}, median {median:.3f}x, worst "
                      f"{worst:.3f}x, {cut} cut picks")
        finally:
            gc.CUT_MARGIN, gc.AUTO_CUT = saved
    if not args.grid:
        return 0
    # block_time and stream_k_run_time read these two in their own modules
    # (gemm_configs re-exports copies): set them there
    from pipeline_mlir.ops import gemm_cost, gemm_stream_k

    saved = (dict(gc.EFFICIENCY), gemm_cost.MISALIGNED_K, gemm_stream_k.STREAM_K_FIXED_S)
    points = []
    try:
        for e192, e128, e64, mis, fixed in itertools.product(
                (0.85, 0.9, 0.95), (0.8, 0.85, 0.9), (0.5, 0.6, 0.7), (1.0, 1.1, 1.2, 1.3),
                (5e-6, 10e-6, 20e-6, 30e-6)):
            gc.EFFICIENCY.update({"128x192": e192, "128x128": e128, "64x128": e64})
            gemm_cost.MISALIGNED_K, gemm_stream_k.STREAM_K_FIXED_S = mis, fixed
            points.append((score(picks(gc, rows, sms)), (e192, e128, e64, mis, fixed)))
    finally:
        gc.EFFICIENCY.clear()
        gc.EFFICIENCY.update(saved[0])
        gemm_cost.MISALIGNED_K, gemm_stream_k.STREAM_K_FIXED_S = saved[1], saved[2]
    points.sort(key=lambda p: (p[0][0], p[0][1]), reverse=True)
    for (total, worst, median), (e192, e128, e64, mis, fixed) in points[:5]:
        print(f"GRID 128x192 {e192} 128x128 {e128} 64x128 {e64} MISALIGNED_K {mis} "
              f"STREAM_K_FIXED_S {fixed * 1e6:.0f} us: sum {total:.2f}, median {median:.3f}x, "
              f"worst {worst:.3f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
