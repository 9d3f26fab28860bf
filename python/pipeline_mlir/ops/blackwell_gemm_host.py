"""Host side of pipeline_mlir/kernels/blackwell_gemm.py: launch the compiled sm_100a GEMM
on torch tensors and check it against ``torch.matmul``.

Needs only ``pipeline_mlir.runtime`` (cuda-bindings) and torch. No Blackwell
GPU has run it yet: on anything but compute capability 10.0 loading the
cubin raises ``ArchMismatchError`` naming the chip to rebuild for (the
runtime's arch check), and the GPU suite skips with that reason.

    gemm = BlackwellGemm(cubin_bytes, meta)     # meta: meta_of(cfg, kernel)
    c = gemm(a, b)                              # C = A @ B^T, B given N x K

Grid: with cluster launch control (``scheduler == "clc"``) one cluster per
work unit -- the running clusters cancel the pending ones and take their
tiles, so the grid is *not* sized to the SM count; with the static
scheduler, as many clusters as are resident at once.
"""

import math

from pipeline_mlir.ops.hopper_gemm_host import check  # noqa: F401  (same check, any meta dtype)
from pipeline_mlir.layout import OperandLayout

META_KEYS = ("name", "dtype", "block_m", "block_n", "cta_group", "scheduler",
             "threads", "smem", "signature", "layouts")


def meta_of(cfg, kernel):
    """The launch facts of a built kernel (``examples/blackwell_gemm.build``):
    the parameter kinds and the A, B and C-box layouts come from the kernel."""
    a, b, c = cfg.layouts()
    return {"name": cfg.name, "dtype": cfg.dtype, "block_m": a.rows,
            "block_n": cfg.block_n, "cta_group": cfg.cta_group,
            "scheduler": cfg.scheduler, "threads": cfg.threads,
            "smem": kernel.smem_bytes, "signature": [p.kind for _, p in kernel.params],
            "layouts": {"a": a.to_meta(), "b": b.to_meta(), "c": c.to_meta()}}


LAUNCH_CACHE = 256   # prepared launches (tensor sets) kept per variant


class BlackwellGemm:
    """A loaded GEMM variant; calling it launches on torch's current stream."""

    def __init__(self, image, meta, device=None):
        from pipeline_mlir import runtime

        missing = [k for k in META_KEYS if k not in meta]
        if missing:
            raise ValueError(f"BlackwellGemm: meta lacks {missing}")
        self.meta = dict(meta)
        self.layouts = {k: OperandLayout.from_meta(v) for k, v in meta["layouts"].items()}
        self._runtime = runtime
        cl = meta["cta_group"]
        self.compiled = runtime.CompiledKernel.cached(
            image, name=meta["name"], params=list(meta["signature"]), block=meta["threads"],
            cluster=(cl, 1, 1) if cl > 1 else None, smem=meta["smem"])
        self.device = device or runtime.default_device()
        # ArchMismatchError on anything but sm_100 (an sm_100a cubin), before
        # anything is loaded.
        runtime.check_compatible(runtime.image_target(image), self.device.cc,
                                 f"device '{self.device.name}'", f"cubin '{meta['name']}'")
        self.launcher = self.compiled.launcher(self.device)
        self.kernel = self.launcher.fn
        self.module = self.kernel.module
        # The runtime's one engine: prepared launches, descriptors in the
        # stream's ring, bounded (as the Hopper GEMM and attention).
        self.launches = runtime.LaunchCache(self.launcher, LAUNCH_CACHE)
        self._resident = None

    def descriptors(self, a, b, c):
        rt, lay = self._runtime, self.layouts
        return tuple(rt.make_tma_descriptor(t, layout=lay[name])
                     for name, t in (("a", a), ("b", b), ("c", c)))

    def grid(self, m, n, sms):
        meta = self.meta
        cl = meta["cta_group"]
        units = math.ceil(m / (meta["block_m"] * cl)) * math.ceil(n / meta["block_n"])
        if meta["scheduler"] == "static":
            if self._resident is None:
                self._resident = sms // cl if cl == 1 else self.kernel.max_active_clusters(
                    (meta["threads"], 1, 1), (cl, 1, 1), meta["smem"])
            units = min(units, self._resident)
        return (units * cl, 1, 1)

    def __call__(self, a, b, c=None, stream=None, sync=False):
        import torch

        if c is None:
            c = torch.empty(a.shape[0], b.shape[0], dtype=a.dtype, device=a.device)
        (m, k), (n, _) = a.shape, b.shape
        if k % 8 or n % 8 or 0 in (m, n, k):
            raise ValueError(f"{self.meta['name']}: K ({k}) and N ({n}) must be non-zero "
                             "multiples of 8 (TMA row strides)")
        rt = self._runtime
        s = (rt.fastlaunch.current_stream_handle(self.device.ordinal) if stream is None
             else rt.launch.stream_address(stream))
        key = (a.data_ptr(), b.data_ptr(), c.data_ptr(), tuple(a.shape), tuple(b.shape),
               tuple(c.shape), a.dtype, c.dtype, a.is_contiguous(), b.is_contiguous(),
               c.is_contiguous(), s)
        p = self.launches.get(key)
        if p is None:
            sms = self.device.limits.multiprocessors
            p = self.launches.prepare(key, (*self.descriptors(a, b, c), m, n, k),
                                      self.grid(m, n, sms), s)
        if sync:
            self.launcher.launch(p.values, p.config.dims[0], s, True, None)
        else:
            self.launches.fire(p)
        return c
