#!/usr/bin/env bash
# Every test: the lit suite (dialect, conversion, protocol checker, simulator)
# and pytest (Python layers; GPU tests skip with the reason when no GPU).
# Tools come from the installed package (.venv/bin), not from a build tree.
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"
unset PIPELINE_MLIR_BIN

status=0
echo "== lit =="
lit -sv test || status=1
echo "== pytest =="
python -m pytest -q -rs test/python
rc=$?
# pytest exit 5 = no tests collected; treat as failure of the suite.
[ $rc -eq 0 ] || status=1
echo "== pytest: GPU suite (skips with the reason when there is no GPU) =="
# Its own session: test/gpu/conftest.py marks its items for the GPU check.
python -m pytest -q -rs test/gpu
rc=$?
[ $rc -eq 0 ] || status=1
exit $status
