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

# test/python as concurrent shards of whole files (scripts/test_shards.py
# deals them by measured time): one per core, at most 4, or
# PIPELINE_TEST_JOBS. Each shard's output is printed when all are done.
jobs=${PIPELINE_TEST_JOBS:-$(nproc 2>/dev/null || echo 1)}
[ "$jobs" -ge 1 ] 2>/dev/null || jobs=1
[ "$jobs" -le 4 ] || jobs=4
echo "== pytest ($jobs shards) =="
pids=()
for i in $(seq 1 "$jobs"); do
  "${plugin[@]}" PIPELINE_TEST_COUNTS="$counts/python$i.json" PIPELINE_TEST_SHARD="$i/$jobs" \
    python -m pytest -q -rs -p suite_totals -p test_shards -p no:cacheprovider \
    --basetemp="$counts/tmp$i" test/python >"$counts/python$i.log" 2>&1 &
  pids+=($!)
done
py_specs=()
for i in $(seq 1 "$jobs"); do
  wait "${pids[$((i - 1))]}"
  rc=$?
  echo "-- pytest test/python, shard $i/$jobs (exit $rc) --"
  cat "$counts/python$i.log"
  # pytest exit 5 = no tests collected; treat as failure of the suite.
  [ $rc -eq 0 ] || status=1
  py_specs+=("pytest test/python shard $i/$jobs=$counts/python$i.json:$rc")
done

echo "== pytest: GPU suite (skips with the reason when there is no GPU) =="
# Its own session: test/gpu/conftest.py marks its items for the GPU check.
"${plugin[@]}" PIPELINE_TEST_COUNTS="$counts/gpu.json" \
  python -m pytest -q -rs -p suite_totals test/gpu
gpu_rc=$?
[ $gpu_rc -eq 0 ] || status=1

echo "== total (lit + pytest test/python + pytest test/gpu) =="
python scripts/suite_totals.py total \
  "lit=$counts/lit.json:$lit_rc" \
  "${py_specs[@]}" \
  "pytest test/gpu=$counts/gpu.json:$gpu_rc" || status=1
exit $status
