#!/usr/bin/env python3
"""pipeline_mlir.gemm against cuBLAS over square and LLM-like shapes.

    python3 sweep.py --out DIR [--dtype bf16 f16] [--no-variants] [--quick]

For every shape and dtype, on the same ``torch.randn`` inputs in one
process: cuBLAS (``torch.matmul(a, b.T)``), ours through the one-call entry
(``pipeline_mlir.gemm(a, b, out=c)``: the variant its table picks) and, unless
``--no-variants``, every variant of the table (to see where the pick was not
the fastest). Every output is checked against an fp32 reference first
(hopper_gemm_host.REL_ERROR_BOUND). Times: run_gemm.bench_interleaved (CUDA
events around 10 back-to-back launches, 9 alternating rounds); a ratio is
the median over rounds of cuBLAS time / our time (> 1: faster than cuBLAS).

Prints one SWEEP line per shape, then a markdown table and, per dtype and
overall, the median and worst ratio of gemm(); a BEST line per shape whose
fastest variant was not the pick (entries for gemm_configs.TUNED). Writes
DIR/sweep.json and DIR/sweep.log.
"""

import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

# (M, N, K, what): square cubes, then LLM-like projections (M = tokens)
SHAPES = [
    (2048, 2048, 2048, "cube"), (4096, 4096, 4096, "cube"), (8192, 8192, 8192, "cube"),
    (1024, 1024, 1024, "cube"), (3072, 3072, 3072, "cube"),
    (4096, 14336, 4096, "N-heavy: MLP up-projection"),
    (8192, 12288, 4096, "N-heavy: fused QKV"),
    (2048, 28672, 4096, "N-heavy: gate+up"),
    (4096, 4096, 14336, "K-heavy: MLP down-projection"),
    (1024, 1024, 16384, "K-heavy"),
    (2048, 2048, 8192, "K-heavy"),
    (128, 8192, 8192, "skinny M: small batch"),
    (256, 4096, 14336, "skinny M, K-heavy"),
    (64, 14336, 4096, "skinny M: decode-like"),
    (8192, 8192, 1024, "short K"),
    (16384, 1024, 4096, "tall M, narrow N"),
]
QUICK = [s for s in SHAPES if s[3] == "cube"][:3]


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=".")
    ap.add_argument("--dtype", nargs="+", default=["bf16", "f16"], choices=["bf16", "f16"])
    ap.add_argument("--no-variants", action="store_true")
    ap.add_argument("--quick", action="store_true", help="the three cubes only")
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    if os.path.isdir(os.path.join(HERE, "gemm-cache")):
        os.environ.setdefault("PIPELINE_MLIR_CACHE_DIR", os.path.join(HERE, "gemm-cache"))
    fh = open(os.path.join(args.out, "sweep.log"), "w")

    def log(msg):
        print(msg, flush=True)
        fh.write(msg + "\n")
        fh.flush()

    import torch

    import pipeline_mlir
    from pipeline_mlir.ops import gemm as ops_gemm
    from pipeline_mlir.ops import gemm_configs
    from pipeline_mlir.ops.hopper_gemm_host import REL_ERROR_BOUND
    from run_gemm import bench_interleaved, rel_err

    dev = torch.cuda.get_device_name()
    log(f"device: {dev}, torch {torch.__version__}, "
        f"SMs {torch.cuda.get_device_properties(0).multi_processor_count}")
    dtypes = {"bf16": torch.bfloat16, "f16": torch.float16}
    rows, failures = [], 0
    for dname in args.dtype:
        dt = dtypes[dname]
        for m, n, k, what in (QUICK if args.quick else SHAPES):
            torch.manual_seed(0)
            a = torch.randn(m, k, device="cuda", dtype=dt)
            b = torch.randn(n, k, device="cuda", dtype=dt)
            ref = torch.matmul(a, b.T)
            pick = ops_gemm.chosen(a, b)
            row = {"dtype": dname, "shape": [m, n, k], "what": what, "pick": pick, "errs": {}}
            fns = {"cublas": lambda: torch.matmul(a, b.T)}
            c = torch.full((m, n), float("nan"), device="cuda", dtype=dt)
            pipeline_mlir.gemm(a, b, out=c)
            outs = {"gemm": c}
            fns["gemm"] = lambda c=c: pipeline_mlir.gemm(a, b, out=c)
            if not args.no_variants:
                for v in gemm_configs.VARIANTS:
                    g = ops_gemm.variant_gemm(v, dname)
                    cv = torch.full((m, n), float("nan"), device="cuda", dtype=dt)
                    g(a, b, cv)
                    outs[v] = cv
                    fns[v] = lambda g=g, cv=cv: g(a, b, cv)
            torch.cuda.synchronize()
            for name, out in outs.items():
                err = row["errs"][name] = rel_err(out, ref, k)
                if not err <= REL_ERROR_BOUND[dname]:
                    failures += 1
                    log(f"FAILED {dname} {m}x{n}x{k} {name}: max rel err {err:.3g}")
            med, ratio = bench_interleaved(fns)
            row.update(ms={x: med[x] for x in fns}, vs_cublas={x: ratio[x] for x in fns})
            flop = 2.0 * m * n * k
            row["cublas_tflops"] = flop / med["cublas"] / 1e9
            row["gemm_tflops"] = flop / med["gemm"] / 1e9
            variants = {x: ratio[x] for x in fns if x not in ("cublas", "gemm")}
            if variants:
                row["best"] = max(variants, key=variants.get)
            rows.append(row)
            log(f"SWEEP {dname} {m}x{n}x{k} ({what}): cuBLAS {row['cublas_tflops']:.0f} TFLOP/s, "
                f"gemm {row['gemm_tflops']:.0f} ({ratio['gemm']:.3f}x, {pick})"
                + ("; variants " + " ".join(f"{x}={r:.3f}" for x, r in variants.items())
                   if variants else "")
                + f"; max err {max(row['errs'].values()):.2g}")
            if variants and row["best"] != pick and variants[row["best"]] > ratio["gemm"] * 1.01:
                log(f"BEST {dname} {m}x{n}x{k}: {row['best']} ({variants[row['best']]:.3f}x) "
                    f"beats the pick {pick} ({ratio['gemm']:.3f}x)")
            del a, b, ref, outs, fns
            torch.cuda.empty_cache()
    log("")
    log("| dtype | M x N x K | shape | cuBLAS TFLOP/s | gemm() TFLOP/s | gemm() x cuBLAS | "
        "variant | best variant (x cuBLAS) |")
    log("|---|---|---|---:|---:|---:|---|---|")
    for r in rows:
        m, n, k = r["shape"]
        best = (f"{r['best']} ({r['vs_cublas'][r['best']]:.3f})" if "best" in r else "-")
        log(f"| {r['dtype']} | {m} x {n} x {k} | {r['what']} | {r['cublas_tflops']:.0f} | "
            f"{r['gemm_tflops']:.0f} | {r['vs_cublas']['gemm']:.3f} | {r['pick']} | {best} |")
    summary = {}
    for label, sel in [(d, [r for r in rows if r["dtype"] == d]) for d in args.dtype] + \
            [("all", rows)]:
        if not sel:
            continue
        ratios = [r["vs_cublas"]["gemm"] for r in sel]
        worst = min(sel, key=lambda r: r["vs_cublas"]["gemm"])
        summary[label] = {"median": statistics.median(ratios), "worst": min(ratios),
                          "worst_shape": worst["shape"], "shapes": len(sel)}
        log(f"SUMMARY {label}: gemm() x cuBLAS median {summary[label]['median']:.3f}, worst "
            f"{summary[label]['worst']:.3f} ({'x'.join(map(str, worst['shape']))}), "
            f"{len(sel)} shapes")
    log(f"DONE failures {failures}")
    json.dump({"device": dev, "rows": rows, "summary": summary, "failures": failures,
               "time": time.strftime("%Y-%m-%d %H:%M:%S")},
              open(os.path.join(args.out, "sweep.json"), "w"), indent=1)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
