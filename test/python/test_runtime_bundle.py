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
                           "tma_ref", "builders_pipeline_tma_async_mcast"],
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


# What the GPU suite launches, checked without a GPU: gpu_child.Prepared runs
# with stand-ins for device memory, TMA encoding and the module load, and the
# launch that its compiled callable would make is recorded.
_LAUNCHES = r"""
import json, sys
bundle = sys.argv[1]
sys.path.insert(0, bundle)
import gpu_child
from pipeline_mlir import runtime as rt
from pipeline_mlir.runtime import compiled as rc

class Buffer:
    next = 1 << 32
    def __init__(self, nbytes, device):
        self.address, Buffer.next = Buffer.next, Buffer.next + (1 << 30)
    def copy_from_host(self, host):
        pass
    def pointer(self):
        return rt.DevicePointer(self.address, owner=self)
    def free(self):
        pass

class Module:
    def __init__(self, image, device, name, watchdog_names):
        self.watchdog_names = watchdog_names

class Function:
    def __init__(self, fn):
        self.fn = fn
    def launch(self, **kw):
        return kw

class Device:
    ordinal, context, cc, name, sm = 0, 1, (9, 0), "stand-in", "sm_90"
    limits = rt.DeviceLimits()
    def require_real(self, what):
        pass

rt.DeviceBuffer = Buffer
rt.make_tma_descriptor = lambda target, **kw: rt.TmaDescriptor(bytes(128), kw)
rc.Module = Module
rc.CompiledKernel.function = lambda self, device=None: Function(self)
out = {}
for e in gpu_child.load_manifest()["kernels"]:
    if e.get("check") not in ("copy", "watchdog", "hang"):
        continue
    prep = gpu_child.Prepared(e, Device(), bundle)
    kw = prep.launch()
    out[e["name"]] = {"kinds": [a.kind for a in kw["args"]], "grid": list(kw["grid"]),
                      "block": list(kw["block"]), "smem": kw["smem"],
                      "cluster": list(kw["cluster"]) if kw["cluster"] else None,
                      "names": prep.fn.param_names, "launch": "launch" in e,
                      "watchdog_names": prep.module.watchdog_names}
print(json.dumps(out))
"""


def test_suite_launches_every_entry_through_its_callable(bundle):
    out, _ = bundle
    proc = subprocess.run([sys.executable, "-c", _LAUNCHES, str(out)], capture_output=True,
                          text=True, cwd=out)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    m = {e["name"]: e for e in json.loads((out / "manifest.json").read_text())["kernels"]}
    assert set(got) == {"async_ref", "async_ref_watchdog", "async_ref_hang", "tma_copy_ref",
                        "tma_copy_byval_ref", "builders_pipeline_tma_async_mcast"}
    for name, g in got.items():
        e = m[name]
        assert g["kinds"] == [k.partition(":")[0] for k in e["signature"]], name
        assert g["grid"] == e["grid"] and g["block"] == e["block"], name
        assert g["smem"] == e["smem"], name
        assert g["cluster"] == (None if e["cluster"] == [1, 1, 1] else e["cluster"]), name
    # the builder-made kernel carries the launch metadata of Kernel.compile()
    mcast = got["builders_pipeline_tma_async_mcast"]
    assert mcast["launch"] and mcast["names"] == ["desc", "dst", "ntiles"]
    assert mcast["cluster"] == [2, 1, 1] and mcast["smem"] > 0
    assert m["builders_pipeline_tma_async_mcast"]["launch"]["params"] == [
        ["desc", "tma"], ["dst", "ptr"], ["ntiles", "i32"]]
    # the others get it from the manifest
    assert got["async_ref"]["names"] == ["src", "dst", "ntiles"] and not got["async_ref"]["launch"]
    assert got["tma_copy_byval_ref"]["kinds"] == ["tma_byval", "tma_byval", "i32"]
    assert got["tma_copy_ref"]["names"] == ["src_desc", "dst_desc", "ntiles"]
    assert got["async_ref_watchdog"]["watchdog_names"] == ["ab"]
