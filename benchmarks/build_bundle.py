#!/usr/bin/env python3
"""Build .bench-bundle/: the GPU benchmarks, compiled HERE (no MLIR on the GPU).

    .venv/bin/python benchmarks/build_bundle.py [--out .bench-bundle] [--chip sm_90a] [--quick]

Writes kernels/*.cubin (streaming copies per kind x stages x tile, ping-pong
per stages: examples/copy_ring.py and examples/pingpong.py with the
parameters of benchmarks/streaming.py), manifest.json (name, kind, stages, tile, block, smem,
signature, and for ``tma2d`` the tensor map run_bench.py encodes for ``src``),
the pure-Python runtime (pipeline_mlir/__init__.py + pipeline_mlir/runtime/),
run_bench.py, profile_stream.py (one kernel for ncu), cute_streaming.py (CuTe
DSL's streaming sweep, run by run_bench.py when CuTe DSL imports there: see
scripts/build-cute-transport.py) and reference/*.cu (built with nvcc on the GPU
host). Then:

    cd .bench-bundle && python3 run_bench.py --out results
    ncu --set full -k regex:stream_ --launch-skip 1 --launch-count 1 \
        -o results/stream_best python3 profile_stream.py --bench results/bench.json
"""

import argparse
import os
import shutil
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from bundle_common import copy_runtime, write_manifest  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(ROOT, ".bench-bundle"))
    ap.add_argument("--chip", default="sm_90a")
    ap.add_argument("--quick", action="store_true", help="a few configurations only")
    args = ap.parse_args(argv)

    sys.path.insert(0, HERE)
    import streaming

    out = os.path.abspath(args.out)
    if os.path.exists(out):
        shutil.rmtree(out)
    os.makedirs(os.path.join(out, "kernels"))
    os.makedirs(os.path.join(out, "reference"))
    copy_runtime(out)
    for f in ("run_bench.py", "profile_stream.py", "cute_streaming.py"):
        shutil.copy(os.path.join(HERE, f), out)
    for f in ("tma_pipe.cu", "pingpong.cu"):
        shutil.copy(os.path.join(HERE, "reference", f), os.path.join(out, "reference"))

    manifest = {"chip": args.chip, "created": time.strftime("%Y-%m-%d %H:%M:%S"),
                "stream": [], "pingpong": []}
    configs = streaming.stream_configs()
    if args.quick:
        configs = [c for c in configs if c[1] in (1, 4) and c[2] == 16384]
    t_all = time.monotonic()
    for kind, stages, tile in configs:
        k = streaming.build_stream(kind, stages, tile, args.chip)
        t0 = time.monotonic()
        image = k.compile()
        path = f"kernels/{k.name}.{args.chip}.cubin"
        with open(os.path.join(out, path), "wb") as f:
            f.write(image)
        entry = {"name": k.name, "kind": kind, "stages": stages, "tile": tile,
                 "block": streaming.block_threads(kind), "smem": k.smem_bytes,
                 "signature": streaming.signature(kind), "image": path}
        if streaming.tensor_map(kind, tile):
            entry["tensor_map"] = streaming.tensor_map(kind, tile)
        manifest["stream"].append(entry)
        print(f"BUILT {k.name:28s} {len(image):7d} B smem {k.smem_bytes:6d} "
              f"({time.monotonic() - t0:.2f} s)")
    for stages in (1, 2, 4):
        k = streaming.build_pingpong(stages, args.chip)
        image = k.compile()
        path = f"kernels/{k.name}.{args.chip}.cubin"
        with open(os.path.join(out, path), "wb") as f:
            f.write(image)
        manifest["pingpong"].append({"name": k.name, "stages": stages, "block": 64,
                                     "smem": k.smem_bytes, "signature": ["i32", "ptr"],
                                     "image": path})
        print(f"BUILT {k.name:28s} {len(image):7d} B")
    total = write_manifest(out, manifest)
    if total is None:
        return 1
    print(f"{out}: {len(manifest['stream'])} streaming + {len(manifest['pingpong'])} "
          f"ping-pong kernels, {total / 1024:.0f} KiB, {time.monotonic() - t_all:.1f} s")
    print('run on the GPU host: cd .bench-bundle && python3 run_bench.py --out results')
    return 0


if __name__ == "__main__":
    sys.exit(main())
