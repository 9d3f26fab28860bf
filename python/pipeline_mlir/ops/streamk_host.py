"""Host side of stream-K: a stream-K GEMM variant (kernels/hopper_gemm.py,
``stream_k=True``) takes three more arguments than a plain one: its fp32
workspace (two partial tiles per CTA), its arrival counters (one per
consumer warp of every stream-K tile, zero between launches: each tile's
last contributor resets the ones it waited on), ``sk_ctas``, how many CTAs share
the stream-K run, and ``sk_rounds``, the whole-tile rounds before it
(``gemm_configs.stream_k_launch``, once per shape). Needs only the runtime
and torch.

    g = StreamKGemm(HopperGemm(image, meta))
    c = g.launch(a, b, None, (), None, False)

One launch, prepared and fired as the plain GEMM's (its HopperGemm and
LaunchCache; the workspace and counters are two more addresses in the
launch's key). Both buffers are kept per (device, stream) and variant
(``_BUFFERS`` sets at most, the oldest dropped), sized for the largest
grid, so every shape on a stream shares them and a repeated call finds
the same addresses and its prepared launch. Two streams never share a set:
kernels on two streams may run at once, and their partials and counts must
not meet.
"""

from pipeline_mlir.runtime.bounded import put_bounded
from pipeline_mlir.runtime.fastlaunch import current_stream_handle
from pipeline_mlir.runtime.launch import stream_address

_BUFFERS = 8
_buffers = {}    # (ordinal, stream, block_m, block_n, sms) -> (workspace, counters)
WARPS_PER_TILE_ROW = 4     # consumer warps per 64-row warpgroup (one counter each)


def buffers(a, meta, sms, stream):
    """(workspace, counters) of this device, stream and tile shape: 2 x
    ``sms`` fp32 tiles (two slots per CTA), and the counters of ``2 sms``
    stream-K tiles (the leftover of the full waves, and at most one wave
    more: gemm_configs.stream_k_launch)."""
    bm, bn = meta["block_m"], meta["block_n"]
    key = (a.get_device(), stream, bm, bn, sms)
    found = _buffers.get(key)
    if found is None:
        import torch

        ws = torch.empty(2 * sms * bm * bn, device=a.device, dtype=torch.float32)
        warps = bm // 64 * WARPS_PER_TILE_ROW
        counters = torch.zeros(2 * sms * warps, device=a.device, dtype=torch.int32)
        found = put_bounded(_buffers, key, (ws, counters), _BUFFERS)
    return found


def _with_launch_grid(gemm, spread):
    """A view of ``gemm`` (its kernel, launcher and prepared launches)
    whose grid is that of the ``spread`` kind of launch
    (gemm_configs.stream_k_launch): ``HopperGemm.grid`` is the model's
    kind's, which for fewer tiles than SMs may be fewer CTAs than another
    kind's ``sk_ctas`` (the even kind's runs cover the whole wave)."""
    import copy

    from .gemm_configs import K_BLOCK, stream_k_launch
    from .hopper_gemm_host import cluster_size, meta_units, stream_k_tile

    view = copy.copy(gemm)
    view._shapes = {}     # its own per-shape plans (m, n, k, grid)

    def grid(m, n, sms, k=None):
        meta = view.meta
        cl = cluster_size(meta)
        units = meta_units(meta, m, n)
        return (stream_k_launch(units, -(-k // K_BLOCK), view.stream_k_wave(sms),
                                stream_k_tile(meta), spread,
                                meta.get("sk_share", False))[0] * cl, 1, 1)

    view.grid = grid
    return view


class StreamKGemm:
    """A stream-K variant as ``pipeline_mlir.gemm`` calls it: ``launch(a, b,
    out, extra_args, stream, sync)`` like ``HopperGemm.launch``, with the
    workspace and counters of the call's stream as the kernel's two extra
    arguments."""

    def __init__(self, gemm, spread=None):
        if spread is not None:
            gemm = _with_launch_grid(gemm, spread)
        self.gemm = gemm
        self.spread = spread     # gemm_configs.stream_k_launch's (None: the model's)
        self.meta = gemm.meta
        self.extra_names = ()
        self._ordinal = gemm.device.ordinal
        self._sms = gemm.device.limits.multiprocessors
        self._shares = {}    # (m, n, k) -> (sk_ctas, sk_rounds)
        # A profiling build's stamp buffer (kernels/streamk_timeline.py;
        # benchmarks/gemm/streamk_timeline.py sets it)
        self.timeline = None

    def share(self, m, n, k):
        """``(sk_ctas, sk_rounds)`` of this shape's launch."""
        found = self._shares.get((m, n, k))
        if found is None:
            from .gemm_configs import K_BLOCK, stream_k_launch
            from .hopper_gemm_host import meta_units, stream_k_tile

            units = meta_units(self.meta, m, n)
            found = stream_k_launch(units, -(-k // K_BLOCK), self.gemm.stream_k_wave(self._sms),
                                    stream_k_tile(self.meta), self.spread,
                                    self.meta.get("sk_share", False))[1:]
            put_bounded(self._shares, (m, n, k), found, 4096)
        return found

    def launch(self, a, b, out, extra_args, stream, sync):
        if extra_args:
            raise ValueError(f"{self.meta['name']}: a stream-K variant takes no epilogue "
                             "arguments (a fused call runs the plain variant)")
        s = current_stream_handle(self._ordinal) if stream is None else stream_address(stream)
        ws, counters = buffers(a, self.meta, self._sms, s)
        sk_ctas, sk_rounds = self.share(a.shape[0], b.shape[0], a.shape[1])
        args = (ws, counters, sk_ctas, sk_rounds)
        if "sk_timeline" in getattr(self.gemm, "extra_names", ()):
            if self.timeline is None:
                raise ValueError(f"{self.meta['name']}: a timeline build; set .timeline to "
                                 "its stamp buffer (benchmarks/gemm/streamk_timeline.py)")
            args += (self.timeline,)
        return self.gemm.launch(a, b, out, args, s, sync)
