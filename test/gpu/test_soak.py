"""The soak test: 100,000 calls of the library's kernels (bf16 and fp16
``pipeline_mlir.gemm`` shapes of different variants, a fused epilogue, a
split-K pick and a stream-K variant, the FP8 GEMM and ``scaled_mm``,
attention forward, and forward + backward through autograd)
in bursts with address churn; every 97th result checked against torch; GPU
and host memory flat within 1% after warm-up; no hang (soak.py has the
details and prints the summary line that docs/gpu-results.md records).

It runs in a child process with a deadline, so a hung kernel fails the
test instead of blocking the suite. ``PIPELINE_MLIR_SOAK_CALLS`` sets the
number of calls (default 100000; at least 40000, since memory is sampled
from call 20000 on, once the launch path's bounded tables are full).

    cd .gpu-bundle && python3 -m pytest -q test_soak.py -s
"""

import json
import os
import subprocess
import sys

import pytest

from gpu_child import bundle_dir

pytest.importorskip("torch", reason="the soak test checks results with torch")


def test_soak_many_calls_no_hang_no_leak_no_wrong_result(device, tmp_path):
    here = bundle_dir()
    if here is None or not os.path.isdir(os.path.join(here, "gemm-cache")):
        pytest.skip("no bundle with a GEMM cache: build it with scripts/build-gpu-bundle.py")
    calls = int(os.environ.get("PIPELINE_MLIR_SOAK_CALLS", "100000"))
    out = tmp_path / "soak.json"
    env = dict(os.environ, PIPELINE_MLIR_CACHE_DIR=os.path.join(here, "gemm-cache"))
    try:
        proc = subprocess.run([sys.executable, os.path.join(here, "soak.py"), "--calls",
                               str(calls), "--json", str(out)], cwd=here, env=env,
                              capture_output=True, text=True, timeout=900)
    except subprocess.TimeoutExpired as err:
        pytest.fail(f"the soak run did not finish within 900 s (a hang): {err.stdout}")
    print(proc.stdout[-4000:], proc.stderr[-4000:])
    assert out.exists(), (f"soak.py ended without a result (rc {proc.returncode}): "
                          f"{proc.stderr[-1000:]}")
    result = json.loads(out.read_text())
    assert result["calls"] >= calls and result["hangs"] == 0 and result["wrong"] == 0, \
        result["summary"]
    assert {"Gemm", "FusedGemm", "StreamKGemm", "Fp8", "ScaledMm", "Attention",
            "AttentionTrain"} <= set(result["kinds"]) and result["shapes"] >= 13
    assert abs(result["gpu_drift"]) <= 0.01 and abs(result["host_drift"]) <= 0.01, \
        result["summary"]
