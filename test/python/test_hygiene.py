"""Tracked files name no paths of one machine (home directories, the
workspace, pyenv interpreters): commands and docs work from any checkout."""

import os
import re
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# (spelled in pieces so that this file does not match itself)
_ROOTS = [b"root/", rb"home/\w+/", b"work/", rb"Users/\w+/", b"tmp/pytest-"]
MACHINE_PATH = re.compile(rb"(?<![\w.<])/(" + b"|".join(_ROOTS) + rb")")


def tracked_files():
    if shutil.which("git") is None or not os.path.exists(os.path.join(ROOT, ".git")):
        pytest.skip("not a git checkout")
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True)
    return [f for f in out.stdout.decode().split("\0") if f]


def test_no_machine_specific_absolute_paths():
    found = []
    for f in tracked_files():
        path = os.path.join(ROOT, f)
        if f.endswith((".png", ".cubin")) or not os.path.isfile(path):
            continue
        with open(path, "rb") as fh:
            for n, line in enumerate(fh, 1):
                if MACHINE_PATH.search(line):
                    found.append(f"{f}:{n}: {line.decode(errors='replace').strip()[:120]}")
    assert not found, "machine-specific paths in tracked files:\n" + "\n".join(found)
