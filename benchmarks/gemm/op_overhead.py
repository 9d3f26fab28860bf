#!/usr/bin/env python3
"""The op's own cost on short calls: ``pipeline_mlir.gemm(a, b, out=c)``
against the same loaded kernel launched directly (random_sweep.py's
candidate path, ``g.launch(a, b, c, (), None, False)``), and cuBLAS.

    python3 op_overhead.py --out DIR [--rounds 9] [--calls 200] MxNxK ...

Per shape and dtype, in one process on the same ``torch.randn`` inputs:
both outputs checked against an fp32 reference and bitwise against each
other and a second call; then

- host time per asynchronous call (perf_counter around ``--calls`` calls,
  the GPU behind; median of the rounds, the two paths alternating);
- GPU time per call as random_sweep.py measures it (CUDA events around 10
  back-to-back calls, after a synchronize: the first call's host time is
  in it), in alternating rounds with cuBLAS, once with the op right after
  cuBLAS (random_sweep.py's order) and once with the direct launch there;
- the same around 50 calls (the first call's share a fifth as large).

One RESULT line per shape and dtype; writes DIR/op_overhead.json and .log.
"""

import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def host_us(fn, calls):
    import torch

    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) / calls * 1e6


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=".")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--dtype", nargs="+", default=["bf16", "f16"], choices=["bf16", "f16"])
    ap.add_argument("shapes", nargs="+", help="MxNxK")
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    if os.path.isdir(os.path.join(HERE, "gemm-cache")):
        os.environ.setdefault("PIPELINE_MLIR_CACHE_DIR", os.path.join(HERE, "gemm-cache"))
    import torch

    import pipeline_mlir
    from pipeline_mlir.ops import gemm as ops_gemm
    from pipeline_mlir.ops.hopper_gemm_host import REL_ERROR_BOUND
    from run_gemm import bench_interleaved, rel_err

    fh = open(os.path.join(args.out, "op_overhead.log"), "w")

    def log(msg):
        print(msg, flush=True)
        fh.write(msg + "\n")
        fh.flush()

    log(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    rows, bad = [], 0
    for dtype in args.dtype:
        dt = {"bf16": torch.bfloat16, "f16": torch.float16}[dtype]
        for shape in args.shapes:
            m, n, k = map(int, shape.split("x"))
            torch.manual_seed(0)
            a = torch.randn(m, k, device="cuda", dtype=dt)
            b = torch.randn(n, k, device="cuda", dtype=dt)
            c_op = torch.empty(m, n, device="cuda", dtype=dt)
            c_direct = torch.empty(m, n, device="cuda", dtype=dt)
            theirs = torch.empty(m, n, device="cuda", dtype=dt)
            pipeline_mlir.gemm(a, b, out=c_op)
            variant = ops_gemm.chosen(a, b)
            g = ops_gemm.variant_gemm(variant, dtype)
            g.launch(a, b, c_direct, (), None, False)
            again = pipeline_mlir.gemm(a, b)
            ref = torch.matmul(a.float(), b.float().T)
            err = rel_err(c_op, ref, k)
            del ref
            ok = (err <= REL_ERROR_BOUND[dtype] and bool(torch.equal(c_op, c_direct))
                  and bool(torch.equal(c_op, again)))
            bad += not ok
            op = lambda: pipeline_mlir.gemm(a, b, out=c_op)              # noqa: E731
            direct = lambda: g.launch(a, b, c_direct, (), None, False)   # noqa: E731
            cublas = lambda: torch.matmul(a, b.T, out=theirs)            # noqa: E731
            host = {"op": [], "direct": [], "cublas": []}
            for _ in range(args.rounds):
                for name, fn in (("op", op), ("direct", direct), ("cublas", cublas)):
                    host[name].append(host_us(fn, args.calls))
            host = {x: statistics.median(t) for x, t in host.items()}
            op_first, _ = bench_interleaved({"cublas": cublas, "op": op, "direct": direct},
                                            rounds=args.rounds)
            direct_first, _ = bench_interleaved({"cublas": cublas, "direct": direct, "op": op},
                                                rounds=args.rounds)
            long, _ = bench_interleaved({"cublas": cublas, "op": op, "direct": direct},
                                        rounds=args.rounds, iters=50)
            row = {"m": m, "n": n, "k": k, "dtype": dtype, "variant": variant, "err": err,
                   "ok": ok, "host_us": host,
                   "gpu_us_op_first": {x: v * 1e3 for x, v in op_first.items()},
                   "gpu_us_direct_first": {x: v * 1e3 for x, v in direct_first.items()},
                   "gpu_us_50": {x: v * 1e3 for x, v in long.items()}}
            rows.append(row)
            f = row["gpu_us_op_first"]
            d = row["gpu_us_direct_first"]
            q = row["gpu_us_50"]
            log(f"RESULT {dtype} {shape} {variant}: host us/call op {host['op']:.2f} direct "
                f"{host['direct']:.2f} cuBLAS {host['cublas']:.2f} | 10 calls, op after cuBLAS: "
                f"op {f['op']:.2f} direct {f['direct']:.2f} cuBLAS {f['cublas']:.2f} | direct "
                f"after cuBLAS: op {d['op']:.2f} direct {d['direct']:.2f} cuBLAS "
                f"{d['cublas']:.2f} | 50 calls: op {q['op']:.2f} direct {q['direct']:.2f} "
                f"cuBLAS {q['cublas']:.2f} us | err {err:.2g}{'' if ok else ' FAIL'}")
            del a, b, c_op, c_direct, theirs, again
    with open(os.path.join(args.out, "op_overhead.json"), "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
