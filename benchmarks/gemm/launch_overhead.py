#!/usr/bin/env python3
"""Host time per asynchronous call: a 256^3 fp16 GEMM launched 300 times back
to back, ours next to torch.matmul (cuBLAS) and a CuTe DSL compiled callable,
in one process, in alternating rounds.

    python3 launch_overhead.py --out DIR [--calls 300] [--rounds 9]

Contenders (each output checked against torch.matmul first):
  ours gemm(out=)     pipeline_mlir.gemm(a, b, out=c)
  ours gemm()         pipeline_mlir.gemm(a, b) (allocates C, as torch.matmul does)
  ours CompiledKernel the GEMM's CompiledKernel called directly, TmaDescriptor
                      arguments (the generic fast path of ``fn(..., sync=False)``:
                      untimed, a prepared launch)
  ours CompiledKernel timed
                      the same with ``timed=True`` (CUDA events around each
                      launch, for ``elapsed_ms``)
  torch.matmul        torch.matmul(a, b.T)
  cute callable       when ``import cutlass`` works: CuTe DSL's compiled callable
                      of benchmarks/cute_streaming.py's copy kernel (pointer and
                      Int32 arguments, as its own benchmark calls it); this tree
                      has no CuTe DSL GEMM driver, so its host cost stands for
                      CuTe's callable path, not for its GEMM
Per round, per contender: synchronize, then ``--calls`` calls timed with
perf_counter (host time only; the GPU runs behind), then synchronize. The
result is the median over rounds of the time per call, in microseconds.
Writes DIR/launch_overhead.json and prints one RESULT line per contender.
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


def cute_contender(log):
    """(name, fn) of a CuTe DSL compiled callable, or None with the reason logged."""
    try:
        import cutlass
        import cutlass.cute as cute
        import cuda.bindings.driver as cuda
        import torch
        from cutlass.cute.runtime import make_ptr

        import cute_streaming
    except Exception as err:  # no CuTe DSL on this machine
        log(f"cute callable: skipped ({type(err).__name__}: {err})")
        return None
    rows, cols, stages = 16, 256, 2
    ntiles = 64
    src = torch.randint(-2**31, 2**31 - 1, (ntiles * rows * cols,), dtype=torch.int32,
                        device="cuda")
    dst = torch.empty_like(src)
    stream = cuda.CUstream(int(torch.cuda.current_stream().cuda_stream))
    p_src = make_ptr(cutlass.Int32, src.data_ptr(), cute.AddressSpace.gmem, assumed_align=16)
    p_dst = make_ptr(cutlass.Int32, dst.data_ptr(), cute.AddressSpace.gmem, assumed_align=16)
    compiled = cute_streaming.compile_one(stages, rows, cols, src.data_ptr(), dst.data_ptr(),
                                          ntiles, 8, stream)

    def call():
        compiled(p_src, p_dst, cutlass.Int32(ntiles), cutlass.Int32(8), stream)

    call()
    torch.cuda.synchronize()
    if not torch.equal(src, dst):
        raise AssertionError("cute callable: the copy is wrong")
    return call


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=".")
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--size", type=int, default=256)
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    if os.path.isdir(os.path.join(HERE, "gemm-cache")):
        os.environ.setdefault("PIPELINE_MLIR_CACHE_DIR", os.path.join(HERE, "gemm-cache"))
    fh = open(os.path.join(args.out, "launch_overhead.log"), "w")

    def log(msg):
        print(msg, flush=True)
        fh.write(msg + "\n")

    import torch

    import pipeline_mlir
    from pipeline_mlir.ops import gemm as ops_gemm
    from pipeline_mlir.ops.hopper_gemm_host import REL_ERROR_BOUND

    s = args.size
    torch.manual_seed(0)
    a = torch.randn(s, s, device="cuda", dtype=torch.float16)
    b = torch.randn(s, s, device="cuda", dtype=torch.float16)
    c = torch.empty(s, s, device="cuda", dtype=torch.float16)
    want = torch.matmul(a.float(), b.float().T)

    g = ops_gemm._select(a, b)                  # the variant gemm() runs at this shape
    m, n, k, grid = g._plan(a, b, c)
    da, db, dc = g.descriptors(a, b, c)
    fn = g.compiled

    fns = {
        "ours gemm(out=)": lambda: pipeline_mlir.gemm(a, b, out=c),
        "ours gemm()": lambda: pipeline_mlir.gemm(a, b),
        "ours CompiledKernel": lambda: fn(da, db, dc, c, m, n, k, grid=grid, sync=False),
        "ours CompiledKernel timed": lambda: fn(da, db, dc, c, m, n, k, grid=grid, sync=False,
                                                timed=True),
        "torch.matmul": lambda: torch.matmul(a, b.T),
    }
    cute = cute_contender(log)
    if cute is not None:
        fns["cute callable"] = cute
    failures = 0
    for name in ("ours gemm(out=)", "ours gemm()", "ours CompiledKernel",
                 "ours CompiledKernel timed", "torch.matmul"):
        c.fill_(float("nan"))
        out = fns[name]()
        out = c if out is None or not torch.is_tensor(out) else out
        torch.cuda.synchronize()
        err = ((out.float() - want).abs() / (want.abs() + k ** 0.5)).max().item()
        ok = err <= REL_ERROR_BOUND["f16"]
        failures += not ok
        log(f"CHECK {name}: max rel err {err:.3g} {'ok' if ok else 'FAILED'}")
    times = {name: [] for name in fns}
    for fn_ in fns.values():                  # warm-up: every path taken once more
        host_us(fn_, 10)
    for _ in range(args.rounds):
        for name, fn_ in fns.items():
            times[name].append(host_us(fn_, args.calls))
    result = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
              "shape": [s, s, s], "dtype": "f16", "calls": args.calls, "rounds": args.rounds,
              "variant": ops_gemm.chosen(a, b), "failures": failures, "us_per_call": {}}
    for name, t in times.items():
        med = statistics.median(t)
        result["us_per_call"][name] = med
        log(f"RESULT {name:26s} {med:7.2f} us per call (min {min(t):.2f}, max {max(t):.2f})")
    log(f"device {result['device']}, variant {result['variant']}, {args.calls} calls x "
        f"{args.rounds} rounds; failures {failures}")
    json.dump(result, open(os.path.join(args.out, "launch_overhead.json"), "w"), indent=1)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
