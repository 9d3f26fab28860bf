"""Split-K (``choose_split``): an output of too few tiles to fill the SMs with
a long K (4096 x 256 x 9000: 32 tiles of 128x256, 128 of 64x128 at 0.7
efficiency) cuts each tile's K into S contiguous ranges, S x tiles work
units, each storing an fp32 partial tile into an (S, M, N) workspace that a
second kernel sums in a fixed order (kernels/splitk_reduce.py: bitwise the
same every run). The rule is a time model over (tiles, waves, K per unit,
workspace traffic, the second launch), ``estimate_time``; it takes split-K
only where the model says it is ``SPLIT_MARGIN`` faster than the plain
pick, so the shapes that fill the GPU keep their kernels. Its constants are
H100 figures, not measured fits: docs/gemm.md says what is still to
measure.

Callers import these names from ``gemm_configs``, which re-exports them;
``gemm_configs.choose`` and ops/fp8_configs.py call ``choose_split``
through that name, so that a patch of ``gemm_configs.choose_split``
reaches both picks.
"""

import math

from .gemm_cost import EFFICIENCY, K_BLOCK, units_of
from .gemm_variants import SPLIT_TILES, SPLITS, tile

# -- the time model of split-K ------------------------------------------------------
# H100 SXM figures (the H200 has the same SMs and more bandwidth): what one
# SM's wgmma stream sustains on a 128x256 tile (~790 TFLOPS over 132 SMs,
# the measured best of docs/gemm.md), what DRAM and L2 sustain (a workspace
# that fits in L2 with room to spare is written and read back there: the
# reduction runs right behind the GEMM), the cost of a unit's pipeline fill
# and epilogue, and of the second kernel's launch and its gap behind the GEMM.
SM_FLOPS = 6.0e12
DRAM_BYTES_PER_S = 3.0e12
L2_BYTES_PER_S = 7.0e12
L2_RESIDENT_BYTES = 24 << 20     # about half the H100's 50 MB L2
UNIT_OVERHEAD_S = 1.0e-6
REDUCE_LAUNCH_S = 2.0e-6
# EFFICIENCY, except for the one-consumer-warpgroup tiles on a long K: one
# warpgroup per SM issues every wgmma, so the tensor cores wait on it. The
# 64x128 tile's measured rate on long-K shapes spans 0.45-0.86 of the
# 128x256 tile's 705 TFLOP/s: 1024 x 1024 x 16384 ran at 604 TFLOP/s, 256 x
# 4096 x 14336 at 527 (docs/gemm.md, sweep), the narrow shapes with K near
# 9000 at 0.54-0.83x cuBLAS; 0.6 is inside that span, not a fit.
TIME_EFFICIENCY = dict(EFFICIENCY, **{"64x128": 0.6, "64x256": 0.7})
MIN_SPLIT_K_BLOCKS = 8       # K per split: below this a unit is mostly its fill and epilogue
SPLIT_MARGIN = 0.85          # split only when the model says >= 15% faster


def estimate_time(variant, m, n, k, sms, splits=1, dram_bytes_per_s=DRAM_BYTES_PER_S):
    """Modelled seconds of ``variant`` (a plain tile name) with ``splits``
    K splits: waves of units, each its share of K blocks at the tile's
    efficiency plus a fixed fill/epilogue cost, but no less than reading
    the operands once; with splits > 1 also the fp32 workspace written and
    read back and the reduction's launch. ``dram_bytes_per_s``: the GPU's
    DRAM rate (the FP8 pick passes the H200's, where it was measured)."""
    bm, bn = tile(variant)
    kb = math.ceil(k / K_BLOCK)
    per_unit = math.ceil(kb / splits)
    waves = math.ceil(units_of(variant, m, n, splits) / sms)
    t = waves * (2 * bm * bn * K_BLOCK * per_unit / (SM_FLOPS * TIME_EFFICIENCY[variant])
                 + UNIT_OVERHEAD_S)
    # A floor: A and B read from DRAM at least once (a 128 x 8192 x 8192
    # product streams 134 MB of B, whatever the split).
    t = max(t, (m + n) * k * 2 / dram_bytes_per_s)
    if splits > 1:
        workspace = splits * m * n * 4
        rate = L2_BYTES_PER_S if workspace <= L2_RESIDENT_BYTES else dram_bytes_per_s
        t += 2 * workspace / rate + 2 * m * n / dram_bytes_per_s + REDUCE_LAUNCH_S
    return t


def choose_split(m, n, k, sms, plain, tiles=SPLIT_TILES, splits=SPLITS,
                 dram_bytes_per_s=DRAM_BYTES_PER_S):
    """The split-K variant for this shape, or None: only where the plain
    pick ``plain`` runs fewer units than there are SMs (one part-empty
    wave), over every split tile and S that leaves each split at least
    ``MIN_SPLIT_K_BLOCKS``, the one of least ``estimate_time``, if it beats
    the plain pick's by ``SPLIT_MARGIN``. ``tiles``, ``splits`` and
    ``dram_bytes_per_s``: the candidates and the DRAM rate of another
    table's use of this rule (ops/fp8_configs.py)."""
    if units_of(plain, m, n) >= sms:
        return None
    kb = math.ceil(k / K_BLOCK)
    best, best_t = None, SPLIT_MARGIN * estimate_time(plain, m, n, k, sms,
                                                      dram_bytes_per_s=dram_bytes_per_s)
    for t in tiles:
        for s in splits:
            if kb < s * MIN_SPLIT_K_BLOCKS:
                break
            est = estimate_time(t, m, n, k, sms, s, dram_bytes_per_s)
            if est < best_t:
                best, best_t = f"{t}_sk{s}", est
    return best
