#!/usr/bin/env python3
"""The fused-epilogue GEMM against torch, in one process:
``pipeline_mlir.gemm(a, b, bias=bias, activation=act)`` against
``torch.addmm(bias, a, b.T)`` + the activation and ``F.linear(a, b, bias)`` +
the activation (cuBLAS, then an elementwise kernel), over a sweep of shapes
and activations.

    python3 epilogue_bench.py --out DIR [--quick] [--shapes MxNxK ...] [--variants V ...]

Runs where the kernel cache holds the fused variants (a GPU bundle's
``gemm-cache``: scripts/build-gemm-cache.py --all --epilogues). Inputs are
``torch.randn`` bf16; every output is first checked against fp32 torch;
times are CUDA events over 10 back-to-back calls in alternating rounds
(``run_gemm.bench_interleaved``), the ratio the median over rounds of the
peer's time / ours. Prints a RESULT line per shape and activation and a
SUMMARY with the median and worst ratio against each peer. Writes
DIR/epilogue.json and DIR/epilogue.log.

``--variants``: also time these ``gemm_configs`` variants, built with the
same epilogue (``build_bundle.py --shapes ... --variants ... --epilogues``),
in the same rounds; each row then has ``variants`` (their ratios to
addmm+act and to the op) and a VARIANT line per variant, and the summary
the median and worst of each over the shapes.
"""

import argparse
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

SHAPES = [(2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 8192), (512, 4096, 4096),
          (4096, 14336, 4096), (2048, 28672, 4096), (8192, 4096, 4096), (1024, 11008, 4096),
          (3072, 3072, 3072), (1000, 1032, 520), (128, 8192, 8192), (4096, 1024, 4096)]
QUICK = [(4096, 4096, 4096), (512, 4096, 4096), (1000, 1032, 520)]
ACTIVATIONS = ("relu", "gelu_tanh", "gelu_erf", "silu")


def torch_activation(name):
    import torch.nn.functional as F

    return {"relu": F.relu, "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
            "gelu_erf": F.gelu, "silu": F.silu}[name]


def bench_epilogue(activation):
    """The epilogue ``pipeline_mlir.gemm(a, b, bias=bias, activation=...)``
    runs with a bf16 bias (the same cache entry)."""
    from pipeline_mlir.ops.epilogues import Epilogue

    return Epilogue(bias="col", activation=activation)


def log(msg, fh):
    print(msg, flush=True)
    fh.write(msg + "\n")
    fh.flush()


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=".")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--shapes", nargs="*", default=[], metavar="MxNxK",
                    help="these shapes instead of the sweep's")
    ap.add_argument("--variants", nargs="*", default=[],
                    help="gemm_configs variants timed beside the op (fused, bf16)")
    ap.add_argument("--activations", nargs="*", default=list(ACTIVATIONS),
                    choices=ACTIVATIONS)
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    fh = open(os.path.join(args.out, "epilogue.log"), "w")
    if os.path.isdir(os.path.join(HERE, "gemm-cache")):
        os.environ.setdefault("PIPELINE_MLIR_CACHE_DIR", os.path.join(HERE, "gemm-cache"))

    import torch
    import torch.nn.functional as F

    import pipeline_mlir
    from pipeline_mlir.ops import gemm as ops_gemm
    from pipeline_mlir.ops import gemm_configs
    from run_gemm import bench_interleaved

    log(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}", fh)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    rows, failures = [], 0
    shapes = ([tuple(int(x) for x in s.split("x")) for s in args.shapes] if args.shapes
              else QUICK if args.quick else SHAPES)
    for m, n, k in shapes:
        torch.manual_seed(m + n + k)
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
        bias = torch.randn(n, device="cuda", dtype=torch.bfloat16)
        out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        exact = torch.matmul(a.float(), b.float().T) + bias.float()
        for name in args.activations:
            act = torch_activation(name)
            ref = act(exact)
            pipeline_mlir.gemm(a, b, bias=bias, activation=name, out=out)
            err = ((out.float() - ref).abs() / (ref.abs() + k ** 0.5)).max().item()
            if not err <= 1e-2:
                failures += 1
                log(f"FAIL {m}x{n}x{k} {name}: error {err:.3g}", fh)
                continue
            fns = {"ours": lambda act=name: pipeline_mlir.gemm(a, b, bias=bias, activation=act,
                                                                out=out),
                   "addmm": lambda act=act: act(torch.addmm(bias, a, b.T)),
                   "linear": lambda act=act: act(F.linear(a, b, bias))}
            for v in args.variants:
                g = ops_gemm.variant_gemm(v, "bf16", epilogue=bench_epilogue(name))
                vout = torch.full_like(out, float("nan"))
                g.launch(a, b, vout, {"bias": bias}, None, False)
                again = torch.full_like(out, float("nan"))
                g.launch(a, b, again, {"bias": bias}, None, False)
                verr = ((vout.float() - ref).abs() / (ref.abs() + k ** 0.5)).max().item()
                if not (verr <= 1e-2 and torch.equal(vout, again)):
                    failures += 1
                    log(f"FAIL {m}x{n}x{k} {name} variant {v}: error {verr:.3g}, "
                        f"bitwise the same twice: {torch.equal(vout, again)}", fh)
                    continue
                fns[v] = lambda g=g, vout=vout: g.launch(a, b, vout, {"bias": bias}, None,
                                                         False)
            med, ratio = bench_interleaved(fns, baseline=lambda _: "addmm")
            vs_addmm = ratio["ours"]
            vs_linear = statistics.median([med["linear"] / med["ours"]])
            row = {"shape": [m, n, k], "activation": name, "ours_ms": med["ours"],
                   "addmm_ms": med["addmm"], "linear_ms": med["linear"],
                   "vs_addmm": vs_addmm, "vs_linear": vs_linear}
            if args.variants:
                row["pick"] = gemm_configs.choose(m, n, k, "bf16", sms, fused=True,
                                                  activation=name)
                row["variants"] = {v: {"ms": med[v], "vs_addmm": ratio[v],
                                       "vs_op": med["ours"] / med[v]}
                                   for v in args.variants if v in med}
            rows.append(row)
            log(f"RESULT {m}x{n}x{k} {name:9s} {vs_addmm:.3f}x addmm+act, "
                f"{vs_linear:.3f}x linear+act ({med['ours'] * 1e3:.0f} us)"
                f"{' pick ' + row['pick'] if args.variants else ''}", fh)
            for v, r in row.get("variants", {}).items():
                log(f"VARIANT {m}x{n}x{k} {name:9s} {v:12s} {r['vs_addmm']:.3f}x addmm+act, "
                    f"{med['linear'] / r['ms']:.3f}x linear+act, {r['vs_op']:.3f}x the op "
                    f"({r['ms'] * 1e3:.0f} us)", fh)
    summary = {}
    for peer in ("addmm", "linear"):
        rs = [r[f"vs_{peer}"] for r in rows]
        if rs:
            summary[peer] = {"median": statistics.median(rs), "worst": min(rs), "cases": len(rs)}
            log(f"SUMMARY vs {peer}+act: {len(rs)} cases, median {statistics.median(rs):.3f}x, "
                f"worst {min(rs):.3f}x", fh)
    for v in args.variants:
        rs = [r["variants"][v]["vs_op"] for r in rows if v in r.get("variants", {})]
        if rs:
            summary[v] = {"median_vs_op": statistics.median(rs), "worst_vs_op": min(rs),
                          "best_vs_op": max(rs), "cases": len(rs)}
            log(f"SUMMARY {v} vs the op: {len(rs)} cases, median {statistics.median(rs):.3f}x, "
                f"worst {min(rs):.3f}x, best {max(rs):.3f}x", fh)
    with open(os.path.join(args.out, "epilogue.json"), "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "rows": rows, "summary": summary,
                   "failures": failures}, f, indent=1)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
