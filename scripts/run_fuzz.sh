#!/usr/bin/env bash
# The long fuzz run on another machine (docs/fuzzing.md). This script runs
# inside .fuzz-bundle, where scripts/build-fuzz-bundle.py copies it next to
# libs.tar.xz, opt/ (pipeline-opt), scripts/fuzz.py and the seed corpus:
#     bash run_fuzz.sh [MUTANTS] [SEED] [OUTDIR]
# It unpacks pipeline-opt with its libraries and runs the fuzzer with one job
# per core.
set -euo pipefail
cd "$(dirname "$0")"
mutants=${1:-100000}; seed=${2:-2026}; out=${3:-fuzz-out}
mkdir -p site && tar -xJf libs.tar.xz -C site && cp -r opt/pipeline_mlir site/
export PATH="/usr/local/cuda/bin:$PATH"
opt="$PWD/site/pipeline_mlir/bin/pipeline-opt"
"$opt" --version | head -2
mkdir -p "$out"
python3 scripts/fuzz.py --mutants "$mutants" --seed "$seed" --jobs "$(nproc)" \
  --progress 200 --opt "$opt" --out "$out/reproducers" --report "$out/report.json"
