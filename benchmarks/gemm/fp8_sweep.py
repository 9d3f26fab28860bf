#!/usr/bin/env python3
"""``pipeline_mlir.scaled_mm`` against ``torch._scaled_mm`` (cuBLASLt) over a
sweep of shapes, in both accumulation modes, in one process.

    python3 fp8_sweep.py --out DIR [--quick | --misaligned | --shapes MxNxK ...]
                         [--picks-only] [--modes fast promoted]

Runs where the kernel cache holds the FP8 variants (a GPU bundle's
``gemm-cache``, or PIPELINE_MLIR_CACHE_DIR; scripts/build-gemm-cache.py
--all --kernel fp8_gemm). Inputs are ``torch.randn`` quantized to e4m3 with
a per-tensor scale (amax / 448); B is given as ``w.t()`` of an N x K ``w``
(``torch._scaled_mm``'s column-major B); out bf16. For each shape and mode
(``use_fast_accum`` True: ``fast``; False: ``promoted``, against cuBLASLt's
default): the op as users call it (the rule's variant), cuBLASLt with the
same ``use_fast_accum``, and every other variant of the mode, timed in
alternating rounds (``run_gemm.bench_interleaved``: CUDA events over 10
back-to-back calls, 9 rounds); the ratio is the median over rounds of
cuBLASLt's time / ours; the pick's launcher is timed beside the op (the
op's own host cost where a call is short). Every output is checked against
fp8_gemm_host.error_bound first, and an overlapped promotion's output
(``promotion_overlap``) against its plain twin's bit for bit
(``fp8_configs.plain_twin``: the same additions in the same order). Where
the plain pick's tiles leave SMs idle (fewer tiles than SMs) the split-K
variants of the mode (``fp8_configs.SPLIT_VARIANTS``) are candidates too,
each checked against the bound and, on a second call, against its own
first output bit for bit (the reduction sums in a fixed order).
Prints a RESULT line per shape and mode, a RATIOS line with every
candidate's ratio, a BEST line where another variant beat the rule's pick
by > 1% (a TUNED candidate for ops/fp8_configs.py), and per mode the
median and worst ratio. Writes DIR/fp8_sweep.json and DIR/fp8_sweep.log.

``--misaligned``: instead of the sweep, shapes whose K is a multiple of 16
but not of 32 (rows of A and B not whole 32-byte L2 sectors: the
``MISALIGNED_K`` of ops/gemm_configs.py), beside controls of K a multiple
of 32 but not of 128 and of K a multiple of 128. ``--picks-only``: time
only the rule's pick and cuBLASLt (a confirmation run). ``--modes``: the
accumulation modes to run (both by default). ``--shapes``: these shapes
instead of the sweep's (e.g. ``--shapes 96x8192x8192 384x1536x2048``).
"""

import argparse
import json
import math
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

SHAPES = [
    # squares
    (1024, 1024, 1024), (2048, 2048, 2048), (3072, 3072, 3072), (4096, 4096, 4096),
    (6144, 6144, 6144), (8192, 8192, 8192),
    # LLM projections (tokens x out x in): Llama-3 8B / 70B
    (128, 4096, 4096), (512, 4096, 4096), (2048, 4096, 4096), (8192, 4096, 4096),
    (512, 14336, 4096), (4096, 14336, 4096), (512, 4096, 14336), (4096, 4096, 14336),
    (2048, 28672, 8192), (2048, 8192, 28672), (4096, 1024, 4096), (16384, 1024, 4096),
    # ragged (not tile multiples; cuBLASLt's FP8 needs multiples of 16) and short K
    (1008, 1040, 1056), (3008, 2064, 4112), (8192, 8192, 1024), (2048, 6144, 512),
    (384, 1536, 2048), (96, 8192, 8192),
]
QUICK = [(3072, 3072, 3072), (4096, 4096, 4096), (512, 14336, 4096), (1008, 1040, 1056)]
MISALIGNED = [
    # K = 4096 (aligned), 4128 (32-byte rows, not 128), 4112 (16-byte rows)
    (3008, 2064, 4096), (3008, 2064, 4128), (4096, 4096, 4128), (4096, 4096, 4112),
    (8192, 8192, 1040), (2048, 14336, 4112), (6208, 1808, 1200), (4544, 1008, 7792),
    (16384, 1024, 4112),
]


def parse_shape(text):
    """'96x8192x8192' -> (96, 8192, 8192)."""
    try:
        m, n, k = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"a shape is MxNxK, got {text!r}") from None
    if min(m, n, k) <= 0 or k % 16:
        raise argparse.ArgumentTypeError(f"{text}: M, N, K must be positive, K a multiple of 16")
    return m, n, k


def log(msg, fh):
    print(msg, flush=True)
    fh.write(msg + "\n")
    fh.flush()


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=".")
    which = ap.add_mutually_exclusive_group()
    which.add_argument("--quick", action="store_true")
    which.add_argument("--misaligned", action="store_true")
    which.add_argument("--shapes", nargs="+", metavar="MxNxK", type=parse_shape)
    ap.add_argument("--picks-only", action="store_true",
                    help="time only the rule's pick and cuBLASLt")
    ap.add_argument("--modes", nargs="+", choices=("fast", "promoted"),
                    default=["fast", "promoted"])
    args = ap.parse_args(argv)
    shapes = QUICK if args.quick else MISALIGNED if args.misaligned else (args.shapes or SHAPES)
    t0 = time.monotonic()
    os.makedirs(args.out, exist_ok=True)
    fh = open(os.path.join(args.out, "fp8_sweep.log"), "w")
    if os.path.isdir(os.path.join(HERE, "gemm-cache")):
        os.environ.setdefault("PIPELINE_MLIR_CACHE_DIR", os.path.join(HERE, "gemm-cache"))

    import torch

    import pipeline_mlir
    from pipeline_mlir.ops import fp8_configs
    from pipeline_mlir.ops import scaled_mm as ops_scaled_mm
    from pipeline_mlir.ops.fp8_gemm_host import (E4M3_A, error_bound, normalized_error,
                                                 quantize, reference)
    from run_gemm import bench_interleaved

    log(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}", fh)
    overlapped = [v for v in fp8_configs.VARIANTS if fp8_configs.plain_twin(v)]
    twins = {fp8_configs.plain_twin(v) for v in overlapped}
    sms = torch.cuda.get_device_properties(0).multi_processor_count

    def candidates(m, n, k, mode):
        """The mode's variants; its split-K ones too where the plain pick's
        tiles are fewer than the SMs and K has a K block for each split."""
        found = [v for v, o in fp8_configs.VARIANTS.items() if o["accumulation"] == mode]
        bm, bn = fp8_configs.tile(fp8_configs.choose(m, n, k, mode, sms, split=False))
        if math.ceil(m / bm) * math.ceil(n / bn) < sms:
            found += [v for v, o in fp8_configs.SPLIT_VARIANTS.items()
                      if o["accumulation"] == mode
                      and o["split_k"] <= math.ceil(k / E4M3_A.k)]
        return found

    results, failures = [], 0
    for m, n, k in shapes:
        torch.manual_seed(m * 7 + n * 3 + k)
        a8, sa = quantize(torch.randn(m, k, device="cuda"))
        w8, sw = quantize(torch.randn(n, k, device="cuda"))
        ref, sigma = reference(a8, sa, w8, sw)
        for mode in args.modes:
            fast = mode == "fast"
            pick = ops_scaled_mm.chosen(a8, w8.t(), fast)
            out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
            fns = {"cublaslt": lambda f=fast: torch._scaled_mm(
                       a8, w8.t(), sa, sw, out_dtype=torch.bfloat16, use_fast_accum=f),
                   "ours": lambda f=fast, o=out: pipeline_mlir.scaled_mm(
                       a8, w8.t(), sa, sw, use_fast_accum=f, out=o)}
            for v in dict.fromkeys([*candidates(m, n, k, mode), pick]):
                if v == pick or not args.picks_only:
                    g = ops_scaled_mm.variant_gemm(v)
                    # the launcher takes B as N x K (w), the op as K x N (w.t());
                    # the pick's launcher ("launcher") shows the op's own cost
                    fns["launcher" if v == pick else v] = \
                        lambda g=g, o=out: g(a8, w8, sa, sw, o)
            bad, kept = [], {}
            for name, fn in list(fns.items()):
                if name == "cublaslt":
                    continue
                out.fill_(float("nan"))
                fn()
                err = normalized_error(out, ref, sigma, k)
                if not err <= error_bound(k, mode):
                    bad.append(f"{name} error {err:.3g}")
                    del fns[name]      # not timed; a wrong candidate is a failure
                    continue
                variant = pick if name in ("ours", "launcher") else name
                if variant in overlapped or variant in twins:
                    kept[variant] = out.clone()
                if fp8_configs.splits_of(variant) > 1:
                    # the same bits on a second call (the partials and their
                    # sum in a fixed order), or it is wrong
                    first = out.clone()
                    out.fill_(float("nan"))
                    fn()
                    if not torch.equal(out, first):
                        bad.append(f"{name} differs from its first call")
                        del fns[name]
                    del first
            # An overlapped promotion adds the same partials in the same
            # order as its plain twin: the same bits, or it is wrong.
            for variant in overlapped:
                twin = fp8_configs.plain_twin(variant)
                if variant in kept and twin in kept and not torch.equal(kept[variant],
                                                                        kept[twin]):
                    bad.append(f"{variant} differs from {twin}")
                    fns.pop(variant, None)
            del kept
            if bad:
                failures += 1
                log(f"FAIL {m}x{n}x{k} {mode}: {', '.join(bad)}", fh)
            if "ours" not in fns:
                continue
            med, ratio = bench_interleaved(fns, baseline=lambda name: "cublaslt")
            tflops = 2 * m * n * k / (med["ours"] * 1e-3) / 1e12
            best = max((name for name in fns if name not in ("cublaslt", "launcher")),
                       key=lambda name: ratio[name])
            best_name = pick if best == "ours" else best
            row = {"shape": [m, n, k], "mode": mode, "variant": pick,
                   "ratio": ratio["ours"], "tflops": tflops,
                   "cublaslt_ms": med["cublaslt"], "ours_ms": med["ours"],
                   "best": best_name, "best_ratio": ratio[best],
                   "launcher_ratio": ratio.get("launcher"),
                   "ratios": {(pick if name == "ours" else name): ratio[name]
                              for name in fns if name not in ("cublaslt", "launcher")}}
            results.append(row)
            log(f"RESULT {m}x{n}x{k} {mode:8s} {pick:17s} {ratio['ours']:.3f}x cuBLASLt "
                f"({tflops:.0f} TFLOP/s; best {best_name} {ratio[best]:.3f}x)", fh)
            log(f"RATIOS {m}x{n}x{k} {mode}: " + " ".join(
                f"{name}={r:.3f}" for name, r in sorted(row["ratios"].items()))
                + f" (the pick's launcher {ratio.get('launcher', float('nan')):.3f})", fh)
            if best != "ours" and ratio[best] > 1.01 * ratio["ours"]:
                log(f"BEST ({m}, {n}, {k}, \"{mode}\"): \"{best}\"", fh)
    summary = {}
    for mode in ("fast", "promoted"):
        rs = [r["ratio"] for r in results if r["mode"] == mode]
        if rs:
            summary[mode] = {"median": statistics.median(rs), "worst": min(rs), "shapes": len(rs)}
            worst = min((r for r in results if r["mode"] == mode), key=lambda r: r["ratio"])
            log(f"SUMMARY {mode}: {len(rs)} shapes, median {statistics.median(rs):.3f}x, "
                f"worst {min(rs):.3f}x cuBLASLt "
                f"({'x'.join(map(str, worst['shape']))}, {worst['variant']})", fh)
    log(f"elapsed {time.monotonic() - t0:.0f} s", fh)
    with open(os.path.join(args.out, "fp8_sweep.json"), "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "results": results,
                   "summary": summary, "failures": failures}, f, indent=1)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
