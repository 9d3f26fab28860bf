#!/usr/bin/env python3
"""GPU side of the GEMM benchmark (no MLIR): check every variant against
torch.matmul, then time cuBLAS (torch.matmul), Triton and ours in one
process on the same gaussian inputs.

    python3 run_gemm.py --out DIR [--check-only] [--quick]

Writes DIR/gemm.json and DIR/gemm.log. Times are CUDA-event times of 10
back-to-back launches on torch's current stream; the contenders are timed in
alternating rounds (9, after warm-up) so that the GPU's clock and power
drift hit all alike; a ratio is the median over rounds of cuBLAS time / time.
TFLOP/s = 2 M N K / median time.
"""

import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

CHECK_SHAPES = [(512, 768, 256), (1000, 1032, 520), (128, 256, 64), (4096, 4096, 4096)]
BENCH_SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (8192, 8192, 1024)]
LADDER_SHAPE = (8192, 8192, 8192)


def log(msg, fh):
    print(msg, flush=True)
    fh.write(msg + "\n")
    fh.flush()


def round_orders(n):
    """The contenders' orders (indices 0..n-1) over one cycle of rounds: a
    balanced Latin square (Williams design; n rows, 2n for odd n). Over the
    cycle every contender is timed in every slot equally often and right
    after every other one equally often, so no contender always follows the
    same one (a contender timed right after cuBLAS ran slower, up to 4 us a
    call on short calls, docs/gemm.md)."""
    first, lo, hi = [0], 1, n - 1
    while len(first) < n:
        if len(first) % 2:
            first.append(lo)
            lo += 1
        else:
            first.append(hi)
            hi -= 1
    rows = [[(x + i) % n for x in first] for i in range(n)]
    return rows + [row[::-1] for row in rows] if n % 2 and n > 1 else rows


def round_names(names, rounds, order="balanced"):
    """The order of ``names`` in each round: ``fixed``, the given order every
    round; ``balanced``, round_orders' cycle repeated, ``rounds`` rounded up
    to a whole number of cycles."""
    names = list(names)
    if order == "fixed":
        return [names] * rounds
    cycle = round_orders(len(names))
    rounds = -(-rounds // len(cycle)) * len(cycle)
    return [[names[i] for i in cycle[r % len(cycle)]] for r in range(rounds)]


def bench_interleaved(fns, rounds=9, iters=10, warmup=3, baseline=lambda name: "cublas",
                      order="fixed"):
    """Median ms per call of each of ``fns`` ({name: fn}), timed in
    alternating rounds so that clock and power drift hit every contender
    alike; also the median over rounds of the baseline's time / each time
    (``baseline(name)``: the contender ``name`` is compared with; cuBLAS).
    ``order``: the contenders' order in each round (round_names): ``fixed``
    (the dict's order) or ``balanced`` (rotated, ``rounds`` rounded up to a
    whole cycle; each round opens with one untimed call of its first
    contender)."""
    import torch

    for fn in fns.values():
        for _ in range(warmup):
            fn()
    torch.cuda.synchronize()
    times = {name: [] for name in fns}
    for names in round_names(fns, rounds, order):
        if order != "fixed":
            # the round's first block follows its own untimed call, not the
            # last block of the round before (round_orders balances the rest)
            fns[names[0]]()
            torch.cuda.synchronize()
        for name in names:
            fn = fns[name]
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            for _ in range(iters):
                fn()
            e.record()
            e.synchronize()
            times[name].append(s.elapsed_time(e) / iters)
    med = {name: statistics.median(t) for name, t in times.items()}
    ratio = {name: statistics.median(c / t for c, t in zip(times[baseline(name)], times[name]))
             for name in fns}
    return med, ratio


def rel_err(c, ref, k):
    return ((c.float() - ref.float()).abs() / (ref.float().abs() + k ** 0.5)).max().item()


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=".")
    ap.add_argument("--check-only", action="store_true")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    fh = open(os.path.join(args.out, "gemm.log"), "w")

    import torch
    from hopper_gemm_host import REL_ERROR_BOUND, HopperGemm, check

    manifest = json.load(open(os.path.join(HERE, "manifest.json")))
    dev = torch.cuda.get_device_name()
    log(f"device: {dev}, torch {torch.__version__}, "
        f"SMs {torch.cuda.get_device_properties(0).multi_processor_count}", fh)
    result = {"device": dev, "checks": [], "bench": [], "ladder": []}
    gemms = {}
    failures = 0
    for v in manifest["variants"]:
        image = open(os.path.join(HERE, v["image"]), "rb").read()
        g = HopperGemm(image, v, persistent=v["persistent"])
        gemms[(v["dtype"], v["step"])] = g
        resident = (g.kernel.max_active_clusters((v["threads"], 1, 1), (v["cluster_m"], 1, 1),
                                                 v["smem"]) if v["cluster_m"] > 1 else None)
        log(f"LOADED {v['dtype']} {v['step']} {v['name']} regs {g.kernel.attrs.num_regs} "
            f"smem {v['smem']} stages {v['stages']}"
            + (f" max active clusters {resident}" if resident else ""), fh)
        for shape in CHECK_SHAPES[:2] if args.quick else CHECK_SHAPES:
            try:
                err = check(g, *shape)
                ok = True
            except AssertionError as e:
                err, ok = str(e), False
                failures += 1
            result["checks"].append({"dtype": v["dtype"], "step": v["step"],
                                     "shape": shape, "err": err, "ok": ok})
            log(f"CHECK {v['dtype']} {v['step']:22s} {shape} "
                f"{'ok' if ok else 'FAILED'} max rel err {err}", fh)
    if args.check_only:
        json.dump(result, open(os.path.join(args.out, "gemm.json"), "w"), indent=1)
        return 1 if failures else 0

    from triton_matmul import matmul_nt
    from variants import CANDIDATES, LADDER

    dtypes = {"bf16": torch.bfloat16, "f16": torch.float16}
    for dname, dt in dtypes.items():
        for (m, n, k) in BENCH_SHAPES:
            torch.manual_seed(0)
            a = torch.randn(m, k, device="cuda", dtype=dt)
            b = torch.randn(n, k, device="cuda", dtype=dt)
            flop = 2.0 * m * n * k
            row = {"dtype": dname, "shape": [m, n, k]}
            c_ref = torch.matmul(a, b.T)
            c_tr = matmul_nt(a, b)
            row["triton_err"] = rel_err(c_tr, c_ref, k)
            fns = {"cublas": lambda: torch.matmul(a, b.T),
                   "triton": lambda: matmul_nt(a, b, c_tr)}
            outs = {}
            for step in CANDIDATES:
                g = gemms.get((dname, step))
                if g is None:
                    continue
                c = outs[step] = torch.empty(m, n, device="cuda", dtype=dt)
                g(a, b, c, sync=True)
                err = row[f"ours_{step}_err"] = rel_err(c, c_ref, k)
                if not err <= REL_ERROR_BOUND[dname]:
                    failures += 1
                fns[step] = (lambda g=g, c=c: g(a, b, c))
            med, ratio = bench_interleaved(fns)
            for name in fns:
                row[f"{name}_ms"] = med[name]
                row[f"{name}_vs_cublas"] = ratio[name]
            best = max((ratio[st], st) for st in fns if st not in ("cublas", "triton"))[1]
            row["ours_best"], row["ours_ms"] = best, med[best]
            row["ours_vs_cublas"] = ratio[best]
            for key in ("cublas", "triton", "ours"):
                row[f"{key}_tflops"] = flop / row[f"{key}_ms"] / 1e9
            result["bench"].append(row)
            log(f"BENCH {dname} {m}x{n}x{k}: cuBLAS {row['cublas_tflops']:.0f} TFLOP/s, "
                f"Triton {row['triton_tflops']:.0f} ({row['triton_vs_cublas']:.3f}x), ours "
                f"{row['ours_tflops']:.0f} ({row['ours_vs_cublas']:.3f}x, {row['ours_best']}); "
                f"errs triton {row['triton_err']:.2g} ours "
                + " ".join(f"{key[5:-4]}={row[key]:.2g}" for key in row
                           if key.startswith("ours_") and key.endswith("_err"))
                + "; candidates " + " ".join(f"{st}={row[st + '_vs_cublas']:.3f}"
                                             for st in CANDIDATES if st + "_ms" in row), fh)
    # The ladder: bf16 at 8192^3, each step one more ingredient.
    m, n, k = LADDER_SHAPE
    torch.manual_seed(0)
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    c_ref = torch.matmul(a, b.T)
    fns = {"cublas": lambda: torch.matmul(a, b.T)}
    for step, *_ in LADDER:
        g = gemms[("bf16", step)]
        c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        g(a, b, c, sync=True)
        err = rel_err(c, c_ref, k)
        if not err <= REL_ERROR_BOUND["bf16"]:
            failures += 1
        fns[step] = (lambda g=g, c=c: g(a, b, c))
        result["ladder"].append({"step": step, "what": g.meta["what"], "err": err})
    med, ratio = bench_interleaved(fns, rounds=5)
    for entry in result["ladder"]:
        st = entry["step"]
        entry.update(ms=med[st], tflops=2.0 * m * n * k / med[st] / 1e9,
                     vs_cublas=ratio[st], cublas_ms=med["cublas"])
        log(f"LADDER {st:22s} {entry['tflops']:.0f} TFLOP/s ({entry['vs_cublas']:.3f}x cuBLAS "
            f"{2.0 * m * n * k / med['cublas'] / 1e9:.0f}) err {entry['err']:.2g}", fh)
    result["failures"] = failures
    result["time"] = time.strftime("%Y-%m-%d %H:%M:%S")
    json.dump(result, open(os.path.join(args.out, "gemm.json"), "w"), indent=1)
    log(f"DONE failures {failures}", fh)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
