#!/usr/bin/env python3
"""Build .forensics-bundle/: the three planted hangs of
test/gpu/planted_hangs.py (device watchdog on), the pure-Python runtime and
run_forensics.py, compiled HERE; a small subset of the GPU suite's bundle
(scripts/build-gpu-bundle.py --only forensics_hangs).

    .venv/bin/python scripts/build-forensics-bundle.py [--out .forensics-bundle]

On the GPU host (with .forensics-bundle copied there):

    cd .forensics-bundle && python3 run_forensics.py --out results
"""

import argparse
import importlib.util
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(ROOT, ".forensics-bundle"))
    ap.add_argument("--chip", default="sm_90a")
    args = ap.parse_args(argv)
    spec = importlib.util.spec_from_file_location(
        "build_gpu_bundle", os.path.join(ROOT, "scripts", "build-gpu-bundle.py"))
    gpu_bundle = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpu_bundle)
    rc = gpu_bundle.main(["--out", args.out, "--chip", args.chip, "--only", "forensics_hangs"])
    if rc == 0:
        print(f"run on the GPU host: cd {os.path.relpath(args.out, ROOT)} && "
              "python3 run_forensics.py --out results")
    return rc


if __name__ == "__main__":
    sys.exit(main())
