#!/usr/bin/env python3
"""Pack the attention benchmark's peers for a GPU host without a package index.

    python3 scripts/build-attention-transport.py [--whl DIR] [--out DIR]

FlashAttention-4's CuTe DSL forward (benchmarks/attention/run_attention.py)
needs, besides CuTe DSL itself (``nvidia-cutlass-dsl==4.8.1``, packed by
scripts/build-cute-transport.py) and torch, the wheels in ``PEERS``. This
script puts them in the git-ignored ``.attention-peers/`` of the repo root
(one folder, a few MB, well under the 64 MiB a copy may hold), with
``SHA256SUMS`` and ``.attention-peers/install.sh``. ``--whl`` is a folder that already holds
the wheels (CPython 3.12, manylinux x86_64); without it they are fetched
with ``pip download``. Before writing anything it checks that every wheel's
requirements are met by the peers, by CuTe DSL 4.8.1 and by what the GPU host
has (torch, typing_extensions), so that ``--no-deps`` installs are complete.

On the GPU host, from the repo root, after CuTe DSL's .cute-part2/install.sh:

    sh .attention-peers/install.sh /tmp/site          # SITE defaults to /tmp/site
    PYTHONPATH=/tmp/site python3 -c "import flash_attn.cute.interface"
"""

import argparse
import glob
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT_NAME = ".attention-peers"
# distribution -> pinned version (None: the newest py3 wheel)
PEERS = {
    "flash-attn-4": "4.0.0b36",
    "quack-kernels": "0.6.5",
    "apache-tvm-ffi": "0.1.15.post2",
    "torch-c-dlpack-ext": "0.1.5",
    "einops": None,
}
# What the GPU host has besides the peers: CuTe DSL from its own transport,
# torch and typing_extensions (CuTe DSL's transport ships the latter).
PROVIDED = {"nvidia-cutlass-dsl": "4.8.1", "torch": None, "typing-extensions": None}
CARRY_MAX = 64 * 2**20
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux2014_x86_64")

INSTALL_SH = r"""#!/bin/sh
# Installs the attention benchmark's peers (FlashAttention-4 __FA4__ and its
# dependencies) from this folder into a --target folder, no network:
#     sh .attention-peers/install.sh [SITE]      (SITE defaults to /tmp/site)
# Install CuTe DSL into the same SITE first (.cute-part2/install.sh SITE).
# PYTHON overrides the interpreter (CPython 3.12, x86_64).
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
SITE=${1:-/tmp/site}
PY=${PYTHON:-python3}
"$PY" - "$HERE" <<'EOF'
import hashlib, os, sys
here = sys.argv[1]
bad = []
for line in open(os.path.join(here, "SHA256SUMS")):
    digest, name = line.split()
    with open(os.path.join(here, name), "rb") as f:
        if hashlib.sha256(f.read()).hexdigest() != digest:
            bad.append(name)
if bad:
    sys.exit(f"install.sh: checksum mismatch (stale or truncated copy): {bad}")
EOF
mkdir -p "$SITE"
"$PY" -m pip install -q --no-index --no-deps --no-compile --upgrade --target "$SITE" "$HERE"/*.whl
PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}" "$PY" -c "import flash_attn.cute.interface as i; print('FlashAttention-4 CuTe DSL interface from', i.__file__)" \
  || echo "install.sh: the wheels are in $SITE, but flash_attn.cute.interface does not import (is CuTe DSL installed there, and torch?)" >&2
"""


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def normalize(name):
    return name.lower().replace("_", "-").replace(".", "-")


def wheel_metadata(path):
    """(name, version, [Requires-Dist]) of a wheel."""
    with zipfile.ZipFile(path) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        text = z.read(meta).decode()
    fields = {"Name": None, "Version": None}
    requires = []
    for line in text.splitlines():
        if not line.strip():
            break  # headers end at the first blank line
        key, _, value = line.partition(": ")
        if key in fields:
            fields[key] = value.strip()
        elif key == "Requires-Dist":
            requires.append(value.strip())
    return fields["Name"], fields["Version"], requires


def unmet_requirements(wheels, provided=PROVIDED):
    """Requirements of ``wheels`` ({path: (name, version, requires)}) that
    neither another wheel nor ``provided`` satisfies (extras are ignored:
    nothing installs them)."""
    from packaging.requirements import Requirement
    from packaging.version import Version
    have = {normalize(n): v for n, v, _ in wheels.values()}
    have.update({normalize(n): v for n, v in provided.items()})
    env = {"python_version": "3.12", "platform_machine": "x86_64", "sys_platform": "linux",
           "extra": ""}
    unmet = []
    for path, (name, _, requires) in sorted(wheels.items()):
        for text in requires:
            req = Requirement(text)
            if req.marker is not None and not req.marker.evaluate(env):
                continue
            version = have.get(normalize(req.name), "missing")
            if version == "missing":
                unmet.append(f"{name}: {text} (not shipped, not on the GPU host)")
            elif version is not None and not req.specifier.contains(Version(version),
                                                                      prereleases=True):
                unmet.append(f"{name}: {text} (have {version})")
    return unmet


def download(dest):
    pins = [f"{n}=={v}" if v else n for n, v in PEERS.items()]
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
           "--python-version", "3.12", "--implementation", "cp", "-d", dest, *pins]
    for p in PLATFORMS:
        cmd[-len(pins):-len(pins)] = ["--platform", p]
    subprocess.run(cmd, check=True)


def pick(whl):
    """One wheel per peer from ``whl`` ({path: metadata})."""
    found = {}
    for path in sorted(glob.glob(os.path.join(whl, "*.whl"))):
        name, version, requires = wheel_metadata(path)
        want = normalize(name)
        for peer, pin in PEERS.items():
            if normalize(peer) == want and (pin is None or pin == version):
                found[normalize(peer)] = (path, (name, version, requires))
    missing = [p for p in PEERS if normalize(p) not in found]
    if missing:
        sys.exit(f"build-attention-transport: no wheel of {missing} in {whl}")
    return dict(found.values())


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--whl", default="", help="folder holding the wheels; default: pip download")
    ap.add_argument("--out", default=ROOT, help=f"where {OUT_NAME}/ goes")
    args = ap.parse_args(argv)

    with tempfile.TemporaryDirectory() as tmp:
        whl = args.whl or tmp
        if not args.whl:
            download(tmp)
        wheels = pick(whl)
        unmet = unmet_requirements(wheels)
        if unmet:
            print("build-attention-transport: requirements not met:\n  " + "\n  ".join(unmet),
                  file=sys.stderr)
            return 1
        out = os.path.join(args.out, OUT_NAME)
        shutil.rmtree(out, ignore_errors=True)
        os.makedirs(out)
        for path in wheels:
            shutil.copy(path, out)

    names = sorted(n for n in os.listdir(out) if n.endswith(".whl"))
    with open(os.path.join(out, "SHA256SUMS"), "w") as f:
        f.writelines(f"{sha256(os.path.join(out, n))}  {n}\n" for n in names)
    with open(os.path.join(out, "install.sh"), "w") as f:
        f.write(INSTALL_SH.replace("__FA4__", PEERS["flash-attn-4"]))
    os.chmod(os.path.join(out, "install.sh"), 0o755)
    size = sum(os.path.getsize(os.path.join(out, n)) for n in os.listdir(out))
    for n in names:
        print(f"  {n}  {os.path.getsize(os.path.join(out, n)) / 1e6:.1f} MB")
    print(f"{out}: {size / 1e6:.1f} MB ({len(names)} wheels)")
    if size >= CARRY_MAX:
        print(f"build-attention-transport: {size} bytes is over {CARRY_MAX >> 20} MiB",
              file=sys.stderr)
        return 1
    print(f"GPU host, repo root, after CuTe DSL's install.sh: sh {OUT_NAME}/install.sh /tmp/site")
    return 0


if __name__ == "__main__":
    sys.exit(main())
