"""The streaming benchmarks' kernels and sweep. The kernels are the examples'
(examples/copy_ring.py, examples/pingpong.py); this module fixes the
benchmark's parameters and names.

Streaming copy, one kernel per (kind, stages, tile): the copy ring with 4
consumer warps (warps 0-3), producer warps 4 (``tma``, ``tma2d``) or 4-7
(``async``, ``cpasync``), one arrive per warp, persistent CTAs (grid = #SMs x
CTAs/SM) striding over the tiles. ``tma`` is the same shape as the
hand-written ``reference/tma_pipe.cu``; ``tma2d`` loads each stage with a 2-D
tensor TMA of a ``tile / 1024 x 256`` int32 box, as CuTe DSL's kernel
(cute_streaming.py) does, and takes the tensor map of ``src`` instead of
``src`` (``signature``, ``tensor_map``).

Handoff latency: the ping-pong, one kernel per stages.
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "examples"))
import copy_ring  # noqa: E402
import pingpong  # noqa: E402

KINDS = copy_ring.KINDS
CONSUMER_WARPS = 4
PRODUCER_WARPS = 4  # async / cpasync; tma / tma2d have one


def block_threads(kind):
    return copy_ring.block_threads(kind, PRODUCER_WARPS, CONSUMER_WARPS)


def stream_name(kind, stages, tile):
    return f"stream_{kind}_s{stages}_t{tile // 1024}k"


def signature(kind):
    """The streaming kernel's parameters, as the runtime declares them."""
    return ["tma" if kind == "tma2d" else "ptr", "ptr", "i32"]


def tensor_map(kind, tile):
    """How the host encodes ``tma2d``'s tensor map of ``src`` (None for the
    other kinds): the buffer as a row-major ``(bytes / 1024, 256)`` int32
    matrix, one ``tile / 1024 x 256`` box per tile, no swizzle."""
    if kind != "tma2d":
        return None
    cols = copy_ring.TMA2D_COLS
    return {"dtype": "int32", "cols": cols, "box": [tile // copy_ring.TMA2D_ROW_BYTES, cols],
            "swizzle": None}


def build_stream(kind, stages, tile, chip="sm_90a", min_ctas_per_sm=None):
    """The streaming-copy kernel; params (src, dst, ntiles), ``tma2d``:
    (tensor map of src, dst, ntiles). The sweep leaves ``min_ctas_per_sm``
    unset (one cubin serves every CTAs/SM it launches)."""
    return copy_ring.build(kind, stages, tile, producer_warps=PRODUCER_WARPS,
                           consumer_warps=CONSUMER_WARPS, schedule="persistent",
                           per_warp=True, chip=chip, name=stream_name(kind, stages, tile),
                           min_ctas_per_sm=min_ctas_per_sm)


def build_pingpong(stages, chip="sm_90a"):
    """Producer warp 0 -> consumer warp 1, no payload; params (n, out)."""
    return pingpong.build(stages, chip=chip)


def stream_configs():
    """(kind, stages, tile) of the sweep: stages 1-6 x tiles 16/32 KiB
    (64 KiB for stages <= 3), every kind."""
    out = []
    for kind in KINDS:
        for stages in range(1, 7):
            for tile in (16384, 32768, 65536):
                if stages * tile > 200 * 1024:
                    continue
                out.append((kind, stages, tile))
    return out
