#!/usr/bin/env python3
"""Host time against GPU time per call, ours (``pipeline_mlir.gemm``) and
cuBLAS (``torch.matmul``), fp16, at each shape: perf_counter over 200
asynchronous calls (the host's share), CUDA events over the same calls
(what random_sweep.py measures), and a CUDA graph of 20 calls replayed
(the kernels alone). Where the events time is the host's, the sweep's
ratio says nothing of the kernels.

    python3 host_vs_gpu.py 224x168x14872 1496x456x9000 4544x1008x7784
"""

import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def measure(fn, n=200):
    import torch

    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(n):
        fn()
    host = (time.perf_counter() - t) / n * 1e6
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(n):
        fn()
    e.record()
    e.synchronize()
    events = s.elapsed_time(e) / n * 1e3
    g, st = torch.cuda.CUDAGraph(), torch.cuda.Stream()
    with torch.cuda.stream(st):
        fn()
        torch.cuda.synchronize()
        with torch.cuda.graph(g, stream=st):
            for _ in range(20):
                fn()
    torch.cuda.synchronize()
    s.record()
    for _ in range(10):
        g.replay()
    e.record()
    e.synchronize()
    return host, events, s.elapsed_time(e) / 200 * 1e3


def main(argv=None):
    if os.path.isdir(os.path.join(HERE, "gemm-cache")):
        os.environ.setdefault("PIPELINE_MLIR_CACHE_DIR", os.path.join(HERE, "gemm-cache"))
    import torch

    import pipeline_mlir

    for shape in (sys.argv[1:] if argv is None else argv):
        m, n, k = map(int, shape.split("x"))
        a = torch.randn(m, k, device="cuda", dtype=torch.float16)
        b = torch.randn(n, k, device="cuda", dtype=torch.float16)
        c = torch.empty(m, n, device="cuda", dtype=torch.float16)
        for name, fn in (("ours", lambda: pipeline_mlir.gemm(a, b, out=c)),
                         ("cublas", lambda: torch.matmul(a, b.T))):
            host, events, graph = measure(fn)
            print(f"f16 {shape} {name}: host {host:.1f} us/call, events {events:.1f} us/call, "
                  f"graph {graph:.1f} us/call", flush=True)


if __name__ == "__main__":
    main()
