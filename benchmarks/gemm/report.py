#!/usr/bin/env python3
"""Markdown tables of a GEMM benchmark run (run_gemm.py's gemm.json), as
pasted into docs/gemm.md:

    python3 benchmarks/gemm/report.py benchmarks/gemm/results/h100-run4.json
"""

import json
import sys


def main(path):
    r = json.load(open(path))
    print(f"GPU: {r['device']} ({r.get('time', '')}); "
          f"{sum(c['ok'] for c in r['checks'])}/{len(r['checks'])} correctness checks passed\n")
    print("| dtype | M x N x K | cuBLAS TFLOP/s | Triton TFLOP/s (x cuBLAS) | ours TFLOP/s "
          "(x cuBLAS) | our variant | max rel. err ours / Triton vs cuBLAS |")
    print("|---|---|---:|---:|---:|---|---|")
    for row in r["bench"]:
        m, n, k = row["shape"]
        err = row[f"ours_{row['ours_best']}_err"]
        print(f"| {row['dtype']} | {m} x {n} x {k} | {row['cublas_tflops']:.0f} | "
              f"{row['triton_tflops']:.0f} ({row['triton_vs_cublas']:.3f}) | "
              f"**{row['ours_tflops']:.0f} ({row['ours_vs_cublas']:.3f})** | {row['ours_best']} | "
              f"{err:.2g} / {row['triton_err']:.2g} |")
    if r.get("ladder"):
        e0 = r["ladder"][0]
        print(f"\nStep by step, bf16 8192^3 (cuBLAS {2 * 8192**3 / e0['cublas_ms'] / 1e9:.0f} "
              "TFLOP/s in the same rounds):\n")
        print("| step | what it adds | TFLOP/s | x cuBLAS |")
        print("|---|---|---:|---:|")
        for e in r["ladder"]:
            print(f"| {e['step']} | {e['what']} | {e['tflops']:.0f} | {e['vs_cublas']:.3f} |")


if __name__ == "__main__":
    main(sys.argv[1])
