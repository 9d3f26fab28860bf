#!/usr/bin/env python3
"""pipeline_mlir.gemm against cuBLAS on shapes drawn at random,
with the waste of each pick beside its time.

    python3 random_sweep.py --out DIR [--count 60] [--seed 33] [--dtype bf16 f16]
                            [--dist log|linear] [--rounds 9] [--quick]
                            [--variants NAME ...] [--shapes MxNxK ...]
                            [--order balanced|fixed]

Shapes: ``--count`` (M, N, K) drawn with ``random.Random(seed)``, each in
[128, 16384] and a multiple of 8 (``--dist log``, the default: uniform in
log2, so narrow outputs and short or long K come up as often as big cubes;
``linear``: uniform), then the cubes and model shapes of sweep.py. For each
shape and dtype, in one process on the same ``torch.randn`` inputs: our
output is checked against an fp32 reference (hopper_gemm_host.REL_ERROR_BOUND)
and against itself on a second call (bitwise: split-K's reduction runs in
one order); then ours (``pipeline_mlir.gemm(a, b, out=c)``) and cuBLAS
(``torch.matmul(a, b.T, out=)``) are timed in alternating rounds
(run_gemm.bench_interleaved: CUDA events around 10 back-to-back calls).
``--order balanced`` (the default) rotates the contenders' order every
round (run_gemm.round_orders: each in every slot, and right after every
other, equally often; ``--rounds`` rounded up to a whole cycle: 4 for the
pick and cuBLAS alone): a contender timed right after cuBLAS ran slower,
up to 4 us a call on short calls, and ``fixed`` (the runs before run18)
put the pick there in every round.

Per shape one RESULT line: the variant picked, its tile fill (useful /
computed output area: the ragged edge's waste), the last wave's occupancy
(the fraction of the SMs its work units use; for split-K, units = tiles x
splits; for stream-K, the SMs its balanced runs use), the waves (for
stream-K, each CTA's K blocks in tiles' worth), both times and the ratio
cuBLAS / ours (> 1: faster). ``--variants`` also times those
variants (``gemm_configs`` names) beside the pick, each output checked the
same way: one CANDIDATE line each (what calibrates the pick's model); a
stream-K name with ``@spread``, ``@leftover`` or ``@even`` runs that kind of launch
(gemm_configs.stream_k_launch) whatever the model would choose.
``--shapes`` runs only those shapes, in that order (those of the draw and
the fixed ones keep their label, any other is "given": a calibration run
on the shapes a change is for, beside a few controls).
Then, per dtype and overall, the median and worst ratio, and the five worst
shapes; a markdown table. Writes DIR/random_sweep.json and .log.
"""

import argparse
import json
import math
import os
import random
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

LO, HI, STEP = 128, 16384, 8
DEFAULT_COUNT, DEFAULT_SEED = 60, 33    # build_bundle.py compiles this draw's picks


def draw(count, seed, dist="log"):
    """``count`` (M, N, K) in [LO, HI], multiples of STEP, reproducible."""
    rng = random.Random(seed)

    def one():
        if dist == "linear":
            return rng.randrange(LO, HI + 1, STEP)
        x = 2 ** rng.uniform(math.log2(LO), math.log2(HI))
        return min(HI, max(LO, int(round(x / STEP)) * STEP))

    return [(one(), one(), one()) for _ in range(count)]


def launch_kind(name):
    """The stream-K launch a candidate name asks for: ``<variant>@spread``,
    ``@leftover`` or ``@even`` (gemm_configs.stream_k_launch), else None
    (the model's choice)."""
    kind = name.partition("@")[2]
    return {"": None, "spread": True, "leftover": False, "even": "even"}[kind]


def candidate(ops_gemm, name, dtype):
    """The launcher of a ``--variants`` name: a gemm_configs variant, or a
    stream-K one with ``@spread`` / ``@leftover`` / ``@even`` (its kernel,
    that launch, on that launch's grid)."""
    variant = name.partition("@")[0]
    g = ops_gemm.variant_gemm(variant, dtype)
    if "@" in name:
        from pipeline_mlir.ops.streamk_host import StreamKGemm

        g = StreamKGemm(g.gemm, spread=launch_kind(name))
    return g


def waste(variant, m, n, k, sms, spread=None):
    """(tile fill, last-wave occupancy, waves) of ``variant`` on this shape."""
    from pipeline_mlir.ops import gemm_configs as gc

    variant = variant.partition("@")[0]
    tile = gc.tile_variant(variant)
    if gc.is_stream_k(variant):
        # units: tiles, or a cluster's tile pairs (sms / 2 of them a wave);
        # the stream-K run's CTAs as a fraction of a wave; each CTA's work
        # in tiles' worth (whole rounds, then one piece of a tile)
        units, wave = gc.stream_k_units(tile, m, n, sms)
        kb = -(-k // gc.K_BLOCK)
        grid, sk_ctas, rounds = gc.stream_k_launch(units, kb, wave, tile, spread,
                                                   gc.overrides(variant).get("sk_share", False))
        rest = units - rounds * grid
        return (gc.fill(tile, m, n), (sk_ctas if rest else grid) / wave,
                round(rounds + (rest / sk_ctas if rest else 0), 2))
    splits = min(gc.splits_of(variant), -(-k // gc.K_BLOCK))
    cluster = gc.overrides(variant).get("cluster_m", 1)
    units = gc.units_of(tile, m, n, splits)
    sms *= gc.overrides(variant).get("ctas_per_sm", 1)     # CTAs that run at once
    if cluster > 1:   # a 2-CTA cluster is one unit of two tiles: count CTAs
        units = math.ceil(m / (gc.tile(tile)[0] * cluster)) * cluster * math.ceil(
            n / gc.tile(tile)[1])
    waves = math.ceil(units / sms)
    return gc.fill(tile, m, n), (units - (waves - 1) * sms) / sms, waves


def log(msg, fh):
    print(msg, flush=True)
    fh.write(msg + "\n")
    fh.flush()


def parser():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=".")
    ap.add_argument("--count", type=int, default=DEFAULT_COUNT)
    ap.add_argument("--seed", type=int, default=DEFAULT_SEED)
    ap.add_argument("--dist", choices=["log", "linear"], default="log")
    ap.add_argument("--dtype", nargs="+", default=["bf16", "f16"], choices=["bf16", "f16"])
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--quick", action="store_true", help="8 random shapes, no fixed ones")
    ap.add_argument("--variants", nargs="*", default=[],
                    help="also time these gemm_configs variants beside the pick (a "
                         "stream-K one with @spread, @leftover or @even: that launch)")
    ap.add_argument("--shapes", nargs="*", default=[],
                    help="only these shapes of the draw and the fixed ones (MxNxK)")
    ap.add_argument("--order", choices=["balanced", "fixed"], default="balanced",
                    help="the contenders' order in each round (run_gemm.round_names)")
    return ap


def main(argv=None):
    args = parser().parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    if os.path.isdir(os.path.join(HERE, "gemm-cache")):
        os.environ.setdefault("PIPELINE_MLIR_CACHE_DIR", os.path.join(HERE, "gemm-cache"))
    fh = open(os.path.join(args.out, "random_sweep.log"), "w")

    import torch

    import pipeline_mlir
    from pipeline_mlir.ops import gemm as ops_gemm
    from pipeline_mlir.ops.hopper_gemm_host import REL_ERROR_BOUND
    from run_gemm import bench_interleaved, rel_err
    from sweep import SHAPES as FIXED

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    shapes = [(m, n, k, "random") for m, n, k in draw(8 if args.quick else args.count,
                                                       args.seed, args.dist)]
    if not args.quick:
        shapes += list(FIXED)
    if args.shapes:
        named = {f"{s[0]}x{s[1]}x{s[2]}": s for s in shapes}
        shapes = [named.get(s) or (*map(int, s.split("x")), "given") for s in args.shapes]
    log(f"device: {torch.cuda.get_device_name()} ({sms} SMs), torch {torch.__version__}, "
        f"seed {args.seed}, {args.dist}, {len(shapes)} shapes x {args.dtype}, order "
        f"{args.order}", fh)
    results = []
    for dtype in args.dtype:
        dt = {"bf16": torch.bfloat16, "f16": torch.float16}[dtype]
        for m, n, k, what in shapes:
            torch.manual_seed(0)
            a = torch.randn(m, k, device="cuda", dtype=dt)
            b = torch.randn(n, k, device="cuda", dtype=dt)
            ours = torch.empty(m, n, device="cuda", dtype=dt)
            theirs = torch.empty(m, n, device="cuda", dtype=dt)
            pipeline_mlir.gemm(a, b, out=ours)
            again = pipeline_mlir.gemm(a, b)
            ref = torch.matmul(a.float(), b.float().T)
            err = rel_err(ours, ref, k)
            del ref
            ok = err <= REL_ERROR_BOUND[dtype]
            same = bool(torch.equal(ours, again))
            variant = ops_gemm.chosen(a, b)
            fill, last, waves = waste(variant, m, n, k, sms)
            fns = {"cublas": lambda: torch.matmul(a, b.T, out=theirs),
                   "ours": lambda: pipeline_mlir.gemm(a, b, out=ours)}
            checked = {}
            for v in args.variants:
                if v == variant:
                    continue
                g = candidate(ops_gemm, v, dtype)
                out_v = torch.empty(m, n, device="cuda", dtype=dt)
                g.launch(a, b, out_v, (), None, False)
                again_v = g.launch(a, b, None, (), None, False)
                ref = torch.matmul(a.float(), b.float().T)
                checked[v] = (rel_err(out_v, ref, k), bool(torch.equal(out_v, again_v)))
                del ref, again_v
                fns[v] = (lambda g=g, o=out_v: g.launch(a, b, o, (), None, False))
            med, ratio = bench_interleaved(fns, rounds=args.rounds, order=args.order)
            row = {"m": m, "n": n, "k": k, "what": what, "dtype": dtype, "variant": variant,
                   "fill": fill, "last_wave": last, "waves": waves, "ours_ms": med["ours"],
                   "cublas_ms": med["cublas"], "ratio": ratio["ours"], "err": err,
                   "ok": ok, "bitwise_repeat": same,
                   "tflops": 2 * m * n * k / med["ours"] / 1e9,
                   "candidates": {v: {"ms": med[v], "ratio": ratio[v], "err": e,
                                      "ok": e <= REL_ERROR_BOUND[dtype], "bitwise_repeat": rep,
                                      "waste": waste(v, m, n, k, sms, launch_kind(v))}
                                  for v, (e, rep) in checked.items()}}
            results.append(row)
            for v, c in row["candidates"].items():
                cf, cl, cw = c["waste"]
                log(f"CANDIDATE {dtype} {m}x{n}x{k} {v}: fill {cf:.3f} last wave {cl:.2f} of "
                    f"{cw} | {c['ms']:.4f} ms ratio {c['ratio']:.3f} | err {c['err']:.2g}"
                    f"{'' if c['ok'] else ' OVER BOUND'}"
                    f"{'' if c['bitwise_repeat'] else ' NOT BITWISE REPEATABLE'}", fh)
            log(f"RESULT {dtype} {m}x{n}x{k} ({what}) {variant}: fill {fill:.3f} last wave "
                f"{last:.2f} of {waves} | ours {med['ours']:.4f} ms cuBLAS "
                f"{med['cublas']:.4f} ms ratio {ratio['ours']:.3f} | err {err:.2g}"
                f"{'' if ok else ' OVER BOUND'}{'' if same else ' NOT BITWISE REPEATABLE'}", fh)
            del a, b, ours, theirs, again
    log("", fh)
    log("| dtype | M x N x K | what | variant | fill | last wave | waves | ours ms | "
        "cuBLAS ms | cuBLAS / ours |", fh)
    log("|---|---|---|---|---|---|---|---|---|---|", fh)
    for r in results:
        log(f"| {r['dtype']} | {r['m']} x {r['n']} x {r['k']} | {r['what']} | {r['variant']} "
            f"| {r['fill']:.3f} | {r['last_wave']:.2f} | {r['waves']} | {r['ours_ms']:.4f} | "
            f"{r['cublas_ms']:.4f} | {r['ratio']:.3f} |", fh)
    for name, rows in [(d, [r for r in results if r["dtype"] == d]) for d in args.dtype] + [
            ("random", [r for r in results if r["what"] == "random"]), ("all", results)]:
        if rows:
            ratios = [r["ratio"] for r in rows]
            log(f"SUMMARY {name}: {len(rows)} runs, median {statistics.median(ratios):.3f}x, "
                f"worst {min(ratios):.3f}x, best {max(ratios):.3f}x cuBLAS", fh)
    for r in sorted(results, key=lambda r: r["ratio"])[:5]:
        log(f"WORST {r['dtype']} {r['m']}x{r['n']}x{r['k']} {r['variant']}: {r['ratio']:.3f}x "
            f"(fill {r['fill']:.3f}, last wave {r['last_wave']:.2f} of {r['waves']})", fh)
    if args.variants:
        best = [max([r["ratio"]] + [c["ratio"] for c in r["candidates"].values()])
                for r in results]
        log(f"SUMMARY best of pick and --variants: {len(best)} runs, median "
            f"{statistics.median(best):.3f}x, worst {min(best):.3f}x cuBLAS", fh)
    bad = [r for r in results if not (r["ok"] and r["bitwise_repeat"])]
    bad += [dict(r, variant=v, **c) for r in results for v, c in r["candidates"].items()
            if not (c["ok"] and c["bitwise_repeat"])]
    for r in bad:
        log(f"FAIL {r['dtype']} {r['m']}x{r['n']}x{r['k']} {r['variant']}: err {r['err']:.3g}, "
            f"bitwise repeat {r['bitwise_repeat']}", fh)
    with open(os.path.join(args.out, "random_sweep.json"), "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "sms": sms, "seed": args.seed,
                   "dist": args.dist, "results": results}, f, indent=1)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
