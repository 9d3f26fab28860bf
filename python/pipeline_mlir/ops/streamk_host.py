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

Per call nothing is allocated, zeroed or synchronized: the counters are
zeroed once, when their set is made, and the kernel leaves them zero. A
repeated call (same stream and operand shapes) finds its four launch
arguments, as integers, with one lookup (``StreamKGemm._calls``, at most
``_CALLS`` per variant); an entry is used only while its set is held
(``_Set.live``): a set dropped from ``_BUFFERS`` lets go of its tensors
and is never launched with again.
"""

from pipeline_mlir.runtime.bounded import put_bounded
from pipeline_mlir.runtime.fastlaunch import current_stream_handle
from pipeline_mlir.runtime.launch import stream_address

_BUFFERS = 8
_buffers = {}    # (ordinal, stream, block_m, block_n, sms) -> _Set
_CALLS = 1024    # StreamKGemm._calls entries per variant
WARPS_PER_TILE_ROW = 4     # consumer warps per 64-row warpgroup (one counter each)


class _Set:
    """One (workspace, counters) pair of ``_buffers`` and their addresses;
    ``live`` until dropped from it (then the tensors are let go)."""

    __slots__ = ("ws", "counters", "addresses", "live")

    def __init__(self, ws, counters):
        self.ws, self.counters, self.live = ws, counters, True
        self.addresses = (ws.data_ptr(), counters.data_ptr())

    def __iter__(self):    # ws, counters = set (the GPU suite's counter checks)
        return iter((self.ws, self.counters))

    def drop(self):
        self.ws = self.counters = None
        self.live = False


def buffer_set(a, meta, sms, stream):
    """The ``_Set`` of this device, stream and tile shape: 2 x ``sms``
    fp32 tiles (two slots per CTA), and the counters of ``2 sms`` stream-K
    tiles (the leftover of the full waves, and at most one wave more:
    gemm_configs.stream_k_launch), zeroed once."""
    bm, bn = meta["block_m"], meta["block_n"]
    key = (a.get_device(), stream, bm, bn, sms)
    found = _buffers.get(key)
    if found is None:
        import torch

        ws = torch.empty(2 * sms * bm * bn, device=a.device, dtype=torch.float32)
        warps = bm // 64 * WARPS_PER_TILE_ROW
        counters = torch.zeros(2 * sms * warps, device=a.device, dtype=torch.int32)
        found = _Set(ws, counters)
        while len(_buffers) >= _BUFFERS:
            _buffers.pop(next(iter(_buffers))).drop()    # the oldest
        _buffers[key] = found
    return found


def buffers(a, meta, sms, stream):
    """(workspace, counters) of this device, stream and tile shape
    (``buffer_set``)."""
    found = buffer_set(a, meta, sms, stream)
    return found.ws, found.counters


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
        # (stream, a.shape, b.shape) -> (_Set, its addresses + (sk_ctas, sk_rounds))
        self._calls = {}
        # A profiling build's stamp buffer (kernels/streamk_timeline.py;
        # benchmarks/gemm/streamk_timeline.py sets it)
        self.timeline = None
        self._timeline_build = "sk_timeline" in getattr(gemm, "extra_names", ())

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
        try:
            key = (s, a.shape, b.shape)
            found = self._calls.get(key)
        except (AttributeError, TypeError):   # not tensors: the launch's checks say so
            found = key = None
        if found is not None and found[0].live:
            args = found[1]
        else:
            held = buffer_set(a, self.meta, self._sms, s)
            args = held.addresses + self.share(a.shape[0], b.shape[0], a.shape[1])
            if key is not None:
                put_bounded(self._calls, key, (held, args), _CALLS)
        if self._timeline_build:
            if self.timeline is None:
                raise ValueError(f"{self.meta['name']}: a timeline build; set .timeline to "
                                 "its stamp buffer (benchmarks/gemm/streamk_timeline.py)")
            args += (self.timeline,)
        return self.gemm.launch(a, b, out, args, s, sync)
