"""Host side of the row kernels (examples/row_softmax.py, examples/rmsnorm.py):
the facts a launch needs and the grid of their grid-stride loop. Needs
torch and the runtime, no MLIR, so the GPU bundle ships it beside the
cubins.

A row kernel's ``meta`` (``meta_of``) is what its launcher reads: ``n``
(the row length it was built for), ``dtype``, ``threads`` per row,
``rows_per_cta``, ``stages`` (of its ring of rows in shared memory, 0
for none) and ``parts`` (a row's, in the ring); the compiled kernel knows
its block.
"""

import math

DTYPES = {"bf16": "bfloat16", "f16": "float16", "f32": "float32"}
_SMS = {}      # (kernel, device) -> (kernel, resident CTAs)
# Per SM (sm_90): shared memory for CTAs, reserved per CTA, threads.
SM_SMEM, CTA_RESERVED_SMEM, SM_THREADS = 228 * 1024, 1024, 2048


class RowKernel:
    """A compiled row kernel (a ``CompiledKernel``, or cubin bytes with its
    launch metadata) and its ``meta`` (``meta_of``): the launchers of the
    softmax and the RMSNorm build on it."""

    def __init__(self, cubin, meta, launch=None):
        from pipeline_mlir.runtime import CompiledKernel

        self.meta = meta
        if isinstance(cubin, CompiledKernel):
            self.fn = cubin
        elif launch is None:
            raise TypeError(f"{type(self).__name__}: a cubin given as bytes needs its launch "
                            "metadata (launch=compiled.metadata(), or the .json that "
                            "CompiledKernel.save wrote beside it)")
        else:
            self.fn = CompiledKernel.from_metadata(bytes(cubin), launch)


def meta_of(rows, k):
    """The launch facts of kernel ``k`` built on the layout ``rows``."""
    threads = k.block_dim[0] * k.block_dim[1] * k.block_dim[2]
    parts = getattr(k, "parts", 1)
    cluster = getattr(k, "cluster", 1)
    meta = {"n": rows.n * parts * cluster, "dtype": rows.dtype, "threads": rows.threads,
            "rows_per_cta": threads // rows.threads if rows.per_warp else 1,
            "block": threads, "stages": getattr(k, "stages", 0), "parts": parts}
    if cluster > 1:
        meta["cluster"] = cluster
    return meta


def resident_ctas(fn, device):
    """CTAs of the compiled kernel ``fn`` the GPU runs at once: the SMs
    times ``cuOccupancyMaxActiveBlocksPerMultiprocessor`` (registers,
    threads and shared memory all count). Cached per kernel and device."""
    key = (id(fn), device)
    if key not in _SMS:
        import torch

        from pipeline_mlir.runtime import _driver, default_device

        dev = default_device(device.index or 0)
        dev.make_current()
        drv = _driver.cuda()
        threads = fn.block[0] * fn.block[1] * fn.block[2]
        try:
            per_sm = _driver.check(drv.cuOccupancyMaxActiveBlocksPerMultiprocessor(
                fn.function(dev).function, threads, fn.smem),
                "cuOccupancyMaxActiveBlocksPerMultiprocessor")
        except Exception:       # a kernel the call refuses: shared memory and threads only
            per_sm = min(SM_SMEM // (fn.smem + CTA_RESERVED_SMEM), SM_THREADS // threads)
        sms = torch.cuda.get_device_properties(device).multi_processor_count
        _SMS[key] = (fn, max(1, per_sm) * sms)     # fn kept alive: its id stays its own
    return _SMS[key][1]


def resident_clusters(fn, device):
    """Clusters of the compiled cluster kernel ``fn`` the GPU runs at once
    (``cuOccupancyMaxActiveClusters``: SMs come in GPCs, so fewer than the
    resident CTAs over the cluster size may fit, and a launch of more runs
    a second, mostly idle wave). Cached per kernel and device."""
    key = (id(fn), device, "clusters")
    if key not in _SMS:
        from pipeline_mlir.runtime import default_device

        dev = default_device(device.index or 0)
        try:
            n = fn.function(dev).max_active_clusters(fn.block, fn.cluster, fn.smem)
        except Exception:       # no answer: the resident CTAs in whole clusters
            n = resident_ctas(fn, device) // (fn.cluster[0] * fn.cluster[1] * fn.cluster[2])
        _SMS[key] = (fn, max(1, n))
    return _SMS[key][1]


def grid_for(m, meta, fn, device):
    """CTAs for ``m`` rows: one per ``rows_per_cta`` rows, at most the
    CTAs that run at once (the loop strides over the rest). More than
    that would start a second wave once the first finishes its whole
    share of rows: a tail as long as the first wave's CTAs' work."""
    c = meta.get("cluster", 1)
    if c > 1:                 # a cluster per row: whole clusters, at most one per row
        return c * max(1, min(m, resident_clusters(fn, device)))
    return max(1, min(math.ceil(m / meta["rows_per_cta"]), resident_ctas(fn, device)))


def check_rows(x, meta, what):
    """``x`` viewed as (M, n) contiguous rows of the kernel's type, or a
    ValueError naming what differs and the fix."""
    import torch

    want = getattr(torch, DTYPES[meta["dtype"]])
    if x.dtype != want:
        raise ValueError(f"{what}: the kernel was built for {want}, got {x.dtype}; "
                         f"build one for {x.dtype} or convert the input")
    if x.shape[-1] != meta["n"]:
        raise ValueError(f"{what}: the kernel was built for rows of {meta['n']} elements, "
                         f"got {x.shape[-1]}; build one for this length")
    if not x.is_cuda:
        raise ValueError(f"{what}: expected a CUDA tensor, got one on {x.device}")
    return x.contiguous().view(-1, meta["n"])


def output_like(rows, out, shape, what):
    """The (M, n) output: ``out`` when given (contiguous, of ``shape`` and
    the input's type: written in place), else a new tensor."""
    if out is None:
        return rows.new_empty(rows.shape)
    if out.shape != shape or out.dtype != rows.dtype or not out.is_contiguous():
        raise ValueError(f"{what}: out must be a contiguous {rows.dtype} tensor of shape "
                         f"{tuple(shape)}, got {out.dtype} {tuple(out.shape)}"
                         f"{'' if out.is_contiguous() else ' (not contiguous)'}")
    return out.view(rows.shape)
