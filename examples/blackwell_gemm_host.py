"""Host side of examples/blackwell_gemm.py: launch the compiled sm_100a GEMM
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

from hopper_gemm_host import check  # noqa: F401  (same check, any meta dtype)
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
        # Raises ArchMismatchError on anything but sm_100 (an sm_100a cubin).
        self.module = runtime.Module(image, name=meta["name"], device=device)
        self.kernel = self.module.kernel(meta["name"], signature=meta["signature"])
        self._descs = {}
        self._resident = None

    def descriptors(self, a, b, c):
        key = tuple((t.data_ptr(), tuple(t.shape)) for t in (a, b, c))
        if key not in self._descs:
            rt, lay = self._runtime, self.layouts
            self._descs[key] = tuple(rt.make_tma_descriptor(t, layout=lay[name])
                                     for name, t in (("a", a), ("b", b), ("c", c)))
        return self._descs[key]

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
        sms = torch.cuda.get_device_properties(a.device).multi_processor_count
        da, db, dc = self.descriptors(a, b, c)
        cl = self.meta["cta_group"]
        stream = torch.cuda.current_stream() if stream is None else stream
        self.kernel.launch(self.grid(m, n, sms), (self.meta["threads"], 1, 1),
                           cluster=(cl, 1, 1) if cl > 1 else None, smem=self.meta["smem"],
                           args=[da, db, dc, m, n, k], stream=stream, sync=sync)
        return c
