"""Runs one manifest entry: the library of test_gpu.py, and the child
process for the tests that leave the CUDA context unusable (a watchdog trap,
a hung kernel):

    python3 gpu_child.py watchdog|hang|forensics ENTRY_NAME   -> one JSON line on stdout

"forensics" is "watchdog" plus the forensic report (runtime/forensics.py)
and the whole host buffer (base64), so that the report can be decoded
again off the GPU.
"""

import base64

import json
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from pipeline_mlir import runtime as rt  # noqa: E402


def bundle_dir():
    """Where manifest.json is: $PIPELINE_GPU_BUNDLE, this directory (inside
    a bundle) or <repo>/.gpu-bundle."""
    for d in (os.environ.get("PIPELINE_GPU_BUNDLE"), HERE,
              os.path.join(HERE, "..", "..", ".gpu-bundle")):
        if d and os.path.exists(os.path.join(d, "manifest.json")):
            return os.path.abspath(d)
    return None


def load_manifest():
    d = bundle_dir()
    if d is None:
        return None
    with open(os.path.join(d, "manifest.json")) as f:
        return json.load(f)


def find_entry(manifest, name):
    for e in manifest["kernels"]:
        if e["name"] == name:
            return e
    raise KeyError(f"no kernel {name!r} in the manifest")


def param_names(entry):
    """Names of the kernel parameters of a manifest entry, in order: an
    in/out buffer's name, ``<buffer>_desc`` for a TMA descriptor, ``argN``
    for a scalar."""
    names = []
    for a in (a for a in entry["args"] if a.get("param", True)):
        if a["role"] == "tma":
            names.append(f"{a['of']}_desc")
        else:
            names.append(a.get("name") or f"arg{len(names)}")
    return names


def compiled_kernel(entry, bundle):
    """The entry's ``runtime.CompiledKernel``: the callable the suite
    launches. Kernels compiled from a ``pipeline_mlir.kernel.Kernel`` carry
    its launch metadata ("launch"); the others (MLIR text, PTX) get it from
    the manifest's kernel, signature, block, cluster and smem."""
    with open(os.path.join(bundle, entry["image"]), "rb") as f:
        image = f.read()
    if "launch" in entry:
        return rt.CompiledKernel.from_metadata(image, entry["launch"])
    return rt.CompiledKernel.cached(
        image, name=entry["kernel"], params=list(zip(param_names(entry), entry["signature"])),
        block=entry["block"], cluster=entry.get("cluster"), smem=entry.get("smem", 0),
        chip=entry.get("chip"), watchdog_names=entry.get("watchdog_names"))


class Prepared:
    """Device buffers, host copies and parameters of one manifest entry,
    and its compiled kernel (``self.fn``), through which it is launched."""

    def __init__(self, entry, device, bundle, seed=1234):
        self.entry, self.device = entry, device
        self.host, self.dev, self.params = {}, {}, []
        rng = np.random.default_rng(seed)
        for a in entry["args"]:
            role = a["role"]
            if role in ("in", "out"):
                d = self._buffer(a, rng)
                if a.get("param", True):
                    self.params.append(d.pointer())
            elif role == "scalar":
                self.params.append(a["value"])
            elif role == "tma":
                # A descriptor may name a buffer listed after it.
                target = next(b for b in entry["args"] if b.get("name") == a["of"])
                desc = rt.make_tma_descriptor(self._buffer(target, rng).pointer(), shape=a["shape"],
                                              dtype=a["dtype"], box_shape=a["box"],
                                              swizzle=a["swizzle"] or None)
                self.params.append(desc)
            else:
                raise ValueError(f"unknown arg role {role!r}")
        self.fn = compiled_kernel(entry, bundle)
        self.module = self.fn.module(device)  # loaded now: ArchMismatchError here

    def _buffer(self, a, rng):
        """The device buffer of an in/out argument, made (and filled) once."""
        if a["name"] not in self.dev:
            if a["role"] == "in":
                h = rng.integers(0, 256, size=a["bytes"], dtype=np.uint8)
            else:
                h = np.zeros(a["bytes"], dtype=np.uint8)
            d = rt.DeviceBuffer(a["bytes"], self.device)
            d.copy_from_host(h)
            self.host[a["name"]], self.dev[a["name"]] = h, d
        return self.dev[a["name"]]

    def launch(self, timeout=None, **kw):
        """``fn(*params, grid=...)``: block, cluster and smem are the
        compiled kernel's own."""
        e = self.entry
        return self.fn(*self.params, grid=e["grid"], device=self.device,
                       timeout=e.get("timeout") if timeout is None else timeout, **kw)

    def check_outputs(self):
        """[] when every output equals its expectation, else messages."""
        problems = []
        for name, spec in self.entry["expect"]["outputs"].items():
            got = np.empty_like(self.host[name])
            self.dev[name].copy_to_host(got)
            want = np.tile(self.host[spec["from"]], spec.get("times", 1))
            if "xor32" in spec:
                want = (want.view(np.uint32) ^ np.uint32(spec["xor32"])).view(np.uint8)
            if not np.array_equal(got, want):
                bad = np.flatnonzero(got != want)
                problems.append(f"{name}: {bad.size} of {got.size} bytes differ, first at byte "
                                f"{bad[0]} (tile {bad[0] // 4096}): got {got[bad[0]]}, "
                                f"want {want[bad[0]]}")
        return problems

    def free(self):
        for d in self.dev.values():
            d.free()
        for p in self.params:
            if isinstance(p, rt.TmaDescriptor):
                p.free()


def main(mode, name):
    entry = find_entry(load_manifest(), name)
    dev = rt.default_device()
    prep = Prepared(entry, dev, bundle_dir())
    t0 = time.monotonic()
    out = {"mode": mode, "name": name}
    try:
        if mode == "hang":
            prep.launch(timeout=entry["expect"]["host_timeout"])
        else:
            prep.launch()
        out.update(ok=False, error="the launch finished normally")
    except rt.PipelineWatchdogError as err:
        r = err.record
        out.update(ok=(mode != "hang"), exc="PipelineWatchdogError", message=str(err),
                   record={"pipeline_id": r.pipeline_id, "role": r.role_name, "stage": r.stage,
                           "phase": r.phase, "block": list(r.block), "warp": r.warp,
                           "elapsed_us": r.elapsed_us},
                   names=prep.module.watchdog_names)
        if mode == "forensics":
            from pipeline_mlir.runtime import forensics
            out.update(ok=r.dump is not None, version=r.version,
                       report=forensics.report(r, prep.module.watchdog_names),
                       buffer_b64=base64.b64encode(prep.module._watchdog.read()).decode())
    except rt.KernelTimeoutError as err:
        out.update(ok=(mode == "hang"), exc="KernelTimeoutError", message=str(err))
    except Exception as err:  # report, never hang
        out.update(ok=False, exc=type(err).__name__, message=str(err))
    out["seconds"] = round(time.monotonic() - t0, 3)
    print(json.dumps(out), flush=True)
    os._exit(0)  # the context is unusable (trap) or busy (hung kernel): skip teardown


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
