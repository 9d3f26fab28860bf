"""The attention forward's configurations and the pick among them: the
configuration of ``pipeline_mlir.kernels.attention_fwd`` that
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

``pick`` refines that by the shape, by rules measured on the broad grid of
docs/attention.md (H200, benchmarks/attention/run_attention_grid.py):

- GQA packing (``pack_gqa``): with g = heads / kv_heads in 2, 4, 8, a tile
  holds block_m / g query positions of each of the group's g heads, so each
  K/V block a CTA loads serves the whole group. Picked for every such
  group: faster than one head per tile on 12 of the grid's 13 GQA rows
  (d 64 causal GQA 8:1 at 8192: 369 -> 486 TFLOP/s; the one exception lost
  0.7%).
- d 64 causal, unpacked: 128-row tiles (two consumer warpgroups,
  ``CAUSAL_D64``) instead of 192: less of each tile on the diagonal, twice
  the tiles; faster on all four causal d 64 rows measured (seqlen 512 to
  8192: +9% to +33%). Full attention keeps the 192-row tiles (at 8192 they
  are 13% faster).
- d 128 causal with fewer work units than SMs: 64-key blocks
  (``FEW_UNITS_D128``): each CTA runs one tile, whose latency is the
  kernel's; finer blocks pipeline a short tile better and waste less on
  the diagonal (1 x 8 heads x 1024: 68 -> 85 TFLOP/s; measured on that one
  row only, full attention there was faster with 128-key blocks).

Two CTAs per SM with 64-row tiles (``AttentionConfig.ctas_per_sm``, the
benchmark's ``short`` candidates) measured slower than these on 25 of the
grid's 26 rows (the other 1% faster), so the pick does not use them.
"""

import functools
import math

from pipeline_mlir.chip_limits import MULTIPROCESSORS, WGMMA_M
from pipeline_mlir.ops.attention_bwd_acc_order import TRANSPOSED_BLOCK_M

HEAD_DIMS = (64, 128, 256)
BEST = {64: dict(consumer_warpgroups=3, consumer_registers=160, l2_sections=True),
        128: dict(), 256: dict()}
# Query heads per K/V head a tile may pack (AttentionConfig.pack_gqa).
GROUPS = (2, 4, 8)
# d 64 causal, unpacked: 128-row tiles.
CAUSAL_D64 = ("d64c_m128", dict(head_dim=64, causal=True, consumer_warpgroups=2))
# d 128 causal, fewer work units than SMs: 64-key blocks.
FEW_UNITS_D128 = ("d128c_bn64", dict(head_dim=128, causal=True, block_n=64))


def _check_head_dim(head_dim):
    if head_dim not in BEST:
        raise ValueError(f"attention: head_dim must be one of {HEAD_DIMS}, got {head_dim}")


def variant(head_dim, causal, pack_gqa=0):
    """(name, AttentionConfig overrides) of the head dim's configuration
    for this causality, packing ``pack_gqa`` query heads per tile (0: none)."""
    _check_head_dim(head_dim)
    if pack_gqa not in (0,) + GROUPS:
        raise ValueError(f"attention: pack_gqa must be 0 or one of {GROUPS}, got {pack_gqa}")
    overrides = dict(head_dim=head_dim, causal=bool(causal), **BEST[head_dim])
    if pack_gqa:
        overrides["pack_gqa"] = pack_gqa
    return f"d{head_dim}{'c' if causal else ''}{f'_gqa{pack_gqa}' if pack_gqa else ''}", overrides


def work_units(head_dim, batch, heads, seqlen_q):
    """Work units of the head dim's plain tiles (one head's block_m rows)."""
    block_m = WGMMA_M * BEST[head_dim].get("consumer_warpgroups", 2)
    return batch * heads * math.ceil(seqlen_q / block_m)


@functools.lru_cache(maxsize=4096)   # every call of the op asks; the result is shared
def pick(head_dim, causal, batch, heads, heads_kv, seqlen_q, seqlen_k,
         sms=MULTIPROCESSORS["sm_90a"]):
    """(name, AttentionConfig overrides) for a call of this shape by the
    rules of the module doc (the overrides are shared between calls: read
    them, do not change them). ``seqlen_k`` takes no part in the rules
    measured so far; it is in the signature so that the op passes the
    whole shape."""
    _check_head_dim(head_dim)
    group = heads // heads_kv if heads_kv and heads % heads_kv == 0 else 1
    if group in GROUPS:
        return variant(head_dim, causal, group)
    if causal and head_dim == 64:
        return CAUSAL_D64
    if causal and head_dim == 128 and work_units(head_dim, batch, heads, seqlen_q) < sms:
        return FEW_UNITS_D128
    return variant(head_dim, causal)


VARIANTS = dict([variant(d, c, g) for d in HEAD_DIMS for c in (False, True)
                 for g in (0,) + GROUPS] + [CAUSAL_D64, FEW_UNITS_D128])


# The backward's main kernel (kernels/attention_bwd/) per head dim: one
# configuration each. d 64 and 128: 128 keys per CTA (64 per consumer
# warpgroup) over 64-row query blocks, two stages of Q and dO. d 256: 64
# keys per CTA, the two consumer warpgroups splitting dK, dV and dQ by
# columns, and one stage of Q and dO (two would not fit the 227 KiB of
# shared memory next to K, V and the fp32 dQ tiles).
BWD_HEAD_DIMS = (64, 128, 256)
BWD_STAGES = {64: 2, 128: 2, 256: 1}
# The fp32 dQ tile stored without bank conflicts (AttentionBwdConfig.
# dq_store_spread): faster on all six d 128 and d 256 rows of the H200 A/B
# (benchmarks/attention/results/h200-bwd-options-ab.log: 2.9-8.3% less
# backward time); at d 64 3.4% faster full but 4.6% slower causal, so off.
BWD_DQ_STORE_SPREAD = {64: False, 128: True, 256: True}


# AttentionBwdConfig's switches of the dQ path that a candidate turns on
# (``bwd_variant(..., options=...)``), with their tags in variant names.
BWD_OPTIONS = {"dq_overlap": "dqo", "dq_store_spread": "dqw", "dq_deferred": "dqd",
               "min_ctas": "mc", "dq_double_buffer": "dqb", "dq_split": "split",
               "block_m128": "m128", "dk_last": "dkl", "pingpong": "pp",
               "dq_reduce_warp": "dqr", "ds_one_barrier": "ds1",
               "stat_shuffle": "ssh", "stats_with_tiles": "swt", "p_packed": "pk",
               "lpt_order": "lpt", "rows_first": "rf",
               "dq_acc_order": "dqa", "split_scores": "sps", "dq_one_part": "dq1",
               "stages3": "s3", "block_m80": "m80", "shuffle_imm": "shi",
               "prep_wide": "pw"}
# The overrides of an option that is not a switch of its own name turned on:
# 128-query steps (d 64); three stages of Q and dO (d 128: the rows on the
# tiles' stages left room for a third: 226.6 KiB of 227); 80-query steps
# (d 128 with dq_split: FA4's d 128 step, dQ computed transposed).
BWD_OPTION_OVERRIDES = {"block_m128": {"block_m": 128}, "stages3": {"stages": 3},
                        "block_m80": {"block_m": TRANSPOSED_BLOCK_M},
                        # the preprocess's option: the main kernel unchanged
                        # (ops/attention.py loads bwd_prep_variant's wide one)
                        "prep_wide": {}}


def bwd_variant(head_dim, causal, dq_split=False, options=()):
    """(name, AttentionBwdConfig overrides) of the backward for this head
    dim and causality; ``dq_split``: the candidate that splits dQ by
    columns between the consumer warpgroups (d 128 only); ``options``:
    names from ``BWD_OPTIONS`` to turn on. Neither is the op's default
    until measured (``BWD_CANDIDATES``)."""
    if head_dim not in BWD_HEAD_DIMS:
        raise ValueError(f"attention backward: head_dim must be one of {BWD_HEAD_DIMS}, "
                         f"got {head_dim}")
    overrides = dict(head_dim=head_dim, causal=bool(causal))
    if BWD_STAGES[head_dim] != 2:            # AttentionBwdConfig's default
        overrides["stages"] = BWD_STAGES[head_dim]
    if BWD_DQ_STORE_SPREAD[head_dim] and not dq_split:   # dq_split: as it was measured
        overrides["dq_store_spread"] = True
    if dq_split:
        if head_dim != 128:
            raise ValueError(f"attention backward: dq_split is for head_dim 128, "
                             f"got {head_dim}")
        overrides["dq_split"] = True
    unknown = sorted(set(options) - set(BWD_OPTIONS))
    if unknown:
        raise ValueError(f"attention backward: unknown options {unknown}; "
                         f"known: {sorted(BWD_OPTIONS)}")
    tags = "".join(f"_{tag}" for o, tag in BWD_OPTIONS.items() if o in options)
    for o in BWD_OPTIONS:
        if o in options:
            overrides.update(BWD_OPTION_OVERRIDES.get(o, {o: True}))
    return (f"bwd_d{head_dim}{'c' if causal else ''}{'_dqs' if dq_split else ''}{tags}",
            overrides)


def bwd_prep_variant(head_dim):
    """(name, overrides) of the backward's preprocess for this head dim
    (kernels/attention_bwd_prep.py, built by the same family)."""
    if head_dim not in BWD_HEAD_DIMS:
        raise ValueError(f"attention backward: head_dim must be one of {BWD_HEAD_DIMS}, "
                         f"got {head_dim}")
    return f"bwd_prep_d{head_dim}", dict(kernel="prep", head_dim=head_dim)


# The wide preprocess (kernels/attention_bwd/prep_wide.py, option
# prep_wide): rows in flight per lane and the walk's order.
BWD_PREP_WIDE_SLOTS = 4
BWD_PREP_WIDE_ORDER = "bhs"


def bwd_prep_wide_variant(head_dim, order=BWD_PREP_WIDE_ORDER, slots=BWD_PREP_WIDE_SLOTS):
    """(name, overrides) of the wide preprocess (the same outputs, bit for
    bit, as ``bwd_prep_variant``'s) for this head dim."""
    if head_dim not in BWD_HEAD_DIMS:
        raise ValueError(f"attention backward: head_dim must be one of {BWD_HEAD_DIMS}, "
                         f"got {head_dim}")
    tag = "" if (order, slots) == (BWD_PREP_WIDE_ORDER, BWD_PREP_WIDE_SLOTS) \
        else f"_{order}_s{slots}"
    return (f"bwd_prepw_d{head_dim}{tag}",
            dict(kernel="prep_wide", head_dim=head_dim, slots=slots, order=order))


# The head dims whose backward runs the wide preprocess whatever its
# options. Measured on an H200 (docs/attention.md, "The preprocess with
# every lane loading"), two passes: d 64 backward 1.2-2.0% faster on the
# full row and 3.1-4.1% on the causal one (now ahead of cuDNN there); d 128
# not faster (4096 full 1.1% and 0.9% slower), so it keeps the old one.
BWD_PREP_WIDE_HEAD_DIMS = (64,)


def bwd_prep_for(head_dim, options):
    """The preprocess the backward with ``options`` runs: the wide one
    with ``prep_wide`` or at ``BWD_PREP_WIDE_HEAD_DIMS``, else the old."""
    if (options and "prep_wide" in options) or head_dim in BWD_PREP_WIDE_HEAD_DIMS:
        return bwd_prep_wide_variant(head_dim)
    return bwd_prep_variant(head_dim)


BWD_DQ_CONVERT_HEAD_DIMS = (64, 128)


def bwd_dq_convert_variant(head_dim, block_m=64):
    """(name, overrides) of ``dq_acc_order``'s dQ postprocess for this head
    dim (kernels/attention_bwd_dq_convert.py, built by the same family): the
    accumulator's order un-permuted and rounded to bf16 in one pass. With
    ``block_m`` 80 (``block_m80``, d 128) the transposed order's."""
    if head_dim not in BWD_DQ_CONVERT_HEAD_DIMS:
        raise ValueError(f"attention backward dq_acc_order: head_dim must be one of "
                         f"{BWD_DQ_CONVERT_HEAD_DIMS}, got {head_dim}")
    if block_m == TRANSPOSED_BLOCK_M:
        return (f"bwd_dq_convert_d{head_dim}_m{block_m}",
                dict(kernel="dq_convert", head_dim=head_dim, block_m=block_m))
    return f"bwd_dq_convert_d{head_dim}", dict(kernel="dq_convert", head_dim=head_dim)


BWD_VARIANTS = dict([bwd_variant(d, c) for d in BWD_HEAD_DIMS for c in (False, True)]
                    + [bwd_prep_variant(d) for d in BWD_HEAD_DIMS]
                    + [bwd_prep_wide_variant(d) for d in BWD_HEAD_DIMS]
                    + [bwd_dq_convert_variant(d) for d in BWD_DQ_CONVERT_HEAD_DIMS]
                    # d 128 full's 80-query step (dq_acc_order, transposed)
                    + [bwd_dq_convert_variant(128, TRANSPOSED_BLOCK_M)])
# Built into the kernel cache next to BWD_VARIANTS (the GPU tests and
# run_attention_bwd.py --dq-split run them) but not what the op runs.
# The option sets built as candidates: both, and each alone (to tell their
# shares apart when measured; dq_store_spread alone is the default at d 128
# and 256 since that measurement).
# Then the launch bound alone (min_ctas: ptxas honours setmaxnreg at d 64
# only with it), and with dq_deferred (the last dQ part stored in the next
# step, under its S^T and dP^T GEMMs), without and with the spread stores
# (the same kernel at d 128 and 256, where the spread is the default).
BWD_OPTION_SETS = (("dq_overlap", "dq_store_spread"), ("dq_overlap",), ("dq_store_spread",),
                   ("min_ctas",), ("dq_deferred", "min_ctas"),
                   ("dq_deferred", "dq_store_spread", "min_ctas"),
                   # dQ's reduce-adds issued by a warp of the producer
                   # warpgroup (FA4's hand-off): on the plain configuration.
                   ("dq_reduce_warp",))
# Sets for d 64 alone: two dQ tiles per warpgroup (dq_double_buffer) fit
# the shared memory there only.
BWD_D64_OPTION_SETS = (("dq_double_buffer",), ("dq_store_spread", "dq_double_buffer"),
                       ("dq_store_spread", "dq_deferred", "min_ctas", "dq_double_buffer"))


# d 64 with 128-query steps (FlashAttention-3's and FA4's d 64 tile: half
# the steps, K and V read by 128 queries each, dQ split by rows between the
# consumers) and with dK's GEMM issued after dQ's (dk_last: dQ's stores and
# reduce-add overlap dK). Measured on an H200 (docs/attention.md, "FA4's
# Hopper backward next to ours"): 128-query steps with min_ctas took
# 6.7-7.7% less backward time on the full row and, once their mask compared
# precomputed offsets, 2.4-3.3% less on the causal one; dk_last and the
# ping-pong slower.
BWD_D64_OPTION_SETS += (("block_m128", "min_ctas"), ("block_m128", "dq_store_spread", "min_ctas"),
                        ("block_m128", "dq_store_spread", "min_ctas", "dk_last"),
                        ("dq_store_spread", "min_ctas", "dq_double_buffer", "dk_last"),
                        # The consumers' score GEMMs in turn (ping-pong), on
                        # the measured default and on its stores alone.
                        ("dq_store_spread", "dq_deferred", "min_ctas", "dq_double_buffer",
                         "pingpong"),
                        ("dq_store_spread", "min_ctas", "pingpong"),
                        # The reduce warp on 128-query steps, and on the d 64
                        # set with one dQ tile (the hand-off has one per
                        # consumer): the last is the op's default at d 64
                        # (measured below).
                        ("block_m128", "min_ctas", "dq_reduce_warp"),
                        ("block_m128", "dq_store_spread", "min_ctas", "dq_reduce_warp"),
                        ("dq_store_spread", "dq_deferred", "min_ctas", "dq_reduce_warp"),
                        # FA4's order (dK after dQ, the dQ stores under dK)
                        # with the reduce warp: on 64-query steps, and on
                        # FA4's d 64 tile (128-query steps) with the dS^T
                        # hand-over's one barrier.
                        ("dq_store_spread", "min_ctas", "dq_reduce_warp", "dk_last"),
                        ("block_m128", "min_ctas", "dq_reduce_warp", "dk_last"),
                        ("block_m128", "min_ctas", "dq_reduce_warp", "dk_last",
                         "ds_one_barrier"),
                        # FA4's d 64 registers: LSE and dPsum shuffled from
                        # 8 lanes (stat_shuffle), so that 128-query steps
                        # spill less (52-72 bytes, 88-144 without); with
                        # FA4's order and without. H200 (run 13): FA4's order
                        # 1.025-1.080x the default's time; 128-query steps
                        # with the shuffle and ds_one_barrier 0.995x full
                        # (two runs), 1.041-1.048x causal: none faster on
                        # both rows.
                        ("block_m128", "min_ctas", "dq_reduce_warp", "stat_shuffle"),
                        ("block_m128", "min_ctas", "dq_reduce_warp", "ds_one_barrier",
                         "stat_shuffle"),
                        ("block_m128", "min_ctas", "dq_reduce_warp", "dk_last",
                         "ds_one_barrier", "stat_shuffle"),
                        ("dq_store_spread", "dq_deferred", "min_ctas", "dq_reduce_warp",
                         "stat_shuffle"),
                        # LSE and dPsum on Q's and dO's stages (FA4's
                        # scheme: no rings of their own), on the default:
                        # 1.011-1.032x its time on both rows in two passes
                        # (h200-bwd-swt-ab-pass1.log, -pass2.log): not the
                        # default.
                        ("dq_store_spread", "dq_deferred", "min_ctas", "dq_reduce_warp",
                         "stats_with_tiles"),
                        # FA4's d 64 tile (128-query steps) with P^T packed
                        # to bf16 before dP^T's wait and dS^T computed from
                        # it (p_packed): ptxas spills 4 / 16 bytes (full /
                        # causal) with the shuffle, where run 13's best set
                        # spilled 64 / 52; with the rows on Q's and dO's
                        # stages (stats_with_tiles), without them, without
                        # the shuffle, and the rows alone without p_packed.
                        # H200, two passes (h200-bwd-m128-swt-ab-pass1.log,
                        # -pass2.log), time / the d 64 set's, full / causal:
                        # 0.955-0.958 / 0.997-1.001, 0.956-0.958 /
                        # 1.017-1.027, 1.017 / 0.987-0.989, and the last
                        # (no p_packed) 0.919-0.925 / 1.036-1.049: d 64
                        # full's set since (BWD_FULL_OPTIONS).
                        ("block_m128", "min_ctas", "dq_reduce_warp", "ds_one_barrier",
                         "stat_shuffle", "stats_with_tiles", "p_packed"),
                        ("block_m128", "min_ctas", "dq_reduce_warp", "ds_one_barrier",
                         "stat_shuffle", "p_packed"),
                        ("block_m128", "min_ctas", "dq_reduce_warp", "ds_one_barrier",
                         "stats_with_tiles", "p_packed"),
                        ("block_m128", "min_ctas", "dq_reduce_warp", "ds_one_barrier",
                         "stat_shuffle", "stats_with_tiles"),
                        # The key blocks longest first within groups of
                        # (batch, K/V head) pairs (lpt_order), on the d 64
                        # set and on d 64 full's set.
                        ("dq_store_spread", "dq_deferred", "min_ctas", "dq_reduce_warp",
                         "lpt_order"),
                        ("block_m128", "min_ctas", "dq_reduce_warp", "ds_one_barrier",
                         "stat_shuffle", "stats_with_tiles", "lpt_order"),
                        # And on FA4's d 64 tile with the rows on the tiles'
                        # stages and P^T packed early, the set that was
                        # 0.987-0.989x the d 64 set's time causal.
                        ("block_m128", "min_ctas", "dq_reduce_warp", "ds_one_barrier",
                         "stats_with_tiles", "p_packed", "lpt_order"),
                        # The LSE and dPsum rows issued before their tiles'
                        # boxes (rows_first): on the d 64 set with the rows
                        # on the tiles' stages and on d 64 full's set.
                        ("dq_store_spread", "dq_deferred", "min_ctas", "dq_reduce_warp",
                         "stats_with_tiles", "rows_first"),
                        ("block_m128", "min_ctas", "dq_reduce_warp", "ds_one_barrier",
                         "stat_shuffle", "stats_with_tiles", "rows_first"),
                        # dQ in the accumulator's order (FA4's dQ scheme:
                        # 16-byte stores, one contiguous reduce-add per tile,
                        # the host un-permutes) on d 64 full's and causal's
                        # sets. H200, two passes (h200-bwd-dqa-ab-pass1.log,
                        # -pass2.log): 1.027-1.030x (full) and 1.053x
                        # (causal) the defaults' backward time: off. With
                        # the postprocess kernel 0.998/1.008x full,
                        # 1.001/0.990x causal (h200-bwd-dqc-ab-pass*.log): off.
                        ("block_m128", "min_ctas", "dq_reduce_warp", "ds_one_barrier",
                         "stat_shuffle", "stats_with_tiles", "dq_acc_order"),
                        ("block_m128", "min_ctas", "dq_reduce_warp", "ds_one_barrier",
                         "stats_with_tiles", "p_packed", "lpt_order", "dq_acc_order"),
                        # On d 64 causal's set: the rows issued before their
                        # tiles' boxes, and LSE and dPsum shuffled from 8
                        # lanes (FA4's d 64 registers) with P^T packed early.
                        ("block_m128", "min_ctas", "dq_reduce_warp", "ds_one_barrier",
                         "stats_with_tiles", "p_packed", "lpt_order", "rows_first"),
                        ("block_m128", "min_ctas", "dq_reduce_warp", "ds_one_barrier",
                         "stat_shuffle", "stats_with_tiles", "p_packed", "lpt_order"),
                        # The shuffles' source lanes as immediates
                        # (shuffle_imm: shfl.sync.idx's segment mask keeps
                        # lane % 4), which frees the 8 registers of source
                        # lanes that ptxas spilled around dP^T's wait: on
                        # d 64 full's set (spills 56 -> 24 bytes) and with dQ
                        # in the accumulator's order (0 bytes); on d 64
                        # causal's set with the shuffle (12 bytes) and with
                        # dQ in the accumulator's order too (0 bytes). H200,
                        # two passes (h200-bwd-shi-ab-pass1.log, -pass2.log),
                        # time / the d 64 sets': full 1.008 / 0.998 and, with
                        # dQ in the accumulator's order, 0.952 / 0.942 (d 64
                        # full's set since); causal 0.986 / 0.986 (d 64
                        # causal's set since) and 0.987 / 0.993.
                        ("block_m128", "min_ctas", "dq_reduce_warp", "ds_one_barrier",
                         "stat_shuffle", "stats_with_tiles", "shuffle_imm"),
                        ("block_m128", "min_ctas", "dq_reduce_warp", "ds_one_barrier",
                         "stat_shuffle", "stats_with_tiles", "shuffle_imm", "dq_acc_order"),
                        ("block_m128", "min_ctas", "dq_reduce_warp", "ds_one_barrier",
                         "stat_shuffle", "stats_with_tiles", "p_packed", "lpt_order",
                         "shuffle_imm"),
                        ("block_m128", "min_ctas", "dq_reduce_warp", "ds_one_barrier",
                         "stat_shuffle", "stats_with_tiles", "p_packed", "lpt_order",
                         "shuffle_imm", "dq_acc_order"),
                        # d 64 causal's set without lpt_order (what the GPU
                        # test of lpt_order compares it with).
                        ("block_m128", "min_ctas", "dq_reduce_warp", "ds_one_barrier",
                         "stat_shuffle", "stats_with_tiles", "p_packed", "shuffle_imm"),
                        # FA4's order (dK's GEMM after dQ's; the set has the
                        # dS^T hand-over's one barrier) with dQ in the
                        # accumulator's order on d 64 causal's set: ptxas
                        # spills 0 bytes (16 with dk_last alone), and the
                        # same with the rows issued before their tiles' boxes.
                        # H200, two passes (h200-bwd-d64c-fa4-pass1.log,
                        # -pass2.log), time / d 64 causal's set: 0.999 / 1.005
                        # and 0.997 / 1.001: not faster in both, off.
                        ("block_m128", "min_ctas", "dq_reduce_warp", "ds_one_barrier",
                         "stat_shuffle", "stats_with_tiles", "p_packed", "lpt_order",
                         "shuffle_imm", "dk_last", "dq_acc_order"),
                        ("block_m128", "min_ctas", "dq_reduce_warp", "ds_one_barrier",
                         "stat_shuffle", "stats_with_tiles", "p_packed", "lpt_order",
                         "shuffle_imm", "dk_last", "dq_acc_order", "rows_first"))


# Sets for d 128 alone: dQ split by columns (64-column fp32 tiles, so two
# per warpgroup fit), deferred and double buffered as at d 64. The last
# took 0.5-6.8% less backward time on the four d 128 rows of the H200 A/B
# (benchmarks/attention/results/h200-bwd-d128-split-ab.log), as the d 64
# set of four 6.4% on the d 64 rows (h200-bwd-d64-ab.log): candidates, not
# the op's default (each measured once, on its head dim's rows alone).
BWD_D128_OPTION_SETS = (("dq_split",), ("dq_split", "dq_deferred", "dq_double_buffer"),
                        ("dq_split", "dq_deferred", "dq_double_buffer", "min_ctas"),
                        # dK issued after dQ (dk_last), in place of the
                        # deferred dQ epilogue: 3-8% slower than that.
                        ("dq_split", "dq_double_buffer", "min_ctas", "dk_last"),
                        # The consumers' score GEMMs in turn (ping-pong), dQ
                        # not split (a split keeps the consumers in step):
                        # 2-11% slower than the split set.
                        ("pingpong",), ("pingpong", "min_ctas"),
                        # The reduce warp on the split set (one dQ tile): the
                        # op's default at d 128 without dq_deferred (measured
                        # below; deferred, 1.01-1.06x slower).
                        ("dq_split", "dq_deferred", "min_ctas", "dq_reduce_warp"),
                        ("dq_split", "min_ctas", "dq_reduce_warp"),
                        # FA4's order on the default: dK issued after dQ, so
                        # that the dQ tile's stores and hand-off to the reduce
                        # warp run under dK (dk_last, measured slower when
                        # the consumers still waited for their reduce-adds);
                        # and the dS^T hand-over with its barrier over both
                        # consumers only (ds_one_barrier). H200 (run 13,
                        # h200-bwd-fa4order-ab-run13.log): 1.000-1.036x,
                        # 1.010-1.026x and 0.983-1.033x (two runs) the
                        # default's time: none faster on every row.
                        ("dq_split", "min_ctas", "dq_reduce_warp", "dk_last"),
                        ("dq_split", "min_ctas", "dq_reduce_warp", "ds_one_barrier"),
                        ("dq_split", "min_ctas", "dq_reduce_warp", "dk_last", "ds_one_barrier"),
                        # LSE and dPsum shuffled from 8 lanes (stat_shuffle):
                        # ptxas spills 4 / 20 bytes (full / causal) where the
                        # default spills 24 / 56; 1.005-1.066x the default's
                        # time, with FA4's order 0.984-1.037x (two runs:
                        # h200-bwd-shuffle-ab-run13.log, h200-bwd-fa4-run13.log).
                        ("dq_split", "min_ctas", "dq_reduce_warp", "stat_shuffle"),
                        ("dq_split", "min_ctas", "dq_reduce_warp", "dk_last", "ds_one_barrier",
                         "stat_shuffle"),
                        # LSE and dPsum on Q's and dO's stages (FA4's
                        # scheme: no rings of their own), on the default
                        # then: 0.965-0.981x its time on the four rows in
                        # two passes (h200-bwd-swt-ab-pass1.log, -pass2.log):
                        # the op's default at d 128 since.
                        ("dq_split", "min_ctas", "dq_reduce_warp", "stats_with_tiles"),
                        # P^T packed before dP^T's wait (p_packed) on the
                        # default: spills 4 / 36 bytes (the default 4 / 44),
                        # 1.023-1.071x its time on the four rows (two passes).
                        ("dq_split", "min_ctas", "dq_reduce_warp", "stats_with_tiles",
                         "p_packed"),
                        # The key blocks longest first (lpt_order) on the
                        # d 128 default.
                        ("dq_split", "min_ctas", "dq_reduce_warp", "stats_with_tiles",
                         "lpt_order"),
                        # The LSE and dPsum rows before their tiles' boxes
                        # (rows_first), without and with lpt_order.
                        ("dq_split", "min_ctas", "dq_reduce_warp", "stats_with_tiles",
                         "rows_first"),
                        ("dq_split", "min_ctas", "dq_reduce_warp", "stats_with_tiles",
                         "lpt_order", "rows_first"),
                        # dQ in the accumulator's order on the full and
                        # causal defaults: 1.007-1.024x (full) and
                        # 1.063-1.098x (causal) their backward time (two
                        # passes, h200-bwd-dqa-ab-pass1.log, -pass2.log)
                        # with torch's un-permuting copy; with the
                        # postprocess kernel 0.978-0.990x full (the full
                        # default since) and 1.015-1.024x causal
                        # (h200-bwd-dqc-ab-pass1.log, -pass2.log).
                        ("dq_split", "min_ctas", "dq_reduce_warp", "stats_with_tiles",
                         "dq_acc_order"),
                        ("dq_split", "min_ctas", "dq_reduce_warp", "stats_with_tiles",
                         "lpt_order", "dq_acc_order"),
                        # Three stages of Q and dO on the full and the causal
                        # default (the producer a step further ahead).
                        ("dq_split", "min_ctas", "dq_reduce_warp", "stats_with_tiles",
                         "dq_acc_order", "stages3"),
                        ("dq_split", "min_ctas", "dq_reduce_warp", "stats_with_tiles",
                         "lpt_order", "stages3"),
                        # The dS^T hand-over's one barrier, alone and with dK
                        # after dQ (FA4's order), on the same defaults.
                        ("dq_split", "min_ctas", "dq_reduce_warp", "stats_with_tiles",
                         "dq_acc_order", "ds_one_barrier"),
                        ("dq_split", "min_ctas", "dq_reduce_warp", "stats_with_tiles",
                         "lpt_order", "ds_one_barrier"),
                        ("dq_split", "min_ctas", "dq_reduce_warp", "stats_with_tiles",
                         "dq_acc_order", "dk_last", "ds_one_barrier"),
                        ("dq_split", "min_ctas", "dq_reduce_warp", "stats_with_tiles",
                         "lpt_order", "dk_last", "ds_one_barrier"),
                        # d 128 causal's set since (FA4's order) without
                        # lpt_order, and with dQ in the accumulator's order.
                        ("dq_split", "min_ctas", "dq_reduce_warp", "stats_with_tiles",
                         "dk_last", "ds_one_barrier"),
                        ("dq_split", "min_ctas", "dq_reduce_warp", "stats_with_tiles",
                         "lpt_order", "dk_last", "ds_one_barrier", "dq_acc_order"),
                        # FA4's 80-query step (block_m80: dQ^T = K^T dS^T, the
                        # dS^T tiles with the 32-byte swizzle) on the full set
                        # without dq_acc_order (dQ^T's tile is stored
                        # transposed, in the plain order), and in FA4's order.
                        # H200, two passes (h200-bwd-m80-ab-pass1.log,
                        # -pass2.log): 1.19-1.23x the full default's time
                        # (wgmma serialized by ptxas) and, in FA4's order,
                        # 1.013-1.020x (4096 row) / 0.976-0.995x (8192 row).
                        ("dq_split", "min_ctas", "dq_reduce_warp", "stats_with_tiles",
                         "block_m80"),
                        ("dq_split", "min_ctas", "dq_reduce_warp", "stats_with_tiles",
                         "dk_last", "ds_one_barrier", "block_m80"),
                        # FA4's order at 80 queries with dQ^T in the
                        # accumulator's transposed order (16-byte stores,
                        # one reduce-add a tile; its postprocess kernel
                        # bwd_dq_convert_d128_m80): d 128 full's default.
                        ("dq_split", "min_ctas", "dq_reduce_warp", "stats_with_tiles",
                         "dk_last", "ds_one_barrier", "block_m80", "dq_acc_order"))
# And d 256 (each consumer its columns of the same keys).
BWD_D256_OPTION_SETS = (("pingpong",), ("lpt_order",),
                        # LSE and dPsum on Q's and dO's stages (d 128's
                        # default), with the reduce warp and without, full
                        # and with the causal default's lpt_order.
                        ("stats_with_tiles",), ("dq_reduce_warp", "stats_with_tiles"),
                        ("stats_with_tiles", "lpt_order"), ("dq_reduce_warp", "lpt_order"),
                        ("dq_reduce_warp", "stats_with_tiles", "lpt_order"),
                        # Each consumer S^T and dP^T of half the queries,
                        # P^T and dS^T shared through shared memory
                        # (split_scores): alone, with the reduce warp, with
                        # the rows on the tiles' stages; full and causal.
                        ("split_scores",), ("split_scores", "lpt_order"),
                        ("split_scores", "dq_reduce_warp"),
                        ("split_scores", "dq_reduce_warp", "lpt_order"),
                        ("split_scores", "stats_with_tiles"),
                        ("split_scores", "stats_with_tiles", "lpt_order"),
                        ("split_scores", "dq_reduce_warp", "stats_with_tiles"),
                        ("split_scores", "dq_reduce_warp", "stats_with_tiles", "lpt_order"),
                        # On that set (the d 256 default since): dQ as one
                        # 128-column part, and dQ's parts overlapped with
                        # their stores (dq_overlap). H200, two passes
                        # (h200-bwd-sps-dq-pass1.log, -pass2.log): 1.081-1.108x
                        # / 1.041-1.043x (full / causal) and 1.012x /
                        # 1.005-1.013x the set's backward time: neither taken.
                        ("split_scores", "dq_reduce_warp", "stats_with_tiles", "dq_one_part"),
                        ("split_scores", "dq_reduce_warp", "stats_with_tiles", "lpt_order",
                         "dq_one_part"),
                        ("split_scores", "dq_reduce_warp", "stats_with_tiles", "dq_overlap"),
                        ("split_scores", "dq_reduce_warp", "stats_with_tiles", "lpt_order",
                         "dq_overlap"))

# The options the op's backward runs at each head dim (ops/attention.py):
# the sets that took less backward time than the one before on every row of
# their head dim in one process (NVIDIA H200; docs/attention.md). d 64: the
# d 64 set with dQ's reduce-adds issued by the producer warpgroup's reduce
# warp (dq_reduce_warp, one dQ tile), 0.979x (full) and 0.958x (causal) the
# backward time of 128-query steps with the launch bound (block_m128 +
# min_ctas; h200-bwd-dqr-ab-run11.log), which had itself taken 0.923-0.933x
# the d 64 set of four (dq_store_spread, dq_deferred, min_ctas,
# dq_double_buffer) on the full row (h200-bwd-m128-ab-run10.log,
# h200-bwd-m128-pp-ab-run10.log) and, with the 128-query mask's precomputed
# offsets, 0.967-0.976x on the causal row in two runs
# (h200-bwd-m128-mask-run11.log and the run above). d 128: dQ split by
# columns with the launch bound and the reduce warp, 0.968-0.990x the split
# set with deferred, double-buffered dQ tiles on its four rows (which had
# taken 0.932-0.995x the plain configuration); gradients within the bound of
# fp32, dK and dV bit for bit the plain kernel's. Then at d 128 LSE and
# dPsum on Q's and dO's stages (stats_with_tiles: their own rings gone),
# 0.965-0.981x the time of that set on all four d 128 rows in two passes
# (h200-bwd-swt-ab-pass1.log, -pass2.log; at d 64 1.011-1.032x: not
# taken there). d 256: no set that won then (the reduce warp 1.006x /
# 1.021x); since, the score GEMMs split by queries between the consumers
# (split_scores) with the reduce warp and the rows on the tiles' stages,
# 0.853x / 0.888x / 0.892x the plain kernel's backward time full and
# 0.846x / 0.850x / 0.860x causal (with lpt_order) in three passes
# (h200-bwd-sps-pass1.log, -pass2.log, -pass3.log).
# (Since then each mask runs its own set at d 64, below: the d 64 set here
# is what they were measured against.)
BWD_DEFAULT_OPTIONS = {64: ("dq_store_spread", "dq_deferred", "min_ctas", "dq_reduce_warp"),
                       128: ("dq_split", "min_ctas", "dq_reduce_warp", "stats_with_tiles"),
                       256: ("split_scores", "dq_reduce_warp", "stats_with_tiles")}
# Full (non-causal) attention's own set where one measured faster there
# than the head dim's set above but slower causal. (d 64 full had 128-query
# steps until they won the causal row too, and then the reduce warp's set
# won both.) d 64 full: FA4's d 64 tile with LSE and dPsum on Q's and dO's
# stages (128-query steps, the reduce warp, the dS^T hand-over's one
# barrier, LSE and dPsum shuffled from 8 lanes), 0.919x and 0.925x the
# d 64 set's backward time on the full row in two passes, 1.036x and 1.049x
# on the causal one (h200-bwd-m128-swt-ab-pass1.log, -pass2.log). d 128
# full: the head dim's set with dQ in the accumulator's order
# (dq_acc_order) and its postprocess kernel (kernels/attention_bwd_dq_convert.py),
# 0.978-0.990x the set's backward time on both full rows in two passes
# (h200-bwd-dqc-ab-pass1.log, -pass2.log); causal 1.015-1.024x, d 64
# 0.990-1.008x: not taken there. d 128 full since: FA4's 80-query step in
# FA4's order (dk_last, ds_one_barrier, block_m80) with dQ^T in the
# accumulator's transposed order and its postprocess
# (bwd_dq_convert_d128_m80), 0.973 / 0.981x that set's backward time on the
# 4, 16, 4096 row and 0.965 / 0.960x on the 2, 16, 8192 row in two passes
# (h200-bwd-m80-dqa-pass1.log, -pass2.log; 0.98x and 1.02x cuDNN). d 64
# full since: that set with the shuffles' source lanes as immediates
# (shuffle_imm) and dQ in the accumulator's order with its postprocess
# (ptxas spills 0 bytes, 56 before), 0.952 / 0.942x its backward time in
# two passes (h200-bwd-shi-ab-pass1.log, -pass2.log; 1.04-1.05x cuDNN).
BWD_D128_FULL_M64 = BWD_DEFAULT_OPTIONS[128] + ("dq_acc_order",)
BWD_FULL_OPTIONS = {64: ("block_m128", "min_ctas", "dq_reduce_warp", "ds_one_barrier",
                         "stat_shuffle", "stats_with_tiles", "shuffle_imm", "dq_acc_order"),
                    128: BWD_DEFAULT_OPTIONS[128] + ("dk_last", "ds_one_barrier",
                                                     "block_m80", "dq_acc_order")}


# Causal attention's own set where one measured faster there than the set
# above (and not full, or not measured full). d 128 and 256: the head
# dim's set with the key blocks longest first (lpt_order): 0.962-0.979x the
# d 128 default's backward time on both causal rows and 0.978-0.994x the
# plain d 256 kernel's in two passes (h200-bwd-lpt-ab-pass1.log, -pass2.log),
# and the d 128 set without it 1.044-1.064x the new default's in two more
# (h200-bwd-lpt-confirm-pass1.log, -pass2.log); full 1.002-1.022x (a grid of
# equal CTAs: the order only moves the heads in flight). d 64: lpt_order on
# the d 64 set 0.992-1.018x, but on FA4's d 64 tile with the rows on the
# tiles' stages and P^T packed early 0.971x and 0.973x the d 64 set's time
# (the same without lpt_order 0.978-0.980x; the confirm passes). Then d 128
# causal in FA4's order on that set (dK's GEMM after dQ's, dk_last, and the
# dS^T hand-over's one barrier, ds_one_barrier): 0.966-0.979x its backward
# time on both causal rows in two passes; full 0.984-1.001x, not faster in
# both (h200-bwd-fa4order-swt-ab-pass1.log, -pass2.log). d 64 causal since:
# its set with LSE and dPsum shuffled from 8 lanes by immediate source lanes
# (stat_shuffle, shuffle_imm; spills 56 -> 12 bytes), 0.986x its backward
# time in both of two passes (h200-bwd-shi-ab-pass1.log, -pass2.log).
BWD_CAUSAL_OPTIONS = {64: ("block_m128", "min_ctas", "dq_reduce_warp", "ds_one_barrier",
                           "stat_shuffle", "stats_with_tiles", "p_packed", "lpt_order",
                           "shuffle_imm"),
                      128: BWD_DEFAULT_OPTIONS[128] + ("lpt_order", "dk_last", "ds_one_barrier"),
                      256: BWD_DEFAULT_OPTIONS[256] + ("lpt_order",)}


def bwd_default_options(head_dim, causal):
    """The options the op's backward runs at ``head_dim`` (its measured
    default): the mask's own set where there is one (``BWD_FULL_OPTIONS``,
    ``BWD_CAUSAL_OPTIONS``), else the head dim's."""
    own = BWD_CAUSAL_OPTIONS if causal else BWD_FULL_OPTIONS
    return own.get(head_dim, BWD_DEFAULT_OPTIONS[head_dim])


def bwd_option_sets(head_dim):
    """The option sets built as candidates at ``head_dim``."""
    return BWD_OPTION_SETS + {64: BWD_D64_OPTION_SETS, 128: BWD_D128_OPTION_SETS,
                              256: BWD_D256_OPTION_SETS}.get(head_dim, ())


BWD_CANDIDATES = dict([bwd_variant(128, c, dq_split=True) for c in (False, True)]
                      + [bwd_variant(d, c, options=opts) for d in BWD_HEAD_DIMS
                         for opts in bwd_option_sets(d) for c in (False, True)]
                      # the wide preprocess on each measured default, its
                      # walk in O's order, and 8 rows a lane in flight
                      + [bwd_variant(d, c, options=bwd_default_options(d, c) + ("prep_wide",))
                         for d in (64, 128) for c in (False, True)]
                      + [bwd_prep_wide_variant(d, order="bsh") for d in (64, 128)]
                      + [bwd_prep_wide_variant(d, slots=8) for d in (64, 128)])
