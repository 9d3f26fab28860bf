"""What every "compile here, run there" bundle shares (the GPU suite's
scripts/build-gpu-bundle.py and benchmarks/build_bundle.py): a copy of the
pure-Python runtime, which needs no MLIR on the GPU host, and the
manifest, and a size cap: a bundle is copied to the GPU host for every run,
so one over the cap has almost always picked up a file it should not."""

import json
import os
import shutil

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIMIT = 60 << 20  # the bundle size cap (bytes); the GPU suite's is ~150 KiB


def copy_runtime(out):
    """pipeline_mlir/__init__.py, layout.py (operand layouts, for the host
    launchers' tensor maps) and pipeline_mlir/runtime/*.py into `out`."""
    src = os.path.join(ROOT, "python", "pipeline_mlir")
    dst = os.path.join(out, "pipeline_mlir")
    os.makedirs(os.path.join(dst, "runtime"))
    for f in ("__init__.py", "layout.py"):
        shutil.copy(os.path.join(src, f), dst)
    for f in sorted(os.listdir(os.path.join(src, "runtime"))):
        if f.endswith(".py"):
            shutil.copy(os.path.join(src, "runtime", f), os.path.join(dst, "runtime"))


def write_manifest(out, manifest):
    """Write manifest.json; return the bundle's total size in bytes, or
    None (after printing why) when it is over the size cap."""
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    total = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(out) for f in fs)
    if total > LIMIT:
        print(f"error: the bundle is {total} bytes, over the {LIMIT}-byte bundle size cap")
        return None
    return total
