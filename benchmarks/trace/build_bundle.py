#!/usr/bin/env python3
"""Build .trace-bundle/: the streaming TmaAsync copy (examples/copy_ring.py with
the parameters of benchmarks/streaming.py) and the Hopper GEMM
(examples/hopper_gemm.py), each compiled plain and with
``pipeline_mlir.trace.instrument``, for run_trace.py on the GPU host:

    .venv/bin/python benchmarks/trace/build_bundle.py
    (GPU) cd .trace-bundle && python3 run_trace.py --out results
"""

import json
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path[:0] = [os.path.join(ROOT, "scripts"), os.path.join(ROOT, "examples"),
                os.path.join(ROOT, "benchmarks")]
from bundle_common import copy_runtime, write_manifest  # noqa: E402

STREAM = ("tma", 4, 16384)      # kind, stages, tile bytes


def main():
    import hopper_gemm
    import hopper_gemm_host
    import streaming

    from pipeline_mlir import compiler, trace

    out = os.path.join(ROOT, ".trace-bundle")
    if os.path.exists(out):
        shutil.rmtree(out)
    os.makedirs(os.path.join(out, "kernels"))
    copy_runtime(out)
    shutil.copy(os.path.join(HERE, "run_trace.py"), out)
    shutil.copy(os.path.join(ROOT, "examples", "hopper_gemm_host.py"), out)
    manifest = {"kernels": []}
    stream = streaming.build_stream(*STREAM)
    cfg = hopper_gemm.GemmConfig()
    gemm = hopper_gemm.build(cfg)
    for what, k, extra in (("stream", stream, {"tile": STREAM[2],
                                               "block": streaming.block_threads(STREAM[0])}),
                           ("gemm", gemm, {"gemm": hopper_gemm_host.meta_of(cfg, gemm)})):
        traced, names = trace.instrument(k.module)
        for mode, module in (("plain", k.module), ("traced", traced)):
            path = f"kernels/{k.name}.{mode}.cubin"
            with open(os.path.join(out, path), "wb") as f:
                f.write(compiler.to_cubin(module, chip="sm_90a"))
            manifest["kernels"].append({"what": what, "mode": mode, "name": k.name,
                                        "image": path, "smem": k.smem_bytes,
                                        "names": names, **extra})
            print(f"BUILT {what} {mode} {k.name}")
    total = write_manifest(out, manifest)
    print(f"{out}: {total / 1024:.0f} KiB" if total else "too large")
    return 0 if total else 1


if __name__ == "__main__":
    sys.exit(main())
