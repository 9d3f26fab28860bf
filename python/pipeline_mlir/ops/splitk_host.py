"""Host side of split-K: a split-K GEMM variant (kernels/hopper_gemm.py,
``split_k = S``) writes S fp32 partial products into an (S, M, N) fp32
workspace; the reduction (kernels/splitk_reduce.py) sums them, split 0
first, into C on the same stream. Needs only the runtime and torch.

    g = SplitKGemm(HopperGemm(image, meta), reducers, device)
    c = g.launch(a, b, None, (), None, False)

Both launches are prepared once per (tensors, stream) and fired as the
plain GEMM's are: the GEMM through its HopperGemm (its LaunchCache), the
reduction through a LaunchCache of its own. The workspace is kept per
(device, stream, S, M, N) (``_WORKSPACES`` of them at most, the oldest
dropped), so a repeated call finds the same address and its prepared
launches; two streams never share one, since the reduction of one call
could otherwise read the partials of another.
"""

import math

from pipeline_mlir.runtime.bounded import put_bounded
from pipeline_mlir.runtime.fastlaunch import current_stream_handle
from pipeline_mlir.runtime.launch import stream_address

K_BLOCK = 64          # K per k-block of the 16-bit GEMM (its a-tile's k)
_WORKSPACES = 8
_LAUNCH_CACHE = 1024
REDUCE_BLOCK = 256    # kernels/splitk_reduce.BLOCK (in the meta as threads)
REDUCE_WAVES = 4      # CTAs per SM of the reduction's grid (a grid-stride loop)
_workspaces = {}      # (ordinal, stream, S, m, n) -> (S, m, n) fp32 tensor and its [0]


def workspace(a, splits, m, n, stream):
    """The (splits, m, n) fp32 workspace of this device and stream, and
    its slice 0 (what the GEMM is given as C: the kernel addresses slice s
    at ``c_ptr + s m n``)."""
    key = (a.get_device(), stream, splits, m, n)
    found = _workspaces.get(key)
    if found is None:
        import torch

        ws = torch.empty((splits, m, n), device=a.device, dtype=torch.float32)
        found = put_bounded(_workspaces, key, (ws, ws[0]), _WORKSPACES)
    return found


class Reducer:
    """A loaded reduction (one S, one output dtype) with its prepared launches."""

    def __init__(self, image, meta, device):
        from pipeline_mlir import runtime

        self.meta = dict(meta)
        self.compiled = runtime.CompiledKernel.cached(
            image, name=meta["name"], params=[tuple(p) for p in meta["params"]],
            block=meta["threads"], smem=meta.get("smem", 0))
        self.launcher = self.compiled.launcher(device)
        self.launches = runtime.LaunchCache(self.launcher, _LAUNCH_CACHE)
        self._get = self.launches.lookup()
        self._sms = device.limits.multiprocessors

    def grid(self, groups):
        return (max(1, min(math.ceil(groups / REDUCE_BLOCK), REDUCE_WAVES * self._sms)), 1, 1)

    def launch(self, ws, out, groups, n, extra, stream, sync):
        """``extra``: the epilogue's arguments in the kernel's order
        (tensors pass their addresses)."""
        extra = tuple(x.data_ptr() if hasattr(x, "data_ptr") else x for x in extra)
        key = (ws.data_ptr(), out.data_ptr(), groups, n, stream) + extra
        p = self._get(key)
        if p is None:
            p = self.launches.prepare(key, (ws.data_ptr(), out.data_ptr(), groups, n, *extra),
                                      self.grid(groups), stream)
        if sync:
            self.launcher.launch(p.values, self.grid(groups), stream, True, None)
        else:
            self.launches.fire(p)


class SplitKGemm:
    """A split-K variant as ``pipeline_mlir.gemm`` calls it: ``launch(a, b,
    out, extra_args, stream, sync)`` like ``HopperGemm.launch``, running the
    GEMM into the workspace and the reduction into ``out``.

    ``reducer(S)`` returns the ``Reducer`` summing S splits: S is the
    variant's, or fewer when K has fewer K blocks than splits
    (``tile_scheduler.split_k_count``: the kernel then runs that many
    splits, every one non-empty). A fused epilogue runs in the reduction;
    ``extra_names`` are its parameters (``Epilogue.param_names``), the
    extra arguments of a launch."""

    def __init__(self, gemm, reducer, out_dtype, extra_names=(), k_block=K_BLOCK):
        self.gemm = gemm
        self.meta = gemm.meta
        self.splits = gemm.meta["split_k"]
        # K of the GEMM's k-block (the FP8 GEMM's is 128): the splits it
        # really runs (tile_scheduler.split_k_count) count them.
        self._k_block = k_block
        self.extra_names = tuple(extra_names)
        self._reducer = reducer
        self._reducers = {}
        self._out_dtype = out_dtype
        self._ordinal = gemm.device.ordinal

    def reducer(self, splits):
        found = self._reducers.get(splits)
        if found is None:
            found = self._reducers[splits] = self._reducer(splits)
        return found

    def _check_out(self, a, b, out):
        m, n = a.shape[0], b.shape[0]
        if n % 8:
            # The plain path's rule, which its 16-bit C tensor map enforces;
            # here C is fp32 (4-byte rows pass), and the reduction's groups
            # of 8 must not straddle rows.
            raise ValueError(f"N ({n}) x 2 bytes must be a multiple of 16 (TMA needs 16-byte "
                             "aligned row strides)")
        if out is None:
            return a.new_empty((m, n), dtype=self._out_dtype)
        if (out.dtype is not self._out_dtype or tuple(out.shape) != (m, n)
                or not out.is_contiguous() or out.device != a.device):
            raise ValueError(f"gemm: out must be a contiguous {m} x {n} {self._out_dtype} "
                             f"tensor on {a.device} (the reduction of {self.meta['name']} "
                             f"writes it whole), got {tuple(out.shape)} {out.dtype} on "
                             f"{out.device}{'' if out.is_contiguous() else ', not contiguous'}")
        if out.data_ptr() % 16:
            raise ValueError(f"gemm: out must start on a 16-byte boundary (the reduction of "
                             f"{self.meta['name']} stores 8 values at once), got address "
                             f"{out.data_ptr():#x}: pass a freshly allocated tensor")
        return out

    def _extra(self, extra_args):
        """The epilogue's arguments in the kernel's order, from a dict by
        name or a tuple in ``extra_names``' order."""
        if isinstance(extra_args, dict):
            unknown = sorted(set(extra_args) - set(self.extra_names))
            missing = sorted(set(self.extra_names) - set(extra_args))
            if not unknown and not missing:
                return tuple(extra_args[name] for name in self.extra_names)
        elif len(extra_args or ()) == len(self.extra_names):
            return tuple(extra_args or ())
        raise ValueError(f"{self.meta['name']}: its reduction takes the extra arguments "
                         f"{list(self.extra_names)}, got {extra_args!r}")

    def launch(self, a, b, out, extra_args, stream, sync, gemm_args=()):
        """``gemm_args``: the GEMM kernel's own extra arguments (the FP8
        GEMM's scales: fp8_gemm_host.Fp8SplitKGemm), ``extra_args`` the
        reduction's."""
        extra = self._extra(extra_args) if (extra_args or self.extra_names) else ()
        out = self._check_out(a, b, out)
        (m, k), n = a.shape, b.shape[0]
        s = current_stream_handle(self._ordinal) if stream is None else stream_address(stream)
        splits = min(self.splits, -(-k // self._k_block))
        ws, first = workspace(a, splits, m, n, s)
        # The GEMM checks a and b (and the workspace slice as C).
        self.gemm.launch(a, b, first, gemm_args, s, False)
        self.reducer(splits).launch(ws, out, m * n // 8, n, extra, s, sync)
        return out
