#!/usr/bin/env python3
"""The kernels alone: per shape and dtype, the pick (``pipeline_mlir.gemm``),
each ``--variants`` candidate (random_sweep.py's names, ``@spread`` /
``@leftover`` included) and cuBLAS (``torch.matmul``), each timed as
host_vs_gpu.py does (host time over 200 asynchronous calls, CUDA events
over them, a CUDA graph of 20 calls replayed), in ``--rounds`` alternating
rounds (the median printed). Every output is checked against fp32
(hopper_gemm_host.REL_ERROR_BOUND) and against a second call bit for bit.

    python3 streamk_graph.py --variants 128x128_streamk_share 224x168x14872
"""

import argparse
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def main(argv=None):
    if os.path.isdir(os.path.join(HERE, "gemm-cache")):
        os.environ.setdefault("PIPELINE_MLIR_CACHE_DIR", os.path.join(HERE, "gemm-cache"))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("shapes", nargs="+")
    ap.add_argument("--variants", nargs="*", default=[])
    ap.add_argument("--dtype", nargs="+", default=["bf16", "f16"], choices=["bf16", "f16"])
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    import torch

    import pipeline_mlir
    from host_vs_gpu import measure
    from pipeline_mlir.ops import gemm as ops_gemm
    from pipeline_mlir.ops.hopper_gemm_host import REL_ERROR_BOUND
    from random_sweep import candidate
    from run_gemm import rel_err

    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}", flush=True)
    for dtype in args.dtype:
        dt = {"bf16": torch.bfloat16, "f16": torch.float16}[dtype]
        for shape in args.shapes:
            m, n, k = map(int, shape.split("x"))
            torch.manual_seed(0)
            a = torch.randn(m, k, device="cuda", dtype=dt)
            b = torch.randn(n, k, device="cuda", dtype=dt)
            ref = torch.matmul(a.float(), b.float().T)
            pick = ops_gemm.chosen(a, b)
            fns = {}
            outs = {}
            for name in ["pick"] + [v for v in args.variants if v != pick]:
                out = torch.empty(m, n, device="cuda", dtype=dt)
                if name == "pick":
                    pipeline_mlir.gemm(a, b, out=out)
                    again = pipeline_mlir.gemm(a, b)
                    fns[name] = lambda o=out: pipeline_mlir.gemm(a, b, out=o)
                else:
                    g = candidate(ops_gemm, name, dtype)
                    g.launch(a, b, out, (), None, False)
                    again = g.launch(a, b, None, (), None, False)
                    fns[name] = lambda g=g, o=out: g.launch(a, b, o, (), None, False)
                err = rel_err(out, ref, k)
                outs[name] = (err, err <= REL_ERROR_BOUND[dtype], bool(torch.equal(out, again)))
            theirs = torch.empty(m, n, device="cuda", dtype=dt)
            fns["cublas"] = lambda: torch.matmul(a, b.T, out=theirs)
            times = {name: [] for name in fns}
            for _ in range(args.rounds):
                for name, fn in fns.items():
                    times[name].append(measure(fn))
            graph_cublas = statistics.median(t[2] for t in times["cublas"])
            for name, ts in times.items():
                host, events, graph = (statistics.median(t[i] for t in ts) for i in range(3))
                label = f"{name} ({pick})" if name == "pick" else name
                check = "" if name == "cublas" else \
                    " err {:.2e} ok {} bitwise_repeat {}".format(*outs[name])
                print(f"{dtype} {shape} {label}: host {host:.1f} events {events:.1f} "
                      f"graph {graph:.1f} us/call, graph ratio {graph_cublas / graph:.3f}x"
                      f"{check}", flush=True)


if __name__ == "__main__":
    main()
