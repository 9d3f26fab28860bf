#!/usr/bin/env python3
"""Build the attention-backward bundle: the forward and backward kernels of
``pipeline_mlir.attention`` compiled HERE (where MLIR is installed) into a
kernel cache, with the pure-Python runtime, the backward benchmark and the
GPU tests of the backward, for a GPU host that has only torch and
cuda-bindings.

    .venv/bin/python benchmarks/attention/build_bwd_bundle.py [--out DIR]

Then, on the GPU host: ``cd DIR && python3 -m pytest -q test_gpu_attention_bwd.py
test_attention_autograd_trace.py``
and ``python3 run_attention_bwd.py --out results``.
"""

import argparse
import importlib.util
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path[:0] = [os.path.join(ROOT, "scripts")]
from bundle_common import new_bundle, write_manifest  # noqa: E402

GPU_TESTS = ("test_gpu_attention_bwd.py", "conftest.py", "gpu_child.py", "pytest.ini")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(ROOT, ".attention-bwd-bundle"))
    ap.add_argument("--chip", default="sm_90a")
    args = ap.parse_args(argv)

    out = new_bundle(args.out)
    for f in ("run_attention_bwd.py", "timing.py", "profile_bwd_pair.py",
              "time_dq_postprocess.py", "time_bwd_parts.py",
              "ncu_bwd_d128.sh"):
        shutil.copy(os.path.join(HERE, f), out)
    for f in GPU_TESTS:
        shutil.copy(os.path.join(ROOT, "test", "gpu", f), out)
    # The tracing test needs torch, not MLIR: it runs where torch is.
    shutil.copy(os.path.join(ROOT, "test", "python", "test_attention_autograd_trace.py"), out)
    spec = importlib.util.spec_from_file_location(
        "build_gemm_cache", os.path.join(ROOT, "scripts", "build-gemm-cache.py"))
    cache = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cache)
    if cache.main(["--all", "--kernel", "attention_fwd", "attention_bwd", "--chip", args.chip,
                   "--dir", os.path.join(out, "gemm-cache")]):
        return 1
    total = write_manifest(out, {"chip": args.chip, "kernels": [], "skipped": []})
    if total is None:
        return 1
    print(f"{out}: {total / 1024:.0f} KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
