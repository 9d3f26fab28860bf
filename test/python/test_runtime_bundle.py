"""Deviceless: the GPU bundle builds here, carries a runtime that imports
without MLIR, and its suite skips (with the reason) where there is no GPU."""

import json
import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

pytestmark = pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas not on PATH")


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    pytest.importorskip("mlir.ir")
    out = tmp_path_factory.mktemp("b") / "bundle"
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "build-gpu-bundle.py"),
                           "--out", str(out), "--mib", "1", "--only", "async_ref", "misc",
                           "builders_pipeline_tma_async_mcast"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out, proc.stdout


def test_manifest(bundle):
    out, log = bundle
    m = json.loads((out / "manifest.json").read_text())
    names = {e["name"]: e for e in m["kernels"]}
    assert {"async_ref", "async_ref_watchdog", "async_ref_hang", "fill_ptx", "tiny_sm100a"} <= set(names)
    e = names["async_ref"]
    assert e["stages"] >= 3 and e["signature"] == ["ptr", "ptr", "i32"]
    assert e["args"][-1]["value"] * e["grid"][0] * 4096 == e["bytes"] == 1 << 20
    for e in names.values():
        assert (out / e["image"]).stat().st_size > 0
    assert names["async_ref_watchdog"]["watchdog_names"] == ["ab"]
    # The 2-CTA multicast kernel is built from the Python builders.
    mcast = names["builders_pipeline_tma_async_mcast"]
    assert tuple(mcast["cluster"]) == (2, 1, 1)
    assert m["skipped"] == []
    assert "BUILT builders_pipeline_tma_async_mcast" in log


def test_runtime_in_bundle_needs_no_mlir(bundle):
    out, _ = bundle
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import pipeline_mlir, pipeline_mlir.runtime as rt; "
            "assert pipeline_mlir.__file__.startswith(sys.argv[1]), pipeline_mlir.__file__; "
            "assert not any(m == 'mlir' or m.startswith('mlir.') for m in sys.modules); "
            "print(rt.cubin_target(open(sys.argv[2], 'rb').read()))")
    proc = subprocess.run([sys.executable, "-c", code, str(out),
                           str(out / "kernels" / "async_ref.sm_90a.cubin")],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "sm_90a"


def test_suite_skips_visibly_without_gpu(bundle):
    out, _ = bundle
    env = dict(os.environ, PIPELINE_MLIR_NO_GPU="1")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "test_gpu.py"], cwd=out, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "no usable GPU: PIPELINE_MLIR_NO_GPU is set" in proc.stdout
    assert " passed" not in proc.stdout and "failed" not in proc.stdout
    assert "skipped" in proc.stdout
