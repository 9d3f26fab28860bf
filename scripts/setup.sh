#!/usr/bin/env bash
# One command from a fresh clone to a working install:
#   1. a Python 3.12 virtual environment in .venv (3.12 is what the GPU
#      host runs, so the same build serves both);
#   2. the pinned MLIR/LLVM 22.1.8 wheels and build/test tools;
#   3. `pip install .` of pipeline-mlir (CMake + Ninja via scikit-build-core,
#      built against the venv's MLIR, no build isolation so the ~1.7 GB of
#      wheels are installed once);
#   4. the main job: scripts/main.py (build, verify, lower and compile an
#      example kernel; run it when a GPU is present).
set -euo pipefail
cd "$(dirname "$0")/.."

find_python312() {
  # $PYTHON, then PATH, then pyenv's versions (PYENV_ROOT, default ~/.pyenv).
  local pyenv_root="${PYENV_ROOT:-$HOME/.pyenv}"
  for cand in "${PYTHON:-}" python3.12 "$pyenv_root"/versions/3.12*/bin/python3.12 \
              /usr/bin/python3.12; do
    [ -n "$cand" ] || continue
    if command -v "$cand" >/dev/null 2>&1 && \
       "$cand" -c 'import sys; assert sys.version_info[:2] == (3, 12)' 2>/dev/null; then
      echo "$cand"; return 0
    fi
  done
  return 1
}

if [ ! -x .venv/bin/python ]; then
  PY=$(find_python312) || { echo "setup: Python 3.12 not found (set PYTHON=...)" >&2; exit 1; }
  echo "setup: creating .venv with $PY"
  "$PY" -m venv .venv
fi
export PATH="$PWD/.venv/bin:$PATH"
python -m pip install -q --disable-pip-version-check -r requirements-dev.txt
echo "setup: building and installing pipeline-mlir (first build: a few minutes)"
python -m pip install -q --disable-pip-version-check --no-build-isolation .
echo "setup: running the main job"
python scripts/main.py
