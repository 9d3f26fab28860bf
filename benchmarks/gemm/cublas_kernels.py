#!/usr/bin/env python3
"""Which kernels cuBLAS runs for ``torch.matmul(a, b.T)`` on given shapes, in
bf16 and fp16 (the kernel names, which carry cuBLAS's tile, stages and
cluster: ``nvjet_sm90_tst_192x192_64x4_2x1_v_bz_coopB_TNN`` is a 192x192
tile, K blocks of 64 in 4 stages, a 2x1 cluster), and each launch's GPU
time, from torch.profiler:

    python3 cublas_kernels.py [--dtype bf16 f16] MxNxK ...

One line per shape, dtype and kernel: ``KERNEL dtype MxNxK name calls
us-per-call``. cuBLAS's M is our N (it computes C^T column-major), so its
tile ``AxB`` is A columns of C by B rows of C.
"""

import argparse


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("shapes", nargs="+", metavar="MxNxK")
    ap.add_argument("--dtype", nargs="+", default=["bf16", "f16"], choices=["bf16", "f16"])
    ap.add_argument("--calls", type=int, default=5)
    args = ap.parse_args(argv)

    import torch
    from torch.profiler import ProfilerActivity, profile

    for dtype in args.dtype:
        dt = {"bf16": torch.bfloat16, "f16": torch.float16}[dtype]
        for shape in args.shapes:
            m, n, k = map(int, shape.split("x"))
            a = torch.randn(m, k, device="cuda", dtype=dt)
            b = torch.randn(n, k, device="cuda", dtype=dt)
            c = torch.empty(m, n, device="cuda", dtype=dt)
            torch.matmul(a, b.T, out=c)          # cuBLAS's heuristic and workspace
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(args.calls):
                    torch.matmul(a, b.T, out=c)
                torch.cuda.synchronize()
            for ev in prof.key_averages():
                if ev.device_type.name != "CUDA" or ev.count == 0:
                    continue
                us = getattr(ev, "device_time_total", getattr(ev, "cuda_time_total", 0))
                print(f"KERNEL {dtype} {shape} {ev.key} {ev.count} {us / ev.count:.1f}",
                      flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
