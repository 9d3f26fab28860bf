#!/usr/bin/env bash
# Every test: the lit suite (dialect, conversion, protocol checker, simulator)
# and pytest (Python layers; GPU tests skip with the reason when no GPU).
# Tools come from the installed package (.venv/bin), not from a build tree.
#
# The last line is the total over all three suites, alone on its line:
#   N passed, M failed, K skipped
# (one line per suite just above it; scripts/suite_totals.py says how each
# outcome is counted). The exit status is non-zero when any suite failed.
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"
unset PIPELINE_MLIR_BIN

counts=$(mktemp -d)
trap 'rm -rf "$counts"' EXIT
# scripts/ on the path for the pytest plugin (-p suite_totals) only.
plugin=(env "PYTHONPATH=$PWD/scripts${PYTHONPATH:+:$PYTHONPATH}")

status=0
echo "== lit =="
lit -sv test -o "$counts/lit.json"
lit_rc=$?
[ $lit_rc -eq 0 ] || status=1

echo "== pytest =="
"${plugin[@]}" PIPELINE_TEST_COUNTS="$counts/python.json" \
  python -m pytest -q -rs -p suite_totals test/python
py_rc=$?
# pytest exit 5 = no tests collected; treat as failure of the suite.
[ $py_rc -eq 0 ] || status=1

echo "== pytest: GPU suite (skips with the reason when there is no GPU) =="
# Its own session: test/gpu/conftest.py marks its items for the GPU check.
"${plugin[@]}" PIPELINE_TEST_COUNTS="$counts/gpu.json" \
  python -m pytest -q -rs -p suite_totals test/gpu
gpu_rc=$?
[ $gpu_rc -eq 0 ] || status=1

echo "== total (lit + pytest test/python + pytest test/gpu) =="
python scripts/suite_totals.py total \
  "lit=$counts/lit.json:$lit_rc" \
  "pytest test/python=$counts/python.json:$py_rc" \
  "pytest test/gpu=$counts/gpu.json:$gpu_rc" || status=1
exit $status
