#!/usr/bin/env python3
"""Launch one GEMM variant of the bundle once, for a profiler (ncu):

    ncu --section SpeedOfLight --section WarpStateStats python3 profile_one.py STEP [M N K]

STEP is a variant's step name in manifest.json (bf16)."""

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def main():
    import torch
    from hopper_gemm_host import HopperGemm

    step = sys.argv[1]
    m, n, k = (int(x) for x in sys.argv[2:5]) if len(sys.argv) >= 5 else (8192, 8192, 8192)
    manifest = json.load(open(os.path.join(HERE, "manifest.json")))
    v = next(v for v in manifest["variants"] if v["step"] == step and v["dtype"] == "bf16")
    g = HopperGemm(open(os.path.join(HERE, v["image"]), "rb").read(), v,
                   persistent=v["persistent"])
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    g(a, b, c, sync=True)
    torch.matmul(a, b.T)
    torch.cuda.synchronize()
    print(f"{v['name']}: launched once at {m}x{n}x{k}")


if __name__ == "__main__":
    main()
