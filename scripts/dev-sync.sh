#!/usr/bin/env bash
# Developer shortcut: copy the pure-Python sources of pipeline_mlir over the
# installed package in .venv without rebuilding the native parts. Use after
# editing .py files; run scripts/setup.sh (or pip install .) after C++ edits.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/pipeline_mlir
[ -d "$dest" ] || { echo "dev-sync: pipeline_mlir is not installed; run scripts/setup.sh" >&2; exit 1; }
cd python/pipeline_mlir
find . -name '*.py' -not -path '*/__pycache__/*' | while read -r f; do
  mkdir -p "$dest/$(dirname "$f")"
  cp "$f" "$dest/$f"
done
