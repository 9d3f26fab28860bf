"""The attention forward variant of each (head dim, causal): the tuned
configuration of ``pipeline_mlir.kernels.attention_fwd`` that
``pipeline_mlir.attention`` runs (chosen by the sweep of docs/attention.md,
``benchmarks/attention/variants.py``).

d = 64 runs three consumer warpgroups of 64 rows (a 192-row tile) with 160
registers each: its GEMMs are small, so more warpgroups hide the softmax;
it also walks its work units in L2-sized head sections (causal: 467 against
431 TFLOP/s on the H100). d = 128 and 256 run the defaults (two ping-pong
consumer warpgroups with intra-warpgroup overlap).
"""

HEAD_DIMS = (64, 128, 256)
BEST = {64: dict(consumer_warpgroups=3, consumer_registers=160, l2_sections=True),
        128: dict(), 256: dict()}


def variant(head_dim, causal):
    """(name, AttentionConfig overrides) for this head dim and causality."""
    if head_dim not in BEST:
        raise ValueError(f"attention: head_dim must be one of {HEAD_DIMS}, got {head_dim}")
    return (f"d{head_dim}{'c' if causal else ''}",
            dict(head_dim=head_dim, causal=bool(causal), **BEST[head_dim]))


VARIANTS = dict(variant(d, c) for d in HEAD_DIMS for c in (False, True))


# The backward's main kernel (kernels/attention_bwd.py) per head dim: one
# configuration so far, 128 keys per CTA over 64-row query blocks, two
# stages of Q and dO. Head dim 256 has no backward yet (its dK and dV
# accumulators alone would take 256 registers per thread at this tiling).
BWD_HEAD_DIMS = (64, 128)


def bwd_variant(head_dim, causal):
    """(name, AttentionBwdConfig overrides) of the backward for this head
    dim and causality."""
    if head_dim not in BWD_HEAD_DIMS:
        raise ValueError(f"attention backward: head_dim must be one of {BWD_HEAD_DIMS}, "
                         f"got {head_dim}")
    return (f"bwd_d{head_dim}{'c' if causal else ''}",
            dict(head_dim=head_dim, causal=bool(causal)))


def bwd_prep_variant(head_dim):
    """(name, overrides) of the backward's preprocess for this head dim
    (kernels/attention_bwd_prep.py, built by the same family)."""
    if head_dim not in BWD_HEAD_DIMS:
        raise ValueError(f"attention backward: head_dim must be one of {BWD_HEAD_DIMS}, "
                         f"got {head_dim}")
    return f"bwd_prep_d{head_dim}", dict(kernel="prep", head_dim=head_dim)


BWD_VARIANTS = dict([bwd_variant(d, c) for d in BWD_HEAD_DIMS for c in (False, True)]
                    + [bwd_prep_variant(d) for d in BWD_HEAD_DIMS])
