#!/usr/bin/env python3
"""Build .jit-bundle/: a stripped MLIR Python runtime + pipeline_mlir, so
that on the GPU host ONE Python process builds a kernel from Python,
lowers it, assembles it (ptxas there) and launches and checks it ("JIT
there"), instead of compiling here and shipping cubins.

    .venv/bin/python scripts/build-jit-bundle.py [--out .jit-bundle]

Writes .jit-bundle/runtime.tar.xz (the `mlir` package without its static
libraries, headers and tools; `llvm/lib/libLLVM.so`; the installed
`pipeline_mlir` with its native library; all shared objects stripped), the
examples, and jit_run.py. On the GPU host (Python 3.12, torch,
cuda-bindings, ptxas):

    cd .jit-bundle && python3 jit_run.py

Like every bundle it must stay under bundle_common.LIMIT; the script refuses
a larger one.
"""

import argparse
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile

from bundle_common import LIMIT

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# What the Python bindings need at run time; everything else in the wheels
# (static archives, headers, tools, sources: ~1.5 GB) is for building.
MLIR_KEEP = ("__init__.py", "ir.py", "passmanager.py", "rewrite.py", "dialects",
             "extras", "runtime", "_mlir_libs")
EXAMPLES = ("hopper_gemm.py", "hopper_gemm_host.py", "_common.py")


def _copy_tree(src, dst):
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__", "*.a", "include",
                                                           "*.pyi"))


def _strip(tree):
    for d, _, files in os.walk(tree):
        for f in files:
            if ".so" in f:
                subprocess.run(["strip", "--strip-unneeded", os.path.join(d, f)], check=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(ROOT, ".jit-bundle"))
    args = ap.parse_args(argv)
    site = sysconfig.get_paths()["purelib"]
    out = os.path.abspath(args.out)
    if os.path.exists(out):
        shutil.rmtree(out)
    os.makedirs(out)
    with tempfile.TemporaryDirectory() as tmp:
        stage = os.path.join(tmp, "site")
        os.makedirs(os.path.join(stage, "mlir"))
        for name in MLIR_KEEP:
            src = os.path.join(site, "mlir", name)
            if os.path.isdir(src):
                _copy_tree(src, os.path.join(stage, "mlir", name))
            elif os.path.exists(src):
                shutil.copy(src, os.path.join(stage, "mlir", name))
        os.makedirs(os.path.join(stage, "llvm", "lib"))
        shutil.copy(os.path.join(site, "llvm", "lib", "libLLVM.so"),
                    os.path.join(stage, "llvm", "lib"))
        _copy_tree(os.path.join(site, "pipeline_mlir"), os.path.join(stage, "pipeline_mlir"))
        _strip(stage)
        tar = os.path.join(out, "runtime.tar.xz")
        with tarfile.open(tar, "w:xz", preset=9) as t:
            t.add(stage, arcname="site")
    for f in EXAMPLES:
        shutil.copy(os.path.join(ROOT, "examples", f), out)
    shutil.copy(os.path.join(ROOT, "scripts", "jit_run.py"), out)
    total = sum(os.path.getsize(os.path.join(out, f)) for f in os.listdir(out))
    print(f"{out}: {total / 2**20:.1f} MiB (runtime.tar.xz "
          f"{os.path.getsize(os.path.join(out, 'runtime.tar.xz')) / 2**20:.1f} MiB)")
    if total > LIMIT:
        print(f"error: over the {LIMIT >> 20} MiB bundle size cap")
        return 1
    print('run on the GPU host: cd .jit-bundle && python3 jit_run.py')
    return 0


if __name__ == "__main__":
    sys.exit(main())
