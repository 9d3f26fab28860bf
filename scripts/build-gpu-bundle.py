#!/usr/bin/env python3
"""Build .gpu-bundle/: everything the GPU suite needs, compiled HERE.

    .venv/bin/python scripts/build-gpu-bundle.py [--out .gpu-bundle] [--chip sm_90a]
                                                 [--mib 64] [--only NAME ...]

Writes the kernels (cubin/PTX), manifest.json (what to launch and check),
the pure-Python runtime (pipeline_mlir/__init__.py, layout.py and runtime/,
no MLIR needed) and the test files. On the GPU host:

    cd .gpu-bundle && python3 -m pytest -q test_gpu.py test_gpu_launch.py test_gpu_rows.py

Kernels come from test/gpu/builders.py; one that cannot be built yet (the
lowering or its builder is missing) is logged and listed under "skipped" in
the manifest, and the suite reports it as a skip with the same reason.
"""

import argparse
import os
import shutil
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bundle_common import ROOT, copy_runtime, fill_gemm_cache, write_manifest  # noqa: E402


def copy_suite(out):
    """The runtime and the GPU tests that run from the bundle."""
    copy_runtime(out)
    for f in ("conftest.py", "test_gpu.py", "test_gpu_launch.py", "test_gpu_ops.py",
              "test_soak.py", "soak.py",
              "gpu_child.py", "pytest.ini", "test_gpu_attention_bwd.py",
              "run_forensics.py", "fragment_reference.py", "ptx_layouts.py",
              "test_gpu_rows.py", "rows_reference.py"):
        shutil.copy(os.path.join(ROOT, "test", "gpu", f), out)
    # The GEMMs' launchers (runtime + torch only).
    # The row kernels' launchers: their modules import MLIR only to build.
    for f in ("hopper_gemm_host.py", "fp8_gemm_host.py", "attention_fwd_host.py",
              "blackwell_gemm_host.py", "row_softmax.py", "rmsnorm.py", "rows_host.py"):
        shutil.copy(os.path.join(ROOT, "examples", f), out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(ROOT, ".gpu-bundle"))
    ap.add_argument("--chip", default="sm_90a")
    ap.add_argument("--mib", type=int, default=64, help="MiB moved by each copy kernel")
    ap.add_argument("--only", nargs="*", help="build only these builders")
    args = ap.parse_args(argv)

    sys.path.insert(0, os.path.join(ROOT, "test", "gpu"))
    import builders

    out = os.path.abspath(args.out)
    if os.path.exists(out):
        shutil.rmtree(out)
    os.makedirs(os.path.join(out, "kernels"))
    copy_suite(out)

    manifest = {"chip": args.chip, "created": time.strftime("%Y-%m-%d %H:%M:%S"),
                "kernels": [], "skipped": []}
    for name, build in builders.builders(args.mib):
        if args.only and name not in args.only:
            continue
        t0 = time.monotonic()
        try:
            built = build(args.chip, args.mib)
        except builders.Unavailable as err:
            reason = str(err).strip().replace("\n", " ")
            print(f"SKIP  {name}: {reason[:300]}")
            manifest["skipped"].append({"name": name, "reason": reason})
            continue
        except Exception as err:  # a broken builder must not hide the others
            traceback.print_exc()
            reason = f"builder raised {type(err).__name__}: {err}"
            print(f"SKIP  {name}: {reason[:300]}")
            manifest["skipped"].append({"name": name, "reason": reason})
            continue
        for b in built:
            e = dict(b.entry)
            e.setdefault("chip", args.chip)
            if hasattr(b.image, "metadata"):  # a CompiledKernel (Kernel.compile())
                e["launch"] = b.image.metadata()
            fname = f"kernels/{e['name']}.{e['chip']}.{b.ext}"
            with open(os.path.join(out, fname), "wb") as f:
                f.write(b.image)
            e["image"] = fname
            manifest["kernels"].append(e)
            print(f"BUILT {e['name']:28s} {e.get('pipeline', ''):26s} {len(b.image):7d} B "
                  f"({time.monotonic() - t0:.1f} s)")
    if args.chip.startswith("sm_90") and not args.only:
        fill_gemm_cache(out, args.chip)   # pipeline_mlir.gemm's variants (test_gpu_launch.py)
    total = write_manifest(out, manifest)
    if total is None:
        return 1
    print(f"{out}: {len(manifest['kernels'])} kernels, {len(manifest['skipped'])} skipped, "
          f"{total / 1024:.0f} KiB")
    print(f"run on the GPU host: cd {os.path.relpath(out, ROOT)} && "
          "python3 -m pytest -q test_gpu.py test_gpu_launch.py test_gpu_rows.py")
    return 0


if __name__ == "__main__":
    sys.exit(main())
