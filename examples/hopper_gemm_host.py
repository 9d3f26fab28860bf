"""Host side of examples/hopper_gemm.py: launch the compiled GEMM on torch
tensors and check it against ``torch.matmul``.

Needs only ``pipeline_mlir.runtime`` (cuda-bindings), ``pipeline_mlir.layout``
(pure Python) and torch, no MLIR: the kernel is compiled on a machine with
MLIR ("compile here") and this file runs it on the GPU ("run there");
``benchmarks/gemm/`` bundles both. The tensor maps' boxes and swizzles come
from the operand layouts the kernel was built from, carried in the meta.

    gemm = HopperGemm(cubin_bytes, meta)        # meta: meta_of(cfg, kernel)
    c = gemm(a, b)                              # C = A @ B^T, B given N x K
"""

import math

from pipeline_mlir.layout import DTYPES, OperandLayout

# What the launcher must know of a compiled variant (meta_of writes it).
META_KEYS = ("name", "dtype", "block_m", "block_n", "cluster_m", "threads", "smem",
             "signature", "layouts")
# Relative error bound of the check: fp32 accumulation of 16-bit products,
# then one rounding to bf16 (2^-8) or fp16 (2^-11) of the output.
REL_ERROR_BOUND = {"bf16": 1e-2, "f16": 2e-3}


def meta_of(cfg, kernel):
    """The launch facts of a built kernel (``examples/hopper_gemm.build``):
    the parameter kinds and the A, B and C layouts come from the kernel."""
    a, b, c = cfg.layouts()
    return {"name": cfg.name, "dtype": cfg.dtype, "block_m": cfg.block_m,
            "block_n": cfg.block_n, "cluster_m": cfg.cluster_m,
            "threads": cfg.threads, "smem": kernel.smem_bytes,
            "signature": [p.kind for _, p in kernel.params],
            "layouts": {"a": a.to_meta(), "b": b.to_meta(), "c": c.to_meta()}}


class HopperGemm:
    """A loaded GEMM variant; calling it launches on torch's current stream."""

    def __init__(self, image, meta, persistent=True):
        from pipeline_mlir import runtime

        missing = [k for k in META_KEYS if k not in meta]
        if missing:
            raise ValueError(f"HopperGemm: meta lacks {missing}")
        self.meta = dict(meta)
        self.layouts = {k: OperandLayout.from_meta(v) for k, v in meta["layouts"].items()}
        self.persistent = persistent
        self._runtime = runtime
        self.module = runtime.Module(image, name=meta["name"])
        self.kernel = self.module.kernel(meta["name"], signature=meta["signature"])
        self._descs = {}
        self._resident = None

    def _check(self, a, b, c):
        import torch

        for name, t in (("a", a), ("b", b), ("c", c)):
            want = getattr(torch, self.layouts[name].torch_dtype)
            if t.dtype != want:
                raise TypeError(f"{self.meta['name']}: {name} must be {want}, got {t.dtype}")
            if t.dim() != 2 or not t.is_contiguous() or not t.is_cuda:
                raise ValueError(f"{self.meta['name']}: {name} must be a contiguous 2-D "
                                 "CUDA tensor")
        (m, k), (n, kb) = a.shape, b.shape
        if kb != k or tuple(c.shape) != (m, n):
            raise ValueError(f"shapes do not match: a {tuple(a.shape)}, b {tuple(b.shape)} "
                             f"(N x K), c {tuple(c.shape)}")
        # TMA: every row stride a multiple of 16 bytes.
        for what, t, cols in (("K", a, k), ("N", c, n)):
            if cols * t.element_size() % 16:
                raise ValueError(f"{what} ({cols}) x {t.element_size()} bytes must be a "
                                 "multiple of 16 (TMA needs 16-byte aligned row strides)")
        return m, n, k

    def descriptors(self, a, b, c):
        """The three CUtensorMaps (cached per tensor address and shape)."""
        key = tuple((t.data_ptr(), tuple(t.shape)) for t in (a, b, c))
        if key not in self._descs:
            rt, lay = self._runtime, self.layouts
            self._descs[key] = tuple(rt.make_tma_descriptor(t, layout=lay[name])
                                     for name, t in (("a", a), ("b", b), ("c", c)))
        return self._descs[key]

    def grid(self, m, n, sms):
        """Persistent: as many CTAs (clusters) as run at once, never more
        than there are tiles; else one CTA (cluster) per tile."""
        meta = self.meta
        cl = meta["cluster_m"]
        units = math.ceil(m / (meta["block_m"] * cl)) * math.ceil(n / meta["block_n"])
        if self.persistent:
            if self._resident is None:
                self._resident = sms if cl == 1 else self.kernel.max_active_clusters(
                    (meta["threads"], 1, 1), (cl, 1, 1), meta["smem"])
            units = min(units, self._resident)
        return (units * cl, 1, 1)

    def __call__(self, a, b, c=None, stream=None, sync=False):
        return self.launch(a, b, c, (), stream, sync)

    def launch(self, a, b, c, extra_args, stream, sync):
        """Launch on ``a``, ``b`` into ``c`` (allocated if None), with
        ``extra_args`` after the kernel's ``m, n, k`` (the FP8 GEMM's
        scales)."""
        import torch

        if c is None:
            c = torch.empty(a.shape[0], b.shape[0], device=a.device,
                            dtype=getattr(torch, self.layouts["c"].torch_dtype))
        m, n, k = self._check(a, b, c)
        if k == 0 or m == 0 or n == 0:
            raise ValueError("empty GEMM")
        sms = torch.cuda.get_device_properties(a.device).multi_processor_count
        da, db, dc = self.descriptors(a, b, c)
        cl = self.meta["cluster_m"]
        stream = torch.cuda.current_stream() if stream is None else stream
        self.kernel.launch(self.grid(m, n, sms), (self.meta["threads"], 1, 1),
                           cluster=(cl, 1, 1) if cl > 1 else None, smem=self.meta["smem"],
                           args=[da, db, dc, c, m, n, k, *extra_args], stream=stream,
                           sync=sync)
        return c


def check(gemm, m, n, k, seed=0):
    """Run ``gemm`` on gaussian inputs and compare with torch.matmul; return
    the max relative error (raises AssertionError over the bound)."""
    import torch

    dtype = getattr(torch, DTYPES[gemm.meta["dtype"]][1])
    g = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn(m, k, device="cuda", dtype=dtype, generator=g)
    b = torch.randn(n, k, device="cuda", dtype=dtype, generator=g)
    c = torch.full((m, n), float("nan"), device="cuda", dtype=dtype)
    gemm(a, b, c, sync=True)
    ref = torch.matmul(a.float(), b.float().T)
    err = ((c.float() - ref).abs() / (ref.abs() + math.sqrt(k))).max().item()
    bound = REL_ERROR_BOUND[gemm.meta["dtype"]]
    if not err <= bound:  # also catches NaN (unwritten outputs)
        raise AssertionError(f"{gemm.meta['name']} {m}x{n}x{k}: max relative error "
                             f"{err:.3g} > {bound}")
    return err
