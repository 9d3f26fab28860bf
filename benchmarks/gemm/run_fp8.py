#!/usr/bin/env python3
"""GPU side of the FP8 GEMM benchmark (no MLIR): check every FP8 variant of
the bundle against an fp64 reference of the dequantized inputs, then time
cuBLASLt (``torch._scaled_mm(a, b.T, scale_a, scale_b,
out_dtype=torch.bfloat16)``, with ``use_fast_accum`` False and True) and ours
in one process, on the same ``torch.randn`` data quantized to e4m3 with a
per-tensor scale amax / 448.

    python3 run_fp8.py --out DIR [--check-only]

Writes DIR/fp8.json and DIR/fp8.log. Timing as run_gemm.py: CUDA-event times
of 10 back-to-back launches, contenders in alternating rounds (9, after
warm-up); a ratio is the median over rounds of cuBLASLt's time / ours, with
the same accumulation mode (fast-accum against fast-accum, promoted against
cuBLASLt's default, which promotes). TFLOP/s = 2 M N K / median time.
Every output (cuBLASLt's too) is checked against the bound of
fp8_gemm_host.error_bound; only ours counts as a failure.
"""

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

CHECK_SHAPES = [(512, 768, 256), (128, 256, 128), (1000, 1032, 1040), (3000, 2056, 4112)]
BENCH_SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (8192, 8192, 1024)]
CUBLAS = {"fast": "cublaslt_fast", "promoted": "cublaslt"}


def log(msg, fh):
    print(msg, flush=True)
    fh.write(msg + "\n")
    fh.flush()


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=".")
    ap.add_argument("--check-only", action="store_true")
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    fh = open(os.path.join(args.out, "fp8.log"), "w")

    import torch
    from fp8_gemm_host import (Fp8Gemm, check, error_bound, normalized_error, quantize,
                               reference)
    from run_gemm import bench_interleaved

    manifest = json.load(open(os.path.join(HERE, "manifest.json")))
    log(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}", fh)
    result = {"device": torch.cuda.get_device_name(), "checks": [], "bench": []}
    failures = 0
    gemms = {}
    for v in manifest["fp8_variants"]:
        g = Fp8Gemm(open(os.path.join(HERE, v["image"]), "rb").read(), v)
        gemms[v["name"]] = (g, v["accumulation"])
        log(f"LOADED {v['name']} ({v['accumulation']}) regs {g.kernel.attrs.num_regs} "
            f"smem {v['smem']} stages {v['stages']}", fh)
        for shape in CHECK_SHAPES:
            try:
                err, ok = check(g, *shape, v["accumulation"]), True
            except AssertionError as e:
                err, ok = str(e), False
                failures += 1
            result["checks"].append({"name": v["name"], "shape": shape, "err": err, "ok": ok})
            log(f"CHECK {v['name']:55s} {shape} {'ok' if ok else 'FAILED'} "
                f"normalized err {err} (bound {error_bound(shape[2], v['accumulation']):.3g})",
                fh)
    if args.check_only:
        json.dump(result, open(os.path.join(args.out, "fp8.json"), "w"), indent=1)
        return 1 if failures else 0

    for (m, n, k) in BENCH_SHAPES:
        torch.manual_seed(0)
        a8, sa = quantize(torch.randn(m, k, device="cuda"))
        b8, sb = quantize(torch.randn(n, k, device="cuda"))
        ref, sigma = reference(a8, sa, b8, sb)
        flop = 2.0 * m * n * k
        row = {"shape": [m, n, k]}
        fns, mode_of, outs = {}, {}, {}
        for mode, key in CUBLAS.items():
            fast = mode == "fast"
            fns[key] = (lambda fast=fast: torch._scaled_mm(
                a8, b8.T, sa, sb, out_dtype=torch.bfloat16, use_fast_accum=fast))
            mode_of[key] = mode
            outs[key] = fns[key]()
        for name, (g, mode) in gemms.items():
            c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
            g(a8, b8, sa, sb, c, sync=True)
            outs[name] = c
            fns[name] = (lambda g=g, c=c: g(a8, b8, sa, sb, c))
            mode_of[name] = mode
        for name, c in outs.items():
            err = row[f"{name}_err"] = normalized_error(c, ref, sigma, k)
            bound = error_bound(k, mode_of[name])
            if not err <= bound and name in gemms:
                failures += 1
            row[f"{name}_within_bound"] = err <= bound
        del ref
        med, ratio = bench_interleaved(fns, baseline=lambda nm: CUBLAS[mode_of[nm]])
        for name in fns:
            row[f"{name}_ms"] = med[name]
            row[f"{name}_tflops"] = flop / med[name] / 1e9
            row[f"{name}_vs_cublaslt"] = ratio[name]
        for mode, key in CUBLAS.items():
            ours = [nm for nm in gemms if mode_of[nm] == mode]
            if not ours:
                continue
            best = max(ours, key=lambda nm: ratio[nm])
            row[f"best_{mode}"] = best
            log(f"BENCH {m}x{n}x{k} {mode:8s}: cuBLASLt {row[key + '_tflops']:.0f} TFLOP/s, "
                f"ours {row[best + '_tflops']:.0f} ({ratio[best]:.3f}x, {best}); errs "
                f"cuBLASLt {row[key + '_err']:.3g} ours {row[best + '_err']:.3g} "
                f"(bound {error_bound(k, mode):.3g}); candidates "
                + " ".join(f"{nm}={ratio[nm]:.3f}" for nm in ours), fh)
        result["bench"].append(row)
    log("", fh)
    log("| M x N x K | mode | cuBLASLt TFLOP/s | ours TFLOP/s | ours / cuBLASLt | variant |", fh)
    log("|---|---|---|---|---|---|", fh)
    for row in result["bench"]:
        for mode, key in CUBLAS.items():
            best = row.get(f"best_{mode}")
            if best:
                log(f"| {'x'.join(map(str, row['shape']))} | {mode} | "
                    f"{row[key + '_tflops']:.0f} | {row[best + '_tflops']:.0f} | "
                    f"{row[best + '_vs_cublaslt']:.3f} | {best} |", fh)
    result["failures"] = failures
    result["time"] = time.strftime("%Y-%m-%d %H:%M:%S")
    json.dump(result, open(os.path.join(args.out, "fp8.json"), "w"), indent=1)
    log(f"DONE failures {failures}", fh)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
