#!/usr/bin/env python3
"""Our pick, some candidates and cuBLAS launched once each per shape, for
one Nsight Compute run over all of them (only those launches are profiled):

    ncu --profile-from-start off --section SpeedOfLight --section LaunchStats \\
        --section Occupancy --section WarpStateStats \\
        python3 profile_pair.py MxNxK ... [--dtype bf16] [--variants NAME ...]

(the shapes first: ``--variants`` takes every name after it).

Per shape, after two untimed calls of each (the stream-K workspace and
counters made, the modules loaded): the profiler on, then one call of the
pick (``pipeline_mlir.gemm``), of each ``--variants`` candidate
(random_sweep.py's names) and of cuBLAS (``torch.matmul(a, b.T, out=)``;
one kernel, or more where it splits K), in that order, then off. Each
output is checked against fp32 (hopper_gemm_host.REL_ERROR_BOUND). One
``PROFILED`` line per shape names the launches in order, so the report's
kernels can be matched to them."""

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def main(argv=None):
    if os.path.isdir(os.path.join(HERE, "gemm-cache")):
        os.environ.setdefault("PIPELINE_MLIR_CACHE_DIR", os.path.join(HERE, "gemm-cache"))
    ap = argparse.ArgumentParser()
    ap.add_argument("shapes", nargs="+")
    ap.add_argument("--variants", nargs="*", default=[])
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "f16"])
    args = ap.parse_args(argv)

    import torch

    import pipeline_mlir
    from pipeline_mlir.ops import gemm as ops_gemm
    from pipeline_mlir.ops.hopper_gemm_host import REL_ERROR_BOUND
    from random_sweep import candidate
    from run_gemm import rel_err

    dt = {"bf16": torch.bfloat16, "f16": torch.float16}[args.dtype]
    bad = 0
    for shape in args.shapes:
        m, n, k = (int(x) for x in shape.split("x"))
        torch.manual_seed(0)
        a = torch.randn(m, k, device="cuda", dtype=dt)
        b = torch.randn(n, k, device="cuda", dtype=dt)
        fns = {f"pick {ops_gemm.chosen(a, b)}": (lambda c: pipeline_mlir.gemm(a, b, out=c))}
        for v in args.variants:
            g = candidate(ops_gemm, v, args.dtype)
            fns[v] = (lambda c, g=g: g.launch(a, b, c, (), None, False))
        fns["cuBLAS"] = lambda c: torch.matmul(a, b.T, out=c)
        outs = {name: torch.empty(m, n, device="cuda", dtype=dt) for name in fns}
        for name, fn in fns.items():
            fn(outs[name])
            fn(outs[name])
        torch.cuda.synchronize()
        torch.cuda.profiler.start()
        for name, fn in fns.items():
            fn(outs[name])
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()
        ref = torch.matmul(a.float(), b.float().T)
        errs = {name: rel_err(c, ref, k) for name, c in outs.items()}
        bad += sum(e > REL_ERROR_BOUND[args.dtype] for e in errs.values())
        print(f"PROFILED {args.dtype} {shape}: " + ", ".join(
            f"{name} (err {e:.2g})" for name, e in errs.items()), flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
