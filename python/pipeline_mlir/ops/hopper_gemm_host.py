"""Host side of the Hopper GEMM (pipeline_mlir/kernels/hopper_gemm.py): launch a compiled
variant on torch tensors, and check it against ``torch.matmul``.

Needs only ``pipeline_mlir.runtime`` (cuda-bindings), ``pipeline_mlir.layout``
(pure Python) and torch, no MLIR: the kernel is compiled on a machine with
MLIR and this runs it on the GPU. The tensor maps' boxes and swizzles come
from the operand layouts the kernel was built from, carried in the meta.

    gemm = HopperGemm(cubin_bytes, meta)        # meta: meta_of(cfg, kernel)
    c = gemm(a, b)                              # C = A @ B^T, B given N x K

A call costs a few microseconds of host time. The first call with a given
set of tensors (addresses, shapes, dtypes, devices, contiguity) and stream
runs every check, encodes the three tensor maps (their device copies
written in stream order by a ``DescriptorArena``, so a call may also be
captured into a CUDA graph) and builds a ``fastlaunch.PreparedLaunch``;
a later call with the same facts looks them up as one key and launches
the prepared configuration and parameters (two driver calls). Anything
else goes through the checks again, with their messages.
"""

import math

from pipeline_mlir.layout import DTYPES, OperandLayout
from pipeline_mlir.runtime.bounded import put_bounded
from pipeline_mlir.runtime.fastlaunch import current_stream_handle
from pipeline_mlir.runtime.launch import stream_address

from .gemm_variants import unit_tiles

# What the launcher must know of a compiled variant (meta_of writes it).
META_KEYS = ("name", "dtype", "block_m", "block_n", "cluster_m", "threads", "smem",
             "params", "layouts")
# The parameters every variant has; the others (the FP8 GEMM's scale_a,
# scale_b; a fused epilogue's alpha, bias, residual) are the extra
# arguments of a launch. All are bound by the names in the meta's params.
BASE_PARAMS = ("a", "b", "c", "c_ptr", "m", "n", "k")
# Relative error bound of the check: fp32 accumulation of 16-bit products,
# then one rounding to bf16 (2^-8) or fp16 (2^-11) of the output.
REL_ERROR_BOUND = {"bf16": 1e-2, "f16": 2e-3}
_LAUNCH_CACHE = 1024  # prepared launches (tensor-map triples) kept per variant


def meta_of(cfg, kernel):
    """The launch facts of a built kernel (``examples/hopper_gemm.build``):
    the parameters (names and kinds) and the A, B and C layouts come from
    the kernel."""
    a, b, c = cfg.layouts()
    meta = {"name": cfg.name, "dtype": cfg.dtype, "block_m": cfg.block_m,
            "block_n": cfg.block_n, "cluster_m": cfg.cluster_m,
            "threads": cfg.threads, "smem": kernel.smem_bytes,
            "params": [[name, p.kind] for name, p in kernel.params],
            "signature": [p.kind for _, p in kernel.params],
            "layouts": {"a": a.to_meta(), "b": b.to_meta(), "c": c.to_meta()}}
    if getattr(cfg, "fused", False) and cfg.epilogue.fn is None:
        meta["epilogue"] = cfg.epilogue.to_json()   # for reports; params bind it
    if getattr(cfg, "split_k", 1) > 1:
        # C is the fp32 workspace's slice 0 (ops/splitk_host.py); a plain
        # variant's meta is as it was.
        meta["split_k"] = cfg.split_k
    if getattr(cfg, "stream_k", False):
        # the grid is stream-K's (gemm_configs.stream_k_grid), and the
        # workspace and counters come from ops/streamk_host.py
        meta["stream_k"] = True
        if getattr(cfg, "sk_share", False):
            # every contributor sums a share: a launch of one-segment runs
            # (gemm_configs.stream_k_launch(share=True))
            meta["sk_share"] = True
    if getattr(cfg, "cluster_along_n", False):
        # the cluster's pair sits along N: the grid counts tile rows x
        # column pairs (a plain variant's meta is as it was)
        meta["cluster_along_n"] = True
    if getattr(cfg, "cluster_n", 1) > 1:
        # a 2x2 cluster: the grid counts units of 2x2 tiles, 4 CTAs each (a
        # plain variant's meta is as it was)
        meta["cluster_n"] = cfg.cluster_n
    if getattr(cfg, "ctas_per_sm", 1) > 1:
        # the persistent grid is this many CTAs per SM (a plain variant's
        # meta is as it was)
        meta["ctas_per_sm"] = cfg.ctas_per_sm
    return meta


def cluster_size(meta):
    """CTAs of a meta's cluster: ``cluster_m``, times ``cluster_n`` for a
    2x2 cluster."""
    return meta["cluster_m"] * meta.get("cluster_n", 1)


def stream_k_tile(meta):
    """The gemm_configs tile name of a stream-K meta (its time model's)."""
    suffix = ("c2x2" if meta.get("cluster_n", 1) > 1 else
              "c2n" if meta.get("cluster_along_n") else
              "c2" if meta["cluster_m"] == 2 else "")
    return f"{meta['block_m']}x{meta['block_n']}{suffix}"


def meta_units(meta, m, n):
    """Work units of an m x n output: a cluster's tiles
    (``gemm_variants.unit_tiles``) or one tile."""
    along_m_tiles, along_n_tiles = unit_tiles(meta["cluster_m"], meta.get("cluster_n", 1),
                                              meta.get("cluster_along_n", False))
    return (math.ceil(m / (meta["block_m"] * along_m_tiles))
            * math.ceil(n / (meta["block_n"] * along_n_tiles)))


class HopperGemm:
    """A loaded GEMM variant; calling it launches on torch's current stream."""

    def __init__(self, image, meta, persistent=True, device=None):
        from pipeline_mlir import runtime

        missing = [k for k in META_KEYS if k not in meta]
        if missing:
            raise ValueError(f"HopperGemm: meta lacks {missing}")
        self.meta = dict(meta)
        self.param_names = tuple(p[0] for p in meta["params"])
        absent = [p for p in BASE_PARAMS if p not in self.param_names]
        if absent:
            raise ValueError(f"HopperGemm: {meta['name']} has no parameters {absent}: not a "
                             f"GEMM of this launcher (its params: {list(self.param_names)})")
        # What a launch's extra_args name, in the kernel's order.
        self.extra_names = tuple(p for p in self.param_names if p not in BASE_PARAMS)
        self.layouts = {k: OperandLayout.from_meta(v) for k, v in meta["layouts"].items()}
        self.persistent = persistent
        self._runtime = runtime
        cl = cluster_size(meta)
        self.compiled = runtime.CompiledKernel.cached(
            image, name=meta["name"], params=[tuple(p) for p in meta["params"]],
            block=meta["threads"],
            cluster=(cl, 1, 1) if cl > 1 else None, smem=meta["smem"])
        self.device = device or runtime.default_device()
        self._ordinal = self.device.ordinal
        self.launcher = self.compiled.launcher(self.device)
        self.kernel = self.launcher.fn          # the runtime Kernel (attributes, occupancy)
        self.module = self.kernel.module
        self._shapes = {}   # (a.shape, b.shape, c.shape) -> (m, n, k, grid)
        # launch_key(...) -> PreparedLaunch, descriptors in the device's arena
        self.launches = runtime.LaunchCache(self.launcher, _LAUNCH_CACHE)
        self._ready_get = self.launches.lookup()
        self._resident = None
        self._dtype = None
        self._out_dtype = None   # torch dtype of C, known after the first checked call

    # -- checks, decided once per shape ---------------------------------------

    def _want(self):
        """The torch dtypes of a, b and c (from the layouts)."""
        if self._dtype is None:
            import torch

            self._dtype = tuple(getattr(torch, self.layouts[x].torch_dtype) for x in "abc")
        return self._dtype

    def _check(self, a, b, c):
        for (name, t), want in zip((("a", a), ("b", b), ("c", c)), self._want()):
            if t.dtype != want:
                raise TypeError(f"{self.meta['name']}: {name} must be {want}, got {t.dtype}")
            if t.dim() != 2 or not t.is_contiguous() or not t.is_cuda:
                raise ValueError(f"{self.meta['name']}: {name} must be a contiguous 2-D "
                                 "CUDA tensor")
            if t.get_device() != self.device.ordinal:
                raise ValueError(f"{self.meta['name']}: {name} is on {t.device}, but this "
                                 f"GEMM is loaded on GPU {self.device.ordinal}")
        (m, k), (n, kb) = a.shape, b.shape
        if kb != k or tuple(c.shape) != (m, n):
            raise ValueError(f"shapes do not match: a {tuple(a.shape)}, b {tuple(b.shape)} "
                             f"(N x K), c {tuple(c.shape)}")
        # TMA: every row stride a multiple of 16 bytes.
        for what, t, cols in (("K", a, k), ("N", c, n)):
            if cols * t.element_size() % 16:
                raise ValueError(f"{what} ({cols}) x {t.element_size()} bytes must be a "
                                 "multiple of 16 (TMA needs 16-byte aligned row strides)")
        if k == 0 or m == 0 or n == 0:
            raise ValueError("empty GEMM")
        return m, n, k

    def _plan(self, a, b, c):
        """(m, n, k, grid) for these tensors: the shape checks run once per
        shape; the per-call checks are dtype, contiguity and device (a call
        whose prepared launch is found skips even these: its key holds them)."""
        wa, wb, wc = self._want()
        o = self._ordinal
        if not (a.dtype is wa and b.dtype is wb and c.dtype is wc and a.is_cuda
                and b.is_cuda and c.is_cuda and a.is_contiguous() and b.is_contiguous()
                and c.is_contiguous() and a.get_device() == o and b.get_device() == o
                and c.get_device() == o):
            self._check(a, b, c)     # raises the message
        key = (a.shape, b.shape, c.shape)
        plan = self._shapes.get(key)
        if plan is None:
            m, n, k = self._check(a, b, c)
            plan = put_bounded(self._shapes, key, (m, n, k, self.grid(
                m, n, self.device.limits.multiprocessors, k)), _LAUNCH_CACHE)
        return plan

    def descriptors(self, a, b, c):
        """The three CUtensorMaps (TmaDescriptor objects) for these tensors."""
        rt, lay = self._runtime, self.layouts
        return tuple(rt.make_tma_descriptor(t, layout=lay[name])
                     for name, t in (("a", a), ("b", b), ("c", c)))

    def grid(self, m, n, sms, k=None):
        """Persistent: as many CTAs (clusters) as run at once (``sms`` x the
        meta's ``ctas_per_sm``, default 1), never more than there are work
        units; else one CTA (cluster) per unit. A unit is a tile (a
        cluster's pair of tiles, along M or, with ``meta['cluster_along_n']``,
        along N), or for split-K (``meta['split_k']``) one split of a tile:
        tiles x ``min(split_k, K blocks)`` units (tile_scheduler.split_k_count;
        with ``k`` unknown, the most splits). A stream-K variant
        (``meta['stream_k']``) runs ``gemm_configs.stream_k_grid`` CTAs."""
        meta = self.meta
        cl = cluster_size(meta)
        units = meta_units(meta, m, n)
        if meta.get("stream_k") and k is not None:
            from .gemm_configs import stream_k_grid

            return (stream_k_grid(units, -(-k // self.layouts["a"].k), self.stream_k_wave(sms),
                                  stream_k_tile(meta), meta.get("sk_share", False)) * cl,
                    1, 1)
        split = meta.get("split_k", 1)
        if split > 1:
            units *= split if k is None else min(split, -(-k // self.layouts["a"].k))
        if self.persistent:
            if self._resident is None:
                self._resident = (
                    sms * meta.get("ctas_per_sm", 1) if cl == 1 else
                    self.kernel.max_active_clusters((meta["threads"], 1, 1), (cl, 1, 1),
                                                    meta["smem"]))
            units = min(units, self._resident)
        return (units * cl, 1, 1)

    def stream_k_wave(self, sms):
        """Units (tiles, or a cluster's tile pairs) that run at once: the
        SMs, or the clusters resident together."""
        cl = cluster_size(self.meta)
        if cl == 1:
            return sms
        if self._resident is None:
            self._resident = self.kernel.max_active_clusters(
                (self.meta["threads"], 1, 1), (cl, 1, 1), self.meta["smem"])
        return max(1, min(sms // cl, self._resident))

    # -- the call ---------------------------------------------------------------

    def __call__(self, a, b, c=None, stream=None, sync=False):
        return self.launch(a, b, c, (), stream, sync)

    def launch_key(self, a, b, c, extra_args, stream):
        """What must be equal for a prepared launch to be reused: the
        tensors' addresses, shapes, dtypes and contiguity, the stream (int
        handle), the extra arguments' addresses. (An address names its
        device: CUDA's unified virtual addressing gives every device its own
        range, so a tensor moved to another GPU has another key.)"""
        key = (a.data_ptr(), b.data_ptr(), c.data_ptr(), a.shape, b.shape, c.shape,
               a.dtype, b.dtype, c.dtype, a.is_contiguous(), b.is_contiguous(),
               c.is_contiguous(), stream)
        if extra_args:
            if isinstance(extra_args, dict):
                # In the kernel's order, whatever the dict's: {bias: p,
                # residual: q} and its swap differ, two orders of one do not.
                # (A missing name keys None, which no prepared launch has.)
                key += tuple(x.data_ptr() if hasattr(x, "data_ptr") else x
                             for x in map(extra_args.get, self.extra_names))
            else:
                key += tuple(x.data_ptr() if hasattr(x, "data_ptr") else x for x in extra_args)
        return key

    def bind(self, descriptors, c, m, n, k, extra_args):
        """The kernel's arguments in its parameter order, each found by its
        name in the meta: the three tensor maps, ``c_ptr``, ``m, n, k`` and
        ``extra_args``, a dict by name ({'alpha': 0.5, 'bias': t}) or a
        tuple in the order of ``extra_names`` (tensors pass their
        addresses)."""
        if isinstance(extra_args, dict):
            given = extra_args
        else:
            if len(extra_args) != len(self.extra_names):
                raise ValueError(f"{self.meta['name']}: takes {list(self.extra_names)} after "
                                 f"m, n, k; got {len(extra_args)} extra arguments")
            given = dict(zip(self.extra_names, extra_args))
        unknown = sorted(set(given) - set(self.extra_names))
        missing = sorted(set(self.extra_names) - set(given))
        if unknown or missing:
            raise ValueError(f"{self.meta['name']}: its extra parameters are "
                             f"{list(self.extra_names)}; missing {missing}, unknown {unknown}")
        named = dict(zip(("a", "b", "c"), descriptors), c_ptr=c.data_ptr(), m=m, n=n, k=k)
        named.update((name, x.data_ptr() if hasattr(x, "data_ptr") else x)
                     for name, x in given.items())
        return tuple(named[name] for name in self.param_names)

    def launch(self, a, b, c, extra_args, stream, sync):
        """Launch on ``a``, ``b`` into ``c`` (allocated if None), with
        ``extra_args`` (the FP8 GEMM's scales, a fused epilogue's alpha,
        bias, residual: a dict by parameter name, or a tuple in the order
        of ``extra_names``; see ``bind``); returns ``c``."""
        if not sync and self._out_dtype is not None:
            try:
                if c is None:
                    c = a.new_empty((a.size(0), b.size(0)), dtype=self._out_dtype)
                # (an int is a handle already: a stream-K or split-K launch
                # passes its caller's; stream_address would ask it for three
                # attributes first)
                p = self._ready_get(self.launch_key(
                    a, b, c, extra_args, current_stream_handle(self._ordinal) if stream is None
                    else stream if type(stream) is int and stream >= 0
                    else stream_address(stream)))
            except Exception:  # not tensors, a bad stream...: the checked path says what
                p = None
            if p is not None:
                # LaunchCache.fire, inlined: a stream that may be capturing
                # (not the legacy default stream, 0) pins the launch's slots.
                h = p.holder
                if p.stream and h.pinned != h.arena.pin_epoch:
                    self.launches.pin_if_capturing(p)
                self.launcher.fire(p)
                return c
        return self._launch_checked(a, b, c, extra_args, stream, sync)

    def _launch_checked(self, a, b, c, extra_args, stream, sync):
        """Every check, the tensor maps and the prepared launch (kept for
        the next call with the same key), then the launch."""
        if c is None:
            import torch

            c = torch.empty(a.shape[0], b.shape[0], device=a.device, dtype=self._want()[2])
        m, n, k, grid = self._plan(a, b, c)
        self._out_dtype = self._want()[2]
        s = current_stream_handle(self._ordinal) if stream is None else stream_address(stream)
        key = self.launch_key(a, b, c, extra_args, s)
        p = self.launches.get(key)
        if p is None:
            # The raw launch takes addresses: tensors among the extra
            # arguments (checked by the op that passes them) pass their
            # data pointers.
            p = self.launches.prepare(key, self.bind(self.descriptors(a, b, c), c, m, n, k,
                                                     extra_args), grid, s)
        if sync:
            self.launcher.launch(p.values, grid, s, True, None)
        else:
            self.launches.fire(p)
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
