#!/usr/bin/env python3
"""Launch one GEMM variant of the bundle once, for a profiler (ncu):

    ncu --section SpeedOfLight --section WarpStateStats python3 profile_one.py STEP [M N K]
    ncu -k regex:gemm --section SpeedOfLight python3 profile_one.py --variant NAME [M N K]

STEP is a variant's step name in manifest.json (bf16). ``--variant NAME``
launches a ``pipeline_mlir.gemm`` table variant from the bundle's
gemm-cache instead (``gemm_configs`` names; a stream-K one with ``@spread``
or ``@leftover`` runs that launch, as random_sweep.py's candidates do),
after one warm-up call, then cuBLAS once."""

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def main():
    import torch

    args = sys.argv[1:]
    table = args[0] == "--variant"
    if table:
        args = args[1:]
    step = args[0]
    m, n, k = (int(x) for x in args[1:4]) if len(args) >= 4 else (8192, 8192, 8192)
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    if table:
        if os.path.isdir(os.path.join(HERE, "gemm-cache")):
            os.environ.setdefault("PIPELINE_MLIR_CACHE_DIR", os.path.join(HERE, "gemm-cache"))
        from pipeline_mlir.ops import gemm as ops_gemm
        from random_sweep import candidate

        g = candidate(ops_gemm, step, "bf16")
        g.launch(a, b, c, (), None, False)
        torch.cuda.synchronize()
        g.launch(a, b, c, (), None, False)
        name = g.meta["name"]
    else:
        from hopper_gemm_host import HopperGemm

        manifest = json.load(open(os.path.join(HERE, "manifest.json")))
        v = next(v for v in manifest["variants"] if v["step"] == step and v["dtype"] == "bf16")
        g = HopperGemm(open(os.path.join(HERE, v["image"]), "rb").read(), v,
                       persistent=v["persistent"])
        g(a, b, c, sync=True)
        name = v["name"]
    torch.matmul(a, b.T)
    torch.cuda.synchronize()
    print(f"{name}: launched at {m}x{n}x{k}")


if __name__ == "__main__":
    main()
