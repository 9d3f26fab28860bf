"""The attention forward's configurations and the pick among them: the
tuned configuration of ``pipeline_mlir.kernels.attention_fwd`` that
``pipeline_mlir.attention`` runs for a call's shape (``pick``), and every
configuration the pick can return (``VARIANTS``, what the kernel cache
builds).

Per head dim (``BEST``, chosen by the sweep of docs/attention.md,
``benchmarks/attention/variants.py``): d = 64 runs three consumer
warpgroups of 64 rows (a 192-row tile) with 160 registers each: its GEMMs
are small, so more warpgroups hide the softmax; it also walks its work
units in L2-sized head sections (causal: 467 against 431 TFLOP/s on the
H100). d = 128 and 256 run the defaults (two ping-pong consumer warpgroups
with intra-warpgroup overlap).

Two features on top, picked by the shape (``pick``, a rule, not a table of
shapes):

- GQA packing (``pack_gqa``): with g = heads / kv_heads in 2, 4, 8, a tile
  holds block_m / g query positions of each of the group's g heads, so each
  K/V block a CTA loads serves the whole group at once. Picked when it
  fills the tiles better than one head per tile: where seqlen_q is not a
  multiple of the tile, the packed tile wastes at most block_m / g
  positions' rows instead of block_m (FlashAttention-3's criterion, tile
  efficiency below 0.9 of the packed one: short or ragged prefill chunks).
- short-sequence tiles (``SHORT``): 64-row tiles, one consumer warpgroup,
  two CTAs per SM (registers and shared memory sized for it), for d 64 and
  128. Picked when the plain configuration has fewer work units than SMs,
  or its rows see few keys (``SHORT_KEYS`` on average): then a tile is a
  handful of key blocks, and its fixed costs (the Q load, the first block's
  unoverlapped softmax, the last P V, the epilogue) are what a second CTA
  on the SM hides.
"""

import functools
import math

from pipeline_mlir.chip_limits import MULTIPROCESSORS, WGMMA_M

HEAD_DIMS = (64, 128, 256)
BEST = {64: dict(consumer_warpgroups=3, consumer_registers=160, l2_sections=True),
        128: dict(), 256: dict()}
# Query heads per K/V head a tile may pack (AttentionConfig.pack_gqa).
GROUPS = (2, 4, 8)
# The short-sequence configuration per head dim: 64-row tiles and two CTAs
# per SM, which needs at most 32768 registers (producer 24 + consumer 232,
# x 128 threads) and about 113 KiB of shared memory per CTA: d 128 takes
# 64-key blocks (Q 2 x 16 KiB + K/V 2 stages x 32 KiB), d 64 keeps 128.
# d 256 has none: its O accumulator alone is 128 registers a thread and Q
# plus one K/V stage fill the half SM.
SHORT = {64: dict(consumer_warpgroups=1, pingpong=False, consumer_registers=232,
                  ctas_per_sm=2),
         128: dict(consumer_warpgroups=1, pingpong=False, consumer_registers=232,
                   ctas_per_sm=2, block_n=64)}
# Average keys per query row at or below which a tile's fixed costs weigh
# enough that the short configuration is picked (8 key blocks of 128).
SHORT_KEYS = 1024
# Tile efficiency of the plain tiles below this fraction of the packed
# ones' picks packing (FlashAttention-3's rule).
PACK_EFFICIENCY = 0.9


def _check_head_dim(head_dim):
    if head_dim not in BEST:
        raise ValueError(f"attention: head_dim must be one of {HEAD_DIMS}, got {head_dim}")


def variant(head_dim, causal, pack_gqa=0, short=False):
    """(name, AttentionConfig overrides) for this head dim and causality,
    packing ``pack_gqa`` query heads per tile (0: none) and in the short-
    sequence configuration with ``short``."""
    _check_head_dim(head_dim)
    if pack_gqa not in (0,) + GROUPS:
        raise ValueError(f"attention: pack_gqa must be 0 or one of {GROUPS}, got {pack_gqa}")
    if short and head_dim not in SHORT:
        raise ValueError(f"attention: no short-sequence configuration for head_dim "
                         f"{head_dim} (only {sorted(SHORT)})")
    overrides = dict(head_dim=head_dim, causal=bool(causal),
                     **(SHORT[head_dim] if short else BEST[head_dim]))
    if pack_gqa:
        overrides["pack_gqa"] = pack_gqa
    name = (f"d{head_dim}{'c' if causal else ''}{f'_gqa{pack_gqa}' if pack_gqa else ''}"
            f"{'_short' if short else ''}")
    return name, overrides


def _block_m(head_dim, short):
    over = SHORT[head_dim] if short else BEST[head_dim]
    return WGMMA_M * over.get("consumer_warpgroups", 2)


def _fill(rows, block):
    """Fraction of the tiles' rows that hold query rows."""
    return rows / (math.ceil(rows / block) * block)


def mean_keys(causal, seqlen_q, seqlen_k):
    """Keys a query row sees on average. Bottom-right causal: row r sees
    max(0, r + 1 + seqlen_k - seqlen_q) keys (never more than seqlen_k, as
    r < seqlen_q), an arithmetic series over the rows that see any."""
    if not causal:
        return seqlen_k
    offset = seqlen_k - seqlen_q
    first = max(0, -offset)                  # rows before it see no key
    seen = seqlen_q - first
    return (first + 1 + offset + seqlen_k) * seen / 2 / seqlen_q


@functools.lru_cache(maxsize=4096)   # every call of the op asks; the result is shared
def pick(head_dim, causal, batch, heads, heads_kv, seqlen_q, seqlen_k,
         sms=MULTIPROCESSORS["sm_90a"]):
    """(name, AttentionConfig overrides) for a call of this shape: the
    head dim's configuration, packed over the GQA group and/or in the
    short-sequence configuration by the rules of the module doc (the
    overrides are shared between calls: read them, do not change them)."""
    _check_head_dim(head_dim)
    group = heads // heads_kv if heads_kv and heads % heads_kv == 0 else 1
    short = head_dim in SHORT and (
        batch * heads * math.ceil(seqlen_q / _block_m(head_dim, False)) < sms
        or mean_keys(causal, seqlen_q, seqlen_k) <= SHORT_KEYS)
    bm = _block_m(head_dim, short)
    pack = 0
    if group in GROUPS and bm % group == 0:
        plain, packed = _fill(seqlen_q, bm), _fill(seqlen_q * group, bm)
        if plain < PACK_EFFICIENCY * packed:
            pack = group
    return variant(head_dim, causal, pack, short)


VARIANTS = dict(variant(d, c, g, short)
                for d in HEAD_DIMS for c in (False, True)
                for g in (0,) + GROUPS for short in (False, True)
                if not short or d in SHORT)


# The backward's main kernel (kernels/attention_bwd.py) per head dim: one
# configuration each. d 64 and 128: 128 keys per CTA (64 per consumer
# warpgroup) over 64-row query blocks, two stages of Q and dO. d 256: 64
# keys per CTA, the two consumer warpgroups splitting dK, dV and dQ by
# columns, and one stage of Q and dO (two would not fit the 227 KiB of
# shared memory next to K, V and the fp32 dQ tiles).
BWD_HEAD_DIMS = (64, 128, 256)
BWD_STAGES = {64: 2, 128: 2, 256: 1}


def bwd_variant(head_dim, causal):
    """(name, AttentionBwdConfig overrides) of the backward for this head
    dim and causality."""
    if head_dim not in BWD_HEAD_DIMS:
        raise ValueError(f"attention backward: head_dim must be one of {BWD_HEAD_DIMS}, "
                         f"got {head_dim}")
    overrides = dict(head_dim=head_dim, causal=bool(causal))
    if BWD_STAGES[head_dim] != 2:            # AttentionBwdConfig's default
        overrides["stages"] = BWD_STAGES[head_dim]
    return f"bwd_d{head_dim}{'c' if causal else ''}", overrides


def bwd_prep_variant(head_dim):
    """(name, overrides) of the backward's preprocess for this head dim
    (kernels/attention_bwd_prep.py, built by the same family)."""
    if head_dim not in BWD_HEAD_DIMS:
        raise ValueError(f"attention backward: head_dim must be one of {BWD_HEAD_DIMS}, "
                         f"got {head_dim}")
    return f"bwd_prep_d{head_dim}", dict(kernel="prep", head_dim=head_dim)


BWD_VARIANTS = dict([bwd_variant(d, c) for d in BWD_HEAD_DIMS for c in (False, True)]
                    + [bwd_prep_variant(d) for d in BWD_HEAD_DIMS])
